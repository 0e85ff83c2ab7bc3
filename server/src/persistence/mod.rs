//! Persistence in Redis's own format: values to and from RDB (DUMP,
//! RESTORE, snapshots) and the snapshot files SAVE writes and the server
//! loads at start. The byte format lives in the `tally-rdb` crate; this
//! module moves values between it and the store.

pub mod aof;
mod key_delay;
pub mod replica_snapshot;
pub mod snapshot;

pub use crate::store::rdb_value::{from_rdb, to_rdb};

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use crate::store::snapshot::SnapshotMemory;

use crate::catalog::{flags, registry};
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
    /// The same count at the moment of the save in progress.
    pub writes_at_snapshot: AtomicU64,
    /// Keys loaded by the last load (`rdb_last_load_keys_loaded`).
    pub last_load_keys: AtomicU64,
    /// Keys the last load found expired (`rdb_last_load_keys_expired`).
    pub last_load_expired: AtomicU64,
    /// A BGSAVE is running (`rdb_bgsave_in_progress`).
    pub bgsave_in_progress: AtomicBool,
    /// A background snapshot (a BGSAVE or an append-only file rewrite) owns
    /// the shards' snapshot state; one at a time, as Redis runs one child.
    pub snapshot_busy: AtomicBool,
    /// BGSAVE SCHEDULE asked for another once the running one ends.
    pub bgsave_scheduled: AtomicBool,
    /// When the running BGSAVE started (unix ms).
    pub bgsave_started_ms: AtomicU64,
    /// Seconds the last BGSAVE took (-1 before any).
    pub last_bgsave_secs: AtomicI64,
    /// Extra memory of snapshots in progress (INFO `current_cow_size`).
    pub snapshot_memory: Arc<SnapshotMemory>,
    /// Peak extra memory of the last BGSAVE (`rdb_last_cow_size`).
    pub last_cow_size: AtomicU64,
    /// When the last BGSAVE was started by the `save` schedule (unix s): a
    /// failed one is retried after 5 s, as Redis does.
    pub last_bgsave_try_unix: AtomicU64,
    /// Writes (and PING) get MISCONF: the last BGSAVE failed, save points
    /// are set and `stop-writes-on-bgsave-error` is yes.
    pub writes_refused: AtomicBool,
    /// The snapshot is being loaded: commands not flagged `loading` get
    /// -LOADING (INFO `loading:1` and `loading_*`).
    pub loading: AtomicBool,
    /// The file's size (`loading_total_bytes`).
    pub loading_total_bytes: AtomicU64,
    /// Bytes of it read so far (`loading_loaded_bytes`).
    pub loading_loaded_bytes: AtomicU64,
    /// When loading began, unix s (`loading_start_time`).
    pub loading_start_unix: AtomicU64,
    /// A fatal error shut the server down (the binary exits 1): a file
    /// that could not be loaded, or a replica unable to write to disk
    /// under `replica-ignore-disk-write-errors no`.
    pub fatal: AtomicBool,
}

impl PersistenceState {
    /// Nothing saved yet: LASTSAVE is the start time, as on Redis.
    pub fn new(started_unix: u64) -> PersistenceState {
        PersistenceState {
            last_save_unix: AtomicU64::new(started_unix),
            saves: AtomicU64::new(0),
            last_save_failed: AtomicBool::new(false),
            writes_at_last_save: AtomicU64::new(0),
            writes_at_snapshot: AtomicU64::new(0),
            last_load_keys: AtomicU64::new(0),
            last_load_expired: AtomicU64::new(0),
            bgsave_in_progress: AtomicBool::new(false),
            snapshot_busy: AtomicBool::new(false),
            bgsave_scheduled: AtomicBool::new(false),
            bgsave_started_ms: AtomicU64::new(0),
            last_bgsave_secs: AtomicI64::new(-1),
            snapshot_memory: Arc::new(SnapshotMemory::default()),
            last_cow_size: AtomicU64::new(0),
            last_bgsave_try_unix: AtomicU64::new(0),
            writes_refused: AtomicBool::new(false),
            loading: AtomicBool::new(false),
            loading_total_bytes: AtomicU64::new(0),
            loading_loaded_bytes: AtomicU64::new(0),
            loading_start_unix: AtomicU64::new(0),
            fatal: AtomicBool::new(false),
        }
    }

    /// Recomputes [`PersistenceState::writes_refused`] from the settings and
    /// the last BGSAVE's outcome.
    pub fn refresh_write_refusal(&self, config: &crate::config::Config) {
        let refused = config.stop_writes_on_bgsave_error
            && !config.save_points.is_empty()
            && self.last_save_failed.load(Ordering::Relaxed);
        self.writes_refused.store(refused, Ordering::Relaxed);
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

/// Records a successful save whose snapshot was taken at `at_unix`
/// (LASTSAVE, INFO), counting changes from the writes made by then.
pub fn saved(shared: &crate::state::Shared, at_unix: u64) {
    let state = &shared.persistence;
    state.writes_at_last_save.store(
        state.writes_at_snapshot.load(Ordering::Relaxed),
        Ordering::Relaxed,
    );
    state.last_save_unix.store(at_unix, Ordering::Relaxed);
    state.saves.fetch_add(1, Ordering::Relaxed);
    state.last_save_failed.store(false, Ordering::Relaxed);
    state.refresh_write_refusal(&shared.config.read());
}

/// Starts what was scheduled while another background snapshot ran: a
/// BGSAVE (BGSAVE SCHEDULE) or an append-only file rewrite (BGREWRITEAOF).
pub fn start_scheduled(shared: &Arc<crate::state::Shared>) {
    if shared
        .persistence
        .bgsave_scheduled
        .swap(false, Ordering::SeqCst)
        && !snapshot::bgsave(shared)
    {
        shared
            .persistence
            .bgsave_scheduled
            .store(true, Ordering::SeqCst);
    }
    aof::start_scheduled_rewrite(shared);
}

/// The `save` schedule: every 100 ms, a BGSAVE when a save point is due
/// (at least `changes` writes and more than `seconds` since the last save),
/// as Redis's serverCron; a failed one is retried after 5 seconds.
pub async fn run_schedule(shared: Arc<crate::state::Shared>) {
    const RETRY_AFTER_S: u64 = 5;
    let mut stopping = shared.shutdown.subscribe();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
            _ = stopping.wait_for(|&stop| stop) => return,
        }
        let state = &shared.persistence;
        if state.snapshot_busy.load(Ordering::SeqCst) {
            continue;
        }
        let points = shared.config.read().save_points.clone();
        let now_s = shared.clock.now_ms() / 1000;
        let changes = changes_since_last_save(&shared.stats, state);
        let since = now_s.saturating_sub(state.last_save_unix.load(Ordering::Relaxed));
        let may_retry = !state.last_save_failed.load(Ordering::Relaxed)
            || now_s.saturating_sub(state.last_bgsave_try_unix.load(Ordering::Relaxed))
                > RETRY_AFTER_S;
        let Some((seconds, _)) = points
            .iter()
            .find(|(seconds, min)| changes >= *min && since > *seconds)
        else {
            continue;
        };
        if may_retry {
            tracing::info!("{changes} changes in {seconds} seconds. Saving...");
            state.last_bgsave_try_unix.store(now_s, Ordering::Relaxed);
            snapshot::bgsave(&shared);
        }
    }
}
