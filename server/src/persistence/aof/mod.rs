//! The append-only file, in Redis 7's multi-part layout: a directory
//! (`appenddirname`) holding a base (an RDB snapshot), increments (the
//! commands since, in RESP) and a manifest naming them, so the directory
//! moves between tally and redis-server either way.
//!
//! Commands reach the file through the store's change feed
//! ([`crate::store::feed`]): a write command's propagated form
//! ([`propagate`]) is appended while its shard locks are held, a script's
//! or a transaction's effects as one MULTI/EXEC block. Before a connection
//! sends the replies of a batch that changed something, the feed is
//! written to the file (and fsynced first under `appendfsync always`), so
//! an acknowledged write is in the file; `everysec` fsyncs once a second
//! from a background task, `no` leaves that to the kernel.
//!
//! BGREWRITEAOF writes a new base the way BGSAVE writes a snapshot (no
//! fork, no stop: see `crate::store::snapshot`); at the snapshot's moment,
//! with every shard locked, the feed is cut over to a new increment, so
//! the new base plus that increment hold everything.

pub(crate) mod load;
pub mod manifest;
mod rewrite;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::config::Fsync;
use crate::state::Shared;
use manifest::Manifest;

pub use load::Plan;
pub use rewrite::{bgrewriteaof, start_scheduled_rewrite, RewriteStart};

/// The append-only file's state (one per server).
pub struct Aof {
    writer: Mutex<Writer>,
    /// Feed position written to the open increment.
    written: AtomicU64,
    /// Feed position fsynced.
    synced: AtomicU64,
    /// When the last fsync ran (unix ms).
    last_fsync_ms: AtomicU64,
    /// A rewrite is running (`aof_rewrite_in_progress`).
    pub rewrite_in_progress: AtomicBool,
    /// BGREWRITEAOF asked for one while a BGSAVE ran (`aof_rewrite_scheduled`).
    pub rewrite_scheduled: AtomicBool,
    /// When the running rewrite started (unix ms).
    pub rewrite_started_ms: AtomicU64,
    /// Peak extra memory of the last rewrite's snapshot (`aof_last_cow_size`).
    pub last_cow_size: AtomicU64,
    /// Seconds the last rewrite took (-1 before any).
    pub last_rewrite_secs: AtomicI64,
    /// The last rewrite failed (`aof_last_bgrewrite_status:err`).
    pub last_rewrite_failed: AtomicBool,
    /// Rewrites that succeeded (`aof_rewrites`).
    pub rewrites: AtomicU64,
    /// Rewrites that failed in a row (`aof_rewrites_consecutive_failures`).
    pub consecutive_failures: AtomicU64,
    /// The last write to the file failed: why (writes get MISCONF).
    write_error: Mutex<Option<String>>,
    /// Fast check of `write_error`.
    pub write_failed: AtomicBool,
    /// Size of the base when the log was opened or last rewritten.
    pub base_size: AtomicU64,
    /// Size of the base and increments (`aof_current_size`).
    pub current_size: AtomicU64,
    /// The feed position fsynced, for connections waiting under
    /// `appendfsync always` (also sent when a write fails, to wake them).
    synced_watch: tokio::sync::watch::Sender<u64>,
    /// Wakes the background writer for an fsync a connection waits for.
    sync_requested: tokio::sync::Notify,
}

impl Default for Aof {
    fn default() -> Aof {
        Aof {
            writer: Mutex::default(),
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            last_fsync_ms: AtomicU64::new(0),
            rewrite_in_progress: AtomicBool::new(false),
            rewrite_scheduled: AtomicBool::new(false),
            rewrite_started_ms: AtomicU64::new(0),
            last_cow_size: AtomicU64::new(0),
            // No rewrite yet, as Redis reports it.
            last_rewrite_secs: AtomicI64::new(-1),
            last_rewrite_failed: AtomicBool::new(false),
            rewrites: AtomicU64::new(0),
            consecutive_failures: AtomicU64::new(0),
            write_error: Mutex::new(None),
            write_failed: AtomicBool::new(false),
            base_size: AtomicU64::new(0),
            current_size: AtomicU64::new(0),
            synced_watch: tokio::sync::watch::Sender::new(0),
            sync_requested: tokio::sync::Notify::new(),
        }
    }
}

/// The open increment and the manifest (behind the writer lock: whoever
/// writes the feed to the file holds it).
#[derive(Default)]
struct Writer {
    /// `<dir>/<appenddirname>`.
    dir: PathBuf,
    /// `appendfilename`.
    filename: String,
    manifest: Manifest,
    /// The increment open for appending (shared with an fsync running
    /// outside the lock).
    file: Option<Arc<File>>,
    /// Its size.
    incr_size: u64,
    /// Turned on at run time: the increment is `temp-<name>.incr` and not
    /// in the manifest until the first rewrite gives it a base.
    temporary_incr: bool,
    /// The feed's bytes being written, emptied after; exchanged for the
    /// feed's at each write, so the feed grows into memory it already has
    /// instead of reallocating from nothing after every write.
    buffer: Vec<u8>,
}

/// The largest write buffer kept for reuse: one a burst grew past this is
/// freed, so a quiet log does not keep a burst's memory.
const BUFFER_LIMIT: usize = 4 << 20;

/// Redis's temporary name for the increment of an AOF turned on at run time.
fn temporary_incr_name(filename: &str) -> String {
    format!("temp-{filename}.incr")
}

impl Aof {
    /// The MISCONF error writes get while the last write failed.
    pub fn write_refusal(&self) -> Option<String> {
        if !self.write_failed.load(Ordering::Relaxed) {
            return None;
        }
        let why = self.write_error.lock().clone().unwrap_or_default();
        Some(format!("MISCONF Errors writing to the AOF file: {why}"))
    }

    fn record_write(&self, outcome: &std::io::Result<()>) {
        match outcome {
            Ok(()) => {
                if self.write_failed.swap(false, Ordering::Relaxed) {
                    tracing::warn!("AOF write error looks solved. Redis can write again.");
                    *self.write_error.lock() = None;
                }
            }
            Err(e) => {
                if !self.write_failed.swap(true, Ordering::Relaxed) {
                    tracing::warn!(error = %e, "Error writing to the AOF file");
                }
                *self.write_error.lock() = Some(strerror(e));
            }
        }
    }
}

/// An I/O error as C's strerror words it (what Redis's MISCONF shows).
fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    // Rust adds " (os error N)".
    match text.find(" (os error") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// Makes what a client's batch changed reach the file before its replies
/// go out: written now under `everysec` and `no` (a write to the page
/// cache, which a process crash does not lose). Returns false under
/// `always`, where the replies must also wait for the fsync: the caller
/// then awaits [`until_synced`].
pub fn before_reply(shared: &Shared, offset: u64) -> bool {
    if shared.config.read().appendfsync == Fsync::Always {
        return offset <= shared.aof.synced.load(Ordering::Acquire);
    }
    flush_to(shared, offset);
    true
}

/// Makes what a connection's batch changed (the feed up to `offset`) reach
/// the file before the batch's replies go out, and tells whether it did.
/// Under `everysec` and `no` that is a write to the page cache, which a
/// process crash does not lose; a pipelined batch's connection has already
/// let the other ready connections run (see the connection loop), so one
/// write usually carries all their changes, as Redis writes its buffer once
/// per event-loop turn rather than once per client. Under `always` it
/// waits for the fsync ([`until_synced`]).
pub async fn before_replies(shared: &Shared, offset: u64) -> bool {
    if shared.config.read().appendfsync == Fsync::Always {
        return until_synced(shared, offset).await;
    }
    flush_to(shared, offset);
    true
}

/// Writes the feed to the file when it is not written up to `offset` yet.
/// Looked at again once the writer lock is held: while this connection
/// waited for it, the write that held it may have carried its changes.
fn flush_to(shared: &Shared, offset: u64) {
    let aof = &shared.aof;
    if offset <= aof.written.load(Ordering::Acquire) {
        return;
    }
    let writer = aof.writer.lock();
    if offset > aof.written.load(Ordering::Acquire) {
        write_out(shared, writer, false);
    }
}

impl Aof {
    /// The feed position fsynced so far.
    pub fn synced(&self) -> u64 {
        self.synced.load(Ordering::Acquire)
    }

    /// Hears each fsync's new position (WAITAOF's wait).
    pub fn watch_synced(&self) -> tokio::sync::watch::Receiver<u64> {
        self.synced_watch.subscribe()
    }

    /// Asks the background writer for an fsync now rather than at its
    /// next tick.
    pub fn request_sync(&self) {
        self.sync_requested.notify_one();
    }
}

/// `appendfsync always`: waits until the feed is fsynced up to `offset`,
/// and tells whether it was. The background writer fsyncs for every
/// connection waiting at once (group commit), so a slow fsync holds
/// replies, not the workers. A failed write ends the wait with false (the
/// caller must not acknowledge what is not durable); so does the log being
/// turned off with nothing fsynced past `offset`.
pub async fn until_synced(shared: &Shared, offset: u64) -> bool {
    let aof = &shared.aof;
    let mut synced = aof.synced_watch.subscribe();
    if *synced.borrow() >= offset {
        return true;
    }
    aof.sync_requested.notify_one();
    let ended = synced
        .wait_for(|&at| {
            at >= offset
                || aof.write_failed.load(Ordering::Relaxed)
                || !shared.store.feed().logging()
        })
        .await;
    matches!(ended, Ok(at) if *at >= offset)
}

/// Writes the feed's pending bytes to the open increment, and fsyncs it
/// when `sync`. A failed write is undone (the file cut back to its size
/// before) and its bytes kept for the next attempt, as Redis keeps its
/// buffer; meanwhile writes get MISCONF.
pub fn flush(shared: &Shared, sync: bool) {
    write_out(shared, shared.aof.writer.lock(), sync);
}

/// [`flush`] by whoever holds the writer lock. The fsync runs after the
/// lock is released, as Redis fsyncs in a background thread while its
/// main thread goes on writing: a connection whose batch must reach the
/// file before its replies never waits for a disk flush it does not need.
fn write_out(shared: &Shared, mut writer: MutexGuard<'_, Writer>, sync: bool) {
    let aof = &shared.aof;
    let feed = shared.store.feed();
    let Writer {
        file,
        incr_size,
        buffer,
        ..
    } = &mut *writer;
    let Some(file) = file.as_ref() else {
        return;
    };
    let end = feed.swap_pending(buffer);
    if !buffer.is_empty() {
        let outcome = (&**file).write_all(buffer);
        if outcome.is_err() {
            let _ = file.set_len(*incr_size);
            feed.give_back(std::mem::take(buffer));
            aof.record_write(&outcome);
            drop(writer);
            // Wakes connections waiting for an fsync: they see the failure.
            aof.synced_watch.send_modify(|_| {});
            return;
        }
        aof.record_write(&outcome);
        *incr_size += buffer.len() as u64;
        aof.current_size
            .fetch_add(buffer.len() as u64, Ordering::Relaxed);
        aof.written.store(end, Ordering::Release);
        buffer.clear();
        if buffer.capacity() > BUFFER_LIMIT {
            *buffer = Vec::new();
        }
    }
    let written = aof.written.load(Ordering::Acquire);
    let to_sync = (sync && aof.synced.load(Ordering::Acquire) < written).then(|| file.clone());
    drop(writer);
    let Some(file) = to_sync else {
        return;
    };
    // Everything up to `written` was written to this file before the lock
    // was released, or to an increment a rewrite has since closed and
    // fsynced; writes made meanwhile may or may not be in this fsync, and
    // count only at the next.
    let outcome = file.sync_data();
    aof.record_write(&outcome);
    if outcome.is_ok() {
        aof.synced.fetch_max(written, Ordering::AcqRel);
        aof.last_fsync_ms
            .store(shared.clock.now_ms(), Ordering::Relaxed);
    }
    aof.synced_watch
        .send_replace(aof.synced.load(Ordering::Acquire));
}

/// The append-only directory: `dir`/`appenddirname`.
fn directory(shared: &Shared) -> PathBuf {
    let config = shared.config.read();
    Path::new(&config.dir).join(&config.appenddirname)
}

/// Opens the log for appending once the data is loaded (at start): a
/// base is written first when there is none and no increment either (an
/// empty dataset, as Redis does), then the last increment is opened, or a
/// new one made, and the manifest written; from then on the feed records.
pub fn open_for_append(shared: &Shared, mut manifest: Manifest) -> Result<(), String> {
    let dir = directory(shared);
    let filename = shared.config.read().appendfilename.clone();
    std::fs::create_dir_all(&dir).map_err(|e| {
        format!(
            "Can't open or create append-only dir {}: {e}",
            dir.display()
        )
    })?;
    if manifest.base.is_none() && manifest.incrs.is_empty() {
        let name = manifest.new_base(&filename);
        write_base_now(shared, &dir.join(&name))
            .map_err(|e| format!("Can't create the AOF base file {name}: {e}"))?;
        tracing::info!("Creating AOF base file {name} on server start");
    }
    let name = match manifest.incrs.last() {
        Some(last) => last.name.clone(),
        None => manifest.new_incr(&filename),
    };
    let path = dir.join(&name);
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .map_err(|e| format!("Can't open the append-only file {name}: {e}"))?;
    manifest::persist(&dir, &filename, &manifest)
        .map_err(|e| format!("Can't persist the AOF manifest: {e}"))?;
    let incr_size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let base_size = manifest
        .base
        .as_ref()
        .and_then(|b| std::fs::metadata(dir.join(&b.name)).ok())
        .map_or(0, |m| m.len());
    let total: u64 = manifest
        .files_to_load()
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(&f.name)).ok())
        .map(|m| m.len())
        .sum();
    let aof = &shared.aof;
    aof.base_size.store(base_size, Ordering::Relaxed);
    aof.current_size.store(total, Ordering::Relaxed);
    let mut writer = aof.writer.lock();
    *writer = Writer {
        dir,
        filename,
        manifest,
        file: Some(Arc::new(file)),
        incr_size,
        temporary_incr: false,
        buffer: Vec::new(),
    };
    let end = shared.store.feed().end();
    aof.written.store(end, Ordering::Release);
    aof.synced.store(end, Ordering::Release);
    shared.store.feed().set_active(true);
    Ok(())
}

/// Writes the whole dataset as a base file now (every shard held), fsynced.
fn write_base_now(shared: &Shared, path: &Path) -> std::io::Result<()> {
    let mut bytes = Vec::new();
    super::snapshot::write_base_bytes(shared, &mut bytes)?;
    let mut file = File::create(path)?;
    file.write_all(&bytes)?;
    file.sync_all()
}

/// CONFIG SET appendonly no: the feed stops (between two changes, every
/// shard held), what it held is written and fsynced, the file closed.
pub fn stop(shared: &Shared) {
    flush(shared, true);
    let mut writer = shared.aof.writer.lock();
    stop_with(shared, &mut writer);
}

fn stop_with(shared: &Shared, writer: &mut Writer) {
    {
        let _all = super::snapshot::lock_every_shard(&shared.store);
        shared.store.feed().set_active(false);
    }
    let (rest, _) = shared.store.feed().rotate();
    if let Some(file) = writer.file.take() {
        let _ = (&*file).write_all(&rest);
        let _ = file.sync_data();
    }
    if writer.temporary_incr {
        let _ = std::fs::remove_file(writer.dir.join(temporary_incr_name(&writer.filename)));
        writer.temporary_incr = false;
    }
    shared.aof.write_failed.store(false, Ordering::Relaxed);
}

/// The background writer: every 100 ms, the feed written (changes no
/// client waits for, such as expired keys' DELs), fsynced once a second
/// under `everysec`, and at once whenever a connection waits for an fsync
/// (`always`); a rewrite started when the log has grown by
/// `auto-aof-rewrite-percentage` past `auto-aof-rewrite-min-size`.
pub async fn run(shared: Arc<Shared>) {
    let mut stopping = shared.shutdown.subscribe();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
            _ = shared.aof.sync_requested.notified() => {}
            _ = stopping.wait_for(|&stop| stop) => return,
        }
        if !shared.store.feed().logging() {
            continue;
        }
        let worker = shared.clone();
        let _ = tokio::task::spawn_blocking(move || tick(&worker)).await;
    }
}

fn tick(shared: &Arc<Shared>) {
    let aof = &shared.aof;
    let (policy, percentage, min_size, no_fsync_on_rewrite) = {
        let config = shared.config.read();
        (
            config.appendfsync,
            config.auto_aof_rewrite_percentage,
            config.auto_aof_rewrite_min_size,
            config.no_appendfsync_on_rewrite,
        )
    };
    let now_ms = shared.clock.now_ms();
    let second_passed = now_ms.saturating_sub(aof.last_fsync_ms.load(Ordering::Relaxed)) >= 1000;
    let rewriting = aof.rewrite_in_progress.load(Ordering::Relaxed);
    let sync = match policy {
        Fsync::Always => true,
        Fsync::EverySec => second_passed && !(no_fsync_on_rewrite && rewriting),
        Fsync::No => false,
    };
    flush(shared, sync);
    if percentage > 0 && !rewriting && !shared.persistence.snapshot_busy.load(Ordering::Relaxed) {
        let base = aof.base_size.load(Ordering::Relaxed).max(1);
        let current = aof.current_size.load(Ordering::Relaxed);
        let growth = current.saturating_sub(base) * 100 / base;
        if current > min_size && growth >= percentage {
            tracing::info!("Starting automatic rewriting of AOF on {growth}% growth");
            let _ = bgrewriteaof(shared);
        }
    }
}

/// At shutdown: everything the feed holds written and fsynced.
pub fn shutdown(shared: &Shared) {
    if shared.store.feed().logging() {
        flush(shared, true);
    }
}

/// The numbers INFO persistence shows while the log is on.
pub struct AofInfo {
    /// `aof_current_size`.
    pub current_size: u64,
    /// `aof_base_size`.
    pub base_size: u64,
    /// `aof_buffer_length`.
    pub buffer_length: usize,
}

/// INFO persistence's figures for the log.
pub fn info(shared: &Shared) -> AofInfo {
    let aof = &shared.aof;
    AofInfo {
        current_size: aof.current_size.load(Ordering::Relaxed),
        base_size: aof.base_size.load(Ordering::Relaxed),
        buffer_length: shared.store.feed().buffered(),
    }
}

/// Loads the log at start (see [`load`]); `Ok(None)` when `appendonly` is
/// off.
pub fn plan(shared: &Shared) -> Result<Option<Plan>, String> {
    if !shared.config.read().appendonly {
        return Ok(None);
    }
    load::plan(shared).map(Some)
}

/// Replays the planned files into the store, then opens the log for
/// appending.
pub fn load_and_open(
    shared: &Shared,
    plan: Plan,
    replay: &mut load::Replay<'_>,
) -> Result<load::Loaded, String> {
    let (loaded, manifest) = load::load(shared, plan, replay)?;
    open_for_append(shared, manifest)?;
    Ok(loaded)
}

#[cfg(test)]
mod tests;
