//! The element encoding of the packed (listpack-like) forms of small hashes
//! and sorted sets: each element is its length as LEB128, then its bytes,
//! one after the other in a single buffer.

/// Appends one element: its length, then its bytes.
pub(super) fn push_element(buffer: &mut Vec<u8>, bytes: &[u8]) {
    let mut n = bytes.len();
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            buffer.push(low);
            break;
        }
        buffer.push(low | 0x80);
    }
    buffer.extend_from_slice(bytes);
}

/// The element whose length begins at `at`, and the offset just past it.
pub(super) fn read_element(buffer: &[u8], mut at: usize) -> Option<(&[u8], usize)> {
    let mut len = 0usize;
    let mut shift = 0;
    loop {
        let byte = *buffer.get(at)?;
        at += 1;
        len |= usize::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            break;
        }
    }
    Some((&buffer[at..at + len], at + len))
}

/// The packed buffer's elements in order, each with the offset where its
/// length begins and the offset just past it.
pub(super) struct Elements<'a> {
    buffer: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Elements<'a> {
    type Item = (usize, &'a [u8], usize);

    fn next(&mut self) -> Option<Self::Item> {
        let start = self.at;
        let (bytes, end) = read_element(self.buffer, start)?;
        self.at = end;
        Some((start, bytes, end))
    }
}

/// Every element of `buffer`, from the start.
pub(super) fn elements(buffer: &[u8]) -> Elements<'_> {
    Elements { buffer, at: 0 }
}
