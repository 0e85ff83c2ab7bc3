//! A shard's part in a background snapshot: the moment marked, the
//! writer's steps, and the preservation of values before they change
//! (see [`crate::store::snapshot`]).

use super::*;

impl ShardData {
    /// Marks the snapshot's moment in this shard (BGSAVE, with every shard
    /// locked at once).
    pub fn begin_snapshot(
        &mut self,
        at_ms: u64,
        encodings: tally_rdb::Encodings,
        memory: Arc<SnapshotMemory>,
    ) {
        self.snapshot = Some(Box::new(ShardSnapshot::new(at_ms, encodings, memory)));
    }

    /// The background writer's step: the snapshot's keys in up to
    /// `max_buckets` more buckets, short strings encoded into `encoded`
    /// and the rest copied into `entries` (encoded by the caller once the
    /// lock is released); finished once the shard is done, with the
    /// writers' early entries, already encoded, appended to `encoded`.
    pub fn snapshot_step(
        &mut self,
        max_buckets: usize,
        entries: &mut Vec<tally_rdb::Entry>,
        encoded: &mut Vec<u8>,
    ) -> Step {
        let mut keys = 0;
        let Some(snapshot) = self.snapshot.as_deref_mut() else {
            return Step {
                keys,
                finished: true,
            };
        };
        if !snapshot.sealed {
            let buckets = self.table.num_buckets();
            let end = snapshot.cursor.saturating_add(max_buckets).min(buckets);
            // The blocks lie scattered through the slab: asked for all at
            // once, their cache misses overlap, and the lock is held for
            // about one of them rather than one per entry.
            for index in snapshot.cursor..end {
                if let Some(entry) = self.table.get_bucket(index) {
                    entry.prefetch();
                }
            }
            for index in snapshot.cursor..end {
                if let Some(entry) = self.table.get_bucket_mut(index) {
                    keys += snapshot.collect(entry, entries, encoded) as usize;
                }
            }
            snapshot.cursor = end;
            if end < buckets {
                return Step {
                    keys,
                    finished: false,
                };
            }
        }
        if let Some(snapshot) = self.snapshot.take() {
            encoded.extend_from_slice(&snapshot.finish());
        }
        Step {
            keys,
            finished: true,
        }
    }

    /// Entries marked handled by a snapshot: none unless one is open.
    #[cfg(test)]
    pub(crate) fn snapshot_marks(&self) -> usize {
        self.table.iter().filter(|e| e.snapshot_handled()).count()
    }

    /// Drops this shard's part of a snapshot (a BGSAVE that ended early).
    pub fn cancel_snapshot(&mut self) {
        if let Some(snapshot) = self.snapshot.take() {
            snapshot.abandon(&mut self.table);
        }
    }

    /// Before the entry in bucket `index` changes or goes: its snapshot
    /// value is preserved (one branch when no snapshot is in progress).
    #[inline]
    pub(in crate::store) fn preserve_at(&mut self, index: usize) {
        if let Some(snapshot) = self.snapshot.as_deref_mut() {
            if let Some(entry) = self.table.get_bucket_mut(index) {
                snapshot.preserve(entry, index);
            }
        }
    }

    /// Before entries move or go all at once (a resize, a flush, SWAPDB):
    /// every snapshot value the background writer has not reached is
    /// preserved, and the shard sealed: the writer has nothing more to walk.
    pub(super) fn preserve_all(&mut self) {
        if let Some(snapshot) = self.snapshot.as_deref_mut() {
            snapshot.seal(&mut self.table);
        }
    }
}
