//! Hash field expiry in the shard (Redis 7.4's HEXPIRE family): fields past
//! their deadline are purged the moment anything looks at their hash, and a
//! queue of hints lets the active sweep find hashes nobody looks at.
//!
//! A purge is Redis's hashTypeExpire: every due field of the hash goes at
//! once, each as an `HDEL` in the change feed (a replica or a replay
//! expires nothing itself), with one `hexpired` event for the hash and
//! `del` when it took the last field, which takes the key.
//!
//! The queue holds (deadline, key) hints, and each hash remembers the
//! deadline of its live hint. A hint whose hash is gone, or remembers
//! another deadline, is stale and dropped when it comes up, so nothing has
//! to find and remove hints when keys are deleted, renamed or overwritten.
//! A hash is hinted again only when its earliest deadline moves earlier
//! than its hint; a later one is found when the hint comes up, and hinted
//! then. A limiter that pushes a field's deadline forward on every request
//! therefore adds nothing to the queue.

use std::cmp::Reverse;
use std::hash::BuildHasher;

use super::entry::Entry;
use super::object::{Hash, Object};
use super::shard::ShardData;

/// The hints of one shard, earliest first.
pub(crate) type FieldQueue = std::collections::BinaryHeap<Reverse<(u64, Box<[u8]>)>>;

/// The hash an entry holds, if it holds one.
fn hash_of(entry: &mut Entry) -> Option<&mut Hash> {
    match entry.object_mut()? {
        Object::Hash(hash) => Some(hash),
        _ => None,
    }
}

/// The earliest field deadline of the hash an entry holds.
pub(crate) fn earliest_field_deadline(entry: &Entry) -> Option<u64> {
    match entry.value() {
        super::ValueRef::Obj(Object::Hash(hash)) => hash.earliest_deadline(),
        _ => None,
    }
}

/// True when `hash`'s earliest deadline is earlier than the hint it has
/// (or it has none).
pub(crate) fn needs_hint(hash: &Hash) -> bool {
    let hinted = hash.hinted_deadline();
    hash.earliest_deadline()
        .is_some_and(|earliest| hinted == 0 || earliest < hinted)
}

/// Queues a hint for `hash` at `key` when [`needs_hint`].
pub(crate) fn hint(queue: &mut FieldQueue, key: &[u8], hash: &mut Hash) {
    if let (true, Some(earliest)) = (needs_hint(hash), hash.earliest_deadline()) {
        queue.push(Reverse((earliest, key.into())));
        hash.set_hinted_deadline(earliest);
    }
}

impl ShardData {
    /// Purges the due fields of the hash in bucket `index`. False when that
    /// took its last field, and so the key.
    pub(super) fn purge_fields(&mut self, index: usize, now_ms: u64) -> bool {
        self.preserve_at(index);
        let Some(entry) = self.table.get_bucket_mut(index) else {
            return false;
        };
        let heap_before = entry.heap_size();
        let Some(hash) = hash_of(entry) else {
            return true;
        };
        let due = hash.expire_due(now_ms);
        let emptied = hash.is_empty();
        let delta = entry.heap_size() as isize - heap_before as isize;
        self.account(delta);
        if due.is_empty() {
            return true;
        }
        self.expired_fields_uncounted += due.len() as u64;
        if let Some(entry) = self.table.get_bucket(index) {
            self.observers
                .fields_expired(entry.key(), &due, emptied, now_ms);
        }
        if !emptied {
            return true;
        }
        if let Ok(occupied) = self.table.get_bucket_entry(index) {
            let (removed, _) = occupied.remove();
            self.unindex(removed.key());
            self.forget(removed);
        }
        false
    }

    /// The active sweep's part for fields: purges the hashes whose hint
    /// came up before `now_ms`, at most `max_hashes` of them. Returns the
    /// hints taken and the hashes that had fields purged.
    pub fn expire_fields(&mut self, now_ms: u64, max_hashes: usize) -> (usize, usize) {
        let mut taken = 0;
        let mut purged = 0;
        while taken < max_hashes {
            match self.field_queue.peek() {
                Some(Reverse((at, _))) if *at < now_ms => {}
                _ => break,
            }
            let Some(Reverse((at, key))) = self.field_queue.pop() else {
                break;
            };
            taken += 1;
            let hash = self.hasher.hash_one(&*key);
            let Some(index) = self.table.find_bucket_index(hash, |e| e.key() == &*key) else {
                continue;
            };
            let live = self
                .table
                .get_bucket_mut(index)
                .and_then(hash_of)
                .is_some_and(|hash| hash.hinted_deadline() == at);
            if !live {
                continue;
            }
            let expired = self
                .table
                .get_bucket(index)
                .and_then(earliest_field_deadline)
                .is_some_and(|e| e < now_ms);
            if expired {
                purged += 1;
                if !self.purge_fields(index, now_ms) {
                    continue;
                }
            }
            if let Some(entry) = self.table.get_bucket_mut(index) {
                if let Some(hash) = hash_of(entry) {
                    hash.set_hinted_deadline(0);
                    hint(&mut self.field_queue, &key, hash);
                }
            }
        }
        (taken, purged)
    }

    /// Hints waiting in the queue (live and stale).
    pub fn field_hints(&self) -> usize {
        self.field_queue.len()
    }
}
