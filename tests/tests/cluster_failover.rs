//! Cluster replicas and failover with real processes: a cluster made by
//! `redis-cli --cluster create --cluster-replicas 1`, a master killed with
//! SIGKILL and one stopped with SIGSTOP, each replaced by its replica with
//! every write the replica acknowledged (WAIT) kept; the old master coming
//! back as a replica; CLUSTER FAILOVER handing a shard back without
//! losing a write; and mixed shards where a redis-server replica is
//! elected by tally masters and a tally replica of a redis-server master
//! takes over from it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tally_tests::cluster::{create_with, redis_cli, wait_until};
use tally_tests::keyspace::connect;
use tally_tests::process::TallyProcess;
use tally_tests::replication::wait_for_field;
use tally_tests::RedisServer;

const NODE_TIMEOUT: &str = "2000";

fn tally_node() -> TallyProcess {
    TallyProcess::start(&[
        "--cluster-enabled",
        "yes",
        "--cluster-node-timeout",
        NODE_TIMEOUT,
        "--save",
        "",
    ])
}

/// One line of CLUSTER NODES.
#[derive(Debug, Clone)]
struct NodeView {
    id: String,
    port: u16,
    flags: String,
    master: Option<String>,
    slots: Vec<String>,
}

async fn nodes(address: &str) -> Vec<NodeView> {
    let mut conn = connect(address.parse().expect("an address")).await;
    let text: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut conn)
        .await
        .expect("CLUSTER NODES");
    text.lines()
        .map(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            let port = words[1]
                .split('@')
                .next()
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| p.parse().ok())
                .expect("a port");
            NodeView {
                id: words[0].to_string(),
                port,
                flags: words[2].to_string(),
                master: (words[3] != "-").then(|| words[3].to_string()),
                slots: words[8..].iter().map(|s| s.to_string()).collect(),
            }
        })
        .collect()
}

async fn role(address: &str) -> String {
    let mut conn = connect(address.parse().expect("an address")).await;
    let role: Vec<redis::Value> = redis::cmd("ROLE")
        .query_async(&mut conn)
        .await
        .expect("ROLE");
    match &role[0] {
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        other => panic!("ROLE: {other:?}"),
    }
}

/// Waits (up to a minute) until `address` has `wanted` role.
async fn wait_for_role(address: &str, wanted: &str) -> Duration {
    let start = Instant::now();
    while role(address).await != wanted {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{address} never became {wanted}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    start.elapsed()
}

/// The port of the node serving `key`'s slot, as `address` sees it.
async fn owner_port(address: &str, key: &str) -> u16 {
    let slot = tally_cluster::slot::key_slot(key.as_bytes());
    for node in nodes(address).await {
        for range in &node.slots {
            let (start, end) = match range.split_once('-') {
                Some((a, b)) => (a.parse().unwrap_or(u16::MAX), b.parse().unwrap_or(0)),
                None => {
                    let s = range.parse().unwrap_or(u16::MAX);
                    (s, s)
                }
            };
            if (start..=end).contains(&slot) {
                return node.port;
            }
        }
    }
    panic!("no owner for {key}");
}

/// INCRs keys of one hash tag on the master at `address`, `rounds` times
/// over `keys` keys, then WAITs for one replica: the counts the master
/// had when its replica acknowledged them.
async fn acknowledged_writes(
    address: &str,
    tag: &str,
    keys: usize,
    rounds: usize,
) -> HashMap<String, i64> {
    let mut conn = connect(address.parse().expect("an address")).await;
    let mut counts = HashMap::new();
    for round in 0..rounds {
        for k in 0..keys {
            let key = format!("{{{tag}}}:{k}");
            let n: i64 = redis::cmd("INCR")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .expect("INCR");
            assert!(n > round as i64, "{key}: {n}");
            counts.insert(key, n);
        }
    }
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(10_000)
        .query_async(&mut conn)
        .await
        .expect("WAIT");
    assert_eq!(acked, 1, "the replica acknowledged the writes");
    counts
}

/// Every count as `address` holds it (read with READONLY: on a replica
/// of the keys' master too).
async fn assert_counts(address: &str, counts: &HashMap<String, i64>) {
    let mut conn = connect(address.parse().expect("an address")).await;
    let _: () = redis::cmd("READONLY")
        .query_async(&mut conn)
        .await
        .expect("READONLY");
    for (key, expected) in counts {
        let value: Option<i64> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut conn)
            .await
            .expect("GET");
        assert_eq!(value, Some(*expected), "{key} on {address}");
    }
}

/// Waits (up to a minute) until `address`'s CLUSTER NODES satisfies `ok`.
async fn wait_for_view(address: &str, what: &str, ok: impl Fn(&[NodeView]) -> bool) {
    let start = Instant::now();
    loop {
        let view = nodes(address).await;
        if ok(&view) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{address} never saw {what}: {view:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Three masters and three replicas, none failing.
fn three_shards_of_two(view: &[NodeView]) -> bool {
    view.iter().filter(|n| n.flags.contains("master")).count() == 3
        && view.iter().filter(|n| n.flags.contains("slave")).count() == 3
        && view.iter().all(|n| !n.flags.contains("fail"))
}

fn find(view: &[NodeView], port: u16) -> &NodeView {
    view.iter()
        .find(|n| n.port == port)
        .expect("the node is listed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_and_stopped_masters_are_replaced_by_their_replicas() {
    let mut processes: Vec<TallyProcess> = (0..6).map(|_| tally_node()).collect();
    let addresses: Vec<String> = processes.iter().map(|p| p.address()).collect();
    create_with(&addresses, &["--cluster-replicas", "1"]).await;
    for address in &addresses {
        wait_for_view(address, "3 masters, 3 replicas", three_shards_of_two).await;
    }
    let view = nodes(&addresses[0]).await;
    for replica in view.iter().filter(|n| n.master.is_some()) {
        let address = format!("127.0.0.1:{}", replica.port);
        wait_for_field(address.parse().expect("addr"), "master_link_status", "up").await;
    }
    let ports: Vec<u16> = processes.iter().map(|p| p.port).collect();
    let index_of = |port: u16| ports.iter().position(|&p| p == port).expect("ours");

    // SIGKILL: the replica takes over with every acknowledged write.
    let victim_port = owner_port(&addresses[0], "{killed}").await;
    let victim = index_of(victim_port);
    let victim_id = find(&view, victim_port).id.clone();
    let heir = view
        .iter()
        .find(|n| n.master.as_deref() == Some(victim_id.as_str()))
        .expect("the victim has a replica")
        .port;
    let heir_address = format!("127.0.0.1:{heir}");
    let counts = acknowledged_writes(&addresses[victim], "killed", 10, 20).await;
    processes[victim].kill();
    let took = wait_for_role(&heir_address, "master").await;
    eprintln!("SIGKILL: the replica was master {took:?} later (node timeout {NODE_TIMEOUT} ms)");
    let survivors: Vec<String> = addresses
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != victim)
        .map(|(_, a)| a.clone())
        .collect();
    wait_until(&survivors, "CLUSTER INFO", "cluster_state:ok").await;
    assert_eq!(owner_port(&survivors[0], "{killed}").await, heir);
    assert_counts(&heir_address, &counts).await;

    // The old master comes back as the replica of the new one.
    processes[victim].restart();
    wait_for_role(&addresses[victim], "slave").await;
    let victim_addr = addresses[victim].parse().expect("addr");
    wait_for_field(victim_addr, "master_port", &heir.to_string()).await;
    wait_for_field(victim_addr, "master_link_status", "up").await;
    wait_until(&addresses, "CLUSTER INFO", "cluster_state:ok").await;
    let me = nodes(&addresses[victim]).await;
    let heir_id = find(&me, heir).id.clone();
    assert_eq!(
        find(&me, processes[victim].port).master.as_deref(),
        Some(heir_id.as_str())
    );
    assert_counts(&addresses[victim], &counts).await;

    // CLUSTER FAILOVER hands the shard back; nothing written is lost.
    let more = acknowledged_writes(&heir_address, "killed", 10, 5).await;
    let reply = tally_tests::cluster::cli_at(&addresses[victim], &["CLUSTER", "FAILOVER"]).await;
    assert_eq!(reply.trim(), "OK");
    wait_for_role(&addresses[victim], "master").await;
    wait_for_role(&heir_address, "slave").await;
    assert_counts(&addresses[victim], &more).await;
    wait_until(&addresses, "CLUSTER INFO", "cluster_state:ok").await;

    // SIGSTOP: the stopped master is failed over, and once it runs again
    // it learns it lost its slots and follows its replica.
    let stopped_port = owner_port(&addresses[victim], "{stopped}").await;
    let stopped = index_of(stopped_port);
    let view = nodes(&addresses[victim]).await;
    let stopped_id = find(&view, stopped_port).id.clone();
    let successor = view
        .iter()
        .find(|n| n.master.as_deref() == Some(stopped_id.as_str()))
        .expect("a replica")
        .port;
    let successor_address = format!("127.0.0.1:{successor}");
    let counts = acknowledged_writes(&addresses[stopped], "stopped", 5, 10).await;
    processes[stopped].pause(true);
    let took = wait_for_role(&successor_address, "master").await;
    eprintln!("SIGSTOP: the replica was master {took:?} later");
    processes[stopped].pause(false);
    wait_for_role(&addresses[stopped], "slave").await;
    wait_for_field(
        addresses[stopped].parse().expect("addr"),
        "master_port",
        &successor.to_string(),
    )
    .await;
    assert_counts(&successor_address, &counts).await;
    wait_until(&addresses, "CLUSTER INFO", "cluster_state:ok").await;
    for address in &addresses {
        wait_for_view(address, "3 masters, 3 replicas", three_shards_of_two).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_replica_is_elected_by_tally_masters_and_a_tally_replica_takes_over_from_redis() {
    let Some(redis) = RedisServer::start_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-node-timeout",
        NODE_TIMEOUT,
        "--cluster-port",
        &tally_tests::free_local_port().to_string(),
    ]) else {
        return;
    };
    let mut masters: Vec<TallyProcess> = (0..3).map(|_| tally_node()).collect();
    let addresses: Vec<String> = masters.iter().map(|p| p.address()).collect();
    create_with(&addresses, &[]).await;

    // redis-server joins as the replica of the master of {mixed}.
    let first_port = owner_port(&addresses[0], "{mixed}").await;
    let first = masters
        .iter()
        .position(|p| p.port == first_port)
        .expect("ours");
    let first_id = find(&nodes(&addresses[0]).await, first_port).id.clone();
    let redis_address = redis.addr.to_string();
    let added = redis_cli(
        [
            "--cluster",
            "add-node",
            &redis_address,
            &addresses[first],
            "--cluster-slave",
            "--cluster-master-id",
            &first_id,
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    assert!(added.contains("[OK] New node added correctly."), "{added}");
    wait_for_field(redis.addr, "master_link_status", "up").await;
    let counts = acknowledged_writes(&addresses[first], "mixed", 10, 10).await;

    // The tally master dies: the two others elect redis-server.
    masters[first].kill();
    let took = wait_for_role(&redis_address, "master").await;
    eprintln!("redis-server replica elected by tally masters after {took:?}");
    let survivors: Vec<String> = addresses
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != first)
        .map(|(_, a)| a.clone())
        .collect();
    wait_until(&survivors, "CLUSTER INFO", "cluster_state:ok").await;
    assert_eq!(
        owner_port(&survivors[0], "{mixed}").await,
        redis.addr.port()
    );
    assert_counts(&redis_address, &counts).await;

    // A tally node joins as redis-server's replica and takes over when
    // redis-server is killed.
    let heir = tally_node();
    let redis_id = find(&nodes(&survivors[0]).await, redis.addr.port())
        .id
        .clone();
    let added = redis_cli(
        [
            "--cluster",
            "add-node",
            &heir.address(),
            &survivors[0],
            "--cluster-slave",
            "--cluster-master-id",
            &redis_id,
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    assert!(added.contains("[OK] New node added correctly."), "{added}");
    wait_for_field(heir.addr(), "master_link_status", "up").await;
    let more = acknowledged_writes(&redis_address, "mixed", 10, 3).await;
    drop(redis);
    let took = wait_for_role(&heir.address(), "master").await;
    eprintln!("tally replica of redis-server took over after {took:?}");
    wait_until(&survivors, "CLUSTER INFO", "cluster_state:ok").await;
    assert_eq!(owner_port(&survivors[0], "{mixed}").await, heir.port);
    assert_counts(&heir.address(), &more).await;
}
