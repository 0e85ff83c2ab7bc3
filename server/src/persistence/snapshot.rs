//! Snapshot files: SAVE writes the whole keyspace as Redis 7.0's RDB, and
//! the server loads the file at start.
//!
//! SAVE holds every shard of every database while it serializes, as
//! Redis's SAVE blocks the server: the file is one point in time. It is
//! written to `temp-<pid>.rdb` in `dir`, fsynced, renamed over
//! `dbfilename` and the directory fsynced, so a crash mid-save leaves the
//! previous file whole.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tally_rdb::{Encodings, Item, Reader, Writer};

use crate::state::Shared;
use crate::store::{access_clock, ShardData, Store};
use parking_lot::MutexGuard;

/// Bytes gathered before they are written to the file.
const WRITE_CHUNK: usize = 1 << 20;

/// Where the snapshot lives: `dir`/`dbfilename`.
pub fn path(shared: &Shared) -> PathBuf {
    let config = shared.config.read();
    Path::new(&config.dir).join(&config.dbfilename)
}

/// What a save wrote.
#[derive(Debug, Clone, Copy)]
pub struct Saved {
    /// Keys written.
    pub keys: u64,
    /// The file's size.
    pub bytes: u64,
}

/// SAVE: the whole keyspace, as of now, into the snapshot file.
pub fn save(shared: &Shared) -> std::io::Result<Saved> {
    commit(shared, "", write_file)
}

/// Writes the file under a temporary name with `write`, fsyncs it, renames
/// it over the snapshot and fsyncs the directory; the temporary file is
/// removed if anything fails, so the previous snapshot stays whole.
fn commit(
    shared: &Shared,
    tag: &str,
    write: impl FnOnce(&Shared, &mut File) -> std::io::Result<Saved>,
) -> std::io::Result<Saved> {
    let target = path(shared);
    let dir = target.parent().map(Path::to_path_buf).unwrap_or_default();
    let temp = dir.join(format!("temp-{}{tag}.rdb", std::process::id()));
    let written = File::create(&temp).and_then(|mut file| {
        let saved = write(shared, &mut file)?;
        file.sync_all()?;
        Ok(saved)
    });
    let result = written.and_then(|saved| std::fs::rename(&temp, &target).map(|()| saved));
    match result {
        Ok(saved) => {
            // The rename is durable once the directory is.
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                &dir
            };
            if let Ok(handle) = File::open(dir) {
                let _ = handle.sync_all();
            }
            Ok(saved)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(e)
        }
    }
}

/// The encodings snapshots are written with (`rdbcompression`).
pub fn encodings(shared: &Shared) -> Encodings {
    Encodings {
        compress: shared.config.read().rdbcompression,
        ..Encodings::default()
    }
}

/// A file's header and AUX fields, as Redis 7.0 writes them; `aof_base`
/// for an append-only file's base.
fn start_file(shared: &Shared, now_ms: u64, aof_base: bool, repl: Option<&ReplInfo>) -> Writer {
    let mut writer = Writer::new(encodings(shared), shared.config.read().rdbchecksum);
    writer.aux("redis-ver", crate::catalog::reported_version().as_bytes());
    writer.aux("redis-bits", b"64");
    writer.aux("ctime", (now_ms / 1000).to_string().as_bytes());
    writer.aux(
        "used-mem",
        shared.store.used_memory().to_string().as_bytes(),
    );
    if let Some(repl) = repl {
        writer.aux("repl-stream-db", repl.stream_db.to_string().as_bytes());
        writer.aux("repl-id", repl.replid.as_bytes());
        writer.aux("repl-offset", repl.offset.to_string().as_bytes());
    }
    writer.aux("aof-base", if aof_base { b"1" } else { b"0" });
    // Function libraries, as Redis 7 keeps them (FUNCTION2), before the
    // keys.
    for library in shared.scripts.functions.libraries() {
        writer.function(&library.code);
    }
    // The scripts clients loaded, as Redis 6 kept them (a `lua` AUX field
    // each): tally loads them back, Redis 7 skips the field.
    if shared.config.read().lua_persist_scripts {
        for script in shared.scripts.loaded_by_clients() {
            writer.aux("lua", &script.source);
        }
    }
    writer
}

/// Where the replication stream stood at a snapshot's moment (Redis's
/// rdbSaveInfo: the `repl-id`, `repl-offset` and `repl-stream-db` AUX
/// fields). A replica restarted from the file asks its master to continue
/// from there, and a master restarted from it lets its replicas continue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplInfo {
    /// The replication id.
    pub replid: String,
    /// The offset the snapshot holds every byte up to.
    pub offset: u64,
    /// The database the stream had SELECTed.
    pub stream_db: usize,
}

/// The stream's position now, as Redis saves it: a replica's (its
/// master's history, in the database the master's stream is in), or a
/// master's with a backlog; none for a master that never had a replica.
/// Called at a snapshot's moment, every shard held and the relay paused.
pub(crate) fn repl_info(shared: &Shared) -> Option<ReplInfo> {
    let feed = shared.store.feed();
    let (history, stream_db) = feed.history_to_save()?;
    let stream_db = if feed.following() {
        shared.master_link.stream_db.load(Ordering::Relaxed)
    } else {
        stream_db
    };
    Some(ReplInfo {
        replid: history.replid,
        offset: history.offset,
        stream_db,
    })
}

/// On a replica, holds the relay of its master's stream for a snapshot's
/// moment, so that the offset it saves is exactly what its data holds
/// (see `Feed::relay_order`). Taken before any shard.
fn relay_paused(shared: &Shared) -> Option<parking_lot::MutexGuard<'_, ()>> {
    let feed = shared.store.feed();
    feed.following().then(|| feed.relay_order())
}

/// A script a file kept (`lua` AUX field) back in the cache. It compiled
/// when it was cached; each worker compiles it again at its first run.
fn load_script(shared: &Shared, source: &[u8]) {
    if !shared.config.read().lua_persist_scripts {
        return;
    }
    if let Err(message) = shared.scripts.load(source) {
        tracing::warn!("a script kept in the file was not loaded: {message}");
    }
}

/// SYNC: the whole keyspace, as of now, as a file's bytes in memory.
pub fn snapshot_bytes(shared: &Shared) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    write_file(shared, &mut bytes)?;
    Ok(bytes)
}

/// A full resynchronization's snapshot: the keyspace as a file's bytes,
/// and what `at_the_moment` returned when it ran at the snapshot's moment
/// (every shard held: a replica attached then misses no change and gets
/// none twice).
pub fn snapshot_bytes_with<T>(
    shared: &Shared,
    at_the_moment: impl FnOnce() -> T,
) -> std::io::Result<(Vec<u8>, T)> {
    let mut bytes = Vec::new();
    let mut result = None;
    write_rdb(shared, &mut bytes, false, || result = Some(at_the_moment()))?;
    match result {
        Some(result) => Ok((bytes, result)),
        None => Err(std::io::Error::other("the snapshot was not taken")),
    }
}

/// Every shard of every database, per database, locked in the order every
/// multi-shard lock takes them: while the guards live, nothing changes.
pub(crate) fn lock_every_shard(store: &Store) -> Vec<Vec<MutexGuard<'_, ShardData>>> {
    (0..store.databases())
        .map(|db| {
            let database = store.db(db);
            (0..database.shard_count())
                .map(|s| database.lock_shard(s))
                .collect()
        })
        .collect()
}

/// An append-only file's base of the whole keyspace as of now (every shard
/// held meanwhile), into `file`.
pub(crate) fn write_base_bytes(shared: &Shared, file: &mut impl Write) -> std::io::Result<Saved> {
    write_rdb(shared, file, true, || ())
}

fn write_file(shared: &Shared, file: &mut impl Write) -> std::io::Result<Saved> {
    write_rdb(shared, file, false, || ())
}

/// Writes the whole keyspace as of one moment; `at_the_moment` runs at
/// that moment, with every shard held.
fn write_rdb(
    shared: &Shared,
    file: &mut impl Write,
    aof_base: bool,
    at_the_moment: impl FnOnce(),
) -> std::io::Result<Saved> {
    let now_ms = shared.clock.now_ms();
    let store = &shared.store;
    let relay = relay_paused(shared);
    let guards = lock_every_shard(store);
    at_the_moment();
    let repl = if aof_base { None } else { repl_info(shared) };
    drop(relay);
    let mut writer = start_file(shared, now_ms, aof_base, repl.as_ref());
    let mut keys = 0u64;
    let mut bytes = 0u64;
    for (db, shards) in guards.iter().enumerate() {
        let (mut live, mut volatile) = (0u64, 0u64);
        for entry in shards.iter().flat_map(|s| s.iter_live(now_ms)) {
            live += 1;
            volatile += (entry.expire_at() != 0) as u64;
        }
        if live == 0 {
            continue;
        }
        writer.select_db(db as u32, live, volatile);
        for shard in shards {
            for entry in shard.iter_live(now_ms) {
                let expire = (entry.expire_at() != 0).then(|| entry.expire_at());
                writer.entry(entry.key(), &super::to_rdb(entry.value()), expire);
                keys += 1;
                if writer.pending() >= WRITE_CHUNK {
                    let chunk = writer.take();
                    bytes += chunk.len() as u64;
                    file.write_all(&chunk)?;
                }
            }
        }
    }
    drop(guards);
    let tail = writer.finish();
    bytes += tail.len() as u64;
    file.write_all(&tail)?;
    Ok(Saved { keys, bytes })
}

/// Buckets the background writer walks per hold of a shard's lock.
const BUCKETS_PER_STEP: usize = 64;

/// BGSAVE: marks the snapshot's moment in every shard at once (all locks
/// held only for that), then writes the file from a thread of its own
/// while clients keep reading and writing; see `crate::store::snapshot`.
/// False (nothing started) when a snapshot (a BGSAVE or an append-only
/// file rewrite) is running already.
pub fn bgsave(shared: &Arc<Shared>) -> bool {
    let state = &shared.persistence;
    if state.snapshot_busy.swap(true, Ordering::SeqCst) {
        return false;
    }
    state.bgsave_in_progress.store(true, Ordering::SeqCst);
    let now_ms = shared.clock.now_ms();
    state.bgsave_started_ms.store(now_ms, Ordering::Relaxed);
    state
        .writes_at_snapshot
        .store(super::write_calls(&shared.stats), Ordering::Relaxed);
    let (counts, repl) = mark_every_shard(shared, now_ms, || repl_info(shared));
    let worker = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("tally-bgsave".into())
        .spawn(move || {
            lower_priority(WriterPriority::IdleOnly);
            let result = commit(&worker, "-bg", |shared, file| {
                write_snapshot(shared, file, &counts, now_ms, false, repl.as_ref(), || {
                    false
                })
            });
            finish_bgsave(&worker, result);
        });
    if let Err(e) = spawned {
        finish_bgsave(shared, Err(e));
    }
    true
}

/// Marks the moment of a background snapshot in every shard, with every
/// shard locked; `at_the_moment` runs under those locks too (an
/// append-only file rewrite starts its new file there, a replica is
/// attached to the stream). Returns each database's keys and volatile
/// keys at that moment (RESIZEDB), and what `at_the_moment` returned.
pub(crate) fn mark_every_shard<T>(
    shared: &Shared,
    now_ms: u64,
    at_the_moment: impl FnOnce() -> T,
) -> (Vec<(u64, u64)>, T) {
    let state = &shared.persistence;
    state.snapshot_memory.reset_peak();
    let encodings = encodings(shared);
    let relay = relay_paused(shared);
    let guards = lock_every_shard(&shared.store);
    let mut counts = Vec::with_capacity(guards.len());
    for shards in guards.iter() {
        let (mut keys, mut volatile) = (0u64, 0u64);
        for shard in shards {
            keys += shard.len() as u64;
            volatile += shard.volatile_len() as u64;
        }
        counts.push((keys, volatile));
    }
    let mut guards = guards;
    for shards in guards.iter_mut() {
        for shard in shards.iter_mut() {
            shard.begin_snapshot(now_ms, encodings.clone(), state.snapshot_memory.clone());
        }
    }
    let moment = at_the_moment();
    drop(guards);
    drop(relay);
    (counts, moment)
}

/// Ends a background snapshot in every shard: those the writer did not get
/// through (an error) stop keeping snapshot values.
pub(crate) fn cancel_snapshots(store: &Store) {
    for db in 0..store.databases() {
        let database = store.db(db);
        for index in 0..database.shard_count() {
            database.lock_shard(index).cancel_snapshot();
        }
    }
}

/// How much CPU a background writer takes from the workers serving
/// clients. A snapshot has no fork child: it shares the workers' cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriterPriority {
    /// Only what the workers leave: Linux's SCHED_IDLE policy, under which
    /// a waking worker preempts it. For BGSAVE and the append-only file's
    /// rewrite: at nice 10 (what they had) saves back to back still cut a
    /// busy server's requests to about half their rate, against about 0.7
    /// under SCHED_IDLE (docs/benchmarks.md). Such a save takes longer on
    /// a busy server, by design; it is not starved outright, as the kernel
    /// still gives an idle-policy thread a small share of a saturated core.
    IdleOnly,
    /// A share when both want the CPU (nice 10). For a replica's snapshot:
    /// the stream queued for the replica meanwhile grows until it is sent,
    /// and a snapshot starved on a saturated master would let it pass the
    /// replica's output limit, which ends the sync, again and again.
    Niced,
}

/// Gives the calling thread, a background writer, `priority`.
pub(crate) fn lower_priority(priority: WriterPriority) {
    #[cfg(target_os = "linux")]
    // SAFETY: sched_setscheduler only reads `param`, and setpriority its
    // arguments; pid 0 (who 0) is the calling thread on Linux. Lowering
    // one's own priority needs no privilege, so an error leaves the thread
    // as it was, harmlessly.
    unsafe {
        match priority {
            WriterPriority::IdleOnly => {
                let param = libc::sched_param { sched_priority: 0 };
                libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
            }
            WriterPriority::Niced => {
                libc::setpriority(libc::PRIO_PROCESS, 0, 10);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = priority;
}

/// The background writer: every shard in turn, a few buckets per hold of
/// its lock, each shard's keys as of the snapshot's moment. `counts` are
/// each database's keys and volatile keys at that moment (RESIZEDB), taken
/// at `now_ms`; `aof_base` for an append-only file's base. `abandoned`
/// is asked between steps: when it says so (nobody waits for the
/// snapshot any more), the write stops with an error.
pub(crate) fn write_snapshot(
    shared: &Shared,
    file: &mut impl Write,
    counts: &[(u64, u64)],
    now_ms: u64,
    aof_base: bool,
    repl: Option<&ReplInfo>,
    abandoned: impl Fn() -> bool,
) -> std::io::Result<Saved> {
    let mut writer = start_file(shared, now_ms, aof_base, repl);
    let store = &shared.store;
    let encodings = encodings(shared);
    let mut delay = super::key_delay::KeyDelay::new(shared.config.read().rdb_key_save_delay);
    let mut bytes = 0u64;
    let mut entries = Vec::new();
    let mut chunk = Vec::new();
    for (db, &(keys, volatile)) in counts.iter().enumerate() {
        let database = store.db(db);
        let mut selected = false;
        for index in 0..database.shard_count() {
            loop {
                let step = database.lock_shard(index).snapshot_step(
                    BUCKETS_PER_STEP,
                    &mut entries,
                    &mut chunk,
                );
                delay.after(step.keys);
                if abandoned() {
                    return Err(std::io::Error::other("nobody waits for the snapshot"));
                }
                // Encoded with the lock released.
                for entry in entries.drain(..) {
                    tally_rdb::encode_entry(
                        &mut chunk,
                        &entry.key,
                        &entry.value,
                        entry.expire_at_ms,
                        &encodings,
                    );
                }
                if !chunk.is_empty() {
                    if !selected {
                        writer.select_db(db as u32, keys, volatile);
                        selected = true;
                    }
                    writer.encoded_entries(&chunk);
                    chunk.clear();
                }
                if writer.pending() >= WRITE_CHUNK {
                    let out = writer.take();
                    bytes += out.len() as u64;
                    file.write_all(&out)?;
                }
                if step.finished {
                    break;
                }
            }
        }
    }
    let tail = writer.finish();
    bytes += tail.len() as u64;
    file.write_all(&tail)?;
    Ok(Saved { keys: 0, bytes })
}

/// Ends a BGSAVE: shards it did not get through (an error) stop keeping
/// snapshot values; the outcome goes to LASTSAVE and INFO; a scheduled
/// BGSAVE starts.
fn finish_bgsave(shared: &Arc<Shared>, result: std::io::Result<Saved>) {
    cancel_snapshots(&shared.store);
    let state = &shared.persistence;
    let now_ms = shared.clock.now_ms();
    let started = state.bgsave_started_ms.load(Ordering::Relaxed);
    state.last_bgsave_secs.store(
        (now_ms.saturating_sub(started) / 1000) as i64,
        Ordering::Relaxed,
    );
    state
        .last_cow_size
        .store(state.snapshot_memory.peak(), Ordering::Relaxed);
    match result {
        Ok(saved) => {
            tracing::info!(
                bytes = saved.bytes,
                "Background saving terminated with success"
            );
            super::saved(shared, started / 1000);
        }
        Err(e) => {
            tracing::warn!(error = %e, path = %path(shared).display(), "Background saving error");
            state.last_save_failed.store(true, Ordering::Relaxed);
        }
    }
    state.refresh_write_refusal(&shared.config.read());
    state.bgsave_in_progress.store(false, Ordering::SeqCst);
    state.snapshot_busy.store(false, Ordering::SeqCst);
    super::start_scheduled(shared);
}

/// What loading a file found.
#[derive(Debug, Default, Clone)]
pub struct Loaded {
    /// Keys loaded.
    pub keys: u64,
    /// Keys dropped because they had expired.
    pub expired: u64,
    /// Streams and function libraries skipped (`rdb-skip-unsupported`).
    pub skipped: u64,
    /// Where the replication stream stood when it was saved, if the file
    /// says.
    pub repl: Option<ReplInfo>,
}

/// Reads the snapshot file, if there is one, and checks its header and
/// checksum: a damaged file stops the start before the port opens.
pub fn open(shared: &Shared) -> Result<Option<Vec<u8>>, String> {
    let file = path(shared);
    let data = match std::fs::read(&file) {
        Ok(data) => data,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", file.display())),
    };
    Reader::new(&data)
        .and_then(|reader| reader.verify_checksum())
        .map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(Some(data))
}

/// Loads a snapshot file's contents (see [`open`]) into the store. Keys
/// already expired are dropped (counted); a stream or function library is
/// an error naming it unless `skip_unsupported`, which logs and skips it.
/// Progress goes to INFO's `loading_*` fields.
pub fn load(shared: &Shared, data: &[u8], skip_unsupported: bool) -> Result<Loaded, String> {
    let state = &shared.persistence;
    loading_begins(shared, data.len());
    let (loaded, _) = load_entries(shared, data, skip_unsupported, &path(shared), false, 0)?;
    state
        .loading_loaded_bytes
        .store(data.len() as u64, Ordering::Relaxed);
    state.last_load_keys.store(loaded.keys, Ordering::Relaxed);
    state
        .last_load_expired
        .store(loaded.expired, Ordering::Relaxed);
    if let Some(repl) = &loaded.repl {
        shared
            .store
            .feed()
            .restore_history(repl.replid.clone(), repl.offset);
        shared
            .master_link
            .stream_db
            .store(repl.stream_db, Ordering::Relaxed);
    }
    Ok(loaded)
}

/// INFO's `loading_total_bytes` and `loading_start_unix` for a load of
/// `bytes` starting now.
fn loading_begins(shared: &Shared, bytes: usize) {
    let state = &shared.persistence;
    state
        .loading_total_bytes
        .store(bytes as u64, Ordering::Relaxed);
    state
        .loading_start_unix
        .store(shared.clock.now_ms() / 1000, Ordering::Relaxed);
}

/// A replica's full resynchronization: the dataset becomes the master's
/// snapshot `data`. Clients get LOADING meanwhile, as from Redis's replica
/// loading its master's file. Keys whose deadline passed here are kept:
/// a replica expires nothing itself, its master sends the DELs.
pub fn replace_with_masters(shared: &Shared, data: &[u8]) -> Result<Loaded, String> {
    let clear = || {
        for shards in lock_every_shard(&shared.store) {
            for mut shard in shards {
                shard.clear();
            }
        }
        shared.tracking.flushed();
        // The master's libraries replace the replica's, as its keys do.
        shared.scripts.functions.flush();
    };
    let state = &shared.persistence;
    state.loading.store(true, Ordering::SeqCst);
    clear();
    loading_begins(shared, data.len());
    let skip_unsupported = shared.config.read().rdb_skip_unsupported;
    let loaded = load_entries(
        shared,
        data,
        skip_unsupported,
        Path::new("(the master's snapshot)"),
        true,
        0,
    );
    if loaded.is_err() {
        // Half a dataset is no master's: empty, as Redis leaves a replica
        // whose load failed (it syncs again).
        clear();
    } else {
        shared.store.stamp_loaded_keys(shared.clock.now_ms());
    }
    state.loading.store(false, Ordering::SeqCst);
    let (loaded, _) = loaded?;
    state.last_load_keys.store(loaded.keys, Ordering::Relaxed);
    Ok(loaded)
}

/// Reads RDB `data` (a snapshot, or an append-only file's base) named
/// `source` in messages into the store, and returns what it loaded and
/// where the RDB ended (an old-style append-only file goes on with
/// commands there). `keep_expired` loads keys whose deadline has passed,
/// as an append-only file's base must: the commands after it may still
/// name them, and their expiry comes as a DEL in its place. Progress is
/// reported as `progress_base` plus the bytes read.
pub(crate) fn load_entries(
    shared: &Shared,
    data: &[u8],
    skip_unsupported: bool,
    source: &Path,
    keep_expired: bool,
    progress_base: u64,
) -> Result<(Loaded, usize), String> {
    let file = source;
    let mut reader = Reader::new(data).map_err(|e| format!("{}: {e}", file.display()))?;
    let state = &shared.persistence;
    let now_ms = if keep_expired {
        0
    } else {
        shared.clock.now_ms()
    };
    let mut loaded = Loaded::default();
    let (mut repl_id, mut repl_offset, mut repl_db) = (None, None, None);
    let store = &shared.store;
    let limits = shared.encodings.get();
    let mut delay = super::key_delay::KeyDelay::new(shared.config.read().key_load_delay);
    while let Some(item) = reader
        .next_item()
        .map_err(|e| format!("{}: {e}", file.display()))?
    {
        match item {
            Item::Entry(entry) => {
                if loaded.keys % 1024 == 0 {
                    state
                        .loading_loaded_bytes
                        .store(progress_base + reader.position() as u64, Ordering::Relaxed);
                }
                let db = entry.db as usize;
                if db >= store.databases() {
                    return Err(format!(
                        "{}: key in database {db}, but `databases` is {}",
                        file.display(),
                        store.databases()
                    ));
                }
                if entry.expire_at_ms.is_some_and(|at| at < now_ms) {
                    loaded.expired += 1;
                    continue;
                }
                let value = super::from_rdb(entry.value, &limits).map_err(|corrupt| {
                    format!(
                        "{}: key '{}': {corrupt}",
                        file.display(),
                        String::from_utf8_lossy(&entry.key)
                    )
                })?;
                let Some(value) = value else {
                    // Redis skips empty collections too.
                    continue;
                };
                let key = store.key(&entry.key);
                delay.after(1);
                let mut shard = store.db(db).lock_for(key);
                shard.set_owned(key, value, entry.expire_at_ms.unwrap_or(0), now_ms);
                if let Some(idle) = entry.idle_seconds {
                    // As Redis loads a file written under an LRU policy.
                    let clock = access_clock::clock_for_idle(idle, shared.clock.now_ms());
                    shard.set_access_clock(key, clock, now_ms);
                }
                loaded.keys += 1;
            }
            Item::Unsupported { db, key, kind } => {
                let name = String::from_utf8_lossy(&key);
                if !skip_unsupported {
                    return Err(format!(
                        "{}: key '{name}' in database {db} is a {kind}, which tally does not hold \
                         (start with --rdb-skip-unsupported yes to load the rest)",
                        file.display()
                    ));
                }
                tracing::warn!(key = %name, db, kind, "skipped while loading the snapshot: tally does not hold this type");
                loaded.skipped += 1;
            }
            Item::Aux(field, source) if field == b"lua" => load_script(shared, &source),
            // A library that does not load fails the file.
            Item::Function(code) => {
                shared
                    .scripts
                    .functions
                    .load_from_snapshot(code)
                    .map_err(|e| {
                        format!("{}: failed loading a function library: {e}", file.display())
                    })?
            }
            Item::Aux(field, value) if field.starts_with(b"repl-") => {
                let text = String::from_utf8_lossy(&value).into_owned();
                match &field[..] {
                    b"repl-id" => repl_id = Some(text),
                    b"repl-offset" => repl_offset = text.parse::<u64>().ok(),
                    b"repl-stream-db" => repl_db = text.parse::<usize>().ok(),
                    _ => {}
                }
            }
            Item::Aux(..) | Item::ResizeDb { .. } => {}
        }
    }
    // All three, or the file does not say (Redis's check; an old Redis
    // could write a stream db of -1).
    if let (Some(replid), Some(offset), Some(stream_db)) = (repl_id, repl_offset, repl_db) {
        if replid.len() == 40 {
            loaded.repl = Some(ReplInfo {
                replid,
                offset,
                stream_db,
            });
        }
    }
    Ok((loaded, reader.position()))
}
