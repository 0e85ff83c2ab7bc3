//! tally-client against an in-process tally-server and, in the differential
//! spirit, against redis-server: the same checks must give the same
//! decisions. Cached mode: leases keep an over-limit identity at its limit
//! and never deny one under it.

use std::sync::Arc;
use std::time::Duration;

use tally_client::{Clock, FailurePolicy, Identity, Limiter, LimiterConfig, Mode, RuleSet, Source};
use tally_tests::{RedisServer, TestServer};

const RULES: &str = r#"
    version = 1
    [tiers.free]
    global = { limit = 8, window_seconds = 3600 }
    endpoints."GET /search" = { limit = 5, window_seconds = 3600 }
    endpoints."POST /upload" = { limit = 3, window_seconds = 3600, burst_factor = 1.5 }
"#;

fn test_config(mode: Mode) -> LimiterConfig {
    LimiterConfig {
        mode,
        // Debug builds on a shared 2-core box: generous, so that only a
        // real outage trips the breaker here.
        call_timeout: Duration::from_secs(2),
        sync_timeout: Duration::from_secs(2),
        background_tasks: false,
        ..LimiterConfig::default()
    }
}

async fn limiter(url: String, mode: Mode) -> Limiter {
    Limiter::builder([url])
        .rules_toml(RULES)
        .unwrap()
        .config(test_config(mode))
        .build()
        .await
        .unwrap()
}

/// (allowed, source, per-limit remaining, retry_after > 0) for a sequence.
async fn run_sequence(limiter: &Limiter) -> Vec<(bool, Vec<u64>, bool)> {
    let alice = Identity::new("user", "alice", "free");
    let bob = Identity::new("ip", "203.0.113.42", "free");
    let mut out = Vec::new();
    let steps: &[(&Identity, &str, u64)] = &[
        (&alice, "GET /search", 1),
        (&alice, "GET /search", 1),
        (&alice, "POST /upload", 2),
        (&alice, "GET /search", 1),
        (&alice, "GET /search", 1),
        (&alice, "GET /search", 1),
        (&alice, "GET /search", 1),
        (&alice, "POST /upload", 1),
        (&alice, "GET /other", 1),
        (&alice, "GET /other", 1),
        (&bob, "GET /search", 1),
        (&bob, "POST /upload", 5),
        (&bob, "POST /upload", 4),
    ];
    for (identity, endpoint, cost) in steps {
        let d = limiter.check(identity, endpoint, *cost).await;
        assert_eq!(d.source, Source::Server);
        out.push((
            d.allowed,
            d.limits.iter().map(|l| l.remaining).collect(),
            d.retry_after > 0,
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_mode_decides_the_same_on_tally_and_on_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let on_redis = limiter(format!("redis://{}", redis.addr), Mode::Exact).await;
    let on_tally = limiter(format!("redis://{}", tally.addr()), Mode::Exact).await;
    let expected = run_sequence(&on_redis).await;
    let actual = run_sequence(&on_tally).await;
    assert_eq!(expected, actual);
    // And the sequence means what it should: the sixth search passes the
    // search limit (5); the upload limit is 3 x 1.5 = 4; the global limit
    // (8) stops alice's requests to other endpoints; bob's 5-cost upload is
    // refused whole, his 4-cost one fits.
    let allowed: Vec<bool> = actual.iter().map(|a| a.0).collect();
    assert_eq!(
        allowed,
        vec![true, true, true, true, true, true, false, true, false, false, true, false, true]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_without_rules_is_not_limited() {
    let tally = TestServer::start_real_clock().await;
    let limiter = limiter(format!("redis://{}", tally.addr()), Mode::Exact).await;
    let d = limiter
        .check(&Identity::new("user", "x", "enterprise"), "GET /", 1)
        .await;
    assert!(d.allowed);
    assert!(d.limits.is_empty());
}

/// A clock the test moves.
struct TestClock(std::sync::atomic::AtomicU64);

impl Clock for TestClock {
    fn now_ms(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_mode_serves_from_leases_and_holds_the_limit() {
    let tally = TestServer::start().await;
    // Start at a window start (1720000020 is a multiple of 60): the test's
    // 40 s stay inside one window.
    tally.clock.advance_ms(20_000);
    let clock = Arc::new(TestClock((tally_tests::T0_MS + 20_000).into()));
    let rules = r#"
        [tiers.free]
        global = { limit = 100, window_seconds = 60 }
    "#;
    let mut nodes = Vec::new();
    for _ in 0..4 {
        nodes.push(
            Limiter::builder([format!("redis://{}", tally.addr())])
                .rules_toml(rules)
                .unwrap()
                .config(test_config(Mode::Cached {
                    sync_interval: Duration::from_millis(100),
                }))
                .clock(clock.clone())
                .build()
                .await
                .unwrap(),
        );
    }
    let heavy = Identity::new("user", "heavy", "free");
    let light = Identity::new("user", "light", "free");
    let mut admitted = 0;
    let mut light_denied = 0;
    // 40 s of traffic in 100 ms steps, inside one 60 s window: `heavy` sends
    // 4 requests a step (4000 in all, 40x its limit), `light` one every 8
    // steps (50 in all, half its limit), round-robin over the nodes.
    for step in 0..400u64 {
        for (n, node) in nodes.iter().enumerate() {
            if node.check(&heavy, "GET /", 1).await.allowed {
                admitted += 1;
            }
            if step % 32 == 8 * n as u64 && !node.check(&light, "GET /", 1).await.allowed {
                light_denied += 1;
            }
        }
        clock.0.fetch_add(100, std::sync::atomic::Ordering::Relaxed);
        tally.clock.advance_ms(100);
        for node in &nodes {
            node.sync_now().await;
        }
    }
    assert_eq!(admitted, 100, "exactly the limit within the window");
    assert_eq!(light_denied, 0, "the light identity was never denied");
    let local: u64 = nodes.iter().map(|n| n.metrics().local_decisions).sum();
    assert!(local > 0, "leases served some decisions locally");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_on_the_server_reload_on_a_published_update() {
    let tally = TestServer::start_real_clock().await;
    let url = format!("redis://{}", tally.addr());
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut rules = RuleSet::from_toml(RULES).unwrap();
    let _: () = redis::cmd("SET")
        .arg("tally:rules")
        .arg(rules.to_json())
        .query_async(&mut conn)
        .await
        .unwrap();
    let limiter = Limiter::builder([url])
        .rules(tally_client::RuleSource::server_default())
        .config(LimiterConfig {
            background_tasks: true,
            ..test_config(Mode::Exact)
        })
        .build()
        .await
        .unwrap();
    assert_eq!(limiter.rules().version, 1);
    rules.version = 2;
    rules
        .tiers
        .get_mut("free")
        .unwrap()
        .global
        .as_mut()
        .unwrap()
        .limit = 9;
    let _: () = redis::cmd("SET")
        .arg("tally:rules")
        .arg(rules.to_json())
        .query_async(&mut conn)
        .await
        .unwrap();
    // The listener may still be subscribing: publish until it has seen one.
    for _ in 0..200 {
        let _: i64 = redis::cmd("PUBLISH")
            .arg("tally:rules")
            .arg("2")
            .query_async(&mut conn)
            .await
            .unwrap();
        if limiter.rules().version == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(limiter.rules().version, 2);
    // Delivering the same update again changes nothing.
    assert!(!limiter.install_rules(rules));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tightening_lowers_every_limit_until_lifted() {
    let tally = TestServer::start_real_clock().await;
    let limiter = limiter(format!("redis://{}", tally.addr()), Mode::Exact).await;
    let carol = Identity::new("user", "carol", "free");
    limiter.set_tightening(0.5);
    let d = limiter.check(&carol, "GET /search", 1).await;
    let ceilings: Vec<u64> = d.limits.iter().map(|l| l.limit).collect();
    assert_eq!(ceilings, vec![4, 2]);
    limiter.set_tightening(1.0);
    let d = limiter.check(&carol, "GET /search", 1).await;
    let ceilings: Vec<u64> = d.limits.iter().map(|l| l.limit).collect();
    assert_eq!(ceilings, vec![8, 5]);
}

async fn futures_allowed(limiter: &Limiter, identity: &Identity, n: usize) -> Vec<bool> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(limiter.check(identity, "GET /other", 1).await.allowed);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_failure_policy_decides_when_the_server_is_gone() {
    let tally = TestServer::start_real_clock().await;
    let url = format!("redis://{}", tally.addr());
    let mut limiters = Vec::new();
    for policy in [
        FailurePolicy::Open,
        FailurePolicy::Closed,
        FailurePolicy::Hybrid,
    ] {
        let limiter = Limiter::builder([url.clone()])
            .rules_toml(RULES)
            .unwrap()
            .config(LimiterConfig {
                policy,
                ..test_config(Mode::Exact)
            })
            .build()
            .await
            .unwrap();
        limiters.push(limiter);
    }
    let dave = Identity::new("user", "dave", "free");
    // Hybrid needs the last known budgets: use up the search limit first.
    for _ in 0..6 {
        limiters[2].check(&dave, "GET /search", 1).await;
    }
    tally.handle.shutdown().await;
    let open = limiters[0].check(&dave, "GET /search", 1).await;
    assert_eq!((open.allowed, open.source), (true, Source::FailOpen));
    let closed = limiters[1].check(&dave, "GET /search", 1).await;
    assert_eq!((closed.allowed, closed.source), (false, Source::FailClosed));
    let erin = Identity::new("user", "erin", "free");
    let fresh = limiters[2].check(&erin, "GET /search", 1).await;
    assert_eq!((fresh.allowed, fresh.source), (true, Source::Hybrid));
    // dave was denied on the search limit before the outage: still denied.
    let over = limiters[2].check(&dave, "GET /search", 1).await;
    assert_eq!((over.allowed, over.source), (false, Source::Hybrid));
    assert!(over.retry_after > 0);
    // Under the global limit (3 of 8 left) dave's other endpoints pass, and
    // local use counts against the last known budget: 3 more, then no.
    let other: Vec<bool> = futures_allowed(&limiters[2], &dave, 4).await;
    assert_eq!(other, vec![true, true, true, false]);
    assert_eq!(limiters[0].metrics().fail_open, 1);
    assert_eq!(limiters[1].metrics().fail_closed, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_mode_works_against_redis_too() {
    // The lease script is plain Lua: Redis runs it as tally does.
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let rules = r#"
        [tiers.free]
        global = { limit = 20, window_seconds = 3600 }
    "#;
    let mut nodes = Vec::new();
    for _ in 0..2 {
        nodes.push(
            Limiter::builder([format!("redis://{}", redis.addr)])
                .rules_toml(rules)
                .unwrap()
                .config(test_config(Mode::Cached {
                    sync_interval: Duration::from_millis(50),
                }))
                .build()
                .await
                .unwrap(),
        );
    }
    let heavy = Identity::new("user", "heavy", "free");
    let light = Identity::new("user", "light", "free");
    let (mut admitted, mut light_denied) = (0, 0);
    for round in 0..30 {
        // Three a node between syncs: fast enough for leases to pay.
        for node in &nodes {
            for _ in 0..3 {
                if node.check(&heavy, "GET /", 1).await.allowed {
                    admitted += 1;
                }
            }
        }
        if round % 5 == 0 && !nodes[round % 2].check(&light, "GET /", 1).await.allowed {
            light_denied += 1;
        }
        for node in &nodes {
            node.sync_now().await;
        }
    }
    assert_eq!(
        admitted, 20,
        "180 requests against a limit of 20 in one window"
    );
    assert_eq!(light_denied, 0);
    assert!(nodes.iter().map(|n| n.metrics().syncs).sum::<u64>() > 0);
    assert!(
        nodes
            .iter()
            .map(|n| n.metrics().local_decisions)
            .sum::<u64>()
            > 0
    );
}

/// The least-privilege gateway user of docs/security.md, given in the URL
/// (`redis://gateway:secret@host:port`): exact mode, cached mode with
/// leases and rules read and followed over pub/sub all work, and that user
/// can do nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_user_is_enough_for_every_mode() {
    let tally = TestServer::start_real_clock().await;
    let admin_url = format!("redis://{}", tally.addr());
    let admin = redis::Client::open(admin_url.as_str()).unwrap();
    let mut conn = admin.get_multiplexed_async_connection().await.unwrap();
    let user: Vec<&str> = "ACL SETUSER gateway on >gw-secret ~rl:* %R~tally:rules \
        resetchannels &tally:rules -@all +evalsha +eval +script|load +get +incrby +decrby \
        +expire +time +subscribe +ping +cluster|slots +asking"
        .split(' ')
        .collect();
    let _: () = redis::cmd(user[0])
        .arg(&user[1..])
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("tally:rules")
        .arg(RuleSet::from_toml(RULES).unwrap().to_json())
        .query_async(&mut conn)
        .await
        .unwrap();
    let url = format!("redis://gateway:gw-secret@{}", tally.addr());
    for (n, mode) in [
        Mode::Exact,
        Mode::Cached {
            sync_interval: Duration::from_millis(20),
        },
    ]
    .into_iter()
    .enumerate()
    {
        let alice = Identity::new("user", format!("alice-{n}"), "free");
        let limiter = Limiter::builder([url.clone()])
            .rules(tally_client::RuleSource::server_default())
            .config(LimiterConfig {
                background_tasks: true,
                ..test_config(mode)
            })
            .build()
            .await
            .unwrap();
        assert_eq!(limiter.rules().version, 1, "rules read as the gateway user");
        for _ in 0..2 {
            let decision = limiter.check(&alice, "GET /search", 1).await;
            assert!(decision.allowed, "{decision:?}");
            assert!(
                matches!(decision.source, Source::Server | Source::Local),
                "decided by the store, not by the breaker: {decision:?}"
            );
            limiter.sync_now().await;
        }
        let metrics = limiter.metrics();
        assert_eq!(
            (
                metrics.sync_failures,
                metrics.fail_open,
                metrics.fail_closed
            ),
            (0, 0, 0),
            "{metrics:?}"
        );
    }
    let gateway = redis::Client::open(url.as_str()).unwrap();
    let mut as_gateway = gateway.get_multiplexed_async_connection().await.unwrap();
    let refused: redis::RedisResult<()> = redis::cmd("FLUSHALL").query_async(&mut as_gateway).await;
    assert!(refused
        .unwrap_err()
        .to_string()
        .contains("this user has no permissions to run the 'flushall' command"));
}

/// `rediss://` with the CA and a client certificate (`tls-auth-clients
/// yes`): exact mode decides through tally's TLS port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_go_over_tls() {
    let Some(files) = tally_tests::TlsFiles::generate() else {
        return;
    };
    let port = tally_tests::free_local_port();
    let _tally = TestServer::start_with(|c| {
        c.port = tally_tests::free_local_port();
        c.tls.port = port;
        c.tls.cert_file = files.server_cert.clone();
        c.tls.key_file = files.server_key.clone();
        c.tls.ca_cert_file = files.ca.clone();
    })
    .await;
    let read = |path: &str| std::fs::read(path).unwrap();
    let limiter = Limiter::builder([format!("rediss://localhost:{port}")])
        .rules_toml(RULES)
        .unwrap()
        .config(test_config(Mode::Exact))
        .tls(
            Some(read(&files.ca)),
            Some((read(&files.client_cert), read(&files.client_key))),
        )
        .build()
        .await
        .unwrap();
    let bob = Identity::new("user", "bob", "free");
    let decision = limiter.check(&bob, "GET /search", 1).await;
    assert!(
        decision.allowed && decision.source == Source::Server,
        "{decision:?}"
    );
    assert_eq!(decision.limits[1].remaining, 4);
}

/// A user that may not run CLUSTER SLOTS (the gateway user before it had
/// `+cluster|slots`): the limiter takes the server for a standalone one
/// after the first refusal and does not ask again every refresh (each
/// refusal is an ACL LOG entry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_cluster_slots_is_refused_once() {
    let tally = TestServer::start_real_clock().await;
    let admin = redis::Client::open(format!("redis://{}", tally.addr())).unwrap();
    let mut conn = admin.get_multiplexed_async_connection().await.unwrap();
    let user: Vec<&str> = "ACL SETUSER narrow on >n-secret ~rl:* -@all +evalsha +eval \
        +script|load +get +incrby +decrby +expire +time +ping"
        .split(' ')
        .filter(|w| !w.is_empty())
        .collect();
    let _: () = redis::cmd(user[0])
        .arg(&user[1..])
        .query_async(&mut conn)
        .await
        .unwrap();
    let limiter = Limiter::builder([format!("redis://narrow:n-secret@{}", tally.addr())])
        .rules_toml(RULES)
        .unwrap()
        .config(LimiterConfig {
            background_tasks: true,
            ..test_config(Mode::Exact)
        })
        .build()
        .await
        .unwrap();
    let alice = Identity::new("user", "alice-narrow", "free");
    assert_eq!(
        limiter.check(&alice, "GET /search", 1).await.source,
        Source::Server
    );
    // Several refresh periods of the background task.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let log: Vec<redis::Value> = redis::cmd("ACL")
        .arg("LOG")
        .query_async(&mut conn)
        .await
        .unwrap();
    let refusals: Vec<i64> = log
        .iter()
        .filter_map(|entry| {
            let redis::Value::Array(fields) = entry else {
                return None;
            };
            let field = |name: &str| {
                fields
                    .chunks(2)
                    .find(|pair| matches!(&pair[0], redis::Value::BulkString(b) if b == name.as_bytes()))
                    .map(|pair| pair[1].clone())
            };
            let object = field("object")?;
            let redis::Value::BulkString(object) = object else {
                return None;
            };
            if object != b"cluster|slots" {
                return None;
            }
            match field("count")? {
                redis::Value::Int(n) => Some(n),
                _ => None,
            }
        })
        .collect();
    assert_eq!(refusals, vec![1], "{log:?}");
}
