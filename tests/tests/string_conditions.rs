//! Redis 8.4's compare-and-set on strings (SET IFEQ / IFNE / IFDEQ /
//! IFDNE, DELEX, DIGEST) and MSETEX: replies against Redis 8.6.3's, byte
//! for byte, and what a reply does not show (the change feed).
//!
//! No Redis 8.4+ runs in CI: `tests/data/string_conditions.transcript`
//! holds redis-server 8.6.3's replies to `string_conditions.commands`
//! (Debian experimental's, run by `REDIS_SUITE=experimental
//! tools/redis8.sh`), recorded with `tools/record_transcript.py`. Random
//! SET and MSETEX option sequences were compared with the same server while
//! this was built (about 10,000 calls, no difference but the one
//! docs/compatibility.md names).

use std::net::SocketAddr;

use tally_tests::process::TallyProcess;
use tally_tests::RawConn;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_are_redis_8_6_s_byte_for_byte() {
    let text = include_str!("../data/string_conditions.transcript");
    assert!(tally_tests::transcript::replay(text).await > 150);
}

/// DELIFEQ (Valkey 9.0), as its command page's examples show it (no
/// Valkey 9 runs here to compare with): the lock-release pattern without
/// a script.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delifeq_deletes_only_the_value_it_names() {
    let server = tally_tests::TestServer::start().await;
    let mut c = server.raw().await;
    for (line, reply) in [
        ("SET mykey abc123", "+OK\r\n"),
        ("DELIFEQ mykey abc123", ":1\r\n"),
        ("DELIFEQ mykey abc123", ":0\r\n"),
        ("SET mykey xyz789", "+OK\r\n"),
        ("DELIFEQ mykey abc123", ":0\r\n"),
        ("GET mykey", "$6\r\nxyz789\r\n"),
        ("SET n 42", "+OK\r\n"),
        ("DELIFEQ n 42", ":1\r\n"),
        ("SADD set somevalue", ":1\r\n"),
        (
            "DELIFEQ set somevalue",
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (
            "DELIFEQ mykey",
            "-ERR wrong number of arguments for 'delifeq' command\r\n",
        ),
    ] {
        assert_eq!(c.line(line).await, reply, "{line}");
    }
}

async fn say(addr: SocketAddr, line: &str) -> String {
    let mut conn = RawConn::connect(addr).await;
    conn.line(line).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_append_only_file_logs_what_each_call_did() {
    let mut tally = TallyProcess::start(&["--appendonly", "yes"]);
    let addr = tally.addr();
    say(addr, "SET k v1").await;
    // Applied, refused, applied with GET, refused with GET.
    assert_eq!(say(addr, "SET k v2 IFEQ v1").await, "+OK\r\n");
    assert_eq!(say(addr, "SET k lost IFEQ v1").await, "$-1\r\n");
    assert_eq!(say(addr, "SET k v3 IFNE other GET").await, "$2\r\nv2\r\n");
    assert_eq!(
        say(addr, "SET k lost2 IFDEQ 0000000000000000 GET").await,
        "$2\r\nv3\r\n"
    );
    assert_eq!(say(addr, "SET gone x").await, "+OK\r\n");
    assert_eq!(say(addr, "DELEX gone IFNE x").await, ":0\r\n");
    assert_eq!(say(addr, "DELEX gone IFEQ x").await, ":1\r\n");
    assert_eq!(say(addr, "SET lock token").await, "+OK\r\n");
    assert_eq!(say(addr, "DELIFEQ lock other").await, ":0\r\n");
    assert_eq!(say(addr, "DELIFEQ lock token").await, ":1\r\n");
    assert_eq!(say(addr, "MSETEX 2 a 1 b 2 EX 100").await, ":1\r\n");
    assert_eq!(say(addr, "MSETEX 1 a 9 NX").await, ":0\r\n");
    assert_eq!(say(addr, "MSETEX 1 b 3 XX KEEPTTL").await, ":1\r\n");
    assert_eq!(say(addr, "MSETEX 1 c 4").await, ":1\r\n");
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let log = tally_tests::keyspace::aof_increment(&tally.dir);
    for expected in [
        "$2\r\nv2\r\n",
        "$2\r\nv3\r\n",
        "DEL\r\n$4\r\ngone\r\n",
        "DEL\r\n$4\r\nlock\r\n",
        "MSETEX\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$4\r\nPXAT\r\n",
        "KEEPTTL\r\n",
        "MSET\r\n$1\r\nc\r\n$1\r\n4\r\n",
    ] {
        assert!(log.contains(expected), "{expected:?} in {log:?}");
    }
    for absent in [
        "lost",
        "IFEQ",
        "IFNE",
        "IFDEQ",
        "DELEX",
        "DELIFEQ",
        "\r\n$1\r\n9\r\n",
    ] {
        assert!(!log.contains(absent), "{absent:?} not in {log:?}");
    }
    tally.kill();
    tally.restart();
    let addr = tally.addr();
    assert_eq!(say(addr, "GET k").await, "$2\r\nv3\r\n");
    assert_eq!(say(addr, "EXISTS gone").await, ":0\r\n");
    assert_eq!(say(addr, "EXISTS lock").await, ":0\r\n");
    assert_eq!(
        say(addr, "MGET a b c").await,
        "*3\r\n$1\r\n1\r\n$1\r\n3\r\n$1\r\n4\r\n"
    );
    for key in ["a", "b"] {
        let ttl = say(addr, &format!("TTL {key}")).await;
        assert!(ttl.starts_with(":9"), "{key}: {ttl}");
    }
    assert_eq!(say(addr, "TTL c").await, ":-1\r\n");
}
