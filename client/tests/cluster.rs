//! tally-client against a cluster of three tally nodes: the URLs are seeds,
//! each identity's checks go to the node serving its slot, a slot moved
//! under the limiter is followed (ASK while it moves, MOVED after), a node
//! that is down trips only its own breaker, a master that fails is followed
//! to the replica that replaces it, and the rules are read from whichever
//! node serves their key.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tally_client::keys::{limit_prefix, window_key};
use tally_client::{
    Error, FailurePolicy, Identity, Limiter, LimiterConfig, Mode, RuleSet, RuleSource, Source,
};
use tally_server::ServerHandle;
use tally_tests::cluster::{address, node_on_free_ports, wait_until};
use tally_tests::TestServer;

/// The rules' window, in seconds.
const WINDOW: u64 = 3600;

const RULES: &str = r#"
    version = 1
    [tiers.free]
    global = { limit = 8, window_seconds = 3600 }
    endpoints."GET /search" = { limit = 5, window_seconds = 3600 }
"#;

fn config(mode: Mode, policy: FailurePolicy) -> LimiterConfig {
    LimiterConfig {
        mode,
        policy,
        // Debug builds on a shared 2-core box.
        call_timeout: Duration::from_secs(2),
        sync_timeout: Duration::from_secs(2),
        background_tasks: false,
        ..LimiterConfig::default()
    }
}

async fn connect(address: &str) -> MultiplexedConnection {
    redis::Client::open(format!("redis://{address}"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn cmd<T: redis::FromRedisValue>(address: &str, args: &[&str]) -> T {
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command
        .query_async(&mut connect(address).await)
        .await
        .unwrap_or_else(|e| panic!("{address} {args:?}: {e}"))
}

/// Three nodes sharing the slots in thirds, met and settled.
async fn three_node_cluster() -> (Vec<ServerHandle>, Vec<String>) {
    let nodes = vec![
        node_on_free_ports().await,
        node_on_free_ports().await,
        node_on_free_ports().await,
    ];
    let addresses: Vec<String> = nodes.iter().map(address).collect();
    let ranges = [("0", "5460"), ("5461", "10922"), ("10923", "16383")];
    for (address, (first, last)) in addresses.iter().zip(ranges) {
        let _: () = cmd(address, &["CLUSTER", "ADDSLOTSRANGE", first, last]).await;
    }
    for other in &addresses[1..] {
        // `127.0.0.1:<port>@<bus port>` in the node's own line.
        let nodes: String = cmd(other, &["CLUSTER", "NODES"]).await;
        let myself = nodes.lines().find(|l| l.contains("myself")).unwrap();
        let endpoint = myself.split(' ').nth(1).unwrap();
        let (port, bus_port) = endpoint.split_once('@').unwrap();
        let port = port.rsplit(':').next().unwrap();
        let bus_port = bus_port.split(',').next().unwrap();
        let _: () = cmd(
            &addresses[0],
            &["CLUSTER", "MEET", "127.0.0.1", port, bus_port],
        )
        .await;
    }
    wait_until(&addresses, "CLUSTER INFO", "cluster_state:ok").await;
    wait_until(&addresses, "CLUSTER INFO", "cluster_known_nodes:3").await;
    (nodes, addresses)
}

/// The node (address) that serves `key`, by the cluster's own answer.
async fn owner_of(addresses: &[String], key: &str) -> String {
    let slot: i64 = cmd(&addresses[0], &["CLUSTER", "KEYSLOT", key]).await;
    let redis::Value::Array(ranges) = cmd(&addresses[0], &["CLUSTER", "SLOTS"]).await else {
        panic!("CLUSTER SLOTS is an array");
    };
    for range in ranges {
        let redis::Value::Array(fields) = range else {
            continue;
        };
        let (redis::Value::Int(first), redis::Value::Int(last), redis::Value::Array(master)) =
            (&fields[0], &fields[1], &fields[2])
        else {
            continue;
        };
        if (*first..=*last).contains(&slot) {
            let redis::Value::Int(port) = master[1] else {
                panic!("a port");
            };
            return format!("127.0.0.1:{port}");
        }
    }
    panic!("no node serves {key}");
}

async fn limiter(seed: &str, mode: Mode, policy: FailurePolicy) -> Limiter {
    Limiter::builder([format!("redis://{seed}")])
        .rules_toml(RULES)
        .unwrap()
        .config(config(mode, policy))
        .build()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_identity_is_counted_on_the_node_serving_its_slot() {
    let (_nodes, addresses) = three_node_cluster().await;
    for mode in [
        Mode::Exact,
        Mode::Cached {
            sync_interval: Duration::from_millis(50),
        },
    ] {
        for address in &addresses {
            let _: () = cmd(address, &["FLUSHALL"]).await;
        }
        // One seed is enough: the other nodes are learnt from it.
        let limiter = limiter(&addresses[1], mode, FailurePolicy::Closed).await;
        let mut known = limiter.nodes();
        known.sort();
        let mut expected = addresses.clone();
        expected.sort();
        assert_eq!(known, expected, "{mode:?}");
        for i in 0..30 {
            let user = Identity::new("user", format!("u{i}"), "free");
            for n in 1..=3u64 {
                let decision = limiter.check(&user, "GET /search", 1).await;
                assert!(decision.allowed, "{mode:?} u{i}");
                if mode == Mode::Exact {
                    assert_eq!(decision.source, Source::Server);
                    assert_eq!(decision.limits[1].remaining, 5 - n, "{mode:?} u{i}");
                }
            }
            // The counters are on the node the cluster says serves them,
            // and the limiter knows which that is.
            let key = format!("rl:{{user:u{i}}}:*");
            let owner = owner_of(&addresses, &key).await;
            assert_eq!(limiter.nodes()[limiter.node_of(&user)], owner, "u{i}");
            let slot: i64 = cmd(&owner, &["CLUSTER", "KEYSLOT", &key]).await;
            let here: i64 = cmd(&owner, &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]).await;
            assert_eq!(
                here, 2,
                "{mode:?} u{i}: a global and a search key on {owner}"
            );
        }
        let mut total = 0;
        for address in &addresses {
            let keys: i64 = cmd(address, &["DBSIZE"]).await;
            assert!(keys > 0, "{mode:?}: {address} holds some identities");
            total += keys;
        }
        assert_eq!(total, 60, "{mode:?}");
        if let Mode::Cached { .. } = mode {
            // The sync gives leases back and tops them up on every node
            // in one round, without a failure.
            limiter.sync_now().await;
            assert_eq!(limiter.metrics().sync_failures, 0);
        }
        assert_eq!(limiter.metrics().fail_closed, 0, "{mode:?}");
    }
}

/// Another identity whose keys share `identity`'s slot.
fn neighbour_of(identity: &Identity) -> Identity {
    let slot = |who: &Identity| tally_cluster::slot::key_slot(limit_prefix(who, None).as_bytes());
    (0..)
        .map(|i| Identity::new("user", format!("n{i}"), "free"))
        .find(|candidate| slot(candidate) == slot(identity))
        .expect("some id shares the slot")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_moved_under_the_limiter_is_followed_and_its_counts_carry_on() {
    let (_nodes, addresses) = three_node_cluster().await;
    let limiter = limiter(&addresses[0], Mode::Exact, FailurePolicy::Closed).await;
    // Two identities in one slot: `settled` has every key its checks
    // touch, `fresh` has no previous-window keys (a new identity's case).
    let settled = Identity::new("user", "mover", "free");
    let fresh = neighbour_of(&settled);
    let key = limit_prefix(&settled, None);
    let source = owner_of(&addresses, &key).await;
    let target = addresses.iter().find(|a| **a != source).unwrap().clone();
    let slot: i64 = cmd(&source, &["CLUSTER", "KEYSLOT", &key]).await;
    let slot = slot.to_string();
    // Clear of a window boundary, so that the previous window stays one.
    let (mut now, _): (u64, u64) = cmd(&source, &["TIME"]).await;
    if now % WINDOW > WINDOW - 20 {
        tokio::time::sleep(Duration::from_secs(WINDOW - now % WINDOW + 1)).await;
        now = cmd::<(u64, u64)>(&source, &["TIME"]).await.0;
    }
    let previous = now / WINDOW * WINDOW - WINDOW;
    for endpoint in [None, Some("GET /search")] {
        let old = window_key(&limit_prefix(&settled, endpoint), previous);
        let _: () = cmd(&source, &["SET", &old, "0", "EX", "7200"]).await;
    }
    for identity in [&settled, &fresh] {
        for n in 1..=2u64 {
            let decision = limiter.check(identity, "GET /search", 1).await;
            assert_eq!(decision.limits[1].remaining, 5 - n);
        }
    }
    // Move the slot as redis-cli --cluster reshard does, one step at a time.
    let source_id: String = cmd(&source, &["CLUSTER", "MYID"]).await;
    let target_id: String = cmd(&target, &["CLUSTER", "MYID"]).await;
    let _: () = cmd(
        &target,
        &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &source_id],
    )
    .await;
    let _: () = cmd(
        &source,
        &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &target_id],
    )
    .await;
    let keys: Vec<String> = cmd(&source, &["CLUSTER", "GETKEYSINSLOT", &slot, "100"]).await;
    assert_eq!(keys.len(), 6, "{keys:?}");
    let target_port = target.rsplit(':').next().unwrap();
    let mut migrate = vec!["MIGRATE", "127.0.0.1", target_port, "", "0", "5000", "KEYS"];
    migrate.extend(keys.iter().map(String::as_str));
    let _: String = cmd(&source, &migrate).await;
    // The keys are on the target, the slot still the source's: the source
    // answers ASK, and the limiter asks the target with ASKING, which
    // serves a call whose keys it all has.
    let decision = limiter.check(&settled, "GET /search", 1).await;
    assert_eq!(decision.source, Source::Server);
    assert!(decision.allowed);
    assert_eq!(decision.limits[1].remaining, 2, "counted on the target");
    assert_eq!(
        limiter.nodes()[limiter.node_of(&settled)],
        source,
        "ASK is one call"
    );
    // A call missing a key gets TRYAGAIN from the importing node (as from
    // Redis) until the slot is handed over; the limiter retries within
    // its call timeout.
    let handover = {
        let (addresses, slot) = (addresses.clone(), slot.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            for address in &addresses {
                let _: () = cmd(address, &["CLUSTER", "SETSLOT", &slot, "NODE", &target_id]).await;
            }
        })
    };
    let decision = limiter.check(&fresh, "GET /search", 1).await;
    handover.await.unwrap();
    assert_eq!(decision.source, Source::Server);
    assert_eq!(decision.limits[1].remaining, 2, "counted on the target");
    // Now the source answers MOVED: the limiter follows and remembers.
    let decision = limiter.check(&settled, "GET /search", 1).await;
    assert_eq!(decision.source, Source::Server);
    assert_eq!(decision.limits[1].remaining, 1);
    assert_eq!(limiter.nodes()[limiter.node_of(&settled)], target);
    let on_target: i64 = cmd(&target, &["CLUSTER", "COUNTKEYSINSLOT", &slot]).await;
    let on_source: i64 = cmd(&source, &["CLUSTER", "COUNTKEYSINSLOT", &slot]).await;
    assert_eq!((on_target, on_source), (6, 0));
    assert_eq!(limiter.metrics().fail_closed, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_is_down_trips_only_its_own_breaker() {
    let (mut nodes, addresses) = three_node_cluster().await;
    let limiter = limiter(&addresses[0], Mode::Exact, FailurePolicy::Open).await;
    let users: Vec<Identity> = (0..30)
        .map(|i| Identity::new("user", format!("d{i}"), "free"))
        .collect();
    for user in &users {
        assert_eq!(
            limiter.check(user, "GET /search", 1).await.source,
            Source::Server
        );
    }
    let stopped = nodes.remove(2);
    let stopped_address = address(&stopped);
    stopped.shutdown().await;
    let down = limiter
        .nodes()
        .iter()
        .position(|a| *a == stopped_address)
        .unwrap();
    let (mut on_down, mut elsewhere) = (0, 0);
    for user in &users {
        let decision = limiter.check(user, "GET /search", 1).await;
        if limiter.node_of(user) == down {
            assert_eq!(decision.source, Source::FailOpen);
            on_down += 1;
        } else {
            assert_eq!(decision.source, Source::Server);
            assert_eq!(decision.limits[1].remaining, 3);
            elsewhere += 1;
        }
    }
    assert!(on_down > 0 && elsewhere > 0, "{on_down} / {elsewhere}");
    for (index, _) in limiter.nodes().iter().enumerate() {
        let open = limiter.breaker_state(index) != tally_client::BreakerState::Closed;
        assert_eq!(open, index == down, "node {index}");
    }
}

/// A master stops: the replica elected in its place is found (the slot
/// map asked again after the failed calls), and the identity's counts
/// carry on there from what the replica had acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_master_is_followed_to_the_replica_that_replaces_it() {
    let mut nodes = Vec::new();
    for _ in 0..6 {
        nodes.push(node_on_free_ports().await);
    }
    let addresses: Vec<String> = nodes.iter().map(address).collect();
    tally_tests::cluster::create_with(&addresses, &["--cluster-replicas", "1"]).await;
    let user = Identity::new("user", "failover", "free");
    // Every key of an identity shares its hash tag, so its slot.
    let key = limit_prefix(&user, None);
    let master = owner_of(&addresses, &key).await;
    let master_id: String = cmd(&master, &["CLUSTER", "MYID"]).await;
    // The replica, once the whole cluster knows it as one.
    let mut heir = None;
    for _ in 0..600 {
        let lines: Vec<String> = cmd(&master, &["CLUSTER", "REPLICAS", &master_id]).await;
        if let Some(line) = lines.first() {
            let endpoint = line.split(' ').nth(1).unwrap();
            heir = Some(endpoint.split('@').next().unwrap().to_string());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let heir = heir.expect("the master has a replica");
    let limiter = Limiter::builder([format!("redis://{}", addresses[0])])
        .rules_toml(RULES)
        .unwrap()
        .config(LimiterConfig {
            background_tasks: true,
            ..config(Mode::Exact, FailurePolicy::Open)
        })
        .build()
        .await
        .unwrap();
    for remaining in [4, 3] {
        let decision = limiter.check(&user, "GET /search", 1).await;
        assert_eq!(decision.source, Source::Server);
        assert_eq!(decision.limits[1].remaining, remaining);
    }
    let acked: i64 = cmd(&master, &["WAIT", "1", "10000"]).await;
    assert_eq!(acked, 1, "the replica has both checks");
    let index = nodes.iter().position(|n| address(n) == master).unwrap();
    nodes.remove(index).shutdown().await;
    let mut failed_open = 0;
    let decision = loop {
        let decision = limiter.check(&user, "GET /search", 1).await;
        if decision.source == Source::Server {
            break decision;
        }
        assert_eq!(decision.source, Source::FailOpen);
        failed_open += 1;
        assert!(
            failed_open < 6000,
            "the limiter never reached the new master"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        decision.limits[1].remaining, 2,
        "counted on from the replica's copy"
    );
    assert_eq!(limiter.nodes()[limiter.node_of(&user)], heir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_come_from_the_node_serving_their_key_and_updates_from_any_node() {
    let (_nodes, addresses) = three_node_cluster().await;
    let key = "tally:rules";
    let owner = owner_of(&addresses, key).await;
    let seed = addresses.iter().find(|a| **a != owner).unwrap();
    let mut rules = RuleSet::from_toml(RULES).unwrap();
    let _: () = cmd(&owner, &["SET", key, &rules.to_json()]).await;
    let limiter = Limiter::builder([format!("redis://{seed}")])
        .rules(RuleSource::server_default())
        .config(LimiterConfig {
            background_tasks: true,
            ..config(Mode::Exact, FailurePolicy::Closed)
        })
        .build()
        .await
        .unwrap();
    assert_eq!(
        limiter.rules().version,
        1,
        "read through MOVED from {owner}"
    );
    rules.version = 2;
    let _: () = cmd(&owner, &["SET", key, &rules.to_json()]).await;
    // Published on the third node: the cluster relays it to the listener's.
    let publisher = addresses
        .iter()
        .find(|a| **a != owner && *a != seed)
        .unwrap();
    for _ in 0..200 {
        let _: i64 = cmd(publisher, &["PUBLISH", "tally:rules", "2"]).await;
        if limiter.rules().version == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(limiter.rules().version, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_urls_of_a_standalone_server_are_refused() {
    let first = TestServer::start_real_clock().await;
    let second = TestServer::start_real_clock().await;
    let built = Limiter::builder([
        format!("redis://{}", first.addr()),
        format!("redis://{}", second.addr()),
    ])
    .rules_toml(RULES)
    .unwrap()
    .config(config(Mode::Exact, FailurePolicy::Closed))
    .build()
    .await;
    match built {
        Err(Error::Config(message)) => {
            assert!(message.contains("cluster support disabled"), "{message}")
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("two standalone servers are not one cluster"),
    }
    // One URL of a standalone server: every identity goes there.
    let limiter = Limiter::builder([format!("redis://{}", first.addr())])
        .rules_toml(RULES)
        .unwrap()
        .config(config(Mode::Exact, FailurePolicy::Closed))
        .build()
        .await
        .unwrap();
    let user = Identity::new("user", "solo", "free");
    assert_eq!(
        limiter.check(&user, "GET /search", 1).await.source,
        Source::Server
    );
    assert_eq!(limiter.node_of(&user), 0);
    assert_eq!(limiter.nodes().len(), 1);
}
