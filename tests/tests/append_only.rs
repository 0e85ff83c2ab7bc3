//! The append-only file in Redis 7's layout: the same log bytes as
//! redis-server for the same commands, directories that load in either
//! server, exact replays (expiry, scripts, native limiter runs, rewrites
//! under load), damaged logs refused or cut as `aof-load-truncated` says,
//! and write errors refused with MISCONF.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use redis::AsyncCommands;
use tally_server::{Config, Server, ServerHandle};
use tally_tests::keyspace::{
    all_contents, aof_increment, connect, fill, logged_server, persistence_info, run,
    wait_for_persistence, wait_loaded,
};
use tally_tests::{scratch_dir, words, RedisServer, TestServer};

/// The configuration of a tally server keeping its log in `dir`.
fn logging_config(dir: &str, adjust: impl FnOnce(&mut Config)) -> Config {
    let mut config = Config {
        port: 0,
        shards: 4,
        dir: dir.to_string(),
        save_points: Vec::new(),
        appendonly: true,
        ..Config::default()
    };
    adjust(&mut config);
    config
}

/// A tally server keeping its log in `dir`, once its log is loaded.
async fn start_logging(dir: &str, adjust: impl FnOnce(&mut Config)) -> ServerHandle {
    let config = logging_config(dir, adjust);
    let handle = Server::new(config).start().await.expect("tally starts");
    wait_loaded(handle.local_addr()).await;
    handle
}

fn appenddir(dir: &str) -> PathBuf {
    Path::new(dir).join("appendonlydir")
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs `lines` (space-separated words) on a connection.
async fn run_lines(addr: SocketAddr, lines: &[&str]) {
    let mut conn = connect(addr).await;
    for line in lines {
        run(&mut conn, &words(line)).await;
    }
}

/// Writes whose propagated forms Redis 7.0 rewrites (absolute times only,
/// so both servers log the same bytes), each changing something.
const REWRITTEN: &[&str] = &[
    "SET a 1",
    "INCR a",
    "SET b x PXAT 4102444800000",
    "SET c y GET",
    "GETSET c z",
    "GETDEL c",
    "SET f 1.5",
    "INCRBYFLOAT f 0.25",
    "HSET h n 1",
    "HINCRBYFLOAT h n 2.5",
    "EXPIREAT a 4102444800",
    "PEXPIREAT b 4102444801000",
    "GETEX b PXAT 4102444802000",
    "GETEX b PERSIST",
    "EXPIREAT a 1",
    "SADD s only",
    "SPOP s",
    "RPUSH l x y z",
    "LPOP l",
    "ZADD z 1 m 2 n",
    "GEOADD cities 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
    "GEOADD cities XX CH 13.4 38.1 Palermo",
    "GEORADIUS cities 15 37 200 km WITHDIST",
    "GEORADIUS cities 15 37 200 km STORE near",
    "GEORADIUSBYMEMBER cities Palermo 10 km",
    "GEOSEARCHSTORE far cities FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST",
    "XADD st 1-* f 1",
    "XADD st 2 f 2",
    "XADD st 3-5 f 3",
    "XADD st MAXLEN ~ 1 4-0 f 4",
    "XADD st MAXLEN = 3 5-* f 5",
    "XADD st MINID ~ 3 LIMIT 100 6-0 f 6",
    "XADD missing NOMKSTREAM 1-0 f 1",
    "XDEL st 9-9",
    "XDEL st 5-0",
    "XTRIM st MAXLEN ~ 0",
    "XTRIM st MAXLEN 100",
    "XTRIM st MINID 6",
    "XSETID st 10-0 ENTRIESADDED 20 MAXDELETEDID 9-0",
    "SELECT 5",
    "SET in-five 1",
    "MULTI",
    "INCR in-five",
    "SET other 2",
    "EXEC",
    "SELECT 0",
    "MULTI",
    "SET x 1",
    "SET y 2",
    "EXEC",
];

/// The same commands leave the same increment, byte for byte, in tally's
/// log and in redis-server's: SELECT where the database changes, Redis
/// 7.0's rewrites (SET ... PXAT, PEXPIREAT, DEL for a past deadline, SET
/// for GETSET, SREM for SPOP, SET KEEPTTL for INCRBYFLOAT, HSET for
/// HINCRBYFLOAT, PERSIST, ZADD for GEOADD, nothing for a GEORADIUS
/// without STORE, XADD with the ID it added and an approximate trim made
/// exact, nothing for an XDEL or XTRIM that removed nothing), and a
/// transaction as MULTI/EXEC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_holds_the_bytes_redis_writes() {
    let redis_dir = scratch_dir();
    let Some(redis) = RedisServer::start_with(&["--dir", &redis_dir, "--appendonly", "yes"]) else {
        return;
    };
    let tally_dir = scratch_dir();
    let tally = start_logging(&tally_dir, |_| {}).await;
    run_lines(redis.addr, REWRITTEN).await;
    run_lines(tally.local_addr(), REWRITTEN).await;
    let incr = "appendonly.aof.1.incr.aof";
    let redis_log = read(&appenddir(&redis_dir).join(incr));
    let tally_log = read(&appenddir(&tally_dir).join(incr));
    assert_eq!(
        String::from_utf8_lossy(&tally_log),
        String::from_utf8_lossy(&redis_log)
    );
    assert_eq!(
        read(&appenddir(&tally_dir).join("appendonly.aof.manifest")),
        read(&appenddir(&redis_dir).join("appendonly.aof.manifest"))
    );
    tally.shutdown().await;
}

/// Consumer-group commands, each doing something or nothing once.
const GROUP_LINES: &[&str] = &[
    "XADD gs 1-0 f 1",
    "XADD gs 2-0 f 2",
    "XADD gs 3-0 f 3",
    "XADD gs 4-0 f 4",
    "XGROUP CREATE gs g 0",
    "XGROUP CREATE gs g2 $ ENTRIESREAD 4",
    "XGROUP CREATE gs g 0",
    "XGROUP CREATE gs2 g $ MKSTREAM",
    "XREADGROUP GROUP g alice COUNT 2 STREAMS gs >",
    "XREADGROUP GROUP g bob NOACK COUNT 1 STREAMS gs >",
    "XREADGROUP GROUP g alice STREAMS gs 0",
    "XREADGROUP GROUP g2 alice STREAMS gs >",
    "XACK gs g 1-0",
    "XACK gs g 9-0",
    "XCLAIM gs g carol 0 2-0 TIME 1000",
    "XCLAIM gs g carol 0 9-0 LASTID 3-5",
    "XAUTOCLAIM gs g dave 0 -",
    "XDEL gs 2-0",
    "XAUTOCLAIM gs g erin 0 -",
    "XGROUP CREATECONSUMER gs g frank",
    "XGROUP CREATECONSUMER gs g frank",
    "XGROUP DELCONSUMER gs g frank",
    "XGROUP DELCONSUMER gs g nosuch",
    "XGROUP SETID gs g2 1-0 ENTRIESREAD 1",
    "XGROUP DESTROY gs g2",
    "XGROUP DESTROY gs g2",
];

/// What a replay of the group log must rebuild (clock readings blanked).
const GROUP_VIEWS: &[&str] = &[
    "XINFO GROUPS gs",
    "XINFO GROUPS gs2",
    "XPENDING gs g - + 100",
    "XINFO STREAM gs FULL",
];

/// Runs `lines`, errors included (a duplicate group is refused).
async fn run_raw_lines(addr: SocketAddr, lines: &[&str]) {
    let mut conn = tally_tests::RawConn::connect(addr).await;
    for line in lines {
        conn.cmd(&words(line)).await;
    }
}

async fn group_views(addr: SocketAddr) -> Vec<Vec<u8>> {
    let mut conn = tally_tests::RawConn::connect(addr).await;
    let mut out = Vec::new();
    for line in GROUP_VIEWS {
        out.push(tally_tests::mask_times(conn.cmd(&words(line)).await));
    }
    out
}

/// Consumer groups are logged as Redis 7.0 propagates them: a delivery or
/// a claim as the XCLAIM that sets its pending entry (its time included),
/// a NOACK read as XGROUP SETID, a consumer a NOACK read made as XGROUP
/// CREATECONSUMER, nothing for what changed nothing. The logs are the
/// same bytes but for the delivery times, and each replays in the other
/// server to the same groups and pending entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_changes_are_logged_as_redis_logs_them() {
    let redis_dir = scratch_dir();
    let Some(redis) = RedisServer::start_with(&["--dir", &redis_dir, "--appendonly", "yes"]) else {
        return;
    };
    let tally_dir = scratch_dir();
    let tally = start_logging(&tally_dir, |_| {}).await;
    run_raw_lines(redis.addr, GROUP_LINES).await;
    run_raw_lines(tally.local_addr(), GROUP_LINES).await;
    let incr = "appendonly.aof.1.incr.aof";
    let redis_log = read(&appenddir(&redis_dir).join(incr));
    let tally_log = read(&appenddir(&tally_dir).join(incr));
    assert!(occurrences(&tally_log, b"XCLAIM") >= 4);
    assert_eq!(
        String::from_utf8_lossy(&tally_tests::mask_times(tally_log)),
        String::from_utf8_lossy(&tally_tests::mask_times(redis_log))
    );
    let expected = group_views(tally.local_addr()).await;
    assert_eq!(group_views(redis.addr).await, expected);
    tally.shutdown().await;
    drop(redis);
    // Each log replays in the other server.
    let from_tally = copy_log(&tally_dir);
    if let Some(redis) = RedisServer::start_with(&["--dir", &from_tally, "--appendonly", "yes"]) {
        assert_eq!(
            group_views(redis.addr).await,
            expected,
            "tally's log in redis-server"
        );
    }
    let from_redis = copy_log(&redis_dir);
    let tally = start_logging(&from_redis, |_| {}).await;
    assert_eq!(
        group_views(tally.local_addr()).await,
        expected,
        "redis-server's log in tally"
    );
    tally.shutdown().await;
}

/// How many times `needle` occurs in `haystack`.
fn occurrences(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|window| *window == needle)
        .count()
}

/// Under `everysec`, a write is in the file (the page cache, which a
/// crash of the process does not lose) before its reply goes, also when
/// many connections on both workers write at once and one connection's
/// write carries another's changes: each client, on each batch's replies,
/// finds every INCR it was answered for in the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_write_is_in_the_file_under_concurrent_writers() {
    const CLIENTS: usize = 16;
    const BATCHES: usize = 12;
    const PIPELINE: usize = 16;
    let dir = scratch_dir();
    let server = start_logging(&dir, |_| {}).await;
    let addr = server.local_addr();
    let log = appenddir(&dir).join("appendonly.aof.1.incr.aof");
    let mut clients = Vec::new();
    for client in 0..CLIENTS {
        let log = log.clone();
        clients.push(tokio::spawn(async move {
            let mut conn = connect(addr).await;
            let key = format!("writer:{client:02}:count");
            // The key as the log spells it, in an INCR's RESP.
            let logged = format!("$4\r\nINCR\r\n${}\r\n{key}\r\n", key.len());
            for batch in 1..=BATCHES {
                let mut pipe = redis::pipe();
                for _ in 0..PIPELINE {
                    pipe.cmd("INCR").arg(&key);
                }
                let counts: Vec<i64> = pipe.query_async(&mut conn).await.expect("INCRs");
                assert_eq!(counts.last(), Some(&((batch * PIPELINE) as i64)));
                let in_file = occurrences(&read(&log), logged.as_bytes());
                assert!(
                    in_file >= batch * PIPELINE,
                    "{key}: {} INCRs answered, {in_file} in the file",
                    batch * PIPELINE
                );
            }
        }));
    }
    for client in clients {
        client.await.expect("client");
    }
    server.shutdown().await;
}

/// Copies one server's append-only directory into a fresh `dir`.
fn copy_log(from: &str) -> String {
    let to = scratch_dir();
    let target = appenddir(&to);
    std::fs::create_dir_all(&target).expect("mkdir");
    for entry in std::fs::read_dir(appenddir(from)).expect("log directory") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), target.join(entry.file_name())).expect("copy");
    }
    to
}

/// Every type and encoding, TTLs and a second database: tally's log loads
/// in redis-server with the same contents, and redis-server's in tally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_load_in_either_server() {
    let tally_dir = scratch_dir();
    let tally = start_logging(&tally_dir, |_| {}).await;
    fill(tally.local_addr()).await;
    run_lines(tally.local_addr(), &["SELECT 3", "SET in-three 1 EX 1000"]).await;
    let expected = [
        all_contents(tally.local_addr(), 0).await,
        all_contents(tally.local_addr(), 3).await,
    ];
    let copy = copy_log(&tally_dir);
    let Some(redis) = RedisServer::start_with(&["--dir", &copy, "--appendonly", "yes"]) else {
        tally.shutdown().await;
        return;
    };
    for (db, contents) in [0, 3].into_iter().zip(&expected) {
        assert_eq!(&all_contents(redis.addr, db).await, contents, "db {db}");
    }
    tally.shutdown().await;

    // And back: what redis-server logs, tally loads.
    let redis_dir = scratch_dir();
    let Some(redis) = RedisServer::start_with(&["--dir", &redis_dir, "--appendonly", "yes"]) else {
        return;
    };
    fill(redis.addr).await;
    run_lines(redis.addr, &["SELECT 2", "SET in-two 1 EX 1000"]).await;
    let mut conn = connect(redis.addr).await;
    let _: () = redis::cmd("EVAL")
        .arg("redis.call('incr','counted'); redis.call('expire','counted',60)")
        .arg(0)
        .query_async(&mut conn)
        .await
        .expect("EVAL");
    let expected = [
        all_contents(redis.addr, 0).await,
        all_contents(redis.addr, 2).await,
    ];
    let copy = copy_log(&redis_dir);
    let tally = start_logging(&copy, |_| {}).await;
    for (db, contents) in [0, 2].into_iter().zip(&expected) {
        assert_eq!(
            &all_contents(tally.local_addr(), db).await,
            contents,
            "db {db}"
        );
    }
    tally.shutdown().await;
}

/// A key that expires is logged as DEL where it expired, so a replay
/// (which expires nothing while it runs) starts a counter made again
/// after the expiry from 1, not from the old count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_is_logged_where_it_happened() {
    let dir = scratch_dir();
    let server = logged_server(&dir).await;
    run_lines(server.addr(), &["INCRBY hits 41", "PEXPIRE hits 1000"]).await;
    server.clock.advance_ms(1500);
    run_lines(server.addr(), &["INCR hits"]).await;
    let log = aof_increment(&dir);
    assert!(
        log.ends_with("*2\r\n$3\r\nDEL\r\n$4\r\nhits\r\n*2\r\n$4\r\nINCR\r\n$4\r\nhits\r\n"),
        "{log:?}"
    );
    server.handle.shutdown().await;
    let again = start_logging(&dir, |_| {}).await;
    let mut conn = connect(again.local_addr()).await;
    let hits: i64 = conn.get("hits").await.expect("GET");
    assert_eq!(hits, 1);
    let ttl: i64 = conn.pttl("hits").await.expect("PTTL");
    assert_eq!(ttl, -1);
    again.shutdown().await;
}

/// A script is logged by its effects in one MULTI/EXEC, and a native run
/// of a known limiter script logs exactly what its Lua run logs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_are_logged_by_their_effects() {
    let script = tally_lua::SCRIPTS
        .iter()
        .find(|s| s.name == "sliding_window")
        .expect("the sliding-window script");
    let mut logs = Vec::new();
    for native in [true, false] {
        let dir = scratch_dir();
        let server = TestServer::start_with(|c| {
            c.dir = dir.clone();
            c.appendonly = true;
            c.lua_native_scripts = native;
        })
        .await;
        wait_loaded(server.addr()).await;
        let mut conn = connect(server.addr()).await;
        let reply: Vec<i64> = redis::cmd("EVAL")
            .arg(script.source)
            .arg(2)
            .arg("rl:u:1720000000")
            .arg("rl:u:1719999940")
            .arg(10)
            .arg(60)
            .arg(1_720_000_000u64)
            .arg(1)
            .query_async(&mut conn)
            .await
            .expect("EVAL");
        assert_eq!(reply[0], 1);
        logs.push(aof_increment(&dir));
        server.handle.shutdown().await;
    }
    let deadline = tally_tests::T0_MS + 120_000;
    let expected = format!(
        "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$15\r\nrl:u:1720000000\r\n\
         *3\r\n$9\r\nPEXPIREAT\r\n$15\r\nrl:u:1720000000\r\n$13\r\n{deadline}\r\n*1\r\n$4\r\nEXEC\r\n"
    );
    assert_eq!(logs[0], expected, "native run");
    assert_eq!(logs[1], expected, "Lua run");
}

/// The lease script of tally-client's cached mode gives back (DECRBY)
/// before it leases (INCRBY, EXPIRE): its native run logs the same commands
/// as its Lua run, in the same order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_lease_sync_is_logged_as_its_lua_run() {
    let mut logs = Vec::new();
    for native in [true, false] {
        let dir = scratch_dir();
        let server = TestServer::start_with(|c| {
            c.dir = dir.clone();
            c.appendonly = true;
            c.lua_native_scripts = native;
        })
        .await;
        wait_loaded(server.addr()).await;
        let mut conn = connect(server.addr()).await;
        let _: () = redis::cmd("SET")
            .arg("rl:{u}:old")
            .arg(7)
            .query_async(&mut conn)
            .await
            .expect("SET");
        // Give 5 back on the old window's key, lease 10 at a cost of 1.
        let reply: (i64, Vec<i64>, Vec<i64>, i64, Vec<i64>, i64, i64) = redis::cmd("EVAL")
            .arg(tally_lua::lease::SOURCE)
            .arg(3)
            .arg(&["rl:{u}:1", "rl:{u}:0", "rl:{u}:old"])
            .arg(&[100, 60, 5, 10, 1])
            .query_async(&mut conn)
            .await
            .expect("EVAL");
        assert_eq!((reply.0, &reply.4), (1, &vec![10]));
        logs.push(aof_increment(&dir));
        server.handle.shutdown().await;
    }
    assert!(
        logs[0].contains("$6\r\nDECRBY\r\n$10\r\nrl:{u}:old\r\n$1\r\n5\r\n"),
        "{}",
        logs[0]
    );
    assert!(
        logs[0].contains("$6\r\nINCRBY\r\n$8\r\nrl:{u}:1\r\n$2\r\n11\r\n"),
        "{}",
        logs[0]
    );
    assert_eq!(logs[0], logs[1], "native and Lua runs log alike");
}

/// The limiter libraries' scripts, run natively, log what their Lua runs
/// log on each path: a new key, a counting key, a key without a deadline;
/// Spring Cloud Gateway's SETEXs (with TIME's seconds) as SET ... PXAT;
/// `limits`' sliding window shifting its current window (RENAME, SET) and
/// counting; redis_rate's GCRA SET with its expiry; bucket4j's first
/// state and compare-and-swap; `limits`' moving window pushing, trimming
/// and expiring its list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_library_scripts_are_logged_as_their_lua_runs() {
    let source = |name: &str| {
        tally_lua::SCRIPTS
            .iter()
            .find(|s| s.name == name)
            .expect("a known script")
            .source
    };
    let calls: [(&str, &[&str], &[&str]); 13] = [
        ("limits_fixed_window", &["rl:limits"], &["60", "1"]),
        ("limits_fixed_window", &["rl:limits"], &["60", "1"]),
        ("rate_limit_redis", &["rl:express"], &["1000"]),
        ("rate_limit_redis", &["rl:express"], &["1000"]),
        (
            "rate_limiter_flexible",
            &["rl:flexible"],
            &["2", "10", "100", "10"],
        ),
        (
            "rate_limiter_flexible",
            &["rl:flexible:persistent"],
            &["2", "10", "100", "10"],
        ),
        (
            "rate_limiter_flexible",
            &["rl:flexible:persistent"],
            &["2", "10", "100", "10"],
        ),
        (
            "spring_cloud_gateway",
            &["rl:{scg}.tokens", "rl:{scg}.timestamp"],
            &["10", "20", "", "1"],
        ),
        // The current window has 30 s of 60 left: it shifts, then counts.
        (
            "limits_sliding_window",
            &["rl:{lsw}/prev", "rl:{lsw}/cur"],
            &["10", "60", "6"],
        ),
        ("redis_rate_allow_n", &["rate:user"], &["5", "10", "1", "1"]),
        ("bucket4j_set_nx_px", &["bucket4j:b"], &["state-0", "5000"]),
        (
            "bucket4j_compare_and_swap",
            &["bucket4j:b"],
            &["state-0", "state-1"],
        ),
        (
            "limits_moving_window",
            &["LIMITS:mw"],
            &["1720000000.5", "3", "60", "2"],
        ),
    ];
    let mut logs = Vec::new();
    for native in [true, false] {
        let dir = scratch_dir();
        let server = TestServer::start_with(|c| {
            c.dir = dir.clone();
            c.appendonly = true;
            c.lua_native_scripts = native;
        })
        .await;
        wait_loaded(server.addr()).await;
        let mut conn = connect(server.addr()).await;
        for key in ["rl:express", "rl:flexible:persistent"] {
            let _: () = redis::cmd("SET")
                .arg(key)
                .arg(5)
                .query_async(&mut conn)
                .await
                .expect("SET");
        }
        let _: () = redis::cmd("SET")
            .arg("rl:{lsw}/cur")
            .arg(8)
            .arg("PX")
            .arg(30_000)
            .query_async(&mut conn)
            .await
            .expect("SET");
        let mut replies = Vec::new();
        for (name, keys, args) in calls {
            let reply: redis::Value = redis::cmd("EVAL")
                .arg(source(name))
                .arg(keys.len())
                .arg(keys)
                .arg(args)
                .query_async(&mut conn)
                .await
                .expect("EVAL");
            replies.push(reply);
        }
        let info: String = redis::cmd("INFO")
            .arg("limiter_scripts")
            .query_async(&mut conn)
            .await
            .expect("INFO");
        let native_runs: u64 = info
            .lines()
            .filter(|l| l.starts_with("script_"))
            .filter_map(|l| l.split(',').find_map(|f| f.strip_prefix("native_runs=")))
            .map(|n| n.parse::<u64>().expect("a count"))
            .sum();
        assert_eq!(native_runs, if native { 13 } else { 0 }, "{info}");
        logs.push((aof_increment(&dir), replies));
        server.handle.shutdown().await;
    }
    let deadline = |ms: u64| (tally_tests::T0_MS + ms).to_string();
    let log = &logs[0].0;
    for expected in [
        format!("$6\r\nincrby\r\n$9\r\nrl:limits\r\n$1\r\n1\r\n*3\r\n$9\r\nPEXPIREAT\r\n$9\r\nrl:limits\r\n$13\r\n{}", deadline(60_000)),
        format!("$3\r\nSET\r\n$10\r\nrl:express\r\n$1\r\n1\r\n$4\r\nPXAT\r\n$13\r\n{}", deadline(1000)),
        format!("$3\r\nSET\r\n$15\r\nrl:{{scg}}.tokens\r\n$2\r\n19\r\n$4\r\nPXAT\r\n$13\r\n{}", deadline(4000)),
        format!("$3\r\nSET\r\n$18\r\nrl:{{scg}}.timestamp\r\n$10\r\n1720000000\r\n$4\r\nPXAT\r\n$13\r\n{}", deadline(4000)),
        "$4\r\nINCR\r\n$10\r\nrl:express\r\n".to_string(),
        format!("*4\r\n$5\r\nlpush\r\n$9\r\nLIMITS:mw\r\n$12\r\n1720000000.5\r\n$12\r\n1720000000.5\r\n*4\r\n$5\r\nltrim\r\n$9\r\nLIMITS:mw\r\n$1\r\n0\r\n$1\r\n2\r\n*3\r\n$9\r\nPEXPIREAT\r\n$9\r\nLIMITS:mw\r\n$13\r\n{}", deadline(60_000)),
        format!("$3\r\nSET\r\n$10\r\nbucket4j:b\r\n$7\r\nstate-0\r\n$4\r\nPXAT\r\n$13\r\n{}\r\n*3\r\n$3\r\nset\r\n$10\r\nbucket4j:b\r\n$7\r\nstate-1\r\n", deadline(5000)),
        // The TAT, 0.1 s ahead, to the next whole second.
        format!("$3\r\nSET\r\n$9\r\nrate:user\r\n$18\r\n236771200.09999999\r\n$4\r\nPXAT\r\n$13\r\n{}", deadline(1000)),
        format!("$6\r\nrename\r\n$12\r\nrl:{{lsw}}/cur\r\n$13\r\nrl:{{lsw}}/prev\r\n*5\r\n$3\r\nSET\r\n$12\r\nrl:{{lsw}}/cur\r\n$1\r\n0\r\n$4\r\nPXAT\r\n$13\r\n{}\r\n*3\r\n$6\r\nincrby\r\n$12\r\nrl:{{lsw}}/cur\r\n$1\r\n6\r\n", deadline(90_000)),
        format!("$3\r\nSET\r\n$11\r\nrl:flexible\r\n$1\r\n0\r\n$4\r\nPXAT\r\n$13\r\n{}", deadline(10_000)),
        format!("$9\r\nPEXPIREAT\r\n$22\r\nrl:flexible:persistent\r\n$13\r\n{}", deadline(10_000)),
    ] {
        assert!(log.contains(&expected), "{expected:?} not in {log}");
    }
    assert_eq!(logs[0], logs[1], "native and Lua runs log and reply alike");
}

/// A log cut inside its last command loads up to the last whole one with
/// `aof-load-truncated yes` (the default), which cuts the file there; with
/// `no`, or when the damage is not at the end, the start fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_log_is_cut_or_refused() {
    let dir = scratch_dir();
    let server = start_logging(&dir, |_| {}).await;
    run_lines(server.local_addr(), &["SET kept 1", "SET also 2"]).await;
    server.shutdown().await;
    let incr = appenddir(&dir).join("appendonly.aof.1.incr.aof");
    let whole = read(&incr);
    // Half of a command, and an unfinished transaction.
    let mut damaged = whole.clone();
    damaged.extend_from_slice(
        b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$4\r\nlost\r\n$1\r\n3\r\n*3\r\n$3\r\nSE",
    );
    std::fs::write(&incr, &damaged).expect("write");

    let refused = start_failing(&dir, |c| c.aof_load_truncated = false).await;
    assert!(refused, "aof-load-truncated no refuses a cut log");
    assert_eq!(read(&incr), damaged, "a refused log is left as it was");

    let server = start_logging(&dir, |_| {}).await;
    let mut conn = connect(server.local_addr()).await;
    let values: Vec<Option<String>> = redis::cmd("MGET")
        .arg(&["kept", "also", "lost"])
        .query_async(&mut conn)
        .await
        .expect("MGET");
    assert_eq!(values, [Some("1".into()), Some("2".into()), None]);
    server.shutdown().await;
    assert_eq!(read(&incr), whole, "cut back to the last whole command");

    // Garbage in the middle is a format error, whatever the setting.
    let mut garbage = b"not a command\r\n".to_vec();
    garbage.extend_from_slice(&whole);
    std::fs::write(&incr, &garbage).expect("write");
    assert!(start_failing(&dir, |_| {}).await, "a bad format is refused");
}

/// Starts a server on `dir` and tells whether its load failed (the server
/// then shuts itself down).
async fn start_failing(dir: &str, adjust: impl FnOnce(&mut Config)) -> bool {
    let config = logging_config(dir, adjust);
    let handle = Server::new(config).start().await.expect("the port opens");
    let shared = handle.shared().clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while shared
        .persistence
        .loading
        .load(std::sync::atomic::Ordering::SeqCst)
    {
        assert!(std::time::Instant::now() < deadline, "load never ended");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let failed = shared
        .persistence
        .fatal
        .load(std::sync::atomic::Ordering::SeqCst);
    if !failed {
        handle.shutdown().await;
    }
    failed
}

/// BGREWRITEAOF while 20 clients move counts between keys in MULTI/EXEC
/// (the sum stays constant): the new base plus the increment started at
/// its moment replay to exactly the live dataset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewrite_under_load_replays_exactly() {
    let dir = scratch_dir();
    let server = start_logging(&dir, |_| {}).await;
    let addr = server.local_addr();
    const KEYS: usize = 8;
    run_lines(
        addr,
        &["MSET k0 1000 k1 1000 k2 1000 k3 1000 k4 1000 k5 1000 k6 1000 k7 1000"],
    )
    .await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..20usize {
        let stop = stop.clone();
        writers.push(tokio::spawn(async move {
            let mut conn = connect(addr).await;
            let mut i = w;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let from = format!("k{}", i % KEYS);
                let to = format!("k{}", (i * 7 + 3) % KEYS);
                let _: () = redis::pipe()
                    .atomic()
                    .cmd("DECRBY")
                    .arg(&from)
                    .arg(3)
                    .ignore()
                    .cmd("INCRBY")
                    .arg(&to)
                    .arg(3)
                    .ignore()
                    .query_async(&mut conn)
                    .await
                    .expect("transaction");
                i += 1;
            }
        }));
    }
    let mut conn = connect(addr).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started: String = redis::cmd("BGREWRITEAOF")
        .query_async(&mut conn)
        .await
        .expect("BGREWRITEAOF");
    assert_eq!(started, "Background append only file rewriting started");
    wait_for_persistence(&mut conn, "the rewrite never ended", |info| {
        info.contains("aof_rewrite_in_progress:0\r\n") && info.contains("aof_rewrites:1\r\n")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for writer in writers {
        writer.await.expect("writer");
    }
    let live = all_contents(addr, 0).await;
    server.shutdown().await;
    let manifest = String::from_utf8_lossy(&read(&appenddir(&dir).join("appendonly.aof.manifest")))
        .into_owned();
    assert_eq!(
        manifest,
        "file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n"
    );
    assert!(!appenddir(&dir).join("appendonly.aof.1.incr.aof").exists());
    let again = start_logging(&dir, |_| {}).await;
    assert_eq!(all_contents(again.local_addr(), 0).await, live);
    let mut conn = connect(again.local_addr()).await;
    let mut sum = 0i64;
    for k in 0..KEYS {
        let v: i64 = conn.get(format!("k{k}")).await.expect("GET");
        sum += v;
    }
    assert_eq!(sum, 8000);
    again.shutdown().await;
}

/// CONFIG SET appendonly yes writes a base of what is there and logs from
/// then on; a restart with the log loads both. BGSAVE during the rewrite
/// waits its turn, as Redis's child does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_turns_on_at_run_time() {
    let dir = scratch_dir();
    let server = start_logging(&dir, |c| c.appendonly = false).await;
    let addr = server.local_addr();
    fill(addr).await;
    let mut conn = connect(addr).await;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendonly")
        .arg("yes")
        .query_async(&mut conn)
        .await
        .expect("CONFIG SET");
    wait_for_persistence(&mut conn, "the first rewrite never ended", |info| {
        info.contains("aof_rewrites:1\r\n") && info.contains("aof_rewrite_in_progress:0\r\n")
    })
    .await;
    let info = persistence_info(&mut conn).await;
    assert!(info.contains("aof_enabled:1\r\n"), "{info}");
    run_lines(addr, &["SET after-on 1"]).await;
    let live = all_contents(addr, 0).await;
    server.shutdown().await;
    assert_eq!(
        String::from_utf8_lossy(&read(&appenddir(&dir).join("appendonly.aof.manifest"))),
        "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    let again = start_logging(&dir, |_| {}).await;
    assert_eq!(all_contents(again.local_addr(), 0).await, live);
    again.shutdown().await;
}

/// A write to the log that fails (the increment is /dev/full) refuses
/// writes and PING with Redis's MISCONF text while it fails; reads go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_log_write_refuses_writes() {
    if !Path::new("/dev/full").exists() {
        return;
    }
    let dir = scratch_dir();
    let server = start_logging(&dir, |c| c.appendonly = false).await;
    // Turned on at run time, the log starts in Redis's temporary increment.
    let log = appenddir(&dir);
    std::fs::create_dir_all(&log).expect("mkdir");
    std::os::unix::fs::symlink("/dev/full", log.join("temp-appendonly.aof.incr")).expect("link");
    let mut raw = tally_tests::RawConn::connect(server.local_addr()).await;
    assert_eq!(
        raw.cmd(&["CONFIG", "SET", "appendonly", "yes"]).await,
        b"+OK\r\n"
    );
    // The first write is made and answered; the log could not take it.
    assert_eq!(raw.cmd(&["SET", "k", "v"]).await, b"+OK\r\n");
    let misconf = b"-MISCONF Errors writing to the AOF file: No space left on device\r\n";
    assert_eq!(raw.cmd(&["SET", "k", "w"]).await, misconf);
    assert_eq!(raw.cmd(&["PING"]).await, misconf);
    assert_eq!(raw.cmd(&["GET", "k"]).await, b"$1\r\nv\r\n");
    let info = persistence_info(&mut connect(server.local_addr()).await).await;
    assert!(info.contains("aof_last_write_status:err\r\n"), "{info}");
    server.shutdown().await;
}

/// Under `appendfsync always`, a write the log cannot fsync is not
/// acknowledged: its client is disconnected unanswered, and writes after
/// it get MISCONF.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlogged_write_is_not_acknowledged_under_always() {
    if !Path::new("/dev/full").exists() {
        return;
    }
    let dir = scratch_dir();
    let server = start_logging(&dir, |c| {
        c.appendonly = false;
        c.appendfsync = tally_server::config::Fsync::Always;
    })
    .await;
    let log = appenddir(&dir);
    std::fs::create_dir_all(&log).expect("mkdir");
    std::os::unix::fs::symlink("/dev/full", log.join("temp-appendonly.aof.incr")).expect("link");
    let mut admin = tally_tests::RawConn::connect(server.local_addr()).await;
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "appendonly", "yes"]).await,
        b"+OK\r\n"
    );
    let mut writer = tally_tests::RawConn::connect(server.local_addr()).await;
    writer
        .send(&tally_tests::encode_command(&["SET", "k", "v"]))
        .await;
    assert_eq!(writer.read_until_closed().await, b"");
    let refused = admin.cmd(&["SET", "k", "w"]).await;
    assert!(
        refused.starts_with(b"-MISCONF Errors writing to the AOF file"),
        "{refused:?}"
    );
    server.shutdown().await;
}

/// A Redis 6 style single `appendonly.aof` in `dir` (an RDB preamble and
/// commands after it) is taken over into the directory as the base, as
/// Redis 7 upgrades it, and loads whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_style_log_is_taken_over() {
    let source = TestServer::start().await;
    run_lines(source.addr(), &["SET from-preamble 1", "RPUSH list a b"]).await;
    run_lines(source.addr(), &["SAVE"]).await;
    let source_dir = source.handle.shared().config.read().dir.clone();
    let mut old_style = read(&Path::new(&source_dir).join("dump.rdb"));
    old_style.extend_from_slice(&tally_tests::encode_command(&["SELECT", "0"]));
    old_style.extend_from_slice(&tally_tests::encode_command(&["INCR", "from-preamble"]));
    old_style.extend_from_slice(&tally_tests::encode_command(&["SET", "from-tail", "yes"]));
    let dir = scratch_dir();
    std::fs::write(Path::new(&dir).join("appendonly.aof"), &old_style).expect("write");
    let server = start_logging(&dir, |_| {}).await;
    let mut conn = connect(server.local_addr()).await;
    let values: Vec<Option<String>> = redis::cmd("MGET")
        .arg(&["from-preamble", "from-tail"])
        .query_async(&mut conn)
        .await
        .expect("MGET");
    assert_eq!(values, [Some("2".into()), Some("yes".into())]);
    let list: Vec<String> = conn.lrange("list", 0, -1).await.expect("LRANGE");
    assert_eq!(list, ["a", "b"]);
    server.shutdown().await;
    assert!(!Path::new(&dir).join("appendonly.aof").exists());
    assert_eq!(read(&appenddir(&dir).join("appendonly.aof")), old_style);
    assert_eq!(
        String::from_utf8_lossy(&read(&appenddir(&dir).join("appendonly.aof.manifest"))),
        "file appendonly.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
}
