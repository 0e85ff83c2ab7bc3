//! The hash table of a set, hash or sorted set past its small encoding,
//! as Redis's dict is: each element keeps its own allocation and the table
//! holds it directly, so a lookup reads the table's control bytes, the slot
//! and the element, and nothing between them.
//!
//! Random picks (SPOP, SRANDMEMBER, HRANDFIELD, ZRANDMEMBER) sample the
//! table's buckets, as Redis's dictGetRandomKey does, and HSCAN, SSCAN and
//! ZSCAN walk the buckets. Both rely on the table staying at least an
//! eighth full, which removal keeps by shrinking it, as Redis shrinks a
//! dict.

use hashbrown::hash_table::Entry;
use hashbrown::{DefaultHashBuilder, HashTable};
use std::hash::BuildHasher;

use crate::util::{random_choice, random_u64};

/// A table shrinks when fewer than one bucket in this many holds an element
/// (Redis's HASHTABLE_MIN_FILL), so that a random bucket holds one often
/// enough for sampling to be cheap.
const MIN_FILL: usize = 8;
/// Tables of at most this many buckets never shrink (Redis's DICT_HT_INITIAL_SIZE).
const MIN_SHRINK_BUCKETS: usize = 16;
/// Where a SCAN cursor carries the part of the table's layout epoch it was
/// issued under, above the bucket position. Cursors stay below 2^53: Lua
/// scripts and some clients read them as doubles.
const CURSOR_EPOCH_SHIFT: u32 = 40;
const CURSOR_EPOCH_MASK: u32 = 0xFF;
const CURSOR_POSITION_MASK: u64 = (1 << CURSOR_EPOCH_SHIFT) - 1;

/// An element of a table: found by its key bytes.
pub(super) trait Keyed {
    fn key(&self) -> &[u8];
}

/// A set's member.
impl Keyed for Box<[u8]> {
    fn key(&self) -> &[u8] {
        self
    }
}

/// A hash's field and its value, as its table keeps them.
pub(super) type OwnedPair = (Box<[u8]>, Box<[u8]>);

/// A hash's field and value.
impl Keyed for OwnedPair {
    fn key(&self) -> &[u8] {
        &self.0
    }
}

/// A sorted set's member and its score, as its table keeps them.
pub(super) type MemberScore = (Box<[u8]>, f64);

/// A sorted set's member and score.
impl Keyed for MemberScore {
    fn key(&self) -> &[u8] {
        &self.0
    }
}

/// Elements found by their keys; see the module docs.
#[derive(Debug, Clone)]
pub(super) struct ByteTable<T> {
    items: HashTable<T>,
    hasher: DefaultHashBuilder,
    /// Bumped whenever elements may move between buckets (the table grows,
    /// rehashes in place or shrinks), so that a SCAN cursor issued before
    /// can tell it is stale.
    layout_epoch: u32,
}

impl<T: Keyed> Default for ByteTable<T> {
    fn default() -> ByteTable<T> {
        ByteTable::with_capacity(0)
    }
}

impl<T: Keyed> ByteTable<T> {
    pub(super) fn with_capacity(capacity: usize) -> ByteTable<T> {
        ByteTable {
            items: HashTable::with_capacity(capacity),
            hasher: DefaultHashBuilder::default(),
            layout_epoch: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    pub(super) fn get(&self, key: &[u8]) -> Option<&T> {
        self.items.find(self.hash(key), |item| item.key() == key)
    }

    /// The element of `key`, to change anything but its key.
    pub(super) fn get_mut(&mut self, key: &[u8]) -> Option<&mut T> {
        let hash = self.hash(key);
        self.items.find_mut(hash, |item| item.key() == key)
    }

    /// The element of `key`, made by `make` (with that key) when there is
    /// none; true with it when it is new. One hash and one probe either way,
    /// and nothing is allocated for a key the table holds.
    pub(super) fn get_or_insert_with(
        &mut self,
        key: &[u8],
        make: impl FnOnce() -> T,
    ) -> (&mut T, bool) {
        let hash = self.hash(key);
        // A full table makes room before it looks (hashbrown's `entry`
        // reserves first), and the room moves elements.
        if self.items.len() == self.items.capacity() {
            self.layout_epoch = self.layout_epoch.wrapping_add(1);
        }
        let hasher = &self.hasher;
        match self.items.entry(
            hash,
            |item| item.key() == key,
            |item| hasher.hash_one(item.key()),
        ) {
            Entry::Occupied(found) => (found.into_mut(), false),
            Entry::Vacant(vacant) => (vacant.insert(make()).into_mut(), true),
        }
    }

    /// Removes and returns the element of `key`.
    pub(super) fn remove(&mut self, key: &[u8]) -> Option<T> {
        let hash = self.hash(key);
        let found = self.items.find_entry(hash, |item| item.key() == key).ok()?;
        let (item, _) = found.remove();
        self.shrink_if_sparse();
        Some(item)
    }

    fn shrink_if_sparse(&mut self) {
        let buckets = self.items.num_buckets();
        if buckets > MIN_SHRINK_BUCKETS && self.items.len() * MIN_FILL < buckets {
            let hasher = &self.hasher;
            self.items
                .shrink_to(self.items.len(), |item| hasher.hash_one(item.key()));
            self.layout_epoch = self.layout_epoch.wrapping_add(1);
        }
    }

    /// Every element, in bucket order.
    pub(super) fn iter(&self) -> hashbrown::hash_table::Iter<'_, T> {
        self.items.iter()
    }

    /// An element from a random bucket: every element is as likely.
    pub(super) fn random(&self) -> Option<&T> {
        if self.items.is_empty() {
            return None;
        }
        let buckets = self.items.num_buckets();
        loop {
            if let Some(item) = self.items.get_bucket(random_u64() as usize % buckets) {
                return Some(item);
            }
        }
    }

    /// Random elements as SRANDMEMBER's and HRANDFIELD's count asks: a
    /// negative count picks that many independently (repeats allowed); a
    /// count of at least the table's length gives every element; a smaller
    /// one, that many distinct.
    pub(super) fn random_items(&self, count: i64) -> Vec<&T> {
        if count < 0 {
            return (0..count.unsigned_abs())
                .filter_map(|_| self.random())
                .collect();
        }
        let count = count as usize;
        if count >= self.items.len() {
            return self.items.iter().collect();
        }
        if count * 3 > self.items.len() {
            // Many of the elements: a partial shuffle of them all.
            return random_choice(self.items.iter().collect(), count);
        }
        // Few of them: sample buckets until `count` distinct ones held one.
        let buckets = self.items.num_buckets();
        let mut taken = hashbrown::HashSet::with_capacity(count);
        let mut picks = Vec::with_capacity(count);
        while picks.len() < count {
            let bucket = random_u64() as usize % buckets;
            if let Some(item) = self.items.get_bucket(bucket) {
                if taken.insert(bucket) {
                    picks.push(item);
                }
            }
        }
        picks
    }

    /// One SCAN page from `cursor`: at most `count` elements (at least
    /// one), walking buckets in order, and the cursor after them (0 when
    /// done). A cursor issued before the table last reorganised starts
    /// again from the first bucket, so an element present throughout may
    /// come back twice but is never missed.
    pub(super) fn scan_page(&self, cursor: u64, count: usize) -> (u64, Vec<&T>) {
        let epoch = (cursor >> CURSOR_EPOCH_SHIFT) as u32 & CURSOR_EPOCH_MASK;
        let mut bucket = if epoch == self.layout_epoch & CURSOR_EPOCH_MASK {
            usize::try_from(cursor & CURSOR_POSITION_MASK).unwrap_or(usize::MAX)
        } else {
            0
        };
        let buckets = self.items.num_buckets();
        let mut page = Vec::new();
        while bucket < buckets && page.len() < count.max(1) {
            if let Some(item) = self.items.get_bucket(bucket) {
                page.push(item);
            }
            bucket += 1;
        }
        // Never 0 while buckets are left: at least one bucket was walked.
        let next = if bucket < buckets {
            u64::from(self.layout_epoch & CURSOR_EPOCH_MASK) << CURSOR_EPOCH_SHIFT | bucket as u64
        } else {
            0
        };
        (next, page)
    }

    #[cfg(test)]
    pub(super) fn shape(&self) -> (usize, u32) {
        (self.items.num_buckets(), self.layout_epoch)
    }
}
