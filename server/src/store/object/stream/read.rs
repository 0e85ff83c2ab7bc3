//! Reading a stream: ranges of entries (copied out, or seen in place in
//! their nodes for a reply to be written from), single entries, and the
//! first or last ID.

use super::super::listpack::Element;
use super::node::{Node, Slot, FLAG_DELETED};
use super::{Stream, StreamEntry, StreamId};

/// One entry read in place, as [`Stream::visit_range`] meets it.
pub struct EntryView<'n, 'a> {
    node: &'n Node<'a>,
    slot: &'n Slot,
}

impl<'a> EntryView<'_, 'a> {
    /// The entry's ID.
    pub fn id(&self) -> StreamId {
        self.slot.id
    }

    /// How many fields it has.
    pub fn field_count(&self) -> usize {
        self.node.field_count(self.slot)
    }

    /// Each field and value, in order, as the node holds them.
    pub fn for_each_field(&self, visit: impl FnMut(Element<'a>, Element<'a>)) {
        self.node.for_each_field(self.slot, visit);
    }

    /// The entry copied out.
    pub fn read(&self) -> StreamEntry {
        self.node.read(self.slot)
    }
}

impl Stream {
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
        self.visit_range(start, end, rev, count, |entry| out.push(entry.read()));
        out
    }

    /// [`Stream::range`] without copying: `visit` sees each entry in
    /// place in its node, to read its fields straight into a reply.
    pub fn visit_range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        count: usize,
        mut visit: impl FnMut(&EntryView<'_, '_>),
    ) {
        if start > end {
            return;
        }
        let mut seen = 0;
        let mut take = |node: &Node<'_>, slot: &Slot| {
            visit(&EntryView { node, slot });
            seen += 1;
            count != 0 && seen >= count
        };
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
                let node = Node::open(*master, lp);
                for slot in node.forward() {
                    if slot.id > end {
                        return;
                    }
                    if slot.id >= start && slot.flags & FLAG_DELETED == 0 && take(&node, &slot) {
                        return;
                    }
                }
            }
        } else {
            for (master, lp) in self.nodes.range(..=end).rev() {
                let node = Node::open(*master, lp);
                for slot in node.backward() {
                    if slot.id < start {
                        return;
                    }
                    if slot.id <= end && slot.flags & FLAG_DELETED == 0 && take(&node, &slot) {
                        return;
                    }
                }
            }
        }
    }

    /// Whether the live entry `id` is in the stream (streamEntryExists),
    /// its fields left unread.
    pub fn contains(&self, id: StreamId) -> bool {
        let Some((&master, lp)) = self.nodes.range(..=id).next_back() else {
            return false;
        };
        Node::open(master, lp)
            .forward()
            .take_while(|slot| slot.id <= id)
            .any(|slot| slot.id == id && slot.flags & FLAG_DELETED == 0)
    }

    /// The live entries with the IDs `ids` (ascending), `None` for each
    /// that is not there: one walk of each node they fall in, where a
    /// lookup per ID would walk a node from its start for each (a
    /// consumer's pending entries are read back this way).
    pub fn entries_at(&self, ids: &[StreamId]) -> Vec<Option<StreamEntry>> {
        let mut out = Vec::with_capacity(ids.len());
        let mut at = 0;
        while at < ids.len() {
            let Some((&master, lp)) = self.nodes.range(..=ids[at]).next_back() else {
                out.push(None);
                at += 1;
                continue;
            };
            // The node holds the IDs below the next node's master.
            let next_master = self
                .nodes
                .range((
                    std::ops::Bound::Excluded(master),
                    std::ops::Bound::Unbounded,
                ))
                .next()
                .map(|(next, _)| *next);
            let node = Node::open(master, lp);
            let mut slots = node.forward().peekable();
            while at < ids.len() && next_master.is_none_or(|next| ids[at] < next) {
                let wanted = ids[at];
                while slots.next_if(|slot| slot.id < wanted).is_some() {}
                out.push(
                    slots
                        .peek()
                        .filter(|slot| slot.id == wanted && slot.flags & FLAG_DELETED == 0)
                        .map(|slot| node.read(slot)),
                );
                at += 1;
            }
        }
        out
    }

    /// The first (or last) entry's ID, deleted entries counted or not
    /// (streamGetEdgeID); 0-0 (or the largest ID) when there is none.
    pub fn edge_id(&self, first: bool, skip_deleted: bool) -> StreamId {
        let live = |slot: &Slot| !skip_deleted || slot.flags & FLAG_DELETED == 0;
        let found = if first {
            self.nodes
                .iter()
                .find_map(|(master, lp)| Node::open(*master, lp).forward().find(live).map(|s| s.id))
        } else {
            self.nodes.iter().rev().find_map(|(master, lp)| {
                Node::open(*master, lp).backward().find(live).map(|s| s.id)
            })
        };
        found.unwrap_or(if first { StreamId::MAX } else { StreamId::MIN })
    }
}
