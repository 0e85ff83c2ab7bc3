//! A large sorted set's members in (score, member) order with every rank
//! at hand: a B+tree whose inner nodes count the members under each child.
//! The rank of a member, the member at a rank and the number of members
//! below a bound cost O(log N), as with Redis's skiplist, while a lookup
//! touches a few nodes of dozens of members each rather than a node per
//! step: a skiplist with spans was tried first and cost three times the
//! CPU on ZADD (docs/benchmarks.md, 2026-12-06).
//!
//! Nodes live in one vector and refer to each other by index; leaves are
//! chained both ways for walking ranges. Each inner node keeps, for every
//! child but the last, a separator no smaller than anything in that child
//! and smaller than anything after it. A node is split when it overflows
//! and dropped when it empties; nodes are not merged, so a tree that
//! shrank keeps at most its former height.

use std::cmp::Ordering;

/// Members per leaf before it splits.
const LEAF_MAX: usize = 64;
/// Children per inner node before it splits.
const INNER_MAX: usize = 64;
/// No node (the end of the leaf chain).
const NIL: u32 = u32::MAX;

#[derive(Debug, Clone)]
struct Item {
    score: f64,
    member: Box<[u8]>,
}

/// Redis's order: by score (as `<` on doubles; NaN is never stored), then
/// by member bytes.
fn compare(score: f64, member: &[u8], other_score: f64, other_member: &[u8]) -> Ordering {
    score
        .partial_cmp(&other_score)
        .unwrap_or(Ordering::Equal)
        .then_with(|| member.cmp(other_member))
}

impl Item {
    fn cmp_to(&self, score: f64, member: &[u8]) -> Ordering {
        compare(self.score, &self.member, score, member)
    }
}

#[derive(Debug, Clone)]
enum Node {
    Leaf {
        items: Vec<Item>,
        prev: u32,
        next: u32,
    },
    Inner {
        children: Vec<u32>,
        /// Members under each child.
        counts: Vec<usize>,
        /// One fewer than the children: `separators[i]` bounds child `i`
        /// from above.
        separators: Vec<Item>,
    },
}

/// The ordered members of a sorted set, ranked.
#[derive(Debug, Clone)]
pub struct RankedOrder {
    nodes: Vec<Node>,
    /// Slots of `nodes` that dropped nodes left, for reuse.
    free: Vec<u32>,
    root: u32,
    first: u32,
    last: u32,
    len: usize,
}

impl Default for RankedOrder {
    fn default() -> RankedOrder {
        RankedOrder {
            nodes: vec![Node::Leaf {
                items: Vec::new(),
                prev: NIL,
                next: NIL,
            }],
            free: Vec::new(),
            root: 0,
            first: 0,
            last: 0,
            len: 0,
        }
    }
}

/// Which child of an inner node holds (or would hold) what `before`
/// places: the first child whose separator `before` does not pass.
fn child_for(separators: &[Item], before: impl Fn(&Item) -> bool) -> usize {
    separators.partition_point(before)
}

/// Which child of an inner node holds zero-based `rank`, and the rank
/// within that child (the last child takes whatever is past the others).
fn child_by_rank(counts: &[usize], mut rank: usize) -> (usize, usize) {
    let mut i = 0;
    while i + 1 < counts.len() && rank >= counts[i] {
        rank -= counts[i];
        i += 1;
    }
    (i, rank)
}

impl RankedOrder {
    fn alloc(&mut self, node: Node) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                self.nodes[slot as usize] = node;
                slot
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    fn release(&mut self, at: u32) {
        self.nodes[at as usize] = Node::Leaf {
            items: Vec::new(),
            prev: NIL,
            next: NIL,
        };
        self.free.push(at);
    }

    fn count_of(&self, at: u32) -> usize {
        match &self.nodes[at as usize] {
            Node::Leaf { items, .. } => items.len(),
            Node::Inner { counts, .. } => counts.iter().sum(),
        }
    }

    fn leaf_items(&self, at: u32) -> &[Item] {
        match &self.nodes[at as usize] {
            Node::Leaf { items, .. } => items,
            Node::Inner { .. } => &[],
        }
    }

    /// Adds a member that is not present.
    pub fn insert(&mut self, score: f64, member: Box<[u8]>) {
        let item = Item { score, member };
        if let Some((separator, right)) = self.insert_under(self.root, item) {
            let left = self.root;
            let counts = vec![self.count_of(left), self.count_of(right)];
            self.root = self.alloc(Node::Inner {
                children: vec![left, right],
                counts,
                separators: vec![separator],
            });
        }
        self.len += 1;
    }

    /// Inserts under node `at`; when `at` split, returns the separator and
    /// the new node that follows it.
    fn insert_under(&mut self, at: u32, item: Item) -> Option<(Item, u32)> {
        let child = match &mut self.nodes[at as usize] {
            Node::Leaf { items, .. } => {
                let position =
                    items.partition_point(|i| i.cmp_to(item.score, &item.member) == Ordering::Less);
                items.insert(position, item);
                if items.len() <= LEAF_MAX {
                    return None;
                }
                return Some(self.split_leaf(at));
            }
            Node::Inner {
                children,
                counts,
                separators,
            } => {
                let i = child_for(separators, |s| {
                    s.cmp_to(item.score, &item.member) == Ordering::Less
                });
                counts[i] += 1;
                (i, children[i])
            }
        };
        let (i, child_at) = child;
        let (separator, right) = self.insert_under(child_at, item)?;
        let (left_count, right_count) = (self.count_of(child_at), self.count_of(right));
        let Node::Inner {
            children,
            counts,
            separators,
        } = &mut self.nodes[at as usize]
        else {
            unreachable!("an inner node stays inner");
        };
        counts[i] = left_count;
        children.insert(i + 1, right);
        counts.insert(i + 1, right_count);
        separators.insert(i, separator);
        if children.len() <= INNER_MAX {
            return None;
        }
        let middle = children.len() / 2;
        let right_children = children.split_off(middle);
        let right_counts = counts.split_off(middle);
        let right_separators = separators.split_off(middle);
        #[allow(clippy::expect_used)] // an overflowing node has separators
        let promoted = separators.pop().expect("separators");
        let right = self.alloc(Node::Inner {
            children: right_children,
            counts: right_counts,
            separators: right_separators,
        });
        Some((promoted, right))
    }

    /// Splits an overflowing leaf in two; returns the separator and the new
    /// right half.
    fn split_leaf(&mut self, at: u32) -> (Item, u32) {
        let Node::Leaf { items, next, .. } = &mut self.nodes[at as usize] else {
            unreachable!("a leaf");
        };
        let right_items = items.split_off(items.len() / 2);
        #[allow(clippy::expect_used)] // the left half is not empty
        let separator = items.last().expect("a left half").clone();
        let after = *next;
        let right = self.alloc(Node::Leaf {
            items: right_items,
            prev: at,
            next: after,
        });
        if let Node::Leaf { next, .. } = &mut self.nodes[at as usize] {
            *next = right;
        }
        match after {
            NIL => self.last = right,
            _ => {
                if let Node::Leaf { prev, .. } = &mut self.nodes[after as usize] {
                    *prev = right;
                }
            }
        }
        (separator, right)
    }

    /// Removes (score, member); returns the member's stored bytes.
    pub fn remove(&mut self, score: f64, member: &[u8]) -> Option<Box<[u8]>> {
        let removed = self.remove_under(self.root, score, member)?;
        self.after_removal();
        Some(removed)
    }

    /// Counts a removal: an emptied order starts afresh, and a root left
    /// with one child gives way to it.
    fn after_removal(&mut self) {
        self.len -= 1;
        if self.len == 0 {
            *self = RankedOrder::default();
        } else if let Node::Inner { children, .. } = &self.nodes[self.root as usize] {
            if children.len() == 1 {
                let only = children[0];
                self.release(self.root);
                self.root = only;
            }
        }
    }

    /// Removes (score, member) from under node `at`, if it is there.
    fn remove_under(&mut self, at: u32, score: f64, member: &[u8]) -> Option<Box<[u8]>> {
        let (i, child_at) = match &mut self.nodes[at as usize] {
            Node::Leaf { items, .. } => {
                let position = items.partition_point(|i| i.cmp_to(score, member) == Ordering::Less);
                let found = items.get(position)?;
                if found.cmp_to(score, member) != Ordering::Equal {
                    return None;
                }
                return Some(items.remove(position).member);
            }
            Node::Inner {
                children,
                separators,
                ..
            } => {
                let i = child_for(separators, |s| s.cmp_to(score, member) == Ordering::Less);
                (i, children[i])
            }
        };
        let removed = self.remove_under(child_at, score, member)?;
        self.uncount(at, i);
        Some(removed)
    }

    /// One member fewer under child `i` of inner node `at`, which is
    /// dropped once empty.
    fn uncount(&mut self, at: u32, i: usize) {
        if let Node::Inner { counts, .. } = &mut self.nodes[at as usize] {
            counts[i] -= 1;
            if counts[i] == 0 {
                self.drop_child(at, i);
            }
        }
    }

    /// Drops the emptied child `i` of inner node `at`.
    fn drop_child(&mut self, at: u32, i: usize) {
        let Node::Inner {
            children,
            counts,
            separators,
        } = &mut self.nodes[at as usize]
        else {
            unreachable!("an inner node");
        };
        if children.len() == 1 {
            // The last child: the parent empties and drops this node.
            return;
        }
        let child = children.remove(i);
        counts.remove(i);
        separators.remove(i.min(separators.len() - 1));
        self.unchain(child);
        self.release(child);
    }

    /// Takes an empty subtree's leaves out of the chain.
    fn unchain(&mut self, at: u32) {
        match &self.nodes[at as usize] {
            Node::Leaf { prev, next, .. } => {
                let (prev, next) = (*prev, *next);
                match prev {
                    NIL => self.first = next,
                    _ => {
                        if let Node::Leaf { next: n, .. } = &mut self.nodes[prev as usize] {
                            *n = next;
                        }
                    }
                }
                match next {
                    NIL => self.last = prev,
                    _ => {
                        if let Node::Leaf { prev: p, .. } = &mut self.nodes[next as usize] {
                            *p = prev;
                        }
                    }
                }
            }
            Node::Inner { children, .. } => {
                for child in children.clone() {
                    self.unchain(child);
                    self.release(child);
                }
            }
        }
    }

    /// Removes and returns the first (`min`) or last member.
    pub fn pop(&mut self, min: bool) -> Option<(f64, Box<[u8]>)> {
        let last = self.len.checked_sub(1)?;
        let rank = if min { 0 } else { last };
        let item = self.remove_rank_under(self.root, rank);
        self.after_removal();
        Some((item.score, item.member))
    }

    /// Removes the member of zero-based `rank` under node `at` (which
    /// holds more than `rank` members).
    fn remove_rank_under(&mut self, at: u32, rank: usize) -> Item {
        let (i, rank) = match &mut self.nodes[at as usize] {
            Node::Leaf { items, .. } => return items.remove(rank),
            Node::Inner { counts, .. } => child_by_rank(counts, rank),
        };
        let child_at = match &self.nodes[at as usize] {
            Node::Inner { children, .. } => children[i],
            Node::Leaf { .. } => unreachable!("an inner node"),
        };
        let item = self.remove_rank_under(child_at, rank);
        self.uncount(at, i);
        item
    }

    /// Zero-based rank of (score, member), if present.
    pub fn rank(&self, score: f64, member: &[u8]) -> Option<usize> {
        let mut rank = 0;
        let mut at = self.root;
        loop {
            match &self.nodes[at as usize] {
                Node::Leaf { items, .. } => {
                    let position =
                        items.partition_point(|i| i.cmp_to(score, member) == Ordering::Less);
                    let found = items.get(position)?;
                    return (found.cmp_to(score, member) == Ordering::Equal)
                        .then_some(rank + position);
                }
                Node::Inner {
                    children,
                    counts,
                    separators,
                } => {
                    let i = child_for(separators, |s| s.cmp_to(score, member) == Ordering::Less);
                    rank += counts[..i].iter().sum::<usize>();
                    at = children[i];
                }
            }
        }
    }

    /// How many members satisfy `below`, which must hold for a leading run
    /// of the whole order of (score, member) pairs, present or not, and
    /// for nothing after it (a bound's "comes before").
    pub fn count_while(&self, below: impl Fn(f64, &[u8]) -> bool) -> usize {
        let mut rank = 0;
        let mut at = self.root;
        loop {
            match &self.nodes[at as usize] {
                Node::Leaf { items, .. } => {
                    return rank + items.partition_point(|i| below(i.score, &i.member));
                }
                Node::Inner {
                    children,
                    counts,
                    separators,
                } => {
                    let i = child_for(separators, |s| below(s.score, &s.member));
                    rank += counts[..i].iter().sum::<usize>();
                    at = children[i];
                }
            }
        }
    }

    /// The leaf and position of zero-based `rank` (below `len`).
    fn locate(&self, mut rank: usize) -> (u32, usize) {
        let mut at = self.root;
        loop {
            match &self.nodes[at as usize] {
                Node::Leaf { .. } => return (at, rank),
                Node::Inner {
                    children, counts, ..
                } => {
                    let (i, within) = child_by_rank(counts, rank);
                    rank = within;
                    at = children[i];
                }
            }
        }
    }

    /// The members of ranks `start..end` in order; the iterator also walks
    /// back from the end, and skips (`nth`) and counts in O(log N).
    pub fn ranks(&self, start: usize, end: usize) -> Ranks<'_> {
        let end = end.min(self.len);
        let start = start.min(end);
        let (front, back) = if start < end {
            (self.locate(start), self.locate(end - 1))
        } else {
            ((NIL, 0), (NIL, 0))
        };
        Ranks {
            order: self,
            front,
            back,
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
    /// The leaf and position of rank `start`, and of rank `end - 1`.
    front: (u32, usize),
    back: (u32, usize),
    start: usize,
    end: usize,
}

impl<'a> Iterator for Ranks<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        if self.start >= self.end {
            return None;
        }
        let (leaf, position) = self.front;
        let Node::Leaf { items, next, .. } = &self.order.nodes[leaf as usize] else {
            return None;
        };
        let item = &items[position];
        self.start += 1;
        self.front = if position + 1 < items.len() {
            (leaf, position + 1)
        } else {
            (*next, 0)
        };
        Some((&item.member, item.score))
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
            self.front = self.order.locate(self.start);
        }
        self.next()
    }
}

impl DoubleEndedIterator for Ranks<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.start >= self.end {
            return None;
        }
        let (leaf, position) = self.back;
        let Node::Leaf { items, prev, .. } = &self.order.nodes[leaf as usize] else {
            return None;
        };
        let item = &items[position];
        self.end -= 1;
        self.back = match position {
            0 if *prev != NIL => (*prev, self.order.leaf_items(*prev).len().saturating_sub(1)),
            0 => (NIL, 0),
            _ => (leaf, position - 1),
        };
        Some((&item.member, item.score))
    }

    fn nth_back(&mut self, n: usize) -> Option<Self::Item> {
        if n >= self.end - self.start {
            self.end = self.start;
            return None;
        }
        if n > 0 {
            self.end -= n;
            self.back = self.order.locate(self.end - 1);
        }
        self.next_back()
    }
}

impl ExactSizeIterator for Ranks<'_> {}

#[cfg(test)]
#[path = "ranked_tests.rs"]
mod tests;
