//! Server statistics: the counters INFO reports, the per-second rates
//! (instantaneous_*), the error table (errorstats) and the latency
//! measurements.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::latency::{CommandLatencies, LatencyMonitor};

/// Per-command statistics (INFO commandstats).
#[derive(Default)]
pub struct CommandStats {
    /// Completed calls.
    pub calls: AtomicU64,
    /// Microseconds spent in the handler.
    pub usec: AtomicU64,
    /// Calls refused before running (arity, auth, OOM).
    pub rejected_calls: AtomicU64,
    /// Calls that ran and replied with an error.
    pub failed_calls: AtomicU64,
}

/// Most distinct error codes INFO errorstats tracks.
pub const ERRORSTATS_MAX_CODES: usize = 128;

/// Server statistics (INFO stats).
pub struct Stats {
    /// Connections accepted.
    pub connections_received: AtomicU64,
    /// Connections refused for maxclients.
    pub rejected_connections: AtomicU64,
    /// Commands executed.
    pub commands_processed: AtomicU64,
    /// Bytes read from clients.
    pub net_input_bytes: AtomicU64,
    /// Bytes written to clients.
    pub net_output_bytes: AtomicU64,
    /// Keys removed because their TTL passed.
    pub expired_keys: AtomicU64,
    /// Hash fields removed because their deadline passed (Redis 7.4's
    /// expired_subkeys).
    pub expired_subkeys: AtomicU64,
    /// Errors replied, by any command.
    pub total_error_replies: AtomicU64,
    /// Errors replied, by error code (INFO errorstats), in Redis's order.
    pub errorstats: Mutex<BTreeMap<Vec<u8>, u64>>,
    /// Reads from client sockets (INFO total_reads_processed).
    pub reads_processed: AtomicU64,
    /// Writes to client sockets (INFO total_writes_processed).
    pub writes_processed: AtomicU64,
    /// Largest input buffer any client held (INFO client_recent_max_input_buffer).
    pub max_input_buffer: AtomicU64,
    /// Commands that panicked and were contained (INFO `tally_contained_panics`);
    /// any value but 0 is a bug to report.
    pub panics: AtomicU64,
    /// Full resynchronizations served to replicas (INFO `sync_full`).
    pub sync_full: AtomicU64,
    /// Replicas that continued from the backlog (INFO `sync_partial_ok`).
    pub sync_partial_ok: AtomicU64,
    /// Replicas that asked to continue and could not (`sync_partial_err`).
    pub sync_partial_err: AtomicU64,
    /// Per command, indexed like the command table.
    pub commands: Box<[CommandStats]>,
    /// Per-second rates (INFO instantaneous_*).
    pub instantaneous: Instantaneous,
    /// The most `used_memory` has been (INFO used_memory_peak).
    pub peak_memory: AtomicU64,
    /// `latency-tracking`: per-command histograms are kept.
    pub latency_tracking: AtomicBool,
    /// Per-command latency histograms.
    pub latencies: CommandLatencies,
    /// `latency-monitor-threshold` in ms (0: the monitor is off).
    pub latency_monitor_threshold_ms: AtomicU64,
    /// The latency monitor's events.
    pub latency_monitor: LatencyMonitor,
}

impl Stats {
    /// Statistics for a command table of `commands` rows.
    pub fn new(commands: usize) -> Stats {
        Stats {
            connections_received: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            sync_full: AtomicU64::new(0),
            sync_partial_ok: AtomicU64::new(0),
            sync_partial_err: AtomicU64::new(0),
            commands_processed: AtomicU64::new(0),
            net_input_bytes: AtomicU64::new(0),
            net_output_bytes: AtomicU64::new(0),
            expired_keys: AtomicU64::new(0),
            expired_subkeys: AtomicU64::new(0),
            total_error_replies: AtomicU64::new(0),
            errorstats: Mutex::new(BTreeMap::new()),
            reads_processed: AtomicU64::new(0),
            writes_processed: AtomicU64::new(0),
            max_input_buffer: AtomicU64::new(0),
            commands: (0..commands).map(|_| CommandStats::default()).collect(),
            instantaneous: Instantaneous::default(),
            peak_memory: AtomicU64::new(0),
            latency_tracking: AtomicBool::new(true),
            latencies: CommandLatencies::new(commands),
            latency_monitor_threshold_ms: AtomicU64::new(0),
            latency_monitor: LatencyMonitor::default(),
        }
    }

    /// Records `used` bytes of keyspace; returns the peak so far, `used`
    /// included (INFO used_memory_peak, MEMORY STATS peak.allocated).
    pub fn note_memory(&self, used: u64) -> u64 {
        self.peak_memory
            .fetch_max(used, Ordering::Relaxed)
            .max(used)
    }

    /// Adds one batch's error replies.
    pub fn add_errors(&self, errors: &mut ErrorCounts) {
        self.total_error_replies
            .fetch_add(std::mem::take(&mut errors.total), Ordering::Relaxed);
        let mut table = self.errorstats.lock();
        for (code, count) in errors.by_code.drain(..) {
            // Error codes come from clients too (a script's error_reply):
            // past this many, new codes are no longer tracked, as Redis 7.2
            // limits them; docs/compatibility.md.
            let tracked = table.len() < ERRORSTATS_MAX_CODES;
            match table.get_mut(&code) {
                Some(n) => *n += count,
                None if tracked => {
                    table.insert(code, count);
                }
                None => {}
            }
        }
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        for counter in [
            &self.connections_received,
            &self.rejected_connections,
            &self.commands_processed,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.expired_keys,
            &self.expired_subkeys,
            &self.total_error_replies,
            &self.reads_processed,
            &self.writes_processed,
            &self.sync_full,
            &self.sync_partial_ok,
            &self.sync_partial_err,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
        self.errorstats.lock().clear();
        self.latencies.reset();
        self.peak_memory.store(0, Ordering::Relaxed);
        for c in self.commands.iter() {
            c.calls.store(0, Ordering::Relaxed);
            c.usec.store(0, Ordering::Relaxed);
            c.rejected_calls.store(0, Ordering::Relaxed);
            c.failed_calls.store(0, Ordering::Relaxed);
        }
    }
}

/// Samples kept for each rate, as Redis's STATS_METRIC_SAMPLES.
const RATE_SAMPLES: usize = 16;

/// One rate: the last [`RATE_SAMPLES`] per-second rates between samples.
#[derive(Default)]
struct Rate {
    last_ms: u64,
    last_value: u64,
    samples: [u64; RATE_SAMPLES],
    next: usize,
}

impl Rate {
    /// Redis's trackInstantaneousMetric.
    fn track(&mut self, now_ms: u64, value: u64) {
        if self.last_ms != 0 {
            let elapsed = now_ms.saturating_sub(self.last_ms).max(1);
            let delta = value.saturating_sub(self.last_value);
            self.samples[self.next] = delta * 1000 / elapsed;
            self.next = (self.next + 1) % RATE_SAMPLES;
        }
        self.last_ms = now_ms;
        self.last_value = value;
    }

    /// Redis's getInstantaneousMetric: the mean of the samples.
    fn mean(&self) -> u64 {
        self.samples.iter().sum::<u64>() / RATE_SAMPLES as u64
    }
}

/// INFO's instantaneous_ops_per_sec, instantaneous_input_kbps and
/// instantaneous_output_kbps: rates sampled every 100 ms by the server's
/// cron and averaged over the last 16 samples, as Redis does.
#[derive(Default)]
pub struct Instantaneous {
    rates: Mutex<[Rate; 3]>,
}

impl Instantaneous {
    /// Takes one sample of each counter.
    pub fn sample(&self, stats: &Stats, now_ms: u64) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut rates = self.rates.lock();
        rates[0].track(now_ms, load(&stats.commands_processed));
        rates[1].track(now_ms, load(&stats.net_input_bytes));
        rates[2].track(now_ms, load(&stats.net_output_bytes));
    }

    /// Commands per second.
    pub fn ops_per_sec(&self) -> u64 {
        self.rates.lock()[0].mean()
    }

    /// Input and output in KiB per second.
    pub fn kbps(&self) -> (f64, f64) {
        let rates = self.rates.lock();
        (
            rates[1].mean() as f64 / 1024.0,
            rates[2].mean() as f64 / 1024.0,
        )
    }
}

/// How often the per-second rates are sampled, as Redis's serverCron does.
const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Samples the instantaneous rates and the memory peak every 100 ms until
/// shutdown.
pub async fn run_sampler(shared: std::sync::Arc<crate::state::Shared>) {
    let mut stopping = shared.shutdown.subscribe();
    let mut ticks = tokio::time::interval(SAMPLE_EVERY);
    let mut sampled: u64 = 0;
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stopping.wait_for(|&stop| stop) => return,
        }
        let stats = &shared.stats;
        // Rates are over real time, whatever clock the commands read.
        let now_ms = shared.started.elapsed().as_millis() as u64 + 1;
        stats.instantaneous.sample(stats, now_ms);
        stats.note_memory(shared.store.used_memory() as u64);
        // Changes made outside a connection's batch (expiries, MIGRATE's
        // deletions) reach the replicas within a tick.
        shared.store.feed().flush_replicas();
        // Idle clients are looked at once a second, on the server's clock
        // (the one `last_interaction_ms` is read from).
        sampled += 1;
        // Replicas hear from an idle master every
        // `repl-ping-replica-period` seconds, so they do not time it out;
        // not while a failover pauses writes, as in Redis: the PING would
        // move the offset the replica must reach.
        let (ping_period, ttl) = {
            let config = shared.config.read();
            (
                config.repl_ping_replica_period.max(1),
                config.repl_backlog_ttl,
            )
        };
        if sampled % (ping_period * 10) == 0
            && !shared
                .pause
                .paused_for(crate::pause::PausePurpose::Failover)
        {
            shared
                .store
                .feed()
                .replication_tick(shared.clock.now_ms(), ttl);
        }
        if sampled % 10 == 0 {
            shared.clients.release_idle_buffers(shared.clock.now_ms());
        }
    }
}

/// Error replies counted during one batch, by error code.
#[derive(Default)]
pub struct ErrorCounts {
    /// Every error reply.
    pub total: u64,
    /// (code, count); a short list, since a batch rarely fails in many ways.
    pub by_code: Vec<(Vec<u8>, u64)>,
}

impl ErrorCounts {
    /// Counts one error reply (its text without the leading `-`).
    pub fn count(&mut self, text: &[u8]) {
        let code = error_code(text);
        self.total += 1;
        match self.by_code.iter_mut().find(|(c, _)| c == code) {
            Some((_, n)) => *n += 1,
            None => self.by_code.push((code.to_vec(), 1)),
        }
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: ErrorCounts) {
        self.total += other.total;
        for (code, count) in other.by_code {
            match self.by_code.iter_mut().find(|(c, _)| *c == code) {
                Some((_, n)) => *n += count,
                None => self.by_code.push((code, count)),
            }
        }
    }
}

/// The error code INFO errorstats files an error under, as Redis's
/// afterErrorReply finds it: the first word when a space ends it within
/// the first 31 bytes, else `ERR`.
pub fn error_code(text: &[u8]) -> &[u8] {
    match text.iter().take(31).position(|&b| b == b' ') {
        Some(end) => &text[..end],
        None => b"ERR",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_average_the_last_sixteen_samples() {
        let mut rate = Rate::default();
        rate.track(1_000, 0);
        for i in 1..=16u64 {
            // 50 more every 100 ms: 500 per second.
            rate.track(1_000 + i * 100, i * 50);
        }
        assert_eq!(rate.mean(), 500);
        rate.track(1_000 + 17 * 100, 16 * 50);
        assert_eq!(rate.mean(), 500 * 15 / 16);
    }

    #[test]
    fn error_codes_are_capped() {
        let stats = Stats::new(1);
        let mut errors = ErrorCounts::default();
        for i in 0..ERRORSTATS_MAX_CODES + 5 {
            errors.count(format!("E{i} boom").as_bytes());
        }
        errors.count(b"E0 again");
        stats.add_errors(&mut errors);
        let table = stats.errorstats.lock();
        assert_eq!(table.len(), ERRORSTATS_MAX_CODES);
        assert_eq!(table.get(&b"E0"[..]), Some(&2));
        assert_eq!(
            stats.total_error_replies.load(Ordering::Relaxed),
            ERRORSTATS_MAX_CODES as u64 + 6
        );
    }
}
