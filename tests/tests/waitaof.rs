//! WAITAOF (Redis 7.2): a client waits until its writes are fsynced by
//! this server's append-only file and by its replicas' (which say so with
//! REPLCONF ACK ... FACK). Errors and replies as Redis 8.0.6 answers them.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tally_tests::process::TallyProcess;
use tally_tests::replication::wait_in_sync;
use tally_tests::{RawConn, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_and_the_local_file_are_checked_as_redis_does() {
    let server = TestServer::start().await;
    let mut c = server.raw().await;
    for (line, reply) in [
        // No append-only file: nothing is fsynced here, and numlocal is refused.
        ("WAITAOF 0 0 0", "*2\r\n:0\r\n:0\r\n"),
        (
            "WAITAOF 1 0 0",
            "-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n",
        ),
        (
            "WAITAOF 2 0 0",
            "-ERR value is out of range, value must between 0 and 1\r\n",
        ),
        (
            "WAITAOF -1 0 0",
            "-ERR value is out of range, value must between 0 and 1\r\n",
        ),
        (
            "WAITAOF x 0 0",
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            "WAITAOF 0 -1 0",
            "-ERR value is out of range, must be positive\r\n",
        ),
        (
            "WAITAOF 0 x 0",
            "-ERR value is out of range, must be positive\r\n",
        ),
        ("WAITAOF 0 0 -1", "-ERR timeout is negative\r\n"),
        (
            "WAITAOF 0 0 x",
            "-ERR timeout is not an integer or out of range\r\n",
        ),
        // No replica: the timeout ends the wait.
        ("WAITAOF 0 1 100", "*2\r\n:0\r\n:0\r\n"),
        (
            "WAITAOF 0 0",
            "-ERR wrong number of arguments for 'waitaof' command\r\n",
        ),
    ] {
        assert_eq!(c.line(line).await, reply, "{line}");
    }
}

async fn say(addr: SocketAddr, line: &str) -> String {
    RawConn::connect(addr).await.line(line).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_acknowledged_once_the_files_here_and_on_the_replica_have_them() {
    // appendfsync everysec: the local fsync comes within a second (WAITAOF
    // asks for it at once).
    let master = TallyProcess::start(&["--appendonly", "yes"]);
    let mut conn = RawConn::connect(master.addr()).await;
    assert_eq!(conn.line("SET a 1").await, "+OK\r\n");
    assert_eq!(conn.line("WAITAOF 1 0 0").await, "*2\r\n:1\r\n:0\r\n");

    // A replica without an append-only file never counts.
    let plain = TallyProcess::start(&[]);
    let port = master.addr().port().to_string();
    assert_eq!(
        say(plain.addr(), &format!("REPLICAOF 127.0.0.1 {port}")).await,
        "+OK\r\n"
    );
    wait_in_sync(master.addr(), plain.addr()).await;
    assert_eq!(conn.line("SET b 2").await, "+OK\r\n");
    let started = Instant::now();
    assert_eq!(conn.line("WAITAOF 1 1 300").await, "*2\r\n:1\r\n:0\r\n");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(
        say(plain.addr(), "WAITAOF 0 0 0").await,
        "-ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.\r\n"
    );

    // One with an append-only file does, once it fsynced the write.
    let durable = TallyProcess::start(&["--appendonly", "yes"]);
    assert_eq!(
        say(durable.addr(), &format!("REPLICAOF 127.0.0.1 {port}")).await,
        "+OK\r\n"
    );
    wait_in_sync(master.addr(), durable.addr()).await;
    assert_eq!(conn.line("INCR c").await, ":1\r\n");
    // It returns when both counts are met (the timeout is a backstop).
    let started = Instant::now();
    assert_eq!(conn.line("WAITAOF 1 1 20000").await, "*2\r\n:1\r\n:1\r\n");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(say(durable.addr(), "GET c").await, "$1\r\n1\r\n");
    // Asking for more replicas than fsynced: the timeout, and the count.
    assert_eq!(conn.line("WAITAOF 0 2 200").await, "*2\r\n:1\r\n:1\r\n");
}
