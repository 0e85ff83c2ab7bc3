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

pub mod clock;
pub mod entry;
pub mod shard;
pub mod slab;

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

use hashbrown::DefaultHashBuilder;
use parking_lot::{Mutex, MutexGuard};

pub use clock::{Clock, ManualClock, SystemClock};
pub use entry::{Entry, ValueRef};
pub use shard::{EntryMut, KeyRef, ShardData};

/// One database: a fixed set of shards.
pub struct Db {
    shards: Box<[Mutex<ShardData>]>,
    shard_mask: u64,
}

/// Every database of the server.
pub struct Store {
    dbs: Box<[Db]>,
    hasher: DefaultHashBuilder,
    used_memory: Arc<AtomicIsize>,
}

impl Store {
    /// A store of `databases` databases with `shards` shards each (rounded up to
    /// a power of two).
    pub fn new(databases: usize, shards: usize) -> Store {
        let shards = shards.max(1).next_power_of_two();
        let hasher = DefaultHashBuilder::default();
        let used_memory = Arc::new(AtomicIsize::new(0));
        let dbs = (0..databases.max(1))
            .map(|_| Db {
                shards: (0..shards)
                    .map(|_| Mutex::new(ShardData::new(hasher.clone(), used_memory.clone())))
                    .collect(),
                shard_mask: shards as u64 - 1,
            })
            .collect();
        Store {
            dbs,
            hasher,
            used_memory,
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

    /// Swaps two databases atomically: both databases' shards are locked (in
    /// ascending database order) and their contents exchanged.
    pub fn swap_dbs(&self, a: usize, b: usize) {
        if a == b {
            return;
        }
        let (low, high) = (a.min(b), a.max(b));
        let mut low_guards: Vec<_> = self.dbs[low].shards.iter().map(|s| s.lock()).collect();
        let mut high_guards: Vec<_> = self.dbs[high].shards.iter().map(|s| s.lock()).collect();
        for (x, y) in low_guards.iter_mut().zip(high_guards.iter_mut()) {
            x.swap_contents(y);
        }
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
        self.shards[self.shard_of(key)].lock()
    }

    /// Locks shard `index`.
    pub fn lock_shard(&self, index: usize) -> MutexGuard<'_, ShardData> {
        self.shards[index].lock()
    }

    /// Locks every shard the keys live in, in ascending order.
    pub fn lock_keys<'k>(&self, keys: &[KeyRef<'k>]) -> MultiLock<'_> {
        let mut wanted: Vec<usize> = keys.iter().map(|k| self.shard_of(*k)).collect();
        wanted.sort_unstable();
        wanted.dedup();
        MultiLock {
            db: self,
            guards: wanted
                .into_iter()
                .map(|i| (i, self.shards[i].lock()))
                .collect(),
        }
    }

    /// Locks every shard, in ascending order.
    pub fn lock_all(&self) -> MultiLock<'_> {
        MultiLock {
            db: self,
            guards: self
                .shards
                .iter()
                .enumerate()
                .map(|(i, s)| (i, s.lock()))
                .collect(),
        }
    }

    /// Number of keys (expired ones not yet reclaimed included, as in Redis).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    /// True when no shard holds a key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys with a deadline.
    pub fn volatile_len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().volatile_len()).sum()
    }
}

/// Several shards of one database locked together.
pub struct MultiLock<'a> {
    db: &'a Db,
    guards: Vec<(usize, MutexGuard<'a, ShardData>)>,
}

impl<'a> MultiLock<'a> {
    /// The locked shard that holds `key` (which must have been passed to `lock_keys`).
    pub fn shard(&mut self, key: KeyRef<'_>) -> &mut ShardData {
        let index = self.db.shard_of(key);
        let slot = self
            .guards
            .iter_mut()
            .find(|(i, _)| *i == index)
            .expect("key's shard was locked");
        &mut slot.1
    }

    /// Every locked shard, in ascending order.
    pub fn shards<'s>(&'s mut self) -> impl Iterator<Item = &'s mut ShardData> + use<'s, 'a> {
        self.guards.iter_mut().map(|(_, g)| &mut **g)
    }
}
