//! CLIENT LIST's figures, CLIENT PAUSE, CLIENT REPLY and CLIENT NO-EVICT,
//! against redis-server where the replies do not depend on timing.

use std::time::{Duration, Instant};

use tally_tests::{encode_command, RawConn, RedisServer, TestServer};

fn words(line: &str) -> Vec<Vec<u8>> {
    tally_tests::words(line)
}

async fn run(conn: &mut RawConn, line: &str) -> String {
    String::from_utf8_lossy(&conn.cmd(&words(line)).await).into_owned()
}

/// `field=value` of the CLIENT LIST line of client `id`.
fn client_field(list: &str, id: &str, field: &str) -> String {
    let line = list
        .lines()
        .find(|l| l.contains(&format!("id={id} ")))
        .unwrap_or_else(|| panic!("client {id} in {list}"));
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{field}=")))
        .unwrap_or_else(|| panic!("{field} in {line}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_list_shows_each_connection_as_it_is() {
    let tally = TestServer::start_real_clock().await;
    let mut subscriber = tally.raw().await;
    let sub_id = run(&mut subscriber, "CLIENT ID").await[1..]
        .trim()
        .to_string();
    run(&mut subscriber, "SUBSCRIBE a b").await;
    subscriber.reply().await;
    run(&mut subscriber, "PSUBSCRIBE p*").await;
    let mut transaction = tally.raw().await;
    let tx_id = run(&mut transaction, "CLIENT ID").await[1..]
        .trim()
        .to_string();
    run(&mut transaction, "MULTI").await;
    run(&mut transaction, "SET key value").await;
    run(&mut transaction, "INCR counter").await;
    run(&mut transaction, "CLIENT NO-EVICT ON").await;
    let mut me = tally.raw().await;
    let me_id = run(&mut me, "CLIENT ID").await[1..].trim().to_string();
    let list = run(&mut me, "CLIENT LIST").await;
    assert_eq!(client_field(&list, &sub_id, "flags"), "P");
    assert_eq!(client_field(&list, &sub_id, "sub"), "2");
    assert_eq!(client_field(&list, &sub_id, "psub"), "1");
    assert_eq!(client_field(&list, &sub_id, "cmd"), "psubscribe");
    assert_eq!(client_field(&list, &tx_id, "flags"), "x");
    assert_eq!(client_field(&list, &tx_id, "multi"), "3");
    // The queued arguments' bytes: SET key value (11), INCR counter (11),
    // CLIENT NO-EVICT ON (16).
    assert_eq!(client_field(&list, &tx_id, "multi-mem"), "38");
    // The caller: its own command in the query buffer and argv-mem.
    assert_eq!(client_field(&list, &me_id, "qbuf"), "26");
    assert_eq!(client_field(&list, &me_id, "argv-mem"), "10");
    assert_eq!(client_field(&list, &me_id, "cmd"), "client|list");
    assert_eq!(client_field(&list, &me_id, "events"), "r");
    for id in [&sub_id, &tx_id, &me_id] {
        let fd: i64 = client_field(&list, id, "fd").parse().expect("a number");
        assert!(fd > 2, "a real descriptor: {fd}");
        let total: u64 = client_field(&list, id, "tot-mem")
            .parse()
            .expect("a number");
        assert!(total > 0);
    }
    run(&mut transaction, "DISCARD").await;
    assert_eq!(run(&mut transaction, "CLIENT NO-EVICT ON").await, "+OK\r\n");
    let list = run(&mut me, "CLIENT LIST").await;
    assert_eq!(client_field(&list, &tx_id, "flags"), "e");
    assert_eq!(client_field(&list, &tx_id, "multi"), "-1");
}

/// A client's query buffer, once its commands are consumed, is one read
/// buffer again (qbuf + qbuf-free of 16 KiB, as Redis's PROTO_IOBUF_LEN),
/// not a buffer that shrank by each command read (Redis's querybuf unit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumed_query_buffer_is_one_read_buffer_again() {
    let tally = TestServer::start().await;
    let mut named = tally.raw().await;
    for _ in 0..100 {
        assert_eq!(
            run(&mut named, "CLIENT SETNAME test_client").await,
            "+OK\r\n"
        );
    }
    let id = run(&mut named, "CLIENT ID").await[1..].trim().to_string();
    let mut me = tally.raw().await;
    let list = run(&mut me, "CLIENT LIST").await;
    let qbuf: usize = client_field(&list, &id, "qbuf").parse().expect("a number");
    let free: usize = client_field(&list, &id, "qbuf-free")
        .parse()
        .expect("a number");
    assert_eq!((qbuf, qbuf + free), (0, 16 * 1024), "{list}");
}

/// What each line gets back, replies silenced by CLIENT REPLY included:
/// the whole stream is read at the end, after a PING that always answers.
async fn reply_stream(addr: std::net::SocketAddr) -> String {
    let mut conn = RawConn::connect(addr).await;
    let mut bytes = Vec::new();
    for line in [
        "CLIENT REPLY OFF",
        "SET a 1",
        "GET a",
        "CLIENT REPLY SKIP",
        "CLIENT REPLY ON",
        "CLIENT REPLY SKIP",
        "GET a",
        "ECHO shown",
        "CLIENT REPLY SKIP",
        "CLIENT REPLY ON",
        "CLIENT REPLY BAD",
        "CLIENT REPLY",
        "CLIENT NO-EVICT ON",
        "CLIENT NO-EVICT maybe",
        "CLIENT PAUSE -1",
        "CLIENT PAUSE x",
        "CLIENT PAUSE 10 SOMETIMES",
        "CLIENT UNPAUSE",
        "PING",
    ] {
        bytes.extend(encode_command(&words(line)));
    }
    conn.send(&bytes).await;
    let mut out = String::new();
    loop {
        let reply = String::from_utf8_lossy(&conn.reply().await).into_owned();
        out.push_str(&reply);
        if reply == "+PONG\r\n" {
            return out;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_reply_and_settings_answer_as_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let expected = reply_stream(redis.addr).await;
    assert_eq!(reply_stream(tally.addr()).await, expected);
    assert!(expected.starts_with("+OK\r\n$5\r\nshown\r\n+OK\r\n-ERR syntax error"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_pause_holds_writes_until_unpause_and_serves_reads() {
    let tally = TestServer::start_real_clock().await;
    let mut admin = tally.raw().await;
    let mut writer = tally.raw().await;
    run(&mut admin, "SET a 1").await;
    assert_eq!(
        run(&mut admin, "CLIENT PAUSE 100000 WRITE").await,
        "+OK\r\n"
    );
    // Reads and errors are answered at once.
    assert_eq!(run(&mut writer, "GET a").await, "$1\r\n1\r\n");
    assert_eq!(
        run(&mut writer, "SET a").await,
        "-ERR wrong number of arguments for 'set' command\r\n"
    );
    // A write, an EVAL and a PUBLISH wait; nothing of them is answered.
    writer.send(&encode_command(&["SET", "a", "2"])).await;
    let mut evaluator = tally.raw().await;
    evaluator
        .send(&encode_command(&[
            "EVAL",
            "return redis.call('incr', 'b')",
            "0",
        ]))
        .await;
    let mut publisher = tally.raw().await;
    publisher
        .send(&encode_command(&["PUBLISH", "c", "m"]))
        .await;
    // A transaction's queueing of writes waits too.
    let mut transaction = tally.raw().await;
    assert_eq!(run(&mut transaction, "MULTI").await, "+OK\r\n");
    transaction.send(&encode_command(&["INCR", "b"])).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        run(&mut admin, "GET a").await,
        "$1\r\n1\r\n",
        "the write waited"
    );
    assert_eq!(run(&mut admin, "CLIENT UNPAUSE").await, "+OK\r\n");
    assert_eq!(writer.reply().await, b"+OK\r\n");
    assert_eq!(evaluator.reply().await, b":1\r\n");
    assert_eq!(publisher.reply().await, b":0\r\n");
    assert_eq!(transaction.reply().await, b"+QUEUED\r\n");
    assert_eq!(run(&mut transaction, "EXEC").await, "*1\r\n:2\r\n");
    assert_eq!(run(&mut admin, "GET a").await, "$1\r\n2\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_ends_by_itself_and_all_holds_reads_too() {
    let tally = TestServer::start_real_clock().await;
    let mut admin = tally.raw().await;
    let mut reader = tally.raw().await;
    assert_eq!(run(&mut admin, "CLIENT PAUSE 300 ALL").await, "+OK\r\n");
    let started = Instant::now();
    assert_eq!(run(&mut reader, "PING").await, "+PONG\r\n");
    // Answered only once the pause ended (a lower bound, not a timing limit).
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(run(&mut admin, "SET a 1").await, "+OK\r\n");
}

/// As Redis: a pause keeps the dataset as it is, so keys that expire during
/// it are reclaimed by the active expiry only once it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_holds_active_expiry_until_it_ends() {
    let tally = TestServer::start_real_clock().await;
    let mut admin = tally.raw().await;
    let expired = |info: String| {
        info.lines()
            .find_map(|l| l.strip_prefix("expired_keys:").map(str::to_string))
            .expect("expired_keys in INFO stats")
    };
    run(&mut admin, "SET k v PX 50").await;
    assert_eq!(
        run(&mut admin, "CLIENT PAUSE 100000 WRITE").await,
        "+OK\r\n"
    );
    // Several expiry ticks (hz 10) pass; the key is not read, so only the
    // active expiry could reclaim it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(expired(run(&mut admin, "INFO stats").await), "0");
    assert_eq!(run(&mut admin, "CLIENT UNPAUSE").await, "+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while expired(run(&mut admin, "INFO stats").await) != "1" {
        assert!(Instant::now() < deadline, "the key was never reclaimed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(run(&mut admin, "DBSIZE").await, ":0\r\n");
}

/// A client idle for 2 s gives its buffers back, as Redis's clientsCron
/// frees an idle client's query buffer: CLIENT LIST shows `qbuf=0
/// qbuf-free=0` and an empty reply buffer (`rbs=0`), and the connection
/// then serves small and large commands as before. The server's clock is
/// moved on; the wait below only guards against a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_clients_give_their_buffers_back() {
    let tally = TestServer::start().await;
    let mut idle = tally.raw().await;
    let id = run(&mut idle, "CLIENT ID").await[1..].trim().to_string();
    let mut observer = tally.raw().await;
    let list = run(&mut observer, "CLIENT LIST").await;
    assert_ne!(client_field(&list, &id, "qbuf-free"), "0", "{list}");
    tally.clock.advance_ms(3000);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let list = run(&mut observer, "CLIENT LIST").await;
        let held = ["qbuf", "qbuf-free", "rbs"].map(|field| client_field(&list, &id, field));
        if held == ["0", "0", "0"] {
            break;
        }
        assert!(Instant::now() < deadline, "buffers still held: {held:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(run(&mut idle, "PING").await, "+PONG\r\n");
    let big = "v".repeat(100_000);
    assert_eq!(
        idle.cmd(&[b"SET".to_vec(), b"big".to_vec(), big.clone().into_bytes()])
            .await,
        b"+OK\r\n"
    );
    let mut expected = format!("${}\r\n", big.len()).into_bytes();
    expected.extend_from_slice(big.as_bytes());
    expected.extend_from_slice(b"\r\n");
    assert_eq!(
        idle.cmd(&[b"GET".to_vec(), b"big".to_vec()]).await,
        expected
    );
}

/// CLIENT NO-TOUCH (Redis 7.2): `T` in the client's flags, Redis 8.6.3's
/// replies and errors. tally keeps no access times, so the flag's promise
/// (the client's commands touch none) holds for every client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_no_touch_is_kept_and_shown() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    assert_eq!(conn.line("CLIENT NO-EVICT ON").await, "+OK\r\n");
    assert_eq!(conn.line("CLIENT NO-TOUCH ON").await, "+OK\r\n");
    assert!(conn.line("CLIENT INFO").await.contains(" flags=eT "));
    assert_eq!(
        conn.line("CLIENT NO-TOUCH x").await,
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        conn.line("CLIENT NO-TOUCH").await,
        "-ERR wrong number of arguments for 'client|no-touch' command\r\n"
    );
    assert_eq!(conn.line("CLIENT NO-TOUCH off").await, "+OK\r\n");
    assert!(conn.line("CLIENT INFO").await.contains(" flags=e "));
}
