//! The script cache survives a restart (`lua-persist-scripts`, on by
//! default; docs/compatibility.md): the scripts clients loaded with
//! SCRIPT LOAD or EVAL are kept in snapshots, a `lua` AUX field each (as
//! Redis 6 wrote them; Redis 7 skips the field), and in the append-only
//! file as SCRIPT LOAD and SCRIPT FLUSH lines (which Redis replays as the
//! commands they are). So a gateway's EVALSHA does not meet NOSCRIPT after
//! a restart, the commonest rate-limiter incident with Redis 7.

use redis::aio::MultiplexedConnection;
use tally_server::{Config, Server, ServerHandle};
use tally_tests::keyspace::{connect, wait_for_persistence, wait_loaded};
use tally_tests::{scratch_dir, RedisServer};

const LOADED: &str = "return 'loaded'";
const EVALED: &str = "return redis.call('incr', KEYS[1])";

/// A server keeping its files in `dir`, once they are loaded.
async fn start(dir: &str, adjust: impl FnOnce(&mut Config)) -> ServerHandle {
    let mut config = Config {
        port: 0,
        shards: 4,
        dir: dir.to_string(),
        save_points: Vec::new(),
        ..Config::default()
    };
    adjust(&mut config);
    let handle = Server::new(config).start().await.expect("tally starts");
    wait_loaded(handle.local_addr()).await;
    handle
}

fn sha1(text: &str) -> String {
    tally_server::scripting::vm::sha1(text.as_bytes())
}

/// SCRIPT LOAD one script and EVAL another, new one.
async fn load_two(conn: &mut MultiplexedConnection) {
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(LOADED)
        .query_async(conn)
        .await
        .expect("SCRIPT LOAD");
    assert_eq!(sha, sha1(LOADED));
    let count: i64 = redis::cmd("EVAL")
        .arg(EVALED)
        .arg(1)
        .arg("hits")
        .query_async(conn)
        .await
        .expect("EVAL");
    assert_eq!(count, 1);
}

/// SCRIPT EXISTS of both scripts.
async fn exist(conn: &mut MultiplexedConnection) -> Vec<i64> {
    redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(sha1(LOADED))
        .arg(sha1(EVALED))
        .query_async(conn)
        .await
        .expect("SCRIPT EXISTS")
}

async fn save(conn: &mut MultiplexedConnection) {
    let () = redis::cmd("SAVE").query_async(conn).await.expect("SAVE");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_keeps_the_scripts_clients_loaded() {
    let dir = scratch_dir();
    let server = start(&dir, |_| {}).await;
    let mut conn = connect(server.local_addr()).await;
    load_two(&mut conn).await;
    save(&mut conn).await;
    server.shutdown().await;

    let again = start(&dir, |_| {}).await;
    let mut conn = connect(again.local_addr()).await;
    assert_eq!(exist(&mut conn).await, [1, 1]);
    let reply: String = redis::cmd("EVALSHA")
        .arg(sha1(LOADED))
        .arg(0)
        .query_async(&mut conn)
        .await
        .expect("EVALSHA after the restart");
    assert_eq!(reply, "loaded");
    let count: i64 = redis::cmd("EVALSHA")
        .arg(sha1(EVALED))
        .arg(1)
        .arg("hits")
        .query_async(&mut conn)
        .await
        .expect("EVALSHA after the restart");
    assert_eq!(count, 2);
    again.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lua_persist_scripts_no_a_restart_forgets_them_as_redis_7_does() {
    let dir = scratch_dir();
    let off = |c: &mut Config| c.lua_persist_scripts = false;
    let server = start(&dir, off).await;
    let mut conn = connect(server.local_addr()).await;
    load_two(&mut conn).await;
    save(&mut conn).await;
    server.shutdown().await;

    // Read back with the directive on: the file has nothing to give.
    let again = start(&dir, |_| {}).await;
    let mut conn = connect(again.local_addr()).await;
    assert_eq!(exist(&mut conn).await, [0, 0]);
    let refused = redis::cmd("EVALSHA")
        .arg(sha1(LOADED))
        .arg(0)
        .query_async::<String>(&mut conn)
        .await
        .expect_err("NOSCRIPT");
    assert_eq!(refused.code(), Some("NOSCRIPT"));
    again.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_append_only_file_keeps_loads_and_flushes_and_a_rewrite_keeps_the_cache() {
    let dir = scratch_dir();
    let logging = |c: &mut Config| c.appendonly = true;
    let server = start(&dir, logging).await;
    let mut conn = connect(server.local_addr()).await;
    load_two(&mut conn).await;
    server.shutdown().await;

    // Replayed from the log.
    let server = start(&dir, logging).await;
    let mut conn = connect(server.local_addr()).await;
    assert_eq!(exist(&mut conn).await, [1, 1]);
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .expect("SCRIPT FLUSH");
    let _: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(LOADED)
        .query_async(&mut conn)
        .await
        .expect("SCRIPT LOAD");
    server.shutdown().await;

    // The flush was replayed, then the load after it.
    let server = start(&dir, logging).await;
    let mut conn = connect(server.local_addr()).await;
    assert_eq!(exist(&mut conn).await, [1, 0]);
    let started: String = redis::cmd("BGREWRITEAOF")
        .query_async(&mut conn)
        .await
        .expect("BGREWRITEAOF");
    assert_eq!(started, "Background append only file rewriting started");
    wait_for_persistence(&mut conn, "the rewrite never ended", |info| {
        info.contains("aof_rewrite_in_progress:0\r\n") && info.contains("aof_rewrites:1\r\n")
    })
    .await;
    server.shutdown().await;

    // Now from the rewritten base, whose `lua` field holds the script.
    let server = start(&dir, logging).await;
    let mut conn = connect(server.local_addr()).await;
    assert_eq!(exist(&mut conn).await, [1, 0]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_loads_a_snapshot_with_scripts_and_skips_them() {
    let dir = scratch_dir();
    let server = start(&dir, |_| {}).await;
    let mut conn = connect(server.local_addr()).await;
    load_two(&mut conn).await;
    save(&mut conn).await;
    server.shutdown().await;

    let Some(redis) = RedisServer::start_with(&["--dir", &dir, "--dbfilename", "dump.rdb"]) else {
        return;
    };
    let mut conn = connect(redis.addr).await;
    let hits: i64 = redis::cmd("GET")
        .arg("hits")
        .query_async(&mut conn)
        .await
        .expect("GET");
    assert_eq!(hits, 1, "the keys loaded");
    assert_eq!(exist(&mut conn).await, [0, 0], "Redis 7 keeps no script");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_replays_an_append_only_file_with_script_lines() {
    let dir = scratch_dir();
    let server = start(&dir, |c| c.appendonly = true).await;
    let mut conn = connect(server.local_addr()).await;
    load_two(&mut conn).await;
    server.shutdown().await;

    let Some(redis) = RedisServer::start_with(&["--dir", &dir, "--appendonly", "yes"]) else {
        return;
    };
    let mut conn = connect(redis.addr).await;
    let hits: i64 = redis::cmd("GET")
        .arg("hits")
        .query_async(&mut conn)
        .await
        .expect("GET");
    assert_eq!(hits, 1, "the effects replayed");
    assert_eq!(exist(&mut conn).await, [1, 1], "SCRIPT LOAD replayed");
}
