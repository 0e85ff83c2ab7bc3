//! Consumer groups, as held between files: no command creates or reads
//! them yet, but a file's or a DUMP payload's survive, and XINFO shows
//! them.

use std::collections::BTreeMap;

use super::StreamId;

/// A consumer group, as held between files: no command uses it yet.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroup {
    /// The last ID delivered to the group.
    pub last_id: StreamId,
    /// Entries the group has read (-1: not known).
    pub entries_read: i64,
    /// Delivered and not acknowledged, by ID: owner, last delivery (unix
    /// ms), deliveries.
    pub pending: BTreeMap<StreamId, (Vec<u8>, u64, u64)>,
    /// Consumers by name: seen time, active time (unix ms).
    pub consumers: BTreeMap<Vec<u8>, (u64, u64)>,
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
        if group.entries_read != -1 && !self.has_tombstones_from(group.last_id) {
            return Some(added - group.entries_read);
        }
        self.entries_up_to(group.last_id)
            .map(|read| added - read as i64)
    }
}
