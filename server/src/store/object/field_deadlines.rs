//! The deadlines of a hash's fields (Redis 7.4's hash field expiry).
//!
//! Only hashes that were given a field deadline carry this, boxed beside
//! their fields, so a hash without one pays a null pointer. It answers the
//! three questions expiry asks: a field's deadline (HTTL, a read), the
//! earliest of them (whether anything is due, and when to look again), and
//! which fields are due (the purge). A field's name is held twice, once per
//! index; hashes with deadlines are few and their fields short.

use std::collections::BTreeSet;

use hashbrown::{DefaultHashBuilder, HashMap};

use super::element_bytes;

/// Per-field cost beyond the two copies of its name: the map's slot and
/// deadline, the tree's share of a node.
const FIELD_OVERHEAD: usize = 48;

#[derive(Debug, Clone, Default)]
pub(super) struct FieldDeadlines {
    by_field: HashMap<Box<[u8]>, u64, DefaultHashBuilder>,
    by_deadline: BTreeSet<(u64, Box<[u8]>)>,
    /// The deadline the shard's expiry queue was last told to look at this
    /// hash (0: never); see `ShardData::expire_fields`.
    hinted: u64,
    bytes: usize,
}

impl FieldDeadlines {
    /// The deadline of `field`, if it has one.
    pub fn get(&self, field: &[u8]) -> Option<u64> {
        self.by_field.get(field).copied()
    }

    /// Gives `field` the deadline `at` (unix ms, not 0).
    pub fn set(&mut self, field: &[u8], at: u64) {
        match self.by_field.get_mut(field) {
            Some(old) => {
                self.by_deadline.remove(&(*old, field.into()));
                *old = at;
            }
            None => {
                self.by_field.insert(field.into(), at);
                self.bytes += 2 * element_bytes(field) + FIELD_OVERHEAD;
            }
        }
        self.by_deadline.insert((at, field.into()));
    }

    /// Takes `field`'s deadline away; the deadline it had.
    pub fn remove(&mut self, field: &[u8]) -> Option<u64> {
        let at = self.by_field.remove(field)?;
        self.by_deadline.remove(&(at, field.into()));
        self.bytes -= 2 * element_bytes(field) + FIELD_OVERHEAD;
        Some(at)
    }

    /// The earliest deadline, if any field has one.
    pub fn earliest(&self) -> Option<u64> {
        self.by_deadline.first().map(|(at, _)| *at)
    }

    /// The fields whose deadline is before `now_ms`, earliest first.
    pub fn due(&self, now_ms: u64) -> Vec<Box<[u8]>> {
        self.by_deadline
            .iter()
            .take_while(|(at, _)| *at < now_ms)
            .map(|(_, field)| field.clone())
            .collect()
    }

    /// Fields with a deadline.
    pub fn len(&self) -> usize {
        self.by_field.len()
    }

    pub fn hinted(&self) -> u64 {
        self.hinted
    }

    pub fn set_hinted(&mut self, at: u64) {
        self.hinted = at;
    }

    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<FieldDeadlines>() + self.bytes
    }
}
