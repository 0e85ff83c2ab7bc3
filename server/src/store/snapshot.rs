//! A point-in-time snapshot of one shard, taken while clients keep writing
//! (BGSAVE without fork), in the manner of Dragonfly's serialize-before-
//! write.
//!
//! Every shard is marked at the same instant (all shard locks held for the
//! moment it takes to set a flag). The background writer then walks each
//! shard's table a few buckets per hold of its lock, with a cursor: every
//! bucket before the cursor has been written. Until the writer is through,
//! the shard keeps one invariant: **an entry at or after the cursor that is
//! not marked handled still holds exactly its value of the snapshot's
//! moment** (or is absent, as it was). Whoever first changes such an entry
//! — a write, a delete, an expiry — encodes its snapshot value into `early`
//! before the change and marks the entry handled; an entry put after the
//! moment is marked handled with nothing encoded; an entry behind the
//! cursor was written already and is left alone.
//!
//! The mark is a bit in the entry's own header ([`Entry::snapshot_handled`])
//! rather than the key's name in a set: a write during a save then costs a
//! flag, not a hash, an allocation and a copy of the key. Marks exist only
//! at or after the cursor of an open, unsealed snapshot: the writer clears
//! each one as it walks past, so when no snapshot is open no entry is
//! marked, and the next snapshot starts clean.
//!
//! Entries never move while a snapshot is open: before a resize (and
//! before a flush or SWAPDB) everything the writer has not reached is
//! encoded into `early`, its marks cleared, and the shard sealed. When the
//! writer reaches the end, the shard's output is its chunks plus `early`,
//! and the state is dropped.
//!
//! The extra memory is `early` (values changed before the writer reached
//! them, each at most once), counted in [`SnapshotMemory`] (INFO
//! `current_cow_size`, `rdb_last_cow_size`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hashbrown::HashTable;
use tally_rdb::Encodings;

use super::entry::{Entry, ValueRef};

/// Strings up to this length are encoded by the background writer while
/// it holds the shard's lock: below the length LZF is tried at, encoding
/// is a copy.
const ENCODE_IN_PLACE_MAX: usize = 20;

/// A string value of at most `max_len` bytes, as the file writer takes it.
fn string_value(value: ValueRef<'_>, max_len: usize) -> Option<tally_rdb::StringValue<'_>> {
    match value {
        ValueRef::Int(n) => Some(tally_rdb::StringValue::Int(n)),
        ValueRef::Str(bytes) if bytes.len() <= max_len => {
            Some(tally_rdb::StringValue::Bytes(bytes))
        }
        _ => None,
    }
}

/// What one step of the background writer did in a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// The snapshot's keys the step walked over and handed out.
    pub keys: usize,
    /// The shard is done: its writers' early entries were handed out too.
    pub finished: bool,
}

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
    /// Snapshot values encoded by the writers that changed them first.
    early: Vec<u8>,
    encodings: Encodings,
    /// The background writer's next bucket: every bucket before it was
    /// written (entries do not move while a snapshot is open: a resize
    /// seals it first).
    pub(super) cursor: usize,
    memory: Arc<SnapshotMemory>,
    /// Bytes of `early` counted in `memory`.
    counted: u64,
    /// Everything of the snapshot's moment is in `early` (a flush, a resize
    /// or a SWAPDB came first): the table holds nothing more of it, and no
    /// entry is marked.
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
            early: Vec::new(),
            encodings,
            cursor: 0,
            memory,
            counted: 0,
            sealed: false,
        }
    }

    /// The background writer passes `entry`: a handled entry loses its
    /// mark (the writer's cursor moves past its bucket, so none is needed);
    /// any other is copied out for the writer (which encodes it once the
    /// shard's lock is released) unless it had expired at the moment.
    /// A short string (a counter) is encoded on the spot, as cheap as a
    /// copy; a collection or a long string, whose encoding may compress,
    /// is copied out for the writer to encode once the shard's lock is
    /// released. True when the entry is one of the snapshot's keys.
    pub(super) fn collect(
        &self,
        entry: &mut Entry,
        out: &mut Vec<tally_rdb::Entry>,
        encoded: &mut Vec<u8>,
    ) -> bool {
        if entry.snapshot_handled() {
            entry.set_snapshot_handled(false);
            return false;
        }
        if entry.is_expired(self.at_ms) {
            return false;
        }
        if let Some(value) = string_value(entry.value(), ENCODE_IN_PLACE_MAX) {
            let expire = (entry.expire_at() != 0).then(|| entry.expire_at());
            tally_rdb::encode_string_entry(encoded, entry.key(), value, expire, &self.encodings);
            return true;
        }
        out.push(tally_rdb::Entry {
            db: 0,
            key: entry.key().to_vec(),
            value: super::rdb_value::to_rdb(entry.value()),
            expire_at_ms: (entry.expire_at() != 0).then(|| entry.expire_at()),
            // Redis writes idle times only under an LRU policy; tally runs
            // noeviction.
            idle_seconds: None,
        });
        true
    }

    /// A writer is about to change or remove `entry`, in bucket `index`:
    /// unless the background writer has passed that bucket or the entry is
    /// handled already, its snapshot value goes to `early` first and the
    /// entry is marked handled.
    pub(super) fn preserve(&mut self, entry: &mut Entry, index: usize) {
        if self.sealed || index < self.cursor || entry.snapshot_handled() {
            return;
        }
        self.encode_early(entry);
        entry.set_snapshot_handled(true);
    }

    /// `entry` was just put in bucket `index`: it is not the snapshot's
    /// (the key did not exist at the moment, or its value was preserved
    /// before this replaced it), so the writer must skip it.
    pub(super) fn mark_put(&self, entry: &mut Entry, index: usize) {
        if !self.sealed && index >= self.cursor {
            entry.set_snapshot_handled(true);
        }
    }

    /// Before entries move or go all at once (a resize, a flush, SWAPDB):
    /// every entry the writer has not reached is encoded into `early`
    /// unless handled, marks are cleared, and the shard is sealed.
    pub(super) fn seal(&mut self, table: &mut HashTable<Entry>) {
        if self.sealed {
            return;
        }
        for index in self.cursor..table.num_buckets() {
            if let Some(entry) = table.get_bucket_mut(index) {
                if entry.snapshot_handled() {
                    entry.set_snapshot_handled(false);
                } else {
                    self.encode_early(entry);
                }
            }
        }
        self.sealed = true;
    }

    /// The snapshot is abandoned: the marks the writer will no longer
    /// clear are cleared, so that the next snapshot starts clean.
    pub(super) fn abandon(&self, table: &mut HashTable<Entry>) {
        if self.sealed {
            return;
        }
        for index in self.cursor..table.num_buckets() {
            if let Some(entry) = table.get_bucket_mut(index) {
                entry.set_snapshot_handled(false);
            }
        }
    }

    /// Encodes `entry`'s snapshot value into `early`, unless it had expired
    /// at the moment.
    fn encode_early(&mut self, entry: &Entry) {
        if entry.is_expired(self.at_ms) {
            return;
        }
        let before = self.early.len();
        let expire = (entry.expire_at() != 0).then(|| entry.expire_at());
        match string_value(entry.value(), usize::MAX) {
            Some(value) => tally_rdb::encode_string_entry(
                &mut self.early,
                entry.key(),
                value,
                expire,
                &self.encodings,
            ),
            None => tally_rdb::encode_entry(
                &mut self.early,
                entry.key(),
                &super::rdb_value::to_rdb(entry.value()),
                expire,
                &self.encodings,
            ),
        }
        let grown = (self.early.len() - before) as u64;
        self.counted += grown;
        self.memory.add(grown);
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
