//! The cost of a decision: a cached-mode check served from a lease (target:
//! at most 100 ns median), and an exact-mode check against a bare PING over
//! the same kind of connection to the same server (target: at most 1.2x).
//!
//! ```text
//! cargo bench -p tally-client --bench decision
//! ```
//! Both servers are in-process tally-servers on this machine's loopback.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use futures_util::FutureExt;
use tally_client::{Identity, Limiter, LimiterConfig, Mode};
use tally_server::{Config, Server};

const RULES: &str = r#"
[tiers.free]
global = { limit = 1000000000, window_seconds = 3600 }
endpoints."GET /search" = { limit = 1000000000, window_seconds = 3600 }
"#;

fn decisions(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(async {
        Server::new(Config {
            port: 0,
            // An in-memory store for the run: no snapshots in the working dir.
            save_points: Vec::new(),
            ..Config::default()
        })
        .start()
        .await
        .unwrap()
    });
    let url = format!("redis://{}", server.local_addr());
    let limiter = |mode| {
        runtime
            .block_on(
                Limiter::builder([url.clone()])
                    .rules_toml(RULES)
                    .unwrap()
                    .config(LimiterConfig {
                        mode,
                        call_timeout: Duration::from_millis(100),
                        ..LimiterConfig::default()
                    })
                    .build(),
            )
            .unwrap()
    };
    let cached = limiter(Mode::Cached {
        sync_interval: Duration::from_millis(20),
    });
    let exact = limiter(Mode::Exact);
    let user = Identity::new("user", "u_99182", "free");

    // Warm the cached limiter up: its leases grow with its rate.
    runtime.block_on(async {
        for _ in 0..200 {
            for _ in 0..10_000 {
                cached.check(&user, "GET /search", 1).await;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    });
    // What the harness itself costs per iteration of an async routine.
    c.bench_function("harness: an empty async routine", |b| {
        b.to_async(&runtime)
            .iter(|| async { std::hint::black_box(1u64) })
    });
    let before = cached.metrics();
    c.bench_function("cached-mode decision (lease hit)", |b| {
        b.to_async(&runtime)
            .iter(|| async { std::hint::black_box(cached.check(&user, "GET /search", 1).await) })
    });
    let after = cached.metrics();
    println!(
        "cached run: {} local decisions, {} server checks",
        after.local_decisions - before.local_decisions,
        after.server_checks - before.server_checks
    );

    // Two threads deciding at once, each for its own identity on the same
    // endpoint, as a gateway's worker threads do: what they share on the
    // fast path (cache lines written by every decision) shows here and not
    // above. Time per decision: the wall time over both threads' decisions
    // (half the one-thread figure if nothing is shared).
    let pair = [
        Identity::new("user", "u_1", "free"),
        Identity::new("user", "u_2", "free"),
    ];
    runtime.block_on(async {
        for _ in 0..100 {
            for user in &pair {
                for _ in 0..10_000 {
                    cached.check(user, "GET /search", 1).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    });
    let missed = AtomicU64::new(0);
    c.bench_function(
        "cached-mode decisions on 2 threads (wall time per decision)",
        |b| {
            b.iter_custom(|iters| {
                let per_thread = iters.div_ceil(2);
                let started = Instant::now();
                std::thread::scope(|scope| {
                    for user in &pair {
                        let (cached, missed, runtime) = (&cached, &missed, &runtime);
                        scope.spawn(move || {
                            // A check the lease cannot serve starts a
                            // server call: it needs the runtime's timers.
                            let _entered = runtime.enter();
                            for _ in 0..per_thread {
                                // A lease hit completes at its first poll.
                                match cached.check(user, "GET /search", 1).now_or_never() {
                                    Some(decision) => {
                                        std::hint::black_box(decision);
                                    }
                                    None => {
                                        missed.fetch_add(1, Ordering::Relaxed);
                                    }
                                }
                            }
                        });
                    }
                });
                started.elapsed()
            })
        },
    );
    println!(
        "two-thread run: {} checks not decided at once (a lease ran out)",
        missed.load(Ordering::Relaxed)
    );

    // Its sync task would keep calling the server during the round trips.
    drop(cached);
    runtime.block_on(async { tokio::time::sleep(Duration::from_millis(100)).await });

    let client = redis::Client::open(url.as_str()).unwrap();
    let connection = runtime
        .block_on(client.get_multiplexed_async_connection())
        .unwrap();
    let mut group = c.benchmark_group("round trip");
    group.bench_function("PING", |b| {
        b.to_async(&runtime).iter(|| {
            let mut connection = connection.clone();
            async move {
                let pong: String = redis::cmd("PING")
                    .query_async(&mut connection)
                    .await
                    .unwrap();
                std::hint::black_box(pong)
            }
        })
    });
    group.bench_function("exact-mode check (2 limits)", |b| {
        b.to_async(&runtime)
            .iter(|| async { std::hint::black_box(exact.check(&user, "GET /search", 1).await) })
    });
    group.finish();
    runtime.block_on(server.shutdown());
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = decisions
}
criterion_main!(benches);
