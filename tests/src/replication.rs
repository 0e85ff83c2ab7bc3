//! Helpers for replication tests: INFO fields, waiting until a replica
//! has everything its master sent, and comparing two servers' data.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::keyspace::{all_contents, connect, run};
use crate::words;

/// A field of INFO replication.
pub async fn replication_field(addr: SocketAddr, field: &str) -> Option<String> {
    info_value(addr, "replication", field).await
}

/// A field of INFO `section` on `addr`, if INFO shows it.
async fn info_value(addr: SocketAddr, section: &str, field: &str) -> Option<String> {
    let mut conn = connect(addr).await;
    let info: String = redis::cmd("INFO")
        .arg(section)
        .query_async(&mut conn)
        .await
        .expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .map(str::to_string)
}

/// Waits until the replica's link is up and it has processed everything
/// the master has sent.
pub async fn wait_in_sync(master: SocketAddr, replica: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let up = replication_field(replica, "master_link_status")
            .await
            .as_deref()
            == Some("up");
        let sent = replication_field(master, "master_repl_offset").await;
        let done = replication_field(replica, "master_repl_offset").await;
        if up && sent.is_some() && sent == done {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "replica not in sync: link up {up}, master at {sent:?}, replica at {done:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs each line (words split on spaces) on `addr`, in order.
pub async fn run_lines(addr: SocketAddr, lines: &[&str]) {
    let mut conn = connect(addr).await;
    for line in lines {
        run(&mut conn, &words(line)).await;
    }
}

/// Every database's contents on both servers are the same.
pub async fn assert_same_data(master: SocketAddr, replica: SocketAddr) {
    for db in 0..16 {
        assert_eq!(
            all_contents(replica, db).await,
            all_contents(master, db).await,
            "db {db}"
        );
    }
}

/// An INFO stats field of `addr`.
pub async fn stats_field(addr: SocketAddr, field: &str) -> String {
    info_field(addr, "stats", field).await
}

/// A field of INFO `section` on `addr` (empty when absent).
pub async fn info_field(addr: SocketAddr, section: &str, field: &str) -> String {
    info_value(addr, section, field).await.unwrap_or_default()
}

/// PSYNCs served so far, full or continued.
pub async fn syncs_served(master: SocketAddr) -> u64 {
    let count = |text: String| text.parse::<u64>().expect("a count");
    count(stats_field(master, "sync_full").await)
        + count(stats_field(master, "sync_partial_ok").await)
}

/// Every key with a deadline has the same one, to the millisecond, on
/// both servers (deadlines travel absolute).
pub async fn assert_same_deadlines(master: SocketAddr, replica: SocketAddr) {
    for db in 0..16i64 {
        let mut on_master = connect(master).await;
        let mut on_replica = connect(replica).await;
        for conn in [&mut on_master, &mut on_replica] {
            let _: () = redis::cmd("SELECT")
                .arg(db)
                .query_async(conn)
                .await
                .expect("SELECT");
        }
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut on_master)
            .await
            .expect("KEYS");
        for key in keys {
            let expected = pexpiretime(&mut on_master, &key).await;
            let actual = pexpiretime(&mut on_replica, &key).await;
            assert_eq!(
                actual,
                expected,
                "db {db} key {}",
                String::from_utf8_lossy(&key)
            );
        }
    }
}

async fn pexpiretime(conn: &mut redis::aio::MultiplexedConnection, key: &[u8]) -> i64 {
    redis::cmd("PEXPIRETIME")
        .arg(key)
        .query_async(conn)
        .await
        .expect("PEXPIRETIME")
}

/// The replica's INFO replication field once it equals `expected`, or a
/// failure after 20 s.
pub async fn wait_for_field(addr: SocketAddr, field: &str, expected: &str) {
    wait_for_info_field(addr, "replication", field, expected).await;
}

/// Waits until INFO `section`'s `field` on `addr` equals `expected`, or
/// fails after 20 s.
pub async fn wait_for_info_field(addr: SocketAddr, section: &str, field: &str, expected: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let value = info_value(addr, section, field).await;
        if value.as_deref() == Some(expected) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{field} is {value:?}, waiting for {expected}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
