//! The limits beside the sliding window: GCRA (the server's CL.THROTTLE)
//! and fixed windows (INCREX), each alone and mixed with sliding-window
//! limits in one request, in exact mode and with cached mode's leases.
//! The server's clock and the limiter's are both manual and moved
//! together, so every figure is exact.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tally_client::keys::{fixed_window_key, gcra_key, limit_prefix};
use tally_client::{Clock, Decision, Identity, Limiter, LimiterConfig, Mode, Source};
use tally_tests::{TestServer, T0_MS};

struct TestClock(AtomicU64);

impl Clock for TestClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

fn config(mode: Mode) -> LimiterConfig {
    LimiterConfig {
        mode,
        call_timeout: Duration::from_secs(2),
        sync_timeout: Duration::from_secs(2),
        background_tasks: false,
        ..LimiterConfig::default()
    }
}

/// A server and a limiter on one manual time, starting at a multiple of
/// 60 s (1720000020).
struct Setup {
    server: TestServer,
    clock: Arc<TestClock>,
    limiter: Limiter,
}

impl Setup {
    async fn new(rules: &str, mode: Mode) -> Setup {
        let server = TestServer::start().await;
        server.clock.advance_ms(20_000);
        let clock = Arc::new(TestClock((T0_MS + 20_000).into()));
        let limiter = Limiter::builder([format!("redis://{}", server.addr())])
            .rules_toml(rules)
            .unwrap()
            .config(config(mode))
            .clock(clock.clone())
            .build()
            .await
            .unwrap();
        Setup {
            server,
            clock,
            limiter,
        }
    }

    /// `count` more limiters on the same server and clock.
    async fn more_nodes(&self, rules: &str, count: usize) -> Vec<Limiter> {
        let mut nodes = vec![self.limiter.clone()];
        for _ in 0..count {
            nodes.push(
                Limiter::builder([format!("redis://{}", self.server.addr())])
                    .rules_toml(rules)
                    .unwrap()
                    .config(config(cached()))
                    .clock(self.clock.clone())
                    .build()
                    .await
                    .unwrap(),
            );
        }
        nodes
    }

    fn advance_ms(&self, ms: u64) {
        self.clock.0.fetch_add(ms, Ordering::Relaxed);
        self.server.clock.advance_ms(ms);
    }

    async fn check(&self, who: &Identity, endpoint: &str, cost: u64) -> Decision {
        self.limiter.check(who, endpoint, cost).await
    }

    async fn redis<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let client = redis::Client::open(format!("redis://{}", self.server.addr())).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let mut command = redis::cmd(args[0]);
        for arg in &args[1..] {
            command.arg(*arg);
        }
        command.query_async(&mut conn).await.unwrap()
    }
}

/// (allowed, per-limit (limit, remaining, reset - now), retry_after).
fn summary(d: &Decision) -> (bool, Vec<(u64, u64, u64)>, u64) {
    (
        d.allowed,
        d.limits
            .iter()
            .map(|l| (l.limit, l.remaining, l.reset - d.now_secs))
            .collect(),
        d.retry_after,
    )
}

/// GCRA at 1 request a second with a burst of 2: three at once, then one a
/// second; the reply's figures are CL.THROTTLE's, the key is its TAT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcra_admits_its_burst_then_its_rate() {
    let rules = r#"
        [tiers.free]
        global = { limit = 10, window_seconds = 10, algorithm = "gcra", burst = 2 }
    "#;
    let setup = Setup::new(rules, Mode::Exact).await;
    let alice = Identity::new("user", "alice", "free");
    assert_eq!(
        summary(&setup.check(&alice, "GET /", 1).await),
        (true, vec![(3, 2, 1)], 0)
    );
    assert_eq!(
        summary(&setup.check(&alice, "GET /", 1).await),
        (true, vec![(3, 1, 2)], 0)
    );
    assert_eq!(
        summary(&setup.check(&alice, "GET /", 1).await),
        (true, vec![(3, 0, 3)], 0)
    );
    let denied = setup.check(&alice, "GET /", 1).await;
    assert_eq!(summary(&denied), (false, vec![(3, 0, 3)], 1));
    assert_eq!(denied.status(), Some(429));
    assert_eq!(denied.source, Source::Server);
    // A second later one more fits.
    setup.advance_ms(1000);
    assert_eq!(
        summary(&setup.check(&alice, "GET /", 1).await),
        (true, vec![(3, 0, 3)], 0)
    );
    // One key: the TAT in nanoseconds, 3 s ahead after the last call.
    let key = gcra_key(&limit_prefix(&alice, None));
    let tat: u64 = setup.redis(&["GET", &key]).await;
    assert_eq!(tat, (T0_MS + 20_000 + 1000 + 3000) * 1_000_000);
    // A cost larger than the burst can ever allow: refused, retry after a
    // window.
    let big = setup.check(&alice, "GET /", 5).await;
    assert_eq!((big.allowed, big.retry_after), (false, 10));
}

/// A fixed window of 3 per 60 s: the fourth waits for the window's end,
/// the next window starts from zero, the counter expires with its window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_window_counts_to_its_ceiling_per_window() {
    let rules = r#"
        [tiers.free]
        global = { limit = 3, window_seconds = 60, algorithm = "fixed_window" }
    "#;
    let setup = Setup::new(rules, Mode::Exact).await;
    let bob = Identity::new("user", "bob", "free");
    setup.advance_ms(15_000);
    for remaining in [2, 1, 0] {
        assert_eq!(
            summary(&setup.check(&bob, "GET /", 1).await),
            (true, vec![(3, remaining, 45)], 0)
        );
    }
    assert_eq!(
        summary(&setup.check(&bob, "GET /", 1).await),
        (false, vec![(3, 0, 45)], 45)
    );
    let key = fixed_window_key(&limit_prefix(&bob, None), 1_720_000_020);
    let count: u64 = setup.redis(&["GET", &key]).await;
    assert_eq!(count, 3, "a refused request is not counted");
    let pttl: i64 = setup.redis(&["PTTL", &key]).await;
    assert_eq!(pttl, 45_000);
    setup.advance_ms(45_000);
    assert_eq!(
        summary(&setup.check(&bob, "GET /", 2).await),
        (true, vec![(3, 1, 60)], 0)
    );
}

/// A sliding-window global limit, a GCRA endpoint and a fixed-window
/// endpoint: one round trip per check, every limit's status reported, and
/// the request refused when any limit refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_limits_are_checked_in_one_round_trip() {
    let rules = r#"
        [tiers.free]
        global = { limit = 4, window_seconds = 60 }
        endpoints."GET /search" = { limit = 60, window_seconds = 60, algorithm = "gcra", burst = 9 }
        endpoints."POST /upload" = { limit = 2, window_seconds = 60, algorithm = "fixed_window" }
    "#;
    let setup = Setup::new(rules, Mode::Exact).await;
    let carol = Identity::new("user", "carol", "free");
    let upload = setup.check(&carol, "POST /upload", 1).await;
    assert_eq!(summary(&upload), (true, vec![(4, 3, 60), (2, 1, 60)], 0));
    setup.check(&carol, "POST /upload", 1).await;
    // The upload window is full: refused by it, though the global limit
    // allowed the request and counted it (limits of different algorithms
    // count on their own).
    let refused = setup.check(&carol, "POST /upload", 1).await;
    assert!(!refused.allowed);
    assert_eq!(refused.limits[1].remaining, 0);
    assert_eq!(refused.deciding_limit().unwrap().limit, 2);
    // So the global count is 3, and the first search takes the last one.
    let search = setup.check(&carol, "GET /search", 1).await;
    assert_eq!(summary(&search), (true, vec![(4, 0, 60), (10, 9, 1)], 0));
    let search = setup.check(&carol, "GET /search", 1).await;
    assert!(!search.allowed);
    assert_eq!(search.deciding_limit().unwrap().limit, 4);
    assert_eq!(setup.limiter.metrics().server_checks, 5);
}

/// Cached mode on four nodes, a fixed window of 100 per minute: leases
/// (INCREX SATURATE grants) serve most checks locally and the window
/// admits exactly its limit; an identity under its limit is never denied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_fixed_window_leases_hold_the_limit() {
    let rules = r#"
        [tiers.free]
        global = { limit = 100, window_seconds = 60, algorithm = "fixed_window" }
    "#;
    let first = Setup::new(rules, cached()).await;
    let nodes = first.more_nodes(rules, 3).await;
    let heavy = Identity::new("user", "heavy", "free");
    let light = Identity::new("user", "light", "free");
    let (mut admitted, mut light_denied) = (0, 0);
    // 40 s in 100 ms steps inside one window: heavy sends 4 a step on
    // every node (40x its limit), light one every 8 steps (half of it).
    for step in 0..400u64 {
        for (n, node) in nodes.iter().enumerate() {
            for _ in 0..4 {
                admitted += u32::from(node.check(&heavy, "GET /", 1).await.allowed);
            }
            if step % 32 == 8 * n as u64 && !node.check(&light, "GET /", 1).await.allowed {
                light_denied += 1;
            }
        }
        first.advance_ms(100);
        for node in &nodes {
            node.sync_now().await;
        }
    }
    assert_eq!(admitted, 100, "exactly the limit within the window");
    assert_eq!(light_denied, 0, "the light identity was never denied");
    let local: u64 = nodes.iter().map(|n| n.metrics().local_decisions).sum();
    assert!(local > 0, "leases served some decisions locally");
    // The counters hold what was admitted: heavy's leases were all used,
    // light (too slow to lease) was counted check by check.
    for (who, expected) in [(&heavy, 100), (&light, 50)] {
        let key = fixed_window_key(&limit_prefix(who, None), 1_720_000_020);
        let count: u64 = first.redis(&["GET", &key]).await;
        assert_eq!(count, expected, "{who:?}");
    }
}

/// A fixed-window lease a node stops using goes back within a sync
/// interval: a negative INCREX, down to what was admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_fixed_window_gives_unused_leases_back() {
    let rules = r#"
        [tiers.free]
        global = { limit = 1000, window_seconds = 60, algorithm = "fixed_window" }
    "#;
    let setup = Setup::new(rules, cached()).await;
    let erin = Identity::new("user", "erin", "free");
    let key = fixed_window_key(&limit_prefix(&erin, None), 1_720_000_020);
    let mut admitted = 0u64;
    for _ in 0..5 {
        for _ in 0..5 {
            admitted += u64::from(setup.check(&erin, "GET /", 1).await.allowed);
        }
        setup.advance_ms(100);
        setup.limiter.sync_now().await;
    }
    let counted: u64 = setup.redis(&["GET", &key]).await;
    assert!(
        counted > admitted,
        "a lease is held: {counted} > {admitted}"
    );
    assert!(setup.limiter.metrics().local_decisions > 0);
    // Idle for an interval: the lease goes back.
    setup.advance_ms(100);
    setup.limiter.sync_now().await;
    let counted: u64 = setup.redis(&["GET", &key]).await;
    assert_eq!((admitted, counted), (25, 25));
}

/// Cached mode with GCRA at 10 a second and a burst of 20: leases are
/// CL.THROTTLE quantities, so no node ever admits past what GCRA allows
/// (the burst and then the rate); tokens a node leased and did not use
/// are lost (they cannot be given back), never added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_gcra_leases_never_pass_the_rate() {
    let rules = r#"
        [tiers.free]
        global = { limit = 100, window_seconds = 10, algorithm = "gcra", burst = 20 }
    "#;
    let setup = Setup::new(rules, cached()).await;
    let heavy = Identity::new("user", "heavy", "free");
    let mut admitted = 0u64;
    // 5 s in 10 ms steps, 2 requests a step (20x the rate).
    for step in 0..500u64 {
        for _ in 0..2 {
            admitted += u64::from(setup.check(&heavy, "GET /", 1).await.allowed);
        }
        setup.advance_ms(10);
        if step % 10 == 9 {
            setup.limiter.sync_now().await;
        }
    }
    // GCRA allows the burst and the request itself (21), then one per
    // 100 ms: 50 more in 5 s.
    let most = 21 + 50;
    // A lease is at most a tenth of the limit (10): one held unused at
    // the end is all that can be missing.
    assert!(
        (most - 10..=most).contains(&admitted),
        "{admitted} admitted, GCRA allows {most}"
    );
    assert!(setup.limiter.metrics().local_decisions > 0);
}

fn cached() -> Mode {
    Mode::Cached {
        sync_interval: Duration::from_millis(100),
    }
}
