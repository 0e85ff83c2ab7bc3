//! Hash field expiry (Redis 7.4's HEXPIRE family, Redis 8.0's HGETEX and
//! HSETEX): replies against Redis 8's, byte for byte, and what no single
//! reply shows (the sweep, events, persistence and propagation).
//!
//! No Redis 8 runs in CI: `tests/data/hash_field_expiry.transcript` holds
//! redis-server 8.0.6's replies to `hash_field_expiry.commands`, recorded
//! with `tools/record_transcript.py` against `tools/redis8.sh`'s server.

use std::net::SocketAddr;
use std::time::Duration;

use tally_server::expiry::sweep_once;
use tally_tests::process::TallyProcess;
use tally_tests::{words, RawConn, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_are_redis_8_s_byte_for_byte() {
    let text = include_str!("../data/hash_field_expiry.transcript");
    assert!(tally_tests::transcript::replay(text).await > 150);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_whose_last_field_expired_is_gone_with_hexpired_and_del_events() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    let mut events = server.raw().await;
    conn.line("CONFIG SET notify-keyspace-events KEA").await;
    events.line("PSUBSCRIBE __keyevent@0__:*").await;
    conn.line("HSET g a 1 b 2").await;
    conn.line("HPEXPIRE g 100 FIELDS 2 a b").await;
    server.clock.advance_ms(101);
    // Redis keeps such a key until its active expiry comes by; tally drops
    // it as soon as anything looks at it (docs/compatibility.md).
    assert_eq!(conn.line("EXISTS g").await, ":0\r\n");
    assert_eq!(conn.line("DBSIZE").await, ":0\r\n");
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(String::from_utf8_lossy(&events.reply().await).into_owned());
    }
    let names: Vec<&str> = seen
        .iter()
        .map(|m| m.split("\r\n").nth(6).unwrap_or(""))
        .collect();
    assert_eq!(
        names,
        [
            "__keyevent@0__:hset",
            "__keyevent@0__:hexpire",
            "__keyevent@0__:hexpired",
            "__keyevent@0__:del"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_reclaims_fields_nobody_reads() {
    let server = TestServer::start().await;
    let shared = server.handle.shared().clone();
    let mut conn = server.raw().await;
    for i in 0..300 {
        conn.line(&format!("HSET gone:{i} a 1 b 2")).await;
        conn.line(&format!("HPEXPIRE gone:{i} 1000 FIELDS 2 a b"))
            .await;
        conn.line(&format!("HSET kept:{i} a 1 b 2")).await;
        conn.line(&format!("HPEXPIRE kept:{i} 1000 FIELDS 1 a"))
            .await;
        // Pushed later by every request, as a limiter would: no new hint.
        conn.line(&format!("HPEXPIRE kept:{i} 2000 FIELDS 1 b"))
            .await;
    }
    assert_eq!(conn.line("DBSIZE").await, ":600\r\n");
    server.clock.advance_ms(1001);
    sweep_once(&shared);
    assert_eq!(conn.line("DBSIZE").await, ":300\r\n");
    let info = conn.line("INFO stats").await;
    assert!(info.contains("expired_subkeys:900\r\n"), "{info}");
    server.clock.advance_ms(1000);
    sweep_once(&shared);
    assert_eq!(conn.line("DBSIZE").await, ":0\r\n");
    let info = conn.line("INFO stats").await;
    assert!(info.contains("expired_subkeys:1200\r\n"), "{info}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_leaves_fields_whose_deadline_moved_later() {
    let server = TestServer::start().await;
    let shared = server.handle.shared().clone();
    let mut conn = server.raw().await;
    conn.line("HSET h a 1").await;
    conn.line("HPEXPIRE h 100 FIELDS 1 a").await;
    conn.line("HPEXPIRE h 5000 FIELDS 1 a").await;
    server.clock.advance_ms(200);
    sweep_once(&shared);
    let info = conn.line("INFO stats").await;
    assert!(info.contains("expired_subkeys:0\r\n"), "{info}");
    assert_eq!(conn.line("HPTTL h FIELDS 1 a").await, "*1\r\n:4800\r\n");
    // An earlier deadline is hinted at once.
    conn.line("HPEXPIRE h 10 FIELDS 1 a").await;
    server.clock.advance_ms(11);
    sweep_once(&shared);
    let info = conn.line("INFO stats").await;
    assert!(info.contains("expired_subkeys:1\r\n"), "{info}");
}

async fn say(addr: SocketAddr, line: &str) -> String {
    let mut conn = RawConn::connect(addr).await;
    conn.line(line).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_survive_a_snapshot_and_the_append_only_file() {
    for args in [&[][..], &["--appendonly", "yes"][..]] {
        let mut tally = TallyProcess::start(args);
        let addr = tally.addr();
        say(addr, "HSET small a 1 b 2 c 3").await;
        say(addr, "HPEXPIREAT small 1900000000000 FIELDS 1 c").await;
        say(addr, "HPEXPIREAT small 1800000000000 FIELDS 1 b").await;
        let fields: Vec<String> = (0..600).map(|i| format!("f{i} v")).collect();
        say(addr, &format!("HSET big {}", fields.join(" "))).await;
        say(addr, "HPEXPIREAT big 1900000000007 FIELDS 2 f1 f2").await;
        say(addr, "HEXPIRE big 100000 FIELDS 1 f3").await;
        say(addr, "HPERSIST big FIELDS 1 f2").await;
        say(addr, "HSETEX new PXAT 1900000000009 FIELDS 1 n 1").await;
        say(addr, "HSETEX new KEEPTTL FIELDS 1 n 2").await;
        say(addr, "HGETEX new PXAT 1900000000010 FIELDS 1 n").await;
        if args.is_empty() {
            assert_eq!(say(addr, "SAVE").await, "+OK\r\n");
        }
        tally.kill();
        tally.restart();
        let addr = tally.addr();
        let ctx = format!("{args:?}");
        assert_eq!(
            say(addr, "HGETALL small").await,
            "*6\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\na\r\n$1\r\n1\r\n",
            "{ctx}"
        );
        assert_eq!(
            say(addr, "OBJECT ENCODING small").await,
            "$10\r\nlistpackex\r\n"
        );
        assert_eq!(
            say(addr, "HPEXPIRETIME small FIELDS 3 a b c").await,
            "*3\r\n:-1\r\n:1800000000000\r\n:1900000000000\r\n",
            "{ctx}"
        );
        assert_eq!(
            say(addr, "HPEXPIRETIME big FIELDS 4 f1 f2 f0 nope").await,
            "*4\r\n:1900000000007\r\n:-1\r\n:-1\r\n:-2\r\n",
            "{ctx}"
        );
        let ttl = say(addr, "HTTL big FIELDS 1 f3").await;
        assert!(
            ttl == "*1\r\n:100000\r\n" || ttl.starts_with("*1\r\n:9999"),
            "{ctx}: {ttl}"
        );
        assert_eq!(say(addr, "HLEN big").await, ":600\r\n", "{ctx}");
        assert_eq!(
            say(addr, "HPEXPIRETIME new FIELDS 1 n").await,
            "*1\r\n:1900000000010\r\n",
            "{ctx}"
        );
        assert_eq!(say(addr, "HGET new n").await, "$1\r\n2\r\n", "{ctx}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_append_only_file_logs_absolute_deadlines_and_the_deletions() {
    let mut tally = TallyProcess::start(&["--appendonly", "yes"]);
    let addr = tally.addr();
    say(addr, "HSET h a 1 b 2 c 3 d 4").await;
    say(addr, "HEXPIRE h 100 FIELDS 2 a zz").await;
    say(addr, "HEXPIRE h 0 FIELDS 1 b").await;
    say(addr, "HGETEX h EX 200 FIELDS 1 c").await;
    say(addr, "HSETEX h PX 300000 FIELDS 1 e 5").await;
    say(addr, "HSET h n 1").await;
    say(addr, "HEXPIRE h 400 FIELDS 1 n").await;
    // Logged as HSET of its value: the deadline must follow it.
    say(addr, "HINCRBYFLOAT h n 1.5").await;
    say(addr, "HSET g x 1").await;
    say(addr, "HPEXPIRE g 50 FIELDS 1 x").await;
    tokio::time::sleep(Duration::from_millis(120)).await;
    // The field's purge, as the HDEL it is, and the hash with it.
    assert_eq!(say(addr, "EXISTS g").await, ":0\r\n");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let log = tally_tests::keyspace::aof_increment(&tally.dir);
    for expected in [
        "HPEXPIREAT\r\n$1\r\nh\r\n$13\r\n",
        "HDEL\r\n$1\r\nh\r\n$1\r\nb\r\n",
        "HSETEX\r\n$1\r\nh\r\n$4\r\nPXAT\r\n",
        "HDEL\r\n$1\r\ng\r\n$1\r\nx\r\n",
    ] {
        assert!(log.contains(expected), "{expected:?} in {log:?}");
    }
    assert!(
        !log.contains("HEXPIRE\r\n"),
        "relative times are made absolute"
    );
    tally.kill();
    tally.restart();
    let addr = tally.addr();
    assert_eq!(
        say(addr, "HTTL h FIELDS 6 a b c d e n").await,
        "*6\r\n:99\r\n:-2\r\n:199\r\n:-1\r\n:299\r\n:399\r\n"
    );
    assert_eq!(say(addr, "HGET h n").await, "$3\r\n2.5\r\n");
    assert_eq!(say(addr, "EXISTS g").await, ":0\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dump_and_restore_keep_order_and_deadlines() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    conn.line("HSET h a 1 b 2 c 3").await;
    conn.line("HPEXPIREAT h 1900000000000 FIELDS 1 c").await;
    let dump = conn.cmd(&words("DUMP h")).await;
    let payload_start = dump.iter().position(|&b| b == b'\n').unwrap() + 1;
    let payload = &dump[payload_start..dump.len() - 2];
    assert_eq!(payload[0], 25, "Redis 7.4's listpack of triples");
    let restored = conn.cmd(&[&b"RESTORE"[..], b"copy", b"0", payload]).await;
    assert_eq!(restored, b"+OK\r\n");
    assert_eq!(
        conn.line("HGETALL copy").await,
        conn.line("HGETALL h").await
    );
    assert_eq!(
        conn.line("HPEXPIRETIME copy FIELDS 2 a c").await,
        "*2\r\n:-1\r\n:1900000000000\r\n"
    );
}
