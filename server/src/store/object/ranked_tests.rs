//! The B+tree's tests: its order and ranks against an ordered model
//! through random inserts and removals, a deep tree growing and shrinking
//! whole, and ranks past the end.

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

/// Counts agree with what is under each child, separators bound
/// their children, leaves hold every member in order through the
/// chain, both ways: the invariants ranks rest on.
fn check_links(order: &RankedOrder) {
    fn walk(order: &RankedOrder, at: u32, out: &mut Vec<Key>) -> usize {
        match &order.nodes[at as usize] {
            Node::Leaf { items, .. } => {
                out.extend(items.iter().map(|i| Key(i.score, i.member.to_vec())));
                items.len()
            }
            Node::Inner {
                children,
                counts,
                separators,
            } => {
                assert_eq!(separators.len() + 1, children.len());
                assert_eq!(counts.len(), children.len());
                let mut total = 0;
                for (i, &child) in children.iter().enumerate() {
                    let before = out.len();
                    let n = walk(order, child, out);
                    assert_eq!(n, counts[i]);
                    assert!(n > 0, "an empty child stays");
                    if let Some(s) = separators.get(i) {
                        let s = Key(s.score, s.member.to_vec());
                        assert!(out[before..].iter().all(|k| *k <= s));
                    }
                    if i > 0 {
                        let s = &separators[i - 1];
                        let s = Key(s.score, s.member.to_vec());
                        assert!(out[before..].iter().all(|k| *k > s));
                    }
                    total += n;
                }
                total
            }
        }
    }
    let mut all = Vec::new();
    assert_eq!(walk(order, order.root, &mut all), order.len);
    assert!(all.windows(2).all(|w| w[0] < w[1]));
    let mut chained = Vec::new();
    let mut leaf = order.first;
    let mut previous = NIL;
    while leaf != NIL {
        let Node::Leaf { items, prev, next } = &order.nodes[leaf as usize] else {
            panic!("a leaf in the chain");
        };
        assert_eq!(*prev, previous);
        chained.extend(items.iter().map(|i| Key(i.score, i.member.to_vec())));
        previous = leaf;
        leaf = *next;
    }
    assert_eq!(order.last, previous);
    assert_eq!(chained, all);
}

#[test]
fn agrees_with_an_ordered_model_through_random_inserts_and_removes() {
    let mut random = super::super::test_random(0x2545_F491_4F6C_DD1D);
    let mut order = RankedOrder::default();
    let mut model = BTreeSet::new();
    for step in 0..30000 {
        // Few distinct scores, so members break most ties.
        let key = Key(
            random(40) as f64 - 20.0,
            format!("m{}", random(3000)).into_bytes(),
        );
        if random(3) == 0 {
            let removed = order.remove(key.0, &key.1).map(|m| m.to_vec());
            assert_eq!(removed.is_some(), model.remove(&key), "step {step}");
            assert_eq!(removed.unwrap_or_else(|| key.1.clone()), key.1);
        } else if !model.contains(&key) {
            order.insert(key.0, key.1.clone().into_boxed_slice());
            model.insert(key.clone());
        }
        if step % 997 == 0 || step < 300 {
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
        order.nodes.len() == 1,
        "an emptied order gives its nodes back"
    );
}

fn members_skip(order: &RankedOrder, start: usize, end: usize, skip: usize) -> Vec<Key> {
    members_from(order.ranks(start, end).skip(skip))
}

fn members_from<'a>(it: impl Iterator<Item = (&'a [u8], f64)>) -> Vec<Key> {
    it.map(|(m, s)| Key(s, m.to_vec())).collect()
}

/// Three levels and back: 20,000 members in, then out in a scrambled
/// order, the invariants and every rank checked along the way.
#[test]
fn a_deep_tree_grows_and_shrinks_whole() {
    let mut order = RankedOrder::default();
    let n = 20_000u64;
    // A permutation of 0..n (n and 7,919 are coprime).
    let keys: Vec<Key> = (0..n)
        .map(|i| (i * 7_919) % n)
        .map(|i| Key((i / 3) as f64, format!("{i}").into_bytes()))
        .collect();
    for (step, key) in keys.iter().enumerate() {
        order.insert(key.0, key.1.clone().into_boxed_slice());
        if step % 4_999 == 0 {
            check_links(&order);
        }
    }
    check_links(&order);
    assert!(
        matches!(&order.nodes[order.root as usize], Node::Inner { children, .. }
        if children.iter().any(|&c| matches!(order.nodes[c as usize], Node::Inner { .. })))
    );
    let mut sorted = keys.clone();
    sorted.sort();
    for (rank, key) in sorted.iter().enumerate().step_by(97) {
        assert_eq!(order.rank(key.0, &key.1), Some(rank));
        assert_eq!(
            order.ranks(rank, rank + 1).next().map(|(m, _)| m.to_vec()),
            Some(key.1.clone())
        );
    }
    for (step, key) in keys.iter().rev().enumerate() {
        assert_eq!(order.remove(key.0, &key.1).as_deref(), Some(&key.1[..]));
        if step % 3_001 == 0 {
            check_links(&order);
        }
    }
    assert_eq!(order.len, 0);
    assert_eq!(order.nodes.len(), 1);
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
