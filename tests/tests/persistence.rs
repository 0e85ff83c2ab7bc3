//! Redis's RDB format both ways: DUMP payloads byte for byte, RESTORE of
//! each server's payloads into the other, SAVE files that redis-check-rdb
//! accepts and redis-server loads, Redis's files loaded by tally at start,
//! and damaged files refused.

use std::net::SocketAddr;
use std::path::Path;

use redis::AsyncCommands;
use tally_server::config::ProtectedAction;
use tally_server::{Config, Server};
use tally_tests::keyspace::{
    all_contents, connect, contents, fill, persistence_info, set_numbered, wait_for_persistence,
    wait_loaded,
};
use tally_tests::{assert_no_mismatch, compare_streams, RedisServer, TestServer};

/// Keys whose DUMP must be byte-identical: those whose encoding keeps an
/// order both servers share (not hashtable sets and hashes).
const SAME_BYTES: &[&str] = &[
    "str", "int", "neg", "wide", "vol", "list", "ints", "hash", "zset", "long", "widehash",
    "biglist", "bigzset",
];

const ALL_KEYS: &[&str] = &[
    "str", "int", "neg", "wide", "vol", "list", "ints", "hash", "zset", "long", "widehash",
    "biglist", "bigset", "bighash", "bigzset", "words",
];

/// Points `dir` at a directory that is then removed: saves cannot write.
async fn point_dir_at_a_vanished_directory(
    conn: &mut redis::aio::MultiplexedConnection,
    dir: &str,
) {
    let doomed = format!("{dir}/doomed");
    std::fs::create_dir(&doomed).expect("mkdir");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("dir")
        .arg(&doomed)
        .query_async(conn)
        .await
        .expect("CONFIG SET");
    std::fs::remove_dir(&doomed).expect("rmdir");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dump_payloads_are_redis_s_bytes() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    fill(redis.addr).await;
    fill(tally.addr()).await;
    let commands: Vec<Vec<Vec<u8>>> = SAME_BYTES
        .iter()
        .map(|key| vec![b"DUMP".to_vec(), key.as_bytes().to_vec()])
        .chain([vec![b"DUMP".to_vec(), b"nokey".to_vec()]])
        .collect();
    assert_no_mismatch(&compare_streams(redis.addr, tally.addr(), &commands).await);
}

/// DUMP on one server, RESTORE on the other: the same contents, both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_restore_across_both_servers() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    fill(redis.addr).await;
    fill(tally.addr()).await;
    for (from, to) in [(redis.addr, tally.addr()), (tally.addr(), redis.addr)] {
        let mut source = connect(from).await;
        let mut target = connect(to).await;
        for key in ALL_KEYS {
            let payload: Vec<u8> = redis::cmd("DUMP")
                .arg(key)
                .query_async(&mut source)
                .await
                .expect("DUMP");
            let ttl: i64 = source.pttl(key).await.expect("PTTL");
            let copy = format!("copy:{key}");
            let _: () = redis::cmd("RESTORE")
                .arg(&copy)
                .arg(ttl.max(0))
                .arg(payload)
                .query_async(&mut target)
                .await
                .expect("RESTORE");
            let original = contents(&mut source, key).await;
            let restored = contents(&mut target, &copy).await.replacen("copy:", "", 1);
            assert_eq!(restored, original, "{from} -> {to}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_refuses_what_redis_refuses() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let mut conn = connect(redis.addr).await;
    let _: () = conn.set("k", "v").await.expect("SET");
    let good: Vec<u8> = redis::cmd("DUMP")
        .arg("k")
        .query_async(&mut conn)
        .await
        .expect("DUMP");
    let mut bad_crc = good.clone();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0xff;
    let mut future_version = good.clone();
    let at = future_version.len() - 10;
    future_version[at] = 12;
    let b = |s: &str| s.as_bytes().to_vec();
    let commands: Vec<Vec<Vec<u8>>> = vec![
        vec![b("SET"), b("taken"), b("1")],
        vec![b("RESTORE"), b("taken"), b("0"), good.clone()],
        vec![b("RESTORE"), b("taken"), b("0"), good.clone(), b("REPLACE")],
        vec![b("GET"), b("taken")],
        vec![b("RESTORE"), b("a"), b("-1"), good.clone()],
        vec![b("RESTORE"), b("a"), b("x"), good.clone()],
        vec![b("RESTORE"), b("a"), b("0"), bad_crc],
        vec![b("RESTORE"), b("a"), b("0"), future_version],
        vec![b("RESTORE"), b("a"), b("0"), b("short")],
        vec![b("RESTORE"), b("a"), b("0"), good.clone(), b("BOGUS")],
        vec![
            b("RESTORE"),
            b("a"),
            b("0"),
            good.clone(),
            b("IDLETIME"),
            b("-1"),
        ],
        vec![
            b("RESTORE"),
            b("a"),
            b("0"),
            good.clone(),
            b("FREQ"),
            b("256"),
        ],
        vec![
            b("RESTORE"),
            b("a"),
            b("0"),
            good.clone(),
            b("IDLETIME"),
            b("5"),
            b("FREQ"),
            b("5"),
        ],
        vec![
            b("RESTORE"),
            b("a"),
            b("0"),
            good.clone(),
            b("IDLETIME"),
            b("10"),
        ],
        vec![b("GET"), b("a")],
        // An absolute TTL in the past: OK, and nothing stored.
        vec![
            b("RESTORE"),
            b("gone"),
            b("1000"),
            good.clone(),
            b("ABSTTL"),
        ],
        vec![b("EXISTS"), b("gone")],
        vec![b("RESTORE"), b("later"), b("100000"), good.clone()],
        vec![b("TTL"), b("later")],
        vec![b("SET"), b("s"), b("x")],
        vec![b("DUMP")],
        vec![b("RESTORE"), b("k2"), b("0")],
    ];
    assert_no_mismatch(&compare_streams(redis.addr, tally.addr(), &commands).await);
}

async fn save(addr: SocketAddr) {
    let mut conn = connect(addr).await;
    let _: () = redis::cmd("SAVE")
        .query_async(&mut conn)
        .await
        .expect("SAVE");
}

fn check_rdb(path: &Path) {
    let output = std::process::Command::new("redis-check-rdb")
        .arg(path)
        .output()
        .expect("redis-check-rdb runs");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("RDB looks OK"), "{text}");
}

/// tally's SAVE: redis-check-rdb accepts it and redis-server loads the same
/// contents, in every database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tally_s_snapshot_loads_in_redis() {
    let tally = TestServer::start_real_clock().await;
    fill(tally.addr()).await;
    let mut conn = connect(tally.addr()).await;
    let _: () = redis::cmd("SELECT")
        .arg(3)
        .query_async(&mut conn)
        .await
        .expect("SELECT");
    let _: () = conn.set("in-db-3", "yes").await.expect("SET");
    save(tally.addr()).await;
    let dir = tally.handle.shared().config.read().dir.clone();
    let file = Path::new(&dir).join("dump.rdb");
    if std::process::Command::new("redis-check-rdb")
        .arg("--version")
        .output()
        .is_err()
    {
        tally_tests::tool_missing("redis-check-rdb");
        return;
    }
    check_rdb(&file);
    let Some(redis) = RedisServer::start_with(&["--dir", &dir, "--dbfilename", "dump.rdb"]) else {
        return;
    };
    for db in [0, 3] {
        assert_eq!(
            all_contents(redis.addr, db).await,
            all_contents(tally.addr(), db).await,
            "db {db}"
        );
    }
}

/// redis-server's SAVE, loaded by tally at start: the same contents; keys
/// that expired in the file are dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_s_snapshot_loads_in_tally() {
    let dir = tally_tests::scratch_dir();
    let Some(redis) = RedisServer::start_with(&["--dir", &dir, "--dbfilename", "dump.rdb"]) else {
        return;
    };
    fill(redis.addr).await;
    let mut conn = connect(redis.addr).await;
    let _: () = redis::cmd("SET")
        .arg("soon")
        .arg("x")
        .arg("PX")
        .arg(50)
        .query_async(&mut conn)
        .await
        .expect("SET");
    let _: () = redis::cmd("SELECT")
        .arg(2)
        .query_async(&mut conn)
        .await
        .expect("SELECT");
    let _: () = conn.set("in-db-2", "yes").await.expect("SET");
    save(redis.addr).await;
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let tally = Server::new(Config {
        port: 0,
        dir: dir.clone(),
        ..Config::default()
    })
    .start()
    .await
    .expect("tally starts with Redis's file");
    wait_loaded(tally.local_addr()).await;
    let _: () = redis::cmd("DEL")
        .arg("soon")
        .query_async(&mut connect(redis.addr).await)
        .await
        .expect("DEL");
    for db in [0, 2] {
        assert_eq!(
            all_contents(tally.local_addr(), db).await,
            all_contents(redis.addr, db).await,
            "db {db}"
        );
    }
    let info = persistence_info(&mut connect(tally.local_addr()).await).await;
    assert!(info.contains("rdb_last_load_keys_expired:1\r\n"), "{info}");
    assert!(info.contains("rdb_last_load_keys_loaded:17\r\n"), "{info}");
    tally.shutdown().await;
}

/// A file whose checksum does not match, or that ends early, stops the
/// start with a clear error; nothing is half-loaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_snapshot_is_refused_at_start() {
    let tally = TestServer::start_real_clock().await;
    fill(tally.addr()).await;
    save(tally.addr()).await;
    let dir = tally.handle.shared().config.read().dir.clone();
    let file = Path::new(&dir).join("dump.rdb");
    let good = std::fs::read(&file).expect("the snapshot");
    for (damage, expected) in [
        (
            {
                let mut bytes = good.clone();
                bytes[good.len() / 2] ^= 0x55;
                bytes
            },
            "",
        ),
        (good[..good.len() - 20].to_vec(), ""),
        (b"NOTREDIS".to_vec(), "Wrong signature"),
    ] {
        std::fs::write(&file, &damage).expect("write");
        let error = match Server::new(Config {
            port: 0,
            dir: dir.clone(),
            ..Config::default()
        })
        .start()
        .await
        {
            Ok(_) => panic!("a damaged file was loaded"),
            Err(error) => error.to_string(),
        };
        assert!(
            error.contains("dump.rdb") && error.contains(expected),
            "{error}"
        );
    }
}

/// SAVE writes a temporary file and renames it: a save that cannot write
/// leaves the previous file as it was, answers -ERR and says so in INFO.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_save_keeps_the_previous_file() {
    let tally = TestServer::start_with(|config| {
        // The test moves `dir` with CONFIG SET, which Redis protects.
        config.enable_protected_configs = tally_server::config::ProtectedAction::Yes;
    })
    .await;
    let mut conn = connect(tally.addr()).await;
    let _: () = conn.set("a", "1").await.expect("SET");
    save(tally.addr()).await;
    let dir = tally.handle.shared().config.read().dir.clone();
    let file = Path::new(&dir).join("dump.rdb");
    let before = std::fs::read(&file).expect("the snapshot");
    let lastsave: i64 = redis::cmd("LASTSAVE")
        .query_async(&mut conn)
        .await
        .expect("LASTSAVE");
    let _: () = conn.set("b", "2").await.expect("SET");
    point_dir_at_a_vanished_directory(&mut conn, &dir).await;
    let reply: redis::RedisResult<()> = redis::cmd("SAVE").query_async(&mut conn).await;
    assert!(reply.is_err());
    assert_eq!(std::fs::read(&file).expect("the snapshot"), before);
    let info = persistence_info(&mut conn).await;
    // A failed SAVE is logged; the status is a background save's, as on Redis.
    assert!(info.contains("rdb_last_bgsave_status:ok\r\n"), "{info}");
    assert!(info.contains("rdb_changes_since_last_save:1\r\n"), "{info}");
    let after: i64 = redis::cmd("LASTSAVE")
        .query_async(&mut conn)
        .await
        .expect("LASTSAVE");
    assert_eq!(after, lastsave);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(leftovers, vec![std::ffi::OsString::from("dump.rdb")]);
}

/// The snapshot file's string keys and values, database 0.
fn snapshot_strings(dir: &str) -> std::collections::HashMap<Vec<u8>, Vec<u8>> {
    let data = std::fs::read(Path::new(dir).join("dump.rdb")).expect("the snapshot");
    let mut reader = tally_rdb::Reader::new(&data).expect("an RDB file");
    let mut out = std::collections::HashMap::new();
    while let Some(item) = reader.next_item().expect("a whole file") {
        if let tally_rdb::Item::Entry(tally_rdb::Entry {
            db: 0,
            key,
            value: tally_rdb::Value::String(value),
            ..
        }) = item
        {
            out.insert(key, value);
        }
    }
    out
}

async fn wait_for_bgsave(conn: &mut redis::aio::MultiplexedConnection) {
    let info = wait_for_persistence(conn, "BGSAVE never ended", |info| {
        info.contains("rdb_bgsave_in_progress:0")
    })
    .await;
    assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
}

/// BGSAVE while 20 clients move amounts between accounts in MULTI/EXEC
/// (the total never changes) and others write elsewhere: every snapshot
/// holds the same total, as a snapshot of one moment must; a torn one
/// (some accounts before a transfer, some after) would not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_save_is_one_moment_while_clients_write() {
    const ACCOUNTS: usize = 64;
    const BALANCE: i64 = 1000;
    let tally = TestServer::start_real_clock().await;
    let mut conn = connect(tally.addr()).await;
    set_numbered(&mut conn, "noise:", 100_000).await;
    for i in 0..ACCOUNTS {
        let _: () = conn.set(format!("acct:{i}"), BALANCE).await.expect("SET");
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for worker in 0..20u64 {
        let stop = stop.clone();
        let addr = tally.addr();
        workers.push(tokio::spawn(async move {
            let mut conn = connect(addr).await;
            let mut n = worker;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n = n
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let (from, to) = ((n >> 33) as usize % ACCOUNTS, (n >> 17) as usize % ACCOUNTS);
                if worker % 4 == 0 {
                    let _: i64 = conn
                        .incr(format!("noise:{}", n % 100_000), 1)
                        .await
                        .expect("INCR");
                    continue;
                }
                let _: () = redis::pipe()
                    .atomic()
                    .decr(format!("acct:{from}"), 7)
                    .ignore()
                    .incr(format!("acct:{to}"), 7)
                    .ignore()
                    .query_async(&mut conn)
                    .await
                    .expect("MULTI/EXEC");
            }
        }));
    }
    let dir = tally.handle.shared().config.read().dir.clone();
    for _ in 0..5 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let reply: String = redis::cmd("BGSAVE")
            .query_async(&mut conn)
            .await
            .expect("BGSAVE");
        assert_eq!(reply, "Background saving started");
        wait_for_bgsave(&mut conn).await;
        let snapshot = snapshot_strings(&dir);
        let total: i64 = (0..ACCOUNTS)
            .map(|i| {
                let value = &snapshot[format!("acct:{i}").as_bytes()];
                std::str::from_utf8(value)
                    .expect("text")
                    .parse::<i64>()
                    .expect("number")
            })
            .sum();
        assert_eq!(total, ACCOUNTS as i64 * BALANCE);
        assert!(
            snapshot.len() >= 100_000 + ACCOUNTS,
            "{} keys",
            snapshot.len()
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for worker in workers {
        worker.await.expect("worker");
    }
}

/// Writes, new keys (enough to resize the tables), deletes and a flush
/// right after BGSAVE answers change nothing in the file: it holds the keys
/// as they were when BGSAVE was accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_after_bgsave_starts_are_not_in_the_snapshot() {
    let tally = TestServer::start_real_clock().await;
    let mut conn = connect(tally.addr()).await;
    set_numbered(&mut conn, "noise:", 50_000).await;
    let reply: String = redis::cmd("BGSAVE")
        .query_async(&mut conn)
        .await
        .expect("BGSAVE");
    assert_eq!(reply, "Background saving started");
    // Enough new keys to make the tables grow while the save runs.
    for batch in 0..60 {
        let mut mset = redis::cmd("MSET");
        for i in batch * 1000..(batch + 1) * 1000 {
            mset.arg(format!("late:{i}")).arg(i);
        }
        let _: () = mset.query_async(&mut conn).await.expect("MSET");
    }
    let _: () = conn.set("noise:1", "changed").await.expect("SET");
    let _: () = conn.del("noise:2").await.expect("DEL");
    let _: () = conn.set("created-after", "x").await.expect("SET");
    let _: () = redis::cmd("FLUSHALL")
        .query_async(&mut conn)
        .await
        .expect("FLUSHALL");
    let _: () = conn.set("after-flush", "x").await.expect("SET");
    wait_for_bgsave(&mut conn).await;
    let dir = tally.handle.shared().config.read().dir.clone();
    let snapshot = snapshot_strings(&dir);
    assert_eq!(snapshot.len(), 50_000);
    assert_eq!(snapshot[&b"noise:1"[..]], b"1");
    assert_eq!(snapshot[&b"noise:2"[..]], b"2");
    assert!(!snapshot.contains_key(&b"created-after"[..]));
    assert!(!snapshot.contains_key(&b"after-flush"[..]));
    assert!(!snapshot.keys().any(|k| k.starts_with(b"late:")));
    let info = persistence_info(&mut conn).await;
    assert!(info.contains("current_cow_size:0\r\n"), "{info}");
}

/// A failed BGSAVE with save points set: writes and PING get MISCONF (reads
/// do not) until `stop-writes-on-bgsave-error no` or a save that succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_refused_after_a_failed_background_save() {
    let tally = TestServer::start_with(|config| {
        config.save_points = vec![(3600, 1)];
        // The test moves `dir` with CONFIG SET, which Redis protects.
        config.enable_protected_configs = tally_server::config::ProtectedAction::Yes;
    })
    .await;
    let mut conn = connect(tally.addr()).await;
    let dir = tally.handle.shared().config.read().dir.clone();
    let _: () = conn.set("a", "1").await.expect("SET");
    point_dir_at_a_vanished_directory(&mut conn, &dir).await;
    let _: String = redis::cmd("BGSAVE")
        .query_async(&mut conn)
        .await
        .expect("BGSAVE");
    wait_for_persistence(&mut conn, "the BGSAVE never failed", |info| {
        info.contains("rdb_bgsave_in_progress:0") && info.contains("rdb_last_bgsave_status:err")
    })
    .await;
    let mut raw = tally.raw().await;
    let misconf = format!("-{}\r\n", "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.");
    assert_eq!(raw.line("SET a 2").await, misconf);
    assert_eq!(raw.line("PING").await, misconf);
    assert_eq!(raw.line("GET a").await, "$1\r\n1\r\n");
    assert_eq!(
        raw.line("CONFIG SET stop-writes-on-bgsave-error no").await,
        "+OK\r\n"
    );
    assert_eq!(raw.line("SET a 2").await, "+OK\r\n");
    assert_eq!(
        raw.line("CONFIG SET stop-writes-on-bgsave-error yes").await,
        "+OK\r\n"
    );
    assert_eq!(raw.line("INCR a").await, misconf);
    // A save that succeeds lifts it.
    raw.line(&format!("CONFIG SET dir {dir}")).await;
    assert_eq!(raw.line("SAVE").await, "+OK\r\n");
    assert_eq!(raw.line("INCR a").await, ":3\r\n");
}

/// `save 10 1`: no save without a write; after a write, a background save
/// once more than 10 s passed since the last save, not before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_points_start_background_saves() {
    let tally = TestServer::start_with(|config| config.save_points = vec![(10, 1)]).await;
    let dir = tally.handle.shared().config.read().dir.clone();
    let file = Path::new(&dir).join("dump.rdb");
    let mut raw = tally.raw().await;
    // No write yet: nothing to save, however long.
    tally.clock.advance_ms(20_000);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!file.exists());
    assert_eq!(raw.line("SAVE").await, "+OK\r\n");
    std::fs::remove_file(&file).expect("rm");
    // A write 5 s after the last save: not due until 10 s have passed.
    tally.clock.advance_ms(5_000);
    assert_eq!(raw.line("SET a 1").await, "+OK\r\n");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!file.exists(), "saved before the save point was due");
    tally.clock.advance_ms(6_000);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !file.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the save point never saved"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        raw.line("CONFIG GET save").await,
        "*2\r\n$4\r\nsave\r\n$4\r\n10 1\r\n"
    );
}

/// While the snapshot loads, commands not flagged `loading` get Redis's
/// -LOADING (PING included); INFO, CONFIG and the like answer, and INFO
/// shows the loading fields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_wait_with_loading_while_the_snapshot_loads() {
    let tally = TestServer::start().await;
    let state = &tally.handle.shared().persistence;
    state
        .loading_total_bytes
        .store(1000, std::sync::atomic::Ordering::SeqCst);
    state
        .loading_loaded_bytes
        .store(250, std::sync::atomic::Ordering::SeqCst);
    state
        .loading
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let mut raw = tally.raw().await;
    let loading = "-LOADING Redis is loading the dataset in memory\r\n";
    assert_eq!(raw.line("PING").await, loading);
    assert_eq!(raw.line("GET a").await, loading);
    assert_eq!(raw.line("SET a 1").await, loading);
    let info = raw.line("INFO persistence").await;
    assert!(info.contains("\r\nloading:1\r\n"), "{info}");
    assert!(info.contains("\r\nloading_total_bytes:1000\r\nloading_rdb_used_mem:0\r\nloading_loaded_bytes:250\r\nloading_loaded_perc:25.00\r\n"), "{info}");
    assert!(raw.line("CONFIG GET dir").await.starts_with("*2"));
    state
        .loading
        .store(false, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(raw.line("PING").await, "+PONG\r\n");
    assert!(!raw
        .line("INFO persistence")
        .await
        .contains("loading_total_bytes"));
}

/// A Redis file holding a stream (with a consumer group, a pending entry
/// and a deleted entry) loads whole, and the file tally saves from it gives
/// redis-server the very same stream: its DUMP payload, delivery times and
/// all, is byte for byte the first server's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_in_redis_s_file_loads_and_goes_back_to_redis_unchanged() {
    let dir = tally_tests::scratch_dir();
    let redis_args = [
        "--dir",
        &dir,
        "--dbfilename",
        "dump.rdb",
        "--enable-debug-command",
        "yes",
    ];
    let Some(redis) = RedisServer::start_with(&redis_args) else {
        return;
    };
    let mut conn = connect(redis.addr).await;
    let _: () = conn.set("before", "1").await.expect("SET");
    for id in ["1-1", "1-2", "5-0"] {
        let _: String = redis::cmd("XADD")
            .arg("events")
            .arg(id)
            .arg("f")
            .arg(id)
            .query_async(&mut conn)
            .await
            .expect("XADD");
    }
    let commands: [&[&str]; 3] = [
        &["XGROUP", "CREATE", "events", "g", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "2",
            "STREAMS",
            "events",
            ">",
        ],
        &["XDEL", "events", "1-2"],
    ];
    for command in commands {
        let _: redis::Value = redis::cmd(command[0])
            .arg(&command[1..])
            .query_async(&mut conn)
            .await
            .expect(command[0]);
    }
    let dump = |addr| async move {
        let mut conn = connect(addr).await;
        let payload: Vec<u8> = redis::cmd("DUMP")
            .arg("events")
            .query_async(&mut conn)
            .await
            .expect("DUMP");
        let digest: String = redis::cmd("DEBUG")
            .arg("DIGEST-VALUE")
            .arg("events")
            .query_async(&mut conn)
            .await
            .map(|d: Vec<String>| d.concat())
            .expect("DEBUG DIGEST-VALUE");
        (payload, digest)
    };
    let (redis_payload, redis_digest) = dump(redis.addr).await;
    save(redis.addr).await;
    drop(redis);

    let tally = Server::new(Config {
        port: 0,
        dir: dir.clone(),
        enable_debug_command: ProtectedAction::Yes,
        ..Config::default()
    })
    .start()
    .await
    .expect("starts");
    wait_loaded(tally.local_addr()).await;
    assert_eq!(
        dump(tally.local_addr()).await,
        (redis_payload.clone(), redis_digest)
    );
    let mut conn = connect(tally.local_addr()).await;
    let kind: String = redis::cmd("TYPE")
        .arg("events")
        .query_async(&mut conn)
        .await
        .expect("TYPE");
    assert_eq!(kind, "stream");
    let _: () = conn.set("after", "2").await.expect("SET");
    save(tally.local_addr()).await;
    tally.shutdown().await;

    let Some(again) = RedisServer::start_with(&redis_args) else {
        return;
    };
    assert_eq!(dump(again.addr).await.0, redis_payload);
    let mut conn = connect(again.addr).await;
    let after: String = conn.get("after").await.expect("GET");
    assert_eq!(after, "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replconf_answers_as_redis() {
    tally_tests::assert_script_matches_redis(
        "
        REPLCONF capa eof
        REPLCONF capa eof capa psync2 rdb-only 1
        REPLCONF rdb-only 2
        REPLCONF rdb-only x
        REPLCONF listening-port x
        REPLCONF listening-port 6380
        REPLCONF capa
        REPLCONF bogus 1
        REPLCONF
        PING
        ",
    )
    .await;
}

/// `redis-cli --rdb` (REPLCONF, then SYNC) fetches a snapshot of the
/// keyspace that redis-check-rdb accepts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cli_fetches_a_snapshot_with_rdb() {
    let tally = TestServer::start_real_clock().await;
    fill(tally.addr()).await;
    let dir = tally_tests::scratch_dir();
    let file = Path::new(&dir).join("fetched.rdb");
    let output = match std::process::Command::new("redis-cli")
        .args(["-p", &tally.addr().port().to_string(), "--rdb"])
        .arg(&file)
        .output()
    {
        Ok(output) => output,
        Err(_) => {
            tally_tests::tool_missing("redis-cli");
            return;
        }
    };
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && log.contains("Transfer finished with success"),
        "{log}"
    );
    check_rdb(&file);
    let data = std::fs::read(&file).expect("the fetched file");
    let mut reader = tally_rdb::Reader::new(&data).expect("an RDB file");
    let mut keys = 0;
    while let Some(item) = reader.next_item().expect("whole") {
        keys += matches!(item, tally_rdb::Item::Entry(_)) as usize;
    }
    assert_eq!(keys, ALL_KEYS.len());
}

/// The scheduling policy of this process's thread named `name`, from
/// /proc (field 41 of its stat line), if such a thread runs.
#[cfg(target_os = "linux")]
fn thread_policy(name: &str) -> Option<u32> {
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
        // The name in parentheses may hold spaces; fields count after it.
        let after_name = &stat[stat.rfind(')')? + 2..];
        return after_name.split(' ').nth(41 - 3)?.parse().ok();
    }
    None
}

/// Under Redis's `rdb-key-save-delay` a BGSAVE waits per key, so it is
/// still running while clients are served; its writer runs under
/// SCHED_IDLE, taking only the CPU the workers leave; and the file it ends
/// with holds every key.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_save_waits_per_key_and_takes_only_idle_cpu() {
    const SCHED_IDLE: u32 = 5;
    let tally = TestServer::start_real_clock().await;
    let mut conn = connect(tally.addr()).await;
    set_numbered(&mut conn, "noise:", 2_000).await;
    // 2,000 keys at 1 ms each: the save cannot end within two seconds.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rdb-key-save-delay")
        .arg("1000")
        .query_async(&mut conn)
        .await
        .expect("CONFIG SET");
    let shown: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("rdb-key-save-delay")
        .query_async(&mut conn)
        .await
        .expect("CONFIG GET");
    assert_eq!(shown, ["rdb-key-save-delay", "1000"]);
    let reply: String = redis::cmd("BGSAVE")
        .query_async(&mut conn)
        .await
        .expect("BGSAVE");
    assert_eq!(reply, "Background saving started");
    let n: i64 = conn.incr("noise:1", 1).await.expect("INCR during the save");
    assert_eq!(n, 2);
    let info = persistence_info(&mut conn).await;
    assert!(info.contains("rdb_bgsave_in_progress:1\r\n"), "{info}");
    // The writer sets its policy as it starts, which may be a moment after
    // BGSAVE answers; the save lasts at least two seconds.
    let mut policy = None;
    for _ in 0..100 {
        policy = thread_policy("tally-bgsave");
        if policy == Some(SCHED_IDLE) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(policy, Some(SCHED_IDLE));
    wait_for_bgsave(&mut conn).await;
    let dir = tally.handle.shared().config.read().dir.clone();
    let snapshot = snapshot_strings(&dir);
    assert_eq!(snapshot.len(), 2_000);
    assert_eq!(snapshot[&b"noise:1"[..]], b"1", "the value of the moment");
}
