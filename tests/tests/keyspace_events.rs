//! Keyspace notifications against a real redis-server: the same commands
//! on both servers, with a subscriber to `__key*__:*` on each, must
//! produce the same messages in the same order, frame for frame.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::net::SocketAddr;
use tally_tests::{words, RawConn, RedisServer, TestServer};

/// Runs `commands` on the server at `addr` with `notify-keyspace-events`
/// set to `classes`; returns every frame a `__key*__:*` subscriber got,
/// and the commands' replies.
async fn events(addr: SocketAddr, classes: &str, commands: &[Vec<Vec<u8>>]) -> (Vec<String>, Vec<Vec<u8>>) {
    let mut control = RawConn::connect(addr).await;
    control
        .cmd(&[b"CONFIG".as_slice(), b"SET", b"notify-keyspace-events", classes.as_bytes()])
        .await;
    let mut subscriber = RawConn::connect(addr).await;
    subscriber.cmd(&words("PSUBSCRIBE __key*__:*")).await;
    let mut replies = Vec::new();
    for command in commands {
        replies.push(control.cmd(command).await);
    }
    // The end of the run, through the same pattern.
    control.cmd(&words("PUBLISH __keyevent@0__:zz-end end")).await;
    let mut frames = Vec::new();
    loop {
        let frame = String::from_utf8_lossy(&subscriber.reply().await).into_owned();
        if frame.contains("zz-end") {
            break;
        }
        frames.push(frame);
    }
    control.cmd(&words("FLUSHALL")).await;
    (frames, replies)
}

/// Fails with the first difference between the two servers' messages.
async fn assert_same_events(classes: &str, commands: &[Vec<Vec<u8>>]) {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let (expected, redis_replies) = events(redis.addr, classes, commands).await;
    let (got, tally_replies) = events(tally.addr(), classes, commands).await;
    for (i, (a, b)) in redis_replies.iter().zip(&tally_replies).enumerate() {
        assert_eq!(
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(b),
            "reply to {:?}",
            String::from_utf8_lossy(&commands[i].join(&b' '))
        );
    }
    assert!(!expected.is_empty(), "redis-server published nothing");
    let first_difference = expected.iter().zip(&got).position(|(a, b)| a != b);
    if first_difference.is_some() || expected.len() != got.len() {
        let at = first_difference.unwrap_or(expected.len().min(got.len()));
        let from = at.saturating_sub(3);
        panic!(
            "keyspace events differ at message {at} ({} from redis-server, {} from tally)\nredis:\n{}\ntally:\n{}",
            expected.len(),
            got.len(),
            expected[from..(at + 4).min(expected.len())].join("\n").replace("\r\n", " "),
            got[from..(at + 4).min(got.len())].join("\n").replace("\r\n", " "),
        );
    }
}

fn lines(text: &str) -> Vec<Vec<Vec<u8>>> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(words)
        .collect()
}

const STRINGS_AND_KEYS: &str = r#"
    SET s v
    SET s v2 EX 100
    SET s v3 NX
    SET s v4 XX GET
    SET s v5 KEEPTTL
    SET s v6 PXAT 1
    SET s2 v PX 100000
    SETNX s3 v
    SETNX s3 v
    SETEX s4 100 v
    PSETEX s5 100000 v
    MSET m1 a m2 b
    MSETNX m1 a m3 c
    MSETNX m4 a m5 b
    GETSET m1 z
    GETDEL m2
    GETDEL missing
    GETEX m1 EX 100
    GETEX m1 PERSIST
    GETEX m1 PERSIST
    GETEX m1 PXAT 1
    GETEX m3
    INCR n
    INCRBY n 5
    DECR n
    DECRBY n 2
    INCRBYFLOAT f 1.5
    APPEND a hello
    APPEND a world
    SETRANGE r 5 x
    SETRANGE r 0 ""
    SETRANGE missing2 0 ""
    SETRANGE big 100 x
    GET s
    DEL s s2 missing s3
    UNLINK s4
    EXPIRE s5 100
    PEXPIRE s5 100000 NX
    EXPIREAT s5 1
    SET e v
    PEXPIREAT e 99999999999999
    PERSIST e
    PERSIST e
    EXPIRE missing 10
    RENAME e e2
    RENAME e2 e2
    SET other x
    RENAME e2 other
    RENAMENX other a
    RENAMENX other fresh
    COPY fresh copy1
    COPY fresh copy1
    COPY fresh copy1 REPLACE
    COPY fresh copy2 DB 1
    MOVE copy1 1
    MOVE fresh 2
    MOVE a 1
    SELECT 1
    SET indb1 v
    DEL indb1 copy1 copy2
    SELECT 0
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strings_and_generic_commands_notify_as_redis() {
    assert_same_events("KEA", &lines(STRINGS_AND_KEYS)).await;
    assert_same_events("KEAn", &lines(STRINGS_AND_KEYS)).await;
    assert_same_events("E$", &lines(STRINGS_AND_KEYS)).await;
    assert_same_events("Kg", &lines(STRINGS_AND_KEYS)).await;
}
