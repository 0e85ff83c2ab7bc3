//! The cached mode against exact mode (docs/client.md, "Cached mode").
//!
//! Gateway nodes (limiter instances) in one process against one in-process
//! tally-server, on a clock the simulation moves (server and nodes alike),
//! so three minutes of traffic take seconds. Limit 1000/min on every
//! identity:
//!
//! - `heavy` sends at a fixed rate per node from every node (from 0.1 to
//!   100 req/s per node: a quarter of its limit to far over it);
//!   In the last settings `heavy` is in a tier whose limit it never
//!   reaches (100,000,000/min): what leases save for a busy identity;
//! - `light` sends 99% of its limit (990/min), each request from a node
//!   picked at random: any denial of it is a false denial.
//!
//! The last settings count the limit by GCRA or a fixed window instead of
//! the sliding window (`-- algorithms` runs only those).
//!
//! For each setting and mode it prints the store round trips and commands
//! per request, what `heavy` was admitted per 60 s window against its limit
//! (in a window after the first, the sliding window's estimate decides:
//! exact mode admits close to the limit too), and the denials of `light`.
//!
//! ```text
//! cargo run --release --example simulate -p tally-client
//! cargo run --release --example simulate -p tally-client -- algorithms
//! cargo run --release --example simulate -p tally-client -- sweep > sweep.csv
//! python3 tools/client_chart.py sweep.csv docs/client-chart.svg
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tally_client::{Clock, Identity, Limiter, LimiterConfig, Mode};
use tally_server::store::ManualClock;
use tally_server::{Config, Server};

const LIMIT: u64 = 1000;
/// The `big` tier's limit: an identity there is never over it here.
const BIG_LIMIT: u64 = 100_000_000;
const WINDOW_MS: u64 = 60_000;
const WINDOWS: u64 = 3;
/// 1720000020 s is a multiple of 60: the simulation starts on a window start.
const START_MS: u64 = 1_720_000_020_000;
/// The simulation's step.
const STEP_MS: u64 = 10;

struct SimClock(AtomicU64);

impl Clock for SimClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

struct Outcome {
    admitted_per_window: Vec<u64>,
    sent: u64,
    light_denied: u64,
    light_sent: u64,
    round_trips: u64,
    commands: u64,
}

/// How the `free` tier's limit counts: the sliding window, or the other
/// algorithms a limit may choose (docs/client.md, "Choosing an algorithm").
#[derive(Clone, Copy, PartialEq)]
enum Counting {
    SlidingWindow,
    /// GCRA with a burst of 1% of the limit.
    Gcra,
    FixedWindow,
}

impl Counting {
    /// The limit's fields beyond `limit` and `window_seconds`.
    fn rule_fields(self) -> &'static str {
        match self {
            Counting::SlidingWindow => "",
            Counting::Gcra => ", algorithm = \"gcra\", burst = 10",
            Counting::FixedWindow => ", algorithm = \"fixed_window\"",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Counting::SlidingWindow => "sliding window",
            Counting::Gcra => "GCRA, burst 10",
            Counting::FixedWindow => "fixed window",
        }
    }
}

async fn simulate(
    nodes: usize,
    per_node_rate: f64,
    within: bool,
    sync_ms: Option<u64>,
    counting: Counting,
) -> Outcome {
    let server_clock = Arc::new(ManualClock::new(START_MS));
    let server = Server::new(Config {
        port: 0,
        shards: 8,
        clock: server_clock.clone(),
        // An in-memory store for the run: no snapshots in the working dir.
        save_points: Vec::new(),
        ..Config::default()
    })
    .start()
    .await
    .expect("server starts");
    let url = format!("redis://{}", server.local_addr());
    let clock = Arc::new(SimClock(AtomicU64::new(START_MS)));
    let fields = counting.rule_fields();
    let rules = format!(
        "[tiers.free]\nglobal = {{ limit = {LIMIT}, window_seconds = 60{fields} }}\n\
         [tiers.big]\nglobal = {{ limit = {BIG_LIMIT}, window_seconds = 60 }}\n"
    );
    let mode = match sync_ms {
        None => Mode::Exact,
        Some(ms) => Mode::Cached {
            sync_interval: Duration::from_millis(ms),
        },
    };
    let mut limiters = Vec::with_capacity(nodes);
    for _ in 0..nodes {
        limiters.push(
            Limiter::builder([url.clone()])
                .rules_toml(&rules)
                .expect("rules")
                .config(LimiterConfig {
                    mode,
                    call_timeout: Duration::from_secs(5),
                    sync_timeout: Duration::from_secs(5),
                    background_tasks: false,
                    ..LimiterConfig::default()
                })
                .clock(clock.clone())
                .build()
                .await
                .expect("limiter"),
        );
    }
    let heavy = Identity::new("user", "heavy", if within { "big" } else { "free" });
    let light = Identity::new("user", "light", "free");
    let mut admitted = vec![0u64; WINDOWS as usize];
    let mut owed = vec![0f64; nodes];
    let (mut sent, mut light_denied, mut light_sent) = (0u64, 0u64, 0u64);
    let mut next_light = 0u64;
    let light_every = WINDOW_MS as f64 / (LIMIT as f64 * 0.99);
    let mut pick = 0x9E37_79B9_7F4A_7C15u64;
    for step in 0..WINDOWS * WINDOW_MS / STEP_MS {
        let t = step * STEP_MS;
        let window = (t / WINDOW_MS) as usize;
        for (k, node) in limiters.iter().enumerate() {
            // Each node's first request at its own offset: not in lockstep.
            owed[k] += per_node_rate * STEP_MS as f64 / 1000.0;
            if t == 0 {
                owed[k] += k as f64 / nodes as f64;
            }
            while owed[k] >= 1.0 {
                owed[k] -= 1.0;
                sent += 1;
                if node.check(&heavy, "GET /", 1).await.allowed {
                    admitted[window] += 1;
                }
            }
        }
        while (next_light as f64) * light_every < (t + STEP_MS) as f64 {
            pick = pick
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let node = &limiters[(pick >> 33) as usize % nodes];
            light_sent += 1;
            if !node.check(&light, "GET /", 1).await.allowed {
                light_denied += 1;
            }
            next_light += 1;
        }
        if let Some(sync_ms) = sync_ms {
            // Each node syncs every `sync_ms`, the nodes spread over it.
            for (k, node) in limiters.iter().enumerate() {
                let offset = (k as u64 * sync_ms / nodes as u64) / STEP_MS * STEP_MS;
                if t % sync_ms == offset % sync_ms {
                    node.sync_now().await;
                }
            }
        }
        clock.0.fetch_add(STEP_MS, Ordering::Relaxed);
        server_clock.advance_ms(STEP_MS);
    }
    let metrics: Vec<_> = limiters.iter().map(Limiter::metrics).collect();
    server.shutdown().await;
    Outcome {
        admitted_per_window: admitted,
        sent,
        light_denied,
        light_sent,
        round_trips: metrics.iter().map(|m| m.syncs + m.server_checks).sum(),
        commands: metrics
            .iter()
            .map(|m| m.lease_calls + m.server_checks)
            .sum(),
    }
}

/// `sweep`: per-node rates from 0.1 to 10,000 req/s on 10 nodes, as CSV
/// for `tools/client_chart.py` (docs/client-chart.svg): for heavy within
/// a limit it never reaches, the round trips per request of heavy; for
/// heavy over its limit, the lowest and highest window admitted. Exact mode runs up to
/// 100 req/s per node (a round trip per check; above that it would take
/// hours of loopback round trips and is 1.000 by construction).
async fn sweep() {
    // Round trips per request of heavy alone: light (0.165 req/s per node)
    // is too slow to lease, so each of its checks is one round trip.
    println!("identity,per_node_rate,mode,round_trips_per_request,admitted_min_pct,admitted_max_pct,light_denied");
    let rates = [
        0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, 10_000.0,
    ];
    for within in [true, false] {
        for rate in rates {
            for sync_ms in [None, Some(100), Some(20)] {
                if sync_ms.is_none() && rate > 100.0 {
                    continue;
                }
                let outcome = simulate(10, rate, within, sync_ms, Counting::SlidingWindow).await;
                let heavy_trips = outcome.round_trips.saturating_sub(outcome.light_sent);
                let windows = outcome.admitted_per_window.iter();
                let share = |a: &u64| *a as f64 / LIMIT as f64 * 100.0;
                let low = windows.clone().map(share).fold(f64::INFINITY, f64::min);
                let high = windows.map(share).fold(0.0, f64::max);
                println!(
                    "{},{rate},{},{:.4},{low:.1},{high:.1},{}",
                    if within { "within" } else { "over" },
                    sync_ms.map_or("exact".to_string(), |ms| format!("cached {ms} ms")),
                    heavy_trips as f64 / outcome.sent as f64,
                    outcome.light_denied
                );
            }
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if std::env::args().nth(1).as_deref() == Some("sweep") {
        sweep().await;
        return;
    }
    println!(
        "limit {LIMIT}/min; heavy at a fixed rate from every node; light at 99% from random nodes; {WINDOWS} windows of 60 s"
    );
    println!();
    println!("| nodes | heavy req/s per node | limit counted by | mode | round trips per request | commands per request | heavy admitted per window (% of limit) | light denied | run time |");
    println!("|---|---|---|---|---|---|---|---|---|");
    use Counting::*;
    // (nodes, heavy's rate per node, heavy within a limit it never
    // reaches, how the free tier's limit counts)
    let settings: &[(usize, f64, bool, Counting)] = &[
        (1, 100.0, false, SlidingWindow),
        (10, 0.1, false, SlidingWindow),
        (10, 1.0, false, SlidingWindow),
        (10, 10.0, false, SlidingWindow),
        (10, 100.0, false, SlidingWindow),
        (100, 0.33, false, SlidingWindow),
        (100, 3.0, false, SlidingWindow),
        (10, 100.0, true, SlidingWindow),
        (10, 1000.0, true, SlidingWindow),
        (10, 10.0, false, Gcra),
        (10, 100.0, false, Gcra),
        (10, 10.0, false, FixedWindow),
        (10, 100.0, false, FixedWindow),
    ];
    let only = std::env::args().nth(1);
    for &(nodes, rate, within, counting) in settings {
        if only.as_deref() == Some("algorithms") && counting == SlidingWindow {
            continue;
        }
        for sync_ms in [None, Some(100), Some(20)] {
            let started = Instant::now();
            let outcome = simulate(nodes, rate, within, sync_ms, counting).await;
            let requests = (outcome.sent + outcome.light_sent) as f64;
            let mode = match sync_ms {
                None => "exact".to_string(),
                Some(ms) => format!("cached, {ms} ms"),
            };
            let windows: Vec<String> = if within {
                let all: u64 = outcome.admitted_per_window.iter().sum();
                vec![format!(
                    "{:.1}% of sent",
                    all as f64 / outcome.sent as f64 * 100.0
                )]
            } else {
                outcome
                    .admitted_per_window
                    .iter()
                    .map(|&a| format!("{:.1}", a as f64 / LIMIT as f64 * 100.0))
                    .collect()
            };
            println!(
                "| {nodes} | {rate} | {} | {mode} | {:.3} | {:.3} | {} | {} of {} | {:.1} s |",
                counting.name(),
                outcome.round_trips as f64 / requests,
                outcome.commands as f64 / requests,
                windows.join(" / "),
                outcome.light_denied,
                outcome.light_sent,
                started.elapsed().as_secs_f64()
            );
        }
    }
}
