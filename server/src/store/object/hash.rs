//! A hash: field → value, in insertion order while Redis would keep it as a
//! listpack.
//!
//! A small hash lives as Redis keeps it: every field and value packed one
//! after the other in a single buffer, found by a linear scan. Limiter
//! scripts keep their state in hashes of two or three fields, and one
//! buffer is one allocation and one cache miss per lookup, where a hash
//! table costs a slot and two boxes per field. Past the
//! thresholds Redis converts to a hash table, and so does this type
//! ([`ByteTable`]).

use super::byte_table::{ByteTable, OwnedPair};
use super::field_deadlines::FieldDeadlines;
use super::packed::{elements, push_element};
use super::{element_bytes, Encodings};
/// Per-field cost of the table beyond the two elements: its slot and control byte.
const FIELD_OVERHEAD: usize = 16;

/// A field and its value, borrowed from a hash.
pub type FieldValue<'a> = (&'a [u8], &'a [u8]);

/// A hash value.
#[derive(Debug, Clone)]
pub struct Hash {
    fields: Fields,
    /// The table's running estimate of its heap bytes (the packed form
    /// reports its buffer's capacity instead).
    bytes: usize,
    /// Field deadlines, from the first HEXPIRE (or HSETEX with one) on: a
    /// packed hash is then Redis's `listpackex`, which it stays.
    deadlines: Option<Box<FieldDeadlines>>,
}

#[derive(Debug, Clone)]
enum Fields {
    /// Redis's listpack: field, value, field, value, ... in insertion
    /// order, each a LEB128 length followed by its bytes.
    Packed { buffer: Vec<u8>, len: usize },
    /// Redis's hash table, for good once converted, as in Redis.
    Table(ByteTable<OwnedPair>),
}

impl Default for Hash {
    fn default() -> Hash {
        Hash {
            fields: Fields::Packed {
                buffer: Vec::new(),
                len: 0,
            },
            bytes: 0,
            deadlines: None,
        }
    }
}

/// A packed field found: where its pair begins and ends, and its value.
struct Found<'a> {
    start: usize,
    value_start: usize,
    end: usize,
    value: &'a [u8],
}

fn find<'a>(buffer: &'a [u8], field: &[u8]) -> Option<Found<'a>> {
    let mut elements = elements(buffer);
    while let Some((start, name, _)) = elements.next() {
        let (value_start, value, end) = elements.next()?;
        if name == field {
            return Some(Found {
                start,
                value_start,
                end,
                value,
            });
        }
    }
    None
}

/// The pairs of a packed buffer, in order.
fn pairs(buffer: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    let mut elements = elements(buffer);
    std::iter::from_fn(move || {
        let (_, field, _) = elements.next()?;
        let (_, value, _) = elements.next()?;
        Some((field, value))
    })
}

impl Hash {
    /// Number of fields.
    pub fn len(&self) -> usize {
        match &self.fields {
            Fields::Packed { len, .. } => *len,
            Fields::Table(table) => table.len(),
        }
    }

    /// True when there is no field.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `listpack`, `listpackex` (a listpack that has had field
    /// deadlines) or `hashtable`.
    pub fn encoding(&self) -> &'static str {
        match (&self.fields, &self.deadlines) {
            (Fields::Packed { .. }, None) => "listpack",
            (Fields::Packed { .. }, Some(_)) => "listpackex",
            (Fields::Table(_), _) => "hashtable",
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        let fields = match &self.fields {
            Fields::Packed { buffer, .. } => buffer.capacity(),
            Fields::Table(_) => self.bytes,
        };
        fields + self.deadlines.as_ref().map_or(0, |d| d.heap_bytes())
    }

    /// The value of a field.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match &self.fields {
            Fields::Packed { buffer, .. } => find(buffer, field).map(|found| found.value),
            Fields::Table(table) => table.get(field).map(|(_, value)| &**value),
        }
    }

    /// Sets a field; true when the field is new. Past
    /// `hash-max-listpack-value` or `-entries` the hash is one Redis would
    /// have converted.
    /// A field that had a deadline loses it, as HSET's does in Redis (and,
    /// packed, moves behind the fields with one, as in a listpackex).
    pub fn insert(&mut self, field: &[u8], value: &[u8], limits: &Encodings) -> bool {
        let had_deadline = self.deadlines.as_mut().and_then(|d| d.remove(field));
        if had_deadline.is_some() && matches!(self.fields, Fields::Packed { .. }) {
            self.remove_field(field);
            self.put(field, value, limits);
            return false;
        }
        self.put(field, value, limits)
    }

    /// Sets a field's value and keeps its deadline, if any, as HINCRBY
    /// does; true when the field is new.
    pub fn insert_keeping_deadline(
        &mut self,
        field: &[u8],
        value: &[u8],
        limits: &Encodings,
    ) -> bool {
        self.put(field, value, limits)
    }

    fn put(&mut self, field: &[u8], value: &[u8], limits: &Encodings) -> bool {
        let longest = limits.hash_max_listpack_value;
        if field.len() > longest || value.len() > longest {
            self.convert();
        }
        match &mut self.fields {
            Fields::Packed { buffer, len } => {
                if let Some(found) = find(buffer, field) {
                    let (value_start, end) = (found.value_start, found.end);
                    let mut encoded = Vec::with_capacity(value.len() + 2);
                    push_element(&mut encoded, value);
                    buffer.splice(value_start..end, encoded);
                    return false;
                }
                if *len < limits.hash_max_listpack_entries {
                    push_element(buffer, field);
                    push_element(buffer, value);
                    *len += 1;
                    return true;
                }
                // One field too many: the table takes it.
                self.convert();
                self.put(field, value, limits)
            }
            Fields::Table(table) => {
                let ((_, old), added) =
                    table.get_or_insert_with(field, || (field.into(), value.into()));
                if added {
                    self.bytes += element_bytes(field) + element_bytes(value) + FIELD_OVERHEAD;
                } else if old.len() == value.len() {
                    // A counter's new value is often as long as its old
                    // one: written over it, with no allocation.
                    old.copy_from_slice(value);
                } else {
                    self.bytes = self.bytes + value.len() - old.len();
                    *old = value.into();
                }
                added
            }
        }
    }

    /// Turns a packed hash into a table (whose order is its buckets', as a
    /// Redis dict's is).
    fn convert(&mut self) {
        let Fields::Packed { buffer, .. } = &self.fields else {
            return;
        };
        let mut table = ByteTable::with_capacity(self.len());
        let mut bytes = 0;
        for (field, value) in pairs(buffer) {
            bytes += element_bytes(field) + element_bytes(value) + FIELD_OVERHEAD;
            table.get_or_insert_with(field, || (field.into(), value.into()));
        }
        self.fields = Fields::Table(table);
        self.bytes = bytes;
    }

    /// Removes a field, and its deadline; true when it existed.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        if let Some(deadlines) = self.deadlines.as_mut() {
            deadlines.remove(field);
        }
        self.remove_field(field)
    }

    fn remove_field(&mut self, field: &[u8]) -> bool {
        match &mut self.fields {
            // A listpack keeps the order of the remaining fields.
            Fields::Packed { buffer, len } => match find(buffer, field) {
                Some(found) => {
                    let range = found.start..found.end;
                    buffer.drain(range);
                    *len -= 1;
                    true
                }
                None => false,
            },
            Fields::Table(table) => match table.remove(field) {
                Some((field, value)) => {
                    self.bytes -= element_bytes(&field) + element_bytes(&value) + FIELD_OVERHEAD;
                    true
                }
                None => false,
            },
        }
    }

    /// True once the hash keeps field deadlines (a listpackex, or a table
    /// that had one), whether or not a field has one now.
    pub fn keeps_deadlines(&self) -> bool {
        self.deadlines.is_some()
    }

    /// True when some field has a deadline.
    pub fn has_field_deadlines(&self) -> bool {
        self.deadlines.as_ref().is_some_and(|d| d.len() > 0)
    }

    /// The deadline of `field` (unix ms), if it has one.
    pub fn deadline(&self, field: &[u8]) -> Option<u64> {
        self.deadlines.as_ref()?.get(field)
    }

    /// The earliest deadline of any field.
    pub fn earliest_deadline(&self) -> Option<u64> {
        self.deadlines.as_ref()?.earliest()
    }

    /// Makes the hash one that keeps field deadlines (Redis converts a
    /// listpack to a listpackex for any HEXPIRE on an existing hash, even
    /// one that sets nothing).
    pub fn enable_deadlines(&mut self) {
        self.deadlines.get_or_insert_with(Default::default);
    }

    /// Gives an existing field the deadline `at_ms`. Packed, the field
    /// moves to its place in deadline order, after the fields due no
    /// later and before those without one, as Redis's listpackex keeps
    /// them (HGETALL's order shows it).
    pub fn set_deadline(&mut self, field: &[u8], at_ms: u64) {
        let deadlines = self.deadlines.get_or_insert_with(Default::default);
        deadlines.set(field, at_ms);
        let Fields::Packed { buffer, .. } = &mut self.fields else {
            return;
        };
        let Some(found) = find(buffer, field) else {
            return;
        };
        let mut pair = Vec::with_capacity(found.end - found.start);
        push_element(&mut pair, field);
        push_element(&mut pair, found.value);
        buffer.drain(found.start..found.end);
        let mut at = buffer.len();
        let mut elements = elements(buffer);
        while let Some((start, name, _)) = elements.next() {
            if deadlines.get(name).is_none_or(|other| other > at_ms) {
                at = start;
                break;
            }
            elements.next();
        }
        buffer.splice(at..at, pair);
    }

    /// Takes `field`'s deadline away; true when it had one. Packed, the
    /// field moves to the end, behind every field with a deadline.
    pub fn persist(&mut self, field: &[u8]) -> bool {
        if self
            .deadlines
            .as_mut()
            .and_then(|d| d.remove(field))
            .is_none()
        {
            return false;
        }
        if let Fields::Packed { buffer, .. } = &mut self.fields {
            if let Some(found) = find(buffer, field) {
                let pair = buffer[found.start..found.end].to_vec();
                buffer.drain(found.start..found.end);
                buffer.extend_from_slice(&pair);
            }
        }
        true
    }

    /// Removes every field whose deadline is before `now_ms`; their names,
    /// earliest first.
    pub fn expire_due(&mut self, now_ms: u64) -> Vec<Box<[u8]>> {
        let due = match &self.deadlines {
            Some(deadlines) if deadlines.earliest().is_some_and(|at| at < now_ms) => {
                deadlines.due(now_ms)
            }
            _ => return Vec::new(),
        };
        for field in &due {
            self.remove(field);
        }
        due
    }

    /// The deadline the shard's field expiry queue holds for this hash
    /// (0: none).
    pub fn hinted_deadline(&self) -> u64 {
        self.deadlines.as_ref().map_or(0, |d| d.hinted())
    }

    /// Records the deadline the shard's field expiry queue now holds.
    pub fn set_hinted_deadline(&mut self, at_ms: u64) {
        if let Some(deadlines) = self.deadlines.as_mut() {
            deadlines.set_hinted(at_ms);
        }
    }

    /// Fields, values and deadlines (0: none) in iteration order.
    pub fn iter_with_deadlines(&self) -> impl Iterator<Item = (&[u8], &[u8], u64)> {
        self.iter()
            .map(|(f, v)| (f, v, self.deadline(f).unwrap_or(0)))
    }

    /// Fields and values in Redis's iteration order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let (packed, table) = match &self.fields {
            Fields::Packed { buffer, .. } => (Some(pairs(buffer)), None),
            Fields::Table(table) => (None, Some(table.iter().map(|(f, v)| (&**f, &**v)))),
        };
        packed
            .into_iter()
            .flatten()
            .chain(table.into_iter().flatten())
    }

    /// One page of HSCAN from `cursor`, visiting about `count` fields (see
    /// `Set::scan_page`): the packed form comes back whole with cursor 0.
    pub fn scan_page(&self, cursor: u64, count: usize) -> (u64, Vec<FieldValue<'_>>) {
        match &self.fields {
            Fields::Packed { .. } => (0, self.iter().collect()),
            Fields::Table(table) => {
                let (next, page) = table.scan_page(cursor, count);
                (next, page.into_iter().map(|(f, v)| (&**f, &**v)).collect())
            }
        }
    }

    /// Random fields as HRANDFIELD's count asks (see
    /// [`crate::util::random_positions`]); `None` asks for one.
    pub fn random_fields(&self, count: Option<i64>) -> Vec<FieldValue<'_>> {
        match &self.fields {
            Fields::Packed { len: 0, .. } => Vec::new(),
            Fields::Packed { buffer, len } => match count {
                None => {
                    let at = crate::util::random_u64() as usize % len;
                    pairs(buffer).nth(at).into_iter().collect()
                }
                Some(count) => {
                    // One pass over the buffer, so a count in the
                    // thousands does not scan it once per pick.
                    let fields: Vec<_> = pairs(buffer).collect();
                    crate::util::random_positions(*len, count)
                        .into_iter()
                        .filter_map(|at| fields.get(at).copied())
                        .collect()
                }
            },
            Fields::Table(table) => match count {
                None => table
                    .random()
                    .into_iter()
                    .map(|(f, v)| (&**f, &**v))
                    .collect(),
                Some(count) => table
                    .random_items(count)
                    .into_iter()
                    .map(|(f, v)| (&**f, &**v))
                    .collect(),
            },
        }
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
    fn packed_fields_are_rewritten_in_place_whatever_their_lengths() {
        let limits = Encodings {
            hash_max_listpack_value: 1000,
            ..Encodings::default()
        };
        let long = vec![b'x'; 300];
        let mut hash = Hash::default();
        hash.insert(b"a", b"1", &limits);
        hash.insert(&long, b"2", &limits);
        hash.insert(b"c", &long, &limits);
        assert!(!hash.insert(b"a", &long, &limits));
        assert!(!hash.insert(&long, b"", &limits));
        assert!(!hash.insert(b"c", b"3", &limits));
        assert_eq!(hash.encoding(), "listpack");
        assert_eq!(hash.len(), 3);
        assert_eq!(hash.get(b"a"), Some(&long[..]));
        assert_eq!(hash.get(&long), Some(&b""[..]));
        assert_eq!(hash.get(b"c"), Some(&b"3"[..]));
        assert_eq!(hash.get(b"x"), None);
        assert!(hash.remove(&long));
        assert!(!hash.remove(&long));
        let order: Vec<_> = hash.iter().collect();
        assert_eq!(order, vec![(&b"a"[..], &long[..]), (&b"c"[..], &b"3"[..])]);
        assert_eq!(hash.random_fields(Some(5)), order);
    }

    #[test]
    fn conversion_keeps_every_field_and_value() {
        let limits = Encodings {
            hash_max_listpack_entries: 3,
            ..Encodings::default()
        };
        let mut hash = Hash::default();
        for field in [&b"z"[..], b"y", b"x"] {
            hash.insert(field, field, &limits);
        }
        assert_eq!(hash.encoding(), "listpack");
        hash.insert(b"w", b"w", &limits);
        assert_eq!(hash.encoding(), "hashtable");
        // A table's order is its buckets', as a Redis dict's is.
        let mut fields: Vec<_> = hash.iter().map(|(f, _)| f).collect();
        fields.sort();
        assert_eq!(fields, vec![&b"w"[..], b"x", b"y", b"z"]);
        assert!(hash.iter().all(|(f, v)| f == v));
        assert!(hash.heap_bytes() > 0);
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

    #[test]
    fn packed_fields_stay_in_deadline_order_and_conversion_keeps_deadlines() {
        let limits = Encodings {
            hash_max_listpack_entries: 4,
            ..Encodings::default()
        };
        let mut hash = Hash::default();
        for field in [&b"a"[..], b"b", b"c"] {
            hash.insert(field, b"v", &limits);
        }
        hash.set_deadline(b"c", 300);
        hash.set_deadline(b"a", 100);
        hash.set_deadline(b"b", 300);
        let order = |hash: &Hash| hash.iter().map(|(f, _)| f.to_vec()).collect::<Vec<_>>();
        // Equal deadlines keep the order they were given in.
        assert_eq!(order(&hash), [b"a".to_vec(), b"c".to_vec(), b"b".to_vec()]);
        assert_eq!(hash.encoding(), "listpackex");
        assert!(hash.persist(b"a"));
        assert!(!hash.persist(b"a"));
        assert_eq!(order(&hash), [b"c".to_vec(), b"b".to_vec(), b"a".to_vec()]);
        // HINCRBY's kind of write keeps place and deadline; HSET's drops both.
        hash.insert_keeping_deadline(b"c", b"w", &limits);
        assert_eq!(hash.deadline(b"c"), Some(300));
        assert!(!hash.insert(b"c", b"x", &limits));
        assert_eq!(hash.deadline(b"c"), None);
        assert_eq!(order(&hash), [b"b".to_vec(), b"a".to_vec(), b"c".to_vec()]);
        hash.insert(b"d", b"v", &limits);
        hash.insert(b"e", b"v", &limits);
        assert_eq!(hash.encoding(), "hashtable");
        assert_eq!(hash.deadline(b"b"), Some(300));
        assert_eq!(hash.earliest_deadline(), Some(300));
        assert_eq!(hash.expire_due(300), Vec::<Box<[u8]>>::new());
        assert_eq!(hash.expire_due(301), vec![Box::from(&b"b"[..])]);
        assert_eq!(hash.len(), 4);
        assert!(!hash.has_field_deadlines());
    }

    #[test]
    fn deadlines_cost_memory_only_while_fields_have_them() {
        let limits = Encodings::default();
        let mut hash = Hash::default();
        hash.insert(b"field", b"value", &limits);
        hash.enable_deadlines();
        let empty = hash.heap_bytes();
        hash.set_deadline(b"field", 1000);
        assert!(hash.heap_bytes() > empty);
        hash.remove(b"field");
        hash.insert(b"field", b"value", &limits);
        assert_eq!(hash.heap_bytes(), empty);
    }
}
