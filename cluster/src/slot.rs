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
    if clmul_supported() {
        // SAFETY: the CPU has been seen to support the instructions.
        return unsafe { clmul::crc16(bytes) };
    }
    CRC16.checksum(bytes)
}

/// True when the CPU has carry-less multiplication and byte shuffles
/// (every x86 CPU with the first has the second; both are checked).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn clmul_supported() -> bool {
    std::arch::is_x86_feature_detected!("pclmulqdq") && std::arch::is_x86_feature_detected!("ssse3")
}

/// CRC16 by carry-less multiplication: a table CRC costs a load and an
/// xor per byte, and a cluster node hashes the key of every keyed command
/// (callgrind: 66 instructions for a 16-byte key with slice-by-16 tables).
/// XMODEM's CRC of a message M is M(x)·x^16 mod P(x) with initial value 0,
/// and that is linear: M is the sum of its 8-byte words, each times x to
/// the power of the bits after it, so the CRC is the sum of each word times
/// a constant (x^(bits after it + 16) mod P, 16 bits), one carry-less
/// multiplication per word, all independent, then one reduction of the
/// sum (at most 80 bits) to 16 bits. Keys of 8-32 bytes (most limiter and
/// benchmark keys) take that route; longer ones fold 16-byte blocks one
/// after another (Intel's "Fast CRC Computation for Generic Polynomials
/// Using PCLMULQDQ", cut down to one block at a time).
#[cfg(target_arch = "x86_64")]
mod clmul {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_clmulepi64_si128, _mm_cmpeq_epi8, _mm_cvtsi128_si32,
        _mm_cvtsi64_si128, _mm_load_si128, _mm_loadl_epi64, _mm_loadu_si128, _mm_move_epi64,
        _mm_movemask_epi8, _mm_set1_epi8, _mm_shuffle_epi8, _mm_slli_si128, _mm_unpacklo_epi64,
        _mm_xor_si128,
    };

    /// P(x) = x^16 + x^12 + x^5 + 1.
    const P: u64 = 0x1_1021;
    /// x^(8k) mod P for k = 0..=26: the weight, times x^16, of a word
    /// followed by k - 2 bytes of the message (every weight a word of a
    /// message of at most 32 bytes needs).
    const BYTE_POWERS: [u64; 27] = {
        let mut powers = [0u64; 27];
        let mut k = 0;
        while k < powers.len() {
            powers[k] = x_pow_mod_p(8 * k as u32);
            k += 1;
        }
        powers
    };
    /// x^80 mod P: the weight of the word 8 bytes before the end.
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

    /// The CRC16 of `bytes`, any length.
    #[target_feature(enable = "pclmulqdq,ssse3")]
    pub(super) fn crc16(bytes: &[u8]) -> u16 {
        let len = bytes.len();
        if (8..=32).contains(&len) {
            return words_crc16(bytes);
        }
        let first = match len % 16 {
            0 => 16.min(len),
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

    /// The CRC16 of what Redis hashes of a key of 8 to 32 bytes (its hash
    /// tag, or all of it), the key loaded once into vector registers for
    /// both the brace search and the CRC.
    #[target_feature(enable = "pclmulqdq,ssse3")]
    pub(super) fn key_crc16(key: &[u8]) -> u16 {
        let len = key.len();
        // A bit per byte equal to `byte`, in load order.
        let found = |bytes: __m128i, byte: u8| {
            _mm_movemask_epi8(_mm_cmpeq_epi8(bytes, _mm_set1_epi8(byte as i8))) as u32 as u64
        };
        if len <= 16 {
            let bytes = short_load(key);
            // Loaded as the last eight bytes, then the first eight: a bit
            // per position in the key.
            let positions = |mask: u64| (mask >> 8) | ((mask & 0xFF) << (len - 8));
            let opens = positions(found(bytes, b'{'));
            if opens != 0 {
                if let Some(crc) = tag_crc16(key, opens, positions(found(bytes, b'}'))) {
                    return crc;
                }
            }
            short_crc16(bytes, len)
        } else {
            let (head, tail) = long_load(key);
            // The first sixteen bytes, the last sixteen: overlapping bits
            // agree.
            let positions = |head: u64, tail: u64| head | (tail << (len - 16));
            let opens = positions(found(head, b'{'), found(tail, b'{'));
            if opens != 0 {
                let closes = positions(found(head, b'}'), found(tail, b'}'));
                if let Some(crc) = tag_crc16(key, opens, closes) {
                    return crc;
                }
            }
            long_crc16(head, tail, len)
        }
    }

    /// The CRC16 of the hash tag of a key of 8 to 32 bytes, if it has one
    /// (the bytes after its first `{` up to the first `}` after that,
    /// when there are some); `opens` and `closes` have a bit for each
    /// position of a `{` and a `}`.
    #[inline]
    #[target_feature(enable = "pclmulqdq,ssse3")]
    fn tag_crc16(key: &[u8], opens: u64, closes: u64) -> Option<u16> {
        let open = opens.trailing_zeros() as usize;
        let closes_after = closes & !((2u64 << open) - 1);
        if closes_after == 0 {
            return None;
        }
        let close = closes_after.trailing_zeros() as usize;
        match close - open - 1 {
            0 => None,
            tag_len @ 1..=7 => {
                // One word of the key that ends with the tag, or starts
                // the key and holds it: the tag is a number under 2^56,
                // its CRC that number times x^16, reduced.
                let start = close.saturating_sub(8);
                let value = (word(key, start) >> (8 * (start + 8 - close))) & low_bytes(tag_len);
                Some(reduce(_mm_slli_si128::<2>(register(value))))
            }
            _ => Some(words_crc16(&key[open + 1..close])),
        }
    }

    /// The CRC16 of 8 to 32 bytes.
    #[target_feature(enable = "pclmulqdq,ssse3")]
    fn words_crc16(bytes: &[u8]) -> u16 {
        let len = bytes.len();
        if len <= 16 {
            short_crc16(short_load(bytes), len)
        } else {
            let (head, tail) = long_load(bytes);
            long_crc16(head, tail, len)
        }
    }

    // The CRC is a sum of products: each 8-byte word that holds bytes no
    // word before it holds, masked to those bytes, times its weight; the
    // last word's weight is x^16 itself, a shift. Each sum is at most 80
    // bits, reduced once.

    /// 8 to 16 bytes as two words, overlapping when fewer than 16: the
    /// first eight in the high half, the last eight in the low half, in
    /// memory order.
    #[inline]
    #[target_feature(enable = "pclmulqdq,ssse3")]
    fn short_load(bytes: &[u8]) -> __m128i {
        let len = bytes.len();
        let first = &bytes[..8];
        let last = &bytes[len - 8..];
        // SAFETY: each slice holds the eight bytes read.
        unsafe {
            _mm_unpacklo_epi64(
                _mm_loadl_epi64(last.as_ptr().cast()),
                _mm_loadl_epi64(first.as_ptr().cast()),
            )
        }
    }

    /// 17 to 32 bytes as their first sixteen and their last sixteen, in
    /// memory order.
    #[inline]
    #[target_feature(enable = "pclmulqdq,ssse3")]
    fn long_load(bytes: &[u8]) -> (__m128i, __m128i) {
        let len = bytes.len();
        let head = &bytes[..16];
        let tail = &bytes[len - 16..];
        // SAFETY: each slice holds the sixteen bytes read.
        unsafe {
            (
                _mm_loadu_si128(head.as_ptr().cast()),
                _mm_loadu_si128(tail.as_ptr().cast()),
            )
        }
    }

    /// The CRC16 of `len` (8 to 16) bytes loaded by [`short_load`].
    #[inline]
    #[target_feature(enable = "pclmulqdq,ssse3")]
    fn short_crc16(bytes: __m128i, len: usize) -> u16 {
        // Each half as a big-endian number (high: the first word, low:
        // the last); the last keeps only its len - 8 bytes after the
        // first's (all 8 at 16 bytes).
        let words = _mm_and_si128(
            _mm_shuffle_epi8(bytes, REVERSE_EACH_HALF.load()),
            SHORT_MASKS[len - 8].load(),
        );
        // The first word ends len - 8 bytes before the end.
        let sum = _mm_clmulepi64_si128::<0x01>(words, register(BYTE_POWERS[len - 6]));
        reduce(_mm_xor_si128(
            sum,
            _mm_slli_si128::<2>(_mm_move_epi64(words)),
        ))
    }

    /// The CRC16 of `len` (17 to 32) bytes loaded by [`long_load`].
    #[inline]
    #[target_feature(enable = "pclmulqdq,ssse3")]
    fn long_crc16(head: __m128i, tail: __m128i, len: usize) -> u16 {
        let reverse = REVERSE.load();
        // The head's words end len - 8 and len - 16 bytes before the end.
        let head = _mm_shuffle_epi8(head, reverse);
        let weights = LONG_WEIGHTS[len - 17].load();
        let sum = _mm_xor_si128(
            _mm_clmulepi64_si128::<0x11>(head, weights),
            _mm_clmulepi64_si128::<0x00>(head, weights),
        );
        // The tail as one big-endian number keeps its last len - 16
        // bytes: its high word ends 8 bytes before the end, its low word
        // is the last.
        let tail = _mm_and_si128(_mm_shuffle_epi8(tail, reverse), LONG_MASKS[len - 17].load());
        let sum = _mm_xor_si128(sum, _mm_clmulepi64_si128::<0x01>(tail, register(X80)));
        reduce(_mm_xor_si128(
            sum,
            _mm_slli_si128::<2>(_mm_move_epi64(tail)),
        ))
    }

    /// Sixteen bytes, aligned for a vector load.
    #[repr(C, align(16))]
    #[derive(Clone, Copy)]
    struct Vector([u64; 2]);

    impl Vector {
        /// As a register: `[low, high]` halves.
        #[inline]
        #[target_feature(enable = "pclmulqdq,ssse3")]
        fn load(&self) -> __m128i {
            // SAFETY: sixteen aligned bytes.
            unsafe { _mm_load_si128((self as *const Vector).cast()) }
        }
    }

    /// A shuffle that turns the bytes of each half around (loaded in
    /// memory order, read as big-endian numbers).
    const REVERSE_EACH_HALF: Vector = Vector([0x0001_0203_0405_0607, 0x0809_0a0b_0c0d_0e0f]);
    /// A shuffle that turns all sixteen bytes around.
    const REVERSE: Vector = Vector([0x0809_0a0b_0c0d_0e0f, 0x0001_0203_0405_0607]);

    /// For 8 + n bytes (n = 0..=8): the low n bytes of the low half, all
    /// of the high.
    const SHORT_MASKS: [Vector; 9] = {
        let mut masks = [Vector([0, u64::MAX]); 9];
        let mut n = 0;
        while n <= 8 {
            masks[n] = Vector([low_bytes(n), u64::MAX]);
            n += 1;
        }
        masks
    };

    /// For 17 + n bytes (n = 0..=15): the low n + 1 bytes of a 128-bit
    /// number.
    const LONG_MASKS: [Vector; 16] = {
        let mut masks = [Vector([0, 0]); 16];
        let mut n = 0;
        while n < 16 {
            let keep: usize = n + 1;
            let high = keep.saturating_sub(8);
            let low = if keep > 8 { 8 } else { keep };
            masks[n] = Vector([low_bytes(low), low_bytes(high)]);
            n += 1;
        }
        masks
    };

    /// For 17 + n bytes (n = 0..=15): the weights of the first word (high
    /// half) and the second (low half).
    const LONG_WEIGHTS: [Vector; 16] = {
        let mut weights = [Vector([0, 0]); 16];
        let mut n = 0;
        while n < 16 {
            let len = 17 + n;
            weights[n] = Vector([BYTE_POWERS[len - 14], BYTE_POWERS[len - 6]]);
            n += 1;
        }
        weights
    };

    /// The low `n` bytes of a word, for n = 0..=8.
    const fn low_bytes(n: usize) -> u64 {
        if n >= 8 {
            u64::MAX
        } else {
            (1u64 << (8 * n)) - 1
        }
    }

    /// The eight bytes of `bytes` from `at`, big-endian.
    #[inline(always)]
    fn word(bytes: &[u8], at: usize) -> u64 {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(&bytes[at..at + 8]);
        u64::from_be_bytes(eight)
    }

    /// The bytes (at most 16) as one big-endian number, in at most two
    /// loads that overlap where the bytes are fewer than 16 (the overlap
    /// holds the same bytes in the same places, so or-ing is exact).
    #[inline(always)]
    fn big_endian(bytes: &[u8]) -> u128 {
        let len = bytes.len();
        if len >= 8 {
            (u128::from(word(bytes, 0)) << (8 * (len - 8))) | u128::from(word(bytes, len - 8))
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

    #[inline]
    #[target_feature(enable = "pclmulqdq,ssse3")]
    fn register(word: u64) -> __m128i {
        _mm_cvtsi64_si128(word as i64)
    }

    /// A(x)·x^16 mod P for the 128-bit A = high·x^64 + low.
    #[inline]
    #[target_feature(enable = "pclmulqdq,ssse3")]
    fn block(high: u64, low: u64) -> u16 {
        // ≡ A·x^16 = high·x^80 + low·x^16, at most 80 bits.
        reduce(_mm_xor_si128(
            _mm_clmulepi64_si128::<0x00>(register(high), register(X80)),
            _mm_slli_si128::<2>(register(low)),
        ))
    }

    /// A value of at most 80 bits mod P, kept in vector registers
    /// throughout (an immediate picks each product's halves).
    #[inline]
    #[target_feature(enable = "pclmulqdq,ssse3")]
    fn reduce(wide: __m128i) -> u16 {
        // Its bits above 64 folded down: the same residue in 64 bits.
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
    let zeros = zero_byte_flags(word);
    (zeros != 0).then(|| (zeros.trailing_zeros() / 8) as usize)
}

/// The high bit of each byte of `word` that is zero set (and, above the
/// lowest zero, possibly of bytes that are not): non-zero exactly when
/// `word` has a zero byte.
#[inline(always)]
fn zero_byte_flags(word: u64) -> u64 {
    word.wrapping_sub(ONES) & !word & HIGHS
}

/// The slot of a key: one indirect call, to the implementation chosen for
/// this CPU on the first call (as the memchr crate dispatches): cheaper on
/// every keyed command of a cluster node than testing the CPU's features
/// each time.
#[inline(always)]
pub fn key_slot(key: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    {
        let chosen = KEY_SLOT.load(std::sync::atomic::Ordering::Relaxed);
        // SAFETY: KEY_SLOT only ever holds one of the `KeySlot` functions
        // below, each safe to call on this CPU (see `choose_key_slot`).
        unsafe { std::mem::transmute::<*mut (), KeySlot>(chosen)(key) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    other_key_slot(key)
}

#[cfg(target_arch = "x86_64")]
type KeySlot = unsafe fn(&[u8]) -> u16;

/// The implementation of [`key_slot`] for this CPU; at first the one
/// that chooses it.
#[cfg(target_arch = "x86_64")]
static KEY_SLOT: std::sync::atomic::AtomicPtr<()> =
    std::sync::atomic::AtomicPtr::new(choose_key_slot as KeySlot as *mut ());

/// Picks [`key_slot`]'s implementation, keeps it, and runs it.
///
/// # Safety
/// None beyond the type's: it is `unsafe` only to share [`KeySlot`]'s
/// signature with the implementation that needs CPU features.
#[cfg(target_arch = "x86_64")]
unsafe fn choose_key_slot(key: &[u8]) -> u16 {
    let chosen: KeySlot = if clmul_supported() {
        carry_less_key_slot
    } else {
        portable_key_slot
    };
    KEY_SLOT.store(chosen as *mut (), std::sync::atomic::Ordering::Relaxed);
    // SAFETY: chosen for this CPU just above.
    unsafe { chosen(key) }
}

/// [`key_slot`] where the CPU has carry-less multiplication: keys of 8
/// to 32 bytes (most limiter and benchmark keys) in vector registers.
///
/// # Safety
/// The CPU has `pclmulqdq` and `ssse3` (checked by [`choose_key_slot`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "pclmulqdq,ssse3")]
unsafe fn carry_less_key_slot(key: &[u8]) -> u16 {
    if (8..=32).contains(&key.len()) {
        clmul::key_crc16(key) & 0x3FFF
    } else {
        other_key_slot(key)
    }
}

/// [`key_slot`] on other CPUs.
///
/// # Safety
/// None: `unsafe` only to share [`KeySlot`]'s signature.
#[cfg(target_arch = "x86_64")]
unsafe fn portable_key_slot(key: &[u8]) -> u16 {
    other_key_slot(key)
}

/// The slot of a key of another length, or on another CPU.
#[inline(never)]
fn other_key_slot(key: &[u8]) -> u16 {
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
        if !clmul_supported() {
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

    /// A hash tag at every place in keys of every length the vector path
    /// takes (8 to 32 bytes), and every tag length there: the slot is
    /// the table CRC of the tag (of the whole key for an empty tag).
    #[test]
    fn hash_tags_anywhere_in_keys_of_8_to_32_bytes() {
        let mut state = 0x5851_F42D_4C95_7F2Du64;
        for len in 8..=32 {
            for open in 0..len {
                for close in open + 1..len {
                    let mut key: Vec<u8> = (0..len)
                        .map(|_| match xorshift(&mut state) as u8 {
                            b'{' | b'}' => b'x',
                            b => b,
                        })
                        .collect();
                    key[open] = b'{';
                    key[close] = b'}';
                    let tag = &key[open + 1..close];
                    let hashed = if tag.is_empty() { &key[..] } else { tag };
                    let expected = CRC16.checksum(hashed) & 0x3FFF;
                    assert_eq!(key_slot(&key), expected, "{key:?}");
                }
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
