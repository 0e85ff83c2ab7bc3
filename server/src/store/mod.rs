//! The keyspace: databases, shards, entries, expiry and memory accounting.
//!
//! A [`Store`] holds `databases` [`Db`]s; each database is split into a
//! power-of-two number of shards, each a `parking_lot::Mutex` around a
//! `hashbrown` table. A key's shard is chosen from its hash, computed once
//! outside any lock. A `parking_lot` mutex rather than a tokio one because a
//! shard lock is never held across an `.await`: command handlers are
//! synchronous and hold a lock for the few hundred nanoseconds of one command.
//!
//! Commands that touch several keys lock every shard involved in ascending
//! shard order (and, across databases, ascending database order), so two such
//! commands can never deadlock.

pub mod access_clock;
pub mod clock;
pub mod entry;
pub mod feed;
mod field_expiry;
pub mod held;
pub mod object;
pub mod rdb_value;
pub mod shard;
pub mod slab;
pub mod slot_index;
pub mod snapshot;
#[cfg(test)]
mod tests;

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicIsize, AtomicU64, Ordering};
use std::sync::Arc;

use hashbrown::DefaultHashBuilder;
use parking_lot::{Mutex, MutexGuard};

pub use clock::{Clock, ManualClock, SystemClock};
pub use entry::{Entry, ValueRef};
pub use held::{HeldShards, OneShard, ShardGuard, ShardLender};
pub use object::{Kind, Object};
pub use shard::{
    as_master_command, BucketHint, EntryMut, KeyRef, OwnedValue, ShardData, SCAN_EPOCH_MASK,
};

/// Waits for a shard somebody else holds. A shard is normally held for one
/// command, but a script holds its shards for its whole run; on a tokio
/// worker the wait hands the worker's other connections to another thread
/// first, so a long script can never leave the server without a thread to
/// answer SCRIPT KILL or BUSY.
#[cold]
fn wait_for(shard: &Mutex<ShardData>) -> MutexGuard<'_, ShardData> {
    // Almost always the holder is another worker inside one command: wait
    // briefly in place. Only a lock still held after that (a script's) is
    // worth moving the worker's other connections to another thread.
    if let Some(guard) = shard.try_lock_for(std::time::Duration::from_millis(1)) {
        return guard;
    }
    off_worker(|| shard.lock())
}

/// Runs `f`, which may take long, without holding up the tokio worker it is
/// called on: on a multi-threaded runtime the worker's other tasks move to
/// another thread first (`block_in_place`); elsewhere `f` just runs.
pub fn off_worker<R>(f: impl FnOnce() -> R) -> R {
    let on_multi_thread_worker = tokio::runtime::Handle::try_current()
        .map(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
        .unwrap_or(false);
    if on_multi_thread_worker {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// One database: a fixed set of shards.
pub struct Db {
    shards: Box<[Mutex<ShardData>]>,
    shard_mask: u64,
    /// Per shard: acquisitions that found the lock held and had to wait
    /// (the metrics endpoint's `tally_shard_lock_waits_total`).
    lock_waits: Box<[AtomicU64]>,
    /// Per shard: where its table lies, for prefetching without the lock.
    bucket_hints: Box<[Arc<BucketHint>]>,
}

/// Hears of every key a write modifies (set, deleted, expired, flushed
/// one by one), at the moment of the write and under its shard's lock, so
/// that nothing between the write and the news can be missed. CLIENT
/// TRACKING's invalidation table is one; the store knows it only as this.
pub trait KeyObserver: Send + Sync {
    /// Whether it listens at all: checked before every notification, so
    /// an idle observer costs the write path one call.
    fn active(&self) -> bool;
    /// `key` was modified.
    fn modified(&self, key: &[u8]);
    /// Which of the store's own key events ([`key_events`]) it hears now,
    /// read by a shard with one load before it raises one. The default
    /// hears none.
    fn key_events(&self) -> Arc<std::sync::atomic::AtomicU8> {
        Arc::default()
    }
    /// A key event of the store's own ([`key_events`]): `key` in database
    /// `db` expired, was created, or was looked up by a read and missing.
    fn key_event(&self, _event: u8, _db: usize, _key: &[u8], _now_ms: u64) {}
}

/// The key events only the store sees happen, as bits of
/// [`KeyObserver::key_events`] (keyspace notifications' `expired`, `new`
/// and `keymiss`).
pub mod key_events {
    /// A key's deadline passed and it was dropped (lazily or by the sweep).
    pub const EXPIRED: u8 = 1 << 0;
    /// A key was added where there was none (or only an expired one).
    pub const NEW: u8 = 1 << 1;
    /// A read looked a key up and found nothing.
    pub const MISSED: u8 = 1 << 2;
    /// Fields of a hash passed their deadline and were purged (`hexpired`).
    pub const FIELDS_EXPIRED: u8 = 1 << 3;
    /// ... and that took the hash's last field, and so the key (`del`).
    pub const EMPTIED_BY_FIELD_EXPIRY: u8 = 1 << 4;
}

/// An observer that hears nothing (a scratch shard's, a store's in tests).
pub struct NoObserver;

impl KeyObserver for NoObserver {
    fn active(&self) -> bool {
        false
    }

    fn modified(&self, _key: &[u8]) {}
}

/// Every database of the server.
pub struct Store {
    dbs: Box<[Db]>,
    hasher: DefaultHashBuilder,
    used_memory: Arc<AtomicIsize>,
    /// The change feed the append-only file is written from.
    feed: Arc<feed::Feed>,
}

impl Store {
    /// The change feed (see [`feed`]).
    pub fn feed(&self) -> &feed::Feed {
        &self.feed
    }

    /// A store of `databases` databases with `shards` shards each (rounded up to
    /// a power of two), whose shards tell `observer` of every modified key.
    pub fn new(databases: usize, shards: usize, observer: Arc<dyn KeyObserver>) -> Store {
        let shards = shards.max(1).next_power_of_two();
        let hasher = DefaultHashBuilder::default();
        let used_memory = Arc::new(AtomicIsize::new(0));
        let feed = Arc::new(feed::Feed::default());
        let dbs = (0..databases.max(1))
            .map(|db| {
                let data: Vec<ShardData> = (0..shards)
                    .map(|_| {
                        ShardData::new(
                            hasher.clone(),
                            used_memory.clone(),
                            observer.clone(),
                            feed.clone(),
                            db,
                        )
                    })
                    .collect();
                Db {
                    bucket_hints: data.iter().map(ShardData::bucket_hint).collect(),
                    shards: data.into_iter().map(Mutex::new).collect(),
                    shard_mask: shards as u64 - 1,
                    lock_waits: (0..shards).map(|_| AtomicU64::new(0)).collect(),
                }
            })
            .collect();
        Store {
            dbs,
            hasher,
            used_memory,
            feed,
        }
    }

    /// Hashes a key; the result picks the shard and the bucket.
    #[inline]
    pub fn key<'a>(&self, bytes: &'a [u8]) -> KeyRef<'a> {
        KeyRef {
            bytes,
            hash: self.hasher.hash_one(bytes),
        }
    }

    /// Keeps the keys of each hash slot from now on (cluster mode), the
    /// keys already held included.
    pub fn enable_slot_index(&self) {
        for db in &self.dbs {
            for shard in db.shards.iter() {
                shard.lock().enable_slot_index();
            }
        }
    }

    /// After a load that ran at time 0: every key it stored is stamped as
    /// used at `now_ms` (see [`ShardData::stamp_unused`]).
    pub fn stamp_loaded_keys(&self, now_ms: u64) {
        let clock = access_clock::clock_at(now_ms);
        for db in 0..self.databases() {
            let database = self.db(db);
            for index in 0..database.shard_count() {
                database.lock_shard(index).stamp_unused(clock);
            }
        }
    }

    /// Number of databases.
    pub fn databases(&self) -> usize {
        self.dbs.len()
    }

    /// Database `index` (callers validate the index against `databases()`).
    pub fn db(&self, index: usize) -> &Db {
        &self.dbs[index]
    }

    /// Bytes held by keys and tables across all databases.
    pub fn used_memory(&self) -> usize {
        self.used_memory.load(Ordering::Relaxed).max(0) as usize
    }

    /// Whether the keyspace has outgrown a core's cache, so that fetching
    /// keys' memory ahead of their lookups pays (see `shard::prefetch`).
    #[inline]
    pub fn outgrows_cache(&self) -> bool {
        self.used_memory() >= shard::CACHED_KEYSPACE
    }

    /// An empty shard outside the store, whose memory is not counted; a
    /// stand-in for a shard a script could not take (see [`HeldShards`]).
    pub fn scratch_shard(&self) -> ShardData {
        ShardData::new(
            self.hasher.clone(),
            Arc::new(AtomicIsize::new(0)),
            Arc::new(NoObserver),
            Arc::new(feed::Feed::default()),
            0,
        )
    }
}

impl Db {
    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The shard a key lives in.
    #[inline]
    pub fn shard_of(&self, key: KeyRef<'_>) -> usize {
        // The low bits pick the bucket inside the table and the top 7 bits are
        // hashbrown's tag, so the shard comes from the middle of the hash.
        ((key.hash >> 32) & self.shard_mask) as usize
    }

    /// Locks the shard holding `key`.
    #[inline]
    pub fn lock_for(&self, key: KeyRef<'_>) -> MutexGuard<'_, ShardData> {
        self.lock_shard(self.shard_of(key))
    }

    /// Locks shard `index`.
    #[inline]
    pub fn lock_shard(&self, index: usize) -> MutexGuard<'_, ShardData> {
        let shard = &self.shards[index];
        match shard.try_lock() {
            Some(guard) => guard,
            None => {
                self.lock_waits[index].fetch_add(1, Ordering::Relaxed);
                wait_for(shard)
            }
        }
    }

    /// How often locking shard `index` had to wait for another holder.
    pub fn lock_waits(&self, index: usize) -> u64 {
        self.lock_waits[index].load(Ordering::Relaxed)
    }

    /// Starts bringing in, without the lock, the table memory a lookup of
    /// `key` reads first (see `shard::prefetch`).
    #[inline]
    pub fn prefetch_buckets(&self, key: KeyRef<'_>) {
        self.bucket_hints[self.shard_of(key)].prefetch(key.hash);
    }

    /// Starts bringing in the entries a lookup of `key` will compare, if
    /// its shard is free: a prefetch never waits for a lock.
    #[inline]
    pub fn prefetch_entry(&self, key: KeyRef<'_>) {
        if let Some(shard) = self.shards[self.shard_of(key)].try_lock() {
            shard.prefetch_entry(key);
        }
    }

    /// Starts bringing in, without any lock, the table memory of every key
    /// of a batch: a pipeline's next commands, or a command that names
    /// several (see `shard::prefetch`), before their locks are taken.
    #[inline]
    pub fn prefetch_all_buckets(&self, keys: &[KeyRef<'_>]) {
        for key in keys {
            self.prefetch_buckets(*key);
        }
    }

    /// Locks shard `index` if nobody holds it.
    pub fn try_lock_shard(&self, index: usize) -> Option<MutexGuard<'_, ShardData>> {
        self.shards[index].try_lock()
    }
}

/// Several shards of one database locked together, in ascending order.
pub struct MultiLock<'a> {
    db: &'a Db,
    guards: Vec<(usize, ShardGuard<'a>)>,
}

impl<'a> MultiLock<'a> {
    /// Gathers already-locked shards (ascending, distinct) of `db`.
    pub fn new(db: &'a Db, guards: Vec<(usize, ShardGuard<'a>)>) -> MultiLock<'a> {
        MultiLock { db, guards }
    }

    /// The locked shard that holds `key` (which must have been locked).
    pub fn shard(&mut self, key: KeyRef<'_>) -> &mut ShardData {
        let index = self.db.shard_of(key);
        #[allow(clippy::expect_used)] // handlers lock every key they touch first
        let slot = self
            .guards
            .iter_mut()
            .find(|(i, _)| *i == index)
            .expect("key's shard was locked");
        &mut slot.1
    }

    /// Starts bringing in the entries of `keys` (each in a locked shard),
    /// so that a command touching several keys overlaps their cache
    /// misses instead of paying them one after the other under its locks.
    pub fn prefetch_entries(&mut self, keys: &[KeyRef<'_>]) {
        for key in keys {
            self.shard(*key).prefetch_entry(*key);
        }
    }

    /// Every locked shard, in ascending order.
    pub fn shards<'s>(&'s mut self) -> impl Iterator<Item = &'s mut ShardData> + use<'s, 'a> {
        self.guards.iter_mut().map(|(_, g)| &mut **g)
    }
}
