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
/// not pay off below 32 bytes).
#[inline]
fn find_byte(haystack: &[u8], needle: u8) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let pattern = ONES * needle as u64;
    let mut chunks = haystack.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes")) ^ pattern;
        // A zero byte of `word` is a match; the lowest flagged byte is
        // the first (borrows only flag bytes above a real zero).
        let zeros = word.wrapping_sub(ONES) & !word & HIGHS;
        if zeros != 0 {
            return Some(offset + (zeros.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == needle)
        .map(|i| offset + i)
}

/// The slot of a key.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & 0x3FFF
}

#[cfg(test)]
mod tests {
    use super::*;

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
