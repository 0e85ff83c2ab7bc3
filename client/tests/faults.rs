//! Fault tests: the server goes away under load, hangs, and comes back.
//! The breaker opens at its threshold, a check never waits past its
//! timeout, each policy decides as documented, one probe closes the breaker
//! again, and nothing panics or leaks a task.

use std::time::Duration;

use tally_client::{
    BreakerConfig, BreakerState, FailurePolicy, Identity, Limiter, LimiterConfig, Mode, Source,
};
use tally_tests::TestServer;

/// A limit no load task can reach (a fast box runs thousands of checks in
/// the 100 ms before the server stops): these tests are about failures,
/// and a denial for being over the limit would read as one.
const RULES: &str = r#"
    [tiers.free]
    global = { limit = 100000000, window_seconds = 60 }
"#;

fn config(policy: FailurePolicy, call_timeout: Duration, probe: Duration) -> LimiterConfig {
    LimiterConfig {
        mode: Mode::Exact,
        call_timeout,
        sync_timeout: call_timeout,
        policy,
        breaker: BreakerConfig {
            failures: 5,
            window: Duration::from_secs(10),
            probe_interval: probe,
        },
        background_tasks: false,
        ..LimiterConfig::default()
    }
}

/// A server that accepts connections and never answers.
async fn black_hole() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    addr
}

#[tokio::test(start_paused = true)]
async fn a_hanging_server_costs_each_check_exactly_its_timeout_until_the_breaker_opens() {
    let addr = black_hole().await;
    let timeout = Duration::from_millis(5);
    let limiter = Limiter::builder([format!("redis://{addr}")])
        .rules_toml(RULES)
        .unwrap()
        .config(config(
            FailurePolicy::Closed,
            timeout,
            Duration::from_secs(30),
        ))
        .build()
        .await
        .unwrap();
    let user = Identity::new("user", "u1", "free");
    // Time is paused: it only moves when every task waits, so a check's
    // elapsed time is exactly what it waited for.
    for _ in 0..5 {
        let started = tokio::time::Instant::now();
        let decision = limiter.check(&user, "GET /", 1).await;
        assert_eq!(started.elapsed(), timeout, "waited the timeout, no longer");
        assert_eq!(
            (decision.allowed, decision.source),
            (false, Source::FailClosed)
        );
    }
    assert_eq!(limiter.breaker_state(0), BreakerState::Open);
    assert_eq!(limiter.metrics().breaker_opened, 1);
    // Open: checks do not wait at all.
    let started = tokio::time::Instant::now();
    let decision = limiter.check(&user, "GET /", 1).await;
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(decision.source, Source::FailClosed);
    assert_eq!(decision.retry_after, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_server_under_load_opens_the_breaker_and_one_probe_closes_it() {
    let first = TestServer::start_real_clock().await;
    let port = first.addr().port();
    let url = format!("redis://127.0.0.1:{port}");
    let probe = Duration::from_millis(400);
    let limiter = Limiter::builder([url])
        .rules_toml(RULES)
        .unwrap()
        .config(config(FailurePolicy::Open, Duration::from_secs(1), probe))
        .build()
        .await
        .unwrap();
    // Load: four tasks checking in a loop.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut load = Vec::new();
    for worker in 0..4 {
        let limiter = limiter.clone();
        let stop = stop.clone();
        load.push(tokio::spawn(async move {
            let user = Identity::new("user", format!("w{worker}"), "free");
            let mut decisions = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let decision = limiter.check(&user, "GET /", 1).await;
                assert!(decision.allowed, "fail-open allows everything");
                decisions += 1;
                tokio::task::yield_now().await;
            }
            decisions
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    first.handle.shutdown().await;
    // Wait for the breaker (a bounded wait, not a timing assertion).
    for _ in 0..200 {
        if limiter.breaker_state(0) == BreakerState::Open {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(limiter.breaker_state(0), BreakerState::Open);
    assert_eq!(limiter.metrics().breaker_opened, 1);
    assert!(limiter.metrics().fail_open > 0);

    // The server comes back on the same port; until the probe is due the
    // breaker stays open and checks keep failing open without a call.
    let _second = TestServer::start_with(|c| {
        c.port = port;
        c.clock = std::sync::Arc::new(tally_server::store::SystemClock);
    })
    .await;
    let checks_before = limiter.metrics().server_checks;
    for _ in 0..500 {
        if limiter.breaker_state(0) == BreakerState::Closed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for task in load {
        assert!(task.await.unwrap() > 0, "a load task panicked or never ran");
    }
    assert_eq!(limiter.breaker_state(0), BreakerState::Closed);
    let metrics = limiter.metrics();
    assert_eq!(
        metrics.breaker_opened, 1,
        "opened once, closed by the probe"
    );
    assert!(
        metrics.server_checks > checks_before,
        "checks reach the server again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_limiter_leaves_no_task_behind() {
    let server = TestServer::start_real_clock().await;
    // One connection and disconnection first: the server's accept loop
    // spawns its per-listener accept task when it first runs, which can be
    // after start() returned, so the baseline is taken once it has served.
    {
        let client = redis::Client::open(format!("redis://{}", server.addr())).unwrap();
        let mut warm = client.get_multiplexed_async_connection().await.unwrap();
        let _: String = redis::cmd("PING").query_async(&mut warm).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let metrics = tokio::runtime::Handle::current().metrics();
    let baseline = metrics.num_alive_tasks();
    let limiter = Limiter::builder([format!("redis://{}", server.addr())])
        .rules(tally_client::RuleSource::server_default())
        .config(LimiterConfig {
            mode: Mode::Cached {
                sync_interval: Duration::from_millis(20),
            },
            call_timeout: Duration::from_secs(1),
            sync_timeout: Duration::from_secs(1),
            background_tasks: true,
            ..LimiterConfig::default()
        })
        .build()
        .await
        .unwrap();
    limiter
        .check(&Identity::new("user", "u", "free"), "GET /", 1)
        .await;
    drop(limiter);
    let mut alive = metrics.num_alive_tasks();
    for _ in 0..300 {
        if alive <= baseline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        alive = metrics.num_alive_tasks();
    }
    let mut conn = server.raw().await;
    let clients = conn.line("CLIENT LIST").await;
    assert!(
        alive <= baseline,
        "{alive} tasks alive, {baseline} before the limiter; {clients}"
    );
}
