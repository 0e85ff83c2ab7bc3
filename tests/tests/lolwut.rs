//! LOLWUT against redis-server 7.0.15: what is drawn without a random
//! source is the same bytes (the version line, Schotter's first two rows
//! of squares, the errors, RESP3's verbatim string); what is drawn with
//! one has Redis's shape (rows, characters per row, the signature).

use tally_tests::{assert_script_matches_redis, words, RawConn, RedisServer, TestServer};

const DETERMINISTIC: &str = r#"
    LOLWUT
    LOLWUT 10 20
    LOLWUT VERSION
    LOLWUT VERSION 7
    LOLWUT VERSION 4
    LOLWUT VERSION 49
    LOLWUT VERSION -1
    LOLWUT VERSION x
    LOLWUT version 5 x
    LOLWUT VERSION 5 1 1 1
    LOLWUT VERSION 5 10 3 2
    LOLWUT VERSION 5 66 8 2
    LOLWUT VERSION 5 0 0 0
    LOLWUT VERSION 5 2 1 1
    LOLWUT VERSION 5 3 5 1
    LOLWUT VERSION 5 1000 200 1
    LOLWUT VERSION 6 x
    LOLWUT VERSION 6 1 y
    HELLO 3
    LOLWUT
    LOLWUT VERSION 5 9 2 2
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lolwut_draws_what_redis_draws() {
    assert_script_matches_redis(DETERMINISTIC).await;
}

/// The rows of a reply's art (before the signature), and the signature.
fn shape(reply: &[u8], signature: &str) -> (Vec<usize>, String) {
    let text = String::from_utf8_lossy(reply).into_owned();
    let body = text.split_once("\r\n").map_or("", |(_, rest)| rest);
    let (art, sign) = body.split_at(body.find(signature).unwrap_or(0));
    let rows = art.split('\n').map(|row| row.chars().count()).collect();
    (rows, sign.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_pieces_have_redis_shape() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let mut a = RawConn::connect(redis.addr).await;
    let mut b = RawConn::connect(tally.addr()).await;
    for (command, signature) in [
        ("LOLWUT VERSION 5", "Georg Nees"),
        ("LOLWUT VERSION 5 40 5 9", "Georg Nees"),
        ("LOLWUT VERSION 6", "Dedicated"),
        ("LOLWUT VERSION 6 33 7", "Dedicated"),
    ] {
        let expected = shape(&a.cmd(&words(command)).await, signature);
        let actual = shape(&b.cmd(&words(command)).await, signature);
        assert!(expected.0.len() > 2, "{command}: {expected:?}");
        assert_eq!(actual.0.len(), expected.0.len(), "{command}: rows");
        // A skyline's rows differ in bytes (escapes of two lengths) but
        // not in pixels; Schotter's are one character per two pixels.
        if signature == "Georg Nees" {
            assert_eq!(actual.0, expected.0, "{command}: characters per row");
        }
        assert_eq!(actual.1, expected.1, "{command}: signature");
    }
}
