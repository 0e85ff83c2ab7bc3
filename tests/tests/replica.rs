//! tally as a replica, on Redis 7.0's protocol: REPLICAOF a redis-server
//! (Debian's) or another tally; the handshake, the snapshot (diskless, as
//! Redis 7.0 sends it by default, and sized), the stream applied with the
//! offsets the master counts, PSYNC `+CONTINUE` after a lost link, a
//! promotion (REPLICAOF NO ONE) that the master's other replicas continue
//! from, and what a replica refuses, reply for reply as a redis-server
//! replica of the same master.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use tally_tests::keyspace::{connect, fill, set_numbered, wait_loaded};
use tally_tests::replication::{
    assert_same_data, assert_same_deadlines, replication_field, run_lines, stats_field,
    wait_for_field, wait_for_info_field, wait_in_sync,
};
use tally_tests::{assert_no_mismatch, compare_streams, script, RedisServer, TestServer};

/// A redis-server master that sends its snapshot at once (Redis 7.0
/// waits 5 s for more replicas before a diskless transfer).
fn redis_master() -> Option<RedisServer> {
    RedisServer::start_with(&[
        "--repl-diskless-sync-delay",
        "0",
        "--enable-debug-command",
        "yes",
    ])
}

/// Makes the server at `replica` follow `master`.
async fn replicate(replica: SocketAddr, master: SocketAddr) {
    let mut conn = connect(replica).await;
    let reply: String = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port())
        .query_async(&mut conn)
        .await
        .expect("REPLICAOF");
    assert_eq!(reply, "OK");
}

/// Writes of every kind, as the stream carries them.
const STREAM_WRITES: &[&str] = &[
    "INCR counter",
    "INCRBYFLOAT float 1.5",
    "MULTI",
    "HSET hash f9 v9",
    "ZINCRBY zset 2 a",
    "SADD ints 42",
    "EXEC",
    "SET vol v EX 1000",
    "PEXPIRE counter 900000",
    "SET short v PX 100",
    "SELECT 5",
    "SET gone 1",
    "FLUSHDB",
    "SET kept 1",
    "SELECT 6",
    "SET six 6",
    "SWAPDB 6 7",
    "SPOP ints",
    "RPOP list",
    "SELECT 0",
];

/// Sends [`STREAM_WRITES`] and a script to `master`, lets the short key
/// expire there, and waits until `replica` has it all.
async fn write_everything(master: SocketAddr, replica: SocketAddr) {
    run_lines(master, STREAM_WRITES).await;
    let mut conn = connect(master).await;
    let _: i64 = redis::cmd("EVAL")
        .arg("redis.call('incr', KEYS[1]); return redis.call('pexpire', KEYS[1], 600000)")
        .arg(1)
        .arg("lua-counter")
        .query_async(&mut conn)
        .await
        .expect("EVAL");
    // The short key expires on the master, which sends the replica a DEL.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let gone: Option<String> = conn.get("short").await.expect("GET");
    assert_eq!(gone, None);
    wait_in_sync(master, replica).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tally_follows_a_redis_master_through_every_kind_of_write() {
    let Some(redis) = redis_master() else {
        return;
    };
    let master = redis.addr;
    // In the snapshot.
    fill(master).await;
    run_lines(master, &["SELECT 3", "SET in-three 1 EX 1000"]).await;
    let tally = TestServer::start_real_clock().await;
    replicate(tally.addr(), master).await;
    wait_in_sync(master, tally.addr()).await;
    assert_same_data(master, tally.addr()).await;
    // In the stream; the offsets agree byte for byte (wait_in_sync
    // compares master_repl_offset on both).
    write_everything(master, tally.addr()).await;
    assert_same_data(master, tally.addr()).await;
    assert_same_deadlines(master, tally.addr()).await;
    // Both ids are the master's history.
    assert_eq!(
        replication_field(tally.addr(), "master_replid").await,
        replication_field(master, "master_replid").await
    );
    // ROLE and the master client as Redis shows them.
    let mut conn = connect(tally.addr()).await;
    let role: (String, String, u16, String, i64) = redis::cmd("ROLE")
        .query_async(&mut conn)
        .await
        .expect("ROLE");
    let offset: i64 = replication_field(master, "master_repl_offset")
        .await
        .expect("offset")
        .parse()
        .expect("a number");
    assert_eq!(
        role,
        (
            "slave".to_string(),
            "127.0.0.1".to_string(),
            master.port(),
            "connected".to_string(),
            offset
        )
    );
    let listed: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("master")
        .query_async(&mut conn)
        .await
        .expect("CLIENT LIST");
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(listed.contains(" flags=M "), "{listed}");
    // The master lists the replica, acknowledged up to its offset.
    wait_for_field(
        master,
        "slave0",
        &format!(
            "ip=127.0.0.1,port={},state=online,offset={offset},lag=0",
            tally.addr().port()
        ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_refuses_and_answers_as_a_redis_replica_does() {
    let Some(redis) = redis_master() else {
        return;
    };
    let master = redis.addr;
    run_lines(master, &["SET k v", "SET n 5"]).await;
    let port = master.port().to_string();
    let Some(redis_replica) = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]) else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    replicate(tally.addr(), master).await;
    wait_in_sync(master, redis_replica.addr).await;
    wait_in_sync(master, tally.addr()).await;
    let commands = script(&format!(
        r#"
        GET k
        SET k w
        INCR n
        DEL k
        MULTI
        SET k w
        EXEC
        EVAL "return redis.call('get', KEYS[1])" 1 k
        EVAL "return redis.call('set', KEYS[1], 'x')" 1 k
        EVAL "return redis.pcall('incr', KEYS[1])" 1 n
        EVAL_RO "return redis.call('get', KEYS[1])" 1 k
        WAIT 0 0
        REPLICAOF 127.0.0.1 {port}
        SLAVEOF 127.0.0.1 {port}
        REPLICAOF 127.0.0.1 notaport
        REPLICAOF 127.0.0.1 65536
        REPLICAOF one
        CONFIG GET replicaof
        CONFIG GET replica-read-only
        GET k
        "#
    ));
    assert_no_mismatch(&compare_streams(redis_replica.addr, tally.addr(), &commands).await);
    // With a shebang, refused before it runs (the words of EVAL's script
    // hold a newline, which `script` cannot write).
    let shebang = vec![
        b"EVAL".to_vec(),
        b"#!lua\nreturn redis.call('set', KEYS[1], 'x')".to_vec(),
        b"1".to_vec(),
        b"k".to_vec(),
    ];
    let read_only = vec![
        b"EVAL".to_vec(),
        b"#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])".to_vec(),
        b"1".to_vec(),
        b"k".to_vec(),
    ];
    assert_no_mismatch(
        &compare_streams(redis_replica.addr, tally.addr(), &[shebang, read_only]).await,
    );
    // A writable replica takes writes and keeps them to itself.
    let writable = script("CONFIG SET replica-read-only no\nSET local 1\nGET local");
    assert_no_mismatch(&compare_streams(redis_replica.addr, tally.addr(), &writable).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_native_limiter_scripts_fail_on_a_replica_as_their_lua_run_does() {
    let Some(redis) = redis_master() else {
        return;
    };
    let port = redis.addr.port().to_string();
    let Some(redis_replica) = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]) else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    replicate(tally.addr(), redis.addr).await;
    wait_in_sync(redis.addr, redis_replica.addr).await;
    wait_in_sync(redis.addr, tally.addr()).await;
    let sliding_window = tally_lua::SCRIPTS
        .iter()
        .find(|s| s.name == "sliding_window")
        .expect("the sliding-window script");
    let eval = vec![
        b"EVAL".to_vec(),
        sliding_window.source.as_bytes().to_vec(),
        b"2".to_vec(),
        b"rl:u:1720000000".to_vec(),
        b"rl:u:1719999940".to_vec(),
        b"10".to_vec(),
        b"60".to_vec(),
        b"1720000000".to_vec(),
        b"1".to_vec(),
    ];
    assert_no_mismatch(&compare_streams(redis_replica.addr, tally.addr(), &[eval]).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tally_replica_of_tally_continues_after_its_link_is_cut() {
    let primary = TestServer::start_real_clock().await;
    let master = primary.addr();
    fill(master).await;
    let replica = TestServer::start_real_clock().await;
    replicate(replica.addr(), master).await;
    wait_in_sync(master, replica.addr()).await;
    assert_same_data(master, replica.addr()).await;
    assert_eq!(stats_field(master, "sync_full").await, "1");
    // The replica's master client is killed (as Redis's tests cut a
    // link); writes land meanwhile; it reconnects within a second and
    // continues from the backlog.
    let mut on_replica = connect(replica.addr()).await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("master")
        .query_async(&mut on_replica)
        .await
        .expect("CLIENT KILL");
    assert_eq!(killed, 1);
    run_lines(master, &["INCR after-cut", "SELECT 4", "SET in-four 4"]).await;
    write_everything(master, replica.addr()).await;
    assert_eq!(stats_field(master, "sync_partial_ok").await, "1");
    assert_eq!(stats_field(master, "sync_full").await, "1");
    assert_same_data(master, replica.addr()).await;
    assert_same_deadlines(master, replica.addr()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_replica_serves_the_other_replicas_without_a_full_sync() {
    let Some(redis) = redis_master() else {
        return;
    };
    let master = redis.addr;
    fill(master).await;
    let promoted = TestServer::start_real_clock().await;
    let other = TestServer::start_real_clock().await;
    replicate(promoted.addr(), master).await;
    replicate(other.addr(), master).await;
    run_lines(master, &["SET before-failover 1"]).await;
    wait_in_sync(master, promoted.addr()).await;
    wait_in_sync(master, other.addr()).await;
    let old_id = replication_field(master, "master_replid").await;
    let offset = replication_field(master, "master_repl_offset").await;
    // The failover: the master goes, one replica becomes master, the
    // other follows it.
    drop(redis);
    let mut conn = connect(promoted.addr()).await;
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query_async(&mut conn)
        .await
        .expect("REPLICAOF NO ONE");
    assert_eq!(
        replication_field(promoted.addr(), "role").await.as_deref(),
        Some("master")
    );
    // The old history stays valid up to the byte after what it had.
    assert_eq!(
        replication_field(promoted.addr(), "master_replid2").await,
        old_id
    );
    let second = offset
        .as_deref()
        .map(|o| (o.parse::<u64>().unwrap() + 1).to_string());
    assert_eq!(
        replication_field(promoted.addr(), "second_repl_offset").await,
        second
    );
    let written: () = conn.set("after-failover", 2).await.expect("SET");
    let () = written;
    replicate(other.addr(), promoted.addr()).await;
    wait_in_sync(promoted.addr(), other.addr()).await;
    assert_eq!(stats_field(promoted.addr(), "sync_partial_ok").await, "1");
    assert_eq!(stats_field(promoted.addr(), "sync_full").await, "0");
    assert_same_data(promoted.addr(), other.addr()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_sync_from_a_redis_master_under_writes_loses_nothing() {
    let Some(redis) = redis_master() else {
        return;
    };
    let master = redis.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for writer in 0..4u64 {
        let (stop, acknowledged) = (stop.clone(), acknowledged.clone());
        writers.push(tokio::spawn(async move {
            let mut conn = connect(master).await;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("k{}", (i * 7 + writer) % 200);
                let _: i64 = conn.incr(&key, 1).await.expect("INCR");
                acknowledged.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let tally = TestServer::start_real_clock().await;
    replicate(tally.addr(), master).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.expect("writer");
    }
    wait_in_sync(master, tally.addr()).await;
    let mut on_replica = connect(tally.addr()).await;
    let mut total = 0i64;
    for k in 0..200 {
        let value: Option<i64> = on_replica.get(format!("k{k}")).await.expect("GET");
        total += value.unwrap_or(0);
    }
    assert_eq!(total as u64, acknowledged.load(Ordering::Relaxed));
    assert_same_data(master, tally.addr()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_past_its_deadline_waits_on_a_replica_for_the_masters_del() {
    let Some(redis) = redis_master() else {
        return;
    };
    let master = redis.addr;
    let tally = TestServer::start_real_clock().await;
    replicate(tally.addr(), master).await;
    // The master's own expiry cycle is off: only a read there expires it.
    run_lines(master, &["DEBUG SET-ACTIVE-EXPIRE 0", "SET brief v PX 50"]).await;
    wait_in_sync(master, tally.addr()).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let mut on_replica = connect(tally.addr()).await;
    // Past its deadline it is absent to clients, yet still held: the
    // replica deletes nothing on its own clock.
    let value: Option<String> = on_replica.get("brief").await.expect("GET");
    assert_eq!(value, None);
    let held: i64 = redis::cmd("DBSIZE")
        .query_async(&mut on_replica)
        .await
        .expect("DBSIZE");
    let keys: Vec<String> = on_replica.keys("*").await.expect("KEYS");
    assert_eq!(held, 1, "{keys:?}");
    // A read on the master expires it there, and the DEL arrives.
    let mut on_master = connect(master).await;
    let value: Option<String> = on_master.get("brief").await.expect("GET");
    assert_eq!(value, None);
    wait_in_sync(master, tally.addr()).await;
    let held: i64 = redis::cmd("DBSIZE")
        .query_async(&mut on_replica)
        .await
        .expect("DBSIZE");
    assert_eq!(held, 0);
}

/// The live move from Redis that docs/operations.md gives, under a write
/// load: tally follows the running redis-server, the Redis master's
/// writes are paused, tally catches up and is promoted, the writers move
/// to it, and Redis goes. Every increment a writer saw acknowledged is in
/// tally's counters, and no other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_move_from_redis_loses_no_acknowledged_increment() {
    let Some(redis) = redis_master() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    // Where the writers send their increments: Redis, then tally.
    let target = Arc::new(std::sync::Mutex::new(redis.addr));
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for writer in 0..4u64 {
        let (target, stop, acknowledged) = (target.clone(), stop.clone(), acknowledged.clone());
        writers.push(tokio::spawn(async move {
            let mut serving = *target.lock().expect("target");
            let mut conn = connect(serving).await;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let now = *target.lock().expect("target");
                if now != serving {
                    serving = now;
                    conn = connect(serving).await;
                }
                let key = format!("k{}", (i * 7 + writer) % 100);
                i += 1;
                // A write paused on Redis when it went never ran: it
                // fails here and is not counted.
                let done =
                    tokio::time::timeout(Duration::from_secs(2), conn.incr::<_, _, i64>(&key, 1))
                        .await;
                if let Ok(Ok(_)) = done {
                    acknowledged.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // 1. tally follows Redis, under the load.
    replicate(tally.addr(), redis.addr).await;
    wait_for_field(tally.addr(), "master_link_status", "up").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // 2. Writes on Redis pause; tally catches up to Redis's offset.
    run_lines(redis.addr, &["CLIENT PAUSE 20000 WRITE"]).await;
    let offset = replication_field(redis.addr, "master_repl_offset")
        .await
        .expect("offset");
    wait_for_field(tally.addr(), "master_repl_offset", &offset).await;
    // 3. tally becomes a master, the writers move, Redis goes.
    run_lines(tally.addr(), &["REPLICAOF NO ONE"]).await;
    *target.lock().expect("target") = tally.addr();
    drop(redis);
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.expect("writer");
    }
    let mut on_tally = connect(tally.addr()).await;
    let mut total = 0u64;
    for k in 0..100 {
        let value: Option<u64> = on_tally.get(format!("k{k}")).await.expect("GET");
        total += value.unwrap_or(0);
    }
    assert_eq!(total, acknowledged.load(Ordering::Relaxed));
}

/// SCRIPT LOAD on `addr`; the script's SHA1.
async fn load_script(addr: SocketAddr, body: &str) -> String {
    let mut conn = connect(addr).await;
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(body)
        .query_async(&mut conn)
        .await
        .expect("SCRIPT LOAD")
}

/// EVALSHA `sha` with no keys on `addr`: its reply, or the error text.
async fn evalsha(addr: SocketAddr, sha: &str) -> Result<i64, String> {
    let mut conn = connect(addr).await;
    redis::cmd("EVALSHA")
        .arg(sha)
        .arg(0)
        .query_async(&mut conn)
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_loaded_on_the_master_work_on_a_promoted_replica() {
    let primary = TestServer::start_real_clock().await;
    let master = primary.addr();
    // One script before the replica syncs (it comes in the snapshot), one
    // after (it comes in the stream), one run by EVAL (loaded by it).
    let before = load_script(master, "return 1").await;
    let replica = TestServer::start_real_clock().await;
    replicate(replica.addr(), master).await;
    wait_in_sync(master, replica.addr()).await;
    let after = load_script(master, "return 2").await;
    let three: i64 = redis::cmd("EVAL")
        .arg("return 3")
        .arg(0)
        .query_async(&mut connect(master).await)
        .await
        .expect("EVAL");
    assert_eq!(three, 3);
    wait_in_sync(master, replica.addr()).await;
    run_lines(replica.addr(), &["REPLICAOF NO ONE"]).await;
    assert_eq!(evalsha(replica.addr(), &before).await, Ok(1));
    assert_eq!(evalsha(replica.addr(), &after).await, Ok(2));
    // The old master names the EVAL'd script's SHA1 (it has it already).
    let by_eval = load_script(master, "return 3").await;
    assert_eq!(evalsha(replica.addr(), &by_eval).await, Ok(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_persisted_scripts_a_promoted_replica_answers_noscript_as_redis_7() {
    let primary = TestServer::start_with(|c| {
        c.lua_persist_scripts = false;
        c.clock = Arc::new(tally_server::store::SystemClock);
    })
    .await;
    let master = primary.addr();
    let replica = TestServer::start_real_clock().await;
    replicate(replica.addr(), master).await;
    wait_in_sync(master, replica.addr()).await;
    let sha = load_script(master, "return 2").await;
    run_lines(master, &["SET after-load 1"]).await;
    wait_in_sync(master, replica.addr()).await;
    run_lines(replica.addr(), &["REPLICAOF NO ONE"]).await;
    let refused = evalsha(replica.addr(), &sha).await.expect_err("NOSCRIPT");
    assert!(refused.contains("No matching script"), "{refused}");
}

/// A tally server on `dir` and `port` (0: any), with the real clock,
/// following `master` if given.
async fn tally_on(dir: &str, port: u16, master: Option<SocketAddr>) -> TestServer {
    let dir = dir.to_string();
    let server = TestServer::start_with(move |c| {
        c.dir = dir;
        c.port = port;
        c.clock = Arc::new(tally_server::SystemClock);
        c.replicaof = master.map(|m| ("127.0.0.1".to_string(), m.port()));
    })
    .await;
    wait_loaded(server.addr()).await;
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_replica_continues_from_the_offset_its_snapshot_kept() {
    let primary = TestServer::start_real_clock().await;
    let master = primary.addr();
    fill(master).await;
    let dir = tally_tests::scratch_dir();
    let replica = tally_on(&dir, 0, Some(master)).await;
    run_lines(master, &["SELECT 2", "INCR in-two"]).await;
    wait_in_sync(master, replica.addr()).await;
    run_lines(replica.addr(), &["SAVE"]).await;
    replica.handle.shutdown().await;
    // Written while the replica is down; the stream was in database 2.
    run_lines(
        master,
        &["SELECT 2", "INCR in-two", "SELECT 0", "INCR in-zero"],
    )
    .await;
    let again = tally_on(&dir, 0, Some(master)).await;
    wait_in_sync(master, again.addr()).await;
    assert_eq!(stats_field(master, "sync_full").await, "1");
    assert_eq!(stats_field(master, "sync_partial_ok").await, "1");
    assert_same_data(master, again.addr()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_replica_continues_with_a_restarted_tally_master() {
    let dir = tally_tests::scratch_dir();
    let port = tally_tests::free_local_port();
    let primary = tally_on(&dir, port, None).await;
    let master = primary.addr();
    fill(master).await;
    let Some(redis) = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port.to_string()])
    else {
        return;
    };
    wait_in_sync(master, redis.addr).await;
    run_lines(master, &["SAVE"]).await;
    let old_id = replication_field(master, "master_replid").await;
    primary.handle.shutdown().await;
    let again = tally_on(&dir, port, None).await;
    // The old history is the second one, up to the byte after the
    // snapshot's offset; the replica continues it.
    assert_eq!(
        replication_field(again.addr(), "master_replid2").await,
        old_id
    );
    wait_for_field(redis.addr, "master_link_status", "up").await;
    run_lines(again.addr(), &["INCR after-restart"]).await;
    wait_in_sync(again.addr(), redis.addr).await;
    assert_eq!(stats_field(again.addr(), "sync_partial_ok").await, "1");
    assert_eq!(stats_field(again.addr(), "sync_full").await, "0");
    assert_same_data(again.addr(), redis.addr).await;
}

/// CVE-2026-23631's scenario (Debian's patch carries Redis's test for it):
/// a full sync arrives while the replica runs a script past its busy
/// threshold. Redis freed the Lua engine under the script; its fix makes
/// the sync wait for the script. tally's full sync frees no engine (the
/// scripts stay, the VMs are the workers'), so the script runs on, is
/// still BUSY after the sync was triggered, is killed by SCRIPT KILL, and
/// the replica then has every key of the master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_sync_during_a_busy_script_leaves_the_script_running() {
    let Some(redis) = redis_master() else {
        return;
    };
    let master = redis.addr;
    // A small replica output limit: the big writes below cut the link,
    // and the replica must sync in full again.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("replica 1024 1024 0")
        .query_async(&mut connect(master).await)
        .await
        .expect("CONFIG SET");
    let tally = TestServer::start_real_clock().await;
    replicate(tally.addr(), master).await;
    wait_in_sync(master, tally.addr()).await;
    let mut scripted = tally.raw().await;
    let mut client = tally.raw().await;
    assert_eq!(
        client.line("CONFIG SET busy-reply-threshold 1").await,
        "+OK\r\n"
    );
    scripted
        .send(&tally_tests::encode_command(&[
            "EVAL",
            "while true do end",
            "0",
        ]))
        .await;
    let busy = |reply: &str| reply.starts_with("-BUSY");
    let mut answered = String::new();
    for _ in 0..100 {
        answered = client.line("PING").await;
        if busy(&answered) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(busy(&answered), "{answered}");
    let big = "x".repeat(1_000_000);
    let mut on_master = connect(master).await;
    for i in 0..5 {
        let _: () = on_master
            .set(format!("bigkey:{i}"), &big)
            .await
            .expect("SET");
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while stats_field(master, "sync_full")
        .await
        .parse::<u64>()
        .unwrap_or(0)
        < 2
    {
        assert!(std::time::Instant::now() < deadline, "no second full sync");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        busy(&client.line("PING").await),
        "the script should still run"
    );
    assert_eq!(client.line("SCRIPT KILL").await, "+OK\r\n");
    let killed = String::from_utf8(scripted.reply().await).expect("text");
    assert!(
        killed.starts_with("-ERR Script killed by user with SCRIPT KILL..."),
        "{killed}"
    );
    assert_eq!(client.line("PING").await, "+PONG\r\n");
    wait_in_sync(master, tally.addr()).await;
    assert_same_data(master, tally.addr()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_authenticates_with_masteruser_and_masterauth() {
    let Some(redis) = RedisServer::start_with(&[
        "--repl-diskless-sync-delay",
        "0",
        "--requirepass",
        "master-secret",
    ]) else {
        return;
    };
    let master = redis.addr;
    let mut admin = tally_tests::keyspace::patient(
        &redis::Client::open(format!("redis://:master-secret@{master}/")).expect("client"),
    )
    .await
    .expect("connection");
    for args in [
        vec![
            "ACL",
            "SETUSER",
            "replicator",
            "on",
            ">repl-secret",
            "+psync",
            "+replconf",
            "+ping",
        ],
        vec!["SET", "guarded", "1"],
    ] {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        let _: () = cmd.query_async(&mut admin).await.expect("setup");
    }
    let tally = TestServer::start_real_clock().await;
    // A wrong password: the link stays down, the replica retries.
    run_lines(tally.addr(), &["CONFIG SET masterauth wrong"]).await;
    replicate(tally.addr(), master).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        replication_field(tally.addr(), "master_link_status")
            .await
            .as_deref(),
        Some("down")
    );
    // The ACL user and its password: the link comes up.
    run_lines(
        tally.addr(),
        &[
            "CONFIG SET masteruser replicator",
            "CONFIG SET masterauth repl-secret",
        ],
    )
    .await;
    wait_for_field(tally.addr(), "master_link_status", "up").await;
    let mut on_replica = connect(tally.addr()).await;
    let guarded: i64 = on_replica.get("guarded").await.expect("GET");
    assert_eq!(guarded, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_stale_data_refused_a_replica_without_its_master_answers_masterdown() {
    let Some(redis) = redis_master() else {
        return;
    };
    let port = redis.addr.port().to_string();
    let Some(redis_replica) = RedisServer::start_with(&[
        "--replicaof",
        "127.0.0.1",
        &port,
        "--replica-serve-stale-data",
        "no",
    ]) else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    run_lines(tally.addr(), &["CONFIG SET replica-serve-stale-data no"]).await;
    replicate(tally.addr(), redis.addr).await;
    wait_in_sync(redis.addr, tally.addr()).await;
    wait_in_sync(redis.addr, redis_replica.addr).await;
    drop(redis);
    wait_for_field(tally.addr(), "master_link_status", "down").await;
    wait_for_field(redis_replica.addr, "master_link_status", "down").await;
    let commands = script(
        r#"
        GET k
        PING
        INFO nosuchsection
        EVAL "return 1" 0
        "#,
    );
    assert_no_mismatch(&compare_streams(redis_replica.addr, tally.addr(), &commands).await);
}

/// The replication directives Redis's configs carry read and change as on
/// a redis-server: their defaults, accepted values and refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_directives_read_and_change_as_redis_s() {
    let Some(redis) = tally_tests::RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let stream = script(
        "CONFIG GET repl-diskless-sync
        CONFIG GET repl-diskless-sync-delay
        CONFIG GET repl-diskless-sync-max-replicas
        CONFIG GET repl-diskless-load
        CONFIG GET tls-replication
        CONFIG SET repl-diskless-sync no
        CONFIG SET repl-diskless-sync maybe
        CONFIG SET repl-diskless-sync-delay 0
        CONFIG SET repl-diskless-sync-delay -1
        CONFIG SET repl-diskless-sync-max-replicas 3
        CONFIG SET repl-diskless-load swapdb
        CONFIG SET repl-diskless-load SWAPDB
        CONFIG SET repl-diskless-load on-empty-db
        CONFIG SET repl-diskless-load sometimes
        CONFIG GET repl-diskless-sync
        CONFIG GET repl-diskless-sync-delay
        CONFIG GET repl-diskless-sync-max-replicas
        CONFIG GET repl-diskless-load",
    );
    assert_no_mismatch(&compare_streams(redis.addr, tally.addr(), &stream).await);
}

/// A replica that cannot write to disk (its last BGSAVE failed under
/// `stop-writes-on-bgsave-error`: here its snapshot's name is taken by a
/// directory) applies its master's writes only under
/// `replica-ignore-disk-write-errors yes`; under `no`, Redis's default, it
/// stops without applying the write, where Redis's replica panics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_cannot_write_to_disk_stops_unless_told_to_go_on() {
    for ignore in [true, false] {
        let primary = TestServer::start_real_clock().await;
        let master = primary.addr();
        let replica = TestServer::start_with(|c| {
            c.clock = Arc::new(tally_server::store::SystemClock);
            c.save_points = vec![(3600, 1)];
        })
        .await;
        let mut conn = connect(replica.addr()).await;
        let setting = if ignore { "yes" } else { "no" };
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("replica-ignore-disk-write-errors")
            .arg(setting)
            .query_async(&mut conn)
            .await
            .expect("CONFIG SET");
        replicate(replica.addr(), master).await;
        run_lines(master, &["SET before 1"]).await;
        wait_in_sync(master, replica.addr()).await;
        let dir = replica.handle.shared().config.read().dir.clone();
        std::fs::create_dir(std::path::Path::new(&dir).join("dump.rdb"))
            .expect("a directory where the snapshot goes");
        let saved: redis::RedisResult<()> = redis::cmd("SAVE").query_async(&mut conn).await;
        assert!(saved.is_err(), "the snapshot cannot be written");
        let _: () = redis::cmd("BGSAVE")
            .query_async(&mut conn)
            .await
            .expect("BGSAVE starts");
        let shared = replica.handle.shared().clone();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !shared.persistence.writes_refused.load(Ordering::SeqCst) {
            assert!(std::time::Instant::now() < deadline, "BGSAVE did not fail");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let refused: redis::RedisResult<()> = redis::cmd("SET")
            .arg("x")
            .arg(1)
            .query_async(&mut conn)
            .await;
        assert!(refused.is_err(), "a client's write gets MISCONF");
        run_lines(master, &["SET after 2"]).await;
        let key = shared.store.key(b"after");
        let applied = || {
            let now = shared.clock.now_ms();
            shared.store.db(0).lock_for(key).get(key, now).is_some()
        };
        if ignore {
            while !applied() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the write was not applied"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert!(!shared.persistence.fatal.load(Ordering::SeqCst));
        } else {
            while !shared.persistence.fatal.load(Ordering::SeqCst) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the replica did not stop"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert!(*shared.shutdown.borrow(), "the server is shutting down");
            assert!(!applied(), "the write it could not persist was not applied");
        }
    }
}

/// Writes made while a tally master writes a tally replica's snapshot
/// (stretched to four seconds by `rdb-key-save-delay`) reach the replica
/// with the snapshot: the master queues them and sends them right after
/// it, so they arrive in the reads that end the snapshot, and the replica
/// applies them then, counting them in its read offset, rather than once
/// more bytes arrive (which left them unapplied until the master's next
/// PING, and the read offset short of them for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_made_during_the_snapshot_reach_a_tally_replica_with_it() {
    let primary = TestServer::start_real_clock().await;
    let master = primary.addr();
    let mut conn = connect(master).await;
    set_numbered(&mut conn, "key:", 2_000).await;
    // 2,000 keys at 2 ms each; no PING from the master meanwhile to
    // carry the stream's bytes in a later read.
    run_lines(
        master,
        &[
            "CONFIG SET rdb-key-save-delay 2000",
            "CONFIG SET repl-ping-replica-period 3600",
        ],
    )
    .await;
    let replica = TestServer::start_real_clock().await;
    replicate(replica.addr(), master).await;
    // The sync has begun.
    wait_for_info_field(master, "persistence", "rdb_bgsave_in_progress", "1").await;
    let n: i64 = conn.incr("during", 1).await.expect("INCR during the sync");
    assert_eq!(n, 1);
    // Nothing more is written: the replica must read and apply all of it
    // from what came with the snapshot.
    let offset = replication_field(master, "master_repl_offset")
        .await
        .expect("the master's offset");
    wait_for_field(replica.addr(), "slave_read_repl_offset", &offset).await;
    wait_for_field(replica.addr(), "slave_repl_offset", &offset).await;
    let mut on_replica = connect(replica.addr()).await;
    let during: Option<i64> = on_replica.get("during").await.expect("GET");
    assert_eq!(during, Some(1));
}
