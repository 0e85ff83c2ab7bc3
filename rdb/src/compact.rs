//! Redis's compact containers, as they appear inside RDB strings:
//! listpack (read and written, Redis 7's small-collection form), intset
//! (read and written), ziplist and zipmap (read: files from Redis 6 and
//! older).

use crate::encoding::canonical_int;
use crate::{Error, Pairs};

fn corrupt(what: &str) -> Error {
    Error::Corrupt(what.to_string())
}

fn le(bytes: &[u8]) -> u64 {
    bytes.iter().rev().fold(0, |acc, &b| (acc << 8) | b as u64)
}

/// Sign-extends the low `bits` bits of `value`.
fn signed(value: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((value << shift) as i64) >> shift
}

/// A cursor over a container's bytes; every read is bounds-checked.
struct Cursor<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.data.len());
        let end = end.ok_or_else(|| corrupt("compact entry runs past its container"))?;
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn byte(&mut self) -> Result<u8, Error> {
        Ok(self.take(1)?[0])
    }
}

/// The elements of a listpack, integers as their decimal text.
pub fn listpack_elements(blob: &[u8]) -> Result<Vec<Vec<u8>>, Error> {
    if blob.len() < 7 {
        return Err(corrupt("listpack shorter than its header"));
    }
    if le(&blob[0..4]) as usize != blob.len() {
        return Err(corrupt("listpack size header does not match"));
    }
    let declared = le(&blob[4..6]) as usize;
    let mut cursor = Cursor { data: blob, at: 6 };
    let mut out = Vec::new();
    loop {
        let start = cursor.at;
        let first = cursor.byte()?;
        if first == 0xff {
            break;
        }
        let element = match first {
            0x00..=0x7f => (first as i64).to_string().into_bytes(),
            0x80..=0xbf => cursor.take((first & 0x3f) as usize)?.to_vec(),
            0xc0..=0xdf => {
                let low = cursor.byte()? as u64;
                signed((((first & 0x1f) as u64) << 8) | low, 13)
                    .to_string()
                    .into_bytes()
            }
            0xe0..=0xef => {
                let low = cursor.byte()? as usize;
                cursor
                    .take((((first & 0x0f) as usize) << 8) | low)?
                    .to_vec()
            }
            0xf0 => {
                let len = le(cursor.take(4)?) as usize;
                cursor.take(len)?.to_vec()
            }
            0xf1 => signed(le(cursor.take(2)?), 16).to_string().into_bytes(),
            0xf2 => signed(le(cursor.take(3)?), 24).to_string().into_bytes(),
            0xf3 => signed(le(cursor.take(4)?), 32).to_string().into_bytes(),
            0xf4 => (le(cursor.take(8)?) as i64).to_string().into_bytes(),
            _ => return Err(corrupt("unknown listpack encoding")),
        };
        let entry_len = cursor.at - start;
        let backlen = cursor.take(backlen_size(entry_len as u64))?;
        if decode_backlen(backlen) != entry_len as u64 {
            return Err(corrupt("listpack back-length does not match"));
        }
        out.push(element);
    }
    if cursor.at != blob.len() {
        return Err(corrupt("bytes after the listpack's end"));
    }
    if declared != u16::MAX as usize && declared != out.len() {
        return Err(corrupt("listpack element count does not match"));
    }
    Ok(out)
}

/// How many bytes an element's back-length takes (lpEncodeBacklen).
pub fn backlen_size(len: u64) -> usize {
    match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// An element's length read from its back-length bytes, in order.
pub fn decode_backlen(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0, |acc, &b| (acc << 7) | (b & 0x7f) as u64)
}

/// lpEncodeBacklen: the entry's length in 7-bit groups, most significant
/// first, every byte but the first with its top bit set.
fn encode_backlen(out: &mut Vec<u8>, len: u64) {
    let size = backlen_size(len);
    for i in (0..size).rev() {
        let group = ((len >> (7 * i)) & 0x7f) as u8;
        out.push(if i == size - 1 { group } else { group | 0x80 });
    }
}

/// Appends one listpack element holding `value` in the smallest of the
/// six integer forms (lpEncodeIntegerGetType), with its back-length.
pub fn listpack_int(out: &mut Vec<u8>, value: i64) {
    let start = out.len();
    if (0..=127).contains(&value) {
        out.push(value as u8);
    } else if (-4096..=4095).contains(&value) {
        let v = (value as u64) & 0x1fff;
        out.push(0xc0 | (v >> 8) as u8);
        out.push(v as u8);
    } else if let Ok(v) = i16::try_from(value) {
        out.push(0xf1);
        out.extend_from_slice(&v.to_le_bytes());
    } else if (-(1 << 23)..(1 << 23)).contains(&value) {
        out.push(0xf2);
        out.extend_from_slice(&(value as i32).to_le_bytes()[..3]);
    } else if let Ok(v) = i32::try_from(value) {
        out.push(0xf3);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        out.push(0xf4);
        out.extend_from_slice(&value.to_le_bytes());
    }
    encode_backlen(out, (out.len() - start) as u64);
}

/// Appends one listpack element holding `text` as a string (short,
/// medium or long form), with its back-length.
pub fn listpack_str(out: &mut Vec<u8>, text: &[u8]) {
    let start = out.len();
    let len = text.len();
    if len < 64 {
        out.push(0x80 | len as u8);
    } else if len < 4096 {
        out.push(0xe0 | (len >> 8) as u8);
        out.push(len as u8);
    } else {
        out.push(0xf0);
        out.extend_from_slice(&(len as u32).to_le_bytes());
    }
    out.extend_from_slice(text);
    encode_backlen(out, (out.len() - start) as u64);
}

/// Builds a listpack, as lpAppend does element by element: strings that
/// are canonical integers stored as integers in their smallest form.
#[derive(Default)]
pub struct ListpackBuilder {
    body: Vec<u8>,
    count: usize,
}

impl ListpackBuilder {
    pub fn push(&mut self, element: &[u8]) {
        match canonical_int(element) {
            Some(value) => self.push_int(value),
            None => self.push_str(element),
        }
    }

    pub fn push_int(&mut self, value: i64) {
        listpack_int(&mut self.body, value);
        self.count += 1;
    }

    fn push_str(&mut self, text: &[u8]) {
        listpack_str(&mut self.body, text);
        self.count += 1;
    }

    /// The listpack's size in bytes if finished now.
    pub fn size(&self) -> usize {
        6 + self.body.len() + 1
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn finish(self) -> Vec<u8> {
        let total = self.size();
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&(total as u32).to_le_bytes());
        let count = if self.count < u16::MAX as usize {
            self.count as u16
        } else {
            u16::MAX
        };
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&self.body);
        out.push(0xff);
        out
    }
}

/// The members of an intset, as decimal text.
pub fn intset_members(blob: &[u8]) -> Result<Vec<Vec<u8>>, Error> {
    if blob.len() < 8 {
        return Err(corrupt("intset shorter than its header"));
    }
    let width = le(&blob[0..4]) as usize;
    let count = le(&blob[4..8]) as usize;
    if !matches!(width, 2 | 4 | 8) || blob.len() != 8 + width.saturating_mul(count) {
        return Err(corrupt("intset size does not match its header"));
    }
    Ok(blob[8..]
        .chunks(width)
        .map(|c| signed(le(c), (width * 8) as u32).to_string().into_bytes())
        .collect())
}

/// An intset of `values` (sorted, smallest width that holds them all).
pub fn intset(mut values: Vec<i64>) -> Vec<u8> {
    values.sort_unstable();
    values.dedup();
    let width: usize = if values.iter().all(|v| i16::try_from(*v).is_ok()) {
        2
    } else if values.iter().all(|v| i32::try_from(*v).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + width * values.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

/// The elements of a ziplist (Redis 6 and older), integers as text.
pub fn ziplist_elements(blob: &[u8]) -> Result<Vec<Vec<u8>>, Error> {
    if blob.len() < 11 || le(&blob[0..4]) as usize != blob.len() {
        return Err(corrupt("ziplist size header does not match"));
    }
    let mut cursor = Cursor { data: blob, at: 10 };
    let mut out = Vec::new();
    loop {
        let prevlen = cursor.byte()?;
        if prevlen == 0xff {
            break;
        }
        if prevlen == 0xfe {
            cursor.take(4)?;
        }
        let encoding = cursor.byte()?;
        let element = match encoding >> 6 {
            0 => cursor.take((encoding & 0x3f) as usize)?.to_vec(),
            1 => {
                let low = cursor.byte()? as usize;
                cursor
                    .take((((encoding & 0x3f) as usize) << 8) | low)?
                    .to_vec()
            }
            2 => {
                let b = cursor.take(4)?;
                let len = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
                cursor.take(len)?.to_vec()
            }
            _ => {
                let value = match encoding {
                    0xc0 => signed(le(cursor.take(2)?), 16),
                    0xd0 => signed(le(cursor.take(4)?), 32),
                    0xe0 => le(cursor.take(8)?) as i64,
                    0xf0 => signed(le(cursor.take(3)?), 24),
                    0xfe => cursor.byte()? as i8 as i64,
                    0xf1..=0xfd => (encoding & 0x0f) as i64 - 1,
                    _ => return Err(corrupt("unknown ziplist encoding")),
                };
                value.to_string().into_bytes()
            }
        };
        out.push(element);
    }
    if cursor.at != blob.len() {
        return Err(corrupt("bytes after the ziplist's end"));
    }
    Ok(out)
}

/// The fields and values of a zipmap (hashes from Redis 2.x files), with
/// the checks of Redis's `zipmapValidateIntegrity` and its loader: the
/// last byte is the terminator, a length under 254 is in one byte (the
/// 5-byte form of a small length is how CVE-2026-25243's payloads reach
/// past the end in Redis), no field twice, at least one pair, and the
/// count byte right unless it says "unknown" (254).
pub fn zipmap_pairs(blob: &[u8]) -> Result<Pairs, Error> {
    const BIGLEN: u8 = 0xfe;
    const END: u8 = 0xff;
    if blob.len() < 2 || blob.last() != Some(&END) {
        return Err(corrupt("zipmap without its terminator"));
    }
    let mut cursor = Cursor { data: blob, at: 1 };
    let read_len = |cursor: &mut Cursor<'_>| -> Result<Option<usize>, Error> {
        match cursor.byte()? {
            END => Ok(None),
            BIGLEN => {
                let b = cursor.take(4)?;
                let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                if len < u32::from(BIGLEN) {
                    return Err(corrupt("zipmap length in 5 bytes that fits in 1"));
                }
                Ok(Some(len as usize))
            }
            n => Ok(Some(n as usize)),
        }
    };
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    while let Some(field_len) = read_len(&mut cursor)? {
        let field = cursor.take(field_len)?;
        let value_len =
            read_len(&mut cursor)?.ok_or_else(|| corrupt("zipmap field without value"))?;
        let free = cursor.byte()? as usize;
        let value = cursor.take(value_len)?.to_vec();
        cursor.take(free)?;
        if !seen.insert(field) {
            return Err(corrupt("zipmap with a field twice"));
        }
        out.push((field.to_vec(), value));
    }
    if out.is_empty() {
        return Err(corrupt("empty zipmap"));
    }
    if blob[0] != BIGLEN && usize::from(blob[0]) != out.len() {
        return Err(corrupt("zipmap count differs from its pairs"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpacks_store_each_element_in_its_smallest_form() {
        let elements: Vec<Vec<u8>> = [
            "0",
            "127",
            "128",
            "-1",
            "-4096",
            "4095",
            "4096",
            "-32768",
            "32767",
            "8388607",
            "-8388608",
            "2147483647",
            "-2147483649",
            "9223372036854775807",
            "a",
            "007",
            "-0",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .chain([
            vec![b'x'; 63],
            vec![b'y'; 64],
            vec![b'z'; 4095],
            vec![b'w'; 4096],
        ])
        .collect();
        let mut builder = ListpackBuilder::default();
        for e in &elements {
            builder.push(e);
        }
        let blob = builder.finish();
        assert_eq!(listpack_elements(&blob).unwrap(), elements);
    }

    #[test]
    fn a_listpack_matches_redis_s_bytes() {
        // RPUSH l a 1 -> DUMP's listpack (Redis 7.0): header, "a", 1.
        let mut builder = ListpackBuilder::default();
        builder.push(b"a");
        builder.push(b"1");
        assert_eq!(
            builder.finish(),
            [0x0c, 0, 0, 0, 2, 0, 0x81, b'a', 2, 0x01, 1, 0xff]
        );
    }

    #[test]
    fn intsets_round_trip_at_each_width() {
        for values in [vec![3, 1, 2], vec![-70000, 5], vec![i64::MIN, 0]] {
            let blob = intset(values.clone());
            let mut expected = values.clone();
            expected.sort();
            let members: Vec<i64> = intset_members(&blob)
                .unwrap()
                .iter()
                .map(|m| std::str::from_utf8(m).unwrap().parse().unwrap())
                .collect();
            assert_eq!(members, expected);
        }
    }

    #[test]
    fn damaged_containers_are_refused() {
        let mut builder = ListpackBuilder::default();
        builder.push(b"hello");
        let blob = builder.finish();
        let mut bad = blob.clone();
        bad[0] += 1;
        assert!(listpack_elements(&bad).is_err());
        assert!(listpack_elements(&blob[..blob.len() - 1]).is_err());
        assert!(intset_members(&[2, 0, 0, 0, 9, 0, 0, 0]).is_err());
        assert!(ziplist_elements(&[11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xfe]).is_err());
    }
}
