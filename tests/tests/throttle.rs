//! CL.THROTTLE as redis-cell 0.5 answers it: its own test cases, its
//! errors, its key layout (the TAT in nanoseconds with a TTL to it), and
//! the call logged as its effect. The server's clock is a manual one, so
//! every expected reply is exact.

use tally_tests::keyspace::{aof_increment, connect, logged_server};
use tally_tests::{scratch_dir, TestServer, T0_MS};

/// A reply of five integers, as RESP.
fn five(values: [i64; 5]) -> Vec<u8> {
    let mut out = b"*5\r\n".to_vec();
    for value in values {
        out.extend_from_slice(format!(":{value}\r\n").as_bytes());
    }
    out
}

/// redis-cell's own test (`it_rate_limits`, src/cell/mod.rs): a limit of
/// 5 (burst 4) at one per second. Each case: milliseconds after the
/// start, quantity, then the reply redis-cell gives ([limited, limit,
/// remaining, retry_after, reset_after], its durations rounded up to whole
/// seconds when their millisecond part is not zero).
#[tokio::test]
async fn replies_follow_redis_cells_own_cases() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    let cases: [(u64, i64, [i64; 5]); 15] = [
        (0, 6, [1, 5, 5, -1, 0]),
        (0, 1, [0, 5, 4, -1, 1]),
        (0, 1, [0, 5, 3, -1, 2]),
        (0, 1, [0, 5, 2, -1, 3]),
        (0, 1, [0, 5, 1, -1, 4]),
        (0, 1, [0, 5, 0, -1, 5]),
        (0, 1, [1, 5, 0, 1, 5]),
        (3000, 1, [0, 5, 2, -1, 3]),
        (3100, 1, [0, 5, 1, -1, 4]),
        (4000, 1, [0, 5, 1, -1, 4]),
        (8000, 1, [0, 5, 4, -1, 1]),
        (9500, 1, [0, 5, 4, -1, 1]),
        (9500, 0, [0, 5, 4, -1, 1]),
        (9500, 2, [0, 5, 2, -1, 3]),
        (9500, 5, [1, 5, 2, 3, 3]),
    ];
    for (number, (after_ms, quantity, expected)) in cases.into_iter().enumerate() {
        server.clock.set_ms(T0_MS + after_ms);
        let quantity = quantity.to_string();
        let reply = conn
            .cmd(&["CL.THROTTLE", "foo", "4", "1", "1", &quantity])
            .await;
        assert_eq!(reply, five(expected), "case {number}");
    }
    // The key: the TAT in nanoseconds, expiring when it is reached. The
    // last allowed call (case 13, at 9.5 s) put it at 12.5 s.
    let tat_ns = (T0_MS + 12_500) * 1_000_000;
    assert_eq!(
        conn.cmd(&["GET", "foo"]).await,
        format!("${}\r\n{tat_ns}\r\n", tat_ns.to_string().len()).into_bytes()
    );
    assert_eq!(conn.cmd(&["PTTL", "foo"]).await, b":3000\r\n");
    // Without a quantity it takes one.
    server.clock.set_ms(T0_MS + 20_000);
    assert_eq!(
        conn.cmd(&["CL.THROTTLE", "fresh", "0", "10", "60"]).await,
        five([0, 1, 0, -1, 6])
    );
    assert_eq!(
        conn.cmd(&["CL.THROTTLE", "fresh", "0", "10", "60"]).await,
        five([1, 1, 0, 6, 6])
    );
}

/// redis-cell's errors, word for word, and nothing changed by a call that
/// fails. Where redis-cell panics (a value that is no TAT) there is an
/// error instead; a key of another type is WRONGTYPE.
#[tokio::test]
async fn errors_are_redis_cells_and_change_nothing() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    let usage = b"-Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]\r\n";
    assert_eq!(conn.cmd(&["CL.THROTTLE", "k", "1", "1"]).await, usage);
    assert_eq!(conn.cmd(&["CL.THROTTLE", "k"]).await, usage);
    // Without a key, the arity error of any command (redis-cell's module
    // would give its usage; tally needs the key's position to route).
    assert_eq!(
        conn.cmd(&["CL.THROTTLE"]).await,
        b"-ERR wrong number of arguments for 'cl.throttle' command\r\n"
    );
    assert_eq!(
        conn.cmd(&["CL.THROTTLE", "k", "1", "1", "1", "1", "1"])
            .await,
        usage
    );
    assert_eq!(
        conn.cmd(&["CL.THROTTLE", "k", "x", "1", "1"]).await,
        b"-Cell error: Store error: Couldn't parse as integer: x\r\n"
    );
    assert_eq!(
        conn.cmd(&["CL.THROTTLE", "k", "1", "1", "1", "1.5"]).await,
        b"-Cell error: Store error: Couldn't parse as integer: 1.5\r\n"
    );
    for (count, period) in [("0", "60"), ("10", "0")] {
        assert_eq!(
            conn.cmd(&["CL.THROTTLE", "k", "1", count, period]).await,
            b"-Cell error: Store error: Zero rates are not supported\r\n"
        );
    }
    // A negative quantity: redis-cell writes the key, then fails to set a
    // negative TTL; tally fails with its words and writes nothing.
    assert_eq!(
        conn.cmd(&["CL.THROTTLE", "k", "1", "1", "1", "-3"]).await,
        b"-Cell error: Store error: Error while setting key expire\r\n"
    );
    assert_eq!(conn.cmd(&["EXISTS", "k"]).await, b":0\r\n");
    conn.cmd(&["RPUSH", "list", "a"]).await;
    assert_eq!(
        conn.cmd(&["CL.THROTTLE", "list", "1", "1", "1"]).await,
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    conn.cmd(&["SET", "text", "abc"]).await;
    assert_eq!(
        conn.cmd(&["CL.THROTTLE", "text", "1", "1", "1"]).await,
        b"-Cell error: Store error: the key does not hold a CL.THROTTLE timestamp\r\n"
    );
    assert_eq!(conn.cmd(&["GET", "text"]).await, b"$3\r\nabc\r\n");
}

/// An allowed call is logged as its effect: the stored TAT with its
/// absolute deadline, which a replay sets again; a refused call logs
/// nothing. It runs in scripts and transactions like any write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_holds_the_stored_value_and_its_deadline() {
    let dir = scratch_dir();
    let server = logged_server(&dir).await;
    let mut conn = server.raw().await;
    assert_eq!(
        conn.cmd(&["CL.THROTTLE", "api", "0", "1", "2"]).await,
        five([0, 1, 0, -1, 2])
    );
    assert_eq!(
        conn.cmd(&["CL.THROTTLE", "api", "0", "1", "2"]).await,
        five([1, 1, 0, 2, 2])
    );
    assert_eq!(
        conn.cmd(&[
            "EVAL",
            "return redis.call('CL.THROTTLE', KEYS[1], 1, 1, 2)",
            "1",
            "lua"
        ])
        .await,
        five([0, 2, 1, -1, 2])
    );
    conn.cmd(&["MULTI"]).await;
    conn.cmd(&["CL.THROTTLE", "multi", "0", "1", "2"]).await;
    assert_eq!(
        conn.cmd(&["EXEC"]).await,
        [b"*1\r\n".to_vec(), five([0, 1, 0, -1, 2])].concat()
    );
    let log = aof_increment(&dir);
    let tat = ((T0_MS + 2000) * 1_000_000).to_string();
    let deadline = (T0_MS + 2000).to_string();
    for key in ["api", "lua", "multi"] {
        let set = format!(
            "*5\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{tat}\r\n$4\r\nPXAT\r\n${}\r\n{deadline}\r\n",
            key.len(),
            tat.len(),
            deadline.len()
        );
        assert_eq!(log.matches(&set).count(), 1, "{set:?} once in {log:?}");
    }
    // Never the call itself (the script's body, in its SCRIPT LOAD line,
    // names it as an argument).
    assert!(
        !log.to_ascii_lowercase().contains("$11\r\ncl.throttle\r\n"),
        "{log:?}"
    );
    server.handle.shutdown().await;
    let again = logged_server(&dir).await;
    let mut conn = connect(again.addr()).await;
    let stored: String = redis::cmd("GET")
        .arg("api")
        .query_async(&mut conn)
        .await
        .expect("GET");
    assert_eq!(stored, tat);
    let pttl: i64 = redis::cmd("PTTL")
        .arg("api")
        .query_async(&mut conn)
        .await
        .expect("PTTL");
    assert_eq!(pttl, 2000);
}

/// A transcript of redis-cell 0.5.0 in redis-server 7.0.15: 2,000 random
/// calls over twelve keys (each mostly under its own limit, sometimes
/// under another, a few refused), each at a known microsecond of a frozen
/// clock, with the reply, the key's PTTL and its stored TAT after the call
/// (tools/record_cl_throttle.py, which says how it was made). Replayed
/// here at the same microseconds, tally must answer every line the same.
/// The one deliberate difference (docs/compatibility.md): a negative
/// quantity gets redis-cell's error, but where redis-cell has already
/// stored a TAT, tally leaves the key as it was; the replay checks that,
/// then stores redis-cell's TAT so the lines after compare as before.
#[tokio::test]
async fn a_recorded_redis_cell_run_replays_identically() {
    let transcript = include_str!("../fixtures/cl_throttle_redis_cell.txt");
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    let (mut lines, mut differences) = (0, 0);
    for line in transcript.lines() {
        let fields: Vec<&str> = line.split(" | ").collect();
        let [call, reply, pttl, stored] = fields[..] else {
            panic!("a transcript line: {line:?}");
        };
        let call: Vec<&str> = call.split(' ').collect();
        let key = call[1];
        let offset_us: u64 = call[0].parse().expect("an offset");
        server.clock.set_us(T0_MS * 1000 + offset_us);
        let before = (
            conn.cmd(&["PTTL", key]).await,
            conn.cmd(&["GET", key]).await,
        );
        let mut argv = vec!["CL.THROTTLE"];
        argv.extend(&call[1..]);
        let expected_reply = match reply.strip_prefix("ERR ") {
            Some(text) => format!("-{text}\r\n").into_bytes(),
            None => {
                let values: Vec<i64> = reply.split(' ').map(|v| v.parse().expect("int")).collect();
                five(values.try_into().expect("five integers"))
            }
        };
        assert_eq!(
            String::from_utf8_lossy(&conn.cmd(&argv).await),
            String::from_utf8_lossy(&expected_reply),
            "{line}"
        );
        let expected_pttl = format!(":{pttl}\r\n").into_bytes();
        let expected_stored = match stored {
            "None" => b"$-1\r\n".to_vec(),
            tat => format!("${}\r\n{tat}\r\n", tat.len()).into_bytes(),
        };
        let after = (
            conn.cmd(&["PTTL", key]).await,
            conn.cmd(&["GET", key]).await,
        );
        if reply.ends_with("Error while setting key expire") {
            assert_eq!(after, before, "tally changes nothing: {line}");
            differences += 1;
            if stored != "None" {
                // redis-cell's TAT, without a TTL (its expiry failed).
                assert_eq!(pttl, "-1", "{line}");
                conn.cmd(&["SET", key, stored]).await;
            }
            continue;
        }
        assert_eq!(after.0, expected_pttl, "PTTL after {line}");
        assert_eq!(after.1, expected_stored, "GET after {line}");
        lines += 1;
    }
    assert_eq!((lines, differences), (2000 - differences, differences));
    assert!(differences > 0, "the transcript has negative quantities");
}
