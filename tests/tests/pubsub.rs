//! Pub/sub: the same subscriber/publisher conversation with redis-server and
//! tally, compared frame by frame (RESP2 subscribe mode, RESP3 push frames,
//! pattern messages, PUBSUB introspection), the same for shard channels
//! (SSUBSCRIBE, SPUBLISH, SUNSUBSCRIBE); and the output-buffer limit
//! that disconnects a subscriber which stops reading, while publishers and
//! other subscribers carry on.

use std::net::SocketAddr;

use tally_tests::{words, RawConn, RedisServer, TestServer};

/// Who sends a step's command.
#[derive(Clone, Copy)]
enum Who {
    Subscriber,
    Publisher,
}

/// One step: who sends what, then how many frames each side reads.
struct Step {
    who: Who,
    command: &'static str,
    subscriber_frames: usize,
    publisher_frames: usize,
}

const fn s(command: &'static str, frames: usize) -> Step {
    Step {
        who: Who::Subscriber,
        command,
        subscriber_frames: frames,
        publisher_frames: 0,
    }
}

/// A PUBLISH (or other publisher command) whose reply the publisher reads,
/// followed by `delivered` frames on the subscriber.
const fn p(command: &'static str, delivered: usize) -> Step {
    Step {
        who: Who::Publisher,
        command,
        subscriber_frames: delivered,
        publisher_frames: 1,
    }
}

const CONVERSATION: &[Step] = &[
    s("SUBSCRIBE news alerts", 2),
    s("SUBSCRIBE news", 1),
    s("PSUBSCRIBE rl:rules:* metrics.*", 2),
    s("GET k", 1),
    s("SET k v", 1),
    s("PING", 1),
    s("PING hello", 1),
    p("PUBLISH news first", 1),
    p("PUBLISH rl:rules:global v2", 1),
    p("PUBLISH metrics.cpu 93", 1),
    p("PUBLISH rl:other x", 0),
    p("PUBLISH nobody x", 0),
    p("PUBSUB NUMSUB news alerts nosuch", 0),
    p("PUBSUB NUMSUB", 0),
    p("PUBSUB NUMPAT", 0),
    p("PUBSUB CHANNELS news", 0),
    p("PUBSUB CHANNELS nomatch*", 0),
    p("PUBSUB NOSUCH", 0),
    s("UNSUBSCRIBE news", 1),
    p("PUBLISH news gone", 0),
    s("UNSUBSCRIBE nosuch", 1),
    s("PUNSUBSCRIBE metrics.*", 1),
    p("PUBLISH rl:rules:global v3", 1),
    p("PUBLISH metrics.cpu 12", 0),
    s("UNSUBSCRIBE", 1),
    s("PUNSUBSCRIBE", 1),
    s("PUNSUBSCRIBE", 1),
    s("UNSUBSCRIBE", 1),
    s("GET k", 1),
    s("PING", 1),
    s("HELLO 3", 1),
    s("SUBSCRIBE news", 1),
    s("GET k", 1),
    s("PING", 1),
    p("PUBLISH news in-resp3", 1),
    s("PSUBSCRIBE n*", 1),
    p("PUBLISH news both", 2),
    s("UNSUBSCRIBE", 1),
    s("PUNSUBSCRIBE", 1),
    s("SUBSCRIBE again", 1),
    s("RESET", 1),
    p("PUBLISH again after-reset", 0),
    s("PING", 1),
];

/// Shard channels outside cluster mode: counted apart from channels and
/// patterns, never reached by PUBLISH or patterns, refused inside EXEC.
/// (One shard channel at a time where all are dropped at once: Redis
/// lists them in its dict's order.)
const SHARD_CONVERSATION: &[Step] = &[
    s("SSUBSCRIBE orders", 1),
    s("SSUBSCRIBE orders", 1),
    s("SUBSCRIBE news", 1),
    s("PSUBSCRIBE ord*", 1),
    s("GET k", 1),
    p("SPUBLISH orders first", 1),
    p("PUBLISH orders plain", 1),
    p("SPUBLISH news sharded", 0),
    p("SPUBLISH nobody x", 0),
    p("SPUBLISH orders", 0),
    p("PUBSUB SHARDCHANNELS", 0),
    p("PUBSUB SHARDCHANNELS ord*", 0),
    p("PUBSUB SHARDCHANNELS nomatch*", 0),
    p("PUBSUB SHARDCHANNELS a b", 0),
    p("PUBSUB SHARDNUMSUB orders news nosuch", 0),
    p("PUBSUB SHARDNUMSUB", 0),
    p("PUBSUB CHANNELS", 0),
    p("PUBSUB NUMSUB orders", 0),
    p("PUBSUB CHANNELS a b", 0),
    p("COMMAND GETKEYS SPUBLISH orders x", 0),
    p("COMMAND GETKEYS SSUBSCRIBE orders", 0),
    p("MULTI", 0),
    p("SSUBSCRIBE orders", 0),
    p("SPUBLISH orders from-exec", 0),
    p("EXEC", 1),
    s("SUNSUBSCRIBE nosuch", 1),
    s("SUNSUBSCRIBE", 1),
    s("SUNSUBSCRIBE", 1),
    s("GET k", 1),
    s("UNSUBSCRIBE", 1),
    s("PUNSUBSCRIBE", 1),
    s("GET k", 1),
    s("HELLO 3", 1),
    s("SSUBSCRIBE orders", 1),
    s("GET k", 1),
    p("SPUBLISH orders resp3", 1),
    s("SUNSUBSCRIBE orders", 1),
    s("SSUBSCRIBE again", 1),
    s("RESET", 1),
    p("SPUBLISH again after-reset", 0),
    p("PUBSUB SHARDNUMSUB again", 0),
];

/// Runs a conversation against one server, returning every frame read.
async fn converse(addr: SocketAddr, conversation: &[Step]) -> Vec<String> {
    let mut subscriber = RawConn::connect(addr).await;
    let mut publisher = RawConn::connect(addr).await;
    let mut transcript = Vec::new();
    for step in conversation {
        let args = words(step.command);
        let sender = match step.who {
            Who::Subscriber => &mut subscriber,
            Who::Publisher => &mut publisher,
        };
        let first = sender.cmd(&args).await;
        // HELLO's reply carries the connection id, which differs.
        let first = if step.command.starts_with("HELLO") {
            "<hello>".to_string()
        } else {
            String::from_utf8_lossy(&first).into_owned()
        };
        transcript.push(format!("{} -> {first:?}", step.command));
        let (more_sub, more_pub) = match step.who {
            Who::Subscriber => (step.subscriber_frames - 1, 0),
            Who::Publisher => (step.subscriber_frames, step.publisher_frames - 1),
        };
        for _ in 0..more_pub {
            let frame = publisher.reply().await;
            transcript.push(format!(
                "  publisher <- {:?}",
                String::from_utf8_lossy(&frame)
            ));
        }
        for _ in 0..more_sub {
            let frame = subscriber.reply().await;
            transcript.push(format!(
                "  subscriber <- {:?}",
                String::from_utf8_lossy(&frame)
            ));
        }
    }
    transcript
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_conversation_matches_redis_frame_by_frame() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    for conversation in [CONVERSATION, SHARD_CONVERSATION] {
        let expected = converse(redis.addr, conversation).await;
        let actual = converse(tally.addr(), conversation).await;
        for (i, (e, a)) in expected.iter().zip(&actual).enumerate() {
            assert_eq!(e, a, "frame {i} differs");
        }
        assert_eq!(expected.len(), actual.len());
    }
}

async fn client_count(conn: &mut RawConn) -> usize {
    let list = conn.line("CLIENT LIST").await;
    list.matches("id=").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_stops_reading_is_cut_off_at_the_hard_limit() {
    // Redis's default `client-output-buffer-limit pubsub 32mb 8mb 60`.
    let server = TestServer::start().await;
    let mut slow = RawConn::connect_small_receive_buffer(server.addr()).await;
    let mut reader = server.raw().await;
    let mut publisher = server.raw().await;
    assert!(slow.line("SUBSCRIBE feed").await.contains("subscribe"));
    assert!(reader.line("SUBSCRIBE feed").await.contains("subscribe"));
    assert_eq!(client_count(&mut publisher).await, 3);

    // 48 MB in 100 KB messages. `slow` never reads; `reader` reads each one.
    let payload = "x".repeat(100 * 1024);
    let publish = ["PUBLISH", "feed", payload.as_str()];
    let mut receivers = Vec::new();
    for _ in 0..480 {
        let reply = publisher.cmd(&publish).await;
        receivers.push(String::from_utf8_lossy(&reply).into_owned());
        let message = reader.reply().await;
        assert!(message.ends_with(format!("{payload}\r\n").as_bytes()));
    }
    // Every publication was answered at once; the first ones reached both
    // subscribers, the last ones only the reader.
    assert_eq!(receivers.first().map(String::as_str), Some(":2\r\n"));
    assert_eq!(receivers.last().map(String::as_str), Some(":1\r\n"));

    // The slow subscriber gets what was in flight, then the connection ends.
    let received = slow.read_until_closed().await;
    assert!(
        received.len() < 48 * 1024 * 1024,
        "it was cut off before the end"
    );
    assert_eq!(client_count(&mut publisher).await, 2);
    assert_eq!(
        publisher.line("PUBSUB NUMSUB feed").await,
        "*2\r\n$4\r\nfeed\r\n:1\r\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_over_the_soft_limit_for_its_period_is_cut_off() {
    let server = TestServer::start().await;
    let mut slow = RawConn::connect_small_receive_buffer(server.addr()).await;
    let mut publisher = server.raw().await;
    let slow_id = slow.line("CLIENT ID").await[1..].trim().to_string();
    slow.line("SUBSCRIBE feed").await;
    // 20 MB: over the 8 MB soft limit (whatever the kernel buffers hold),
    // under the 32 MB hard limit.
    let payload = "y".repeat(100 * 1024);
    let publish = ["PUBLISH", "feed", payload.as_str()];
    for _ in 0..200 {
        assert_eq!(publisher.cmd(&publish).await, b":1\r\n");
    }
    // CLIENT LIST shows what waits for the subscriber as its omem.
    let list = publisher.line("CLIENT LIST").await;
    let omem: u64 = list
        .lines()
        .find(|l| l.starts_with(&format!("id={slow_id} ")))
        .and_then(|l| l.split(' ').find_map(|f| f.strip_prefix("omem=")))
        .and_then(|v| v.parse().ok())
        .expect("the subscriber's omem in CLIENT LIST");
    assert!(omem > 8 * 1024 * 1024, "omem={omem}");
    server.clock.advance_ms(59_000);
    assert_eq!(publisher.cmd(&publish).await, b":1\r\n");
    assert_eq!(client_count(&mut publisher).await, 2, "not yet: under 60 s");
    server.clock.advance_ms(1_000);
    publisher.cmd(&publish).await;
    slow.read_until_closed().await;
    assert_eq!(client_count(&mut publisher).await, 1);
}

#[tokio::test]
async fn the_pubsub_limit_is_configurable_like_redis() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    assert_eq!(
        conn.line("CONFIG GET client-output-buffer-limit").await,
        "*2\r\n$26\r\nclient-output-buffer-limit\r\n$67\r\nnormal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60\r\n"
    );
    let set = [
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "pubsub 1mb 512kb 10",
    ];
    assert_eq!(conn.cmd(&set).await, b"+OK\r\n");
    assert!(conn
        .line("CONFIG GET client-output-buffer-limit")
        .await
        .contains("pubsub 1048576 524288 10"));
    let bad = [
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "normal 1mb 0 0",
    ];
    assert!(conn.cmd(&bad).await.starts_with(b"-ERR"));
}

/// What a client that silenced its replies (CLIENT REPLY OFF) and then
/// subscribes reads: every confirmation and message still, since Redis
/// sends them as pushes, not replies, in both protocols; the silenced PING
/// in RESP3's subscribed mode sends nothing. Read frame by frame, each
/// step's frames before the next, so that anything the server should have
/// kept back shows up out of place.
async fn silenced_subscriber(addr: SocketAddr, resp3: bool) -> Vec<String> {
    let mut subscriber = RawConn::connect(addr).await;
    let mut publisher = RawConn::connect(addr).await;
    if resp3 {
        subscriber.cmd(&["HELLO", "3"]).await;
    }
    let mut frames = Vec::new();
    let lines = |lines: &[&str]| -> Vec<u8> {
        lines
            .iter()
            .flat_map(|line| tally_tests::encode_command(&words(line)))
            .collect()
    };
    subscriber
        .send(&lines(&["CLIENT REPLY OFF", "SUBSCRIBE a b"]))
        .await;
    for _ in 0..2 {
        frames.push(String::from_utf8_lossy(&subscriber.reply().await).into_owned());
    }
    assert_eq!(publisher.cmd(&["PUBLISH", "a", "hi"]).await, b":1\r\n");
    frames.push(String::from_utf8_lossy(&subscriber.reply().await).into_owned());
    let unsubscribe: &[&str] = if resp3 {
        &["PING", "UNSUBSCRIBE a", "UNSUBSCRIBE"]
    } else {
        &["UNSUBSCRIBE a", "UNSUBSCRIBE"]
    };
    subscriber.send(&lines(unsubscribe)).await;
    for _ in 0..2 {
        frames.push(String::from_utf8_lossy(&subscriber.reply().await).into_owned());
    }
    subscriber.send(&lines(&["CLIENT REPLY ON", "PING"])).await;
    for _ in 0..2 {
        frames.push(String::from_utf8_lossy(&subscriber.reply().await).into_owned());
    }
    frames
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmations_reach_a_subscriber_whose_replies_are_off() {
    let tally = TestServer::start_real_clock().await;
    let redis = RedisServer::start();
    for resp3 in [false, true] {
        let push = if resp3 { ">" } else { "*" };
        let expected: Vec<String> = vec![
            format!("{push}3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"),
            format!("{push}3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n"),
            format!("{push}3\r\n$7\r\nmessage\r\n$1\r\na\r\n$2\r\nhi\r\n"),
            format!("{push}3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:1\r\n"),
            format!("{push}3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:0\r\n"),
            "+OK\r\n".to_string(),
            "+PONG\r\n".to_string(),
        ];
        if let Some(redis) = &redis {
            assert_eq!(
                silenced_subscriber(redis.addr, resp3).await,
                expected,
                "redis-server"
            );
        }
        assert_eq!(
            silenced_subscriber(tally.addr(), resp3).await,
            expected,
            "tally"
        );
    }
}
