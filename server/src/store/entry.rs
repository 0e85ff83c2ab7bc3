//! One key with its value and deadline, packed into a single slab block.
//!
//! Rate-limit workloads hold millions of small counters such as
//! `rl:user:u_99182:a3f2:1720000000 = 7` with a TTL. A straightforward
//! `(Bytes, Value, Option<u64>)` tuple costs ~80 bytes in the table plus one
//! allocation for the key and one for the value; Redis itself spends about
//! 128 bytes per such key. An [`Entry`] is a single thin pointer (8 bytes in
//! the hash table) to one block that holds the deadline, the value and the key
//! bytes back to back: 16 bytes of header plus the key, so that counter costs
//! one 48-byte block from the shard's [`Slab`] plus its 9-byte table slot.
//!
//! Two layouts, told apart by a bit in the first byte:
//!
//! ```text
//! compact (key <= 255 bytes, deadline < 2^44 ms, i.e. before year 2527):
//!   0   u8   tag: kind (2 bits) | WIDE (0 here) | snapshot-handled | clock bits 16..19
//!   1   u8   key length
//!   2   u48  expire_at_ms in the low 44 bits (0 = no deadline), clock
//!             bits 20..23 in the top 4, little endian
//!   8   u64  payload: the i64 for Int, the byte length for Str, the
//!             `Box<Object>` pointer for a collection
//!   16  key bytes, then the string bytes for Str
//! wide (anything else):
//!   0   u8   tag: kind | WIDE | snapshot-handled | clock bits 16..19
//!   1   u8   clock bits 20..23 in the low 4
//!   4   u32  key length
//!   8   u64  expire_at_ms
//!   16  u64  payload
//!   24  key bytes, then the string bytes for Str
//! ```
//!
//! The key's access clock (`super::access_clock`: Redis's 24-bit LRU
//! clock) has no room of its own in a 48-byte counter block. Its low 16
//! bits, which change every second, ride in the handle itself: the top 16
//! bits of the block's address, which no 64-bit Linux process uses (user
//! space ends at 2^47 on x86-64 and at 2^48 on aarch64). Stamping a key
//! therefore writes the hash-table slot its lookup just read; the 8 bits in
//! the header change once every 18 hours.
//!
//! A collection (hash, list, set, sorted set) lives in its own heap
//! [`Object`]; the block then holds only the header, the key and the pointer.
//!
//! An entry does not free itself: blocks belong to the shard's slab, so the
//! shard frees every entry it removes with [`Entry::free`]. The unsafe code of
//! the entry layout is confined to this file.

use std::ptr::NonNull;

use super::object::Object;
use super::slab::{block_size, Slab};

const KIND_INT: u8 = 1;
const KIND_STR: u8 = 2;
const KIND_OBJ: u8 = 3;
const KIND_MASK: u8 = 0x03;
const WIDE: u8 = 0x04;
/// Set only while a snapshot is open: this entry's value of the snapshot's
/// moment is taken care of (preserved before it changed, or the key did not
/// exist then), so the background writer skips it. See `super::snapshot`.
const SNAPSHOT_HANDLED: u8 = 0x08;
/// Where the tag byte keeps bits 16..19 of the access clock.
const TAG_CLOCK_SHIFT: u32 = 4;

const COMPACT_HEADER: usize = 16;
const WIDE_HEADER: usize = 24;
const COMPACT_MAX_KEY: usize = 255;
const COMPACT_DEADLINE_BITS: u32 = 44;
const COMPACT_MAX_EXPIRE: u64 = (1 << COMPACT_DEADLINE_BITS) - 1;
/// The byte of the header that keeps bits 20..23 of the access clock: the
/// top nibble of the compact deadline field, the low nibble of a wide
/// header's second byte.
const COMPACT_CLOCK_BYTE: usize = 7;
const WIDE_CLOCK_BYTE: usize = 1;

/// The handle's address bits; the bits above carry the clock's low 16.
const ADDRESS_BITS: u32 = 48;
const ADDRESS_MASK: usize = (1 << ADDRESS_BITS) - 1;

#[cfg(not(target_pointer_width = "64"))]
compile_error!("entries keep part of the access clock in a 64-bit address's unused top bits");

/// The value of an entry as seen by readers.
#[derive(Debug, Clone, Copy)]
pub enum ValueRef<'a> {
    /// A string that is the canonical decimal form of an i64, stored as the number.
    Int(i64),
    /// Any other string, stored as bytes.
    Str(&'a [u8]),
    /// A collection. Building an entry from it copies the collection.
    Obj(&'a Object),
}

impl<'a> ValueRef<'a> {
    /// A string as it is stored: Redis keeps a string that is the
    /// canonical form of a 64-bit integer as the integer, and so do we
    /// (INCR then never parses or formats text).
    pub fn string(bytes: &'a [u8]) -> ValueRef<'a> {
        match crate::number::parse_i64(bytes) {
            Some(n) => ValueRef::Int(n),
            None => ValueRef::Str(bytes),
        }
    }
}

impl PartialEq for ValueRef<'_> {
    fn eq(&self, other: &ValueRef<'_>) -> bool {
        match (self, other) {
            (ValueRef::Int(a), ValueRef::Int(b)) => a == b,
            (ValueRef::Str(a), ValueRef::Str(b)) => a == b,
            (ValueRef::Obj(a), ValueRef::Obj(b)) => std::ptr::eq(*a, *b),
            _ => false,
        }
    }
}

impl ValueRef<'_> {
    fn extra_len(&self) -> usize {
        match self {
            ValueRef::Int(_) | ValueRef::Obj(_) => 0,
            ValueRef::Str(bytes) => bytes.len(),
        }
    }

    /// True for the string kinds.
    pub fn is_string(&self) -> bool {
        !matches!(self, ValueRef::Obj(_))
    }
}

/// A key, its value and its deadline in one block; see the module docs.
pub struct Entry {
    ptr: NonNull<u8>,
}

// SAFETY: an Entry exclusively owns its block, which lives in a chunk owned by
// the same shard; it only moves between threads together with that shard.
unsafe impl Send for Entry {}
// SAFETY: shared access only reads through &self.
unsafe impl Sync for Entry {}

impl Entry {
    /// Builds an entry in `slab`. `expire_at_ms == 0` means no deadline.
    pub fn new(key: &[u8], value: ValueRef<'_>, expire_at_ms: u64, slab: &mut Slab) -> Entry {
        let (kind, payload) = match value {
            ValueRef::Int(n) => (KIND_INT, n as u64),
            ValueRef::Str(bytes) => (KIND_STR, bytes.len() as u64),
            ValueRef::Obj(object) => (KIND_OBJ, Box::into_raw(Box::new(object.clone())) as u64),
        };
        let entry = Entry::with_header(key, kind, payload, value.extra_len(), expire_at_ms, slab);
        if let ValueRef::Str(bytes) = value {
            // SAFETY: the block has room for `bytes.len()` value bytes after
            // the key (`with_header` allocated them).
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), entry.value_ptr(), bytes.len());
            }
        }
        entry
    }

    /// Allocates a block for `key` with `value_len` value bytes after it and
    /// writes the header and the key; the value bytes are left for the
    /// caller to write.
    fn with_header(
        key: &[u8],
        kind: u8,
        payload: u64,
        value_len: usize,
        expire_at_ms: u64,
        slab: &mut Slab,
    ) -> Entry {
        let wide = key.len() > COMPACT_MAX_KEY || expire_at_ms > COMPACT_MAX_EXPIRE;
        let header = if wide { WIDE_HEADER } else { COMPACT_HEADER };
        let total = header + key.len() + value_len;
        let ptr = slab.alloc(total);
        // The clock's low bits go above the address: an allocator handing
        // out addresses past 2^48 (none on 64-bit Linux does) would break
        // every handle, so it stops here rather than corrupting a key.
        assert!(
            ptr.as_ptr().addr() <= ADDRESS_MASK,
            "an entry block above 2^48 leaves no room for the access clock"
        );
        // SAFETY: every write stays inside the `total` bytes just allocated;
        // the u64 writes are at 8-aligned offsets of an 8-aligned block.
        unsafe {
            let p = ptr.as_ptr();
            if wide {
                p.write(kind | WIDE);
                p.add(WIDE_CLOCK_BYTE).write(0);
                (p.add(4) as *mut [u8; 4]).write((key.len() as u32).to_le_bytes());
                (p.add(8) as *mut u64).write(expire_at_ms);
                (p.add(16) as *mut u64).write(payload);
            } else {
                p.write(kind);
                p.add(1).write(key.len() as u8);
                let deadline = expire_at_ms.to_le_bytes();
                std::ptr::copy_nonoverlapping(deadline.as_ptr(), p.add(2), 6);
                (p.add(8) as *mut u64).write(payload);
            }
            std::ptr::copy_nonoverlapping(key.as_ptr(), p.add(header), key.len());
        }
        Entry { ptr }
    }

    /// The block, without the clock bits the handle carries.
    #[inline]
    fn block(&self) -> NonNull<u8> {
        // SAFETY: the address bits are the block's own, which is not null.
        unsafe { NonNull::new_unchecked(self.ptr.as_ptr().map_addr(|a| a & ADDRESS_MASK)) }
    }

    /// Asks the CPU to bring the block in (header, key and a counter's
    /// value), for a walk or a batch that will read many entries: issued
    /// for all of them first, their cache misses overlap instead of
    /// following one another.
    #[inline]
    pub fn prefetch(&self) {
        // Two lines: a 48-byte counter block may straddle a line boundary.
        let block = self.block().as_ptr() as usize;
        crate::util::prefetch_line(block);
        crate::util::prefetch_line(block + 47);
    }

    /// Where the entry's block is: the same for as long as changes are
    /// made in place (DEBUG OBJECT's `Value at:`).
    pub fn block_address(&self) -> *const u8 {
        self.block().as_ptr()
    }

    /// The key's access clock: when it was last used, as
    /// `super::access_clock` counts.
    #[inline]
    pub fn access_clock(&self) -> u32 {
        let low = (self.ptr.as_ptr().addr() >> ADDRESS_BITS) as u32;
        low | (self.header_clock() as u32) << 16
    }

    /// Stamps the key as used at `clock` (24 bits).
    #[inline]
    pub fn set_access_clock(&mut self, clock: u32) {
        let low = (clock & 0xFFFF) as usize;
        self.ptr = self.block().map_addr(|a| a | low << ADDRESS_BITS);
        let high = (clock >> 16) as u8;
        if self.header_clock() != high {
            self.set_header_clock(high);
        }
    }

    /// The clock's bits 16..23, kept in the header.
    #[inline]
    fn header_clock(&self) -> u8 {
        let tag = self.tag();
        // SAFETY: the clock byte of the entry's layout is initialised.
        let top = unsafe {
            if tag & WIDE != 0 {
                *self.block().as_ptr().add(WIDE_CLOCK_BYTE) & 0x0F
            } else {
                *self.block().as_ptr().add(COMPACT_CLOCK_BYTE) >> 4
            }
        };
        tag >> TAG_CLOCK_SHIFT | top << 4
    }

    fn set_header_clock(&mut self, high: u8) {
        let p = self.block().as_ptr();
        let tag = self.tag();
        // SAFETY: header bytes of a block this entry owns; &mut self makes
        // the writes exclusive. The deadline bits beside the compact
        // nibble are kept.
        unsafe {
            p.write(tag & !(0x0F << TAG_CLOCK_SHIFT) | (high & 0x0F) << TAG_CLOCK_SHIFT);
            if tag & WIDE != 0 {
                p.add(WIDE_CLOCK_BYTE).write(high >> 4);
            } else {
                let byte = p.add(COMPACT_CLOCK_BYTE);
                byte.write(*byte & 0x0F | (high >> 4) << 4);
            }
        }
    }

    /// Where a string's bytes start: right after the key.
    fn value_ptr(&self) -> *mut u8 {
        // SAFETY: header and key lie within the block.
        unsafe {
            self.block()
                .as_ptr()
                .add(self.header_len() + self.key_len())
        }
    }

    /// Writes `patch` at `offset` of a string stored as bytes (SETRANGE),
    /// growing it with zero bytes to reach `offset`: in place when it is
    /// long enough, else into one new block of the final length, the old
    /// bytes copied once. A value that is not stored as bytes is left alone.
    pub fn patch_str(&mut self, offset: usize, patch: &[u8], slab: &mut Slab) {
        if self.tag() & KIND_MASK != KIND_STR {
            return;
        }
        let len = self.payload() as usize;
        let end = offset + patch.len();
        if end > len {
            let grown = Entry::with_header(
                self.key(),
                KIND_STR,
                end as u64,
                end,
                self.expire_at(),
                slab,
            );
            // SAFETY: the new block has `end` value bytes; the old one has
            // `len` < `end`; they are distinct blocks.
            unsafe {
                std::ptr::copy_nonoverlapping(self.value_ptr(), grown.value_ptr(), len);
                std::ptr::write_bytes(grown.value_ptr().add(len), 0, end - len);
            }
            self.replace_block(grown, slab);
        }
        // SAFETY: the value now has at least `end` bytes; `patch` cannot
        // alias them (it is not borrowed from this entry, held by &mut).
        unsafe {
            std::ptr::copy_nonoverlapping(
                patch.as_ptr(),
                self.value_ptr().add(offset),
                patch.len(),
            );
        }
    }

    /// Builds an entry that takes ownership of a collection.
    pub fn new_object(
        key: &[u8],
        object: Box<Object>,
        expire_at_ms: u64,
        slab: &mut Slab,
    ) -> Entry {
        let entry = Entry::new(key, ValueRef::Int(0), expire_at_ms, slab);
        let tag = entry.tag() & !KIND_MASK | KIND_OBJ;
        // SAFETY: header fields of a block just built, exclusively ours.
        unsafe {
            *entry.block().as_ptr() = tag;
            *entry.payload_ptr() = Box::into_raw(object) as u64;
        }
        entry
    }

    #[inline]
    fn object_ptr(&self) -> Option<*mut Object> {
        (self.tag() & KIND_MASK == KIND_OBJ).then(|| self.payload() as *mut Object)
    }

    /// The collection, mutably; `None` for a string.
    pub fn object_mut(&mut self) -> Option<&mut Object> {
        // SAFETY: the pointer came from Box::into_raw and is owned by this
        // entry; &mut self makes the access exclusive.
        self.object_ptr().map(|p| unsafe { &mut *p })
    }

    #[inline]
    fn tag(&self) -> u8 {
        // SAFETY: the first byte is always initialised.
        unsafe { *self.block().as_ptr() }
    }

    #[inline]
    fn is_wide(&self) -> bool {
        self.tag() & WIDE != 0
    }

    #[inline]
    fn header_len(&self) -> usize {
        if self.is_wide() {
            WIDE_HEADER
        } else {
            COMPACT_HEADER
        }
    }

    #[inline]
    fn key_len(&self) -> usize {
        // SAFETY: the header fields for the entry's layout are initialised.
        unsafe {
            if self.is_wide() {
                u32::from_le_bytes(*(self.block().as_ptr().add(4) as *const [u8; 4])) as usize
            } else {
                *self.block().as_ptr().add(1) as usize
            }
        }
    }

    #[inline]
    fn payload_ptr(&self) -> *mut u64 {
        let offset = if self.is_wide() { 16 } else { 8 };
        // SAFETY: in bounds of the header, 8-aligned.
        unsafe { self.block().as_ptr().add(offset) as *mut u64 }
    }

    #[inline]
    fn payload(&self) -> u64 {
        // SAFETY: the payload field is always initialised.
        unsafe { *self.payload_ptr() }
    }

    /// Bytes of the block as requested from the slab.
    fn total_len(&self) -> usize {
        let value_len = if self.tag() & KIND_MASK == KIND_STR {
            self.payload() as usize
        } else {
            0
        };
        self.header_len() + self.key_len() + value_len
    }

    /// The key bytes.
    #[inline]
    pub fn key(&self) -> &[u8] {
        // SAFETY: key_len bytes after the header were initialised in `new`.
        unsafe {
            std::slice::from_raw_parts(self.block().as_ptr().add(self.header_len()), self.key_len())
        }
    }

    /// The value.
    #[inline]
    pub fn value(&self) -> ValueRef<'_> {
        match self.tag() & KIND_MASK {
            KIND_INT => return ValueRef::Int(self.payload() as i64),
            // SAFETY: owned by this entry, alive as long as &self.
            KIND_OBJ => return ValueRef::Obj(unsafe { &*(self.payload() as *const Object) }),
            _ => {}
        }
        let len = self.payload() as usize;
        let offset = self.header_len() + self.key_len();
        // SAFETY: `len` value bytes follow the key, initialised in `new`.
        ValueRef::Str(unsafe { std::slice::from_raw_parts(self.block().as_ptr().add(offset), len) })
    }

    /// The absolute deadline in unix milliseconds, 0 when the key is persistent.
    #[inline]
    pub fn expire_at(&self) -> u64 {
        // SAFETY: the deadline field for the entry's layout is initialised.
        unsafe {
            if self.is_wide() {
                *(self.block().as_ptr().add(8) as *const u64)
            } else {
                let mut bytes = [0u8; 8];
                std::ptr::copy_nonoverlapping(self.block().as_ptr().add(2), bytes.as_mut_ptr(), 6);
                u64::from_le_bytes(bytes) & COMPACT_MAX_EXPIRE
            }
        }
    }

    /// True when the deadline has passed at `now_ms`: a key lives through
    /// the millisecond of its deadline (PTTL 0 then), as Redis's
    /// keyIsExpired has it (`now > when`). Writes that set a deadline not
    /// after now delete at once where Redis does (EXPIRE, GETEX), which is
    /// their own check.
    #[inline]
    pub fn is_expired(&self, now_ms: u64) -> bool {
        let at = self.expire_at();
        at != 0 && at < now_ms
    }

    /// Sets the deadline (0 removes it); moves to the wide layout when the
    /// deadline does not fit the compact one.
    pub fn set_expire_at(&mut self, expire_at_ms: u64, slab: &mut Slab) {
        if self.is_wide() {
            // SAFETY: wide header field, 8-aligned, exclusive access.
            unsafe { *(self.block().as_ptr().add(8) as *mut u64) = expire_at_ms };
        } else if expire_at_ms <= COMPACT_MAX_EXPIRE {
            // The field's top nibble is the clock's.
            let clock = (self.header_clock() >> 4) as u64;
            let field = expire_at_ms | clock << COMPACT_DEADLINE_BITS;
            let bytes = field.to_le_bytes();
            // SAFETY: compact header bytes 2..8, exclusive access.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.block().as_ptr().add(2), 6)
            };
        } else {
            let moved = Entry::new(self.key(), self.value(), expire_at_ms, slab);
            self.replace_block(moved, slab);
        }
    }

    /// Replaces the value, keeping key and deadline. An integer overwrites an
    /// integer and a string one of the same length in place; anything else
    /// takes a new block.
    pub fn set_value(&mut self, value: ValueRef<'_>, slab: &mut Slab) {
        let kind = self.tag() & KIND_MASK;
        match value {
            ValueRef::Int(n) if kind == KIND_INT => {
                // SAFETY: payload field, 8-aligned, exclusive access.
                unsafe { *self.payload_ptr() = n as u64 }
            }
            ValueRef::Str(bytes) if kind == KIND_STR && bytes.len() == self.payload() as usize => {
                let offset = self.header_len() + self.key_len();
                // SAFETY: the value area has exactly bytes.len() bytes; `bytes`
                // cannot alias it because we hold &mut self.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        self.block().as_ptr().add(offset),
                        bytes.len(),
                    )
                }
            }
            _ => {
                let moved = Entry::new(self.key(), value, self.expire_at(), slab);
                self.replace_block(moved, slab);
            }
        }
    }

    /// Moves this entry into `moved`, a new block holding the same key,
    /// and frees the old one. The snapshot mark and the access clock go
    /// along: to an open snapshot and to the key's users it is the same key.
    fn replace_block(&mut self, mut moved: Entry, slab: &mut Slab) {
        moved.set_snapshot_handled(self.snapshot_handled());
        moved.set_access_clock(self.access_clock());
        let old = std::mem::replace(self, moved);
        old.free(slab);
    }

    /// True when an open snapshot has this key taken care of; see
    /// `super::snapshot`.
    #[inline]
    pub fn snapshot_handled(&self) -> bool {
        self.tag() & SNAPSHOT_HANDLED != 0
    }

    /// Marks or unmarks the key as taken care of by the open snapshot.
    #[inline]
    pub fn set_snapshot_handled(&mut self, handled: bool) {
        let tag = if handled {
            self.tag() | SNAPSHOT_HANDLED
        } else {
            self.tag() & !SNAPSHOT_HANDLED
        };
        // SAFETY: the tag byte of a block this entry owns; &mut self makes
        // the write exclusive.
        unsafe { *self.block().as_ptr() = tag };
    }

    /// Bytes this entry costs: its slab block and any collection.
    pub fn heap_size(&self) -> usize {
        let object = match self.value() {
            ValueRef::Obj(object) => object.heap_bytes(),
            _ => 0,
        };
        block_size(self.total_len()) + object
    }

    /// The collection, taken out of the entry (which then holds the integer
    /// 0, so freeing it leaves the collection alone): moving a collection
    /// to another key is a pointer's move, not a copy.
    pub fn take_object(&mut self) -> Option<Box<Object>> {
        let object = self.object_ptr()?;
        let tag = self.tag() & !KIND_MASK | KIND_INT;
        // SAFETY: header fields of a block exclusively ours (&mut self);
        // the pointer came from Box::into_raw and is owned by this entry
        // until the tag no longer says so, which the writes below make so.
        unsafe {
            *self.block().as_ptr() = tag;
            *self.payload_ptr() = 0;
            Some(Box::from_raw(object))
        }
    }

    /// Returns the block to `slab`, which must be the slab that allocated it
    /// (the owning shard's).
    pub fn free(self, slab: &mut Slab) {
        if let Some(object) = self.object_ptr() {
            // SAFETY: from Box::into_raw in `new`/`new_object`, freed once here.
            drop(unsafe { Box::from_raw(object) });
        }
        let size = self.total_len();
        // SAFETY: the block came from this slab with this size (the shard
        // owns both); `self` is consumed so the block is not used again.
        unsafe { slab.free(self.block(), size) }
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
#[path = "entry_tests.rs"]
mod tests;
