//! A stream entry's ID, and its 16-byte form.

/// A stream entry ID: milliseconds, then a sequence within them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// Milliseconds (the unix time of an ID the server chose).
    pub ms: u64,
    /// The sequence within the millisecond.
    pub seq: u64,
}

impl StreamId {
    /// 0-0: below every entry (`-`).
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest ID (`+`).
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// The ID `<ms>-<seq>`.
    pub fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The ID just after this one (streamIncrID); `None` past the last.
    pub fn next(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (u64::MAX, u64::MAX) => None,
            (ms, u64::MAX) => Some(StreamId::new(ms + 1, 0)),
            (ms, seq) => Some(StreamId::new(ms, seq + 1)),
        }
    }

    /// The ID just before this one (streamDecrID); `None` before 0-0.
    pub fn prev(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (0, 0) => None,
            (ms, 0) => Some(StreamId::new(ms - 1, u64::MAX)),
            (ms, seq) => Some(StreamId::new(ms, seq - 1)),
        }
    }

    /// `<ms>-<seq>`, as replies and logs print an ID.
    pub fn to_bytes(self) -> Vec<u8> {
        // Every entry of a reply carries one: itoa, not the formatter.
        let (mut ms, mut seq) = (itoa::Buffer::new(), itoa::Buffer::new());
        let (ms, seq) = (
            ms.format(self.ms).as_bytes(),
            seq.format(self.seq).as_bytes(),
        );
        let mut out = Vec::with_capacity(ms.len() + 1 + seq.len());
        out.extend_from_slice(ms);
        out.push(b'-');
        out.extend_from_slice(seq);
        out
    }

    /// The 16-byte big-endian form: the key of a node in Redis's radix
    /// tree, and in RDB files.
    pub fn encode(self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.ms.to_be_bytes());
        out[8..].copy_from_slice(&self.seq.to_be_bytes());
        out
    }

    /// The ID of a 16-byte big-endian form.
    pub fn decode(bytes: &[u8; 16]) -> StreamId {
        let mut ms = [0u8; 8];
        let mut seq = [0u8; 8];
        ms.copy_from_slice(&bytes[..8]);
        seq.copy_from_slice(&bytes[8..]);
        StreamId::new(u64::from_be_bytes(ms), u64::from_be_bytes(seq))
    }
}

#[cfg(test)]
mod tests {
    use super::StreamId;

    #[test]
    fn an_id_prints_as_ms_dash_seq() {
        assert_eq!(StreamId::new(0, 0).to_bytes(), b"0-0");
        assert_eq!(
            StreamId::new(1526919030474, 55).to_bytes(),
            b"1526919030474-55"
        );
        assert_eq!(
            StreamId::MAX.to_bytes(),
            b"18446744073709551615-18446744073709551615"
        );
    }
}
