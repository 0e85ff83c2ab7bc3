//! What the memory allocator reports, for INFO memory.
//!
//! The tally-server binary allocates with jemalloc (feature `jemalloc`, on by
//! default), as Redis does: freed memory goes back to the system through
//! jemalloc's background purging rather than staying in the process after a
//! large reply or a failed script, and its statistics fill INFO's
//! `allocator_*` fields. A program that embeds the server with its own
//! allocator turns the feature off and INFO says `mem_allocator:libc`.

/// jemalloc's own counters, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// Bytes the program holds (Redis's `allocator_allocated`).
    pub allocated: u64,
    /// Bytes in pages with live allocations (`allocator_active`).
    pub active: u64,
    /// Bytes of physical memory mapped by the allocator (`allocator_resident`).
    pub resident: u64,
}

/// INFO's `mem_allocator` value.
pub fn name() -> &'static str {
    if cfg!(feature = "jemalloc") {
        "jemalloc-5.3.0"
    } else {
        "libc"
    }
}

/// The allocator's current figures, when it is jemalloc.
#[cfg(feature = "jemalloc")]
pub fn stats() -> Option<AllocatorStats> {
    use tikv_jemalloc_ctl::{epoch, stats};
    // jemalloc caches its statistics; advancing the epoch refreshes them.
    epoch::advance().ok()?;
    Some(AllocatorStats {
        allocated: stats::allocated::read().ok()? as u64,
        active: stats::active::read().ok()? as u64,
        resident: stats::resident::read().ok()? as u64,
    })
}

/// The allocator's current figures, when it is jemalloc.
#[cfg(not(feature = "jemalloc"))]
pub fn stats() -> Option<AllocatorStats> {
    None
}

/// MEMORY MALLOC-STATS: jemalloc's own report (malloc_stats_print), as
/// Redis gives it; None under another allocator.
#[cfg(feature = "jemalloc")]
pub fn report() -> Option<String> {
    let mut text = Vec::new();
    tikv_jemalloc_ctl::stats_print::stats_print(&mut text, Default::default()).ok()?;
    Some(String::from_utf8_lossy(&text).into_owned())
}

/// MEMORY MALLOC-STATS: jemalloc's own report, None under another allocator.
#[cfg(not(feature = "jemalloc"))]
pub fn report() -> Option<String> {
    None
}

/// MEMORY PURGE: jemalloc returns the dirty pages of every arena to the
/// system now rather than when its background thread gets to them (Redis's
/// jemalloc_purge). Nothing to do under another allocator.
#[cfg(feature = "jemalloc")]
pub fn purge() {
    // MALLCTL_ARENAS_ALL: the pseudo-arena that names every arena.
    const NAME: &[u8] = b"arena.4096.purge\0";
    // SAFETY: NAME is NUL-terminated; arena.<i>.purge reads and writes
    // nothing, so every pointer is null and the length 0, as it requires.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            NAME.as_ptr().cast(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
}

/// MEMORY PURGE: nothing to do under another allocator.
#[cfg(not(feature = "jemalloc"))]
pub fn purge() {}
