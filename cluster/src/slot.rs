//! Hash slots: CRC16 (XMODEM, Redis's crc16.c) of the key, or of its hash
//! tag, modulo 16384.

use crc::{Crc, Table, CRC_16_XMODEM};

/// Slice-by-16 tables: the slot of every keyed command is computed on the
/// request path, and keys are short.
const CRC16: Crc<u16, Table<16>> = Crc::<u16, Table<16>>::new(&CRC_16_XMODEM);

/// Redis's crc16 of `bytes`.
#[inline]
pub fn crc16(bytes: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("pclmulqdq") {
        // SAFETY: the CPU has been seen to support the instructions.
        return unsafe { clmul::crc16(bytes) };
    }
    CRC16.checksum(bytes)
}

/// CRC16 by carry-less multiplication, 16 bytes per step: a table CRC
/// costs a load and an xor per byte, and a cluster node hashes the key of
/// every keyed command (callgrind: 66 instructions for a 16-byte key with
/// slice-by-16 tables; about 30 here). The method is Intel's "Fast CRC
/// Computation for Generic Polynomials Using PCLMULQDQ" cut down to one
/// block: XMODEM's CRC of a message M is M(x)·x^16 mod P(x), its initial
/// value is 0 (so zeros before a message change nothing, and a short
/// message is a block with leading zeros), and the CRC of A‖B is that of
/// B with CRC(A) added to its first two bytes.
#[cfg(target_arch = "x86_64")]
mod clmul {
    use std::arch::x86_64::{
        _mm_clmulepi64_si128, _mm_cvtsi128_si32, _mm_cvtsi64_si128, _mm_slli_si128, _mm_xor_si128,
    };

    /// P(x) = x^16 + x^12 + x^5 + 1.
    const P: u64 = 0x1_1021;
    /// x^80 mod P: folds a block's high 64 bits onto its low ones.
    const X80: u64 = x_pow_mod_p(80);
    /// x^64 mod P: folds the 16 bits above a 64-bit value onto it.
    const X64: u64 = x_pow_mod_p(64);
    /// ⌊x^64 / P⌋: Barrett's reduction of a 64-bit value to 16 bits.
    const MU: u64 = x64_div_p();

    const fn x_pow_mod_p(power: u32) -> u64 {
        let mut r = 1u64;
        let mut i = 0;
        while i < power {
            r <<= 1;
            if r & 0x1_0000 != 0 {
                r ^= P;
            }
            i += 1;
        }
        r
    }

    const fn x64_div_p() -> u64 {
        let mut rem = 1u128 << 64;
        let mut quotient = 0u64;
        let mut bit = 48;
        loop {
            if rem & (1u128 << (bit + 16)) != 0 {
                quotient |= 1 << bit;
                rem ^= (P as u128) << bit;
            }
            if bit == 0 {
                return quotient;
            }
            bit -= 1;
        }
    }

    #[target_feature(enable = "pclmulqdq")]
    pub(super) unsafe fn crc16(bytes: &[u8]) -> u16 {
        let first = match bytes.len() % 16 {
            0 => 16.min(bytes.len()),
            n => n,
        };
        let (head, rest) = bytes.split_at(first);
        let value = big_endian(head);
        let mut crc = block((value >> 64) as u64, value as u64);
        for chunk in rest.chunks_exact(16) {
            crc = block(word(chunk, 0) ^ (u64::from(crc) << 48), word(chunk, 8));
        }
        crc
    }

    /// The eight bytes of `bytes` from `at`, big-endian.
    #[inline(always)]
    fn word(bytes: &[u8], at: usize) -> u64 {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(&bytes[at..at + 8]);
        u64::from_be_bytes(eight)
    }

    /// The `len` bytes (8 to 16) whose first eight are `first` and last
    /// eight `last`, as one number: where the words overlap they hold the
    /// same bytes in the same places, so or-ing them is exact.
    #[inline(always)]
    fn joined(first: u64, last: u64, len: usize) -> u128 {
        (u128::from(first) << (8 * (len - 8))) | u128::from(last)
    }

    /// The CRC16 of a key of 8 to 32 bytes without a `{` (so hashed
    /// whole), its words loaded once for both questions; `None` for other
    /// keys, or without the instructions. Most keys of a limiter's counters
    /// and of benchmarks are this long.
    #[inline(always)]
    pub(super) fn untagged_short_key_crc16(key: &[u8]) -> Option<u16> {
        let len = key.len();
        if !(8..=32).contains(&len) || !std::arch::is_x86_feature_detected!("pclmulqdq") {
            return None;
        }
        let has_brace = |w: u64| super::has_byte(w, b'{');
        let (first, last) = (word(key, 0), word(key, len - 8));
        if len <= 16 {
            // One block: two words, overlapping where shorter.
            if has_brace(first) || has_brace(last) {
                return None;
            }
            let value = joined(first, last, len);
            // SAFETY: the CPU has been seen to support the instructions.
            return Some(unsafe { block((value >> 64) as u64, value as u64) });
        }
        // Two blocks: a head of the first len - 16 bytes (the first 16
        // shifted down), then the last 16.
        let (second, before_last) = (word(key, 8), word(key, len - 16));
        if has_brace(first) || has_brace(second) || has_brace(before_last) || has_brace(last) {
            return None;
        }
        let head = ((u128::from(first) << 64) | u128::from(second)) >> (8 * (32 - len));
        // SAFETY: as above.
        let crc = unsafe { block((head >> 64) as u64, head as u64) };
        Some(unsafe { block(before_last ^ (u64::from(crc) << 48), last) })
    }

    /// The bytes (at most 16) as one big-endian number, in at most two
    /// loads (overlapping, as in [`joined`]).
    #[inline(always)]
    fn big_endian(bytes: &[u8]) -> u128 {
        let len = bytes.len();
        if len >= 8 {
            joined(word(bytes, 0), word(bytes, len - 8), len)
        } else if len >= 4 {
            let high = u32::from_be_bytes(bytes[..4].try_into().unwrap());
            let low = u32::from_be_bytes(bytes[len - 4..].try_into().unwrap());
            u128::from((u64::from(high) << (8 * (len - 4))) | u64::from(low))
        } else {
            bytes
                .iter()
                .fold(0u128, |value, &b| (value << 8) | u128::from(b))
        }
    }

    /// A(x)·x^16 mod P for the 128-bit A = high·x^64 + low, kept in vector
    /// registers throughout (an immediate picks each product's halves).
    #[inline]
    #[target_feature(enable = "pclmulqdq")]
    fn block(high: u64, low: u64) -> u16 {
        let register = |word: u64| _mm_cvtsi64_si128(word as i64);
        // ≡ A·x^16 = high·x^80 + low·x^16, at most 80 bits.
        let wide = _mm_xor_si128(
            _mm_clmulepi64_si128::<0x00>(register(high), register(X80)),
            _mm_slli_si128::<2>(register(low)),
        );
        // Its bits above 64 folded down: ≡ A·x^16 in the low 64 bits.
        let narrow = _mm_xor_si128(wide, _mm_clmulepi64_si128::<0x01>(wide, register(X64)));
        // Barrett: the quotient by P is the high half of U·⌊x^64/P⌋ for
        // the low-half U (exact for U below x^64); U - quotient·P is the
        // remainder, in U's low 16 bits.
        let quotient = _mm_clmulepi64_si128::<0x00>(narrow, register(MU));
        let multiple = _mm_clmulepi64_si128::<0x01>(quotient, register(P));
        _mm_cvtsi128_si32(_mm_xor_si128(narrow, multiple)) as u16
    }
}

/// The part of a key that is hashed: the first `{...}` with something in
/// it, else the whole key (Redis's keyHashSlot).
pub fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = find_byte(key, b'{') else {
        return key;
    };
    match find_byte(&key[open + 1..], b'}') {
        Some(0) | None => key,
        Some(len) => &key[open + 1..open + 1 + len],
    }
}

/// The first `needle` in `haystack`, eight bytes at a time (a cluster node
/// looks for a hash tag in every keyed command's key: a byte loop over a
/// typical key cost more than its CRC16, and memchr's vector search does
/// not pay off below 32 bytes). The last word overlaps the one before it
/// rather than ending in a byte loop: a 16-byte key is two words.
#[inline]
fn find_byte(haystack: &[u8], needle: u8) -> Option<usize> {
    let len = haystack.len();
    if len < 8 {
        return haystack.iter().position(|&b| b == needle);
    }
    let pattern = ONES * needle as u64;
    let mut at = 0;
    while at + 8 <= len {
        if let Some(i) = first_zero_byte(word_at(haystack, at) ^ pattern) {
            return Some(at + i);
        }
        at += 8;
    }
    if at < len {
        // Its bytes before `at` matched nothing above, so a match in it
        // is at `at` or later.
        let last = len - 8;
        if let Some(i) = first_zero_byte(word_at(haystack, last) ^ pattern) {
            return Some(last + i);
        }
    }
    None
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

#[inline(always)]
fn word_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// The index of the lowest zero byte of `word`: borrows only flag bytes
/// above a real zero, so the lowest flagged byte is the first zero.
#[inline(always)]
fn first_zero_byte(word: u64) -> Option<usize> {
    let zeros = word.wrapping_sub(ONES) & !word & HIGHS;
    (zeros != 0).then(|| (zeros.trailing_zeros() / 8) as usize)
}

/// The slot of a key.
#[inline]
pub fn key_slot(key: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if let Some(crc) = clmul::untagged_short_key_crc16(key) {
        return crc & 0x3FFF;
    }
    let hashed = hash_tag(key);
    let crc = if hashed.len() < 8 {
        // A limiter's `{identity}` tag is often this short: a table
        // lookup per byte is cheaper than a block's four multiplications.
        crc16_bytewise(hashed)
    } else {
        crc16(hashed)
    };
    crc & 0x3FFF
}

/// CRC16 a byte at a time (one 256-entry table: Redis's crc16.c).
#[inline]
fn crc16_bytewise(bytes: &[u8]) -> u16 {
    CRC16_BYTEWISE.checksum(bytes)
}

/// For short inputs, where slice-by-16's sixteen tables do not pay.
const CRC16_BYTEWISE: Crc<u16, Table<1>> = Crc::<u16, Table<1>>::new(&CRC_16_XMODEM);

/// True when some byte of `word` is `byte`.
#[inline(always)]
fn has_byte(word: u64, byte: u8) -> bool {
    first_zero_byte(word ^ (ONES * byte as u64)).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The next number of a xorshift generator: fixed seeds, so a failing
    /// input comes back on every run.
    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// Against a plain search, on bytes around the needle's value (where
    /// a word-at-a-time search could borrow into a false match), at every
    /// length up to 40 and so at every way a key splits into words.
    #[test]
    fn find_byte_agrees_with_a_plain_search() {
        let near = [
            b'{' - 1,
            b'{' + 1,
            b'{' ^ 0x80,
            0x00,
            0xff,
            b'}' - 1,
            b'}' + 1,
        ];
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for len in 0..=40 {
            for _ in 0..500 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        let state = xorshift(&mut state);
                        // Each needle one byte in 16, so matches fall anywhere.
                        match state % 16 {
                            0 => b'{',
                            1 => b'}',
                            k => near[k as usize % near.len()],
                        }
                    })
                    .collect();
                for needle in [b'{', b'}'] {
                    assert_eq!(
                        find_byte(&bytes, needle),
                        bytes.iter().position(|&b| b == needle),
                        "{bytes:?} {needle}"
                    );
                }
            }
        }
    }

    #[test]
    fn find_byte_finds_the_first_match_anywhere() {
        for len in 0..40 {
            for at in 0..len {
                let mut bytes = vec![b'a'; len];
                bytes[at] = b'{';
                if at + 3 < len {
                    bytes[at + 3] = b'{';
                }
                assert_eq!(find_byte(&bytes, b'{'), Some(at), "{len} {at}");
            }
            assert_eq!(find_byte(&vec![b'a'; len], b'{'), None);
        }
        // Bytes just above and below the needle are not matches.
        assert_eq!(find_byte(b"zzzzzzzz|zz{", b'{'), Some(11));
        assert_eq!(find_byte(&[0x7a, 0x7c, 0xfb, 0x7b], b'{'), Some(3));
    }

    /// The carry-less CRC against the table CRC at every length up to 80
    /// (every way a key splits into blocks) and on bytes at the extremes.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn carry_less_crc16_equals_the_table_crc() {
        if !std::arch::is_x86_feature_detected!("pclmulqdq") {
            return;
        }
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for len in 0..=80 {
            for round in 0..300 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        let state = xorshift(&mut state);
                        match round {
                            0 => 0,
                            1 => 0xff,
                            _ => state as u8,
                        }
                    })
                    .collect();
                // SAFETY: the feature was detected above.
                let fast = unsafe { clmul::crc16(&bytes) };
                assert_eq!(fast, CRC16.checksum(&bytes), "{bytes:?}");
            }
        }
    }

    /// The slot of every key, by whichever path it takes, against the
    /// table CRC of its hash tag: keys of every length up to 40, with and
    /// without braces anywhere.
    #[test]
    fn key_slot_equals_the_table_crc_of_the_hash_tag() {
        let mut state = 0xD1B5_4A32_D192_ED03u64;
        for len in 0..=40 {
            for _ in 0..500 {
                let key: Vec<u8> = (0..len)
                    .map(|_| {
                        let state = xorshift(&mut state);
                        match state % 12 {
                            0 => b'{',
                            1 => b'}',
                            _ => (state >> 8) as u8,
                        }
                    })
                    .collect();
                let expected = CRC16.checksum(hash_tag(&key)) & 0x3FFF;
                assert_eq!(key_slot(&key), expected, "{key:?}");
            }
        }
    }

    #[test]
    fn crc16_is_redis_s() {
        // The check value Redis's crc16.c documents.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16_bytewise(b"123456789"), 0x31C3);
        for len in 0..8 {
            let bytes: Vec<u8> = (0..len).map(|i| 0xA5 ^ (i * 37) as u8).collect();
            assert_eq!(crc16_bytewise(&bytes), CRC16.checksum(&bytes));
        }
    }

    #[test]
    fn hash_tags_follow_redis_rules() {
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"nobraces"), b"nobraces");
        assert_eq!(hash_tag(b"open{only"), b"open{only");
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        // Values from Redis's documentation and CLUSTER KEYSLOT.
        assert_eq!(key_slot(b"somekey"), 11058);
        assert_eq!(key_slot(b"foo{hash_tag}"), key_slot(b"hash_tag"));
    }
}
