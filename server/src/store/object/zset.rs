//! A sorted set: members ordered by score, then by member bytes.
//!
//! Two indexes over the same members, as Redis keeps a dict beside its
//! skiplist: a hash table member → score for ZSCORE, updates and ZSCAN, and
//! Redis's skiplist with spans ([`RankedOrder`]) for order: ranks, ranges
//! and counts in O(log N), as in Redis.

use std::ops::Bound;

use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use super::ranked::{RankedOrder, Ranks};
use super::{element_bytes, Encodings};
/// Per-member cost beyond its two copies: scores, map slot, tree node share.
const MEMBER_OVERHEAD: usize = 40;

/// A sorted-set value.
#[derive(Debug, Clone, Default)]
pub struct ZSet {
    /// Member → score. A table rather than a map for its buckets: ZSCAN
    /// walks them, as Redis's walks its dict's.
    scores: HashTable<(Box<[u8]>, f64)>,
    hasher: DefaultHashBuilder,
    /// Changes whenever an insert may move the table's members (a growth or
    /// a rehash in place): a ZSCAN cursor of another layout starts over.
    layout: u8,
    order: RankedOrder,
    /// True once Redis would have converted it to a skiplist (it never
    /// converts back).
    converted: bool,
    bytes: usize,
}

fn member_cost(member: &[u8]) -> usize {
    2 * element_bytes(member) + MEMBER_OVERHEAD
}

impl ZSet {
    /// Number of members.
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// `listpack` or `skiplist`.
    pub fn encoding(&self) -> &'static str {
        if self.converted {
            "skiplist"
        } else {
            "listpack"
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.bytes
    }

    /// The score of a member.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        let hash = self.hasher.hash_one(member);
        self.scores
            .find(hash, |(m, _)| **m == *member)
            .map(|&(_, score)| score)
    }

    /// Sets a member's score; returns the previous score. Past
    /// `zset-max-listpack-value` or `-entries` the set is one Redis would
    /// have converted to a skiplist.
    pub fn insert(&mut self, member: &[u8], score: f64, limits: &Encodings) -> Option<f64> {
        // Redis 7.0 replies 0 for a score given as -0: store zero unsigned.
        let score = if score == 0.0 { 0.0 } else { score };
        let hash = self.hasher.hash_one(member);
        if let Some((_, old)) = self.scores.find_mut(hash, |(m, _)| **m == *member) {
            let previous = *old;
            // Redis compares with `!=`: -0 and 0 are the same score, and the
            // stored one stays.
            if previous != score {
                *old = score;
                #[allow(clippy::expect_used)] // both indexes hold every member
                let boxed = self.order.remove(previous, member).expect("indexes agree");
                self.order.insert(score, boxed);
            }
            return Some(previous);
        }
        if member.len() > limits.zset_max_listpack_value {
            self.converted = true;
        }
        self.bytes += member_cost(member);
        if self.scores.len() == self.scores.capacity() {
            // The insert below grows the table or rehashes it in place.
            self.layout = self.layout.wrapping_add(1);
        }
        let hasher = &self.hasher;
        self.scores
            .insert_unique(hash, (member.into(), score), |(m, _)| hasher.hash_one(m));
        self.order.insert(score, member.into());
        if self.scores.len() > limits.zset_max_listpack_entries {
            self.converted = true;
        }
        None
    }

    /// Removes a member; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let score = self.take_score(member)?;
        self.order.remove(score, member);
        self.bytes -= member_cost(member);
        Some(score)
    }

    /// Removes and returns the lowest (`min`) or highest member.
    pub fn pop(&mut self, min: bool) -> Option<(Box<[u8]>, f64)> {
        let (score, member) = self.order.pop(min)?;
        self.take_score(&member);
        self.bytes -= member_cost(&member);
        Some((member, score))
    }

    /// Removes a member from the score table; returns its score.
    fn take_score(&mut self, member: &[u8]) -> Option<f64> {
        let hash = self.hasher.hash_one(member);
        let found = self.scores.find_entry(hash, |(m, _)| **m == *member).ok()?;
        let ((_, score), _) = found.remove();
        Some(score)
    }

    /// One page of ZSCAN from `cursor` (0 to start), with about `count`
    /// members, and the cursor to go on from (0 when done). A set small
    /// enough for Redis's listpack comes back whole in score order, as
    /// Redis's does. A larger one is walked bucket by bucket: a removal
    /// leaves the others where they are, so every member present
    /// throughout is met; a cursor from before the table's layout changed
    /// starts over, returning members twice but missing none.
    pub fn scan_page(&self, cursor: u64, count: usize) -> (u64, Vec<(&[u8], f64)>) {
        if !self.converted {
            return (0, self.iter().collect());
        }
        let buckets = self.scores.num_buckets();
        let mut bucket = match cursor {
            c if c & 0xFF == u64::from(self.layout) => usize::try_from(c >> 8).unwrap_or(buckets),
            _ => 0,
        };
        let mut page = Vec::new();
        while bucket < buckets && page.len() < count.max(1) {
            if let Some((member, score)) = self.scores.get_bucket(bucket) {
                page.push((&**member, *score));
            }
            bucket += 1;
        }
        let next = if bucket >= buckets {
            0
        } else {
            (bucket as u64) << 8 | u64::from(self.layout)
        };
        (next, page)
    }

    /// Members in ascending order; skipping ahead (`nth`, `skip`) from
    /// either end costs O(log N), as Redis's ranges by rank.
    pub fn iter(&self) -> Ranks<'_> {
        self.order.iter()
    }

    /// The member at zero-based `rank` in ascending order.
    pub fn nth(&self, rank: usize) -> Option<(&[u8], f64)> {
        self.order.ranks(rank, rank + 1).next()
    }

    /// Members whose score lies within the bounds, in ascending order;
    /// found, counted and skipped into in O(log N).
    pub fn range_by_score(&self, min: Bound<f64>, max: Bound<f64>) -> Ranks<'_> {
        let start = self.order.count_while(|score, _| match min {
            Bound::Included(m) => score < m,
            Bound::Excluded(m) => score <= m,
            Bound::Unbounded => false,
        });
        let end = self.order.count_while(|score, _| match max {
            Bound::Included(m) => score <= m,
            Bound::Excluded(m) => score < m,
            Bound::Unbounded => true,
        });
        self.order.ranks(start, end)
    }

    /// Zero-based rank of a member in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        self.order.rank(score, member)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(z.heap_bytes(), 0);
    }

    #[test]
    fn zscan_pages_meet_every_member_present_throughout() {
        let limits = Encodings::default();
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut random = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..20 {
            // 1,700 members, just under a growth (1,792 fit 2,048 buckets),
            // so that the arrivals grow the table in mid-walk.
            let mut z = ZSet::default();
            for i in 0..1700 {
                z.insert(format!("m{i}").as_bytes(), i as f64, &limits);
            }
            let layout_at_start = z.layout;
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
            assert_ne!(z.layout, layout_at_start, "round {round}: the table grew");
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
