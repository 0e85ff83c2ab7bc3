//! Consumer groups (Redis 7.0's streamCG): where a group has read to, the
//! entries delivered to its consumers and not yet acknowledged (the
//! pending entries list, PEL), and its consumers.
//!
//! Redis keeps each pending entry once, shared between the group's PEL
//! and its owner's; here the group's map holds the entry and names its
//! owner, and each consumer keeps the set of IDs it owns, so that a
//! consumer's history (XREADGROUP with an ID, XPENDING for one consumer)
//! is read without a walk of the whole group's.

use std::collections::{BTreeMap, BTreeSet};

use super::StreamId;

/// The entries read counter when it is not known (SCG_INVALID_ENTRIES_READ).
pub const ENTRIES_READ_UNKNOWN: i64 = -1;

/// An entry delivered to a consumer and not acknowledged (streamNACK).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEntry {
    /// The consumer that has it.
    pub owner: Vec<u8>,
    /// When it was last delivered (unix ms).
    pub delivery_time: u64,
    /// How many times it was delivered.
    pub delivery_count: u64,
}

/// A consumer of a group (streamConsumer).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Consumer {
    /// When it last read or claimed, or was created (unix ms).
    pub seen_time: u64,
    /// When it last got an entry (Redis 7.2's files hold it; 7.0 does
    /// not keep it, and XINFO here does not show it).
    pub active_time: u64,
    /// The IDs of the pending entries it owns.
    pub pending: BTreeSet<StreamId>,
}

/// A consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroup {
    /// The last ID delivered to the group.
    pub last_id: StreamId,
    /// Entries the group has read ([`ENTRIES_READ_UNKNOWN`]: not known).
    pub entries_read: i64,
    /// Delivered and not acknowledged, by ID.
    pub pending: BTreeMap<StreamId, PendingEntry>,
    /// Consumers by name.
    pub consumers: BTreeMap<Vec<u8>, Consumer>,
}

/// Heap bytes a pending entry costs, estimated: two tree slots and the
/// owner's name (MEMORY USAGE and the memory counters).
const PENDING_BYTES: usize = 80;
/// Heap bytes a consumer costs besides its name, estimated.
const CONSUMER_BYTES: usize = 96;

impl ConsumerGroup {
    /// A group that has read to `last_id`.
    pub fn new(last_id: StreamId, entries_read: i64) -> ConsumerGroup {
        ConsumerGroup {
            last_id,
            entries_read,
            ..ConsumerGroup::default()
        }
    }

    /// The consumer `name`, its seen time set to `now`, made if it is not
    /// there (streamLookupConsumer, then streamCreateConsumer): whether
    /// it was made.
    pub fn touch_consumer(&mut self, name: &[u8], now: u64) -> bool {
        match self.consumers.get_mut(name) {
            Some(consumer) => {
                consumer.seen_time = now;
                false
            }
            None => {
                self.consumers.insert(
                    name.to_vec(),
                    Consumer {
                        seen_time: now,
                        ..Consumer::default()
                    },
                );
                true
            }
        }
    }

    /// Adds the consumer `name`, seen `now`, if it is not there
    /// (streamCreateConsumer): whether it was added.
    pub fn add_consumer(&mut self, name: &[u8], now: u64) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        self.touch_consumer(name, now)
    }

    /// Delivers `id` to `consumer` (which must exist) at `now`: a new
    /// pending entry, or one another consumer had, taken over with its
    /// count started again, as XREADGROUP does after XGROUP SETID moved
    /// the group back.
    pub fn deliver(&mut self, id: StreamId, consumer: &[u8], now: u64) {
        let entry = PendingEntry {
            owner: consumer.to_vec(),
            delivery_time: now,
            delivery_count: 1,
        };
        if let Some(previous) = self.pending.insert(id, entry) {
            if let Some(owner) = self.consumers.get_mut(&previous.owner) {
                owner.pending.remove(&id);
            }
        }
        if let Some(owner) = self.consumers.get_mut(consumer) {
            owner.pending.insert(id);
        }
    }

    /// Gives the pending entry `id` to `consumer` (which must exist), with
    /// its delivery time and count as `update` sets them (XCLAIM,
    /// XAUTOCLAIM). A missing entry is made when `force`. False when
    /// there was none to give.
    pub fn claim(
        &mut self,
        id: StreamId,
        consumer: &[u8],
        update: impl FnOnce(&mut PendingEntry),
    ) -> bool {
        let Some(entry) = self.pending.get_mut(&id) else {
            return false;
        };
        if entry.owner != consumer {
            if let Some(owner) = self.consumers.get_mut(&entry.owner) {
                owner.pending.remove(&id);
            }
            entry.owner = consumer.to_vec();
        }
        update(entry);
        if let Some(owner) = self.consumers.get_mut(consumer) {
            owner.pending.insert(id);
        }
        true
    }

    /// Removes the pending entry `id` from the group and its owner
    /// (XACK, or a claim of an entry no longer in the stream).
    pub fn remove_pending(&mut self, id: StreamId) -> Option<PendingEntry> {
        let entry = self.pending.remove(&id)?;
        if let Some(owner) = self.consumers.get_mut(&entry.owner) {
            owner.pending.remove(&id);
        }
        Some(entry)
    }

    /// Removes the consumer `name` and its pending entries
    /// (streamDelConsumer): how many it had, or `None` if there was none.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let consumer = self.consumers.remove(name)?;
        for id in &consumer.pending {
            self.pending.remove(id);
        }
        Some(consumer.pending.len())
    }

    /// Heap bytes held, estimated.
    pub fn heap_bytes(&self) -> usize {
        self.pending.len() * PENDING_BYTES
            + self
                .consumers
                .keys()
                .map(|name| name.len() + CONSUMER_BYTES)
                .sum::<usize>()
    }
}

impl super::Stream {
    /// Whether an entry from `start` on was deleted (streamRangeHasTombstones):
    /// the largest deleted ID lies at or past `start` and past the first
    /// live entry.
    fn has_tombstones_from(&self, start: StreamId) -> bool {
        let max_deleted = self.max_deleted_entry_id();
        if self.is_empty() || max_deleted == StreamId::MIN || self.first_id() > max_deleted {
            return false;
        }
        start <= max_deleted
    }

    /// How many entries were ever added up to `id`, when the stream's
    /// counters can tell (streamEstimateDistanceFromFirstEverEntry).
    pub fn entries_up_to(&self, id: StreamId) -> Option<u64> {
        let added = self.entries_added();
        if added == 0 {
            return Some(0);
        }
        if self.is_empty() && id <= self.last_id() {
            return Some(added);
        }
        match id.cmp(&self.last_id()) {
            std::cmp::Ordering::Equal => return Some(added),
            std::cmp::Ordering::Greater => return None,
            std::cmp::Ordering::Less => {}
        }
        let max_deleted = self.max_deleted_entry_id();
        if max_deleted == StreamId::MIN || max_deleted < self.first_id() {
            match id.cmp(&self.first_id()) {
                std::cmp::Ordering::Less => return Some(added - self.len()),
                std::cmp::Ordering::Equal => return Some(added - self.len() + 1),
                std::cmp::Ordering::Greater => {}
            }
        }
        None
    }

    /// How many entries the group has yet to read, when that can be told
    /// (streamReplyWithCGLag).
    pub fn lag(&self, group: &ConsumerGroup) -> Option<i64> {
        let added = self.entries_added() as i64;
        if added == 0 {
            return Some(0);
        }
        if group.entries_read != ENTRIES_READ_UNKNOWN && !self.has_tombstones_from(group.last_id) {
            return Some(added - group.entries_read);
        }
        self.entries_up_to(group.last_id)
            .map(|read| added - read as i64)
    }

    /// Moves the group `name` past `id`, an entry just read for it, as
    /// streamReplyWithRange does for each entry it serves: the read
    /// counter counts on while it can be trusted, and is worked out again
    /// (or given up) when it cannot. True if the group's last ID moved.
    pub fn advance_group(&mut self, name: &[u8], id: StreamId) -> bool {
        let Some(group) = self.groups.get(name) else {
            return false;
        };
        if id <= group.last_id {
            return false;
        }
        let counting = group.entries_read != ENTRIES_READ_UNKNOWN && !self.has_tombstones_from(id);
        let estimate = (!counting && self.entries_added() != 0).then(|| {
            self.entries_up_to(id)
                .map_or(ENTRIES_READ_UNKNOWN, |n| n as i64)
        });
        let Some(group) = self.groups.get_mut(name) else {
            return false;
        };
        if counting {
            group.entries_read += 1;
        } else if let Some(estimate) = estimate {
            group.entries_read = estimate;
        }
        group.last_id = id;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pending entry is in its owner's set and every ID in a
    /// consumer's set is pending with that owner: the two views agree.
    fn assert_consistent(group: &ConsumerGroup) {
        for (id, entry) in &group.pending {
            let owner = group.consumers.get(&entry.owner);
            assert!(
                owner.is_some_and(|c| c.pending.contains(id)),
                "{id:?} pending for {:?}, who does not hold it",
                entry.owner
            );
        }
        for (name, consumer) in &group.consumers {
            for id in &consumer.pending {
                assert_eq!(
                    group.pending.get(id).map(|e| &e.owner),
                    Some(name),
                    "{id:?} held by {name:?}"
                );
            }
        }
    }

    #[test]
    fn deliveries_claims_acks_and_deletions_keep_both_views_in_step() {
        let mut group = ConsumerGroup::new(StreamId::MIN, ENTRIES_READ_UNKNOWN);
        let names: [&[u8]; 3] = [b"ann", b"bo", b"cy"];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for step in 0..5000u64 {
            let id = StreamId::new(next(40), 0);
            let name = names[next(3) as usize];
            match next(5) {
                0 | 1 => {
                    group.touch_consumer(name, step);
                    group.deliver(id, name, step);
                }
                2 => {
                    group.touch_consumer(name, step);
                    group.claim(id, name, |p| p.delivery_count += 1);
                }
                3 => {
                    group.remove_pending(id);
                }
                _ => {
                    if let Some(had) = group.delete_consumer(name) {
                        assert!(had <= 40);
                    }
                }
            }
            assert_consistent(&group);
        }
        assert!(!group.pending.is_empty(), "the walk left something pending");
    }

    #[test]
    fn a_delivery_of_an_entry_another_consumer_has_moves_it_and_starts_its_count_again() {
        let mut group = ConsumerGroup::new(StreamId::MIN, 0);
        let id = StreamId::new(1, 0);
        group.touch_consumer(b"a", 1);
        group.touch_consumer(b"b", 1);
        group.deliver(id, b"a", 5);
        group.claim(id, b"a", |p| p.delivery_count = 7);
        group.deliver(id, b"b", 9);
        let entry = &group.pending[&id];
        assert_eq!(entry.owner, b"b".to_vec());
        assert_eq!((entry.delivery_time, entry.delivery_count), (9, 1));
        assert!(group.consumers[&b"a".to_vec()].pending.is_empty());
        assert_consistent(&group);
    }
}
