//! SLOWLOG compared with redis-server: the same commands logged the same way
//! (which commands, their arguments as kept, who ran them), with the fields
//! that cannot agree between two servers (time, duration, client port)
//! blanked out; and the subcommands' replies and errors byte for byte.

use redis::Value;
use tally_tests::{assert_no_mismatch, compare_streams, RawConn, RedisServer, TestServer};

fn words(line: &str) -> Vec<Vec<u8>> {
    tally_tests::words(line)
}

/// Runs `lines` on a fresh connection named `client-a`, then returns
/// SLOWLOG GET -1 with time, duration and the client's port blanked.
async fn logged(addr: std::net::SocketAddr, lines: &[Vec<Vec<u8>>]) -> Vec<String> {
    let mut conn = RawConn::connect(addr).await;
    conn.cmd(&words("CONFIG SET slowlog-log-slower-than 0"))
        .await;
    conn.cmd(&words("CLIENT SETNAME client-a")).await;
    conn.cmd(&words("SLOWLOG RESET")).await;
    for line in lines {
        conn.cmd(line).await;
    }
    conn.cmd(&words("CONFIG SET slowlog-log-slower-than -1"))
        .await;
    let reply = conn.cmd(&words("SLOWLOG GET -1")).await;
    let Value::Array(entries) = redis::parse_redis_value(&reply).expect("a RESP reply") else {
        panic!("SLOWLOG GET is an array");
    };
    entries
        .into_iter()
        .map(|entry| {
            let Value::Array(fields) = entry else {
                panic!("an entry is an array");
            };
            assert_eq!(fields.len(), 6);
            let text = |v: &Value| match v {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            };
            let args = match &fields[3] {
                Value::Array(args) => args.iter().map(text).collect::<Vec<_>>().join(" "),
                other => panic!("arguments: {other:?}"),
            };
            // The peer's port differs between the two servers' connections.
            let peer = text(&fields[4]);
            let host = peer.rsplit_once(':').map_or(peer.as_str(), |(h, _)| h);
            format!("[{args}] from {host} named '{}'", text(&fields[5]))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_commands_are_logged_the_same_way_as_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let long = "x".repeat(200);
    let mut many = words("MSET");
    for i in 0..40 {
        many.push(format!("k{i}").into_bytes());
        many.push(b"v".to_vec());
    }
    let lines = vec![
        words("SET a 1"),
        words("GET a"),
        words(&format!("SET long {long}")),
        many,
        words("MULTI"),
        words("INCR a"),
        words("SET b 2"),
        words("EXEC"),
        words("EVAL return 1 0"),
        vec![
            b"EVAL".to_vec(),
            b"redis.call('set', 'c', '3') return 1".to_vec(),
            b"0".to_vec(),
        ],
        words("AUTH user secret"),
        words("AUTH secret"),
        words("HELLO 2 AUTH default secret"),
        words("CONFIG SET timeout 0 requirepass"),
        words("CONFIG SET requirepass \"\""),
        words("NOSUCH command"),
        words("GET"),
        words("SLOWLOG LEN"),
    ];
    let expected = logged(redis.addr, &lines).await;
    let actual = logged(tally.addr(), &lines).await;
    assert_eq!(actual, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowlog_replies_and_errors_match_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let commands: Vec<Vec<Vec<u8>>> = [
        "SLOWLOG RESET",
        "SLOWLOG LEN",
        "SLOWLOG GET",
        "SLOWLOG GET 0",
        "SLOWLOG GET -1",
        "SLOWLOG GET -2",
        "SLOWLOG GET abc",
        "SLOWLOG GET 1 2",
        "SLOWLOG LEN x",
        "SLOWLOG RESET x",
        "SLOWLOG foo",
        "SLOWLOG",
        "SLOWLOG HELP",
        "CONFIG SET slowlog-log-slower-than -2",
        "CONFIG SET slowlog-log-slower-than abc",
        "CONFIG SET slowlog-max-len -1",
        // One at a time: Redis lists a pattern's matches in its dict's
        // order, which changes from process to process.
        "CONFIG GET slowlog-log-slower-than",
        "CONFIG GET slowlog-max-len",
        "CONFIG SET slowlog-max-len 5",
        "CONFIG GET slowlog-max-len",
        "CONFIG SET slowlog-max-len 128",
    ]
    .iter()
    .map(|l| words(l))
    .collect();
    let mismatches = compare_streams(redis.addr, tally.addr(), &commands).await;
    assert_no_mismatch(&mismatches);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_keeps_the_newest_entries_up_to_its_length() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    assert_eq!(
        conn.line("CONFIG SET slowlog-log-slower-than 0 slowlog-max-len 3")
            .await,
        "+OK\r\n"
    );
    for i in 0..10 {
        conn.line(&format!("SET k{i} v")).await;
    }
    assert_eq!(conn.line("SLOWLOG LEN").await, ":3\r\n");
    let newest = conn.line("SLOWLOG GET 1").await;
    assert!(
        newest.contains("$7\r\nSLOWLOG\r\n$3\r\nLEN\r\n"),
        "{newest}"
    );
    // Off: nothing more is logged.
    conn.line("CONFIG SET slowlog-log-slower-than -1").await;
    conn.line("SLOWLOG RESET").await;
    conn.line("SET k v").await;
    assert_eq!(conn.line("SLOWLOG LEN").await, ":0\r\n");
}

/// DEBUG SLEEP pauses only its own connection, but its pause is the
/// command's duration, as Redis measures it: a sleep past the threshold is
/// logged with at least the time slept (Redis's slowlog unit does this).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debug_sleep_is_logged_for_the_time_it_slept() {
    let tally = TestServer::start().await;
    let mut conn = tally.raw().await;
    conn.cmd(&words("CONFIG SET slowlog-log-slower-than 100000"))
        .await;
    assert_eq!(conn.cmd(&words("DEBUG SLEEP 0.05")).await, b"+OK\r\n");
    assert_eq!(conn.cmd(&words("SLOWLOG LEN")).await, b":0\r\n");
    assert_eq!(conn.cmd(&words("DEBUG SLEEP 0.15")).await, b"+OK\r\n");
    let reply = conn.cmd(&words("SLOWLOG GET 1")).await;
    let Value::Array(entries) = redis::parse_redis_value(&reply).expect("a RESP reply") else {
        panic!("SLOWLOG GET is an array");
    };
    let Value::Array(fields) = &entries[0] else {
        panic!("an entry is an array");
    };
    let Value::Int(micros) = fields[2] else {
        panic!("a duration");
    };
    assert!(micros >= 150_000, "{micros}");
}
