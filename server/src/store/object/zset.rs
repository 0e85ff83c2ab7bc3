//! A sorted set: members ordered by score, then by member bytes.
//!
//! Two indexes over the same members, as Redis keeps a dict beside its
//! skiplist: a hash map member → score for ZSCORE and updates, and a B-tree of
//! (score, member) for ranges. A B-tree has no rank index, so ZRANK and
//! ranges by rank walk from the nearer end: O(rank), not Redis's O(log N).

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::ops::Bound;

use hashbrown::{DefaultHashBuilder, HashMap};

use super::{element_bytes, Encodings};
/// Per-member cost beyond its two copies: scores, map slot, tree node share.
const MEMBER_OVERHEAD: usize = 40;

/// A score, ordered as Redis compares them (`<` on doubles; NaN never stored).
#[derive(Debug, Clone, Copy)]
pub struct Score(pub f64);

impl PartialEq for Score {
    fn eq(&self, other: &Score) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Score) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Score {
    fn cmp(&self, other: &Score) -> Ordering {
        self.0.partial_cmp(&other.0).unwrap_or(Ordering::Equal)
    }
}

/// A sorted-set value.
#[derive(Debug, Clone, Default)]
pub struct ZSet {
    scores: HashMap<Box<[u8]>, f64, DefaultHashBuilder>,
    order: BTreeSet<(Score, Box<[u8]>)>,
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
        self.scores.get(member).copied()
    }

    /// Sets a member's score; returns the previous score. Past
    /// `zset-max-listpack-value` or `-entries` the set is one Redis would
    /// have converted to a skiplist.
    pub fn insert(&mut self, member: &[u8], score: f64, limits: &Encodings) -> Option<f64> {
        // Redis 7.0 replies 0 for a score given as -0: store zero unsigned.
        let score = if score == 0.0 { 0.0 } else { score };
        if let Some(old) = self.scores.get_mut(member) {
            let previous = *old;
            // Redis compares with `!=`: -0 and 0 are the same score, and the
            // stored one stays.
            if previous != score {
                *old = score;
                #[allow(clippy::expect_used)] // both indexes hold every member
                let (_, boxed) = self
                    .order
                    .take(&(Score(previous), Box::from(member)))
                    .expect("indexes agree");
                self.order.insert((Score(score), boxed));
            }
            return Some(previous);
        }
        if member.len() > limits.zset_max_listpack_value {
            self.converted = true;
        }
        self.bytes += member_cost(member);
        self.scores.insert(member.into(), score);
        self.order.insert((Score(score), member.into()));
        if self.scores.len() > limits.zset_max_listpack_entries {
            self.converted = true;
        }
        None
    }

    /// Removes a member; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let score = self.scores.remove(member)?;
        self.order.remove(&(Score(score), Box::from(member)));
        self.bytes -= member_cost(member);
        Some(score)
    }

    /// Removes and returns the lowest (`min`) or highest member.
    pub fn pop(&mut self, min: bool) -> Option<(Box<[u8]>, f64)> {
        let (score, member) = if min {
            self.order.pop_first()
        } else {
            self.order.pop_last()
        }?;
        self.scores.remove(&member);
        self.bytes -= member_cost(&member);
        Some((member, score.0))
    }

    /// Members in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> {
        self.order.iter().map(|(s, m)| (&**m, s.0))
    }

    /// Members whose score lies within the bounds, in ascending order.
    pub fn range_by_score(
        &self,
        min: Bound<f64>,
        max: Bound<f64>,
    ) -> impl DoubleEndedIterator<Item = (&[u8], f64)> {
        // The tree is ordered by (score, member) and the empty member sorts
        // first, so (s, "") bounds every member of score s from below. The
        // scores are turned into an inclusive lower and exclusive upper
        // score; the filter settles the infinite ends next_up cannot move.
        let lower = match min {
            Bound::Included(s) => Some(s),
            Bound::Excluded(s) => Some(s.next_up()),
            Bound::Unbounded => None,
        };
        let upper = match max {
            Bound::Included(s) if s < f64::INFINITY => Some(s.next_up()),
            Bound::Excluded(s) => Some(s),
            _ => None,
        };
        let nothing = matches!((lower, upper), (Some(l), Some(u)) if l >= u);
        let start = match lower {
            Some(l) if !nothing => Bound::Included((Score(l), Box::default())),
            _ => Bound::Unbounded,
        };
        let end = match upper {
            _ if nothing => Bound::Excluded((Score(f64::NEG_INFINITY), Box::default())),
            Some(u) => Bound::Excluded((Score(u), Box::default())),
            None => Bound::Unbounded,
        };
        let within = move |score: f64| {
            let above = match min {
                Bound::Included(m) => score >= m,
                Bound::Excluded(m) => score > m,
                Bound::Unbounded => true,
            };
            let below = match max {
                Bound::Included(m) => score <= m,
                Bound::Excluded(m) => score < m,
                Bound::Unbounded => true,
            };
            above && below
        };
        self.order
            .range::<(Score, Box<[u8]>), _>((start, end))
            .filter(move |(s, _)| within(s.0))
            .map(|(s, m)| (&**m, s.0))
    }

    /// Zero-based rank of a member in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        let key = (Score(score), Box::from(member));
        let below = self.order.range(..&key).count();
        Some(below)
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
