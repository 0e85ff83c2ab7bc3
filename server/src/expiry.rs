//! Active expiry: a background task that walks every shard a slice at a time
//! and reclaims keys whose deadline passed, so memory stays flat even for keys
//! nobody reads again (most rate-limit counters are written for one window
//! and then never touched).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::state::Shared;

/// At most this fraction of every shard's buckets is examined per tick, so
/// while keys expire fast enough to keep the sweep going a full pass over
/// the keyspace takes `SLICES_PER_PASS / hz` seconds (one second at the
/// default hz of 10).
const SLICES_PER_PASS: usize = 10;

/// A shard is swept this many buckets at a time, its lock released between
/// batches. A tick always takes one batch per shard (all of a small table)
/// and goes on to the next only while the last was stale enough.
const BATCH_BUCKETS: usize = 256;

/// The sweep goes on while at least one in this many of the keys with a
/// deadline it met had expired: Redis's activeExpireCycle stops at the same
/// 10%. A keyspace where little expires is then sampled, not walked: every
/// key visited is a cache miss, and walking a million counters ten times a
/// second cost a tenth of a core while nothing expired.
const STALE_ONE_IN: usize = 10;

/// At most this many hashes with fields due are purged per shard per
/// tick (Redis caps its field expiry by fields per cycle likewise); the
/// rest wait for the next tick, or for someone to touch them.
const FIELD_HASHES_PER_TICK: usize = 1000;

/// What one sweep did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Keys with a deadline examined.
    pub examined: u64,
    /// Of those, the expired keys removed.
    pub reclaimed: u64,
}

/// One sweep over every shard: a batch of each, more while the batches
/// find enough expired keys, up to a slice.
pub fn sweep_once(shared: &Shared) -> Swept {
    let mut swept = Swept::default();
    // A replica expires nothing itself: its master sends the DELs.
    if shared.store.feed().following() {
        return swept;
    }
    let now = shared.clock.now_ms();
    let mut expired = 0;
    let mut expired_fields = 0;
    for index in 0..shared.store.databases() {
        let db = shared.store.db(index);
        for shard_index in 0..db.shard_count() {
            let mut budget = None;
            loop {
                let mut shard = db.lock_shard(shard_index);
                let (examined, removed) = if shard.volatile_len() > 0 {
                    shard.sweep(now, BATCH_BUCKETS)
                } else {
                    (0, 0)
                };
                if budget.is_none() {
                    shard.expire_fields(now, FIELD_HASHES_PER_TICK);
                }
                expired += shard.take_expired_count();
                expired_fields += shard.take_expired_fields_count();
                swept.examined += examined as u64;
                swept.reclaimed += removed as u64;
                let left = budget.get_or_insert_with(|| {
                    (shard.num_buckets() / SLICES_PER_PASS).max(BATCH_BUCKETS)
                });
                *left = left.saturating_sub(BATCH_BUCKETS);
                if *left == 0 || examined == 0 || removed * STALE_ONE_IN < examined {
                    break;
                }
            }
        }
    }
    if expired_fields > 0 {
        shared
            .stats
            .expired_subkeys
            .fetch_add(expired_fields, Ordering::Relaxed);
    }
    if expired > 0 || expired_fields > 0 {
        shared
            .stats
            .expired_keys
            .fetch_add(expired, Ordering::Relaxed);
        shared.store.feed().flush_replicas();
    }
    swept
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
        if shared.pause.current().is_some() || !shared.active_expire.load(Ordering::Relaxed) {
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
