//! BGREWRITEAOF: a new base written in the background from a snapshot of
//! one moment (BGSAVE's machinery, no fork), the feed cut over to a new
//! increment at that moment, and the manifest switched once the base is
//! in place. Also how the log is turned on at run time.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::manifest::{self, Manifest};
use super::{directory, stop_with, temporary_incr_name};
use crate::state::Shared;

/// What BGREWRITEAOF did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewriteStart {
    /// It runs now.
    Started,
    /// A BGSAVE runs; it starts when that ends.
    Scheduled,
    /// One runs already.
    AlreadyRunning,
}

/// BGREWRITEAOF: a new base written in the background from a snapshot of
/// this moment, the feed cut over to a new increment at that moment.
/// Also turns the log on at run time (CONFIG SET appendonly yes): the
/// feed starts at the snapshot's moment, into a temporary increment.
pub fn bgrewriteaof(shared: &Arc<Shared>) -> RewriteStart {
    let aof = &shared.aof;
    if aof.rewrite_in_progress.load(Ordering::SeqCst) {
        return RewriteStart::AlreadyRunning;
    }
    let state = &shared.persistence;
    if state.snapshot_busy.swap(true, Ordering::SeqCst) {
        aof.rewrite_scheduled.store(true, Ordering::SeqCst);
        aof.consecutive_failures.store(0, Ordering::Relaxed);
        return RewriteStart::Scheduled;
    }
    aof.rewrite_in_progress.store(true, Ordering::SeqCst);
    aof.rewrite_scheduled.store(false, Ordering::SeqCst);
    let now_ms = shared.clock.now_ms();
    aof.rewrite_started_ms.store(now_ms, Ordering::Relaxed);
    match cut_over(shared, now_ms) {
        Ok(counts) => {
            let worker = shared.clone();
            let spawned = std::thread::Builder::new()
                .name("tally-aofrw".into())
                .spawn(move || {
                    crate::persistence::snapshot::lower_priority(
                        crate::persistence::snapshot::WriterPriority::IdleOnly,
                    );
                    let result = write_rewritten_base(&worker, &counts, now_ms);
                    finish_rewrite(&worker, result);
                });
            if let Err(e) = spawned {
                finish_rewrite(shared, Err(e.to_string()));
            }
        }
        Err(e) => finish_rewrite(shared, Err(e)),
    }
    RewriteStart::Started
}

/// Starts a rewrite that BGREWRITEAOF scheduled, once no other snapshot runs.
pub fn start_scheduled_rewrite(shared: &Arc<Shared>) {
    if shared.aof.rewrite_scheduled.load(Ordering::SeqCst) {
        let _ = bgrewriteaof(shared);
    }
}

/// The rewrite's moment: every shard marked for the snapshot and, under
/// the same locks, the feed's bytes so far taken for the old increment;
/// then the old increment is finished and a new one opened (and, unless
/// the log is being turned on, put in the manifest).
fn cut_over(shared: &Shared, now_ms: u64) -> Result<Vec<(u64, u64)>, String> {
    let aof = &shared.aof;
    let feed = shared.store.feed();
    let mut writer = aof.writer.lock();
    let log_off = writer.file.is_none();
    let turning_on = log_off && shared.config.read().appendonly;
    if log_off {
        writer.dir = directory(shared);
        writer.filename = shared.config.read().appendfilename.clone();
        std::fs::create_dir_all(&writer.dir).map_err(|e| e.to_string())?;
        if writer.manifest == Manifest::default() {
            // The directory may hold a log from an earlier run.
            let path = writer.dir.join(manifest::manifest_name(&writer.filename));
            if let Ok(text) = std::fs::read_to_string(path) {
                writer.manifest = Manifest::parse(&text).unwrap_or_default();
            }
        }
    }
    let (counts, (old_bytes, end)) =
        crate::persistence::snapshot::mark_every_shard(shared, now_ms, || {
            if turning_on {
                feed.set_active(true);
            }
            feed.rotate()
        });
    if log_off && !turning_on {
        // BGREWRITEAOF with the log off: a base only.
        return Ok(counts);
    }
    if let Some(file) = writer.file.as_deref() {
        let mut file = file;
        let outcome = file.write_all(&old_bytes).and_then(|()| file.sync_data());
        aof.record_write(&outcome);
        outcome.map_err(|e| e.to_string())?;
    }
    let filename = writer.filename.clone();
    let (name, manifest) = if turning_on {
        (temporary_incr_name(&filename), None)
    } else {
        let mut manifest = writer.manifest.clone();
        (manifest.new_incr(&filename), Some(manifest))
    };
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(writer.dir.join(&name))
        .map_err(|e| format!("Can't open the append-only file {name}: {e}"))?;
    if let Some(manifest) = manifest {
        manifest::persist(&writer.dir, &filename, &manifest).map_err(|e| e.to_string())?;
        writer.manifest = manifest;
    }
    tracing::info!("Creating AOF incr file {name} on background rewrite");
    writer.file = Some(Arc::new(file));
    writer.incr_size = 0;
    writer.temporary_incr = turning_on;
    aof.written.store(end, Ordering::Release);
    aof.synced.store(end, Ordering::Release);
    Ok(counts)
}

/// The new base, as of the snapshot's moment, in Redis's temporary file
/// `temp-rewriteaof-bg-<pid>.aof` in `dir`, fsynced.
fn write_rewritten_base(
    shared: &Shared,
    counts: &[(u64, u64)],
    now_ms: u64,
) -> Result<PathBuf, String> {
    let temp = Path::new(&shared.config.read().dir)
        .join(format!("temp-rewriteaof-bg-{}.aof", std::process::id()));
    let written = File::create(&temp).and_then(|mut file| {
        crate::persistence::snapshot::write_snapshot(
            shared,
            &mut file,
            counts,
            now_ms,
            true,
            None,
            || false,
        )?;
        file.sync_all()
    });
    match written {
        Ok(()) => Ok(temp),
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(e.to_string())
        }
    }
}

/// Ends a rewrite: on success the new base goes into the directory, the
/// manifest names it and the current increment, and the files it replaced
/// are deleted; on failure the log goes on as it was (the increments
/// opened at each attempt stay in the manifest, as in Redis).
fn finish_rewrite(shared: &Arc<Shared>, result: Result<PathBuf, String>) {
    crate::persistence::snapshot::cancel_snapshots(&shared.store);
    let aof = &shared.aof;
    aof.last_cow_size
        .store(shared.persistence.snapshot_memory.peak(), Ordering::Relaxed);
    let installed = result.and_then(|temp| install_base(shared, &temp));
    let now_ms = shared.clock.now_ms();
    let started = aof.rewrite_started_ms.load(Ordering::Relaxed);
    aof.last_rewrite_secs.store(
        (now_ms.saturating_sub(started) / 1000) as i64,
        Ordering::Relaxed,
    );
    match installed {
        Ok(()) => {
            tracing::info!("Background AOF rewrite finished successfully");
            aof.rewrites.fetch_add(1, Ordering::Relaxed);
            aof.consecutive_failures.store(0, Ordering::Relaxed);
            aof.last_rewrite_failed.store(false, Ordering::Relaxed);
        }
        Err(e) => {
            tracing::warn!(error = %e, "Background AOF rewrite failed");
            aof.consecutive_failures.fetch_add(1, Ordering::Relaxed);
            aof.last_rewrite_failed.store(true, Ordering::Relaxed);
            let mut writer = aof.writer.lock();
            if writer.temporary_incr {
                // Turning the log on failed: it stays off, as Redis's
                // appendonly stays off when its first rewrite fails.
                stop_with(shared, &mut writer);
            }
        }
    }
    aof.rewrite_in_progress.store(false, Ordering::SeqCst);
    shared
        .persistence
        .snapshot_busy
        .store(false, Ordering::SeqCst);
    crate::persistence::start_scheduled(shared);
}

/// Moves a finished base into the directory and writes the manifest that
/// names it (with the temporary increment, when the log was being turned
/// on); then deletes what it replaced.
fn install_base(shared: &Shared, temp: &Path) -> Result<(), String> {
    let aof = &shared.aof;
    let mut writer = aof.writer.lock();
    let filename = writer.filename.clone();
    let dir = writer.dir.clone();
    let mut manifest = writer.manifest.clone();
    let base = manifest.new_base(&filename);
    std::fs::rename(temp, dir.join(&base)).map_err(|e| {
        let _ = std::fs::remove_file(temp);
        format!("Error trying to rename the temporary AOF base file: {e}")
    })?;
    if writer.temporary_incr {
        let incr = manifest.new_incr(&filename);
        std::fs::rename(dir.join(temporary_incr_name(&filename)), dir.join(&incr))
            .map_err(|e| format!("Error trying to rename the temporary AOF incr file: {e}"))?;
    }
    if writer.file.is_some() {
        manifest.retire_rewritten_incrs();
    } else {
        // The log is off: the base is the whole of it.
        manifest.retire_all_incrs();
    }
    manifest::persist(&dir, &filename, &manifest).map_err(|e| e.to_string())?;
    writer.temporary_incr = false;
    for old in manifest.history.drain(..) {
        tracing::info!("Removing the history file {} in the background", old.name);
        let _ = std::fs::remove_file(dir.join(&old.name));
    }
    manifest::persist(&dir, &filename, &manifest).map_err(|e| e.to_string())?;
    let base_size = std::fs::metadata(dir.join(&base)).map_or(0, |m| m.len());
    aof.base_size.store(base_size, Ordering::Relaxed);
    aof.current_size
        .store(base_size + writer.incr_size, Ordering::Relaxed);
    writer.manifest = manifest;
    Ok(())
}
