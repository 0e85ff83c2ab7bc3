//! Framing: RESP multibulk and inline requests, protocol errors (which reply
//! and close), limits on claimed lengths, pipelining.

use std::time::Duration;

use tally_tests::{RawConn, RedisServer, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends `input` and collects what comes back until the peer closes or stays
/// quiet for a moment. Returns the bytes and whether the connection closed.
async fn exchange(addr: std::net::SocketAddr, input: &[u8]) -> (Vec<u8>, bool) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(input).await.unwrap();
    let mut out = Vec::new();
    loop {
        let mut chunk = [0u8; 4096];
        match tokio::time::timeout(Duration::from_millis(300), stream.read(&mut chunk)).await {
            Err(_) => return (out, false),
            Ok(Ok(0)) | Ok(Err(_)) => return (out, true),
            Ok(Ok(n)) => out.extend_from_slice(&chunk[..n]),
        }
    }
}

const RAW_CASES: &[&[u8]] = &[
    b"*x\r\n",
    b"*1\r\n+foo\r\n",
    b"*1\r\n$-1\r\n",
    b"*1\r\n$x\r\n",
    b"*1\r\n$600000000\r\n",
    b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n*x\r\n",
    b"SET a \"b\r\n",
    b"SET 'a'b c\r\n",
    b"PING\r\nECHO \"a b\\x41\"\r\n",
    b"*3000000000\r\n",
    b"*-5\r\nPING\r\n",
    b"*0\r\nPING\r\n",
    b"\r\n\r\nPING\r\n",
    b"*1\r\n$4\r\nPING\r\n$",
    b"*2\r\n$4\r\nPING\r\n:1\r\n",
    b"ping\nping\n",
    b"GET\r\n",
    b"*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_errors_and_inline_commands_match_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    for case in RAW_CASES {
        let expected = exchange(redis.addr, case).await;
        let actual = exchange(tally.addr(), case).await;
        assert_eq!(
            (String::from_utf8_lossy(&actual.0), actual.1),
            (String::from_utf8_lossy(&expected.0), expected.1),
            "input {:?}",
            String::from_utf8_lossy(case)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_inline_and_header_lines_are_protocol_errors() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let inline = vec![b'a'; 70 * 1024];
    let mut header = b"*".to_vec();
    header.extend(vec![b'1'; 70 * 1024]);
    let mut bulk_header = b"*1\r\n$".to_vec();
    bulk_header.extend(vec![b'1'; 70 * 1024]);
    for case in [inline, header, bulk_header] {
        let expected = exchange(redis.addr, &case).await;
        let actual = exchange(tally.addr(), &case).await;
        assert_eq!(
            (String::from_utf8_lossy(&actual.0), actual.1),
            (String::from_utf8_lossy(&expected.0), expected.1)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_clients_get_small_limits_like_redis() {
    let Some(redis) = RedisServer::start_with(&["--requirepass", "secret"]) else {
        return;
    };
    let tally = TestServer::start_with(|c| c.requirepass = Some("secret".into())).await;
    let mut big_bulk = b"*1\r\n$20000\r\n".to_vec();
    big_bulk.extend(vec![b'x'; 20000]);
    big_bulk.extend(b"\r\n");
    let cases: Vec<Vec<u8>> = vec![
        b"*11\r\n".to_vec(),
        big_bulk,
        b"*1\r\n$4\r\nPING\r\n".to_vec(),
        b"*2\r\n$4\r\nAUTH\r\n$5\r\nwrong\r\n".to_vec(),
        b"*2\r\n$4\r\nAUTH\r\n$6\r\nsecret\r\n*1\r\n$4\r\nPING\r\n".to_vec(),
        b"*3\r\n$4\r\nAUTH\r\n$7\r\ndefault\r\n$6\r\nsecret\r\n".to_vec(),
        b"*1\r\n$3\r\nFOO\r\n".to_vec(),
        b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n".to_vec(),
    ];
    for case in cases {
        let expected = exchange(redis.addr, &case).await;
        let actual = exchange(tally.addr(), &case).await;
        assert_eq!(
            (String::from_utf8_lossy(&actual.0), actual.1),
            (String::from_utf8_lossy(&expected.0), expected.1),
            "input {:?}",
            String::from_utf8_lossy(&case[..case.len().min(40)])
        );
    }
}

#[tokio::test]
async fn a_claimed_huge_bulk_is_not_allocated_up_front() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    // Claim a 500 MB argument (under proto-max-bulk-len) and send 1 KB of it.
    let mut partial = b"*2\r\n$3\r\nGET\r\n$524288000\r\n".to_vec();
    partial.extend(vec![b'x'; 1024]);
    conn.send(&partial).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut probe = server.raw().await;
    let info = probe.line("INFO clients").await;
    let biggest: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("client_recent_max_input_buffer:"))
        .expect("INFO clients reports client_recent_max_input_buffer")
        .trim()
        .parse()
        .unwrap();
    assert!(
        biggest < 1024 * 1024,
        "input buffer grew to {biggest} bytes"
    );
}

#[tokio::test]
async fn a_bulk_over_proto_max_bulk_len_is_refused_from_its_header() {
    let server = TestServer::start_with(|c| c.proto_max_bulk_len = 1024 * 1024).await;
    let mut conn = server.raw().await;
    conn.send(b"*2\r\n$3\r\nGET\r\n$1048577\r\n").await;
    let closed = conn.read_until_closed().await;
    assert_eq!(closed, b"-ERR Protocol error: invalid bulk length\r\n");
}

#[tokio::test]
async fn a_deep_pipeline_is_answered_in_order() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    let mut batch = Vec::new();
    for i in 0..1000 {
        batch.extend(tally_tests::encode_command(&["INCR", "n"]));
        batch.extend(tally_tests::encode_command(&["ECHO", &i.to_string()]));
    }
    conn.send(&batch).await;
    for i in 0..1000 {
        assert_eq!(conn.reply().await, format!(":{}\r\n", i + 1).into_bytes());
        let echoed = i.to_string();
        assert_eq!(
            conn.reply().await,
            format!("${}\r\n{}\r\n", echoed.len(), echoed).into_bytes()
        );
    }
}

#[tokio::test]
async fn a_pipeline_split_at_every_byte_still_parses() {
    let server = TestServer::start().await;
    let mut conn: RawConn = server.raw().await;
    let mut batch = tally_tests::encode_command(&["SET", "k", "value with spaces"]);
    batch.extend(tally_tests::encode_command(&["GET", "k"]));
    for byte in &batch {
        conn.send(std::slice::from_ref(byte)).await;
    }
    assert_eq!(conn.reply().await, b"+OK\r\n");
    assert_eq!(conn.reply().await, b"$17\r\nvalue with spaces\r\n");
}

/// The look ahead at a pipeline's next commands, and a multi-key
/// command's fetch of its own keys (both `prefetch-batch-max-size`), only
/// fetch keys' memory early: on a keyspace large enough for them to run,
/// a pipeline mixing every kind of frame, MSET and MGET among them, is
/// answered byte for byte as with them off.
#[tokio::test]
async fn the_look_ahead_changes_no_reply() {
    let mut frames: Vec<Vec<u8>> = Vec::new();
    for i in 0..40 {
        let key = format!("key:{}", i * 997);
        let script = "return redis.call('GET', KEYS[1])";
        let select = if i % 2 == 0 { "1" } else { "0" };
        for words in [
            &["GET", &key][..],
            &["INCR", &format!("counter:{i}")],
            &["SET", &key, "changed"],
            &["EVAL", script, "1", &key],
            &["GET"],
            &["NOSUCHCOMMAND", &key],
            &["MULTI"],
            &["DEL", &key],
            &["EXEC"],
            &[
                "MSET",
                &key,
                "m",
                "key:1",
                "m",
                &format!("key:{}", i + 7),
                "m",
            ],
            &["MGET", &key, "key:1", "key:2", &format!("key:{}", i + 7)],
            &["SELECT", select],
        ] {
            frames.push(tally_tests::encode_command(words));
        }
        frames.push(format!("EXISTS {key}\r\n").into_bytes());
    }
    let pipeline = frames.concat();
    let commands = frames.len();
    let mut answers = Vec::new();
    for batch in ["16", "0"] {
        let server = TestServer::start_with(|config| {
            config.prefetch_batch_max_size = batch.parse().unwrap();
            config.enable_debug_command = tally_server::config::ProtectedAction::Yes;
        })
        .await;
        let mut conn = server.raw().await;
        // 50,000 keys of 32 bytes: past the 2 MiB below which the look
        // ahead does not run.
        assert_eq!(conn.line("DEBUG POPULATE 50000 key 32").await, "+OK\r\n");
        assert_eq!(
            conn.line("CONFIG GET prefetch-batch-max-size").await,
            format!(
                "*2\r\n$23\r\nprefetch-batch-max-size\r\n${}\r\n{batch}\r\n",
                batch.len()
            )
        );
        conn.send(&pipeline).await;
        let mut replies = Vec::new();
        for _ in 0..commands {
            replies.push(conn.reply().await);
        }
        // The first round, as Redis answers it.
        assert!(
            replies[0].starts_with(b"$32\r\nvalue:0\0"),
            "{:?}",
            replies[0]
        );
        assert_eq!(replies[1], b":1\r\n");
        assert_eq!(replies[2], b"+OK\r\n");
        assert_eq!(replies[3], b"$7\r\nchanged\r\n");
        assert_eq!(
            replies[4],
            b"-ERR wrong number of arguments for 'get' command\r\n"
        );
        assert!(replies[5].starts_with(b"-ERR unknown command 'NOSUCHCOMMAND'"));
        assert_eq!(replies[8], b"*1\r\n:1\r\n");
        assert_eq!(replies[9], b"+OK\r\n");
        assert!(
            replies[10].starts_with(b"*4\r\n$1\r\nm\r\n$1\r\nm\r\n$32\r\nvalue:2\0"),
            "{:?}",
            replies[10]
        );
        assert!(replies[10].ends_with(b"$1\r\nm\r\n"));
        assert_eq!(replies[12], b":0\r\n");
        answers.push(replies);
    }
    assert_eq!(answers[0], answers[1]);
}
