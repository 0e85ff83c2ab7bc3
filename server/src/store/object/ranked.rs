//! A sorted set's members in (score, member) order with every rank at
//! hand: Redis's zskiplist, whose links carry spans (how many members each
//! link skips), so that the rank of a member, the member at a rank and the
//! number of members below a bound all cost O(log N), and a range is found
//! in O(log N) and then walked a member per step.
//!
//! Nodes live in one vector and link by index; a removed node's slot is
//! reused by the next insert. The vector keeps the largest size the set
//! has had until the set empties, which is the common shape of a sorted
//! set used as a sliding log: members arrive and leave at about the same
//! rate.

use std::cmp::Ordering;

/// Redis's ZSKIPLIST_MAXLEVEL: enough levels for 2^64 members at p = 1/4.
const MAX_LEVEL: usize = 32;
/// The end of a chain.
const NIL: u32 = u32::MAX;
/// The head, whose links are kept apart from the nodes.
const HEAD: u32 = u32::MAX - 1;

#[derive(Debug, Clone, Copy)]
struct Link {
    /// The next node at this level, or NIL.
    forward: u32,
    /// How many level-0 steps the link spans (to the end, for a NIL link).
    span: u32,
}

#[derive(Debug, Clone)]
struct Node {
    score: f64,
    member: Box<[u8]>,
    /// The previous node at level 0, or NIL for the first.
    backward: u32,
    links: Box<[Link]>,
}

/// Redis's order: by score (as `<` on doubles; NaN is never stored), then
/// by member bytes.
fn compare(score: f64, member: &[u8], other_score: f64, other_member: &[u8]) -> Ordering {
    score
        .partial_cmp(&other_score)
        .unwrap_or(Ordering::Equal)
        .then_with(|| member.cmp(other_member))
}

/// The ordered members of a sorted set, ranked.
#[derive(Debug, Clone)]
pub struct RankedOrder {
    nodes: Vec<Node>,
    /// Slots of `nodes` that removed members left, for reuse.
    free: Vec<u32>,
    /// The head's links, one per level in use (at least one).
    head: Vec<Link>,
    tail: u32,
    len: usize,
    /// Draws each new node's level (xorshift): which level a node gets
    /// does not depend on the members, so no input can shape the list.
    seed: u64,
}

impl Default for RankedOrder {
    fn default() -> RankedOrder {
        RankedOrder {
            nodes: Vec::new(),
            free: Vec::new(),
            head: vec![Link {
                forward: NIL,
                span: 0,
            }],
            tail: NIL,
            len: 0,
            seed: 0x9E37_79B9_7F4A_7C15,
        }
    }
}

impl RankedOrder {
    fn link(&self, at: u32, level: usize) -> Link {
        if at == HEAD {
            self.head[level]
        } else {
            self.nodes[at as usize].links[level]
        }
    }

    fn link_mut(&mut self, at: u32, level: usize) -> &mut Link {
        if at == HEAD {
            &mut self.head[level]
        } else {
            &mut self.nodes[at as usize].links[level]
        }
    }

    fn node(&self, at: u32) -> &Node {
        &self.nodes[at as usize]
    }

    /// A level for a new node: 1, then one more with probability 1/4 each
    /// time, as Redis's zslRandomLevel.
    fn random_level(&mut self) -> usize {
        let mut level = 1;
        loop {
            self.seed ^= self.seed << 13;
            self.seed ^= self.seed >> 7;
            self.seed ^= self.seed << 17;
            if level == MAX_LEVEL || self.seed & 3 != 0 {
                return level;
            }
            level += 1;
        }
    }

    /// For each level, the last node (or the head) before where (score,
    /// member) goes, and that node's rank (the head's is 0).
    fn predecessors(&self, score: f64, member: &[u8]) -> ([u32; MAX_LEVEL], [u32; MAX_LEVEL]) {
        let mut update = [HEAD; MAX_LEVEL];
        let mut rank = [0u32; MAX_LEVEL];
        let mut at = HEAD;
        let levels = self.head.len();
        for i in (0..levels).rev() {
            rank[i] = if i + 1 == levels { 0 } else { rank[i + 1] };
            loop {
                let link = self.link(at, i);
                if link.forward == NIL {
                    break;
                }
                let next = self.node(link.forward);
                if compare(next.score, &next.member, score, member) != Ordering::Less {
                    break;
                }
                rank[i] += link.span;
                at = link.forward;
            }
            update[i] = at;
        }
        (update, rank)
    }

    /// Adds a member that is not present.
    pub fn insert(&mut self, score: f64, member: Box<[u8]>) {
        let (update, rank) = self.predecessors(score, &member);
        let level = self.random_level();
        // New levels start at the head, spanning the whole list; `rank`
        // and `update` already hold 0 and HEAD there.
        while self.head.len() < level {
            self.head.push(Link {
                forward: NIL,
                span: self.len as u32,
            });
        }
        let node = Node {
            score,
            member,
            backward: if update[0] == HEAD { NIL } else { update[0] },
            links: vec![
                Link {
                    forward: NIL,
                    span: 0
                };
                level
            ]
            .into_boxed_slice(),
        };
        let at = match self.free.pop() {
            Some(slot) => {
                self.nodes[slot as usize] = node;
                slot
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        for i in 0..level {
            let before = self.link(update[i], i);
            let skipped = rank[0] - rank[i];
            self.nodes[at as usize].links[i] = Link {
                forward: before.forward,
                span: before.span - skipped,
            };
            *self.link_mut(update[i], i) = Link {
                forward: at,
                span: skipped + 1,
            };
        }
        let levels = self.head.len();
        for (i, &before) in update.iter().enumerate().take(levels).skip(level) {
            self.link_mut(before, i).span += 1;
        }
        let next = self.node(at).links[0].forward;
        if next == NIL {
            self.tail = at;
        } else {
            self.nodes[next as usize].backward = at;
        }
        self.len += 1;
    }

    /// Removes (score, member); returns the member's stored bytes.
    pub fn remove(&mut self, score: f64, member: &[u8]) -> Option<Box<[u8]>> {
        let (update, _) = self.predecessors(score, member);
        let at = self.link(update[0], 0).forward;
        if at == NIL {
            return None;
        }
        let node = self.node(at);
        if compare(node.score, &node.member, score, member) != Ordering::Equal {
            return None;
        }
        Some(self.unlink(at, &update))
    }

    /// Takes node `at` out of every chain, given its predecessors.
    fn unlink(&mut self, at: u32, update: &[u32; MAX_LEVEL]) -> Box<[u8]> {
        for (i, &before) in update.iter().enumerate().take(self.head.len()) {
            let link = self.link(before, i);
            if link.forward == at {
                let own = self.node(at).links[i];
                *self.link_mut(before, i) = Link {
                    forward: own.forward,
                    span: link.span + own.span - 1,
                };
            } else {
                self.link_mut(before, i).span -= 1;
            }
        }
        let (next, backward) = {
            let node = self.node(at);
            (node.links[0].forward, node.backward)
        };
        if next == NIL {
            self.tail = backward;
        } else {
            self.nodes[next as usize].backward = backward;
        }
        while self.head.len() > 1 && self.head[self.head.len() - 1].forward == NIL {
            self.head.pop();
        }
        self.len -= 1;
        let node = &mut self.nodes[at as usize];
        let member = std::mem::take(&mut node.member);
        node.links = Box::default();
        if self.len == 0 {
            // Empty again: give the slots back.
            *self = RankedOrder {
                seed: self.seed,
                ..RankedOrder::default()
            };
        } else {
            self.free.push(at);
        }
        member
    }

    /// Removes and returns the first (`min`) or last member.
    pub fn pop(&mut self, min: bool) -> Option<(f64, Box<[u8]>)> {
        let at = if min { self.head[0].forward } else { self.tail };
        if at == NIL {
            return None;
        }
        let node = self.node(at);
        let (score, update) = (node.score, self.predecessors(node.score, &node.member).0);
        Some((score, self.unlink(at, &update)))
    }

    /// Zero-based rank of (score, member), if present.
    pub fn rank(&self, score: f64, member: &[u8]) -> Option<usize> {
        let mut rank = 0usize;
        let mut at = HEAD;
        for i in (0..self.head.len()).rev() {
            loop {
                let link = self.link(at, i);
                if link.forward == NIL {
                    break;
                }
                let next = self.node(link.forward);
                if compare(next.score, &next.member, score, member) == Ordering::Greater {
                    break;
                }
                rank += link.span as usize;
                at = link.forward;
            }
            if at != HEAD {
                let node = self.node(at);
                if compare(node.score, &node.member, score, member) == Ordering::Equal {
                    return Some(rank - 1);
                }
            }
        }
        None
    }

    /// How many members satisfy `below`, which must hold for a leading run
    /// of the order and for none after it (a bound's "comes before").
    pub fn count_while(&self, below: impl Fn(f64, &[u8]) -> bool) -> usize {
        let mut rank = 0usize;
        let mut at = HEAD;
        for i in (0..self.head.len()).rev() {
            loop {
                let link = self.link(at, i);
                if link.forward == NIL {
                    break;
                }
                let next = self.node(link.forward);
                if !below(next.score, &next.member) {
                    break;
                }
                rank += link.span as usize;
                at = link.forward;
            }
        }
        rank
    }

    /// The node at zero-based `rank` (which must be below `len`).
    fn node_at(&self, rank: usize) -> u32 {
        let wanted = rank + 1;
        let mut traversed = 0usize;
        let mut at = HEAD;
        for i in (0..self.head.len()).rev() {
            loop {
                let link = self.link(at, i);
                if link.forward == NIL || traversed + link.span as usize > wanted {
                    break;
                }
                traversed += link.span as usize;
                at = link.forward;
            }
            if traversed == wanted {
                return at;
            }
        }
        NIL
    }

    /// The members of ranks `start..end` in order; the iterator also walks
    /// back from the end, and skips (`nth`) and counts in O(log N).
    pub fn ranks(&self, start: usize, end: usize) -> Ranks<'_> {
        let end = end.min(self.len);
        let start = start.min(end);
        Ranks {
            order: self,
            front: if start < end {
                self.node_at(start)
            } else {
                NIL
            },
            back: if start < end {
                self.node_at(end - 1)
            } else {
                NIL
            },
            start,
            end,
        }
    }

    /// Every member in order.
    #[cfg(test)]
    pub fn iter(&self) -> Ranks<'_> {
        self.ranks(0, self.len)
    }
}

/// Members of a run of ranks, as (member, score).
#[derive(Debug, Clone)]
pub struct Ranks<'a> {
    order: &'a RankedOrder,
    /// The node at rank `start` and at rank `end - 1` (NIL when empty).
    front: u32,
    back: u32,
    start: usize,
    end: usize,
}

impl<'a> Iterator for Ranks<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        if self.start >= self.end {
            return None;
        }
        let node = self.order.node(self.front);
        self.start += 1;
        self.front = node.links[0].forward;
        Some((&node.member, node.score))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.end - self.start;
        (left, Some(left))
    }

    fn count(self) -> usize {
        self.end - self.start
    }

    fn nth(&mut self, n: usize) -> Option<Self::Item> {
        if n >= self.end - self.start {
            self.start = self.end;
            return None;
        }
        if n > 0 {
            self.start += n;
            self.front = self.order.node_at(self.start);
        }
        self.next()
    }
}

impl DoubleEndedIterator for Ranks<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.start >= self.end {
            return None;
        }
        let node = self.order.node(self.back);
        self.end -= 1;
        self.back = node.backward;
        Some((&node.member, node.score))
    }

    fn nth_back(&mut self, n: usize) -> Option<Self::Item> {
        if n >= self.end - self.start {
            self.end = self.start;
            return None;
        }
        if n > 0 {
            self.end -= n;
            self.back = self.order.node_at(self.end - 1);
        }
        self.next_back()
    }
}

impl ExactSizeIterator for Ranks<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The same (score, member) order as the list's, for the model.
    #[derive(Debug, Clone, PartialEq)]
    struct Key(f64, Vec<u8>);
    impl Eq for Key {}
    impl PartialOrd for Key {
        fn partial_cmp(&self, other: &Key) -> Option<Ordering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for Key {
        fn cmp(&self, other: &Key) -> Ordering {
            compare(self.0, &self.1, other.0, &other.1)
        }
    }

    fn members(ranks: Ranks<'_>) -> Vec<Key> {
        ranks.map(|(m, s)| Key(s, m.to_vec())).collect()
    }

    /// Every span agrees with the level-0 chain, and backward links mirror
    /// forward ones: the invariants rank arithmetic rests on.
    fn check_links(order: &RankedOrder) {
        let mut rank_of = std::collections::HashMap::new();
        let mut at = order.head[0].forward;
        let mut previous = NIL;
        let mut rank = 1usize;
        while at != NIL {
            assert_eq!(order.node(at).backward, previous);
            rank_of.insert(at, rank);
            previous = at;
            at = order.node(at).links[0].forward;
            rank += 1;
        }
        assert_eq!(order.tail, previous);
        assert_eq!(rank - 1, order.len);
        for i in 0..order.head.len() {
            let mut at = HEAD;
            loop {
                let link = order.link(at, i);
                let from = if at == HEAD { 0 } else { rank_of[&at] };
                let to = if link.forward == NIL {
                    order.len
                } else {
                    rank_of[&link.forward]
                };
                assert_eq!(link.span as usize, to - from, "level {i}");
                if link.forward == NIL {
                    break;
                }
                at = link.forward;
            }
        }
    }

    #[test]
    fn agrees_with_an_ordered_model_through_random_inserts_and_removes() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut random = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut order = RankedOrder::default();
        let mut model = BTreeSet::new();
        for step in 0..6000 {
            // Few distinct scores, so members break most ties.
            let key = Key(
                random(40) as f64 - 20.0,
                format!("m{}", random(300)).into_bytes(),
            );
            if random(3) == 0 {
                let removed = order.remove(key.0, &key.1).map(|m| m.to_vec());
                assert_eq!(removed.is_some(), model.remove(&key), "step {step}");
                assert_eq!(removed.unwrap_or_else(|| key.1.clone()), key.1);
            } else if !model.contains(&key) {
                order.insert(key.0, key.1.clone().into_boxed_slice());
                model.insert(key.clone());
            }
            if step % 97 == 0 {
                check_links(&order);
                let all: Vec<Key> = model.iter().cloned().collect();
                assert_eq!(members(order.iter()), all);
                assert_eq!(members(order.iter()).len(), order.len);
                for (rank, key) in all.iter().enumerate() {
                    assert_eq!(order.rank(key.0, &key.1), Some(rank));
                }
                let absent = Key(0.5, b"absent".to_vec());
                assert_eq!(order.rank(absent.0, &absent.1), None);
                let below = order.count_while(|s, _| s < 0.0);
                assert_eq!(below, all.iter().filter(|k| k.0 < 0.0).count());
                let (a, b) = (
                    random(all.len() as u64 + 2) as usize,
                    random(all.len() as u64 + 2) as usize,
                );
                let (start, end) = (a.min(b), a.max(b));
                let expected: Vec<Key> = all
                    .iter()
                    .skip(start)
                    .take(end.saturating_sub(start))
                    .cloned()
                    .collect();
                assert_eq!(members(order.ranks(start, end)), expected);
                let reversed: Vec<Key> = expected.iter().rev().cloned().collect();
                assert_eq!(
                    members(order.ranks(start, end)).len(),
                    order.ranks(start, end).count()
                );
                assert_eq!(
                    order
                        .ranks(start, end)
                        .rev()
                        .map(|(m, s)| Key(s, m.to_vec()))
                        .collect::<Vec<_>>(),
                    reversed
                );
                for skip in [0, 1, 2, 7] {
                    assert_eq!(
                        members_skip(&order, start, end, skip),
                        expected.iter().skip(skip).cloned().collect::<Vec<_>>()
                    );
                    assert_eq!(
                        order
                            .ranks(start, end)
                            .rev()
                            .skip(skip)
                            .map(|(m, s)| Key(s, m.to_vec()))
                            .collect::<Vec<_>>(),
                        reversed.iter().skip(skip).cloned().collect::<Vec<_>>()
                    );
                }
                // Both ends at once meet in the middle and stop.
                let mut both = order.ranks(start, end);
                let mut met = 0;
                while both.next().is_some() {
                    met += 1;
                    if both.next_back().is_some() {
                        met += 1;
                    }
                }
                assert_eq!(met, expected.len());
            }
        }
        while let Some((score, member)) = order.pop(model.len() % 2 == 0) {
            let key = Key(score, member.to_vec());
            let expected = if model.len() % 2 == 0 {
                model.pop_first()
            } else {
                model.pop_last()
            };
            assert_eq!(Some(key), expected);
        }
        assert!(model.is_empty());
        assert_eq!(order.len, 0);
        assert!(
            order.nodes.is_empty(),
            "an emptied order gives its slots back"
        );
    }

    fn members_skip(order: &RankedOrder, start: usize, end: usize, skip: usize) -> Vec<Key> {
        members_from(order.ranks(start, end).skip(skip))
    }

    fn members_from<'a>(it: impl Iterator<Item = (&'a [u8], f64)>) -> Vec<Key> {
        it.map(|(m, s)| Key(s, m.to_vec())).collect()
    }

    #[test]
    fn ranks_past_the_end_are_empty() {
        let mut order = RankedOrder::default();
        for i in 0..5 {
            order.insert(i as f64, format!("{i}").into_bytes().into_boxed_slice());
        }
        assert_eq!(order.ranks(3, 100).count(), 2);
        assert_eq!(order.ranks(7, 9).next(), None);
        assert_eq!(order.ranks(4, 2).next(), None);
        assert_eq!(
            order.iter().nth(4).map(|(m, _)| m.to_vec()),
            Some(b"4".to_vec())
        );
        assert_eq!(order.iter().nth(5), None);
    }
}
