//! A sorted set: members ordered by score, then by member bytes.
//!
//! A small set lives as Redis keeps it, in a listpack: every (score,
//! member) pair in order in one buffer, found by a linear scan. A
//! sliding-window-log limiter keeps one such set per client, and one buffer
//! is one allocation, where the indexed form costs a table slot, a tree
//! entry and two boxes per member. Past the thresholds Redis converts to a
//! skiplist beside a dict, and so does this type, for good: a member →
//! score table for ZSCORE, updates and ZSCAN, and a B+tree that counts
//! its members ([`RankedOrder`]) for order, so that ranks, rank ranges and
//! score counts cost O(log N), as in Redis.

use std::cmp::Ordering;
use std::ops::Bound;

use super::byte_table::{ByteTable, MemberScore};

use super::packed::{push_element, read_element};
use super::ranked::{RankedOrder, Ranks};
use super::{element_bytes, Encodings};

/// Per-member cost of the indexed form beyond the member's two copies:
/// the table slot and its score, the tree's item and its share of nodes
/// (1,000,000 members of 13 bytes: 128 MB allocated, 128 bytes each).
const MEMBER_OVERHEAD: usize = 54;

/// A sorted-set value.
#[derive(Debug, Clone)]
pub struct ZSet {
    members: Members,
}

#[derive(Debug, Clone)]
enum Members {
    /// Redis's listpack: entries in (score, member) order, each the score's
    /// eight bytes followed by the member as a packed element.
    Packed { buffer: Vec<u8>, len: usize },
    /// Redis's skiplist and dict, for good once converted, as in Redis.
    Indexed(Box<Indexed>),
}

#[derive(Debug, Clone, Default)]
struct Indexed {
    /// Member → score, Redis's dict beside its skiplist.
    scores: ByteTable<MemberScore>,
    order: RankedOrder,
    /// Running estimate of the heap bytes.
    bytes: usize,
}

impl Default for ZSet {
    fn default() -> ZSet {
        ZSet {
            members: Members::Packed {
                buffer: Vec::new(),
                len: 0,
            },
        }
    }
}

fn member_cost(member: &[u8]) -> usize {
    2 * element_bytes(member) + MEMBER_OVERHEAD
}

/// Redis's order: by score (`<` on doubles; NaN is never stored), then by
/// member bytes.
fn compare(score: f64, member: &[u8], other_score: f64, other_member: &[u8]) -> Ordering {
    score
        .partial_cmp(&other_score)
        .unwrap_or(Ordering::Equal)
        .then_with(|| member.cmp(other_member))
}

/// The packed entry at `at`: its score, its member and the offset past it.
fn read_entry(buffer: &[u8], at: usize) -> Option<(f64, &[u8], usize)> {
    let score = f64::from_le_bytes(buffer.get(at..at + 8)?.try_into().ok()?);
    let (member, end) = read_element(buffer, at + 8)?;
    Some((score, member, end))
}

/// Every packed entry in order: (offset, score, member, offset past it).
fn entries(buffer: &[u8]) -> impl Iterator<Item = (usize, f64, &[u8], usize)> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let (score, member, end) = read_entry(buffer, at)?;
        let start = std::mem::replace(&mut at, end);
        Some((start, score, member, end))
    })
}

/// A packed member found: its index, where its entry begins and ends, and
/// its score.
struct Found {
    index: usize,
    start: usize,
    end: usize,
    score: f64,
}

fn find(buffer: &[u8], member: &[u8]) -> Option<Found> {
    entries(buffer)
        .enumerate()
        .find(|(_, (_, _, m, _))| *m == member)
        .map(|(index, (start, score, _, end))| Found {
            index,
            start,
            end,
            score,
        })
}

/// Puts (score, member) into the packed buffer at its place in the order.
fn insert_packed(buffer: &mut Vec<u8>, score: f64, member: &[u8]) {
    let at = entries(buffer)
        .find(|&(_, s, m, _)| compare(s, m, score, member) == Ordering::Greater)
        .map_or(buffer.len(), |(start, ..)| start);
    let mut entry = Vec::with_capacity(8 + 2 + member.len());
    entry.extend_from_slice(&score.to_le_bytes());
    push_element(&mut entry, member);
    // Grown by an eighth at a time. A doubling buffer would hold up to
    // twice the set's bytes (10,000 logs of 100 entries: 36 MB of RSS
    // against 31 MB, Redis's listpacks 30 MB); growing by the entry alone,
    // as a listpack is reallocated on every insert, cost a sliding-log
    // script 10% more CPU than doubling, an eighth 4-9%.
    if buffer.capacity() - buffer.len() < entry.len() {
        buffer.reserve_exact(entry.len().max(buffer.len() / 8));
    }
    buffer.splice(at..at, entry);
}

impl Indexed {
    fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).map(|&(_, score)| score)
    }

    /// Adds a member that is not present.
    fn add(&mut self, member: &[u8], score: f64) {
        self.bytes += member_cost(member);
        self.scores
            .get_or_insert_with(member, || (member.into(), score));
        self.order.insert(score, member.into());
    }

    /// Sets the score of a member that is present; returns the old one.
    fn rescore(&mut self, member: &[u8], score: f64) -> Option<f64> {
        let (_, old) = self.scores.get_mut(member)?;
        let previous = *old;
        // Redis compares with `!=`: -0 and 0 are the same score, and the
        // stored one stays.
        if previous != score {
            *old = score;
            #[allow(clippy::expect_used)] // both indexes hold every member
            let boxed = self.order.remove(previous, member).expect("indexes agree");
            self.order.insert(score, boxed);
        }
        Some(previous)
    }

    /// Removes a member from the score table; returns its score.
    fn take_score(&mut self, member: &[u8]) -> Option<f64> {
        let (_, score) = self.scores.remove(member)?;
        self.bytes -= member_cost(member);
        Some(score)
    }
}

impl ZSet {
    /// Number of members.
    pub fn len(&self) -> usize {
        match &self.members {
            Members::Packed { len, .. } => *len,
            Members::Indexed(indexed) => indexed.scores.len(),
        }
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `listpack` or `skiplist`.
    pub fn encoding(&self) -> &'static str {
        match &self.members {
            Members::Packed { .. } => "listpack",
            Members::Indexed(_) => "skiplist",
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        match &self.members {
            Members::Packed { buffer, .. } => buffer.capacity(),
            Members::Indexed(indexed) => indexed.bytes,
        }
    }

    /// The score of a member.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.members {
            Members::Packed { buffer, .. } => find(buffer, member).map(|found| found.score),
            Members::Indexed(indexed) => indexed.score(member),
        }
    }

    /// Sets a member's score; returns the previous score. Past
    /// `zset-max-listpack-value` or `-entries` the set converts to the
    /// indexed form, as Redis's converts to a skiplist.
    pub fn insert(&mut self, member: &[u8], score: f64, limits: &Encodings) -> Option<f64> {
        // Redis 7.0 replies 0 for a score given as -0: store zero unsigned.
        let score = if score == 0.0 { 0.0 } else { score };
        if let Members::Packed { buffer, len } = &mut self.members {
            if let Some(found) = find(buffer, member) {
                if found.score != score {
                    buffer.drain(found.start..found.end);
                    insert_packed(buffer, score, member);
                }
                return Some(found.score);
            }
            if member.len() <= limits.zset_max_listpack_value
                && *len < limits.zset_max_listpack_entries
            {
                insert_packed(buffer, score, member);
                *len += 1;
                return None;
            }
            self.convert();
        }
        let Members::Indexed(indexed) = &mut self.members else {
            unreachable!("converted above");
        };
        let previous = indexed.rescore(member, score);
        if previous.is_none() {
            indexed.add(member, score);
        }
        previous
    }

    /// Turns the packed form into the indexed one.
    fn convert(&mut self) {
        let Members::Packed { buffer, .. } = &self.members else {
            return;
        };
        let mut indexed = Indexed::default();
        for (_, score, member, _) in entries(buffer) {
            indexed.add(member, score);
        }
        self.members = Members::Indexed(Box::new(indexed));
    }

    /// Removes a member; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match &mut self.members {
            Members::Packed { buffer, len } => {
                let found = find(buffer, member)?;
                buffer.drain(found.start..found.end);
                *len -= 1;
                Some(found.score)
            }
            Members::Indexed(indexed) => {
                let score = indexed.take_score(member)?;
                indexed.order.remove(score, member);
                Some(score)
            }
        }
    }

    /// Removes and returns the lowest (`min`) or highest member.
    pub fn pop(&mut self, min: bool) -> Option<(Box<[u8]>, f64)> {
        match &mut self.members {
            Members::Packed { buffer, len } => {
                let (start, score, member, end) = if min {
                    entries(buffer).next()
                } else {
                    entries(buffer).last()
                }?;
                let member: Box<[u8]> = member.into();
                buffer.drain(start..end);
                *len -= 1;
                Some((member, score))
            }
            Members::Indexed(indexed) => {
                let (score, member) = indexed.order.pop(min)?;
                indexed.take_score(&member);
                Some((member, score))
            }
        }
    }

    /// Random members as ZRANDMEMBER's count asks (see
    /// [`crate::util::random_positions`]). Past the listpack thresholds a
    /// count below the size samples the member table, not every member.
    pub fn random_members(&self, count: i64) -> Vec<(&[u8], f64)> {
        match &self.members {
            Members::Indexed(indexed) if count < 0 || (count as usize) < indexed.scores.len() => {
                indexed
                    .scores
                    .random_items(count)
                    .into_iter()
                    .map(|(member, score)| (&**member, *score))
                    .collect()
            }
            _ => {
                let all: Vec<_> = self.iter().collect();
                crate::util::random_positions(all.len(), count)
                    .into_iter()
                    .map(|at| all[at])
                    .collect()
            }
        }
    }

    /// One page of ZSCAN from `cursor` (0 to start), with about `count`
    /// members, and the cursor to go on from (0 when done). A set small
    /// enough for Redis's listpack comes back whole in score order, as
    /// Redis's does. A larger one is walked bucket by bucket: a removal
    /// leaves the others where they are, so every member present
    /// throughout is met; a cursor from before the table's layout changed
    /// starts over, returning members twice but missing none.
    pub fn scan_page(&self, cursor: u64, count: usize) -> (u64, Vec<(&[u8], f64)>) {
        let Members::Indexed(indexed) = &self.members else {
            return (0, self.iter().collect());
        };
        let (next, page) = indexed.scores.scan_page(cursor, count);
        let page = page
            .into_iter()
            .map(|(member, score)| (&**member, *score))
            .collect();
        (next, page)
    }

    /// How many members satisfy `below`, which holds for a leading run of
    /// the order and for none after it.
    fn count_while(&self, below: impl Fn(f64, &[u8]) -> bool) -> usize {
        match &self.members {
            Members::Packed { buffer, .. } => entries(buffer)
                .take_while(|&(_, score, member, _)| below(score, member))
                .count(),
            Members::Indexed(indexed) => indexed.order.count_while(below),
        }
    }

    /// The members of ranks `start..end` in ascending order.
    fn ranks(&self, start: usize, end: usize) -> ZIter<'_> {
        match &self.members {
            Members::Packed { buffer, len } => {
                let end = end.min(*len);
                let start = start.min(end);
                let front = entries(buffer)
                    .nth(start)
                    .map_or(buffer.len(), |(at, ..)| at);
                ZIter(Walk::Packed(PackedRun {
                    buffer,
                    front,
                    start,
                    end,
                    backs: None,
                }))
            }
            Members::Indexed(indexed) => ZIter(Walk::Indexed(indexed.order.ranks(start, end))),
        }
    }

    /// Members in ascending order; in the indexed form, skipping ahead
    /// (`nth`, `skip`) from either end costs O(log N), as Redis's ranges
    /// by rank.
    pub fn iter(&self) -> ZIter<'_> {
        self.ranks(0, self.len())
    }

    /// The member at zero-based `rank` in ascending order.
    pub fn nth(&self, rank: usize) -> Option<(&[u8], f64)> {
        self.ranks(rank, rank + 1).next()
    }

    /// Members whose score lies within the bounds, in ascending order.
    pub fn range_by_score(&self, min: Bound<f64>, max: Bound<f64>) -> ZIter<'_> {
        let start = self.count_while(|score, _| match min {
            Bound::Included(m) => score < m,
            Bound::Excluded(m) => score <= m,
            Bound::Unbounded => false,
        });
        let end = self.count_while(|score, _| match max {
            Bound::Included(m) => score <= m,
            Bound::Excluded(m) => score < m,
            Bound::Unbounded => true,
        });
        self.ranks(start, end)
    }

    /// Zero-based rank of a member in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        match &self.members {
            Members::Packed { buffer, .. } => find(buffer, member).map(|found| found.index),
            Members::Indexed(indexed) => {
                let score = indexed.score(member)?;
                indexed.order.rank(score, member)
            }
        }
    }
}

/// Members of a sorted set in order, as (member, score); double-ended.
#[derive(Debug, Clone)]
pub struct ZIter<'a>(Walk<'a>);

#[derive(Debug, Clone)]
enum Walk<'a> {
    Packed(PackedRun<'a>),
    Indexed(Ranks<'a>),
}

/// Packed entries of ranks `start..end`.
#[derive(Debug, Clone)]
struct PackedRun<'a> {
    buffer: &'a [u8],
    /// Where the entry of rank `start` begins.
    front: usize,
    start: usize,
    end: usize,
    /// Where each entry of the run begins, found the first time the run is
    /// walked from the back (entries are read forwards only).
    backs: Option<Vec<usize>>,
}

impl<'a> Iterator for ZIter<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            Walk::Packed(run) => {
                if run.start >= run.end {
                    return None;
                }
                let (score, member, end) = read_entry(run.buffer, run.front)?;
                run.front = end;
                run.start += 1;
                Some((member, score))
            }
            Walk::Indexed(ranks) => ranks.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            Walk::Packed(run) => (run.end - run.start, Some(run.end - run.start)),
            Walk::Indexed(ranks) => ranks.size_hint(),
        }
    }

    fn count(self) -> usize {
        self.len()
    }

    fn nth(&mut self, n: usize) -> Option<Self::Item> {
        match &mut self.0 {
            Walk::Packed(_) => {
                for _ in 0..n {
                    self.next()?;
                }
                self.next()
            }
            Walk::Indexed(ranks) => ranks.nth(n),
        }
    }
}

impl DoubleEndedIterator for ZIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            Walk::Packed(run) => {
                if run.start >= run.end {
                    return None;
                }
                let (buffer, front, left) = (run.buffer, run.front, run.end - run.start);
                let backs = run.backs.get_or_insert_with(|| {
                    entries(&buffer[front..])
                        .take(left)
                        .map(|(at, ..)| front + at)
                        .collect()
                });
                let at = backs.pop()?;
                run.end -= 1;
                let (score, member, _) = read_entry(run.buffer, at)?;
                Some((member, score))
            }
            Walk::Indexed(ranks) => ranks.next_back(),
        }
    }

    fn nth_back(&mut self, n: usize) -> Option<Self::Item> {
        match &mut self.0 {
            Walk::Packed(_) => {
                for _ in 0..n {
                    self.next_back()?;
                }
                self.next_back()
            }
            Walk::Indexed(ranks) => ranks.nth_back(n),
        }
    }
}

impl ExactSizeIterator for ZIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(z: &ZSet) -> u32 {
        match &z.members {
            Members::Indexed(indexed) => indexed.scores.shape().1,
            Members::Packed { .. } => panic!("not indexed"),
        }
    }

    #[test]
    fn orders_by_score_then_member_and_updates_move_members() {
        let mut z = ZSet::default();
        z.insert(b"b", 1.0, &Encodings::default());
        z.insert(b"a", 1.0, &Encodings::default());
        z.insert(b"c", 0.5, &Encodings::default());
        assert_eq!(z.insert(b"c", 2.0, &Encodings::default()), Some(0.5));
        let order: Vec<_> = z.iter().map(|(m, _)| m.to_vec()).collect();
        assert_eq!(order, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(z.rank(b"c"), Some(2));
        let in_range: Vec<_> = z
            .range_by_score(Bound::Excluded(1.0), Bound::Included(2.0))
            .map(|(m, _)| m.to_vec())
            .collect();
        assert_eq!(in_range, vec![b"c".to_vec()]);
        assert_eq!(
            z.range_by_score(Bound::Included(3.0), Bound::Included(1.0))
                .count(),
            0
        );
        assert_eq!(z.pop(true), Some((Box::from(&b"a"[..]), 1.0)));
        assert_eq!(z.remove(b"b"), Some(1.0));
        assert_eq!(z.remove(b"c"), Some(2.0));
        assert!(z.is_empty());
    }

    #[test]
    fn the_indexed_forms_estimate_returns_to_zero() {
        let limits = Encodings {
            zset_max_listpack_entries: 0,
            ..Encodings::default()
        };
        let mut z = ZSet::default();
        for i in 0..100 {
            z.insert(format!("member{i}").as_bytes(), i as f64, &limits);
        }
        assert!(z.heap_bytes() >= 100 * MEMBER_OVERHEAD);
        z.insert(b"member7", -1.0, &limits);
        z.pop(false);
        for i in 0..99 {
            z.remove(format!("member{i}").as_bytes());
        }
        assert!(z.is_empty());
        assert_eq!(z.heap_bytes(), 0);
    }

    #[test]
    fn zscan_pages_meet_every_member_present_throughout() {
        let limits = Encodings::default();
        let mut random = super::super::test_random(0x2545_F491_4F6C_DD1D);
        for round in 0..20 {
            // 1,700 members, just under a growth (1,792 fit 2,048 buckets),
            // so that the arrivals grow the table in mid-walk.
            let mut z = ZSet::default();
            for i in 0..1700 {
                z.insert(format!("m{i}").as_bytes(), i as f64, &limits);
            }
            let layout_at_start = layout(&z);
            let mut throughout: std::collections::BTreeSet<Vec<u8>> =
                z.iter().map(|(m, _)| m.to_vec()).collect();
            let mut seen = std::collections::BTreeSet::new();
            let (mut cursor, mut added, mut pages) = (0, 0, 0);
            loop {
                let count = 1 + random(50) as usize;
                let (next, members) = z.scan_page(cursor, count);
                assert!(members.len() <= count, "round {round}");
                seen.extend(members.into_iter().map(|(m, _)| m.to_vec()));
                pages += 1;
                // Between pages: some leave, some arrive; the arrivals
                // grow the table now and then, changing its layout.
                for _ in 0..random(20) {
                    let victim = format!("m{}", random(1700)).into_bytes();
                    if z.remove(&victim).is_some() {
                        throughout.remove(&victim);
                    }
                }
                for _ in 0..random(40) {
                    z.insert(format!("new{added}").as_bytes(), -1.0, &limits);
                    added += 1;
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
            let missed: Vec<_> = throughout.difference(&seen).collect();
            assert!(missed.is_empty(), "round {round} missed {}", missed.len());
            assert!(pages > 40, "round {round}: {pages} pages, not one reply");
            assert_ne!(layout(&z), layout_at_start, "round {round}: the table grew");
        }
    }

    /// The packed form answers every read as the indexed form does, through
    /// random inserts, re-scores, removals and pops of tied scores.
    #[test]
    fn packed_and_indexed_forms_agree() {
        let packed_limits = Encodings {
            zset_max_listpack_entries: 1000,
            ..Encodings::default()
        };
        let indexed_limits = Encodings {
            zset_max_listpack_entries: 0,
            ..Encodings::default()
        };
        let mut random = super::super::test_random(0x9E37_79B9_7F4A_7C15);
        let (mut packed, mut indexed) = (ZSet::default(), ZSet::default());
        for step in 0..4000 {
            let member = format!("m{}", random(60)).into_bytes();
            let score = random(12) as f64 - 6.0 + if random(4) == 0 { 0.5 } else { 0.0 };
            match random(6) {
                0..=2 => assert_eq!(
                    packed.insert(&member, score, &packed_limits),
                    indexed.insert(&member, score, &indexed_limits),
                    "step {step}"
                ),
                3 => assert_eq!(packed.remove(&member), indexed.remove(&member)),
                4 => {
                    let min = random(2) == 0;
                    assert_eq!(packed.pop(min), indexed.pop(min));
                }
                _ => {}
            }
            assert_eq!(packed.encoding(), "listpack");
            assert_eq!(indexed.encoding(), "skiplist");
            assert_eq!(packed.len(), indexed.len());
            assert_eq!(packed.score(&member), indexed.score(&member));
            assert_eq!(packed.rank(&member), indexed.rank(&member));
            let all: Vec<_> = indexed.iter().collect();
            assert_eq!(packed.iter().collect::<Vec<_>>(), all, "step {step}");
            assert_eq!(
                packed.iter().rev().collect::<Vec<_>>(),
                indexed.iter().rev().collect::<Vec<_>>()
            );
            let bound = |v: u64, open: bool| match v {
                0 => Bound::Unbounded,
                _ if open => Bound::Excluded(v as f64 - 7.0),
                _ => Bound::Included(v as f64 - 7.0),
            };
            let (min, max) = (
                bound(random(14), random(2) == 0),
                bound(random(14), random(2) == 0),
            );
            let (skip, take) = (random(5) as usize, random(6) as usize);
            assert_eq!(
                packed
                    .range_by_score(min, max)
                    .skip(skip)
                    .take(take)
                    .collect::<Vec<_>>(),
                indexed
                    .range_by_score(min, max)
                    .skip(skip)
                    .take(take)
                    .collect::<Vec<_>>()
            );
            assert_eq!(
                packed
                    .range_by_score(min, max)
                    .rev()
                    .skip(skip)
                    .collect::<Vec<_>>(),
                indexed
                    .range_by_score(min, max)
                    .rev()
                    .skip(skip)
                    .collect::<Vec<_>>()
            );
            assert_eq!(
                packed.range_by_score(min, max).count(),
                indexed.range_by_score(min, max).count()
            );
            let rank = random(all.len() as u64 + 2) as usize;
            assert_eq!(packed.nth(rank), indexed.nth(rank));
            let mut both = (packed.iter(), indexed.iter());
            for turn in 0..all.len() + 1 {
                if turn % 3 == 0 {
                    assert_eq!(both.0.next_back(), both.1.next_back());
                } else {
                    assert_eq!(both.0.next(), both.1.next());
                }
            }
        }
    }

    #[test]
    fn random_members_follow_the_count_in_both_forms() {
        for n in [10usize, 1000] {
            let mut z = ZSet::default();
            for i in 0..n {
                z.insert(format!("m{i}").as_bytes(), i as f64, &Encodings::default());
            }
            assert_eq!(matches!(z.members, Members::Indexed(_)), n > 128);
            for count in [1i64, 3, (n / 2) as i64, n as i64 - 1] {
                let picks = z.random_members(count);
                let distinct: std::collections::HashSet<_> = picks.iter().map(|p| p.0).collect();
                assert_eq!(
                    (picks.len(), distinct.len()),
                    (count as usize, count as usize)
                );
                assert!(picks.iter().all(|&(m, s)| z.score(m) == Some(s)));
            }
            // All of them, in score order, as Redis replies.
            let all: Vec<_> = z.iter().collect();
            assert_eq!(z.random_members(n as i64 + 1), all);
            let repeats = z.random_members(-(2 * n as i64));
            assert_eq!(repeats.len(), 2 * n);
            assert!(repeats.iter().all(|&(m, s)| z.score(m) == Some(s)));
        }
    }

    #[test]
    fn a_small_sorted_set_scans_whole_in_score_order() {
        let mut z = ZSet::default();
        z.insert(b"b", 2.0, &Encodings::default());
        z.insert(b"a", 1.0, &Encodings::default());
        assert_eq!(
            z.scan_page(0, 1),
            (0, vec![(&b"a"[..], 1.0), (&b"b"[..], 2.0)])
        );
    }

    #[test]
    fn the_thresholds_in_force_decide() {
        let limits = Encodings {
            zset_max_listpack_entries: 1,
            zset_max_listpack_value: 2,
            ..Encodings::default()
        };
        let mut z = ZSet::default();
        z.insert(b"ab", 1.0, &limits);
        assert_eq!(z.encoding(), "listpack");
        z.insert(b"c", 1.0, &limits);
        assert_eq!(z.encoding(), "skiplist");
        let mut long = ZSet::default();
        long.insert(b"abc", 1.0, &limits);
        assert_eq!(long.encoding(), "skiplist");
    }
}
