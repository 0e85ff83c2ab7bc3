//! Walks over a shard's table: a slot's keys, the live entries, the
//! active expiry sweep, SCAN and RANDOMKEY.

use super::*;

impl ShardData {
    /// Keys in `slot` held here, expired ones not yet reclaimed included
    /// (as Redis's countKeysInSlot).
    pub fn count_in_slot(&self, slot: u16) -> usize {
        self.slot_index
            .as_ref()
            .map_or(0, |index| index.count(slot))
    }

    /// Up to `max` keys of `slot` held here, appended to `out`.
    pub fn keys_in_slot(&self, slot: u16, max: usize, out: &mut Vec<Vec<u8>>) {
        let Some(index) = &self.slot_index else {
            return;
        };
        for hash in index.hashes(slot) {
            for entry in self.table.iter_hash(hash) {
                if out.len() >= max {
                    return;
                }
                let key = entry.key();
                // The probe also meets entries of other hashes with the same tag.
                if key_slot(key) == slot && self.hasher.hash_one(key) == hash {
                    out.push(key.to_vec());
                }
            }
        }
    }

    /// Iterates over live entries (expired ones not yet swept are skipped).
    pub fn iter_live(&self, now_ms: u64) -> impl Iterator<Item = &Entry> {
        self.table.iter().filter(move |e| !e.is_expired(now_ms))
    }

    /// Examines up to `max_buckets` buckets from where the last sweep stopped and
    /// removes expired entries. Returns `(examined, removed)`: the entries
    /// with a deadline it met, and those of them it removed.
    pub fn sweep(&mut self, now_ms: u64, max_buckets: usize) -> (usize, usize) {
        let buckets = self.table.num_buckets();
        if buckets == 0 || self.volatile == 0 {
            return (0, 0);
        }
        let mut examined = 0;
        let mut removed = 0;
        let mut index = self.sweep_cursor % buckets;
        for _ in 0..max_buckets.min(buckets) {
            if let Ok(mut occupied) = self.table.get_bucket_entry(index) {
                if occupied.get().expire_at() != 0 {
                    examined += 1;
                }
                if occupied.get().is_expired(now_ms) {
                    if let Some(snapshot) = self.snapshot.as_deref_mut() {
                        snapshot.preserve(occupied.get_mut(), index);
                    }
                    let (gone, _) = occupied.remove();
                    touch(&self.observers, gone.key());
                    feed_expired(&self.observers, gone.key(), now_ms);
                    self.unindex(gone.key());
                    self.forget(gone);
                    self.expired_uncounted += 1;
                    removed += 1;
                }
            }
            index = (index + 1) % buckets;
        }
        self.sweep_cursor = index;
        (examined, removed)
    }

    /// One step of SCAN over this shard. `position` is the bucket to start at;
    /// `epoch` is the layout epoch the caller's cursor was issued under. Live
    /// entries accepted by `keep` are pushed to `out` until at least `count`
    /// buckets holding entries were visited. Returns the next bucket position
    /// (`None` when the shard is finished) and the current epoch.
    ///
    /// When the table's layout changed since the cursor was issued, entries may
    /// have moved to buckets already visited, so the shard restarts from bucket 0:
    /// elements may then be returned twice (Redis allows that) but never missed.
    /// Epochs are compared modulo [`SCAN_EPOCH_MASK`] + 1, as cursors carry them.
    pub fn scan(
        &self,
        position: usize,
        epoch: u32,
        count: usize,
        now_ms: u64,
        mut keep: impl FnMut(&Entry) -> bool,
        out: &mut Vec<Vec<u8>>,
    ) -> (Option<usize>, u32) {
        let mut index = if epoch & SCAN_EPOCH_MASK == self.layout_epoch & SCAN_EPOCH_MASK {
            position
        } else {
            0
        };
        let buckets = self.table.num_buckets();
        let mut visited = 0;
        while index < buckets && visited < count {
            if let Some(entry) = self.table.get_bucket(index) {
                visited += 1;
                if !entry.is_expired(now_ms) && keep(entry) {
                    out.push(entry.key().to_vec());
                }
            }
            index += 1;
        }
        let next = if index < buckets { Some(index) } else { None };
        (next, self.layout_epoch & SCAN_EPOCH_MASK)
    }

    /// Picks a pseudo-random live entry using `seed` to choose a start bucket.
    pub fn random_entry(&self, seed: usize, now_ms: u64) -> Option<&Entry> {
        let buckets = self.table.num_buckets();
        if buckets == 0 {
            return None;
        }
        let start = seed % buckets;
        (0..buckets)
            .map(|i| (start + i) % buckets)
            .filter_map(|i| self.table.get_bucket(i))
            .find(|e| !e.is_expired(now_ms))
    }
}
