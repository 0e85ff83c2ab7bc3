//! A set: an "intset" (sorted integers) while every member is a small
//! integer and there are at most `set-max-intset-entries` of them (512), as
//! in Redis 7.0; a hash table ([`ByteTable`]) otherwise.

use super::byte_table::ByteTable;
use super::{element_bytes, Encodings};
use crate::number::parse_i64;
use crate::util::random_positions;
/// Per-member cost of the table beyond the element: its slot and control byte.
const MEMBER_OVERHEAD: usize = 16;

/// One member as stored: integers of an intset are kept as numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member<'a> {
    /// A member of an intset.
    Int(i64),
    /// A member of a hash set.
    Bytes(&'a [u8]),
}

impl Member<'_> {
    /// The member's string form.
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Member::Int(n) => itoa::Buffer::new().format(n).as_bytes().to_vec(),
            Member::Bytes(bytes) => bytes.to_vec(),
        }
    }
}

#[derive(Debug, Clone)]
enum Repr {
    Ints(Vec<i64>),
    Table(ByteTable<Box<[u8]>>),
}

/// A set value.
#[derive(Debug, Clone)]
pub struct Set {
    repr: Repr,
    bytes: usize,
}

impl Default for Set {
    fn default() -> Set {
        Set {
            repr: Repr::Ints(Vec::new()),
            bytes: 0,
        }
    }
}

impl Set {
    /// Number of members.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Ints(ints) => ints.len(),
            Repr::Table(table) => table.len(),
        }
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `intset` or `hashtable`.
    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Ints(_) => "intset",
            Repr::Table(_) => "hashtable",
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.bytes
    }

    /// True when `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> bool {
        match &self.repr {
            Repr::Ints(ints) => parse_i64(member).is_some_and(|n| ints.binary_search(&n).is_ok()),
            Repr::Table(table) => table.get(member).is_some(),
        }
    }

    fn convert_to_table(&mut self) {
        if let Repr::Ints(ints) = &self.repr {
            let mut table = ByteTable::with_capacity(ints.len() + 1);
            let mut bytes = 0;
            let mut digits = itoa::Buffer::new();
            for n in ints {
                let member = digits.format(*n).as_bytes();
                bytes += element_bytes(member) + MEMBER_OVERHEAD;
                table.get_or_insert_with(member, || member.into());
            }
            self.repr = Repr::Table(table);
            self.bytes = bytes;
        }
    }

    /// Adds a member; true when it is new. An intset becomes a hash set
    /// when the member is not an integer or the set would pass
    /// `set-max-intset-entries`.
    pub fn insert(&mut self, member: &[u8], limits: &Encodings) -> bool {
        if let Repr::Ints(ints) = &mut self.repr {
            if let Some(n) = parse_i64(member) {
                match ints.binary_search(&n) {
                    Ok(_) => return false,
                    Err(at) if ints.len() < limits.set_max_intset_entries => {
                        ints.insert(at, n);
                        self.bytes += 8;
                        return true;
                    }
                    Err(_) => {}
                }
            }
            self.convert_to_table();
        }
        let Repr::Table(table) = &mut self.repr else {
            unreachable!("converted above")
        };
        let (_, added) = table.get_or_insert_with(member, || member.into());
        if added {
            self.bytes += element_bytes(member) + MEMBER_OVERHEAD;
        }
        added
    }

    /// Removes a member; true when it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Ints(ints) => {
                let Some(at) = parse_i64(member).and_then(|n| ints.binary_search(&n).ok()) else {
                    return false;
                };
                ints.remove(at);
                self.bytes -= 8;
                true
            }
            Repr::Table(table) => {
                let removed = table.remove(member).is_some();
                if removed {
                    self.bytes -= element_bytes(member) + MEMBER_OVERHEAD;
                }
                removed
            }
        }
    }

    /// A random member, every member as likely (SPOP, SRANDMEMBER).
    pub fn random_member(&self) -> Option<Member<'_>> {
        match &self.repr {
            Repr::Ints(ints) if ints.is_empty() => None,
            Repr::Ints(ints) => {
                let at = crate::util::random_u64() as usize % ints.len();
                Some(Member::Int(ints[at]))
            }
            Repr::Table(table) => table.random().map(|m| Member::Bytes(m)),
        }
    }

    /// Random members as SRANDMEMBER's count asks: a negative count picks
    /// that many independently (repeats allowed); a count of at least the
    /// set's size gives every member; a smaller one, that many distinct.
    pub fn random_members(&self, count: i64) -> Vec<Member<'_>> {
        match &self.repr {
            Repr::Ints(ints) => random_positions(ints.len(), count)
                .into_iter()
                .map(|at| Member::Int(ints[at]))
                .collect(),
            Repr::Table(table) => table
                .random_items(count)
                .into_iter()
                .map(|m| Member::Bytes(m))
                .collect(),
        }
    }

    /// One page of SSCAN from `cursor`, visiting about `count` members: the
    /// next cursor (0 when done) and the members visited. An intset comes
    /// back whole with cursor 0, as Redis's small encodings do. A table is
    /// walked bucket by bucket; a cursor issued before the table last
    /// reorganised starts again from its first bucket, so a member present
    /// throughout may come back twice but is never missed.
    pub fn scan_page(&self, cursor: u64, count: usize) -> (u64, Vec<Member<'_>>) {
        match &self.repr {
            Repr::Ints(_) => (0, self.iter().collect()),
            Repr::Table(table) => {
                let (next, members) = table.scan_page(cursor, count);
                (
                    next,
                    members.into_iter().map(|m| Member::Bytes(m)).collect(),
                )
            }
        }
    }

    /// Members in Redis's iteration order (numeric for an intset).
    pub fn iter(&self) -> Box<dyn Iterator<Item = Member<'_>> + '_> {
        match &self.repr {
            Repr::Ints(ints) => Box::new(ints.iter().map(|n| Member::Int(*n))),
            Repr::Table(table) => Box::new(table.iter().map(|m| Member::Bytes(m))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_stay_sorted_until_a_string_arrives() {
        let mut set = Set::default();
        for m in [&b"10"[..], b"-3", b"7", b"10"] {
            set.insert(m, &Encodings::default());
        }
        assert_eq!(set.encoding(), "intset");
        let members: Vec<_> = set.iter().map(Member::to_vec).collect();
        assert_eq!(members, vec![b"-3".to_vec(), b"7".to_vec(), b"10".to_vec()]);
        assert!(set.contains(b"7"));
        assert!(!set.contains(b"07"));
        assert!(set.insert(b"07", &Encodings::default()));
        assert_eq!(set.encoding(), "hashtable");
        assert!(set.contains(b"7") && set.contains(b"07"));
        for m in [&b"10"[..], b"-3", b"7", b"07"] {
            assert!(set.remove(m));
        }
        assert!(set.is_empty());
        assert_eq!(set.heap_bytes(), 0);
    }

    #[test]
    fn more_integers_than_set_max_intset_entries_make_a_hash_table() {
        for max in [512, 3, 0] {
            let limits = Encodings {
                set_max_intset_entries: max,
                ..Encodings::default()
            };
            let mut set = Set::default();
            for i in 0..max {
                set.insert(i.to_string().as_bytes(), &limits);
            }
            assert_eq!(set.encoding(), "intset", "{max}");
            set.insert(b"-1", &limits);
            assert_eq!(set.encoding(), "hashtable", "{max}");
            assert_eq!(set.len(), max + 1);
        }
    }

    /// SCAN's promise over a table: every member present from the first
    /// page to the last is returned, however members come and go between
    /// pages; and a page visits at most COUNT positions.
    #[test]
    fn a_paged_scan_returns_every_member_present_throughout() {
        let limits = Encodings::default();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut random = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for round in 0..20 {
            let mut set = Set::default();
            for i in 0..2000 {
                set.insert(format!("m{i}").as_bytes(), &limits);
            }
            let mut throughout: std::collections::HashSet<Vec<u8>> =
                set.iter().map(Member::to_vec).collect();
            let mut seen = std::collections::HashSet::new();
            let mut cursor = 0;
            let mut added = 0;
            loop {
                let count = 1 + random(50) as usize;
                let (next, members) = set.scan_page(cursor, count);
                assert!(members.len() <= count, "round {round}");
                seen.extend(members.into_iter().map(Member::to_vec));
                // Between pages: some members leave, some arrive.
                for _ in 0..random(20) {
                    let victim = format!("m{}", random(2000)).into_bytes();
                    if set.remove(&victim) {
                        throughout.remove(&victim);
                    }
                }
                for _ in 0..random(20) {
                    set.insert(format!("new{added}").as_bytes(), &limits);
                    added += 1;
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
            let missed: Vec<_> = throughout.difference(&seen).collect();
            assert!(missed.is_empty(), "round {round} missed {}", missed.len());
        }
    }

    /// A scan that outlives a growth of the table starts again rather
    /// than miss members that moved behind it.
    #[test]
    fn a_scan_across_a_growth_still_meets_every_member() {
        let limits = Encodings::default();
        let mut set = Set::default();
        for i in 0..600 {
            set.insert(format!("m{i}").as_bytes(), &limits);
        }
        let (cursor, first) = set.scan_page(0, 10);
        assert_eq!(first.len(), 10);
        let first: Vec<_> = first.into_iter().map(Member::to_vec).collect();
        for i in 0..5000 {
            set.insert(format!("new{i}").as_bytes(), &limits);
        }
        let mut seen: std::collections::HashSet<Vec<u8>> = first.into_iter().collect();
        let (mut cursor, mut pages) = (cursor, 0);
        loop {
            let (next, members) = set.scan_page(cursor, 100);
            seen.extend(members.into_iter().map(Member::to_vec));
            pages += 1;
            if next == 0 {
                break;
            }
            cursor = next;
        }
        assert!(pages > 1);
        for i in 0..600 {
            assert!(seen.contains(format!("m{i}").as_bytes()), "m{i}");
        }
    }

    /// Emptying most of a large set shrinks its table, which keeps random
    /// picks from probing empty buckets, and every pick is a member.
    #[test]
    fn a_set_emptied_shrinks_and_random_picks_stay_members() {
        let limits = Encodings::default();
        let mut set = Set::default();
        for i in 0..10_000 {
            set.insert(format!("m{i}").as_bytes(), &limits);
        }
        let Repr::Table(table) = &set.repr else {
            panic!("a table")
        };
        let (big, epoch) = table.shape();
        for i in 0..9_990 {
            assert!(set.remove(format!("m{i}").as_bytes()));
        }
        let Repr::Table(table) = &set.repr else {
            panic!("a table")
        };
        let (small, shrunk) = table.shape();
        assert!(small * 64 <= big, "{small} buckets of {big}");
        assert_ne!(shrunk, epoch);
        let left: std::collections::HashSet<Vec<u8>> = set.iter().map(Member::to_vec).collect();
        assert_eq!(left.len(), 10);
        let mut picked = std::collections::HashSet::new();
        for _ in 0..1000 {
            let member = set.random_member().map(Member::to_vec);
            assert!(member.as_ref().is_some_and(|m| left.contains(m)));
            picked.extend(member);
        }
        assert_eq!(picked, left, "1000 picks of 10 members meet them all");
    }

    #[test]
    fn random_members_follow_the_count() {
        let limits = Encodings::default();
        for n in [5usize, 100, 2000] {
            for kind in ["int", "str"] {
                let mut set = Set::default();
                for i in 0..n {
                    let member = if kind == "int" {
                        i.to_string()
                    } else {
                        format!("m{i}")
                    };
                    set.insert(member.as_bytes(), &limits);
                }
                for count in [1i64, 2, (n / 3) as i64, (n / 2) as i64, n as i64 - 1] {
                    let picks: Vec<_> = set
                        .random_members(count)
                        .into_iter()
                        .map(Member::to_vec)
                        .collect();
                    let distinct: std::collections::HashSet<_> = picks.iter().collect();
                    assert_eq!(
                        (picks.len(), distinct.len()),
                        (count as usize, count as usize),
                        "{kind} {n} {count}"
                    );
                    assert!(picks.iter().all(|m| set.contains(m)));
                }
                assert_eq!(set.random_members(n as i64 + 7).len(), n);
                let repeats = set.random_members(-(3 * n as i64));
                assert_eq!(repeats.len(), 3 * n);
                assert!(repeats.iter().all(|m| set.contains(&m.to_vec())));
            }
        }
        assert!(Set::default().random_members(-3).is_empty());
        assert_eq!(Set::default().random_member(), None);
    }

    #[test]
    fn an_intset_comes_back_whole() {
        let mut set = Set::default();
        for i in 0..100 {
            set.insert(i.to_string().as_bytes(), &Encodings::default());
        }
        let (next, members) = set.scan_page(0, 10);
        assert_eq!((next, members.len()), (0, 100));
    }
}
