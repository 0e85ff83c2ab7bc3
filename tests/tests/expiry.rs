//! TTL behaviour driven by a manual clock: keys live through the
//! millisecond of their deadline and vanish the next, as Redis's do
//! (`now > when`, checked against redis-server 7.0.15 under a frozen
//! clock), and the active sweep reclaims keys nobody reads, so memory stays
//! flat under endless TTL churn.

use tally_server::expiry::sweep_once;
use tally_tests::TestServer;

#[tokio::test]
async fn a_key_lives_through_its_deadline_millisecond_and_is_gone_after() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    assert_eq!(conn.line("SET k v EX 10").await, "+OK\r\n");
    server.clock.advance_ms(9_999);
    assert_eq!(conn.line("PTTL k").await, ":1\r\n");
    assert_eq!(conn.line("TTL k").await, ":0\r\n");
    assert_eq!(conn.line("GET k").await, "$1\r\nv\r\n");
    server.clock.advance_ms(1);
    assert_eq!(conn.line("PTTL k").await, ":0\r\n");
    assert_eq!(conn.line("GET k").await, "$1\r\nv\r\n");
    server.clock.advance_ms(1);
    assert_eq!(conn.line("GET k").await, "$-1\r\n");
    assert_eq!(conn.line("TTL k").await, ":-2\r\n");
    assert_eq!(conn.line("EXISTS k").await, ":0\r\n");
}

#[tokio::test]
async fn ttl_rounds_and_absolute_deadlines_follow_the_server_clock() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    assert_eq!(conn.line("SET k v PX 1500").await, "+OK\r\n");
    assert_eq!(conn.line("TTL k").await, ":2\r\n");
    server.clock.advance_ms(1000);
    assert_eq!(conn.line("TTL k").await, ":1\r\n");
    assert_eq!(conn.line("PTTL k").await, ":500\r\n");
    let at = tally_tests::T0_MS / 1000 + 100;
    assert_eq!(conn.line(&format!("EXPIREAT k {at}")).await, ":1\r\n");
    assert_eq!(conn.line("EXPIRETIME k").await, format!(":{at}\r\n"));
    assert_eq!(
        conn.line("PEXPIRETIME k").await,
        format!(":{}\r\n", at * 1000)
    );
    let time = conn.line("TIME").await;
    let seconds = (tally_tests::T0_MS / 1000 + 1).to_string();
    assert!(
        time.contains(&format!("${}\r\n{seconds}\r\n", seconds.len())),
        "{time}"
    );
}

#[tokio::test]
async fn incr_keeps_the_ttl_and_a_rolled_window_starts_from_zero() {
    // The fixed-window counter pattern: INCR then EXPIRE window*2; after the
    // deadline the counter starts again from nothing.
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    assert_eq!(conn.line("INCR rl:u:1").await, ":1\r\n");
    assert_eq!(conn.line("EXPIRE rl:u:1 120").await, ":1\r\n");
    assert_eq!(conn.line("INCRBY rl:u:1 4").await, ":5\r\n");
    assert_eq!(conn.line("TTL rl:u:1").await, ":120\r\n");
    server.clock.advance_ms(120_001);
    assert_eq!(conn.line("INCR rl:u:1").await, ":1\r\n");
    assert_eq!(conn.line("TTL rl:u:1").await, ":-1\r\n");
}

#[tokio::test]
async fn getex_and_persist_change_deadlines() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    conn.line("SET k v").await;
    assert_eq!(conn.line("GETEX k PX 100").await, "$1\r\nv\r\n");
    assert_eq!(conn.line("PTTL k").await, ":100\r\n");
    assert_eq!(conn.line("PERSIST k").await, ":1\r\n");
    server.clock.advance_ms(1000);
    assert_eq!(conn.line("GET k").await, "$1\r\nv\r\n");
    let past = tally_tests::T0_MS - 1;
    assert_eq!(
        conn.line(&format!("GETEX k PXAT {past}")).await,
        "$1\r\nv\r\n"
    );
    assert_eq!(conn.line("EXISTS k").await, ":0\r\n");
}

#[tokio::test]
async fn the_active_sweep_reclaims_keys_nobody_reads() {
    let server = TestServer::start().await;
    let shared = server.handle.shared().clone();
    let mut conn = server.raw().await;
    let mut batch = Vec::new();
    for i in 0..5000 {
        batch.extend(tally_tests::encode_command(&[
            "SET".to_string(),
            format!("rl:user:u_{i}:a3f2:1720000000"),
            "7".to_string(),
            "EX".to_string(),
            "120".to_string(),
        ]));
    }
    conn.send(&batch).await;
    for _ in 0..5000 {
        assert_eq!(conn.reply().await, b"+OK\r\n");
    }
    assert!(shared.store.used_memory() > 5000 * 60);
    server.clock.advance_ms(120_001);
    // One full pass of the sweep takes ten slices.
    for _ in 0..10 {
        sweep_once(&shared);
    }
    assert_eq!(conn.line("DBSIZE").await, ":0\r\n");
    let info = conn.line("INFO stats").await;
    assert!(info.contains("expired_keys:5000\r\n"), "{info}");
}

#[tokio::test]
async fn a_sweep_samples_a_keyspace_where_nothing_expired_and_walks_one_that_did() {
    let server = TestServer::start().await;
    let shared = server.handle.shared().clone();
    let mut conn = server.raw().await;
    let keys = 200_000;
    let mut batch = Vec::new();
    for i in 0..keys {
        batch.extend(tally_tests::encode_command(&[
            "SET".to_string(),
            format!("rl:user:u_{i}:a3f2:1720000000"),
            "7".to_string(),
            "EX".to_string(),
            "120".to_string(),
        ]));
    }
    conn.send(&batch).await;
    for _ in 0..keys {
        assert_eq!(conn.reply().await, b"+OK\r\n");
    }
    // Nothing is stale: one batch of 256 buckets per shard, whatever the
    // keyspace's size (a table is at most 7/8 full, so fewer keys).
    let shards = shared.store.db(0).shard_count() as u64;
    let quiet = sweep_once(&shared);
    assert_eq!(quiet.reclaimed, 0);
    assert!(quiet.examined <= shards * 256, "{quiet:?}");
    assert!(quiet.examined > 0, "{quiet:?}");
    // Everything is stale: each shard's whole slice, a tenth of its table.
    server.clock.advance_ms(120_001);
    let busy = sweep_once(&shared);
    assert_eq!(busy.reclaimed, busy.examined);
    assert!(busy.examined >= keys / 20, "{busy:?}");
    // And the rest within a pass's ten ticks.
    for _ in 0..10 {
        sweep_once(&shared);
    }
    assert_eq!(conn.line("DBSIZE").await, ":0\r\n");
}

#[tokio::test]
async fn memory_stays_flat_under_endless_ttl_churn() {
    let server = TestServer::start().await;
    let shared = server.handle.shared().clone();
    let mut conn = server.raw().await;
    let mut high_water = Vec::new();
    for round in 0..20 {
        let mut batch = Vec::new();
        for i in 0..2000 {
            // Every round uses new key names, as new windows do.
            batch.extend(tally_tests::encode_command(&[
                "INCR".to_string(),
                format!("rl:user:u_{i}:a3f2:{round}"),
            ]));
            batch.extend(tally_tests::encode_command(&[
                "EXPIRE".to_string(),
                format!("rl:user:u_{i}:a3f2:{round}"),
                "2".to_string(),
            ]));
        }
        conn.send(&batch).await;
        for _ in 0..4000 {
            conn.reply().await;
        }
        high_water.push(shared.store.used_memory());
        server.clock.advance_ms(2_001);
        for _ in 0..10 {
            sweep_once(&shared);
        }
    }
    // With the sweep keeping up, every round peaks at the same footprint
    // (table growth included) instead of accumulating 20 rounds of keys.
    let first = high_water[1];
    let last = *high_water.last().unwrap();
    assert!(
        last <= first + first / 10,
        "memory grew from {first} to {last} bytes over the rounds: {high_water:?}"
    );
    assert_eq!(conn.line("DBSIZE").await, ":0\r\n");
}
