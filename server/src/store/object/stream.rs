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
//! Consumer groups are kept as data (an RDB file's or a DUMP payload's
//! survive a round trip); no command reads or changes them yet.

use std::collections::BTreeMap;

use super::listpack::{Element, Listpack};

/// The entry is deleted: kept in its node until the node goes.
const FLAG_DELETED: i64 = 1;
/// The entry's field names are the master entry's, and are not repeated.
const FLAG_SAME_FIELDS: i64 = 2;
/// The largest listpack a node may grow to whatever the configuration
/// (STREAM_LISTPACK_MAX_SIZE): a listpack's size is a u32.
pub const MAX_NODE_BYTES: usize = 1 << 30;
/// Bytes a node costs beyond its listpack: the tree's slot and key.
const NODE_OVERHEAD: usize = 64;

/// A stream entry ID: milliseconds, then a sequence within them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// Milliseconds (the unix time of an ID the server chose).
    pub ms: u64,
    /// The sequence within the millisecond.
    pub seq: u64,
}

impl StreamId {
    /// 0-0: below every entry (`-`).
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest ID (`+`).
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// The ID `<ms>-<seq>`.
    pub fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The ID just after this one (streamIncrID); `None` past the last.
    pub fn next(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (u64::MAX, u64::MAX) => None,
            (ms, u64::MAX) => Some(StreamId::new(ms + 1, 0)),
            (ms, seq) => Some(StreamId::new(ms, seq + 1)),
        }
    }

    /// The ID just before this one (streamDecrID); `None` before 0-0.
    pub fn prev(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (0, 0) => None,
            (ms, 0) => Some(StreamId::new(ms - 1, u64::MAX)),
            (ms, seq) => Some(StreamId::new(ms, seq - 1)),
        }
    }

    /// `<ms>-<seq>`, as replies and logs print an ID.
    pub fn to_bytes(self) -> Vec<u8> {
        format!("{}-{}", self.ms, self.seq).into_bytes()
    }

    /// The 16-byte big-endian form: the key of a node in Redis's radix
    /// tree, and in RDB files.
    pub fn encode(self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.ms.to_be_bytes());
        out[8..].copy_from_slice(&self.seq.to_be_bytes());
        out
    }

    /// The ID of a 16-byte big-endian form.
    pub fn decode(bytes: &[u8; 16]) -> StreamId {
        let mut ms = [0u8; 8];
        let mut seq = [0u8; 8];
        ms.copy_from_slice(&bytes[..8]);
        seq.copy_from_slice(&bytes[8..]);
        StreamId::new(u64::from_be_bytes(ms), u64::from_be_bytes(seq))
    }
}

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

/// Where an entry sits in its node.
#[derive(Debug, Clone, Copy)]
struct Slot {
    id: StreamId,
    /// The offset of its flags element.
    flags_at: usize,
    flags: i64,
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
    }

    /// The nodes, by master ID: what an RDB file holds.
    pub fn nodes(&self) -> impl Iterator<Item = (StreamId, &Listpack)> {
        self.nodes.iter().map(|(id, lp)| (*id, lp))
    }

    /// The consumer groups, by name.
    pub fn groups(&self) -> &BTreeMap<Vec<u8>, ConsumerGroup> {
        &self.groups
    }

    /// Installs the consumer groups an RDB file held.
    pub fn set_groups(&mut self, groups: BTreeMap<Vec<u8>, ConsumerGroup>) {
        self.groups = groups;
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
    /// sequence, or the clock's next ID (`None`). `None` when there is
    /// none above the last ID.
    pub fn next_id(&self, id: Option<StreamId>, seq_given: bool, now_ms: u64) -> Option<StreamId> {
        let id = match id {
            Some(id) if seq_given => id,
            Some(id) if id.ms == self.last_id.ms => self.last_id.next()?,
            Some(id) => id,
            None if now_ms > self.last_id.ms => StreamId::new(now_ms, 0),
            None => self.last_id.next()?,
        };
        (id > self.last_id).then_some(id)
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
                if master_fields(lp) == field_names(pairs) {
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

    /// The live entries from `start` to `end` inclusive, in order (or in
    /// reverse), at most `count` of them (0: all).
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        count: usize,
    ) -> Vec<StreamEntry> {
        let mut out = Vec::new();
        if start > end {
            return out;
        }
        let full = |out: &Vec<StreamEntry>| count != 0 && out.len() >= count;
        if !rev {
            let from = self
                .nodes
                .range(..=start)
                .next_back()
                .map_or(StreamId::MIN, |(master, _)| *master);
            for (master, lp) in self.nodes.range(from..) {
                if *master > end {
                    break;
                }
                for slot in slots(*master, lp) {
                    if slot.id > end {
                        return out;
                    }
                    if slot.id >= start && slot.flags & FLAG_DELETED == 0 {
                        out.push(read_entry(lp, &slot));
                        if full(&out) {
                            return out;
                        }
                    }
                }
            }
        } else {
            for (master, lp) in self.nodes.range(..=end).rev() {
                for slot in slots(*master, lp).iter().rev() {
                    if slot.id < start {
                        return out;
                    }
                    if slot.id <= end && slot.flags & FLAG_DELETED == 0 {
                        out.push(read_entry(lp, slot));
                        if full(&out) {
                            return out;
                        }
                    }
                }
            }
        }
        out
    }

    /// The first (or last) entry's ID, deleted entries counted or not
    /// (streamGetEdgeID); 0-0 (or the largest ID) when there is none.
    pub fn edge_id(&self, first: bool, skip_deleted: bool) -> StreamId {
        let live = |slot: &&Slot| !skip_deleted || slot.flags & FLAG_DELETED == 0;
        let found = if first {
            self.nodes
                .iter()
                .find_map(|(master, lp)| slots(*master, lp).iter().find(live).map(|s| s.id))
        } else {
            self.nodes
                .iter()
                .rev()
                .find_map(|(master, lp)| slots(*master, lp).iter().rev().find(live).map(|s| s.id))
        };
        found.unwrap_or(if first { StreamId::MAX } else { StreamId::MIN })
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
        let masters: Vec<StreamId> = self.nodes.keys().copied().collect();
        for master in masters {
            if let TrimTo::MaxLen(maxlen) = trim.to {
                if self.length <= maxlen {
                    break;
                }
            }
            let Some(lp) = self.nodes.get_mut(&master) else {
                break;
            };
            let (live, marked) = counts(lp);
            let entries = live as u64;
            if trim.limit != 0 && deleted + entries > trim.limit {
                break;
            }
            let remove_node = match trim.to {
                TrimTo::MaxLen(maxlen) => self.length - entries >= maxlen,
                TrimTo::MinId(min) => slots(master, lp).last().is_some_and(|s| s.id < min),
            };
            if remove_node {
                self.bytes -= node_bytes(lp);
                self.nodes.remove(&master);
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

fn node_bytes(lp: &Listpack) -> usize {
    NODE_OVERHEAD + lp.heap_bytes()
}

/// The master entry's live and deleted counts.
fn counts(lp: &Listpack) -> (i64, i64) {
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

/// The offsets of the master entry's field names, and of the first entry.
fn master_field_offsets(lp: &Listpack) -> (Vec<usize>, Option<usize>) {
    master_layout(lp).unwrap_or_default()
}

fn master_fields(lp: &Listpack) -> Vec<Vec<u8>> {
    master_field_offsets(lp)
        .0
        .into_iter()
        .map(|at| lp.get(at).to_bytes())
        .collect()
}

fn field_names(pairs: &[&[u8]]) -> Vec<Vec<u8>> {
    // The master keeps a name as lpAppend stored it; reading it back gives
    // the same bytes, so comparing the text is comparing the elements.
    pairs.iter().step_by(2).map(|f| f.to_vec()).collect()
}

/// Every entry of a node, deleted ones included, in order.
fn slots(master: StreamId, lp: &Listpack) -> Vec<Slot> {
    checked_slots(master, lp).unwrap_or_default()
}

/// Every entry of a node, or `None` if the node is not well formed.
fn checked_slots(master: StreamId, lp: &Listpack) -> Option<Vec<Slot>> {
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
        });
        at = lp.next(spans_at);
    }
    Some(out)
}

/// The fields and values of the entry at `slot`.
fn read_entry(lp: &Listpack, slot: &Slot) -> StreamEntry {
    let mut fields = Vec::new();
    let seq_at = lp
        .next(slot.flags_at)
        .and_then(|a| lp.next(a))
        .unwrap_or(slot.flags_at);
    if slot.flags & FLAG_SAME_FIELDS != 0 {
        let (names, _) = master_field_offsets(lp);
        let mut at = seq_at;
        for name in names {
            let Some(value) = lp.next(at) else { break };
            fields.push((lp.get(name).to_bytes(), lp.get(value).to_bytes()));
            at = value;
        }
    } else {
        let Some(numfields_at) = lp.next(seq_at) else {
            return StreamEntry {
                id: slot.id,
                fields,
            };
        };
        let mut at = numfields_at;
        for _ in 0..lp.int_at(numfields_at) {
            let (Some(field), Some(value)) = (lp.next(at), lp.next(at).and_then(|f| lp.next(f)))
            else {
                break;
            };
            fields.push((lp.get(field).to_bytes(), lp.get(value).to_bytes()));
            at = value;
        }
    }
    StreamEntry {
        id: slot.id,
        fields,
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
