//! The cached mode's costs follow traffic and its leases never cost
//! admissions: on a simulated clock (server and nodes alike) against an
//! in-process tally, an identity too slow for leases costs no sync at all
//! (one round trip per request, as exact mode), an unused lease goes back
//! after one idle interval, and under a heavy identity at four times its
//! limit from every node an identity at 99% of its limit is never denied
//! while the heavy one gets its limit in every window.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tally_client::{Clock, Identity, Limiter, LimiterConfig, Mode, Source};
use tally_tests::TestServer;

struct SimClock(AtomicU64);

impl Clock for SimClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

const SYNC_MS: u64 = 100;

/// A server and `nodes` cached-mode limiters on one simulated clock that
/// starts at a window start (1720000020 s is a multiple of 60).
async fn setup(nodes: usize, rules: &str) -> (TestServer, Arc<SimClock>, Vec<Limiter>) {
    let tally = TestServer::start().await;
    tally.clock.advance_ms(20_000);
    let clock = Arc::new(SimClock(AtomicU64::new(tally_tests::T0_MS + 20_000)));
    let mut limiters = Vec::new();
    for _ in 0..nodes {
        limiters.push(
            Limiter::builder([format!("redis://{}", tally.addr())])
                .rules_toml(rules)
                .unwrap()
                .config(LimiterConfig {
                    mode: Mode::Cached {
                        sync_interval: Duration::from_millis(SYNC_MS),
                    },
                    call_timeout: Duration::from_secs(2),
                    sync_timeout: Duration::from_secs(2),
                    background_tasks: false,
                    ..LimiterConfig::default()
                })
                .clock(clock.clone())
                .build()
                .await
                .unwrap(),
        );
    }
    (tally, clock, limiters)
}

/// Moves both clocks by `ms`.
fn advance(tally: &TestServer, clock: &SimClock, ms: u64) {
    clock.0.fetch_add(ms, Ordering::Relaxed);
    tally.clock.advance_ms(ms);
}

async fn server_count(tally: &TestServer, key: &str) -> i64 {
    let reply = tally.raw().await.line(&format!("GET {key}")).await;
    // `$<len>\r\n<n>` or `$-1` (no key).
    reply
        .lines()
        .nth(1)
        .map_or(0, |n| n.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_too_slow_for_leases_costs_one_round_trip_a_request_and_no_sync() {
    let (tally, clock, nodes) = setup(
        4,
        "[tiers.free]\nglobal = { limit = 1000, window_seconds = 60 }\n",
    )
    .await;
    let user = Identity::new("user", "slow", "free");
    // One request per node per sync interval: a lease would cost more
    // round trips than it saves.
    for _ in 0..50 {
        for node in &nodes {
            let decision = node.check(&user, "GET /", 1).await;
            assert!(decision.allowed);
            assert_eq!(decision.source, Source::Server);
        }
        advance(&tally, &clock, SYNC_MS);
        for node in &nodes {
            node.sync_now().await;
        }
    }
    let checks: u64 = nodes.iter().map(|n| n.metrics().server_checks).sum();
    let syncs: u64 = nodes.iter().map(|n| n.metrics().syncs).sum();
    assert_eq!(checks, 200, "one round trip per request");
    assert_eq!(syncs, 0, "nothing leased, nothing to sync");
    let key = format!(
        "rl:{{user:slow}}:*:{}",
        (tally_tests::T0_MS + 20_000) / 1000
    );
    assert_eq!(
        server_count(&tally, &key).await,
        200,
        "every request counted once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unused_lease_goes_back_after_one_idle_interval() {
    let (tally, clock, nodes) = setup(
        1,
        "[tiers.free]\nglobal = { limit = 1000, window_seconds = 60 }\n",
    )
    .await;
    let node = &nodes[0];
    let user = Identity::new("user", "burst", "free");
    let key = format!(
        "rl:{{user:burst}}:*:{}",
        (tally_tests::T0_MS + 20_000) / 1000
    );
    let mut sent = 0;
    for _ in 0..5 {
        for _ in 0..10 {
            assert!(node.check(&user, "GET /", 1).await.allowed);
            sent += 1;
        }
        advance(&tally, &clock, SYNC_MS);
        node.sync_now().await;
    }
    let held = server_count(&tally, &key).await;
    assert!(
        held > sent,
        "a lease is reserved ahead of use: {held} > {sent}"
    );
    assert!(
        node.metrics().local_decisions > 0,
        "leases served decisions"
    );
    // Traffic stops: one idle interval later the lease is back.
    advance(&tally, &clock, SYNC_MS);
    node.sync_now().await;
    assert_eq!(server_count(&tally, &key).await, sent);
    // And the limit state leaves the sync: no more round trips.
    let syncs = node.metrics().syncs;
    for _ in 0..10 {
        advance(&tally, &clock, SYNC_MS);
        node.sync_now().await;
    }
    assert_eq!(node.metrics().syncs, syncs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heavy_identity_gets_its_limit_and_one_at_99_percent_is_never_denied() {
    const NODES: usize = 10;
    const LIMIT: u64 = 600;
    let (tally, clock, nodes) = setup(
        NODES,
        &format!("[tiers.free]\nglobal = {{ limit = {LIMIT}, window_seconds = 60 }}\n"),
    )
    .await;
    let heavy = Identity::new("user", "heavy", "free");
    let light = Identity::new("user", "light", "free");
    let mut admitted = [0u64; 3];
    let (mut light_sent, mut light_denied, mut leased) = (0, 0, 0);
    // 99% of 600 a minute: one every 101 ms, on nodes picked by a fixed
    // pseudo-random sequence.
    let mut next_light = 0u64;
    let mut pick = 12345u64;
    for step in 0..3 * 60_000 / SYNC_MS {
        let window = (step * SYNC_MS / 60_000) as usize;
        // Heavy: 4x its limit, from every node, fast enough to lease.
        for node in &nodes {
            for _ in 0..4 {
                let decision = node.check(&heavy, "GET /", 1).await;
                if decision.allowed {
                    admitted[window] += 1;
                    leased += u64::from(decision.source == Source::Local);
                }
            }
        }
        let step_end = (step + 1) * SYNC_MS;
        while next_light < step_end {
            pick = pick
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let node = &nodes[(pick >> 33) as usize % NODES];
            light_sent += 1;
            if !node.check(&light, "GET /", 1).await.allowed {
                light_denied += 1;
            }
            next_light += 101;
        }
        advance(&tally, &clock, SYNC_MS);
        for node in &nodes {
            node.sync_now().await;
        }
    }
    assert_eq!(light_denied, 0, "of {light_sent} sent at 99% of the limit");
    assert!(leased > 0, "leases served some of the heavy identity");
    for (window, &n) in admitted.iter().enumerate() {
        assert!(
            n * 1000 >= LIMIT * 995 && n * 100 <= LIMIT * 101,
            "window {window}: {n} admitted against {LIMIT} ({admitted:?})"
        );
    }
}

/// An identity far over its limit on ten nodes at 100 req/s each: a node
/// the server keeps denying asks less often (its deny cache doubles up to
/// a hundredth of the window), so the identity costs the store at most one
/// round trip per 20 requests (a round trip per 13 at a fixed interval),
/// while it is still admitted its whole limit in every window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_denied_again_and_again_asks_less_often() {
    const NODES: usize = 10;
    const LIMIT: u64 = 1000;
    let (tally, clock, nodes) = setup(
        NODES,
        &format!("[tiers.free]\nglobal = {{ limit = {LIMIT}, window_seconds = 60 }}\n"),
    )
    .await;
    let heavy = Identity::new("user", "abuser", "free");
    let mut admitted = [0u64; 3];
    let mut sent = 0u64;
    // 10 ms steps, one request per node per step.
    for step in 0..3 * 60_000 / 10 {
        let window = (step * 10 / 60_000) as usize;
        for node in &nodes {
            sent += 1;
            if node.check(&heavy, "GET /", 1).await.allowed {
                admitted[window] += 1;
            }
        }
        advance(&tally, &clock, 10);
        if step % (SYNC_MS / 10) == 0 {
            for node in &nodes {
                node.sync_now().await;
            }
        }
    }
    let trips: u64 = nodes
        .iter()
        .map(|n| n.metrics().syncs + n.metrics().server_checks)
        .sum();
    assert!(
        trips * 20 <= sent,
        "{trips} round trips for {sent} requests"
    );
    for (window, &n) in admitted.iter().enumerate() {
        assert!(
            n * 1000 >= LIMIT * 995 && n * 100 <= LIMIT * 101,
            "window {window}: {n} admitted against {LIMIT} ({admitted:?})"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rules_update_reaches_cached_identities_and_their_leases_go_back() {
    let (tally, clock, nodes) = setup(
        1,
        "[tiers.free]\nglobal = { limit = 1000, window_seconds = 60 }\n\
         endpoints.\"GET /search\" = { limit = 500, window_seconds = 60 }\n",
    )
    .await;
    let node = &nodes[0];
    let user = Identity::new("user", "u1", "free");
    // Busy enough for leases on both limits.
    for _ in 0..10 {
        for _ in 0..20 {
            assert!(node.check(&user, "GET /search", 1).await.allowed);
        }
        advance(&tally, &clock, SYNC_MS);
        node.sync_now().await;
    }
    let start = (tally_tests::T0_MS + 20_000) / 1000;
    let search_key = format!(
        "{}:{start}",
        tally_client::keys::limit_prefix(&user, Some("GET /search"))
    );
    assert!(
        server_count(&tally, &search_key).await > 200,
        "the node holds a lease on the endpoint's limit"
    );

    // The update raises the global limit and drops the endpoint's.
    let mut rules = node.rules();
    rules.version = 2;
    let free = rules.tiers.get_mut("free").unwrap();
    free.global.as_mut().unwrap().limit = 2000;
    free.endpoints.clear();
    assert!(node.install_rules(rules));
    let limits = |d: &tally_client::Decision| -> Vec<(String, u64)> {
        d.limits
            .iter()
            .map(|l| (l.name.policy_name().to_string(), l.limit))
            .collect()
    };
    let decision = node.check(&user, "GET /search", 1).await;
    assert_eq!(
        limits(&decision),
        vec![("global".to_string(), 1000)],
        "the dropped limit goes at once; the changed one keeps its value in this window"
    );
    node.sync_now().await;
    assert_eq!(
        server_count(&tally, &search_key).await,
        200,
        "the dropped limit's lease went back: the key counts what was admitted"
    );

    // The next window, for the identity already cached: the new limit.
    advance(&tally, &clock, 60_000);
    let decision = node.check(&user, "GET /search", 1).await;
    assert_eq!(limits(&decision), vec![("global".to_string(), 2000)]);
}
