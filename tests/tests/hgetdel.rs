//! HGETDEL, Redis 8.0's, as its command page documents it (the examples,
//! reply for reply) and as its source (t_hash.c, hgetdelCommand) checks
//! its arguments: no Redis 8 server runs on this box to compare with.

use tally_tests::{words, RawConn, TestServer};

async fn say(conn: &mut RawConn, line: &str) -> String {
    String::from_utf8_lossy(&conn.cmd(&words(line)).await).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_page_examples() {
    let server = TestServer::start().await;
    let mut c = server.raw().await;
    assert_eq!(
        say(&mut c, "HSET mykey field1 Hello field2 World field3 !").await,
        ":3\r\n"
    );
    assert_eq!(
        say(&mut c, "HGETDEL mykey FIELDS 2 field3 field4").await,
        "*2\r\n$1\r\n!\r\n$-1\r\n"
    );
    assert_eq!(
        say(&mut c, "HGETALL mykey").await,
        "*4\r\n$6\r\nfield1\r\n$5\r\nHello\r\n$6\r\nfield2\r\n$5\r\nWorld\r\n"
    );
    assert_eq!(
        say(&mut c, "HGETDEL mykey FIELDS 2 field1 field2").await,
        "*2\r\n$5\r\nHello\r\n$5\r\nWorld\r\n"
    );
    assert_eq!(say(&mut c, "KEYS *").await, "*0\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_are_checked_in_redis_8_s_order() {
    let server = TestServer::start().await;
    let mut c = server.raw().await;
    say(&mut c, "HSET h a 1 b 2").await;
    say(&mut c, "SET s x").await;
    // The key's type first, whatever the rest says.
    assert_eq!(
        say(&mut c, "HGETDEL s NOPE x a").await,
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    for (line, error) in [
        (
            "HGETDEL h FIELD 1 a",
            "ERR Mandatory argument FIELDS is missing or not at the right position",
        ),
        (
            "HGETDEL h 1 FIELDS a",
            "ERR Mandatory argument FIELDS is missing or not at the right position",
        ),
        (
            "HGETDEL h FIELDS 0 a",
            "ERR Number of fields must be a positive integer",
        ),
        (
            "HGETDEL h FIELDS -1 a",
            "ERR Number of fields must be a positive integer",
        ),
        (
            "HGETDEL h FIELDS abc a",
            "ERR Number of fields must be a positive integer",
        ),
        (
            "HGETDEL h FIELDS 2 a",
            "ERR The `numfields` parameter must match the number of arguments",
        ),
        (
            "HGETDEL h FIELDS 1 a b",
            "ERR The `numfields` parameter must match the number of arguments",
        ),
        (
            "HGETDEL h FIELDS 1",
            "ERR wrong number of arguments for 'hgetdel' command",
        ),
    ] {
        assert_eq!(say(&mut c, line).await, format!("-{error}\r\n"), "{line}");
    }
    // Nothing was taken by the refused calls.
    assert_eq!(say(&mut c, "HLEN h").await, ":2\r\n");
    // `fields` in any case; a field named twice is taken once.
    assert_eq!(
        say(&mut c, "HGETDEL h fields 2 a a").await,
        "*2\r\n$1\r\n1\r\n$-1\r\n"
    );
    // A missing key is an empty hash.
    assert_eq!(
        say(&mut c, "HGETDEL nokey FIELDS 2 a b").await,
        "*2\r\n$-1\r\n$-1\r\n"
    );
    assert_eq!(say(&mut c, "EXISTS nokey").await, ":0\r\n");
}

/// Its notifications are HDEL's (`hdel`, then `del` with the last field),
/// and nothing when no field was there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_notifies_as_hdel() {
    let server = TestServer::start().await;
    let mut c = server.raw().await;
    say(&mut c, "CONFIG SET notify-keyspace-events Eh$g").await;
    let mut subscriber = server.raw().await;
    subscriber.cmd(&words("PSUBSCRIBE __keyevent@0__:*")).await;
    say(&mut c, "HSET h a 1 b 2").await;
    say(&mut c, "HGETDEL h FIELDS 1 nope").await;
    say(&mut c, "HGETDEL h FIELDS 1 a").await;
    say(&mut c, "HGETDEL h FIELDS 2 b x").await;
    say(&mut c, "SET end x").await;
    let mut events = Vec::new();
    loop {
        let frame = String::from_utf8_lossy(&subscriber.reply().await).into_owned();
        let event = frame.split("\r\n").nth(6).unwrap_or_default().to_string();
        if event == "__keyevent@0__:set" {
            break;
        }
        events.push(event);
    }
    assert_eq!(
        events,
        [
            "__keyevent@0__:hset",
            "__keyevent@0__:hdel",
            "__keyevent@0__:hdel",
            "__keyevent@0__:del"
        ]
    );
}
