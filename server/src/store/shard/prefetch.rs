//! Prefetching what a lookup will read, for the commands of a pipeline.
//!
//! Finding a key costs three dependent cache misses once the keyspace
//! outgrows the CPU's caches: the table's control bytes, then the bucket
//! holding the entry's handle, then the entry's block. For pipelined GETs
//! of random keys they were a third of the server's CPU. Each miss waits
//! for the one before, and one command at a time nothing overlaps them.
//! Knowing the next commands' keys, the connection asks for their memory
//! first, in two passes, so that the misses of a whole batch overlap:
//!
//! 1. [`BucketHint::prefetch`], without the shard's lock: the control
//!    group and the bucket where the key's probe starts, from the table's
//!    address and size that the shard publishes in its [`BucketHint`];
//! 2. [`ShardData::prefetch_entry`], under the lock (taken only if free,
//!    see `Db::prefetch_entry`): the probe, now in cache, finds the
//!    candidates' handles, and their blocks are asked for.
//!
//! The command then finds its key in cache. A prefetch is only a hint: an
//! address that is stale (the table grew since it was published) or
//! wrong costs a wasted load, never a fault or a wrong answer.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::util::prefetch_line;

/// Below this much keyspace (keys, values and tables: INFO's
/// used_memory) prefetching is skipped: the keyspace stays in a core's
/// own cache, and finding the keys twice would be pure cost. Measured on
/// GETs of random keys at -P 16: 20,000 keys (1.4 MB) gained nothing,
/// 50,000 (3.5 MB) gained 10% of the server's CPU, a million gained half.
pub const CACHED_KEYSPACE: usize = 2 << 20;

/// Where a shard's table lies, readable without the shard's lock.
///
/// hashbrown keeps its control bytes at the table's base and bucket `i`
/// at `base - (i + 1) * size_of::<Entry>()`, below them; a key's probe
/// starts at bucket `hash & (buckets - 1)`. The base is derived from an
/// occupied bucket's address (hashbrown does not expose it), and the test
/// below holds the layout to it.
#[derive(Debug, Default)]
pub struct BucketHint {
    /// The table's base (the control bytes' address); 0 while the table
    /// is empty, when there is nothing to prefetch.
    base: AtomicUsize,
    /// The table's bucket count minus one.
    bucket_mask: AtomicUsize,
}

impl BucketHint {
    /// Asks for the control group and the first bucket of `hash`'s probe.
    /// Lock-free: a shard that resizes meanwhile may pair a new base with
    /// an old mask, which only wastes the prefetch.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        let base = self.base.load(Ordering::Relaxed);
        if base == 0 {
            return;
        }
        let start = hash as usize & self.bucket_mask.load(Ordering::Relaxed);
        prefetch_line(base.wrapping_add(start));
        prefetch_line(bucket_address(base, start));
    }

    /// Publishes where `table` lies now: the shard calls it whenever the
    /// table is reallocated (grown, emptied, swapped).
    pub(super) fn publish(&self, table: &HashTable<Entry>) {
        let base = table
            .iter_buckets()
            .next()
            .and_then(|index| {
                let bucket = table.get_bucket(index)? as *const Entry as usize;
                Some(bucket + (index + 1) * std::mem::size_of::<Entry>())
            })
            .unwrap_or(0);
        self.bucket_mask
            .store(table.num_buckets().saturating_sub(1), Ordering::Relaxed);
        self.base.store(base, Ordering::Relaxed);
    }
}

/// The address of bucket `index` of a table based at `base`.
#[inline]
fn bucket_address(base: usize, index: usize) -> usize {
    base.wrapping_sub((index + 1) * std::mem::size_of::<Entry>())
}

impl ShardData {
    /// The hint this shard publishes its table's place in.
    pub fn bucket_hint(&self) -> Arc<BucketHint> {
        self.bucket_hint.clone()
    }

    /// Asks for the blocks of the entries a lookup of `key` will compare
    /// (those whose hash tag matches), without reading them.
    pub fn prefetch_entry(&self, key: KeyRef<'_>) {
        let _ = self.table.find_bucket_index(key.hash, |entry| {
            entry.prefetch();
            false
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> crate::store::Store {
        crate::store::Store::new(1, 1, Arc::new(crate::store::NoObserver))
    }

    /// The layout [`BucketHint`] assumes is hashbrown's: every occupied
    /// bucket lies where the published base says, through the table's
    /// growth. A hashbrown that lays buckets out otherwise fails here
    /// (the prefetches would then miss, slowing lookups, never breaking
    /// them).
    #[test]
    fn the_published_base_locates_every_bucket() {
        let store = store();
        let mut shard = store.scratch_shard();
        for round in 0..6 {
            for i in 0..(1000 << round) {
                let name = format!("key:{round}:{i}");
                let key = store.key(name.as_bytes());
                shard.set(key, ValueRef::Int(i), 0, 0);
            }
            let base = shard.bucket_hint.base.load(Ordering::Relaxed);
            let mask = shard.bucket_hint.bucket_mask.load(Ordering::Relaxed);
            assert_eq!(mask + 1, shard.table.num_buckets());
            for index in shard.table.iter_buckets() {
                let bucket = shard.table.get_bucket(index).unwrap() as *const Entry as usize;
                assert_eq!(bucket_address(base, index), bucket, "bucket {index}");
            }
        }
    }

    /// The hint follows the table: published when it is first allocated,
    /// again when it grew or was swapped, cleared when it was emptied.
    #[test]
    fn the_hint_follows_the_table_as_it_moves() {
        let store = store();
        let mut shard = store.scratch_shard();
        let published = |shard: &ShardData| {
            let hint = &shard.bucket_hint;
            (
                hint.base.load(Ordering::Relaxed),
                hint.bucket_mask.load(Ordering::Relaxed) + 1,
            )
        };
        assert_eq!(published(&shard).0, 0);
        shard.set(store.key(b"k"), ValueRef::Int(1), 0, 0);
        let first = published(&shard);
        assert_ne!(first.0, 0);
        assert_eq!(first.1, shard.table.num_buckets());
        for i in 0..10_000 {
            let name = format!("key:{i}");
            shard.set(store.key(name.as_bytes()), ValueRef::Int(i), 0, 0);
        }
        let grown = published(&shard);
        assert_eq!(grown.1, shard.table.num_buckets());
        assert_ne!(grown, first);
        let mut other = store.scratch_shard();
        other.swap_contents(&mut shard);
        assert_eq!(published(&other), grown);
        assert_eq!(published(&shard).0, 0);
        other.clear();
        assert_eq!(published(&other).0, 0);
    }
}
