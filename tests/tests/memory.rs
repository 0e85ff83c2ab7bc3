//! maxmemory with noeviction: past the limit, writes that may grow memory get
//! Redis's OOM error, everything else keeps working, and nothing acknowledged
//! is ever lost.

use tally_tests::TestServer;

const OOM: &str = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";

#[tokio::test]
async fn a_full_server_refuses_writes_and_keeps_every_acknowledged_one() {
    let server = TestServer::start_with(|c| c.maxmemory = 1024 * 1024).await;
    let mut conn = server.raw().await;
    let mut acknowledged = Vec::new();
    let mut refused = 0;
    for i in 0..200_000 {
        let key = format!("rl:user:u_{i}:a3f2:1720000000");
        let value = format!("value-{i}-{}", "x".repeat(i % 50));
        let reply = conn.cmd(&["SET", &key, &value]).await;
        if reply == b"+OK\r\n" {
            acknowledged.push((key, value));
        } else {
            assert_eq!(String::from_utf8_lossy(&reply), OOM);
            refused += 1;
            if refused == 10 {
                break;
            }
        }
    }
    assert_eq!(refused, 10, "the limit was never reached");
    assert!(acknowledged.len() > 1000);
    // Every write that was acknowledged is still there, byte for byte.
    for (key, value) in &acknowledged {
        let reply = conn.cmd(&["GET", key]).await;
        assert_eq!(
            reply,
            format!("${}\r\n{}\r\n", value.len(), value).into_bytes(),
            "{key} was lost"
        );
    }
    assert_eq!(
        conn.line("DBSIZE").await,
        format!(":{}\r\n", acknowledged.len())
    );
    // A write is refused when its own bytes would not fit (as on Redis,
    // whose used memory holds the command while it runs), so a small one
    // may still fit here: lower the limit to put the server past it.
    assert_eq!(conn.line("CONFIG SET maxmemory 512kb").await, "+OK\r\n");
    // Every denyoom command is refused; reads, DEL, EXPIRE and FLUSHDB work.
    for refused in [
        "SET new v",
        "INCR new",
        "APPEND new v",
        "MSET a 1 b 2",
        "SETNX new v",
        "INCRBYFLOAT new 1",
    ] {
        assert_eq!(conn.line(refused).await, OOM, "{refused}");
    }
    let (first, _) = &acknowledged[0];
    assert_eq!(conn.line(&format!("EXPIRE {first} 100")).await, ":1\r\n");
    assert_eq!(conn.line(&format!("TTL {first}")).await, ":100\r\n");
    assert_eq!(conn.line(&format!("DEL {first}")).await, ":1\r\n");
    let info = conn.line("INFO memory").await;
    assert!(info.contains("maxmemory:524288\r\n"), "{info}");
    assert!(info.contains("maxmemory_policy:noeviction\r\n"), "{info}");
    assert!(info.contains("used_memory:"), "{info}");
    assert_eq!(conn.line("FLUSHDB").await, "+OK\r\n");
    assert_eq!(conn.line("SET new v").await, "+OK\r\n");
    let stats = conn.line("INFO stats").await;
    assert!(stats.contains("evicted_keys:0\r\n"), "{stats}");
}

#[tokio::test]
async fn raising_maxmemory_at_runtime_lets_writes_through_again() {
    let server = TestServer::start_with(|c| c.maxmemory = 1024 * 1024).await;
    let mut conn = server.raw().await;
    let big = "x".repeat(64 * 1024);
    let mut i = 0;
    while conn.cmd(&["SET", &format!("k{i}"), &big]).await == b"+OK\r\n" {
        i += 1;
    }
    assert_eq!(
        conn.cmd(&["SET", "one-more", &big]).await,
        OOM.as_bytes().to_vec()
    );
    assert_eq!(conn.line("CONFIG SET maxmemory 100mb").await, "+OK\r\n");
    assert_eq!(
        conn.line("CONFIG GET maxmemory").await,
        "*2\r\n$9\r\nmaxmemory\r\n$9\r\n104857600\r\n"
    );
    assert_eq!(conn.cmd(&["SET", "one-more", &big]).await, b"+OK\r\n");
}

#[tokio::test]
async fn used_memory_counts_keys_and_returns_to_zero_when_they_go() {
    let server = TestServer::start().await;
    let shared = server.handle.shared().clone();
    let mut conn = server.raw().await;
    assert_eq!(shared.store.used_memory(), 0);
    conn.line("SET k 123").await;
    let one_counter = shared.store.used_memory();
    assert!(one_counter > 0);
    conn.line("APPEND k 4567890123456789012345678901234567890")
        .await;
    assert!(shared.store.used_memory() > one_counter);
    conn.line("DEL k").await;
    conn.line("FLUSHALL").await;
    assert_eq!(shared.store.used_memory(), 0);
}

/// A known limiter script called while the keyspace is just under
/// maxmemory but over it with the call's own arguments counted: the
/// native run and the Lua run (`lua-native-scripts no`) decide alike,
/// both refusing the write with the Lua run's OOM error.
#[tokio::test]
async fn native_and_lua_runs_refuse_alike_at_the_maxmemory_edge() {
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../lua/scripts/sliding_window.lua"
    ))
    .unwrap();
    let mut replies = Vec::new();
    for native in [true, false] {
        let server = TestServer::start_with(|c| c.lua_native_scripts = native).await;
        let mut conn = server.raw().await;
        assert_eq!(conn.line("SET filler 1").await, "+OK\r\n");
        let info = String::from_utf8(conn.cmd(&["INFO", "memory"]).await).unwrap();
        let used: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("used_memory in INFO");
        // Under the limit by 8 bytes; the call's arguments are far more.
        let limit = (used + 8).to_string();
        assert_eq!(
            conn.cmd(&["CONFIG", "SET", "maxmemory", &limit]).await,
            b"+OK\r\n"
        );
        let keys = ["rl:{u}:c", "rl:{u}:p"];
        let reply = conn
            .cmd(&[
                "EVAL",
                &script,
                "2",
                keys[0],
                keys[1],
                "10",
                "60",
                "1720000030",
                "1",
            ])
            .await;
        assert_eq!(conn.line("EXISTS rl:{u}:c").await, ":0\r\n");
        replies.push(String::from_utf8(reply).unwrap());
    }
    assert_eq!(replies[0], replies[1]);
    assert!(
        replies[0].starts_with("-OOM command not allowed when used memory > 'maxmemory'."),
        "{}",
        replies[0]
    );
}

/// SETRANGE far past a string's end grows the string where it lies, as
/// Redis grows its sds: a 512 MB string costs the server about 512 MB at
/// its peak (building the value beside the stored one, as tally once did,
/// peaked at 1 GB), and DEL gives it back to used_memory.
#[tokio::test]
async fn a_512_mb_setrange_costs_its_size_once() {
    let server = tally_tests::process::TallyProcess::start(&[]);
    let mut conn = tally_tests::RawConn::connect(server.addr()).await;
    let info = conn.line("INFO server").await;
    let pid: u32 = info
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|p| p.trim().parse().ok())
        .expect("INFO names the process");
    assert_eq!(
        conn.cmd(&["SETRANGE", "big", "536870911", "x"]).await,
        b":536870912\r\n"
    );
    // Patching inside it copies nothing either.
    assert_eq!(
        conn.cmd(&["SETRANGE", "big", "100", "y"]).await,
        b":536870912\r\n"
    );
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the status");
    let peak_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .expect("VmHWM");
    assert!(
        peak_kb < 700 * 1024,
        "peak RSS {peak_kb} kB for a 512 MB string"
    );
    assert_eq!(
        conn.cmd(&["GETRANGE", "big", "99", "101"]).await,
        b"$3\r\n\0y\0\r\n"
    );
    assert_eq!(conn.cmd(&["DEL", "big"]).await, b":1\r\n");
    let used: u64 = conn
        .line("INFO memory")
        .await
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory");
    assert!(used < 64 * 1024 * 1024, "used_memory {used} after DEL");
}
