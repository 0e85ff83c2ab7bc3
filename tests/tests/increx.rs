//! INCREX as Redis 8.8 documents it (the examples of its command page,
//! reply for reply), with Valkey 9.2's NX | XX: bounds that skip or
//! saturate, every expiry form, the long double form, each error with
//! nothing changed, and the call logged as its effect. The server's clock
//! is a manual one, so every TTL is exact.

use tally_tests::keyspace::{aof_increment, connect, logged_server};
use tally_tests::{scratch_dir, RawConn, TestServer, T0_MS};

/// `[a, b]` of integers, as RESP.
fn ints(a: i64, b: i64) -> Vec<u8> {
    format!("*2\r\n:{a}\r\n:{b}\r\n").into_bytes()
}

/// `[a, b]` of bulk strings (BYFLOAT's reply in RESP2), as RESP.
fn bulks(a: &str, b: &str) -> Vec<u8> {
    format!("*2\r\n${}\r\n{a}\r\n${}\r\n{b}\r\n", a.len(), b.len()).into_bytes()
}

async fn pttl(conn: &mut RawConn, key: &str) -> Vec<u8> {
    conn.cmd(&["PTTL", key]).await
}

/// The examples of Redis's INCREX page, with the replies it gives.
#[tokio::test]
async fn the_documented_examples_reply_as_documented() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    // Default increment, from 0.
    assert_eq!(conn.cmd(&["INCREX", "mykey1"]).await, ints(1, 1));
    assert_eq!(conn.cmd(&["INCREX", "mykey1"]).await, ints(2, 1));
    // BYINT, negative too.
    conn.cmd(&["SET", "mykey2", "100"]).await;
    assert_eq!(
        conn.cmd(&["INCREX", "mykey2", "BYINT", "5"]).await,
        ints(105, 5)
    );
    assert_eq!(
        conn.cmd(&["INCREX", "mykey2", "BYINT", "-10"]).await,
        ints(95, -10)
    );
    // BYFLOAT.
    conn.cmd(&["SET", "mykey3", "1.5"]).await;
    assert_eq!(
        conn.cmd(&["INCREX", "mykey3", "BYFLOAT", "0.25"]).await,
        bulks("1.75", "0.25")
    );
    // EX on every increment.
    assert_eq!(
        conn.cmd(&["INCREX", "mykey4", "BYINT", "1", "EX", "100"])
            .await,
        ints(1, 1)
    );
    assert_eq!(conn.cmd(&["TTL", "mykey4"]).await, b":100\r\n");
    // ENX sets a TTL only where there is none.
    conn.cmd(&["SET", "mykey5", "10"]).await;
    assert_eq!(
        conn.cmd(&["INCREX", "mykey5", "BYINT", "1", "EX", "100", "ENX"])
            .await,
        ints(11, 1)
    );
    assert_eq!(conn.cmd(&["TTL", "mykey5"]).await, b":100\r\n");
    conn.cmd(&["SET", "mykey5", "10", "EX", "500"]).await;
    assert_eq!(
        conn.cmd(&["INCREX", "mykey5", "BYINT", "1", "EX", "10", "ENX"])
            .await,
        ints(11, 1)
    );
    assert_eq!(conn.cmd(&["TTL", "mykey5"]).await, b":500\r\n");
    // PERSIST removes it.
    conn.cmd(&["SET", "mykey6", "5", "EX", "1000"]).await;
    assert_eq!(
        conn.cmd(&["INCREX", "mykey6", "BYINT", "1", "PERSIST"])
            .await,
        ints(6, 1)
    );
    assert_eq!(conn.cmd(&["TTL", "mykey6"]).await, b":-1\r\n");
    // Past UBOUND: skipped, or capped with SATURATE.
    conn.cmd(&["SET", "mykey7", "99"]).await;
    assert_eq!(
        conn.cmd(&["INCREX", "mykey7", "BYINT", "5", "UBOUND", "100"])
            .await,
        ints(99, 0)
    );
    assert_eq!(conn.cmd(&["GET", "mykey7"]).await, b"$2\r\n99\r\n");
    assert_eq!(
        conn.cmd(&["INCREX", "mykey7", "BYINT", "5", "UBOUND", "100", "SATURATE"])
            .await,
        ints(100, 1)
    );
    assert_eq!(conn.cmd(&["GET", "mykey7"]).await, b"$3\r\n100\r\n");
}

/// The page's rate-limiter pattern: a window of 3 per 60 s whose TTL is
/// set by its first hit and never extended, refusing with a zero increment.
#[tokio::test]
async fn the_fixed_window_pattern_counts_to_its_cap_in_one_window() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    let hit = [
        "INCREX", "rl", "BYINT", "1", "UBOUND", "3", "EX", "60", "ENX",
    ];
    assert_eq!(conn.cmd(&hit).await, ints(1, 1));
    server.clock.advance_ms(10_000);
    assert_eq!(conn.cmd(&hit).await, ints(2, 1));
    assert_eq!(conn.cmd(&hit).await, ints(3, 1));
    assert_eq!(conn.cmd(&hit).await, ints(3, 0));
    // The window kept its first deadline.
    assert_eq!(pttl(&mut conn, "rl").await, b":50000\r\n");
    server.clock.advance_ms(50_001);
    assert_eq!(conn.cmd(&["EXISTS", "rl"]).await, b":0\r\n");
    assert_eq!(conn.cmd(&hit).await, ints(1, 1));
    assert_eq!(pttl(&mut conn, "rl").await, b":60000\r\n");
}

/// A skipped increment changes nothing, a missing key included; SATURATE
/// clamps to the bound crossed, or to the type's end when the sum leaves
/// i64; an applied increment that i64 cannot hold is an error.
#[tokio::test]
async fn bounds_skip_or_saturate_and_skips_change_nothing() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    // Missing key below LBOUND: skipped, not created.
    assert_eq!(
        conn.cmd(&["INCREX", "new", "BYINT", "-1", "LBOUND", "0", "EX", "9"])
            .await,
        ints(0, 0)
    );
    assert_eq!(conn.cmd(&["EXISTS", "new"]).await, b":0\r\n");
    // A skip keeps the TTL, whatever the expiry option says.
    conn.cmd(&["SET", "k", "10", "PX", "5000"]).await;
    assert_eq!(
        conn.cmd(&["INCREX", "k", "BYINT", "-20", "LBOUND", "-5", "PERSIST"])
            .await,
        ints(10, 0)
    );
    assert_eq!(pttl(&mut conn, "k").await, b":5000\r\n");
    // SATURATE floors at LBOUND and still applies the expiry.
    assert_eq!(
        conn.cmd(&["INCREX", "k", "BYINT", "-20", "LBOUND", "-5", "SATURATE", "PERSIST"])
            .await,
        ints(-5, -15)
    );
    assert_eq!(pttl(&mut conn, "k").await, b":-1\r\n");
    // A value already above UBOUND moving down but still above it: skipped,
    // or clamped to UBOUND.
    conn.cmd(&["SET", "high", "10000"]).await;
    assert_eq!(
        conn.cmd(&["INCREX", "high", "BYINT", "-500", "UBOUND", "200"])
            .await,
        ints(10000, 0)
    );
    assert_eq!(
        conn.cmd(&["INCREX", "high", "BYINT", "-500", "UBOUND", "200", "SATURATE"])
            .await,
        ints(200, -9800)
    );
    // Past i64 without bounds: skipped, or the type's end.
    conn.cmd(&["SET", "max", "9223372036854775806"]).await;
    assert_eq!(
        conn.cmd(&["INCREX", "max", "BYINT", "5"]).await,
        ints(9223372036854775806, 0)
    );
    assert_eq!(
        conn.cmd(&["INCREX", "max", "BYINT", "5", "SATURATE"]).await,
        ints(i64::MAX, 1)
    );
    conn.cmd(&["SET", "min", "-9223372036854775807"]).await;
    assert_eq!(
        conn.cmd(&["INCREX", "min", "BYINT", "-5", "SATURATE", "UBOUND", "7"])
            .await,
        ints(i64::MIN, -1)
    );
    // From i64::MAX clamped to an UBOUND far below it: the increment
    // applied would be below i64::MIN.
    conn.cmd(&["SET", "far", "9223372036854775807"]).await;
    assert_eq!(
        conn.cmd(&["INCREX", "far", "UBOUND", "-5", "SATURATE"])
            .await,
        b"-ERR increment or decrement would overflow\r\n"
    );
    assert_eq!(
        conn.cmd(&["GET", "far"]).await,
        b"$19\r\n9223372036854775807\r\n"
    );
}

/// BYFLOAT adds in long double and prints as INCRBYFLOAT does: bulk
/// strings in RESP2, doubles in RESP3; an integer value is promoted.
#[tokio::test]
async fn byfloat_adds_in_long_double_as_incrbyfloat() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    conn.cmd(&["SET", "a", "12345.6"]).await;
    conn.cmd(&["SET", "b", "12345.6"]).await;
    let incrbyfloat = conn.cmd(&["INCRBYFLOAT", "a", "0.1"]).await;
    // INCRBYFLOAT's digits, which f64 arithmetic would not give.
    assert_eq!(incrbyfloat, b"$23\r\n12345.69999999999999929\r\n");
    // The increment applied is the difference of the two long doubles, as
    // Redis computes it, so it carries their rounding.
    assert_eq!(
        conn.cmd(&["INCREX", "b", "BYFLOAT", "0.1"]).await,
        bulks("12345.69999999999999929", "0.09999999999999964")
    );
    assert_eq!(conn.cmd(&["GET", "b"]).await, incrbyfloat);
    conn.cmd(&["SET", "int", "7"]).await;
    assert_eq!(
        conn.cmd(&["INCREX", "int", "BYFLOAT", "-0.5", "LBOUND", "6.75", "SATURATE"])
            .await,
        bulks("6.75", "-0.25")
    );
    assert_eq!(
        conn.cmd(&["INCREX", "int", "BYFLOAT", "-1", "LBOUND", "6"])
            .await,
        bulks("6.75", "0")
    );
    assert_eq!(conn.cmd(&["HELLO", "3"]).await[0], b'%');
    assert_eq!(
        conn.cmd(&["INCREX", "int", "BYFLOAT", "0.25"]).await,
        b"*2\r\n,7\r\n,0.25\r\n"
    );
    // Integers stay integers in RESP3.
    assert_eq!(conn.cmd(&["INCREX", "n"]).await, ints(1, 1));
    // A script sees RESP3 doubles as {double=...}, RESP2 bulks as strings.
    assert_eq!(
        conn.cmd(&[
            "EVAL",
            "redis.setresp(3); local r = redis.call('INCREX', KEYS[1], 'BYFLOAT', '1.5'); \
             return {r[1].double * 2, type(r[2])}",
            "1",
            "s"
        ])
        .await,
        b"*2\r\n:3\r\n$5\r\ntable\r\n"
    );
    assert_eq!(
        conn.cmd(&[
            "EVAL",
            "local r = redis.call('INCREX', KEYS[1], 'BYFLOAT', '1.5'); return r",
            "1",
            "s"
        ])
        .await,
        b"*2\r\n$1\r\n3\r\n$3\r\n1.5\r\n"
    );
}

/// Every expiry form, as an absolute deadline; no option keeps the TTL;
/// NX and XX (Valkey's) reply nil when unmet and change nothing.
#[tokio::test]
async fn expiry_forms_and_conditions() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    let at_s = (T0_MS / 1000 + 30).to_string();
    let at_ms = (T0_MS + 40_000).to_string();
    for (option, amount, expected) in [
        ("EX", "10", b":10000\r\n".as_slice()),
        ("PX", "1500", b":1500\r\n"),
        ("EXAT", at_s.as_str(), b":30000\r\n"),
        ("PXAT", at_ms.as_str(), b":40000\r\n"),
    ] {
        let key = format!("k-{option}");
        assert_eq!(
            conn.cmd(&["INCREX", &key, option, amount]).await,
            ints(1, 1)
        );
        assert_eq!(pttl(&mut conn, &key).await, expected, "{option}");
        // No expiry option: the TTL stays.
        assert_eq!(conn.cmd(&["INCREX", &key]).await, ints(2, 1));
        assert_eq!(pttl(&mut conn, &key).await, expected, "{option} kept");
    }
    assert_eq!(
        conn.cmd(&["INCREX", "absent", "XX", "EX", "5"]).await,
        b"$-1\r\n"
    );
    assert_eq!(conn.cmd(&["EXISTS", "absent"]).await, b":0\r\n");
    assert_eq!(conn.cmd(&["INCREX", "absent", "NX"]).await, ints(1, 1));
    assert_eq!(conn.cmd(&["INCREX", "absent", "NX"]).await, b"$-1\r\n");
    assert_eq!(
        conn.cmd(&["INCREX", "absent", "XX", "BYINT", "4"]).await,
        ints(5, 4)
    );
}

/// Redis's errors for each bad call, and the key untouched after each.
#[tokio::test]
async fn errors_change_nothing() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    conn.cmd(&["SET", "k", "5", "PX", "9000"]).await;
    conn.cmd(&["SET", "f", "1.5"]).await;
    conn.cmd(&["RPUSH", "list", "x"]).await;
    let syntax = b"-ERR syntax error\r\n".to_vec();
    let not_int = b"-ERR value is not an integer or out of range\r\n".to_vec();
    let not_float = b"-ERR value is not a valid float\r\n".to_vec();
    let cases: Vec<(Vec<&str>, Vec<u8>)> = vec![
        (
            vec!["INCREX"],
            b"-ERR wrong number of arguments for 'increx' command\r\n".to_vec(),
        ),
        (vec!["INCREX", "k", "BYINT"], syntax.clone()),
        (
            vec!["INCREX", "k", "BYINT", "1", "BYFLOAT", "1"],
            syntax.clone(),
        ),
        (
            vec!["INCREX", "k", "BYINT", "1", "BYINT", "1"],
            syntax.clone(),
        ),
        (vec!["INCREX", "k", "EX", "1", "PX", "1"], syntax.clone()),
        (vec!["INCREX", "k", "EX", "1", "PERSIST"], syntax.clone()),
        (vec!["INCREX", "k", "PERSIST", "EX", "1"], syntax.clone()),
        (vec!["INCREX", "k", "PERSIST", "ENX"], syntax.clone()),
        (vec!["INCREX", "k", "NX", "XX"], syntax.clone()),
        (
            vec!["INCREX", "k", "LBOUND", "1", "LBOUND", "2"],
            syntax.clone(),
        ),
        (vec!["INCREX", "k", "BOUND", "1"], syntax.clone()),
        // A syntax error wins over a bad number before it.
        (vec!["INCREX", "k", "BYINT", "x", "UNKNOWN"], syntax.clone()),
        (
            vec!["INCREX", "k", "ENX"],
            b"-ERR ENX flag requires an expiration\r\n".to_vec(),
        ),
        (
            vec!["INCREX", "k", "LBOUND", "10", "UBOUND", "1"],
            b"-ERR LBOUND can't be greater than UBOUND\r\n".to_vec(),
        ),
        (
            vec![
                "INCREX", "k", "BYFLOAT", "1", "LBOUND", "1.5", "UBOUND", "1.25",
            ],
            b"-ERR LBOUND can't be greater than UBOUND\r\n".to_vec(),
        ),
        (vec!["INCREX", "k", "BYINT", "1.5"], not_int.clone()),
        (vec!["INCREX", "k", "UBOUND", "1.5"], not_int.clone()),
        (vec!["INCREX", "k", "EX", "soon"], not_int.clone()),
        (vec!["INCREX", "k", "BYFLOAT", "x"], not_float.clone()),
        (vec!["INCREX", "k", "BYFLOAT", "inf"], not_float.clone()),
        (
            vec!["INCREX", "k", "BYFLOAT", "1", "UBOUND", "inf"],
            not_float.clone(),
        ),
        (
            vec!["INCREX", "k", "EX", "0"],
            b"-ERR invalid expire time in 'increx' command\r\n".to_vec(),
        ),
        (
            vec!["INCREX", "k", "PX", "-1"],
            b"-ERR invalid expire time in 'increx' command\r\n".to_vec(),
        ),
        (vec!["INCREX", "f"], not_int.clone()),
        (
            vec!["INCREX", "list"],
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n".to_vec(),
        ),
        (
            vec!["INCREX", "list", "BYFLOAT", "1"],
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n".to_vec(),
        ),
    ];
    for (call, expected) in cases {
        assert_eq!(
            conn.cmd(&call).await,
            expected,
            "{call:?}: {}",
            String::from_utf8_lossy(&expected)
        );
        assert_eq!(conn.cmd(&["GET", "k"]).await, b"$1\r\n5\r\n", "{call:?}");
        assert_eq!(pttl(&mut conn, "k").await, b":9000\r\n", "{call:?}");
    }
    conn.cmd(&["SET", "text", "abc"]).await;
    assert_eq!(
        conn.cmd(&["INCREX", "text", "BYFLOAT", "1"]).await,
        not_float
    );
    assert_eq!(conn.cmd(&["GET", "text"]).await, b"$3\r\nabc\r\n");
}

/// An applied call is logged as its effect (the value with the deadline it
/// ended with, or none), a skipped one not at all, from scripts and
/// transactions too; a replay restores the same keys and deadlines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_holds_the_value_and_its_deadline() {
    let dir = scratch_dir();
    let server = logged_server(&dir).await;
    let mut conn = server.raw().await;
    assert_eq!(
        conn.cmd(&["INCREX", "win", "UBOUND", "1", "EX", "60", "ENX"])
            .await,
        ints(1, 1)
    );
    // Skipped: nothing logged.
    assert_eq!(
        conn.cmd(&["INCREX", "win", "UBOUND", "1", "EX", "60", "ENX"])
            .await,
        ints(1, 0)
    );
    assert_eq!(
        conn.cmd(&["INCREX", "plain", "BYFLOAT", "2.5"]).await,
        bulks("2.5", "2.5")
    );
    assert_eq!(
        conn.cmd(&[
            "EVAL",
            "return redis.call('INCREX', KEYS[1], 'PX', 500)",
            "1",
            "lua"
        ])
        .await,
        ints(1, 1)
    );
    conn.cmd(&["MULTI"]).await;
    conn.cmd(&["INCREX", "multi", "BYINT", "3", "PXAT", "1"])
        .await;
    assert_eq!(
        conn.cmd(&["EXEC"]).await,
        [b"*1\r\n".to_vec(), ints(3, 3)].concat()
    );
    let log = aof_increment(&dir);
    let set = |key: &str, value: &str, deadline: Option<u64>| {
        let mut line = format!(
            "*{}\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
            if deadline.is_some() { 5 } else { 3 },
            key.len(),
            value.len()
        );
        if let Some(at) = deadline {
            let at = at.to_string();
            line += &format!("$4\r\nPXAT\r\n${}\r\n{at}\r\n", at.len());
        }
        line
    };
    for (line, count) in [
        (set("win", "1", Some(T0_MS + 60_000)), 1),
        (set("plain", "2.5", None), 1),
        (set("lua", "1", Some(T0_MS + 500)), 1),
        (set("multi", "3", Some(1)), 1),
    ] {
        assert_eq!(log.matches(&line).count(), count, "{line:?} in {log:?}");
    }
    assert!(
        !log.to_ascii_lowercase().contains("$6\r\nincrex\r\n"),
        "{log:?}"
    );
    server.handle.shutdown().await;
    let again = logged_server(&dir).await;
    let mut conn = connect(again.addr()).await;
    let (win, pttl, plain, multi): (i64, i64, String, i64) = redis::pipe()
        .get("win")
        .pttl("win")
        .get("plain")
        .exists("multi")
        .query_async(&mut conn)
        .await
        .expect("replayed");
    assert_eq!((win, plain.as_str(), multi), (1, "2.5", 0));
    assert!(pttl > 0 && pttl <= 60_000, "{pttl}");
}
