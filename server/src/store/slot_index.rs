//! The keys of each hash slot, kept per shard when cluster mode is on, so
//! that CLUSTER COUNTKEYSINSLOT / GETKEYSINSLOT (what `redis-cli --cluster
//! reshard` asks before every MIGRATE) and dropping a lost slot's keys
//! never scan the keyspace.
//!
//! Redis 7.0 threads a list through its dict entries (16 bytes a key).
//! Here a slot maps to the *hashes* of its keys (the hash the table is
//! built on, so the entries are found again with one probe each): about
//! 20 bytes a key, no copy of the key, and nothing at all when cluster
//! mode is off. Two keys of one slot may share a 64-bit hash; the count
//! keeps both.

use hashbrown::HashMap;

/// Key hashes by slot (one shard's keys).
#[derive(Debug, Default)]
pub struct SlotIndex {
    slots: HashMap<u16, HashMap<u64, u32>>,
    /// Bytes the maps hold, for INFO's used_memory.
    bytes: usize,
}

impl SlotIndex {
    /// What one indexed key costs, roughly: the (hash, count) pair with the
    /// table's control byte at its load factor.
    pub const BYTES_PER_KEY: usize = 20;

    /// Records a key (new in the table) under its slot.
    pub fn add(&mut self, slot: u16, hash: u64) {
        *self.slots.entry(slot).or_default().entry(hash).or_insert(0) += 1;
        self.bytes += Self::BYTES_PER_KEY;
    }

    /// Forgets a key that left the table.
    pub fn remove(&mut self, slot: u16, hash: u64) {
        let Some(hashes) = self.slots.get_mut(&slot) else {
            return;
        };
        if let Some(count) = hashes.get_mut(&hash) {
            *count -= 1;
            if *count == 0 {
                hashes.remove(&hash);
            }
            self.bytes -= Self::BYTES_PER_KEY;
        }
        if hashes.is_empty() {
            self.slots.remove(&slot);
        }
    }

    /// Keys recorded in `slot`.
    pub fn count(&self, slot: u16) -> usize {
        self.slots
            .get(&slot)
            .map_or(0, |hashes| hashes.values().map(|&n| n as usize).sum())
    }

    /// The distinct hashes of `slot`'s keys.
    pub fn hashes(&self, slot: u16) -> Vec<u64> {
        self.slots
            .get(&slot)
            .map(|hashes| hashes.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Forgets everything (FLUSHALL).
    pub fn clear(&mut self) {
        self.slots = HashMap::new();
        self.bytes = 0;
    }

    /// Approximate bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_adds_and_removes_including_shared_hashes() {
        let mut index = SlotIndex::default();
        index.add(7, 100);
        index.add(7, 100); // two keys, one hash
        index.add(7, 200);
        index.add(9, 300);
        assert_eq!(index.count(7), 3);
        assert_eq!(index.count(9), 1);
        let mut hashes = index.hashes(7);
        hashes.sort();
        assert_eq!(hashes, vec![100, 200]);
        index.remove(7, 100);
        assert_eq!(index.count(7), 2);
        assert_eq!(index.hashes(7).len(), 2);
        index.remove(7, 100);
        index.remove(7, 200);
        assert_eq!(index.count(7), 0);
        assert!(index.hashes(7).is_empty());
        // Removing what is not there changes nothing.
        index.remove(7, 100);
        assert_eq!(index.count(9), 1);
        assert_eq!(index.bytes(), SlotIndex::BYTES_PER_KEY);
    }
}
