//! Counters a gateway exports: decisions by outcome, sync round trips,
//! breaker openings. Plain atomics, read as a [`MetricsSnapshot`].

use std::sync::atomic::{AtomicU64, Ordering};

/// The limiter's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    allowed: AtomicU64,
    denied: AtomicU64,
    fail_open: AtomicU64,
    fail_closed: AtomicU64,
    server_checks: AtomicU64,
    syncs: AtomicU64,
    lease_calls: AtomicU64,
    sync_micros: AtomicU64,
    sync_failures: AtomicU64,
    breaker_opened: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MetricsSnapshot {
    /// Requests allowed (any source).
    pub allowed: u64,
    /// Requests denied (any source).
    pub denied: u64,
    /// Allowed because the server was unreachable (fail-open or hybrid).
    pub fail_open: u64,
    /// Denied because the server was unreachable (fail-closed or hybrid).
    pub fail_closed: u64,
    /// Decisions made from a local lease, without a round trip.
    pub local_decisions: u64,
    /// Checks that went to the server (exact mode, cached slow path).
    pub server_checks: u64,
    /// Sync round trips completed.
    pub syncs: u64,
    /// Lease-script calls sent in sync rounds (commands, where `syncs`
    /// counts round trips).
    pub lease_calls: u64,
    /// Total time spent in sync round trips, in microseconds.
    pub sync_micros: u64,
    /// Sync round trips that failed or timed out.
    pub sync_failures: u64,
    /// Times a breaker opened.
    pub breaker_opened: u64,
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Metrics {
    pub(crate) fn decision(&self, allowed: bool) {
        add(if allowed { &self.allowed } else { &self.denied }, 1);
    }
    pub(crate) fn fail_open(&self) {
        add(&self.fail_open, 1);
    }
    pub(crate) fn fail_closed(&self) {
        add(&self.fail_closed, 1);
    }
    pub(crate) fn server_check(&self) {
        add(&self.server_checks, 1);
    }
    pub(crate) fn sync(&self, micros: u64, calls: u64) {
        add(&self.syncs, 1);
        add(&self.lease_calls, calls);
        add(&self.sync_micros, micros);
    }
    pub(crate) fn sync_failure(&self) {
        add(&self.sync_failures, 1);
    }
    pub(crate) fn breaker_opened(&self) {
        add(&self.breaker_opened, 1);
    }

    /// The counters now, with the decisions made from the cache without
    /// the server, (allowed, denied): those are counted in the cache's
    /// shards, under the lock each decision takes anyway (a counter here
    /// would be a cache line every thread's decisions write).
    pub fn snapshot(&self, local: (u64, u64)) -> MetricsSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let (local_allowed, local_denied) = local;
        MetricsSnapshot {
            allowed: get(&self.allowed) + local_allowed,
            denied: get(&self.denied) + local_denied,
            fail_open: get(&self.fail_open),
            fail_closed: get(&self.fail_closed),
            local_decisions: local_allowed + local_denied,
            server_checks: get(&self.server_checks),
            syncs: get(&self.syncs),
            lease_calls: get(&self.lease_calls),
            sync_micros: get(&self.sync_micros),
            sync_failures: get(&self.sync_failures),
            breaker_opened: get(&self.breaker_opened),
        }
    }
}
