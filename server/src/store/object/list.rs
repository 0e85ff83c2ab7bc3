//! A list: a double-ended queue of strings.

use std::collections::VecDeque;

use super::element_bytes;

/// A list value.
#[derive(Debug, Clone, Default)]
pub struct List {
    items: VecDeque<Box<[u8]>>,
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
        self.bytes += element_bytes(value);
        if left {
            self.items.push_front(value.into());
        } else {
            self.items.push_back(value.into());
        }
    }

    /// Removes from the head (`left`) or the tail.
    pub fn pop(&mut self, left: bool) -> Option<Box<[u8]>> {
        let item = if left {
            self.items.pop_front()
        } else {
            self.items.pop_back()
        }?;
        self.bytes -= element_bytes(&item);
        Some(item)
    }

    /// The element at a zero-based index from the head.
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        self.items.get(index).map(|v| &**v)
    }

    /// Replaces the element at `index` (which must exist).
    pub fn set(&mut self, index: usize, value: &[u8]) {
        let slot = &mut self.items[index];
        self.bytes = self.bytes + value.len() - slot.len();
        *slot = value.into();
    }

    /// Inserts before the element at `index` (`index == len` appends).
    pub fn insert(&mut self, index: usize, value: &[u8]) {
        self.bytes += element_bytes(value);
        self.items.insert(index, value.into());
    }

    /// Removes the element at `index` (which must exist).
    pub fn remove(&mut self, index: usize) {
        if let Some(item) = self.items.remove(index) {
            self.bytes -= element_bytes(&item);
        }
    }

    /// Keeps only the elements in `start..end`.
    pub fn retain_range(&mut self, start: usize, end: usize) {
        let end = end.min(self.items.len());
        let start = start.min(end);
        for item in self.items.drain(end..) {
            self.bytes -= element_bytes(&item);
        }
        for item in self.items.drain(..start) {
            self.bytes -= element_bytes(&item);
        }
    }

    /// Elements from the head.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + ExactSizeIterator {
        self.items.iter().map(|v| &**v)
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
        list.set(0, b"longer");
        list.insert(1, b"x");
        list.remove(0);
        assert_eq!(list.pop(false).as_deref(), Some(&b"b"[..]));
        assert_eq!(list.pop(true).as_deref(), Some(&b"x"[..]));
        assert!(list.is_empty());
        assert_eq!(list.heap_bytes(), 0);
    }
}
