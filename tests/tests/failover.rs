//! FAILOVER, Redis 6.2+'s coordinated failover outside cluster mode, with
//! real processes: a master pauses writes, waits for a replica to have its
//! whole offset, and hands over with `PSYNC <replid> <offset> FAILOVER`;
//! the old master and the other replicas continue from the new one without
//! a full sync, and no acknowledged write is lost. Also with a replica that
//! never catches up (TIMEOUT, FORCE, ABORT), a target that refuses the
//! PSYNC, and mixed pairs: tally hands over to a redis-server replica, and
//! a redis-server master hands over to a tally replica. The command's
//! errors are compared with a redis-server's.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use tally_tests::keyspace::connect;
use tally_tests::process::TallyProcess;
use tally_tests::replication::{
    assert_same_data, replication_field, run_lines, stats_field, wait_for_field, wait_in_sync,
};
use tally_tests::{assert_no_mismatch, compare_streams, script, RawConn, RedisServer};

/// Makes the server at `replica` follow `master` and waits until it has
/// everything.
async fn replicate(replica: SocketAddr, master: SocketAddr) {
    let mut conn = connect(replica).await;
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port())
        .query_async(&mut conn)
        .await
        .expect("REPLICAOF");
    wait_in_sync(master, replica).await;
}

/// Sends FAILOVER with `args` to `addr`; its reply, an error as text.
async fn failover(addr: SocketAddr, args: &[&str]) -> Result<String, String> {
    let mut conn = connect(addr).await;
    redis::cmd("FAILOVER")
        .arg(args)
        .query_async::<String>(&mut conn)
        .await
        .map_err(|e| e.to_string())
}

/// Waits until `addr` reports `master_failover_state:no-failover`.
async fn failover_ended(addr: SocketAddr) {
    wait_for_field(addr, "master_failover_state", "no-failover").await;
}

/// FAILOVER TO the replica listening on `port`, accepted, and waits until
/// `master` reports it over (handed over, or aborted).
async fn hand_over(master: SocketAddr, port: u16) {
    let reply = failover(master, &["TO", "127.0.0.1", &port.to_string()]).await;
    assert_eq!(reply.as_deref(), Ok("OK"));
    failover_ended(master).await;
}

/// The raw reply to one command.
async fn raw_reply(addr: SocketAddr, args: &[&str]) -> String {
    let reply = RawConn::connect(addr).await.cmd(args).await;
    String::from_utf8_lossy(&reply).into_owned()
}

async fn role(addr: SocketAddr) -> String {
    replication_field(addr, "role").await.unwrap_or_default()
}

/// INCRs `counter` on `addr` until told to stop, counting what was
/// acknowledged; stops at the first error (the master became a replica).
fn start_writer(
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
) -> (Arc<AtomicU64>, tokio::task::JoinHandle<()>) {
    let acked = Arc::new(AtomicU64::new(0));
    let counted = acked.clone();
    let task = tokio::spawn(async move {
        let mut conn = connect(addr).await;
        while !stop.load(Ordering::Relaxed) {
            let reply: redis::RedisResult<i64> = conn.incr("counter", 1).await;
            match reply {
                Ok(_) => counted.fetch_add(1, Ordering::Relaxed),
                Err(_) => break,
            };
        }
    });
    (acked, task)
}

async fn counter(addr: SocketAddr) -> u64 {
    let mut conn = connect(addr).await;
    let value: Option<u64> = conn.get("counter").await.expect("GET");
    value.unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_to_a_named_replica_under_writes_loses_nothing_and_needs_no_full_sync() {
    let master = TallyProcess::start(&[]);
    let target = TallyProcess::start(&[]);
    // One replica from the command line, as redis-server takes it.
    let other = TallyProcess::start(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    replicate(target.addr(), master.addr()).await;
    wait_in_sync(master.addr(), other.addr()).await;
    let stop = Arc::new(AtomicBool::new(false));
    let (acked, writer) = start_writer(master.addr(), stop.clone());
    while acked.load(Ordering::Relaxed) < 200 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    hand_over(master.addr(), target.port).await;
    stop.store(true, Ordering::Relaxed);
    writer.await.expect("the writer");
    assert_eq!(role(master.addr()).await, "slave");
    assert_eq!(role(target.addr()).await, "master");
    // The writes held by the pause ran on the old master as a replica:
    // refused, so every acknowledged increment is on the new master.
    let acked = acked.load(Ordering::Relaxed);
    assert_eq!(counter(target.addr()).await, acked);
    replicate(other.addr(), target.addr()).await;
    wait_in_sync(target.addr(), master.addr()).await;
    assert_eq!(stats_field(target.addr(), "sync_partial_ok").await, "2");
    assert_eq!(stats_field(target.addr(), "sync_full").await, "0");
    assert_same_data(target.addr(), master.addr()).await;
    assert_same_data(target.addr(), other.addr()).await;
    // The old master's writes are refused now, as a replica's.
    assert_eq!(
        raw_reply(master.addr(), &["INCR", "counter"]).await,
        "-READONLY You can't write against a read only replica.\r\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_to_any_replica_picks_one_that_caught_up() {
    let master = TallyProcess::start(&[]);
    let stopped = TallyProcess::start(&[]);
    let live = TallyProcess::start(&[]);
    replicate(stopped.addr(), master.addr()).await;
    replicate(live.addr(), master.addr()).await;
    // The stopped replica cannot acknowledge: the other one is chosen.
    stopped.pause(true);
    run_lines(master.addr(), &["SET case 1"]).await;
    assert_eq!(failover(master.addr(), &[]).await.as_deref(), Ok("OK"));
    failover_ended(master.addr()).await;
    stopped.pause(false);
    assert_eq!(role(live.addr()).await, "master");
    assert_eq!(role(master.addr()).await, "slave");
    wait_in_sync(live.addr(), master.addr()).await;
    assert_same_data(live.addr(), master.addr()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_never_catches_up_times_out_or_is_forced() {
    let master = TallyProcess::start(&[]);
    let target = TallyProcess::start(&[]);
    replicate(target.addr(), master.addr()).await;
    let port = target.port.to_string();

    // TIMEOUT without FORCE: the failover gives up and writes resume.
    target.pause(true);
    run_lines(master.addr(), &["SET case 1"]).await;
    let reply = failover(master.addr(), &["TO", "127.0.0.1", &port, "TIMEOUT", "300"]).await;
    assert_eq!(reply.as_deref(), Ok("OK"));
    failover_ended(master.addr()).await;
    assert_eq!(role(master.addr()).await, "master");
    run_lines(master.addr(), &["SET written-after 1"]).await;

    // ABORT: a write held by the pause runs once the failover is aborted;
    // reads are served meanwhile.
    let reply = failover(
        master.addr(),
        &["TO", "127.0.0.1", &port, "TIMEOUT", "60000"],
    )
    .await;
    assert_eq!(reply.as_deref(), Ok("OK"));
    assert_eq!(
        replication_field(master.addr(), "master_failover_state")
            .await
            .as_deref(),
        Some("waiting-for-sync")
    );
    // Meanwhile a second FAILOVER and REPLICAOF are refused (Redis's
    // texts).
    assert_eq!(
        raw_reply(master.addr(), &["FAILOVER"]).await,
        "-ERR FAILOVER already in progress.\r\n"
    );
    assert_eq!(
        raw_reply(master.addr(), &["REPLICAOF", "NO", "ONE"]).await,
        "-ERR REPLICAOF not allowed while failing over.\r\n"
    );
    let held = tokio::spawn({
        let addr = master.addr();
        async move {
            let mut conn = connect(addr).await;
            let reply: String = conn.set("held", 1).await.expect("SET");
            reply
        }
    });
    let mut conn = connect(master.addr()).await;
    let read: Option<String> = conn.get("case").await.expect("GET");
    assert_eq!(read.as_deref(), Some("1"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!held.is_finished(), "the write waits for the failover");
    assert_eq!(
        failover(master.addr(), &["ABORT"]).await.as_deref(),
        Ok("OK")
    );
    assert_eq!(held.await.expect("the held write"), "OK");
    assert_eq!(role(master.addr()).await, "master");

    // FORCE: at the timeout the master hands over anyway and is a replica
    // at once; the target takes over when it runs again.
    run_lines(master.addr(), &["SET case 2"]).await;
    let reply = failover(
        master.addr(),
        &["TO", "127.0.0.1", &port, "TIMEOUT", "100", "FORCE"],
    )
    .await;
    assert_eq!(reply.as_deref(), Ok("OK"));
    wait_for_field(
        master.addr(),
        "master_failover_state",
        "failover-in-progress",
    )
    .await;
    assert_eq!(role(master.addr()).await, "slave");
    target.pause(false);
    failover_ended(master.addr()).await;
    assert_eq!(role(target.addr()).await, "master");
    wait_in_sync(target.addr(), master.addr()).await;
    assert_same_data(target.addr(), master.addr()).await;
    let mut conn = connect(target.addr()).await;
    let case: Option<String> = conn.get("case").await.expect("GET");
    assert_eq!(case.as_deref(), Some("2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_refuses_the_psync_leaves_the_master_in_charge() {
    let master = TallyProcess::start(&[]);
    let target = TallyProcess::start(&[]);
    replicate(target.addr(), master.addr()).await;
    run_lines(target.addr(), &["ACL SETUSER default -psync"]).await;
    hand_over(master.addr(), target.port).await;
    assert_eq!(role(master.addr()).await, "master");
    assert_eq!(role(target.addr()).await, "slave");
    run_lines(target.addr(), &["ACL SETUSER default +psync"]).await;
    run_lines(master.addr(), &["SET after-abort 1"]).await;
    wait_in_sync(master.addr(), target.addr()).await;
    assert_same_data(master.addr(), target.addr()).await;
}

/// A redis-server for the mixed pairs: its snapshot goes at once.
fn redis_server() -> Option<RedisServer> {
    RedisServer::start_with(&["--repl-diskless-sync-delay", "0"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tally_hands_over_to_a_redis_replica_and_a_redis_master_to_a_tally_replica() {
    let Some(redis) = redis_server() else {
        return;
    };
    let tally = TallyProcess::start(&[]);
    // tally master → redis-server replica.
    run_lines(tally.addr(), &["SET from-tally 1", "INCRBY counter 5"]).await;
    replicate(redis.addr, tally.addr()).await;
    hand_over(tally.addr(), redis.addr.port()).await;
    assert_eq!(role(redis.addr).await, "master");
    assert_eq!(role(tally.addr()).await, "slave");
    run_lines(redis.addr, &["INCRBY counter 7"]).await;
    wait_in_sync(redis.addr, tally.addr()).await;
    assert_eq!(counter(tally.addr()).await, 12);
    assert_eq!(stats_field(redis.addr, "sync_partial_ok").await, "1");
    assert_eq!(stats_field(redis.addr, "sync_full").await, "0");

    // And back: redis-server master → tally replica.
    hand_over(redis.addr, tally.port).await;
    assert_eq!(role(tally.addr()).await, "master");
    assert_eq!(role(redis.addr).await, "slave");
    run_lines(tally.addr(), &["INCRBY counter 30"]).await;
    wait_in_sync(tally.addr(), redis.addr).await;
    assert_eq!(counter(redis.addr).await, 42);
    assert_eq!(stats_field(tally.addr(), "sync_partial_ok").await, "1");
    assert_same_data(tally.addr(), redis.addr).await;
}

/// FAILOVER's argument errors and refusals, reply for reply as a
/// redis-server's: on a master without replicas, then on one with a
/// replica (the port named, 1, is never a replica's), and on the replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_refuses_what_redis_refuses_with_its_errors() {
    let Some(redis) = redis_server() else {
        return;
    };
    let Some(redis_replica) = redis_server() else {
        return;
    };
    let tally = TallyProcess::start(&[]);
    let tally_replica = TallyProcess::start(&[]);
    let alone = script(
        "FAILOVER
        FAILOVER ABORT
        FAILOVER TO 127.0.0.1 1
        FAILOVER TIMEOUT 100 FORCE
        PSYNC ? -1 FAILOVER
        PSYNC 0123456789012345678901234567890123456789 1 FAILOVER",
    );
    assert_no_mismatch(&compare_streams(redis.addr, tally.addr(), &alone).await);
    replicate(redis_replica.addr, redis.addr).await;
    replicate(tally_replica.addr(), tally.addr()).await;
    let with_replica = script(
        "FAILOVER ABORT
        FAILOVER ABORT now
        FAILOVER TO 127.0.0.1 1
        FAILOVER TO invalidhost 1
        FAILOVER TO 127.0.0.1 notaport
        FAILOVER TO 127.0.0.1 1 FORCE
        FAILOVER FORCE TIMEOUT 100
        FAILOVER TIMEOUT 0
        FAILOVER TIMEOUT -5
        FAILOVER TIMEOUT x
        FAILOVER TIMEOUT 10 TIMEOUT 20
        FAILOVER TO 127.0.0.1 1 TO 127.0.0.1 2
        FAILOVER FORCE FORCE
        FAILOVER TO 127.0.0.1
        FAILOVER SOMETHING
        PSYNC ? -1 FAILOVER",
    );
    assert_no_mismatch(&compare_streams(redis.addr, tally.addr(), &with_replica).await);
    let on_replica = script(
        "FAILOVER
        FAILOVER TO 127.0.0.1 1
        PSYNC 0123456789012345678901234567890123456789 1 FAILOVER",
    );
    assert_no_mismatch(
        &compare_streams(redis_replica.addr, tally_replica.addr(), &on_replica).await,
    );
}
