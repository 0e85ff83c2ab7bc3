//! A per-shard slab allocator for entries.
//!
//! A rate-limit counter entry is ~48 bytes. glibc malloc puts an 8-byte
//! header in front of every chunk and rounds to 16, so such an entry costs 64
//! bytes; mimalloc rounds better but keeps per-thread pages that cost more RSS
//! than they save here. The slab hands out small blocks in 8-byte size
//! classes from 64 KiB chunks with no per-block header, so a 48-byte entry
//! costs 48 bytes. Freed blocks go on a per-class free list and are reused
//! by the next entry of that size, so TTL churn does not grow memory.
//!
//! Blocks larger than [`MAX_SLAB_BLOCK`] come from the global allocator.
//!
//! The slab belongs to one shard and is only touched under that shard's
//! lock. Every block must be freed into the slab that allocated it, which the
//! shard guarantees by owning both the table and the slab (SWAPDB swaps them
//! together).

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

/// Largest block served from slab chunks; larger ones use the global allocator.
pub const MAX_SLAB_BLOCK: usize = 256;
/// Size-class granularity and block alignment.
pub const GRANULE: usize = 8;
const CLASSES: usize = MAX_SLAB_BLOCK / GRANULE;
const CHUNK_SIZE: usize = 64 * 1024;

/// Rounds a request to the size actually handed out.
#[inline]
pub fn block_size(size: usize) -> usize {
    if size <= MAX_SLAB_BLOCK {
        size.max(GRANULE).div_ceil(GRANULE) * GRANULE
    } else {
        // What a general-purpose allocator typically spends: 16-byte granules
        // plus an 8-byte header.
        (size + 8).div_ceil(16) * 16
    }
}

#[derive(Clone, Copy)]
struct Class {
    /// Head of the free list; each free block stores the next pointer.
    free: *mut u8,
    /// Bump region not yet handed out.
    bump: *mut u8,
    bump_end: *mut u8,
}

impl Default for Class {
    fn default() -> Class {
        Class {
            free: std::ptr::null_mut(),
            bump: std::ptr::null_mut(),
            bump_end: std::ptr::null_mut(),
        }
    }
}

/// The allocator of one shard.
pub struct Slab {
    classes: [Class; CLASSES],
    chunks: Vec<NonNull<u8>>,
}

// SAFETY: the slab owns its chunks exclusively; it is moved between threads
// only together with its shard, behind the shard's mutex.
unsafe impl Send for Slab {}

// Constants, and sizes bounded by proto-max-bulk-len (512 MB at most): a
// layout error here is a bug, not something a request can cause.
#[allow(clippy::expect_used)]
fn chunk_layout() -> Layout {
    Layout::from_size_align(CHUNK_SIZE, GRANULE).expect("valid chunk layout")
}

#[allow(clippy::expect_used)]
fn large_layout(size: usize) -> Layout {
    Layout::from_size_align(size, GRANULE).expect("block size overflows the address space")
}

impl Default for Slab {
    fn default() -> Slab {
        Slab::new()
    }
}

impl Slab {
    /// An empty slab; it allocates its first chunk on first use.
    pub fn new() -> Slab {
        Slab {
            classes: [Class::default(); CLASSES],
            chunks: Vec::new(),
        }
    }

    /// Bytes of chunks held (allocated from the system, used or free).
    pub fn chunk_bytes(&self) -> usize {
        self.chunks.len() * CHUNK_SIZE
    }

    /// Allocates `size` bytes aligned to 8. The block is uninitialised.
    pub fn alloc(&mut self, size: usize) -> NonNull<u8> {
        if size > MAX_SLAB_BLOCK {
            let layout = large_layout(size);
            // SAFETY: size > 0.
            let raw = unsafe { alloc(layout) };
            return NonNull::new(raw).unwrap_or_else(|| handle_alloc_error(layout));
        }
        let block = block_size(size);
        let class = &mut self.classes[block / GRANULE - 1];
        if !class.free.is_null() {
            let head = class.free;
            // SAFETY: a free block holds the next pointer in its first 8 bytes
            // (every block is at least 8 bytes and 8-aligned).
            class.free = unsafe { *(head as *mut *mut u8) };
            // SAFETY: head is non-null.
            return unsafe { NonNull::new_unchecked(head) };
        }
        if (class.bump_end as usize) - (class.bump as usize) < block {
            let layout = chunk_layout();
            // SAFETY: CHUNK_SIZE > 0.
            let raw = unsafe { alloc(layout) };
            let chunk = NonNull::new(raw).unwrap_or_else(|| handle_alloc_error(layout));
            self.chunks.push(chunk);
            let class = &mut self.classes[block / GRANULE - 1];
            class.bump = chunk.as_ptr();
            // SAFETY: one past the end of the chunk.
            class.bump_end = unsafe { chunk.as_ptr().add(CHUNK_SIZE) };
        }
        let class = &mut self.classes[block / GRANULE - 1];
        let out = class.bump;
        // SAFETY: at least `block` bytes remain in the bump region.
        class.bump = unsafe { out.add(block) };
        // SAFETY: out points into a live chunk.
        unsafe { NonNull::new_unchecked(out) }
    }

    /// Returns a block of `size` bytes obtained from [`Slab::alloc`] of this slab.
    ///
    /// # Safety
    /// `ptr` must come from `self.alloc(size)` with the same `size` and must not
    /// be used afterwards.
    pub unsafe fn free(&mut self, ptr: NonNull<u8>, size: usize) {
        if size > MAX_SLAB_BLOCK {
            // SAFETY: allocated by the global allocator with this layout.
            unsafe { dealloc(ptr.as_ptr(), large_layout(size)) };
            return;
        }
        let class = &mut self.classes[block_size(size) / GRANULE - 1];
        // SAFETY: the block is ours, at least 8 bytes and 8-aligned.
        unsafe { *(ptr.as_ptr() as *mut *mut u8) = class.free };
        class.free = ptr.as_ptr();
    }

    /// Forgets every block and returns the chunks to the system. Blocks larger
    /// than [`MAX_SLAB_BLOCK`] must have been freed first.
    pub fn reset(&mut self) {
        for chunk in self.chunks.drain(..) {
            // SAFETY: each chunk was allocated with chunk_layout().
            unsafe { dealloc(chunk.as_ptr(), chunk_layout()) };
        }
        self.classes = [Class::default(); CLASSES];
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        self.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_of_a_class_are_distinct_and_reused_after_free() {
        let mut slab = Slab::new();
        let a = slab.alloc(48);
        let b = slab.alloc(45);
        assert_ne!(a, b);
        assert_eq!(b.as_ptr() as usize - a.as_ptr() as usize, 48);
        // SAFETY: a came from alloc(48).
        unsafe { slab.free(a, 48) };
        assert_eq!(slab.alloc(41), a, "a freed block is reused by its class");
        assert_eq!(slab.chunk_bytes(), CHUNK_SIZE);
    }

    #[test]
    fn many_blocks_span_chunks_and_large_blocks_bypass_the_slab() {
        let mut slab = Slab::new();
        let blocks: Vec<_> = (0..5000).map(|_| slab.alloc(56)).collect();
        assert!(slab.chunk_bytes() >= 5000 * 56);
        for (i, block) in blocks.iter().enumerate() {
            // SAFETY: each block is 56 bytes and ours.
            unsafe { block.as_ptr().write_bytes(i as u8, 56) };
        }
        for block in blocks {
            // SAFETY: from alloc(56).
            unsafe { slab.free(block, 56) };
        }
        let big = slab.alloc(4096);
        // SAFETY: from alloc(4096).
        unsafe { slab.free(big, 4096) };
    }

    #[test]
    fn block_sizes_round_to_the_granule() {
        assert_eq!(block_size(1), 8);
        assert_eq!(block_size(48), 48);
        assert_eq!(block_size(49), 56);
        assert_eq!(block_size(256), 256);
        assert_eq!(block_size(257), 272);
    }
}
