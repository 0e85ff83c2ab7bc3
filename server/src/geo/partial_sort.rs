//! Redis's pqsort (pqsort.c, NetBSD's quicksort taught to skip the parts
//! of the array outside a range of positions): sorts only what it takes to
//! put the right elements, in order, at positions `left..=right`.
//!
//! GEORADIUS and GEOSEARCH with a COUNT short of the matches sort this way,
//! and elements that compare equal (points at the same distance) end up in
//! the order this exact algorithm leaves them in. Kept step for step so the
//! replies match Redis's, ties included.

use std::cmp::Ordering;

/// Sorts `v` by `cmp` enough that positions `left..=right` hold what a
/// full sort would put there (`left <= right < v.len()`).
pub fn partial_sort<T>(v: &mut [T], cmp: impl Fn(&T, &T) -> Ordering, left: usize, right: usize) {
    sort_part(v, &cmp, 0, v.len(), left, right);
}

/// The median of three positions, as NetBSD's med3 picks it.
fn median_of_three<T>(
    v: &[T],
    cmp: &impl Fn(&T, &T) -> Ordering,
    a: usize,
    b: usize,
    c: usize,
) -> usize {
    if cmp(&v[a], &v[b]) == Ordering::Less {
        if cmp(&v[b], &v[c]) == Ordering::Less {
            b
        } else if cmp(&v[a], &v[c]) == Ordering::Less {
            c
        } else {
            a
        }
    } else if cmp(&v[b], &v[c]) == Ordering::Greater {
        b
    } else if cmp(&v[a], &v[c]) == Ordering::Less {
        a
    } else {
        c
    }
}

/// Swaps the `n` elements from `a` with the `n` from `b`, pair by pair.
fn swap_runs<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

/// True when `start..start + n` holds a position of `left..=right`.
fn overlaps(start: usize, n: usize, left: usize, right: usize) -> bool {
    !(right < start || left >= start + n)
}

/// Sorts the `n` elements from `start` (the C code's `a`, `n`).
fn sort_part<T>(
    v: &mut [T],
    cmp: &impl Fn(&T, &T) -> Ordering,
    mut start: usize,
    mut n: usize,
    left: usize,
    right: usize,
) {
    loop {
        if n < 7 {
            // Insertion sort.
            for pm in start + 1..start + n {
                let mut pl = pm;
                while pl > start && cmp(&v[pl - 1], &v[pl]) == Ordering::Greater {
                    v.swap(pl, pl - 1);
                    pl -= 1;
                }
            }
            return;
        }
        let mut pm = start + n / 2;
        if n > 7 {
            let mut pl = start;
            let mut pn = start + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = median_of_three(v, cmp, pl, pl + d, pl + 2 * d);
                pm = median_of_three(v, cmp, pm - d, pm, pm + d);
                pn = median_of_three(v, cmp, pn - 2 * d, pn - d, pn);
            }
            pm = median_of_three(v, cmp, pl, pm, pn);
        }
        v.swap(start, pm);
        // Elements equal to the pivot gather at both ends (from `start`
        // up to `pa`, from `pd` down to the end) and move to the middle
        // once the partition is done.
        let (mut pa, mut pb) = (start + 1, start + 1);
        let (mut pc, mut pd) = (start + n - 1, start + n - 1);
        loop {
            while pb <= pc {
                let order = cmp(&v[pb], &v[start]);
                if order == Ordering::Greater {
                    break;
                }
                if order == Ordering::Equal {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let order = cmp(&v[pc], &v[start]);
                if order == Ordering::Less {
                    break;
                }
                if order == Ordering::Equal {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let end = start + n;
        let r = (pa - start).min(pb - pa);
        swap_runs(v, start, pb - r, r);
        let r = (pd - pc).min(end - pd - 1);
        swap_runs(v, pb, end - r, r);
        let below = pb - pa;
        if below > 1 && overlaps(start, below, left, right) {
            sort_part(v, cmp, start, below, left, right);
        }
        let above = pd - pc;
        if above > 1 {
            // Iterate rather than recurse, as the C code does.
            start = end - above;
            n = above;
            if overlaps(start, n, left, right) {
                continue;
            }
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (no test dependency needed).
    fn numbers(seed: u64, n: usize, modulo: u64) -> Vec<u64> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 33) % modulo
            })
            .collect()
    }

    #[test]
    fn the_range_holds_what_a_full_sort_puts_there() {
        for seed in 0..200 {
            for n in [1, 5, 7, 8, 40, 41, 100, 1000] {
                let original = numbers(seed, n, if seed % 2 == 0 { 10 } else { 1 << 30 });
                let mut sorted = original.clone();
                sorted.sort_unstable();
                let left = (seed as usize * 7) % n;
                let right = left + (seed as usize * 13) % (n - left);
                let mut partial = original.clone();
                partial_sort(&mut partial, |a, b| a.cmp(b), left, right);
                assert_eq!(
                    partial[left..=right],
                    sorted[left..=right],
                    "seed {seed} n {n}"
                );
                partial.sort_unstable();
                assert_eq!(partial, sorted, "seed {seed} n {n}: elements lost");
            }
        }
    }

    #[test]
    fn ties_end_where_pqsort_leaves_them() {
        // Pairs compared by their first half only; the second half shows
        // where each ended up. The expected orders are what Redis 7.0.15's
        // pqsort.c leaves, compiled and run on the same inputs.
        let mut v = vec![
            (2, 'a'),
            (1, 'b'),
            (2, 'c'),
            (1, 'a'),
            (0, 'x'),
            (1, 'c'),
            (2, 'b'),
        ];
        partial_sort(&mut v, |a, b| a.0.cmp(&b.0), 0, 2);
        let expected = [
            (0, 'x'),
            (1, 'b'),
            (1, 'a'),
            (1, 'c'),
            (2, 'c'),
            (2, 'b'),
            (2, 'a'),
        ];
        assert_eq!(v, expected);

        let mut w: Vec<(u32, u32)> = (0..60).map(|i| ((i * 7) % 5, i)).collect();
        partial_sort(&mut w, |a, b| a.0.cmp(&b.0), 0, 9);
        let tags: Vec<u32> = w.iter().map(|p| p.1).collect();
        let expected = [
            30, 35, 50, 15, 5, 55, 20, 40, 0, 45, 10, 25, 18, 48, 38, 8, 43, 13, 3, 53, 23, 28, 33,
            58, 16, 56, 26, 51, 41, 6, 11, 1, 36, 21, 31, 46, 59, 4, 9, 14, 19, 24, 29, 34, 39, 44,
            49, 54, 37, 7, 32, 27, 52, 22, 2, 17, 12, 57, 42, 47,
        ];
        assert_eq!(tags, expected);
    }
}
