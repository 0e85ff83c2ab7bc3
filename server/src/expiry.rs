//! Active expiry: a background task that walks every shard a slice at a time
//! and reclaims keys whose deadline passed, so memory stays flat even for keys
//! nobody reads again (most rate-limit counters are written for one window
//! and then never touched).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::state::Shared;

/// Each tick examines this fraction of every shard's buckets, so a full pass
/// over the keyspace takes `SLICES_PER_PASS / hz` seconds (one second at the
/// default hz of 10).
const SLICES_PER_PASS: usize = 10;

/// Never examine fewer buckets than this per shard and tick: tiny tables are
/// cheaper to finish than to slice.
const MIN_BUCKETS_PER_TICK: usize = 256;

/// One sweep over a slice of every shard; returns the number of keys reclaimed.
pub fn sweep_once(shared: &Shared) -> u64 {
    // A replica expires nothing itself: its master sends the DELs.
    if shared.store.feed().following() {
        return 0;
    }
    let now = shared.clock.now_ms();
    let mut reclaimed = 0;
    let mut expired = 0;
    for index in 0..shared.store.databases() {
        let db = shared.store.db(index);
        for shard_index in 0..db.shard_count() {
            let mut shard = db.lock_shard(shard_index);
            if shard.volatile_len() > 0 {
                let budget = (shard.num_buckets() / SLICES_PER_PASS).max(MIN_BUCKETS_PER_TICK);
                reclaimed += shard.sweep(now, budget).1 as u64;
            }
            expired += shard.take_expired_count();
        }
    }
    if expired > 0 {
        shared
            .stats
            .expired_keys
            .fetch_add(expired, Ordering::Relaxed);
        shared.store.feed().flush_replicas();
    }
    reclaimed
}

/// Runs [`sweep_once`] `hz` times a second until shutdown, except while
/// CLIENT PAUSE is in force. A sweep that
/// takes `latency-monitor-threshold` or longer is an `expire-cycle` event
/// of the latency monitor, as in Redis.
pub async fn run(shared: Arc<Shared>) {
    let mut stopping = shared.shutdown.subscribe();
    loop {
        let hz = shared.config.read().hz.max(1);
        let tick = Duration::from_millis(1000 / hz as u64);
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = stopping.wait_for(|&stop| stop) => return,
        }
        if shared.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        // CLIENT PAUSE keeps the dataset as it is, as Redis's active expiry
        // does: the keys are reclaimed once the pause ends.
        if shared.pause.current().is_some() {
            continue;
        }
        // Nothing expires while a file loads, as in Redis: a replayed
        // append-only file names keys whose expiry it records as a DEL.
        if shared.persistence.loading.load(Ordering::SeqCst) {
            continue;
        }
        let started = std::time::Instant::now();
        sweep_once(&shared);
        shared.tracking.flush_broadcasts();
        let took_ms = started.elapsed().as_millis() as u64;
        let threshold_ms = shared
            .stats
            .latency_monitor_threshold_ms
            .load(Ordering::Relaxed);
        if threshold_ms != 0 && took_ms >= threshold_ms {
            let now_s = shared.clock.now_ms() / 1000;
            shared
                .stats
                .latency_monitor
                .add("expire-cycle", took_ms, now_s);
        }
    }
}
