//! Persistence in Redis's own format: values to and from RDB (DUMP,
//! RESTORE, snapshots) and the snapshot files SAVE writes and the server
//! loads at start. The byte format lives in the `tally-rdb` crate; this
//! module moves values between it and the store.

mod convert;
pub mod snapshot;

pub use convert::{from_rdb, to_rdb};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::cmd::table::{flags, registry};
use crate::stats::Stats;

/// What INFO persistence and LASTSAVE report.
#[derive(Debug)]
pub struct PersistenceState {
    /// Unix seconds of the last successful save (the start time before).
    pub last_save_unix: AtomicU64,
    /// Successful saves since start (`rdb_saves`).
    pub saves: AtomicU64,
    /// The last save failed (`rdb_last_bgsave_status:err`).
    pub last_save_failed: AtomicBool,
    /// Successful write commands counted at the last save (see
    /// [`changes_since_last_save`]).
    pub writes_at_last_save: AtomicU64,
    /// Keys loaded by the last load (`rdb_last_load_keys_loaded`).
    pub last_load_keys: AtomicU64,
    /// Keys the last load found expired (`rdb_last_load_keys_expired`).
    pub last_load_expired: AtomicU64,
}

impl PersistenceState {
    /// Nothing saved yet: LASTSAVE is the start time, as on Redis.
    pub fn new(started_unix: u64) -> PersistenceState {
        PersistenceState {
            last_save_unix: AtomicU64::new(started_unix),
            saves: AtomicU64::new(0),
            last_save_failed: AtomicBool::new(false),
            writes_at_last_save: AtomicU64::new(0),
            last_load_keys: AtomicU64::new(0),
            last_load_expired: AtomicU64::new(0),
        }
    }
}

/// Successful calls of write commands since start: tally's measure of
/// changes (Redis's `dirty` counts modified keys and elements instead).
pub fn write_calls(stats: &Stats) -> u64 {
    registry()
        .all()
        .enumerate()
        .filter(|(_, command)| command.flags & flags::WRITE != 0)
        .map(|(index, _)| {
            let c = &stats.commands[index];
            c.calls
                .load(Ordering::Relaxed)
                .saturating_sub(c.failed_calls.load(Ordering::Relaxed))
        })
        .sum()
}

/// INFO's `rdb_changes_since_last_save`.
pub fn changes_since_last_save(stats: &Stats, state: &PersistenceState) -> u64 {
    write_calls(stats).saturating_sub(state.writes_at_last_save.load(Ordering::Relaxed))
}
