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

/// A RESP3 `invalidate` push for one key.
fn invalidate(key: &str) -> String {
    format!(
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n${}\r\n{key}\r\n",
        key.len()
    )
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
    assert_eq!(next(&mut client).await, invalidate("a"));
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
    tally_tests::assert_script_matches_redis(
        "
        CLIENT TRACKING on PREFIX a
        CLIENT TRACKING on BCAST OPTIN
        CLIENT TRACKING on OPTIN OPTOUT
        CLIENT TRACKING on REDIRECT 9999
        CLIENT TRACKING maybe
        CLIENT CACHING yes
        CLIENT GETREDIR
        # Prefixes may not overlap those given after them, nor those the
        # client has; an equal prefix overlaps too; no prefix adds the
        # empty one unchecked.
        CLIENT TRACKING on BCAST PREFIX a PREFIX ab
        CLIENT TRACKING on BCAST PREFIX ab PREFIX a
        CLIENT TRACKING on BCAST PREFIX x PREFIX x
        CLIENT TRACKING on BCAST PREFIX foo
        CLIENT TRACKING on BCAST PREFIX foo
        CLIENT TRACKING on BCAST PREFIX bar PREFIX foobar
        CLIENT TRACKING on BCAST PREFIX fo
        CLIENT TRACKING on BCAST
        CLIENT TRACKINGINFO
        CLIENT TRACKING off
        CLIENT TRACKING on OPTIN
        CLIENT CACHING no
        CLIENT CACHING yes
        CLIENT TRACKING on OPTOUT
        ",
    )
    .await;
}

/// As Redis's call(): a script's declared keys are remembered when the
/// script runs a read-only command (whichever key it reads), and not at all
/// when it only writes; EVAL_RO follows the same rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_track_their_declared_keys_when_they_read() {
    let tally = TestServer::start_real_clock().await;
    let mut client = tally.raw().await;
    let mut writer = tally.raw().await;
    run(&mut client, "HELLO 3").await;
    run(&mut client, "CLIENT TRACKING on").await;
    let declared = "2 k1{t} k2{t}";
    run(
        &mut client,
        &format!("EVAL return(redis.call('set','k3{{t}}','v')) {declared}"),
    )
    .await;
    run(&mut writer, "MSET k2{t} 1 k1{t} 1 k3{t} 1").await;
    assert_eq!(run(&mut client, "PING").await, "+PONG\r\n");
    run(
        &mut client,
        &format!("EVAL return(redis.call('get','k3{{t}}')) {declared}"),
    )
    .await;
    run(&mut writer, "MSET k3{t} 2 k2{t} 2 k1{t} 2").await;
    assert_eq!(next(&mut client).await, invalidate("k2{t}"));
    assert_eq!(next(&mut client).await, invalidate("k1{t}"));
    // EVAL_RO that only pings tracks nothing; one that reads tracks both.
    run(
        &mut client,
        &format!("EVAL_RO return(redis.call('ping')) {declared}"),
    )
    .await;
    run(&mut writer, "MSET k2{t} 3 k1{t} 3").await;
    assert_eq!(run(&mut client, "PING").await, "+PONG\r\n");
    run(
        &mut client,
        &format!("EVAL_RO return(redis.call('get','k1{{t}}')) {declared}"),
    )
    .await;
    run(&mut writer, "MSET k2{t} 4 k1{t} 4").await;
    assert_eq!(next(&mut client).await, invalidate("k2{t}"));
    assert_eq!(next(&mut client).await, invalidate("k1{t}"));
    assert_eq!(run(&mut client, "PING").await, "+PONG\r\n");
}

/// `tracking-table-max-keys`: lowering it invalidates the keys past the
/// limit at once, each told to its reader as if it changed; FLUSHALL empties
/// the table even when nobody tracks any more (as Redis's
/// trackingInvalidateKeysOnFlush).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tracking_table_keeps_to_its_limit_and_flushes_empty_it() {
    let tally = TestServer::start_real_clock().await;
    let mut client = tally.raw().await;
    let mut admin = tally.raw().await;
    run(&mut client, "HELLO 3").await;
    run(&mut client, "CLIENT TRACKING on").await;
    run(&mut client, "MGET k1 k2 k3 k4 k5").await;
    let keys = |info: String| {
        info.lines()
            .find_map(|l| l.strip_prefix("tracking_total_keys:").map(str::to_string))
            .expect("tracking_total_keys in INFO")
    };
    assert_eq!(keys(run(&mut admin, "INFO stats").await), "5");
    assert_eq!(
        run(&mut admin, "CONFIG SET tracking-table-max-keys 2").await,
        "+OK\r\n"
    );
    let mut evicted = Vec::new();
    for _ in 0..3 {
        let push = next(&mut client).await;
        assert!(
            push.starts_with(">2\r\n$10\r\ninvalidate\r\n*1\r\n$2\r\nk"),
            "{push}"
        );
        evicted.push(push);
    }
    evicted.sort();
    evicted.dedup();
    assert_eq!(evicted.len(), 3);
    assert_eq!(run(&mut client, "PING").await, "+PONG\r\n");
    assert_eq!(keys(run(&mut admin, "INFO stats").await), "2");
    assert_eq!(
        run(&mut admin, "CONFIG GET tracking-table-max-keys").await,
        "*2\r\n$23\r\ntracking-table-max-keys\r\n$1\r\n2\r\n"
    );
    // Tracking off leaves the client's keys in the table; FLUSHALL empties it.
    run(&mut client, "CLIENT TRACKING off").await;
    assert_eq!(keys(run(&mut admin, "INFO stats").await), "2");
    run(&mut admin, "FLUSHALL").await;
    assert_eq!(keys(run(&mut admin, "INFO stats").await), "0");
}

/// A RESP3 client receives invalidations redirected to it as pushes
/// without subscribing to `__redis__:invalidate` (a RESP2 one must
/// subscribe), CLIENT REPLY OFF notwithstanding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resp3_redirect_target_gets_pushes_without_subscribing() {
    let tally = TestServer::start_real_clock().await;
    let mut target = tally.raw().await;
    let mut client = tally.raw().await;
    let mut writer = tally.raw().await;
    run(&mut target, "HELLO 3").await;
    let id = run(&mut target, "CLIENT ID").await[1..].trim().to_string();
    assert_eq!(
        run(&mut client, &format!("CLIENT TRACKING on REDIRECT {id}")).await,
        "+OK\r\n"
    );
    run(&mut client, "GET foo").await;
    target
        .send(&tally_tests::encode_command(&words("CLIENT REPLY OFF")))
        .await;
    run(&mut writer, "SET foo bar").await;
    assert_eq!(next(&mut target).await, invalidate("foo"));
    assert_eq!(run(&mut target, "CLIENT REPLY ON").await, "+OK\r\n");
}
