//! A hash: field → value, in insertion order while Redis would keep it as a
//! listpack.

use hashbrown::DefaultHashBuilder;
use indexmap::IndexMap;

use super::{element_bytes, Encodings};
/// Per-field cost of the index map beyond the two elements: hash, index slot.
const FIELD_OVERHEAD: usize = 16;

/// A hash value.
#[derive(Debug, Clone, Default)]
pub struct Hash {
    fields: IndexMap<Box<[u8]>, Box<[u8]>, DefaultHashBuilder>,
    /// False once Redis would have converted it to a hash table; it never
    /// converts back, so neither does this flag.
    converted: bool,
    bytes: usize,
}

impl Hash {
    /// Number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// True when there is no field.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// `listpack` or `hashtable`.
    pub fn encoding(&self) -> &'static str {
        if self.converted {
            "hashtable"
        } else {
            "listpack"
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.bytes
    }

    /// The value of a field.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.fields.get(field).map(|v| &**v)
    }

    /// Sets a field; true when the field is new. Past
    /// `hash-max-listpack-value` or `-entries` the hash is one Redis would
    /// have converted.
    pub fn insert(&mut self, field: &[u8], value: &[u8], limits: &Encodings) -> bool {
        let longest = limits.hash_max_listpack_value;
        if field.len() > longest || value.len() > longest {
            self.converted = true;
        }
        if let Some(old) = self.fields.get_mut(field) {
            self.bytes = self.bytes + value.len() - old.len();
            *old = value.into();
            return false;
        }
        self.bytes += element_bytes(field) + element_bytes(value) + FIELD_OVERHEAD;
        self.fields.insert(field.into(), value.into());
        if self.fields.len() > limits.hash_max_listpack_entries {
            self.converted = true;
        }
        true
    }

    /// Removes a field; true when it existed.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        // A listpack keeps the order of the remaining fields; a hash table
        // has no order to keep, so the cheaper swap is fine there.
        let removed = if self.converted {
            self.fields.swap_remove_entry(field)
        } else {
            self.fields.shift_remove_entry(field)
        };
        match removed {
            Some((field, value)) => {
                self.bytes -= element_bytes(&field) + element_bytes(&value) + FIELD_OVERHEAD;
                true
            }
            None => false,
        }
    }

    /// Fields and values in Redis's iteration order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields.iter().map(|(f, v)| (&**f, &**v))
    }

    /// The field at a position of the iteration order (HRANDFIELD).
    pub fn get_index(&self, index: usize) -> Option<(&[u8], &[u8])> {
        self.fields.get_index(index).map(|(f, v)| (&**f, &**v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_hashes_keep_insertion_order_through_updates_and_deletes() {
        let mut hash = Hash::default();
        assert!(hash.insert(b"a", b"1", &Encodings::default()));
        assert!(hash.insert(b"b", b"2", &Encodings::default()));
        assert!(hash.insert(b"c", b"3", &Encodings::default()));
        assert!(!hash.insert(b"a", b"one", &Encodings::default()));
        assert!(hash.remove(b"b"));
        let order: Vec<_> = hash.iter().collect();
        assert_eq!(
            order,
            vec![(&b"a"[..], &b"one"[..]), (&b"c"[..], &b"3"[..])]
        );
        assert_eq!(hash.encoding(), "listpack");
    }

    #[test]
    fn a_long_value_or_many_fields_convert_for_good_and_bytes_return_to_zero() {
        let mut hash = Hash::default();
        hash.insert(b"f", &[b'x'; 65], &Encodings::default());
        assert_eq!(hash.encoding(), "hashtable");
        hash.remove(b"f");
        assert_eq!(hash.encoding(), "hashtable");
        assert_eq!(hash.heap_bytes(), 0);
        let mut many = Hash::default();
        let limits = Encodings::default();
        for i in 0..limits.hash_max_listpack_entries {
            many.insert(i.to_string().as_bytes(), b"v", &limits);
        }
        assert_eq!(many.encoding(), "listpack");
        many.insert(b"one more", b"v", &limits);
        assert_eq!(many.encoding(), "hashtable");
    }

    #[test]
    fn the_thresholds_in_force_decide() {
        let limits = Encodings {
            hash_max_listpack_entries: 2,
            hash_max_listpack_value: 3,
            ..Encodings::default()
        };
        let mut hash = Hash::default();
        hash.insert(b"abc", b"xyz", &limits);
        hash.insert(b"f", b"v", &limits);
        assert_eq!(hash.encoding(), "listpack");
        hash.insert(b"g", b"v", &limits);
        assert_eq!(hash.encoding(), "hashtable");
        let mut long = Hash::default();
        long.insert(b"f", b"four", &limits);
        assert_eq!(long.encoding(), "hashtable");
    }
}
