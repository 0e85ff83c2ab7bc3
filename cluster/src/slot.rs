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
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return key;
    };
    match key[open + 1..].iter().position(|&b| b == b'}') {
        Some(0) | None => key,
        Some(len) => &key[open + 1..open + 1 + len],
    }
}

/// The slot of a key.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & 0x3FFF
}

#[cfg(test)]
mod tests {
    use super::*;

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
