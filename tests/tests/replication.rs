//! Replication on Redis 7.0's protocol, tally as the master and Debian's
//! redis-server as the replica (`--replicaof`): the replica's handshake,
//! PSYNC answered with a full resynchronization (the snapshot of one
//! moment), then the replication stream (every change as Redis 7.0
//! propagates it: scripts by their effects, deadlines absolute, expiries
//! as DEL, SELECT when the database changes, MULTI/EXEC around
//! transactions, a PING every 10 s). After any mix of writes both servers
//! hold the same data, compared key by key.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use tally_tests::keyspace::{connect, fill, set_numbered};
use tally_tests::replication::{
    assert_same_data, info_field, replication_field, run_lines, stats_field, syncs_served,
    wait_for_info_field, wait_in_sync,
};
use tally_tests::{RedisServer, TestServer};

/// A redis-server replicating from `master`.
fn replica_of(master: SocketAddr) -> Option<RedisServer> {
    RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port().to_string()])
}

/// INFO replication, ROLE, CLIENT LIST and INFO stats show the replica as
/// Redis shows one, once it has acknowledged everything (it ACKs every
/// second).
async fn assert_replica_listed(master: SocketAddr, replica: SocketAddr) {
    let offset = replication_field(master, "master_repl_offset")
        .await
        .expect("master_repl_offset");
    let port = replica.port().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    let expected = format!("ip=127.0.0.1,port={port},state=online,offset={offset},lag=");
    loop {
        let line = replication_field(master, "slave0")
            .await
            .unwrap_or_default();
        if line.starts_with(&expected) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "slave0:{line}, waiting for {expected}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut conn = connect(master).await;
    let role: (String, i64, Vec<(String, String, String)>) = redis::cmd("ROLE")
        .query_async(&mut conn)
        .await
        .expect("ROLE");
    assert_eq!(
        role,
        (
            "master".to_string(),
            offset.parse().expect("an offset"),
            vec![("127.0.0.1".to_string(), port, offset.clone())]
        )
    );
    let listed: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("replica")
        .query_async(&mut conn)
        .await
        .expect("CLIENT LIST");
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(listed.contains(" flags=S "), "{listed}");
    let stats: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(&mut conn)
        .await
        .expect("INFO");
    assert!(stats.contains("\r\nsync_full:1\r\n"), "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_replica_of_tally_holds_the_same_data_after_every_kind_of_write() {
    let tally = TestServer::start_real_clock().await;
    let master = tally.addr();
    // In the snapshot of the full sync.
    fill(master).await;
    run_lines(master, &["SELECT 3", "SET in-three 1 EX 1000"]).await;
    let Some(redis) = replica_of(master) else {
        return;
    };
    wait_in_sync(master, redis.addr).await;
    assert_eq!(
        replication_field(master, "connected_slaves")
            .await
            .as_deref(),
        Some("1")
    );
    assert_same_data(master, redis.addr).await;
    assert_replica_listed(master, redis.addr).await;

    // In the stream.
    let sliding_window = tally_lua::SCRIPTS
        .iter()
        .find(|s| s.name == "sliding_window")
        .expect("the sliding-window script");
    let mut conn = connect(master).await;
    for i in 0..20u64 {
        // Natively run: its effects go to the replica as commands.
        let _: Vec<i64> = redis::cmd("EVAL")
            .arg(sliding_window.source)
            .arg(2)
            .arg("rl:u:1720000000")
            .arg("rl:u:1719999940")
            .arg(10)
            .arg(60)
            .arg(1_720_000_000u64 + i)
            .arg(1)
            .query_async(&mut conn)
            .await
            .expect("EVAL");
    }
    run_lines(
        master,
        &[
            "INCR counter",
            "INCRBYFLOAT float 1.5",
            "MULTI",
            "HSET hash f9 v9",
            "ZINCRBY zset 2 a",
            "SADD ints 42",
            "EXEC",
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
        ],
    )
    .await;
    let _: i64 = redis::cmd("EVAL")
        .arg("redis.call('incr', KEYS[1]); return redis.call('pexpire', KEYS[1], 600000)")
        .arg(1)
        .arg("lua-counter")
        .query_async(&mut conn)
        .await
        .expect("EVAL");
    // The short key expires on the master, which tells the replica.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let gone: Option<String> = conn.get("short").await.expect("GET");
    assert_eq!(gone, None);
    wait_in_sync(master, redis.addr).await;
    assert_same_data(master, redis.addr).await;
    // Deadlines arrive absolute, to the millisecond.
    for key in ["vol", "lua-counter"] {
        let on_master: i64 = redis::cmd("PEXPIRETIME")
            .arg(key)
            .query_async(&mut conn)
            .await
            .expect("PEXPIRETIME");
        let mut replica = connect(redis.addr).await;
        let on_replica: i64 = redis::cmd("PEXPIRETIME")
            .arg(key)
            .query_async(&mut replica)
            .await
            .expect("PEXPIRETIME");
        assert!(on_master > 0, "{key}");
        assert_eq!(on_replica, on_master, "{key}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_sync_during_writes_loses_none_of_them() {
    let tally = TestServer::start_real_clock().await;
    let master = tally.addr();
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
    let Some(redis) = replica_of(master) else {
        stop.store(true, Ordering::Relaxed);
        return;
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.expect("writer");
    }
    wait_in_sync(master, redis.addr).await;
    let mut on_master = connect(master).await;
    let mut on_replica = connect(redis.addr).await;
    let mut total = 0i64;
    for k in 0..200 {
        let key = format!("k{k}");
        let m: Option<i64> = on_master.get(&key).await.expect("GET");
        let r: Option<i64> = on_replica.get(&key).await.expect("GET");
        assert_eq!(r, m, "{key}");
        total += m.unwrap_or(0);
    }
    assert_eq!(total as u64, acknowledged.load(Ordering::Relaxed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_goes_away_is_dropped_and_the_next_one_syncs_afresh() {
    let tally = TestServer::start_real_clock().await;
    let master = tally.addr();
    run_lines(master, &["SET before 1", "SELECT 2", "SET two 2"]).await;
    let Some(first) = replica_of(master) else {
        return;
    };
    wait_in_sync(master, first.addr).await;
    drop(first);
    // The stream goes on without it, in another database than the
    // next replica starts in: it must SELECT afresh.
    run_lines(master, &["SELECT 2", "SET after 1"]).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while replication_field(master, "connected_slaves")
        .await
        .as_deref()
        != Some("0")
    {
        assert!(
            Instant::now() < deadline,
            "the gone replica is still counted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let Some(second) = replica_of(master) else {
        return;
    };
    wait_in_sync(master, second.addr).await;
    // First in the database the stream last selected: the replica, which
    // starts in database 0, must be told.
    run_lines(master, &["SELECT 2", "SET db2-after-attach 1"]).await;
    run_lines(master, &["SET db0-after-attach 1"]).await;
    wait_in_sync(master, second.addr).await;
    assert_same_data(master, second.addr).await;
}

/// Cuts every replica's link while the replica is stopped (SIGSTOP, so
/// that it cannot reconnect before `writes_meanwhile` are made), resumes
/// it, and waits until its new PSYNC was served and it has caught up.
async fn cut_and_rejoin(master: SocketAddr, replica: SocketAddr, writes_meanwhile: &[&str]) {
    let served = syncs_served(master).await;
    let mut on_replica = connect(replica).await;
    let server: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut on_replica)
        .await
        .expect("INFO");
    let pid = server
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .expect("process_id")
        .to_string();
    let signal = |which: &str| {
        let status = std::process::Command::new("kill")
            .args([which, &pid])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {which} {pid}");
    };
    signal("-STOP");
    let mut conn = connect(master).await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query_async(&mut conn)
        .await
        .expect("CLIENT KILL");
    assert_eq!(killed, 1);
    run_lines(master, writes_meanwhile).await;
    signal("-CONT");
    let deadline = Instant::now() + Duration::from_secs(20);
    while syncs_served(master).await == served {
        assert!(Instant::now() < deadline, "the replica did not come back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_in_sync(master, replica).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_lost_its_link_continues_from_the_backlog() {
    let tally = TestServer::start_real_clock().await;
    let master = tally.addr();
    run_lines(master, &["SET before 1"]).await;
    let Some(redis) = replica_of(master) else {
        return;
    };
    wait_in_sync(master, redis.addr).await;
    cut_and_rejoin(
        master,
        redis.addr,
        &["INCR before", "SELECT 4", "SET while-away 1"],
    )
    .await;
    assert_eq!(stats_field(master, "sync_full").await, "1");
    assert_eq!(stats_field(master, "sync_partial_ok").await, "1");
    assert_eq!(stats_field(master, "sync_partial_err").await, "0");
    assert_same_data(master, redis.addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_missed_more_than_the_backlog_holds_syncs_in_full() {
    let tally = TestServer::start_real_clock().await;
    let master = tally.addr();
    run_lines(master, &["CONFIG SET repl-backlog-size 16kb"]).await;
    let Some(redis) = replica_of(master) else {
        return;
    };
    wait_in_sync(master, redis.addr).await;
    let big = format!("SET big {}", "x".repeat(20_000));
    cut_and_rejoin(master, redis.addr, &[&big, "SET small 1"]).await;
    assert_eq!(stats_field(master, "sync_full").await, "2");
    assert_eq!(stats_field(master, "sync_partial_ok").await, "0");
    assert_eq!(stats_field(master, "sync_partial_err").await, "1");
    assert_eq!(
        replication_field(master, "repl_backlog_histlen")
            .await
            .as_deref(),
        Some("16384")
    );
    assert_same_data(master, redis.addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_counts_the_replicas_that_have_every_write() {
    let tally = TestServer::start_real_clock().await;
    let master = tally.addr();
    let mut conn = connect(master).await;
    let wait = |replicas: i64, timeout_ms: i64| {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(replicas).arg(timeout_ms);
        cmd
    };
    // No replica: the timeout passes and none is counted.
    let started = Instant::now();
    let none: i64 = wait(1, 100).query_async(&mut conn).await.expect("WAIT");
    assert_eq!(none, 0);
    assert!(started.elapsed() >= Duration::from_millis(100));
    let Some(redis) = replica_of(master) else {
        return;
    };
    wait_in_sync(master, redis.addr).await;
    for i in 0..50 {
        let _: () = conn.set(format!("w{i}"), i).await.expect("SET");
        // The replica is asked for its offset at once: no waiting for its
        // once-a-second acknowledgement, let alone the 10 s timeout.
        let started = Instant::now();
        let acked: i64 = wait(1, 10_000).query_async(&mut conn).await.expect("WAIT");
        assert_eq!(acked, 1);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "WAIT took {:?}",
            started.elapsed()
        );
    }
    // More than there are: the count there is, at the timeout.
    let one: i64 = wait(2, 200).query_async(&mut conn).await.expect("WAIT");
    assert_eq!(one, 1);
    // In a transaction WAIT answers at once.
    let (_, in_multi): ((), i64) = redis::pipe()
        .atomic()
        .set("in-multi", 1)
        .add_command(wait(5, 0))
        .query_async(&mut conn)
        .await
        .expect("MULTI");
    assert!(in_multi <= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_replicas_to_write_refuses_writes_until_a_replica_acknowledges() {
    let tally = TestServer::start_real_clock().await;
    let master = tally.addr();
    let mut conn = connect(master).await;
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("min-replicas-to-write")
        .arg(1)
        .query_async(&mut conn)
        .await
        .expect("CONFIG SET");
    let refused = conn.set::<_, _, ()>("k", 1).await.expect_err("NOREPLICAS");
    assert_eq!(refused.code(), Some("NOREPLICAS"));
    assert_eq!(refused.detail(), Some("Not enough good replicas to write."));
    // Reads are served.
    let nothing: Option<i64> = conn.get("k").await.expect("GET");
    assert_eq!(nothing, None);
    assert_eq!(
        replication_field(master, "min_slaves_good_slaves")
            .await
            .as_deref(),
        Some("0")
    );
    let Some(redis) = replica_of(master) else {
        return;
    };
    wait_in_sync(master, redis.addr).await;
    // Good once its first acknowledgement is in (it sends one a second).
    let deadline = Instant::now() + Duration::from_secs(10);
    while replication_field(master, "min_slaves_good_slaves")
        .await
        .as_deref()
        != Some("1")
    {
        assert!(
            Instant::now() < deadline,
            "the replica never counted as good"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let () = conn.set("k", 1).await.expect("SET with a good replica");
    // The alias Redis 7.0 keeps names the same setting.
    let alias: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("min-slaves-to-write")
        .query_async(&mut conn)
        .await
        .expect("CONFIG GET");
    assert_eq!(alias, ["min-slaves-to-write", "1"]);
}

/// `redis-cli --replica` (the old SYNC, no +FULLRESYNC line) gets the
/// snapshot and then the stream, as from Redis; `redis-cli --rdb` (SYNC
/// after REPLCONF rdb-only 1) gets the snapshot alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cli_replica_and_rdb_work_over_sync() {
    let tally = TestServer::start_real_clock().await;
    let port = tally.addr().port().to_string();
    let mut replica = match std::process::Command::new("redis-cli")
        .args(["-p", &port, "--replica"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(child) => child,
        Err(_) => {
            tally_tests::tool_missing("redis-cli");
            return;
        }
    };
    // Once it streams, it is listed as a replica.
    let deadline = Instant::now() + Duration::from_secs(10);
    while replication_field(tally.addr(), "connected_slaves")
        .await
        .as_deref()
        != Some("1")
    {
        assert!(
            Instant::now() < deadline,
            "redis-cli never became a replica"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run_lines(tally.addr(), &["SET streamed value", "INCR counted"]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    replica.kill().expect("stop redis-cli");
    let output = replica.wait_with_output().expect("its output");
    let lines = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        lines.contains("\"SET\",\"streamed\",\"value\"")
            || lines.contains("\"set\",\"streamed\",\"value\""),
        "{lines}"
    );
    assert!(
        lines.to_ascii_lowercase().contains("\"incr\",\"counted\""),
        "{lines}"
    );
    let file = format!("{}/cli.rdb", tally_tests::scratch_dir());
    let status = std::process::Command::new("redis-cli")
        .args(["-p", &port, "--rdb", &file])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("redis-cli --rdb");
    assert!(status.success());
    let snapshot = std::fs::read(&file).expect("the snapshot");
    assert!(snapshot.starts_with(b"REDIS0010"), "a snapshot");
    assert!(
        snapshot.windows(8).any(|w| w == b"streamed"),
        "with the key written"
    );
}

/// `redis-cli --rdb` while a BGSAVE is being written waits for it, then
/// gets a snapshot written in the background too (no client waits for
/// either): when it has its file, the BGSAVE has finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cli_rdb_during_a_bgsave_waits_for_it() {
    let tally = TestServer::start_real_clock().await;
    let master = tally.addr();
    let mut conn = connect(master).await;
    set_numbered(&mut conn, "key:", 1_000).await;
    // 1,000 keys at 1 ms each: a second a snapshot.
    run_lines(master, &["CONFIG SET rdb-key-save-delay 1000", "BGSAVE"]).await;
    assert_eq!(info_field(master, "persistence", "rdb_saves").await, "0");
    let file = format!("{}/cli.rdb", tally_tests::scratch_dir());
    let Ok(status) = tokio::process::Command::new("redis-cli")
        .args(["-p", &master.port().to_string(), "--rdb", &file])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .await
    else {
        tally_tests::tool_missing("redis-cli");
        return;
    };
    assert!(status.success());
    assert_eq!(
        info_field(master, "persistence", "rdb_saves").await,
        "1",
        "the BGSAVE ended before redis-cli had its file"
    );
    // A full sync to Redis's INFO too, as redis-cli --rdb on Redis 7.0.
    assert_eq!(stats_field(master, "sync_full").await, "1");
    let snapshot = std::fs::read(&file).expect("the snapshot");
    assert!(snapshot.starts_with(b"REDIS0010"), "a snapshot");
    assert!(
        snapshot.windows(7).any(|w| w == b"key:999"),
        "with the keys"
    );
}

/// A full resynchronization's snapshot is written in the background, as
/// BGSAVE's is: with Redis's `rdb-key-save-delay` stretching it to four
/// seconds, the master answers its clients while it is written (INFO
/// shows the save in progress and the replica in `wait_bgsave`, and
/// BGSAVE and SAVE are refused, as Redis 7.0 does all four while its fork
/// writes a replica's snapshot), and the replica ends with the snapshot's
/// keys and, from the stream, the writes made meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_sync_is_written_while_the_master_serves_clients() {
    let tally = TestServer::start_real_clock().await;
    let master = tally.addr();
    let mut conn = connect(master).await;
    set_numbered(&mut conn, "key:", 2_000).await;
    // 2,000 keys at 2 ms each.
    run_lines(master, &["CONFIG SET rdb-key-save-delay 2000"]).await;
    let Some(redis) = replica_of(master) else {
        return;
    };
    // The replica's sync has begun.
    wait_for_info_field(master, "persistence", "rdb_bgsave_in_progress", "1").await;
    let n: i64 = conn.incr("key:1", 1).await.expect("INCR during the sync");
    assert_eq!(n, 2);
    let _: () = conn.set("during", "x").await.expect("SET during the sync");
    for command in ["BGSAVE", "SAVE"] {
        let refused: redis::RedisResult<String> = redis::cmd(command).query_async(&mut conn).await;
        let refused = refused.expect_err("a save during the sync");
        assert_eq!(
            refused.detail(),
            Some("Background save already in progress"),
            "{command}"
        );
    }
    let line = replication_field(master, "slave0")
        .await
        .unwrap_or_default();
    assert!(line.contains(",state=wait_bgsave,"), "{line}");
    assert_eq!(
        info_field(master, "persistence", "rdb_bgsave_in_progress").await,
        "1",
        "the writes above were served while the snapshot was written"
    );
    wait_in_sync(master, redis.addr).await;
    assert_same_data(master, redis.addr).await;
    let line = replication_field(master, "slave0")
        .await
        .unwrap_or_default();
    assert!(line.contains(",state=online,"), "{line}");
    let mut on_replica = connect(redis.addr).await;
    let copied: (String, String) = redis::pipe()
        .get("key:1")
        .get("during")
        .query_async(&mut on_replica)
        .await
        .expect("GET on the replica");
    assert_eq!(copied, ("2".to_string(), "x".to_string()));
    let keys: usize = redis::cmd("DBSIZE")
        .query_async(&mut on_replica)
        .await
        .expect("DBSIZE");
    assert_eq!(keys, 2_001);
}

/// A second replica that asks while the first one's snapshot is being
/// written waits for it to end, then gets a snapshot of its own written
/// in the background too (as a Redis replica that cannot attach to the
/// running child waits for the next), instead of one written with every
/// shard held: INFO shows it in `wait_bgsave` until then, both replicas
/// end with every write, and two full syncs were served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_replica_waits_for_the_running_snapshot_then_gets_its_own() {
    let tally = TestServer::start_real_clock().await;
    let master = tally.addr();
    let mut conn = connect(master).await;
    set_numbered(&mut conn, "key:", 2_000).await;
    // 2,000 keys at 1.5 ms each: three seconds a snapshot.
    run_lines(master, &["CONFIG SET rdb-key-save-delay 1500"]).await;
    let Some(first) = replica_of(master) else {
        return;
    };
    wait_for_info_field(master, "persistence", "rdb_bgsave_in_progress", "1").await;
    let Some(second) = replica_of(master) else {
        return;
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let line = loop {
        if let Some(line) = replication_field(master, "slave1").await {
            break line;
        }
        assert!(Instant::now() < deadline, "the second replica never asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        line.contains(",state=wait_bgsave,"),
        "the second replica got a snapshot at once: {line}"
    );
    let _: () = conn.set("while-queued", "1").await.expect("SET");
    wait_in_sync(master, first.addr).await;
    let _: () = conn.set("between", "2").await.expect("SET");
    wait_in_sync(master, second.addr).await;
    let _: () = conn.set("after", "3").await.expect("SET");
    wait_in_sync(master, first.addr).await;
    wait_in_sync(master, second.addr).await;
    assert_same_data(master, first.addr).await;
    assert_same_data(master, second.addr).await;
    assert_eq!(stats_field(master, "sync_full").await, "2");
    for replica in [&first, &second] {
        let keys: usize = redis::cmd("DBSIZE")
            .query_async(&mut connect(replica.addr).await)
            .await
            .expect("DBSIZE");
        assert_eq!(keys, 2_003);
    }
}

/// A replica that goes away while its snapshot is being written leaves
/// nobody waiting for it: the write stops (as Redis kills a child whose
/// replicas are all gone), the save is no longer in progress, and BGSAVE
/// runs. At 20 ms a key, the 2,000 keys' snapshot would take 40 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_nobody_waits_for_stops() {
    let tally = TestServer::start_real_clock().await;
    let master = tally.addr();
    let mut conn = connect(master).await;
    set_numbered(&mut conn, "key:", 2_000).await;
    run_lines(master, &["CONFIG SET rdb-key-save-delay 20000"]).await;
    let mut replica = tally.raw().await;
    let reply = replica.cmd(&["PSYNC", "?", "-1"]).await;
    assert!(reply.starts_with(b"+FULLRESYNC "), "{reply:?}");
    assert_eq!(
        info_field(master, "persistence", "rdb_bgsave_in_progress").await,
        "1"
    );
    drop(replica);
    // Stopped: it would have gone on for 40 s.
    wait_for_info_field(master, "persistence", "rdb_bgsave_in_progress", "0").await;
    run_lines(master, &["CONFIG SET rdb-key-save-delay 0"]).await;
    let started: String = redis::cmd("BGSAVE")
        .query_async(&mut conn)
        .await
        .expect("BGSAVE");
    assert_eq!(started, "Background saving started");
}
