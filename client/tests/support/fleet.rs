//! A fleet of gateway nodes against one tally, on a simulated clock: the
//! scale evidence of docs/client.md ("At fleet scale"). Shared by
//! `tests/fleet.rs` (a small fleet, its targets asserted) and
//! `examples/fleet.rs` (up to 1,000 nodes and 100,000 identities).
//!
//! - Identities send with Zipf-distributed rates (rank k gets a share
//!   proportional to 1/k), each evenly spaced with its own phase, every
//!   request from a node picked at random. With even spacing an identity
//!   whose rate is at most 99% of its limit is never over it, so any denial
//!   of one is a false denial.
//! - Every identity has the same limit; the top ranks send more than it.
//! - At the start of the third window a fresh identity bursts from every
//!   node in the same step (three times its limit at once), and halfway
//!   through the third window another fresh identity starts at four times
//!   its limit on every node at once.
//! - The server runs on its own thread, so the driver thread's CPU time is
//!   the client's: decisions, syncs, and the simulation's own loop (a heap
//!   pop and a random number per request), user and kernel time apart.

#![allow(dead_code)] // each user takes what it needs

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tally_client::{Clock, Identity, Limiter, LimiterConfig, Mode};
use tally_server::store::ManualClock;
use tally_server::{Config, Server};

/// 1720000020 s is a multiple of 10 and 60: the run starts on a window start.
const START_MS: u64 = 1_720_000_020_000;
/// The simulation's step.
const STEP_MS: u64 = 10;
/// Windows simulated.
pub const WINDOWS: usize = 3;

/// One run's settings.
#[derive(Debug, Clone, Copy)]
pub struct Fleet {
    /// Gateway nodes (limiter instances).
    pub nodes: usize,
    /// Identities in the Zipf distribution.
    pub identities: usize,
    /// Requests per second over the whole fleet.
    pub total_rate: f64,
    /// Every identity's limit per window.
    pub limit: u64,
    /// The window, seconds.
    pub window_seconds: u64,
    /// `None` for exact mode, else the cached mode's sync interval.
    pub sync_ms: Option<u64>,
    /// Seed of the node picks and phases.
    pub seed: u64,
}

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Requests sent (Zipf traffic, burst and newcomer).
    pub requests: u64,
    /// Requests admitted.
    pub admitted: u64,
    /// Store round trips (checks that asked the server, sync pipelines).
    pub round_trips: u64,
    /// Store commands (checks that asked the server, lease calls).
    pub commands: u64,
    /// Identities sending more than their limit.
    pub over_limit_identities: usize,
    /// Lowest and highest share of the limit an over-limit identity was
    /// admitted in any window (1.0 = exactly the limit).
    pub over_admitted: (f64, f64),
    /// Where the lowest was: (Zipf rank, window).
    pub least_admitted_at: (usize, usize),
    /// Highest share of the limit any identity was admitted in a window.
    pub most_admitted: f64,
    /// Identities sending at most 99% of their limit, their requests, and
    /// how many of those were denied (false denials).
    pub light_identities: usize,
    pub light_requests: u64,
    pub light_denied: u64,
    /// The synchronized burst: sent and admitted in its window.
    pub burst: (u64, u64),
    /// The newcomer on every node: admitted in the third window (it sends
    /// from the window's midpoint, twice the limit in that half) as a share
    /// of the limit.
    pub newcomer_admitted: f64,
    /// Client-thread CPU per request, nanoseconds: in user space (the
    /// limiter, the redis crate, the simulation's loop) and in the kernel
    /// (the round trips' socket calls and wake-ups).
    pub cpu_ns_per_request: (f64, f64),
    /// Limit states held, summed over the nodes, at the end.
    pub tracked_limits: usize,
}

struct SimClock(AtomicU64);

impl Clock for SimClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A tally on its own thread and runtime, on a manual clock.
struct ServerThread {
    addr: SocketAddr,
    clock: Arc<ManualClock>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerThread {
    fn start() -> ServerThread {
        let clock = Arc::new(ManualClock::new(START_MS));
        let server_clock = clock.clone();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("server runtime");
            runtime.block_on(async move {
                let server = Server::new(Config {
                    port: 0,
                    shards: 8,
                    clock: server_clock,
                    save_points: Vec::new(),
                    ..Config::default()
                })
                .start()
                .await
                .expect("server starts");
                addr_tx.send(server.local_addr()).expect("address");
                let _ = stopped.await;
                server.shutdown().await;
            });
        });
        let addr = addr_rx.recv().expect("the server's address");
        ServerThread {
            addr,
            clock,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// xorshift64*: cheap, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 32) * n as u64) >> 32) as usize
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The driver thread's CPU time so far, nanoseconds: (user, kernel).
fn thread_cpu_ns() -> (u64, u64) {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage, which `usage` is.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    (ns(usage.ru_utime), ns(usage.ru_stime))
}

/// Sender kinds in the per-identity tallies.
const BURST: usize = 0;
const NEWCOMER: usize = 1;
/// Zipf rank k is identity `ZIPF + k - 1`.
const ZIPF: usize = 2;

/// Runs one fleet for [`WINDOWS`] windows.
pub async fn run(fleet: Fleet) -> Report {
    let server = ServerThread::start();
    let clock = Arc::new(SimClock(AtomicU64::new(START_MS)));
    let rules = format!(
        "[tiers.free]\nglobal = {{ limit = {}, window_seconds = {} }}\n",
        fleet.limit, fleet.window_seconds
    );
    let mode = match fleet.sync_ms {
        None => Mode::Exact,
        Some(ms) => Mode::Cached {
            sync_interval: Duration::from_millis(ms),
        },
    };
    let mut limiters = Vec::with_capacity(fleet.nodes);
    for _ in 0..fleet.nodes {
        limiters.push(
            Limiter::builder([format!("redis://{}", server.addr)])
                .rules_toml(&rules)
                .expect("rules")
                .config(LimiterConfig {
                    mode,
                    call_timeout: Duration::from_secs(10),
                    sync_timeout: Duration::from_secs(10),
                    background_tasks: false,
                    ..LimiterConfig::default()
                })
                .clock(clock.clone())
                .build()
                .await
                .expect("limiter"),
        );
    }

    let window_ms = fleet.window_seconds * 1000;
    let total_ms = WINDOWS as u64 * window_ms;
    let senders = ZIPF + fleet.identities;
    let identities: Vec<Identity> = (0..senders)
        .map(|i| match i {
            BURST => Identity::new("user", "burst", "free"),
            NEWCOMER => Identity::new("user", "newcomer", "free"),
            _ => Identity::new("user", format!("z{}", i - ZIPF + 1), "free"),
        })
        .collect();
    // Zipf rates (requests per ms); the harmonic number normalises them.
    let harmonic: f64 = (1..=fleet.identities).map(|k| 1.0 / k as f64).sum();
    let per_ms = |k: usize| fleet.total_rate / 1000.0 / (k as f64 * harmonic);
    let window_budget = fleet.limit as f64;
    let sends_in_window = |k: usize| per_ms(k) * window_ms as f64;

    let mut rng = Rng(fleet.seed | 1);
    // Next arrival of each Zipf identity, in microseconds.
    let mut arrivals: BinaryHeap<Reverse<(u64, u32)>> = (1..=fleet.identities)
        .map(|k| {
            let period_us = 1000.0 / per_ms(k);
            Reverse(((rng.unit() * period_us) as u64, (ZIPF + k - 1) as u32))
        })
        .filter(|Reverse((at, _))| *at < total_ms * 1000)
        .collect();

    let mut admitted = vec![[0u32; WINDOWS]; senders];
    let mut denied = vec![0u32; senders];
    let mut sent = vec![0u32; senders];
    let newcomer_from = 2 * window_ms + window_ms / 2;
    let newcomer_per_node_ms = 4.0 * window_budget / window_ms as f64 / fleet.nodes as f64;
    let mut newcomer_owed = vec![0.0f64; fleet.nodes];
    let burst_per_node = (3 * fleet.limit).div_ceil(fleet.nodes as u64);

    let cpu_before = thread_cpu_ns();
    let mut t = 0;
    while t < total_ms {
        let window = (t / window_ms) as usize;
        let step_end_us = (t + STEP_MS) * 1000;
        while let Some(&Reverse((at, who))) = arrivals.peek() {
            if at >= step_end_us {
                break;
            }
            arrivals.pop();
            let who = who as usize;
            let node = &limiters[rng.below(fleet.nodes)];
            sent[who] += 1;
            if node.check(&identities[who], "GET /", 1).await.allowed {
                admitted[who][window] += 1;
            } else {
                denied[who] += 1;
            }
            let next = at + (1000.0 / per_ms(who - ZIPF + 1)) as u64;
            if next < total_ms * 1000 {
                arrivals.push(Reverse((next, who as u32)));
            }
        }
        if t == 2 * window_ms {
            for node in &limiters {
                for _ in 0..burst_per_node {
                    sent[BURST] += 1;
                    if node.check(&identities[BURST], "GET /", 1).await.allowed {
                        admitted[BURST][window] += 1;
                    }
                }
            }
        }
        if t >= newcomer_from {
            for (k, node) in limiters.iter().enumerate() {
                newcomer_owed[k] += newcomer_per_node_ms * STEP_MS as f64;
                if t == newcomer_from {
                    newcomer_owed[k] = newcomer_owed[k].max(1.0);
                }
                while newcomer_owed[k] >= 1.0 {
                    newcomer_owed[k] -= 1.0;
                    sent[NEWCOMER] += 1;
                    if node.check(&identities[NEWCOMER], "GET /", 1).await.allowed {
                        admitted[NEWCOMER][window] += 1;
                    }
                }
            }
        }
        if let Some(sync_ms) = fleet.sync_ms {
            // Each node syncs every `sync_ms`, the nodes spread over it.
            for (k, node) in limiters.iter().enumerate() {
                let offset = (k as u64 * sync_ms / fleet.nodes as u64) / STEP_MS * STEP_MS;
                if t % sync_ms == offset % sync_ms {
                    node.sync_now().await;
                }
            }
        }
        t += STEP_MS;
        clock.0.store(START_MS + t, Ordering::Relaxed);
        server.clock.set_ms(START_MS + t);
    }
    let cpu_after = thread_cpu_ns();

    let metrics: Vec<_> = limiters.iter().map(Limiter::metrics).collect();
    let requests: u64 = sent.iter().map(|&n| n as u64).sum();
    let mut report = Report {
        requests,
        admitted: admitted.iter().flatten().map(|&n| n as u64).sum(),
        round_trips: metrics.iter().map(|m| m.syncs + m.server_checks).sum(),
        commands: metrics
            .iter()
            .map(|m| m.lease_calls + m.server_checks)
            .sum(),
        over_admitted: (f64::INFINITY, 0.0),
        burst: (sent[BURST] as u64, admitted[BURST][2] as u64),
        newcomer_admitted: admitted[NEWCOMER][2] as f64 / window_budget,
        cpu_ns_per_request: (
            (cpu_after.0 - cpu_before.0) as f64 / requests as f64,
            (cpu_after.1 - cpu_before.1) as f64 / requests as f64,
        ),
        tracked_limits: limiters.iter().map(Limiter::tracked_limits).sum(),
        ..Report::default()
    };
    for who in 0..senders {
        let share = |w: usize| admitted[who][w] as f64 / window_budget;
        report.most_admitted = (0..WINDOWS).map(share).fold(report.most_admitted, f64::max);
        if who < ZIPF {
            continue;
        }
        let k = who - ZIPF + 1;
        let demand = sends_in_window(k);
        if demand > window_budget * 1.02 {
            // Clearly over: it should get its whole limit in every window.
            report.over_limit_identities += 1;
            for w in 0..WINDOWS {
                let (low, high) = report.over_admitted;
                if share(w) < low {
                    report.least_admitted_at = (k, w);
                }
                report.over_admitted = (low.min(share(w)), high.max(share(w)));
            }
        } else if demand <= window_budget * 0.99 {
            report.light_identities += 1;
            report.light_requests += sent[who] as u64;
            report.light_denied += denied[who] as u64;
        }
    }
    report
}
