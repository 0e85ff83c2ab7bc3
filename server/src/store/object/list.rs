//! A list: a double-ended queue of strings.
//!
//! Elements of up to 22 bytes (counters, ids, timestamps: what limiters
//! keep in lists) live inline in the queue's own buffer, so LRANGE walks
//! contiguous memory, as Redis's listpack nodes do, instead of chasing a
//! pointer per element; longer ones are boxed.

use std::collections::VecDeque;

use super::element_bytes;

/// Longest element stored inline.
const INLINE_MAX: usize = 22;

/// One list element: 24 bytes either way.
#[derive(Debug, Clone)]
enum Element {
    Inline { len: u8, bytes: [u8; INLINE_MAX] },
    Boxed(Box<[u8]>),
}

impl Element {
    fn new(value: &[u8]) -> Element {
        if value.len() <= INLINE_MAX {
            let mut bytes = [0u8; INLINE_MAX];
            bytes[..value.len()].copy_from_slice(value);
            Element::Inline {
                len: value.len() as u8,
                bytes,
            }
        } else {
            Element::Boxed(value.into())
        }
    }

    #[inline]
    fn as_bytes(&self) -> &[u8] {
        match self {
            Element::Inline { len, bytes } => &bytes[..*len as usize],
            Element::Boxed(boxed) => boxed,
        }
    }

    /// Heap bytes beyond the queue slot.
    fn heap(&self) -> usize {
        match self {
            Element::Inline { .. } => 0,
            Element::Boxed(boxed) => element_bytes(boxed),
        }
    }
}

/// Bytes of one queue slot.
const SLOT: usize = std::mem::size_of::<Element>();

/// A list value.
#[derive(Debug, Clone, Default)]
pub struct List {
    items: VecDeque<Element>,
    bytes: usize,
}

impl List {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.bytes
    }

    /// Adds at the head (`left`) or the tail.
    pub fn push(&mut self, value: &[u8], left: bool) {
        let element = Element::new(value);
        self.bytes += SLOT + element.heap();
        if left {
            self.items.push_front(element);
        } else {
            self.items.push_back(element);
        }
    }

    /// Removes from the head (`left`) or the tail.
    pub fn pop(&mut self, left: bool) -> Option<Vec<u8>> {
        let item = if left {
            self.items.pop_front()
        } else {
            self.items.pop_back()
        }?;
        self.bytes -= SLOT + item.heap();
        Some(item.as_bytes().to_vec())
    }

    /// The element at a zero-based index from the head.
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        self.items.get(index).map(Element::as_bytes)
    }

    /// Replaces the element at `index` (which must exist).
    pub fn set(&mut self, index: usize, value: &[u8]) {
        let element = Element::new(value);
        let slot = &mut self.items[index];
        self.bytes = self.bytes + element.heap() - slot.heap();
        *slot = element;
    }

    /// Inserts before the element at `index` (`index == len` appends).
    pub fn insert(&mut self, index: usize, value: &[u8]) {
        let element = Element::new(value);
        self.bytes += SLOT + element.heap();
        self.items.insert(index, element);
    }

    /// Removes the element at `index` (which must exist).
    pub fn remove(&mut self, index: usize) {
        if let Some(item) = self.items.remove(index) {
            self.bytes -= SLOT + item.heap();
        }
    }

    /// Keeps only the elements in `start..end`.
    pub fn retain_range(&mut self, start: usize, end: usize) {
        let end = end.min(self.items.len());
        let start = start.min(end);
        for item in self.items.drain(end..) {
            self.bytes -= SLOT + item.heap();
        }
        for item in self.items.drain(..start) {
            self.bytes -= SLOT + item.heap();
        }
    }

    /// Elements from the head.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + ExactSizeIterator + Clone {
        self.items.iter().map(Element::as_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_pop_trim_and_accounting() {
        let mut list = List::default();
        for v in [&b"a"[..], b"b", b"c", b"d"] {
            list.push(v, false);
        }
        list.push(b"z", true);
        assert_eq!(
            list.iter().collect::<Vec<_>>(),
            vec![&b"z"[..], b"a", b"b", b"c", b"d"]
        );
        list.retain_range(1, 3);
        assert_eq!(list.iter().collect::<Vec<_>>(), vec![&b"a"[..], b"b"]);
        list.set(0, b"longer than twenty-two bytes, so boxed");
        assert_eq!(
            list.get(0),
            Some(&b"longer than twenty-two bytes, so boxed"[..])
        );
        assert_eq!(std::mem::size_of::<Element>(), 24);
        list.insert(1, b"x");
        list.remove(0);
        assert_eq!(list.pop(false).as_deref(), Some(&b"b"[..]));
        assert_eq!(list.pop(true).as_deref(), Some(&b"x"[..]));
        assert!(list.is_empty());
        assert_eq!(list.heap_bytes(), 0);
    }
}
