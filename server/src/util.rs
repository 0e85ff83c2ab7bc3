//! Small helpers with no better home.

use std::cell::Cell;

thread_local! {
    static RANDOM_STATE: Cell<u64> = Cell::new({
        // Seed each thread differently: address of a local, time, thread id hash.
        let local = 0u8;
        let time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        (&local as *const u8 as u64) ^ time ^ 0x9E37_79B9_7F4A_7C15
    });
}

/// A fast non-cryptographic random number (xorshift64*), for choices such as
/// RANDOMKEY where only spread matters.
pub fn random_u64() -> u64 {
    RANDOM_STATE.with(|state| {
        let mut x = state.get() | 1;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

/// `count` of `items` chosen at random, each as likely, in random order:
/// a partial Fisher-Yates shuffle, which leaves the chosen at the front.
pub fn random_choice<T>(mut items: Vec<T>, count: usize) -> Vec<T> {
    let count = count.min(items.len());
    for i in 0..count {
        let j = i + random_u64() as usize % (items.len() - i);
        items.swap(i, j);
    }
    items.truncate(count);
    items
}

/// The positions SRANDMEMBER, HRANDFIELD and ZRANDMEMBER return for a
/// count over `len` elements: every element in order when a non-negative
/// count covers them all (as Redis does), else `count` distinct random
/// positions; a negative count picks `-count` positions with repeats.
pub fn random_positions(len: usize, count: i64) -> Vec<usize> {
    if len == 0 {
        return Vec::new();
    }
    let random = |bound: usize| random_u64() as usize % bound;
    if count < 0 {
        return (0..count.unsigned_abs()).map(|_| random(len)).collect();
    }
    let count = count as usize;
    if count >= len {
        return (0..len).collect();
    }
    if count * 3 > len {
        return random_choice((0..len).collect(), count);
    }
    // Few of many: draw until `count` distinct ones came up, without a
    // vector of every position.
    let mut taken = hashbrown::HashSet::with_capacity(count);
    let mut positions = Vec::with_capacity(count);
    while positions.len() < count {
        let at = random(len);
        if taken.insert(at) {
            positions.push(at);
        }
    }
    positions
}

/// A fresh 40-hex-character id, the form of Redis's run ids and
/// replication ids. Only uniqueness matters: a random hasher state (seeded
/// from the OS) hashes the time and a counter.
pub fn random_hex_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let state = hashbrown::DefaultHashBuilder::default();
    let mut out = String::with_capacity(48);
    for i in 0..3u64 {
        let mut h = state.build_hasher();
        h.write_u64(i ^ time ^ random_u64());
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(40);
    out
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
#[inline]
pub fn is(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

/// Asks the CPU to bring the cache line holding `address` in, for memory
/// about to be read. A prefetch changes no memory, and an address it
/// cannot load (unmapped, or freed since) is ignored rather than faulted
/// on, so a stale or wrong address only wastes the hint.
#[inline]
pub fn prefetch_line(address: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as above, a prefetch cannot fault or change memory.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(address as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_positions_follow_the_count() {
        for len in [1usize, 7, 100, 5000] {
            for count in [1, len / 3, len / 3 + 1, len.saturating_sub(1), len] {
                let picks = random_positions(len, count as i64);
                let distinct: hashbrown::HashSet<_> = picks.iter().collect();
                assert_eq!(
                    (picks.len(), distinct.len()),
                    (count, count),
                    "{len} {count}"
                );
                assert!(picks.iter().all(|&at| at < len));
            }
            assert_eq!(
                random_positions(len, len as i64 + 3),
                (0..len).collect::<Vec<_>>()
            );
            let repeats = random_positions(len, -(2 * len as i64));
            assert_eq!(repeats.len(), 2 * len);
            assert!(repeats.iter().all(|&at| at < len));
        }
        assert!(random_positions(0, 5).is_empty());
    }
}
