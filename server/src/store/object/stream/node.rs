//! One node's listpack read as Redis's stream node layout: the master
//! entry (live and deleted counts, the field names of the entry that
//! opened the node, a zero), then each entry as its flags, its ID as a
//! difference from the node's master ID, its fields (or only its values,
//! when the names are the master's) and how many elements it spans.

use super::super::listpack::{Element, Listpack};
use super::{StreamEntry, StreamId};

/// The entry is deleted: kept in its node until the node goes.
pub(super) const FLAG_DELETED: i64 = 1;
/// The entry's field names are the master entry's, and are not repeated.
pub(super) const FLAG_SAME_FIELDS: i64 = 2;
/// Bytes a node costs beyond its listpack: the tree's slot and key.
const NODE_OVERHEAD: usize = 64;

/// Where an entry sits in its node.
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    pub(super) id: StreamId,
    /// The offset of its flags element.
    pub(super) flags_at: usize,
    pub(super) flags: i64,
    /// The offset of its last element (how many elements it spans).
    pub(super) spans_at: usize,
}

pub(super) fn node_bytes(lp: &Listpack) -> usize {
    NODE_OVERHEAD + lp.heap_bytes()
}

/// The master entry's live and deleted counts.
pub(super) fn counts(lp: &Listpack) -> (i64, i64) {
    let first = lp.first().unwrap_or(0);
    let live = lp.int_at(first);
    let deleted = lp.next(first).map_or(0, |at| lp.int_at(at));
    (live, deleted)
}

/// The offsets of the master entry's field names, and of the first
/// entry after the master; `None` if the master entry is malformed (an
/// RDB file's node: the live and deleted counts, the field count and the
/// zero terminator must be integers, and the names must be there).
fn master_layout(lp: &Listpack) -> Option<(Vec<usize>, Option<usize>)> {
    let live_at = lp.first()?;
    let deleted_at = lp.next(live_at)?;
    let count_at = lp.next(deleted_at)?;
    exact_int(lp, live_at)?;
    exact_int(lp, deleted_at)?;
    let count = usize::try_from(exact_int(lp, count_at)?).ok()?;
    // Each name is at least two bytes: a count past the node's size lies.
    if count > lp.size() {
        return None;
    }
    let mut offsets = Vec::with_capacity(count);
    let mut at = count_at;
    for _ in 0..count {
        at = lp.next(at)?;
        offsets.push(at);
    }
    let terminator = lp.next(at)?;
    if exact_int(lp, terminator)? != 0 {
        return None;
    }
    Some((offsets, lp.next(terminator)))
}

/// The integer element at `at`, if it is one (lpGetIntegerIfValid).
fn exact_int(lp: &Listpack, at: usize) -> Option<i64> {
    match lp.get(at) {
        Element::Int(value) => Some(value),
        Element::Str(text) => crate::number::parse_i64(text),
    }
}

/// Whether the master entry's field names are `pairs`' fields, in order
/// (Redis compares each name as lpGet reads it: an integer as its text).
pub(super) fn master_fields_match(lp: &Listpack, pairs: &[&[u8]]) -> bool {
    let Some(count_at) = lp.first().and_then(|a| lp.next(a)).and_then(|a| lp.next(a)) else {
        return false;
    };
    if lp.int_at(count_at) != (pairs.len() / 2) as i64 {
        return false;
    }
    let mut at = count_at;
    for field in pairs.iter().step_by(2) {
        let Some(next) = lp.next(at) else {
            return false;
        };
        at = next;
        let same = match lp.get(at) {
            // Stored as an integer only when it was one's canonical text.
            Element::Int(value) => crate::number::parse_i64(field) == Some(value),
            Element::Str(bytes) => bytes == *field,
        };
        if !same {
            return false;
        }
    }
    true
}

/// A node open for reading: its entries walked one at a time in either
/// direction, as Redis's stream iterator walks them (backwards by each
/// entry's span), without decoding more of the node than is read.
pub(super) struct Node<'a> {
    lp: &'a Listpack,
    master: StreamId,
    /// The first master field name, and how many there are.
    names_at: usize,
    names: i64,
    /// The first entry's flags.
    first_entry: Option<usize>,
}

impl<'a> Node<'a> {
    /// The node keyed by `master`.
    pub(super) fn open(master: StreamId, lp: &'a Listpack) -> Node<'a> {
        let count_at = lp.first().and_then(|a| lp.next(a)).and_then(|a| lp.next(a));
        let names = count_at.map_or(0, |at| lp.int_at(at).max(0));
        let mut at = count_at;
        for _ in 0..names {
            at = at.and_then(|a| lp.next(a));
        }
        // Past the names: the master's zero terminator, then the first entry.
        let first_entry = at.and_then(|a| lp.next(a)).and_then(|a| lp.next(a));
        Node {
            lp,
            master,
            names_at: count_at.and_then(|a| lp.next(a)).unwrap_or(0),
            names,
            first_entry,
        }
    }

    /// The entry whose flags are at `flags_at`.
    fn slot_at(&self, flags_at: usize) -> Option<Slot> {
        let lp = self.lp;
        let flags = lp.int_at(flags_at);
        let ms_at = lp.next(flags_at)?;
        let seq_at = lp.next(ms_at)?;
        let id = StreamId::new(
            self.master.ms.wrapping_add(lp.int_at(ms_at) as u64),
            self.master.seq.wrapping_add(lp.int_at(seq_at) as u64),
        );
        let elements = if flags & FLAG_SAME_FIELDS != 0 {
            self.names
        } else {
            1 + 2 * lp.int_at(lp.next(seq_at)?)
        };
        let mut cursor = seq_at;
        for _ in 0..elements {
            cursor = lp.next(cursor)?;
        }
        Some(Slot {
            id,
            flags_at,
            flags,
            spans_at: lp.next(cursor)?,
        })
    }

    /// The first entry, deleted or not.
    pub(super) fn first(&self) -> Option<Slot> {
        self.slot_at(self.first_entry?)
    }

    /// The last entry, deleted or not.
    pub(super) fn last(&self) -> Option<Slot> {
        self.first_entry?;
        self.back_from(self.lp.last()?)
    }

    /// The entry after `slot`.
    pub(super) fn after(&self, slot: &Slot) -> Option<Slot> {
        self.slot_at(self.lp.next(slot.spans_at)?)
    }

    /// The entry before `slot`.
    pub(super) fn before(&self, slot: &Slot) -> Option<Slot> {
        if Some(slot.flags_at) == self.first_entry {
            return None;
        }
        self.back_from(self.lp.prev(slot.flags_at)?)
    }

    /// The entry whose span element is at `spans_at`: that many elements
    /// back is its flags.
    fn back_from(&self, spans_at: usize) -> Option<Slot> {
        let mut at = spans_at;
        for _ in 0..self.lp.int_at(spans_at) {
            at = self.lp.prev(at)?;
        }
        self.slot_at(at)
    }

    /// Every entry, deleted ones included, in order.
    pub(super) fn forward(&self) -> impl Iterator<Item = Slot> + '_ {
        std::iter::successors(self.first(), |slot| self.after(slot))
    }

    /// Every entry, deleted ones included, last first.
    pub(super) fn backward(&self) -> impl Iterator<Item = Slot> + '_ {
        std::iter::successors(self.last(), |slot| self.before(slot))
    }

    /// The fields and values of the entry at `slot`.
    pub(super) fn read(&self, slot: &Slot) -> StreamEntry {
        let mut fields = Vec::with_capacity(self.field_count(slot));
        self.for_each_field(slot, |field, value| {
            fields.push((field.to_bytes(), value.to_bytes()));
        });
        StreamEntry {
            id: slot.id,
            fields,
        }
    }

    /// Where the entry at `slot` keeps its ID's sequence part.
    fn seq_at(&self, slot: &Slot) -> usize {
        self.lp
            .next(slot.flags_at)
            .and_then(|a| self.lp.next(a))
            .unwrap_or(slot.flags_at)
    }

    /// How many fields the entry at `slot` has.
    pub(super) fn field_count(&self, slot: &Slot) -> usize {
        if slot.flags & FLAG_SAME_FIELDS != 0 {
            return self.names.max(0) as usize;
        }
        self.lp
            .next(self.seq_at(slot))
            .map_or(0, |at| self.lp.int_at(at).max(0) as usize)
    }

    /// Each field and value of the entry at `slot`, in place: a field the
    /// master entry names is read from there.
    pub(super) fn for_each_field(
        &self,
        slot: &Slot,
        mut visit: impl FnMut(Element<'a>, Element<'a>),
    ) {
        let lp = self.lp;
        let seq_at = self.seq_at(slot);
        if slot.flags & FLAG_SAME_FIELDS != 0 {
            let (mut name, mut value) = (Some(self.names_at), lp.next(seq_at));
            for _ in 0..self.names {
                let (Some(n), Some(v)) = (name, value) else {
                    break;
                };
                visit(lp.get(n), lp.get(v));
                (name, value) = (lp.next(n), lp.next(v));
            }
        } else if let Some(numfields_at) = lp.next(seq_at) {
            let mut at = numfields_at;
            for _ in 0..lp.int_at(numfields_at) {
                let Some(field) = lp.next(at) else { break };
                let Some(value) = lp.next(field) else { break };
                visit(lp.get(field), lp.get(value));
                at = value;
            }
        }
    }
}

/// Every entry of a node, deleted ones included, in order.
pub(super) fn slots(master: StreamId, lp: &Listpack) -> Vec<Slot> {
    Node::open(master, lp).forward().collect()
}

/// Every entry of a node, or `None` if the node is not well formed.
pub(super) fn checked_slots(master: StreamId, lp: &Listpack) -> Option<Vec<Slot>> {
    let (names, mut at) = master_layout(lp)?;
    let master_fields = names.len() as i64;
    let mut out = Vec::new();
    while let Some(flags_at) = at {
        let flags = exact_int(lp, flags_at)?;
        let ms_at = lp.next(flags_at)?;
        let seq_at = lp.next(ms_at)?;
        let id = StreamId::new(
            master.ms.wrapping_add(exact_int(lp, ms_at)? as u64),
            master.seq.wrapping_add(exact_int(lp, seq_at)? as u64),
        );
        let elements = if flags & FLAG_SAME_FIELDS != 0 {
            master_fields
        } else {
            let numfields_at = lp.next(seq_at)?;
            let numfields = exact_int(lp, numfields_at)?;
            if !(0..=lp.size() as i64).contains(&numfields) {
                return None;
            }
            1 + 2 * numfields
        };
        let mut cursor = seq_at;
        for _ in 0..elements {
            cursor = lp.next(cursor)?;
        }
        let spans_at = lp.next(cursor)?;
        // The flags, the two halves of the ID, then the elements.
        if exact_int(lp, spans_at)? != 3 + elements {
            return None;
        }
        out.push(Slot {
            id,
            flags_at,
            flags,
            spans_at,
        });
        at = lp.next(spans_at);
    }
    Some(out)
}
