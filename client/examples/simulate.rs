//! Over-allowance simulation for the cached mode (docs/client.md).
//!
//! Many limiter instances (gateway nodes) in one process against one
//! in-process tally-server, on a clock the simulation moves (server and
//! nodes alike), so three minutes of traffic take seconds:
//!
//! - `heavy` sends twice its limit (2000/min against 1000/min), spread
//!   round-robin over the nodes;
//! - `light` sends 80% of its limit (800/min), also round-robin.
//!
//! For each setting it prints the requests admitted per 60 s window against
//! the limit (over-allowance) and the denials of `light` (false denials).
//!
//! ```text
//! cargo run --release --example simulate -p tally-client
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tally_client::{Clock, Identity, Limiter, LimiterConfig, Mode};
use tally_server::store::ManualClock;
use tally_server::{Config, Server};

const LIMIT: u64 = 1000;
const WINDOW_MS: u64 = 60_000;
const WINDOWS: u64 = 3;
/// 1720000020 s is a multiple of 60: the simulation starts on a window start.
const START_MS: u64 = 1_720_000_020_000;

struct SimClock(AtomicU64);

impl Clock for SimClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

struct Outcome {
    admitted_per_window: Vec<u64>,
    light_denied: u64,
    light_sent: u64,
    round_trips: u64,
    local: u64,
}

async fn simulate(nodes: usize, sync_ms: u64, exact: bool) -> Outcome {
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
    let rules = format!("[tiers.free]\nglobal = {{ limit = {LIMIT}, window_seconds = 60 }}\n");
    let mode = if exact {
        Mode::Exact
    } else {
        Mode::Cached {
            sync_interval: Duration::from_millis(sync_ms),
        }
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
    let heavy = Identity::new("user", "heavy", "free");
    let light = Identity::new("user", "light", "free");
    let mut admitted = vec![0u64; WINDOWS as usize];
    let (mut heavy_next, mut light_next) = (0usize, 0usize);
    let (mut light_denied, mut light_sent) = (0u64, 0u64);
    for t in 0..WINDOWS * WINDOW_MS {
        let window = (t / WINDOW_MS) as usize;
        if t % 30 == 0 {
            // 2000 a minute.
            let node = &limiters[heavy_next % nodes];
            heavy_next += 1;
            if node.check(&heavy, "GET /", 1).await.allowed {
                admitted[window] += 1;
            }
        }
        if t % 75 == 0 {
            // 800 a minute.
            let node = &limiters[light_next % nodes];
            light_next += 1;
            light_sent += 1;
            if !node.check(&light, "GET /", 1).await.allowed {
                light_denied += 1;
            }
        }
        if !exact {
            // Each node syncs every `sync_ms`, the nodes spread over it.
            for (k, node) in limiters.iter().enumerate() {
                if t % sync_ms == (k as u64 * sync_ms / nodes as u64) % sync_ms {
                    node.sync_now().await;
                }
            }
        }
        clock.0.fetch_add(1, Ordering::Relaxed);
        server_clock.advance_ms(1);
    }
    let metrics: Vec<_> = limiters.iter().map(Limiter::metrics).collect();
    server.shutdown().await;
    Outcome {
        admitted_per_window: admitted,
        light_denied,
        light_sent,
        round_trips: metrics.iter().map(|m| m.syncs + m.server_checks).sum(),
        local: metrics.iter().map(|m| m.local_decisions).sum(),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    println!("limit {LIMIT}/min; heavy sends 2000/min, light 800/min, round-robin; {WINDOWS} windows of 60 s");
    println!();
    println!("| setting | admitted per window (heavy) | worst over-allowance | light denied | round trips | local decisions | run time |");
    println!("|---|---|---|---|---|---|---|");
    for (nodes, sync_ms, exact) in [(1, 0, true), (100, 100, false), (100, 20, false)] {
        let started = Instant::now();
        let outcome = simulate(nodes, sync_ms.max(1), exact).await;
        let worst = outcome
            .admitted_per_window
            .iter()
            .map(|&a| (a as f64 - LIMIT as f64) / LIMIT as f64 * 100.0)
            .fold(f64::MIN, f64::max);
        let setting = if exact {
            "exact mode (1 node)".to_string()
        } else {
            format!("{nodes} nodes x {sync_ms} ms")
        };
        println!(
            "| {setting} | {:?} | {worst:+.1}% | {} of {} | {} | {} | {:.1} s |",
            outcome.admitted_per_window,
            outcome.light_denied,
            outcome.light_sent,
            outcome.round_trips,
            outcome.local,
            started.elapsed().as_secs_f64()
        );
    }
}
