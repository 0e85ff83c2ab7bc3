//! A stream's entries, kept as Redis 7.0 keeps them (t_stream.c): nodes of
//! one listpack each, ordered by the ID of their first ("master") entry.
//!
//! A node begins with a master entry: the count of live entries, the count
//! of entries marked deleted, and the field names of the entry that opened
//! the node. Each entry after it is its flags, its ID as a difference from
//! the node's master ID, then either all its fields and values or, when its
//! field names are the master's (the common case: every event of a stream
//! has the same shape), only the values; and last how many elements it
//! spans, so that the node can be read backwards.
//!
//! Deleting an entry only marks it (its flags) unless it was the node's
//! last live one, which drops the node. Which node an entry goes to follows
//! `stream-node-max-bytes` and `stream-node-max-entries`; an approximate
//! trim removes whole nodes only. Keeping Redis's layout keeps the counts
//! those operations reply with Redis's, and a node goes into an RDB file as
//! it is.
//!
//! A stream also holds its consumer groups (`groups`): where each has
//! read to, and what it delivered and awaits acknowledgement for.

use std::collections::BTreeMap;

use super::listpack::Listpack;

mod groups;
mod id;
mod node;
mod rax;
mod read;

pub use groups::{Consumer, ConsumerGroup, PendingEntry, ENTRIES_READ_UNKNOWN};
pub use id::StreamId;
use node::{
    checked_slots, counts, master_fields_match, node_bytes, slots, Node, FLAG_DELETED,
    FLAG_SAME_FIELDS,
};
pub use read::EntryView;

/// The largest listpack a node may grow to whatever the configuration
/// (STREAM_LISTPACK_MAX_SIZE): a listpack's size is a u32.
pub const MAX_NODE_BYTES: usize = 1 << 30;
/// The node limits in force for an append (`stream-node-max-bytes`,
/// `stream-node-max-entries`); 0 means no limit of that kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLimits {
    /// `stream-node-max-bytes`.
    pub max_bytes: usize,
    /// `stream-node-max-entries`.
    pub max_entries: usize,
}

impl Default for NodeLimits {
    /// Redis 7.0's defaults.
    fn default() -> NodeLimits {
        NodeLimits {
            max_bytes: 4096,
            max_entries: 100,
        }
    }
}

/// Why an append was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendError {
    /// The ID is not above the stream's last ID (or none is left).
    NotGreater,
    /// The fields and values are too large for a node.
    TooLarge,
}

/// How a trim chooses what goes (XADD's and XTRIM's MAXLEN and MINID).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimTo {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Keep no entry below this ID.
    MinId(StreamId),
}

/// A trim as XADD and XTRIM ask for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trim {
    /// What is kept.
    pub to: TrimTo,
    /// `~`: remove whole nodes only.
    pub approx: bool,
    /// The most entries to remove (0: no limit).
    pub limit: u64,
}

/// One entry as read: its ID and its fields and values, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEntry {
    /// The entry's ID.
    pub id: StreamId,
    /// Its fields and values, in the order they were added.
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A stream value.
#[derive(Debug, Clone, Default)]
pub struct Stream {
    nodes: BTreeMap<StreamId, Listpack>,
    /// Live entries.
    length: u64,
    last_id: StreamId,
    /// The first live entry's ID (0-0 when empty).
    first_id: StreamId,
    /// The largest ID ever deleted (XDEL) or 0-0.
    max_deleted_entry_id: StreamId,
    /// Entries ever added.
    entries_added: u64,
    /// The nodes' bytes and their overhead, kept as they change.
    bytes: usize,
    /// Consumer groups by name.
    groups: BTreeMap<Vec<u8>, ConsumerGroup>,
}

impl Stream {
    /// Live entries (XLEN).
    pub fn len(&self) -> u64 {
        self.length
    }

    /// No live entry (the key stays: an empty stream is still a stream).
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The largest ID ever added, or set by XSETID.
    pub fn last_id(&self) -> StreamId {
        self.last_id
    }

    /// The first live entry's ID, 0-0 when there is none.
    pub fn first_id(&self) -> StreamId {
        self.first_id
    }

    /// The largest ID XDEL removed, 0-0 if none.
    pub fn max_deleted_entry_id(&self) -> StreamId {
        self.max_deleted_entry_id
    }

    /// Entries ever added, deleted ones included.
    pub fn entries_added(&self) -> u64 {
        self.entries_added
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.bytes
            + self
                .groups
                .iter()
                .map(|(name, group)| name.len() + group.heap_bytes())
                .sum::<usize>()
    }

    /// The nodes, by master ID: what an RDB file holds.
    pub fn nodes(&self) -> impl Iterator<Item = (StreamId, &Listpack)> {
        self.nodes.iter().map(|(id, lp)| (*id, lp))
    }

    /// The consumer groups, by name.
    pub fn groups(&self) -> &BTreeMap<Vec<u8>, ConsumerGroup> {
        &self.groups
    }

    /// The consumer group `name`.
    pub fn group(&self, name: &[u8]) -> Option<&ConsumerGroup> {
        self.groups.get(name)
    }

    /// The consumer group `name`, to change.
    pub fn group_mut(&mut self, name: &[u8]) -> Option<&mut ConsumerGroup> {
        self.groups.get_mut(name)
    }

    /// Adds the group `name` (streamCreateCG): false if there is one.
    pub fn create_group(&mut self, name: &[u8], group: ConsumerGroup) -> bool {
        if self.groups.contains_key(name) {
            return false;
        }
        self.groups.insert(name.to_vec(), group);
        true
    }

    /// Removes the group `name`: false if there was none.
    pub fn destroy_group(&mut self, name: &[u8]) -> bool {
        self.groups.remove(name).is_some()
    }

    /// Installs the consumer groups an RDB file held.
    pub fn set_groups(&mut self, groups: BTreeMap<Vec<u8>, ConsumerGroup>) {
        self.groups = groups;
    }

    /// How many nodes Redis's radix tree would use for them (XINFO's
    /// `radix-tree-nodes`).
    pub fn radix_tree_nodes(&self) -> usize {
        let keys: Vec<StreamId> = self.nodes.keys().copied().collect();
        rax::node_count(&keys)
    }

    /// How many nodes hold the entries (XINFO's `radix-tree-keys`).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// A stream from an RDB file's parts. The nodes must have been
    /// checked ([`Listpack::validate`] and [`Stream::node_is_sound`]).
    pub fn from_parts(
        nodes: Vec<(StreamId, Listpack)>,
        length: u64,
        last_id: StreamId,
        first_id: StreamId,
        max_deleted_entry_id: StreamId,
        entries_added: u64,
    ) -> Stream {
        let bytes = nodes.iter().map(|(_, lp)| node_bytes(lp)).sum();
        Stream {
            nodes: nodes.into_iter().collect(),
            length,
            last_id,
            first_id,
            max_deleted_entry_id,
            entries_added,
            bytes,
            groups: BTreeMap::new(),
        }
    }

    /// Sets the first live entry's ID (a Redis 6 file does not hold it).
    pub fn set_first_id(&mut self, first_id: StreamId) {
        self.first_id = first_id;
    }

    /// The live entries a node's master entry counts.
    pub fn live_in_node(lp: &Listpack) -> u64 {
        counts(lp).0.max(0) as u64
    }

    /// Sets the stream's last ID and counters, as XSETID does.
    pub fn set_id(
        &mut self,
        last_id: StreamId,
        entries_added: Option<u64>,
        max_deleted: Option<StreamId>,
    ) {
        self.last_id = last_id;
        if let Some(added) = entries_added {
            self.entries_added = added;
        }
        if let Some(max_deleted) = max_deleted {
            self.max_deleted_entry_id = max_deleted;
        }
    }

    /// The ID an append with this request would get: `id` with its
    /// sequence (`seq_given`), `id`'s milliseconds with the next free
    /// sequence, or the clock's next ID (`None`); refused as XADD refuses
    /// it when that is not above the last ID.
    pub fn next_id(
        &self,
        id: Option<StreamId>,
        seq_given: bool,
        now_ms: u64,
    ) -> Result<StreamId, AppendError> {
        let id = match id {
            Some(id) if seq_given => id,
            // `<ms>-*` on the last ID's millisecond: its next sequence,
            // never the next millisecond. Redis then fails without setting
            // errno, so XADD answers its other error.
            Some(id) if id.ms == self.last_id.ms => match self.last_id.seq {
                u64::MAX => return Err(AppendError::TooLarge),
                seq => StreamId::new(id.ms, seq + 1),
            },
            Some(id) => id,
            None if now_ms > self.last_id.ms => StreamId::new(now_ms, 0),
            None => self.last_id.next().ok_or(AppendError::NotGreater)?,
        };
        if id > self.last_id {
            Ok(id)
        } else {
            Err(AppendError::NotGreater)
        }
    }

    /// Appends an entry (streamAppendItem) with the ID [`Stream::next_id`]
    /// chose. `pairs` are the fields and values in turn.
    pub fn append(
        &mut self,
        id: StreamId,
        pairs: &[&[u8]],
        limits: NodeLimits,
    ) -> Result<StreamId, AppendError> {
        if id <= self.last_id {
            return Err(AppendError::NotGreater);
        }
        let fields_len: usize = pairs.iter().map(|p| p.len()).sum();
        if fields_len > MAX_NODE_BYTES {
            return Err(AppendError::TooLarge);
        }
        let numfields = (pairs.len() / 2) as i64;
        let mut tail = self.nodes.last_key_value().map(|(master, _)| *master);
        if let Some(master) = tail {
            let lp = &self.nodes[&master];
            let max_bytes = match limits.max_bytes {
                0 => MAX_NODE_BYTES,
                n => n.min(MAX_NODE_BYTES),
            };
            let full = if lp.size() + fields_len >= max_bytes {
                true
            } else if limits.max_entries != 0 {
                let (live, deleted) = counts(lp);
                live + deleted >= limits.max_entries as i64
            } else {
                false
            };
            if full {
                if let Some(lp) = self.nodes.get_mut(&master) {
                    self.bytes -= node_bytes(lp);
                    lp.shrink_to_fit();
                    self.bytes += node_bytes(lp);
                }
                tail = None;
            }
        }
        let mut flags = 0;
        let master = match tail {
            Some(master) => {
                let lp = self.nodes.get_mut(&master).ok_or(AppendError::TooLarge)?;
                self.bytes -= node_bytes(lp);
                let first = lp.first().unwrap_or(0);
                let live = lp.int_at(first);
                lp.replace_int(first, live + 1);
                if master_fields_match(lp, pairs) {
                    flags |= FLAG_SAME_FIELDS;
                }
                master
            }
            None => {
                let mut lp = Listpack::new();
                lp.push_int(1);
                lp.push_int(0);
                lp.push_int(numfields);
                for field in pairs.iter().step_by(2) {
                    lp.push(field);
                }
                lp.push_int(0);
                self.nodes.insert(id, lp);
                flags |= FLAG_SAME_FIELDS;
                id
            }
        };
        let Some(lp) = self.nodes.get_mut(&master) else {
            return Err(AppendError::TooLarge);
        };
        lp.push_int(flags);
        lp.push_int(id.ms.wrapping_sub(master.ms) as i64);
        lp.push_int(id.seq.wrapping_sub(master.seq) as i64);
        let same = flags & FLAG_SAME_FIELDS != 0;
        if !same {
            lp.push_int(numfields);
        }
        for pair in pairs.chunks(2) {
            if !same {
                lp.push(pair[0]);
            }
            lp.push(pair[1]);
        }
        let spans = if same {
            3 + numfields
        } else {
            3 + 2 * numfields + 1
        };
        lp.push_int(spans);
        self.bytes += node_bytes(lp);
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
        Ok(id)
    }

    /// Deletes the live entry `id` (streamDeleteItem): true if there was
    /// one. The stream's first ID and largest deleted ID are XDEL's to
    /// keep (see [`Stream::note_deleted`]).
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&master, _)) = self.nodes.range(..=id).next_back() else {
            return false;
        };
        let Some(lp) = self.nodes.get_mut(&master) else {
            return false;
        };
        let Some(slot) = slots(master, lp)
            .into_iter()
            .find(|s| s.id == id && s.flags & FLAG_DELETED == 0)
        else {
            return false;
        };
        self.bytes -= node_bytes(lp);
        lp.replace_int(slot.flags_at, slot.flags | FLAG_DELETED);
        let first = lp.first().unwrap_or(0);
        let live = lp.int_at(first);
        if live == 1 {
            self.nodes.remove(&master);
        } else {
            lp.replace_int(first, live - 1);
            let deleted_at = lp.next(first).unwrap_or(first);
            let deleted = lp.int_at(deleted_at);
            lp.replace_int(deleted_at, deleted + 1);
            self.bytes += node_bytes(lp);
        }
        self.length -= 1;
        true
    }

    /// XDEL's bookkeeping once its IDs are deleted: the largest deleted
    /// ID grows, and the first ID moves if the first entry went.
    pub fn note_deleted(&mut self, ids: &[StreamId]) {
        if ids.is_empty() {
            return;
        }
        let first_went = ids.contains(&self.first_id);
        if let Some(max) = ids.iter().max() {
            self.max_deleted_entry_id = self.max_deleted_entry_id.max(*max);
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if first_went {
            self.first_id = self.edge_id(true, true);
        }
    }

    /// Trims from the oldest end (streamTrim); returns how many entries
    /// went.
    pub fn trim(&mut self, trim: Trim) -> u64 {
        let mut deleted: u64 = 0;
        // Always the oldest node: one that goes makes the next the oldest,
        // and one that stays ends the trim.
        loop {
            if let TrimTo::MaxLen(maxlen) = trim.to {
                if self.length <= maxlen {
                    break;
                }
            }
            let Some(mut first) = self.nodes.first_entry() else {
                break;
            };
            let master = *first.key();
            let lp = first.get_mut();
            let (live, marked) = counts(lp);
            let entries = live as u64;
            if trim.limit != 0 && deleted + entries > trim.limit {
                break;
            }
            let remove_node = match trim.to {
                TrimTo::MaxLen(maxlen) => self.length - entries >= maxlen,
                TrimTo::MinId(min) => Node::open(master, lp).last().is_some_and(|s| s.id < min),
            };
            if remove_node {
                self.bytes -= node_bytes(lp);
                first.remove();
                self.length -= entries;
                deleted += entries;
                continue;
            }
            if trim.approx {
                break;
            }
            // Mark entries of this node deleted until the trim is met; a
            // node that held enough to meet it is the last one visited.
            self.bytes -= node_bytes(lp);
            let mut from_node = 0i64;
            for slot in slots(master, lp) {
                let stop = match trim.to {
                    TrimTo::MaxLen(maxlen) => self.length <= maxlen,
                    TrimTo::MinId(min) => slot.id >= min,
                };
                if stop {
                    break;
                }
                if slot.flags & FLAG_DELETED == 0 {
                    // Same size: the flags stay a one-byte integer.
                    lp.replace_int(slot.flags_at, slot.flags | FLAG_DELETED);
                    from_node += 1;
                    self.length -= 1;
                }
            }
            deleted += from_node as u64;
            let first = lp.first().unwrap_or(0);
            lp.replace_int(first, live - from_node);
            let deleted_at = lp.next(first).unwrap_or(first);
            lp.replace_int(deleted_at, marked + from_node);
            self.bytes += node_bytes(lp);
            break;
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if deleted != 0 {
            self.first_id = self.edge_id(true, true);
        }
        deleted
    }

    /// Checks that an RDB file's node decodes as a stream node whose
    /// entries lie between `master` and `last_id`, as Redis's deep
    /// integrity check does; the listpack must be sound already.
    pub fn node_is_sound(master: StreamId, lp: &Listpack, last_id: StreamId) -> bool {
        let Some(entries) = checked_slots(master, lp) else {
            return false;
        };
        let (live, deleted) = counts(lp);
        let dead = entries
            .iter()
            .filter(|s| s.flags & FLAG_DELETED != 0)
            .count() as i64;
        !entries.is_empty()
            && live + deleted == entries.len() as i64
            && deleted == dead
            && entries.windows(2).all(|w| w[0].id < w[1].id)
            && entries.first().is_some_and(|s| s.id >= master)
            && entries.last().is_some_and(|s| s.id <= last_id)
    }
}

#[cfg(test)]
mod tests;
