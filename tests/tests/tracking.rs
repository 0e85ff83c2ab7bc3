//! CLIENT TRACKING: invalidations as Redis sends them, to the client itself
//! (RESP3 pushes) or redirected (RESP2 `__redis__:invalidate` messages),
//! in default and BCAST modes, and CLIENT TRACKINGINFO/GETREDIR/CACHING.

use std::time::Duration;

use tally_tests::{RawConn, TestServer};

fn words(line: &str) -> Vec<Vec<u8>> {
    tally_tests::words(line)
}

async fn run(conn: &mut RawConn, line: &str) -> String {
    String::from_utf8_lossy(&conn.cmd(&words(line)).await).into_owned()
}

async fn next(conn: &mut RawConn) -> String {
    String::from_utf8_lossy(
        &tokio::time::timeout(Duration::from_secs(5), conn.reply())
            .await
            .expect("an invalidation arrives"),
    )
    .into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resp3_clients_are_told_when_keys_they_read_change() {
    let tally = TestServer::start_real_clock().await;
    let mut client = tally.raw().await;
    let mut writer = tally.raw().await;
    run(&mut client, "HELLO 3").await;
    assert_eq!(run(&mut client, "CLIENT TRACKING on").await, "+OK\r\n");
    run(&mut writer, "SET a 1").await;
    run(&mut writer, "SET b 1").await;
    assert_eq!(run(&mut client, "GET a").await, "$1\r\n1\r\n");
    // b was never read: no invalidation for it.
    run(&mut writer, "INCR b").await;
    run(&mut writer, "INCR a").await;
    assert_eq!(
        next(&mut client).await,
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\na\r\n"
    );
    // Once invalidated, a key is forgotten until read again.
    run(&mut writer, "INCR a").await;
    assert_eq!(run(&mut client, "PING").await, "+PONG\r\n");
    // A flush invalidates everything, with a null key list.
    run(&mut writer, "FLUSHALL").await;
    assert_eq!(next(&mut client).await, ">2\r\n$10\r\ninvalidate\r\n_\r\n");
    assert_eq!(run(&mut client, "CLIENT GETREDIR").await, ":0\r\n");
    let list = run(&mut writer, "CLIENT LIST").await;
    assert!(list.contains("flags=t "), "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resp2_clients_redirect_and_bcast_sends_one_message_per_batch() {
    let tally = TestServer::start_real_clock().await;
    let mut redirection = tally.raw().await;
    let id = run(&mut redirection, "CLIENT ID").await[1..]
        .trim()
        .to_string();
    run(&mut redirection, "SUBSCRIBE __redis__:invalidate").await;
    let mut client = tally.raw().await;
    assert_eq!(
        run(&mut client, &format!("CLIENT TRACKING on REDIRECT {id}")).await,
        "+OK\r\n"
    );
    run(&mut client, "SET a 1").await;
    run(&mut client, "GET a").await;
    run(&mut client, "INCR a").await;
    assert_eq!(
        next(&mut redirection).await,
        "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\na\r\n"
    );
    run(&mut client, "CLIENT TRACKING off").await;
    assert_eq!(
        run(
            &mut client,
            &format!("CLIENT TRACKING on BCAST REDIRECT {id} PREFIX a: PREFIX b:")
        )
        .await,
        "+OK\r\n"
    );
    run(&mut client, "MULTI").await;
    for line in ["INCR a:1", "INCR a:2", "INCR b:1", "INCR c:1"] {
        run(&mut client, line).await;
    }
    run(&mut client, "EXEC").await;
    // One message per prefix, its keys in order; c:1 matches no prefix.
    let mut messages = vec![next(&mut redirection).await, next(&mut redirection).await];
    messages.sort();
    assert_eq!(
        messages,
        vec![
            "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$3\r\nb:1\r\n",
            "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*2\r\n$3\r\na:1\r\n$3\r\na:2\r\n",
        ]
    );
    let info = run(&mut client, "CLIENT TRACKINGINFO").await;
    assert_eq!(
        info,
        format!(
            "*6\r\n$5\r\nflags\r\n*2\r\n$2\r\non\r\n$5\r\nbcast\r\n$8\r\nredirect\r\n:{id}\r\n\
             $8\r\nprefixes\r\n*2\r\n$2\r\na:\r\n$2\r\nb:\r\n"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracking_options_are_checked_as_redis_checks_them() {
    let tally = TestServer::start_real_clock().await;
    let mut client = tally.raw().await;
    for (line, reply) in [
        ("CLIENT TRACKING on PREFIX a", "-ERR PREFIX option requires BCAST mode to be enabled\r\n"),
        ("CLIENT TRACKING on BCAST OPTIN", "-ERR OPTIN and OPTOUT are not compatible with BCAST\r\n"),
        ("CLIENT TRACKING on OPTIN OPTOUT", "-ERR You can't specify both OPTIN mode and OPTOUT mode\r\n"),
        ("CLIENT TRACKING on REDIRECT 9999", "-ERR The client ID you want redirect to does not exist\r\n"),
        ("CLIENT TRACKING maybe", "-ERR syntax error\r\n"),
        ("CLIENT CACHING yes", "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n"),
        ("CLIENT GETREDIR", ":-1\r\n"),
        ("CLIENT TRACKING on BCAST PREFIX a PREFIX ab", "-ERR Prefix 'ab' overlaps with an existing prefix 'a'. Prefixes for a single client must not overlap.\r\n"),
        ("CLIENT TRACKING on OPTIN", "+OK\r\n"),
        ("CLIENT CACHING no", "-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n"),
        ("CLIENT CACHING yes", "+OK\r\n"),
        ("CLIENT TRACKING on OPTOUT", "-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"),
    ] {
        assert_eq!(run(&mut client, line).await, reply, "{line}");
    }
}
