//! Hash slots: CRC16 (XMODEM, Redis's crc16.c) of the key, or of its hash
//! tag, modulo 16384.

use crc::{Crc, Table, CRC_16_XMODEM};

/// Slice-by-16 tables: the slot of every keyed command is computed on the
/// request path, and keys are short.
const CRC16: Crc<u16, Table<16>> = Crc::<u16, Table<16>>::new(&CRC_16_XMODEM);

/// Redis's crc16 of `bytes`.
pub fn crc16(bytes: &[u8]) -> u16 {
    CRC16.checksum(bytes)
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
    crc16(hash_tag(key)) & 0x3FFF
}

#[cfg(test)]
mod tests {
    use super::*;

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
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
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

    #[test]
    fn crc16_is_redis_s() {
        // The check value Redis's crc16.c documents.
        assert_eq!(crc16(b"123456789"), 0x31C3);
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
