//! Keys' access times: which commands stamp a key as used, OBJECT IDLETIME,
//! RESTORE IDLETIME, DEBUG OBJECT's `lru` fields, CLIENT NO-TOUCH, and an
//! RDB file's idle times.
//!
//! Which commands stamp is compared with redis-server: in each case the
//! key is restored as idle for 1000 seconds (RESTORE ... IDLETIME 1000), the
//! command runs, and OBJECT IDLETIME tells whether it was stamped. Redis
//! leaves the time alone for lookups that look without using (TYPE, TTL,
//! EXISTS, OBJECT, MEMORY USAGE, SCAN's TYPE filter: LOOKUP_NOTOUCH or a
//! direct dict read) and stamps it for every other lookup.

use std::net::SocketAddr;
use std::path::Path;

use tally_server::config::ProtectedAction;
use tally_server::{Config, Server};
use tally_tests::{scratch_dir, words, RawConn, RedisServer, TestServer};

/// (set-up of key `k`, `|`-separated; the command under test).
const CASES: &[(&str, &str)] = &[
    ("SET k v", "GET k"),
    ("SET k v", "MGET k x"),
    ("SET k v", "STRLEN k"),
    ("SET k v", "GETRANGE k 0 1"),
    ("SET k v", "SETRANGE k 1 x"),
    ("SET k v", "APPEND k x"),
    ("SET k 1", "INCR k"),
    ("SET k v", "GETEX k"),
    ("SET k v", "EXPIRE k 100"),
    ("SET k v", "PERSIST k"),
    ("SET k v", "DUMP k"),
    ("SET k v", "COPY k k2"),
    ("SET k v", "SET k w XX"),
    ("SET k v", "SET k w NX"),
    ("SET k v", "TYPE k"),
    ("SET k v", "TTL k"),
    ("SET k v", "PTTL k"),
    ("SET k v", "EXPIRETIME k"),
    ("SET k v", "PEXPIRETIME k"),
    ("SET k v", "EXISTS k"),
    ("SET k v", "TOUCH k"),
    ("SET k v", "OBJECT ENCODING k"),
    ("SET k v", "OBJECT REFCOUNT k"),
    ("SET k v", "OBJECT FREQ k"),
    ("SET k v", "MEMORY USAGE k"),
    ("SET k v", "SCAN 0 TYPE string"),
    ("SET k v", "SCAN 0 TYPE hash"),
    ("SET k v", "KEYS *"),
    ("SET k v", "RANDOMKEY"),
    ("SET k v", "DEBUG OBJECT k"),
    ("SET k v", "EVAL return(redis.call('GET',KEYS[1])) 1 k"),
    ("SET k v", "EVAL return(redis.call('TYPE',KEYS[1])) 1 k"),
    ("SET k v", "MULTI | GET k | EXEC"),
    ("RPUSH k 2 1", "SORT k"),
    ("HSET k f v", "HGET k f"),
    ("HSET k f v", "HSET k g w"),
    ("HSET k f v", "HLEN k"),
    ("RPUSH k a b", "LRANGE k 0 -1"),
    ("RPUSH k a b", "LPUSH k c"),
    ("RPUSH k a b", "LLEN k"),
    ("SADD k a", "SISMEMBER k a"),
    ("ZADD k 1 a", "ZSCORE k a"),
    ("ZADD k 1 a", "ZRANGE k 0 -1"),
    ("PFADD k a", "PFCOUNT k"),
    ("SET k v", "SETBIT k 1 1"),
    ("SET k v", "BITCOUNT k"),
];

/// The bytes of a bulk reply (`$<len>\r\n<bytes>\r\n`).
fn bulk(reply: &[u8]) -> Vec<u8> {
    let header = reply
        .iter()
        .position(|&b| b == b'\n')
        .expect("a bulk header");
    assert_eq!(
        reply[0],
        b'$',
        "a bulk reply: {:?}",
        String::from_utf8_lossy(reply)
    );
    reply[header + 1..reply.len() - 2].to_vec()
}

/// What OBJECT IDLETIME says after the command: the key was stamped, left
/// alone (still about 1000 seconds idle), or is gone.
fn verdict(reply: &[u8]) -> &'static str {
    let text = String::from_utf8_lossy(reply);
    match text.trim_end().strip_prefix(':') {
        Some(n) if n.parse::<u64>().expect("seconds") >= 500 => "left alone",
        Some(_) => "stamped",
        None => "gone",
    }
}

/// Runs one case on the server at `addr` and returns the verdict.
async fn run_case(addr: SocketAddr, setup: &str, command: &str) -> &'static str {
    let mut conn = RawConn::connect(addr).await;
    conn.cmd(&["FLUSHALL"]).await;
    for line in setup.split(" | ") {
        conn.cmd(&words(line)).await;
    }
    let payload = bulk(&conn.cmd(&["DUMP", "k"]).await);
    let restored = conn
        .cmd(&[
            &b"RESTORE"[..],
            b"k",
            b"0",
            &payload,
            b"REPLACE",
            b"IDLETIME",
            b"1000",
        ])
        .await;
    assert_eq!(restored, b"+OK\r\n");
    for line in command.split(" | ") {
        let reply = conn.cmd(&words(line)).await;
        // A command that failed would have looked nothing up (OBJECT
        // FREQ's error comes after its lookup).
        assert!(
            !reply.starts_with(b"-") || line.starts_with("OBJECT FREQ"),
            "{line}: {}",
            String::from_utf8_lossy(&reply)
        );
    }
    verdict(&conn.cmd(&["OBJECT", "IDLETIME", "k"]).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_stamp_keys_as_redis_does() {
    let Some(redis) = RedisServer::start_with(&["--enable-debug-command", "yes"]) else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    {
        // DEBUG OBJECT is refused unless enabled, as in Redis.
        let mut conn = tally.raw().await;
        let refused = conn.cmd(&["DEBUG", "OBJECT", "k"]).await;
        assert!(refused.starts_with(b"-ERR DEBUG command not allowed."));
    }
    tally.handle.shared().config.write().enable_debug_command = ProtectedAction::Yes;
    let mut differences = Vec::new();
    let mut left_alone = 0;
    for (setup, command) in CASES {
        let expected = run_case(redis.addr, setup, command).await;
        let got = run_case(tally.addr(), setup, command).await;
        if expected != got {
            differences.push(format!("{command}: redis {expected}, tally {got}"));
        }
        left_alone += usize::from(expected == "left alone");
    }
    assert!(differences.is_empty(), "{differences:#?}");
    // The comparison covers both kinds of lookup.
    assert!(left_alone >= 10 && left_alone < CASES.len());
}

/// OBJECT IDLETIME and DEBUG OBJECT read the server's clock: a manual
/// clock moves them without waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_time_follows_the_clock_and_the_last_use() {
    let server = TestServer::start_with(|c| c.enable_debug_command = ProtectedAction::Yes).await;
    let mut conn = server.raw().await;
    assert_eq!(conn.cmd(&["SET", "k", "v"]).await, b"+OK\r\n");
    assert_eq!(conn.cmd(&["OBJECT", "IDLETIME", "k"]).await, b":0\r\n");
    assert_eq!(conn.cmd(&["OBJECT", "IDLETIME", "nokey"]).await, b"$-1\r\n");
    server.clock.advance_ms(90_500);
    assert_eq!(conn.cmd(&["OBJECT", "IDLETIME", "k"]).await, b":90\r\n");
    assert_eq!(conn.cmd(&["TYPE", "k"]).await, b"+string\r\n");
    assert_eq!(conn.cmd(&["OBJECT", "IDLETIME", "k"]).await, b":90\r\n");
    let line = String::from_utf8(conn.cmd(&["DEBUG", "OBJECT", "k"]).await).expect("text");
    let clock = (tally_tests::T0_MS / 1000) % (1 << 24);
    assert!(
        line.ends_with(&format!(
            "refcount:1 encoding:embstr serializedlength:2 lru:{clock} lru_seconds_idle:90\r\n"
        )),
        "{line}"
    );
    conn.cmd(&["GET", "k"]).await;
    assert_eq!(conn.cmd(&["OBJECT", "IDLETIME", "k"]).await, b":0\r\n");
    // An overwrite is a new value, used now.
    server.clock.advance_ms(5_000);
    conn.cmd(&["SET", "k", "w"]).await;
    assert_eq!(conn.cmd(&["OBJECT", "IDLETIME", "k"]).await, b":0\r\n");
    // Across the clock's wrap (2^24 seconds), as Redis reads it.
    let wrap_ms = (1u64 << 24) * 1000;
    let next_wrap = (tally_tests::T0_MS / wrap_ms + 1) * wrap_ms;
    server.clock.set_ms(next_wrap - 2_000);
    conn.cmd(&["GET", "k"]).await;
    server.clock.set_ms(next_wrap + 3_000);
    assert_eq!(conn.cmd(&["OBJECT", "IDLETIME", "k"]).await, b":4\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_idletime_sets_the_time_back() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    conn.cmd(&["SET", "k", "v"]).await;
    let payload = bulk(&conn.cmd(&["DUMP", "k"]).await);
    let restore = |idle: &'static str| {
        vec![
            b"RESTORE".to_vec(),
            b"k".to_vec(),
            b"0".to_vec(),
            payload.clone(),
            b"REPLACE".to_vec(),
            b"IDLETIME".to_vec(),
            idle.as_bytes().to_vec(),
        ]
    };
    assert_eq!(conn.cmd(&restore("1000")).await, b"+OK\r\n");
    assert_eq!(conn.cmd(&["OBJECT", "IDLETIME", "k"]).await, b":1000\r\n");
    // Further back than the clock reaches: Redis puts the stamp half the
    // clock's range away.
    let clock = (tally_tests::T0_MS / 1000) % (1 << 24);
    assert_eq!(conn.cmd(&restore("100000000")).await, b"+OK\r\n");
    let max = (1 << 24) - 1;
    let half = (clock + max / 2) % max;
    let idle = if clock >= half {
        clock - half
    } else {
        clock + (max - half)
    };
    assert_eq!(
        conn.cmd(&["OBJECT", "IDLETIME", "k"]).await,
        format!(":{idle}\r\n").into_bytes()
    );
    assert_eq!(
        conn.cmd(&restore("-1")).await,
        b"-ERR Invalid IDLETIME value, must be >= 0\r\n"
    );
}

/// CLIENT NO-TOUCH (Redis 7.2): the client's commands leave access times
/// alone, except TOUCH, also inside a transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_touch_client_uses_nothing_but_touch() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    conn.cmd(&["SET", "k", "1"]).await;
    server.clock.advance_ms(10_000);
    assert_eq!(conn.cmd(&["CLIENT", "NO-TOUCH", "ON"]).await, b"+OK\r\n");
    for command in [
        "GET k",
        "INCR k",
        "EVAL return(redis.call('GET',KEYS[1])) 1 k",
    ] {
        conn.cmd(&words(command)).await;
        assert_eq!(
            conn.cmd(&["OBJECT", "IDLETIME", "k"]).await,
            b":10\r\n",
            "{command}"
        );
    }
    assert_eq!(conn.cmd(&["MULTI"]).await, b"+OK\r\n");
    conn.cmd(&["GET", "k"]).await;
    conn.cmd(&["TOUCH", "k"]).await;
    conn.cmd(&["EXEC"]).await;
    assert_eq!(conn.cmd(&["OBJECT", "IDLETIME", "k"]).await, b":0\r\n");
    server.clock.advance_ms(3_000);
    assert_eq!(conn.cmd(&["TOUCH", "k"]).await, b":1\r\n");
    assert_eq!(conn.cmd(&["OBJECT", "IDLETIME", "k"]).await, b":0\r\n");
    // Another client's use still counts.
    server.clock.advance_ms(3_000);
    let mut other = server.raw().await;
    other.cmd(&["GET", "k"]).await;
    assert_eq!(conn.cmd(&["OBJECT", "IDLETIME", "k"]).await, b":0\r\n");
    assert_eq!(conn.cmd(&["CLIENT", "NO-TOUCH", "OFF"]).await, b"+OK\r\n");
    server.clock.advance_ms(3_000);
    conn.cmd(&["GET", "k"]).await;
    assert_eq!(conn.cmd(&["OBJECT", "IDLETIME", "k"]).await, b":0\r\n");
}

/// A snapshot Redis wrote under an LRU policy carries each key's idle
/// time; tally loads it as Redis would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_times_in_a_redis_snapshot_are_kept() {
    let redis_dir = scratch_dir();
    let Some(redis) =
        RedisServer::start_with(&["--dir", &redis_dir, "--maxmemory-policy", "allkeys-lru"])
    else {
        return;
    };
    let mut conn = RawConn::connect(redis.addr).await;
    conn.cmd(&["SET", "k", "v"]).await;
    let payload = bulk(&conn.cmd(&["DUMP", "k"]).await);
    conn.cmd(&[
        &b"RESTORE"[..],
        b"k",
        b"0",
        &payload,
        b"REPLACE",
        b"IDLETIME",
        b"5000",
    ])
    .await;
    conn.cmd(&["SET", "fresh", "v"]).await;
    assert_eq!(conn.cmd(&["SAVE"]).await, b"+OK\r\n");
    let dir = scratch_dir();
    std::fs::copy(
        Path::new(&redis_dir).join("dump.rdb"),
        Path::new(&dir).join("dump.rdb"),
    )
    .expect("copy the snapshot");
    let tally = Server::new(Config {
        port: 0,
        dir,
        save_points: Vec::new(),
        ..Config::default()
    })
    .start()
    .await
    .expect("tally starts with the file");
    tally_tests::keyspace::wait_loaded(tally.local_addr()).await;
    let mut conn = RawConn::connect(tally.local_addr()).await;
    let idle = String::from_utf8(conn.cmd(&["OBJECT", "IDLETIME", "k"]).await).expect("text");
    let idle: u64 = idle.trim()[1..].parse().expect("seconds");
    assert!((5000..5010).contains(&idle), "{idle}");
    let fresh = conn.cmd(&["OBJECT", "IDLETIME", "fresh"]).await;
    assert!(fresh == b":0\r\n" || fresh == b":1\r\n");
}

/// What an append-only file's replay or a replica's full sync stores was
/// used at the load, as Redis stamps the objects it loads: both run at
/// time 0 (nothing expires during them), and the keys must not read as
/// idle since 1970.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_loaded_from_a_log_or_a_master_read_as_just_used() {
    let idle_of = |reply: Vec<u8>| -> u64 {
        let text = String::from_utf8(reply).expect("text");
        text.trim()[1..].parse().expect("seconds")
    };
    let dir = scratch_dir();
    let config = || Config {
        port: 0,
        dir: dir.clone(),
        appendonly: true,
        save_points: Vec::new(),
        ..Config::default()
    };
    let first = Server::new(config()).start().await.expect("starts");
    tally_tests::keyspace::wait_loaded(first.local_addr()).await;
    let mut conn = RawConn::connect(first.local_addr()).await;
    conn.cmd(&["SET", "k", "v"]).await;
    conn.cmd(&["RPUSH", "list", "a"]).await;
    first.shutdown().await;
    let second = Server::new(config()).start().await.expect("restarts");
    tally_tests::keyspace::wait_loaded(second.local_addr()).await;
    let mut conn = RawConn::connect(second.local_addr()).await;
    assert_eq!(conn.cmd(&["GET", "k"]).await, b"$1\r\nv\r\n");
    for key in ["k", "list"] {
        // Read through OBJECT, which does not stamp.
        let idle = idle_of(conn.cmd(&["OBJECT", "IDLETIME", key]).await);
        assert!(idle < 5, "{key} idle {idle} s after the replay");
    }
    second.shutdown().await;

    let master = TestServer::start_real_clock().await;
    let mut on_master = master.raw().await;
    on_master.cmd(&["SET", "synced", "v"]).await;
    let replica = TestServer::start_real_clock().await;
    let mut on_replica = replica.raw().await;
    let port = master.addr().port().to_string();
    on_replica.cmd(&["REPLICAOF", "127.0.0.1", &port]).await;
    tally_tests::replication::wait_in_sync(master.addr(), replica.addr()).await;
    let idle = idle_of(on_replica.cmd(&["OBJECT", "IDLETIME", "synced"]).await);
    assert!(idle < 5, "idle {idle} s after the full sync");
}
