//! A point-in-time snapshot of one shard, taken while clients keep writing
//! (BGSAVE without fork), in the manner of Dragonfly's serialize-before-
//! write.
//!
//! Every shard is marked at the same instant (all shard locks held for the
//! moment it takes to set a flag). The background writer then walks each
//! shard's table a few buckets per hold of its lock, with a cursor: every
//! bucket before the cursor has been written. Until the writer is through,
//! the shard keeps one invariant: **a key at or after the cursor and not in
//! `done` still holds exactly its value of the snapshot's moment** (or is
//! absent, as it was). Whoever first changes such a key — a write, a
//! delete, an expiry — encodes its snapshot value into `early` before the
//! change and adds the key to `done`; a key created after the moment goes
//! into `done` with nothing encoded; a key behind the cursor was written
//! already and is left alone. Entries never move while a snapshot is open:
//! before a resize (and before a flush or SWAPDB) everything the writer has
//! not reached is encoded into `early` and the shard is sealed. When the
//! writer reaches the end, the shard's output is its chunks plus `early`,
//! and the state is dropped.
//!
//! The extra memory is `early` (values changed before the writer reached
//! them, each at most once) and `done` (those keys and keys created during
//! the save); both are counted in [`SnapshotMemory`] (INFO
//! `current_cow_size`, `rdb_last_cow_size`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hashbrown::HashSet;
use tally_rdb::Encodings;

use super::entry::Entry;

/// Bytes a `done` key costs beyond its contents (box, set slot), estimated.
const DONE_OVERHEAD: u64 = 32;

/// The extra memory all shards' snapshot states hold, and its peak.
#[derive(Debug, Default)]
pub struct SnapshotMemory {
    current: AtomicU64,
    peak: AtomicU64,
}

impl SnapshotMemory {
    fn add(&self, bytes: u64) {
        let now = self.current.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    fn sub(&self, bytes: u64) {
        self.current.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Bytes held now.
    pub fn current(&self) -> u64 {
        self.current.load(Ordering::Relaxed)
    }

    /// The most held at once since [`SnapshotMemory::reset_peak`].
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// Starts measuring a new snapshot's peak.
    pub fn reset_peak(&self) {
        self.peak.store(self.current(), Ordering::Relaxed);
    }
}

/// One shard's part of a snapshot in progress.
pub struct ShardSnapshot {
    /// The snapshot's moment: keys expired by then are not in it.
    at_ms: u64,
    /// Keys already encoded, or created after the moment.
    done: HashSet<Box<[u8]>>,
    /// Snapshot values encoded by the writers that changed them first.
    early: Vec<u8>,
    encodings: Encodings,
    /// The background writer's next bucket: every bucket before it was
    /// written (entries do not move while a snapshot is open: a resize
    /// seals it first).
    pub(super) cursor: usize,
    memory: Arc<SnapshotMemory>,
    /// Bytes of `done` and `early` counted in `memory`.
    counted: u64,
    /// Everything of the snapshot's moment is in `early` (a flush or a
    /// SWAPDB came first): the table now holds nothing of it.
    pub(super) sealed: bool,
}

impl ShardSnapshot {
    pub(super) fn new(
        at_ms: u64,
        encodings: Encodings,
        memory: Arc<SnapshotMemory>,
    ) -> ShardSnapshot {
        ShardSnapshot {
            at_ms,
            done: HashSet::new(),
            early: Vec::new(),
            encodings,
            cursor: 0,
            memory,
            counted: 0,
            sealed: false,
        }
    }

    /// Copies `entry` out for the background writer (which encodes it once
    /// the shard's lock is released) unless a writer handled it already or
    /// it had expired at the snapshot's moment. The writer's cursor then
    /// moves past its bucket: no mark is needed.
    pub(super) fn collect(&self, entry: &Entry, out: &mut Vec<tally_rdb::Entry>) {
        if self.done.contains(entry.key()) || entry.is_expired(self.at_ms) {
            return;
        }
        out.push(tally_rdb::Entry {
            db: 0,
            key: entry.key().to_vec(),
            value: super::rdb_value::to_rdb(entry.value()),
            expire_at_ms: (entry.expire_at() != 0).then(|| entry.expire_at()),
        });
    }

    /// Encodes `entry` into `out` if it belongs to the snapshot and was not
    /// handled yet, and marks its key handled.
    fn take(&mut self, entry: &Entry, out: &mut Vec<u8>) {
        if self.done.contains(entry.key()) {
            return;
        }
        if !entry.is_expired(self.at_ms) {
            let expire = (entry.expire_at() != 0).then(|| entry.expire_at());
            tally_rdb::encode_entry(
                out,
                entry.key(),
                &super::rdb_value::to_rdb(entry.value()),
                expire,
                &self.encodings,
            );
        }
        self.mark(entry.key());
    }

    /// A writer is about to change `entry`, in bucket `index` (None: the
    /// key does not exist): unless the background writer has passed that
    /// bucket, the snapshot value goes to `early` first, and the key is
    /// marked handled (a key created now is marked so the writer skips it).
    pub(super) fn preserve(&mut self, key: &[u8], entry: Option<&Entry>, index: Option<usize>) {
        if self.sealed || index.is_some_and(|i| i < self.cursor) || self.done.contains(key) {
            return;
        }
        let before = self.early.len();
        match entry {
            Some(entry) => {
                let mut early = std::mem::take(&mut self.early);
                self.take(entry, &mut early);
                self.early = early;
            }
            None => self.mark(key),
        }
        let grown = (self.early.len() - before) as u64;
        self.counted += grown;
        self.memory.add(grown);
    }

    fn mark(&mut self, key: &[u8]) {
        if self.done.insert(key.into()) {
            let bytes = key.len() as u64 + DONE_OVERHEAD;
            self.counted += bytes;
            self.memory.add(bytes);
        }
    }

    /// The writers' encoded entries, once the background writer is done
    /// with the shard.
    pub(super) fn finish(mut self) -> Vec<u8> {
        std::mem::take(&mut self.early)
    }
}

impl Drop for ShardSnapshot {
    fn drop(&mut self) {
        self.memory.sub(self.counted);
    }
}
