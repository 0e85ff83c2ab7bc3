//! One key with its value and deadline, packed into a single heap allocation.
//!
//! Rate-limit workloads hold millions of small counters such as
//! `rl:user:u_99182:a3f2:1720000000 = 7` with a TTL. A straightforward
//! `(Bytes, Value, Option<u64>)` tuple costs ~80 bytes in the table plus one
//! allocation for the key and one for the value; Redis itself spends about
//! 128 bytes per such key. An [`Entry`] is a single thin pointer (8 bytes in
//! the hash table) to one allocation that holds the deadline, the value and
//! the key bytes back to back, so the same counter costs one ~56-byte
//! allocation plus its 9-byte table slot.
//!
//! Layout of the allocation (8-byte aligned):
//!
//! ```text
//! offset 0   u64  expire_at_ms (0 = no deadline)
//! offset 8   u64  payload: the i64 for Int, the byte length for Str
//! offset 16  u8   kind (KIND_INT, KIND_STR)
//! offset 17  u32  key length (unaligned, little endian)
//! offset 21  key bytes, then the string value bytes for Str
//! ```
//!
//! The unsafe code is confined to this file; everything else sees the safe
//! API below.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

const OFF_EXPIRE: usize = 0;
const OFF_PAYLOAD: usize = 8;
const OFF_KIND: usize = 16;
const OFF_KEY_LEN: usize = 17;
const HEADER: usize = 21;

const KIND_INT: u8 = 1;
const KIND_STR: u8 = 2;

/// The value of an entry as seen by readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueRef<'a> {
    /// A string that is the canonical decimal form of an i64, stored as the number.
    Int(i64),
    /// Any other string, stored as bytes.
    Str(&'a [u8]),
}

/// A key, its value and its deadline in one allocation; see the module docs.
pub struct Entry {
    ptr: NonNull<u8>,
}

// SAFETY: an Entry exclusively owns its allocation, exactly like a Box<[u8]>.
unsafe impl Send for Entry {}
// SAFETY: shared access only reads through &self.
unsafe impl Sync for Entry {}

fn layout_for(total: usize) -> Layout {
    Layout::from_size_align(total, 8).expect("entry size overflows the address space")
}

impl Entry {
    /// Builds an entry. `expire_at_ms == 0` means no deadline.
    pub fn new(key: &[u8], value: ValueRef<'_>, expire_at_ms: u64) -> Entry {
        let value_len = match value {
            ValueRef::Int(_) => 0,
            ValueRef::Str(bytes) => bytes.len(),
        };
        let total = HEADER + key.len() + value_len;
        let layout = layout_for(total);
        // SAFETY: layout has a non-zero size (HEADER > 0).
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        let (kind, payload) = match value {
            ValueRef::Int(n) => (KIND_INT, n as u64),
            ValueRef::Str(bytes) => (KIND_STR, bytes.len() as u64),
        };
        // SAFETY: every write below stays inside the `total` bytes just allocated;
        // the two u64 fields are 8-aligned because the allocation is.
        unsafe {
            let p = ptr.as_ptr();
            (p.add(OFF_EXPIRE) as *mut u64).write(expire_at_ms);
            (p.add(OFF_PAYLOAD) as *mut u64).write(payload);
            p.add(OFF_KIND).write(kind);
            (p.add(OFF_KEY_LEN) as *mut [u8; 4]).write((key.len() as u32).to_le_bytes());
            std::ptr::copy_nonoverlapping(key.as_ptr(), p.add(HEADER), key.len());
            if let ValueRef::Str(bytes) = value {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    p.add(HEADER + key.len()),
                    bytes.len(),
                );
            }
        }
        Entry { ptr }
    }

    fn key_len(&self) -> usize {
        // SAFETY: the header is always initialised.
        unsafe {
            u32::from_le_bytes(*(self.ptr.as_ptr().add(OFF_KEY_LEN) as *const [u8; 4])) as usize
        }
    }

    fn kind(&self) -> u8 {
        // SAFETY: the header is always initialised.
        unsafe { *self.ptr.as_ptr().add(OFF_KIND) }
    }

    fn payload(&self) -> u64 {
        // SAFETY: the header is always initialised and 8-aligned.
        unsafe { *(self.ptr.as_ptr().add(OFF_PAYLOAD) as *const u64) }
    }

    fn total_len(&self) -> usize {
        let value_len = if self.kind() == KIND_STR {
            self.payload() as usize
        } else {
            0
        };
        HEADER + self.key_len() + value_len
    }

    /// The key bytes.
    pub fn key(&self) -> &[u8] {
        // SAFETY: key_len bytes after the header were initialised in `new`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(HEADER), self.key_len()) }
    }

    /// The value.
    pub fn value(&self) -> ValueRef<'_> {
        match self.kind() {
            KIND_INT => ValueRef::Int(self.payload() as i64),
            _ => {
                let len = self.payload() as usize;
                // SAFETY: `len` value bytes follow the key, initialised in `new`.
                let bytes = unsafe {
                    std::slice::from_raw_parts(self.ptr.as_ptr().add(HEADER + self.key_len()), len)
                };
                ValueRef::Str(bytes)
            }
        }
    }

    /// The absolute deadline in unix milliseconds, 0 when the key is persistent.
    pub fn expire_at(&self) -> u64 {
        // SAFETY: the header is always initialised and 8-aligned.
        unsafe { *(self.ptr.as_ptr().add(OFF_EXPIRE) as *const u64) }
    }

    /// Sets the deadline (0 removes it).
    pub fn set_expire_at(&mut self, expire_at_ms: u64) {
        // SAFETY: the header is always initialised and 8-aligned; &mut self is exclusive.
        unsafe { *(self.ptr.as_ptr().add(OFF_EXPIRE) as *mut u64) = expire_at_ms }
    }

    /// True when the deadline has passed at `now_ms`.
    #[inline]
    pub fn is_expired(&self, now_ms: u64) -> bool {
        let at = self.expire_at();
        at != 0 && at <= now_ms
    }

    /// Replaces the value, keeping key and deadline. Integers overwrite an integer
    /// in place; anything else that changes the size reallocates.
    pub fn set_value(&mut self, value: ValueRef<'_>) {
        match (self.kind(), value) {
            (KIND_INT, ValueRef::Int(n)) => {
                // SAFETY: header field, 8-aligned, exclusive access.
                unsafe { *(self.ptr.as_ptr().add(OFF_PAYLOAD) as *mut u64) = n as u64 }
            }
            (KIND_STR, ValueRef::Str(bytes)) if bytes.len() == self.payload() as usize => {
                let offset = HEADER + self.key_len();
                // SAFETY: the value area has exactly bytes.len() bytes; `bytes` cannot
                // alias it because we hold &mut self.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        self.ptr.as_ptr().add(offset),
                        bytes.len(),
                    )
                }
            }
            _ => *self = Entry::new(self.key(), value, self.expire_at()),
        }
    }

    /// Bytes this entry costs on the heap, rounded as allocators round
    /// (16-byte granules plus the 8-byte chunk header of glibc malloc).
    pub fn heap_size(&self) -> usize {
        (self.total_len() + 8).div_ceil(16) * 16
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let layout = layout_for(self.total_len());
        // SAFETY: ptr was allocated in `new` with exactly this layout.
        unsafe { dealloc(self.ptr.as_ptr(), layout) }
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("value", &self.value())
            .field("expire_at", &self.expire_at())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_entry_round_trips_and_updates_in_place() {
        let mut e = Entry::new(b"rl:user:u_1:a3f2:1720000000", ValueRef::Int(7), 123);
        assert_eq!(e.key(), b"rl:user:u_1:a3f2:1720000000");
        assert_eq!(e.value(), ValueRef::Int(7));
        assert_eq!(e.expire_at(), 123);
        let before = e.ptr;
        e.set_value(ValueRef::Int(-42));
        assert_eq!(e.ptr, before, "int overwrite must not reallocate");
        assert_eq!(e.value(), ValueRef::Int(-42));
        e.set_expire_at(0);
        assert_eq!(e.expire_at(), 0);
        assert!(!e.is_expired(u64::MAX));
    }

    #[test]
    fn str_entry_changes_kind_and_length() {
        let mut e = Entry::new(b"", ValueRef::Str(b"hello"), 0);
        assert_eq!(e.key(), b"");
        assert_eq!(e.value(), ValueRef::Str(b"hello"));
        e.set_value(ValueRef::Str(b"HELLO"));
        assert_eq!(e.value(), ValueRef::Str(b"HELLO"));
        e.set_value(ValueRef::Str(b"a much longer value than before"));
        assert_eq!(e.value(), ValueRef::Str(b"a much longer value than before"));
        e.set_value(ValueRef::Int(i64::MIN));
        assert_eq!(e.value(), ValueRef::Int(i64::MIN));
        e.set_value(ValueRef::Str(b""));
        assert_eq!(e.value(), ValueRef::Str(b""));
        assert_eq!(e.key(), b"");
    }

    #[test]
    fn expiry_is_inclusive_of_the_deadline() {
        let e = Entry::new(b"k", ValueRef::Int(1), 1000);
        assert!(!e.is_expired(999));
        assert!(e.is_expired(1000));
    }

    #[test]
    fn heap_size_counts_the_allocator_granule() {
        let e = Entry::new(b"rl:user:u_100000:a3f2:1720000000", ValueRef::Int(7), 1);
        // 21 header + 32 key = 53 bytes, +8 chunk header, rounded to 16.
        assert_eq!(e.heap_size(), 64);
    }
}
