//! A listpack held in memory and edited in place, byte for byte Redis's
//! (listpack.c): what a stream's nodes are made of.
//!
//! A stream keeps its entries in listpacks of at most `stream-node-max-bytes`
//! bytes and `stream-node-max-entries` entries, and both the node a new entry
//! goes to and what an approximate trim (`MAXLEN ~`) removes follow from
//! those sizes. Holding the very bytes Redis holds keeps those decisions
//! Redis's, and a node is written to an RDB file as it is.
//!
//! Layout: a 4-byte total size and a 2-byte element count (65535 when
//! there are more), the elements, then 0xFF. Each element is its encoding
//! (a small or large integer, a short, medium or long string) followed by
//! its own length written backwards, so that the list can be walked from
//! either end. A string that is the canonical text of an i64 is stored as
//! the integer, as lpAppend does. An element is encoded by the rdb crate's
//! listpack writer, which writes Redis's files the same way.

/// The header: total bytes (u32) and element count (u16).
const HEADER: usize = 6;
const END: u8 = 0xff;
/// The element count's value once it no longer fits.
const COUNT_UNKNOWN: u16 = u16::MAX;

/// One element as read: an integer, or the bytes of a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Element<'a> {
    /// An element stored as an integer.
    Int(i64),
    /// An element stored as a string.
    Str(&'a [u8]),
}

impl Element<'_> {
    /// The element as an integer: a string element that is one parses
    /// (Redis's lpGetInteger); anything else reads as 0.
    pub fn int(&self) -> i64 {
        match self {
            Element::Int(value) => *value,
            Element::Str(bytes) => crate::number::parse_i64(bytes).unwrap_or(0),
        }
    }

    /// The element's bytes, an integer as its decimal text.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Element::Int(value) => value.to_string().into_bytes(),
            Element::Str(bytes) => bytes.to_vec(),
        }
    }
}

/// A listpack: its bytes, header and terminator included.
#[derive(Clone, PartialEq, Eq)]
pub struct Listpack {
    bytes: Vec<u8>,
}

impl std::fmt::Debug for Listpack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listpack")
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

impl Default for Listpack {
    fn default() -> Listpack {
        Listpack::new()
    }
}

impl Listpack {
    /// An empty listpack.
    pub fn new() -> Listpack {
        let mut bytes = Vec::with_capacity(64);
        bytes.extend_from_slice(&(HEADER as u32 + 1).to_le_bytes());
        bytes.extend_from_slice(&0u16.to_le_bytes());
        bytes.push(END);
        Listpack { bytes }
    }

    /// A listpack from bytes already checked to be one (an RDB file's
    /// stream node, after [`Listpack::validate`]).
    pub fn from_bytes(bytes: Vec<u8>) -> Listpack {
        Listpack { bytes }
    }

    /// The listpack's bytes, as Redis holds and saves them.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Total size in bytes (lpBytes).
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// Heap bytes held, for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
    }

    /// Releases spare capacity (lpShrinkToFit).
    pub fn shrink_to_fit(&mut self) {
        self.bytes.shrink_to_fit();
    }

    /// Appends a string, stored as an integer when it is one's canonical text.
    pub fn push(&mut self, text: &[u8]) {
        match crate::number::parse_i64(text) {
            Some(value) => self.push_int(value),
            None => {
                let at = self.end();
                self.bytes.truncate(at);
                tally_rdb::listpack_str(&mut self.bytes, text);
                self.close(1);
            }
        }
    }

    /// Appends an integer.
    pub fn push_int(&mut self, value: i64) {
        let at = self.end();
        self.bytes.truncate(at);
        tally_rdb::listpack_int(&mut self.bytes, value);
        self.close(1);
    }

    /// The offset of the first element, if any.
    pub fn first(&self) -> Option<usize> {
        (self.bytes[HEADER] != END).then_some(HEADER)
    }

    /// The offset of the last element, if any.
    pub fn last(&self) -> Option<usize> {
        let end = self.end();
        (end > HEADER).then(|| self.prev_of(end))
    }

    /// The element after the one at `at`.
    pub fn next(&self, at: usize) -> Option<usize> {
        let next = at + element_len(&self.bytes[at..]);
        (self.bytes[next] != END).then_some(next)
    }

    /// The element before the one at `at`.
    pub fn prev(&self, at: usize) -> Option<usize> {
        (at > HEADER).then(|| self.prev_of(at))
    }

    /// The element at `at`.
    pub fn get(&self, at: usize) -> Element<'_> {
        decode(&self.bytes[at..])
    }

    /// The integer at `at` (see [`Element::int`]).
    pub fn int_at(&self, at: usize) -> i64 {
        self.get(at).int()
    }

    /// Replaces the element at `at` with an integer (lpReplaceInteger); the
    /// elements after it move if its size changes. Offsets past `at` are
    /// stale afterwards; `at` itself stays valid.
    pub fn replace_int(&mut self, at: usize, value: i64) {
        let old = element_len(&self.bytes[at..]);
        let mut encoded = Vec::with_capacity(11);
        tally_rdb::listpack_int(&mut encoded, value);
        self.bytes.splice(at..at + old, encoded);
        self.set_total();
    }

    /// Checks that `bytes` form a well-made listpack (the RDB loader's
    /// deep check): sizes, encodings and back-lengths all agree. Returns
    /// the element count.
    pub fn validate(bytes: &[u8]) -> Option<usize> {
        if bytes.len() < HEADER + 1 {
            return None;
        }
        let total = u32::from_le_bytes(bytes[0..4].try_into().ok()?) as usize;
        if total != bytes.len() || bytes[total - 1] != END {
            return None;
        }
        let declared = u16::from_le_bytes([bytes[4], bytes[5]]);
        let mut at = HEADER;
        let mut count = 0usize;
        while bytes[at] != END {
            let (header, body) = encoding_len(&bytes[at..total - 1])?;
            let entry = header + body;
            let back = backlen_size(entry);
            let end = at.checked_add(entry)?.checked_add(back)?;
            if end > total - 1 || decode_backlen(&bytes[at + entry..end]) != entry {
                return None;
            }
            at = end;
            count += 1;
        }
        if at != total - 1 || (declared != COUNT_UNKNOWN && usize::from(declared) != count) {
            return None;
        }
        Some(count)
    }

    /// The offset of the terminator.
    fn end(&self) -> usize {
        self.bytes.len() - 1
    }

    /// The start of the element that ends just before `at`.
    fn prev_of(&self, at: usize) -> usize {
        // The back-length is read from its last byte backwards: each byte
        // but the first written has its top bit set.
        let mut len = 0usize;
        let mut shift = 0;
        let mut i = at - 1;
        loop {
            let byte = self.bytes[i];
            len |= usize::from(byte & 0x7f) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                break;
            }
            i -= 1;
        }
        i - len
    }

    /// Writes the terminator and the header after `added` elements were
    /// appended.
    fn close(&mut self, added: u16) {
        self.bytes.push(END);
        let count = u16::from_le_bytes([self.bytes[4], self.bytes[5]]);
        if count != COUNT_UNKNOWN {
            let count = count.saturating_add(added);
            self.bytes[4..6].copy_from_slice(&count.to_le_bytes());
        }
        self.set_total();
    }

    fn set_total(&mut self) {
        let total = self.bytes.len() as u32;
        self.bytes[0..4].copy_from_slice(&total.to_le_bytes());
    }
}

/// The sizes of an element's encoding header and body, if `bytes` hold it.
fn encoding_len(bytes: &[u8]) -> Option<(usize, usize)> {
    let first = *bytes.first()?;
    let (header, body) = match first {
        0x00..=0x7f => (1, 0),
        0x80..=0xbf => (1, usize::from(first & 0x3f)),
        0xc0..=0xdf => (2, 0),
        0xe0..=0xef => (
            2,
            (usize::from(first & 0x0f) << 8) | usize::from(*bytes.get(1)?),
        ),
        0xf0 => (
            5,
            u32::from_le_bytes(bytes.get(1..5)?.try_into().ok()?) as usize,
        ),
        0xf1 => (3, 0),
        0xf2 => (4, 0),
        0xf3 => (5, 0),
        0xf4 => (9, 0),
        _ => return None,
    };
    (header + body <= bytes.len()).then_some((header, body))
}

/// An element's whole length: encoding, body and back-length.
fn element_len(bytes: &[u8]) -> usize {
    let (header, body) = encoding_len(bytes).unwrap_or((1, 0));
    header + body + backlen_size(header + body)
}

fn decode(bytes: &[u8]) -> Element<'_> {
    let first = bytes[0];
    let le = |from: usize, n: usize| {
        bytes[from..from + n]
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
    };
    let signed = |value: u64, bits: u32| ((value << (64 - bits)) as i64) >> (64 - bits);
    match first {
        0x00..=0x7f => Element::Int(i64::from(first)),
        0x80..=0xbf => Element::Str(&bytes[1..1 + usize::from(first & 0x3f)]),
        0xc0..=0xdf => Element::Int(signed(
            (u64::from(first & 0x1f) << 8) | u64::from(bytes[1]),
            13,
        )),
        0xe0..=0xef => {
            let len = (usize::from(first & 0x0f) << 8) | usize::from(bytes[1]);
            Element::Str(&bytes[2..2 + len])
        }
        0xf0 => {
            let len = le(1, 4) as usize;
            Element::Str(&bytes[5..5 + len])
        }
        0xf1 => Element::Int(signed(le(1, 2), 16)),
        0xf2 => Element::Int(signed(le(1, 3), 24)),
        0xf3 => Element::Int(signed(le(1, 4), 32)),
        _ => Element::Int(le(1, 8) as i64),
    }
}

/// An element's back-length size, as the rdb crate's listpack writer
/// writes it.
fn backlen_size(len: usize) -> usize {
    tally_rdb::listpack_backlen_size(len as u64)
}

fn decode_backlen(bytes: &[u8]) -> usize {
    tally_rdb::listpack_decode_backlen(bytes) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elements(lp: &Listpack) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut at = lp.first();
        while let Some(i) = at {
            out.push(lp.get(i).to_bytes());
            at = lp.next(i);
        }
        out
    }

    #[test]
    fn elements_of_every_encoding_read_back_both_ways_and_as_redis_reads_them() {
        let mut lp = Listpack::new();
        let long = vec![b'x'; 5000];
        let medium = vec![b'y'; 300];
        let ints = [
            0i64,
            127,
            128,
            -1,
            -4096,
            4095,
            4096,
            -32768,
            32767,
            1 << 22,
        ];
        for value in ints {
            lp.push_int(value);
        }
        lp.push_int(i64::MIN);
        lp.push_int(i64::from(i32::MAX));
        lp.push(b"hello");
        lp.push(b"-0");
        lp.push(b"12");
        lp.push(&medium);
        lp.push(&long);
        let mut expected: Vec<Vec<u8>> = ints.iter().map(|v| v.to_string().into_bytes()).collect();
        expected.push(i64::MIN.to_string().into_bytes());
        expected.push(i32::MAX.to_string().into_bytes());
        expected.extend([
            b"hello".to_vec(),
            b"-0".to_vec(),
            b"12".to_vec(),
            medium,
            long,
        ]);
        assert_eq!(elements(&lp), expected);
        assert_eq!(lp.get(lp.first().unwrap_or(0)), Element::Int(0));
        // Backwards from the end meets every element.
        let mut back = Vec::new();
        let mut at = lp.last();
        while let Some(i) = at {
            back.push(lp.get(i).to_bytes());
            at = lp.prev(i);
        }
        back.reverse();
        assert_eq!(back, expected);
        assert_eq!(Listpack::validate(lp.as_bytes()), Some(expected.len()));
    }

    #[test]
    fn replacing_an_integer_with_a_wider_one_moves_what_follows() {
        let mut lp = Listpack::new();
        lp.push_int(1);
        lp.push(b"after");
        let first = lp.first().unwrap_or(0);
        lp.replace_int(first, 100_000);
        assert_eq!(elements(&lp), vec![b"100000".to_vec(), b"after".to_vec()]);
        lp.replace_int(first, 3);
        assert_eq!(elements(&lp), vec![b"3".to_vec(), b"after".to_vec()]);
        assert_eq!(Listpack::validate(lp.as_bytes()), Some(2));
        assert_eq!(lp.size(), 6 + 2 + 7 + 1);
    }

    #[test]
    fn a_malformed_listpack_is_refused() {
        let mut lp = Listpack::new();
        lp.push(b"abc");
        let good = lp.as_bytes().to_vec();
        let mut short = good.clone();
        short.pop();
        assert_eq!(Listpack::validate(&short), None);
        let mut bad_count = good.clone();
        bad_count[4] = 2;
        assert_eq!(Listpack::validate(&bad_count), None);
        let mut bad_back = good.clone();
        let at = bad_back.len() - 2;
        bad_back[at] = 9;
        assert_eq!(Listpack::validate(&bad_back), None);
        assert_eq!(Listpack::validate(&good), Some(1));
    }
}
