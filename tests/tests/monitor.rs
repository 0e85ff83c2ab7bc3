//! MONITOR compared with redis-server: the same lines for the same commands
//! (timestamps and client ports blanked), and a monitor that does not read
//! is cut by the output-buffer limit without slowing anyone.

use std::net::SocketAddr;
use std::time::Duration;

use tally_tests::{encode_command, RawConn, RedisServer, TestServer};

/// A line with its timestamp and the client's port blanked.
fn blank(line: &str) -> String {
    let (_, rest) = line.split_once(' ').expect("a timestamp first");
    let (client, command) = rest.split_once("] ").expect("[db client]");
    let client = match client.rsplit_once(':') {
        Some((host, _)) => format!("{host}:PORT"),
        None => client.to_string(),
    };
    format!("{client}] {command}")
}

/// What a monitor sees while another client sends `commands`.
async fn monitored(addr: SocketAddr, commands: &[&[&str]]) -> Vec<String> {
    let mut monitor = RawConn::connect(addr).await;
    assert_eq!(monitor.cmd(&["MONITOR"]).await, b"+OK\r\n");
    let mut client = RawConn::connect(addr).await;
    for command in commands {
        client.cmd(command).await;
    }
    // A marker that is always shown ends the stream.
    client.cmd(&["ECHO", "end"]).await;
    let mut lines = Vec::new();
    loop {
        let line = String::from_utf8(monitor.reply().await).expect("text");
        let line = line.trim_end().trim_start_matches('+').to_string();
        let done = line.ends_with("\"ECHO\" \"end\"");
        lines.push(blank(&line));
        if done {
            return lines;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_lines_are_redis_lines() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let commands: &[&[&str]] = &[
        &["SET", "a", "x y\n\"q\"\x01"],
        &["GET", "a"],
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 'v'); return redis.call('get', KEYS[1])",
            "1",
            "b",
        ],
        &["CONFIG", "GET", "maxmemory"],
        &["AUTH", "secret"],
        &["AUTH", "user", "secret"],
        &["HELLO", "2", "AUTH", "default", "nopass"],
        &["MULTI"],
        &["INCR", "n"],
        &["EXEC"],
        &["GET"],
        &["NOSUCHCOMMAND"],
        &["SELECT", "3"],
        &["SET", "in3", "1"],
        &["CLIENT", "LIST"],
        &["MONITOR"],
    ];
    let expected = monitored(redis.addr, commands).await;
    let got = monitored(tally.addr(), commands).await;
    assert_eq!(got, expected);
    assert!(expected.iter().any(|l| l == "[0 lua] \"set\" \"b\" \"v\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitor_may_not_touch_keys_and_reset_ends_it() {
    let tally = TestServer::start_real_clock().await;
    let mut monitor = tally.raw().await;
    assert_eq!(monitor.cmd(&["MONITOR"]).await, b"+OK\r\n");
    assert_eq!(
        monitor.cmd(&["GET", "a"]).await,
        b"-ERR Replica can't interact with the keyspace\r\n"
    );
    let list = String::from_utf8(tally.raw().await.cmd(&["CLIENT", "LIST"]).await).unwrap();
    assert!(list.contains("flags=O "), "{list}");
    assert_eq!(monitor.cmd(&["RESET"]).await, b"+RESET\r\n");
    assert_eq!(monitor.cmd(&["GET", "a"]).await, b"$-1\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitor_that_does_not_read_is_cut_by_the_replica_limit() {
    let tally = TestServer::start_real_clock().await;
    let mut admin = tally.raw().await;
    admin
        .cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "replica 1mb 0 0",
        ])
        .await;
    let mut monitor = RawConn::connect_small_receive_buffer(tally.addr()).await;
    assert_eq!(monitor.cmd(&["MONITOR"]).await, b"+OK\r\n");
    // 8 MB of commands the monitor never reads.
    let value = "v".repeat(16 * 1024);
    let mut batch = Vec::new();
    for _ in 0..64 {
        batch.extend(encode_command(&["SET", "k", value.as_str()]));
    }
    let mut writer = tally.raw().await;
    for _ in 0..8 {
        writer.send(&batch).await;
        for _ in 0..64 {
            assert_eq!(writer.reply().await, b"+OK\r\n");
        }
    }
    // The monitor was cut: its connection ends after what it had been sent.
    tokio::time::timeout(Duration::from_secs(10), monitor.read_until_closed())
        .await
        .expect("the monitor's connection closes");
    let list = String::from_utf8(admin.cmd(&["CLIENT", "LIST"]).await).unwrap();
    assert!(!list.contains("flags=O"), "{list}");
}
