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

use tally_rdb::{Encodings, Item, Reader, Writer};

use crate::state::Shared;

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
    let target = path(shared);
    let dir = target.parent().map(Path::to_path_buf).unwrap_or_default();
    let temp = dir.join(format!("temp-{}.rdb", std::process::id()));
    let result = write_file(shared, &temp);
    match result {
        Ok(saved) => {
            std::fs::rename(&temp, &target)?;
            // The rename is durable once the directory is.
            if let Ok(handle) = File::open(if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                &dir
            }) {
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

fn write_file(shared: &Shared, temp: &Path) -> std::io::Result<Saved> {
    let (compress, checksum) = {
        let config = shared.config.read();
        (config.rdbcompression, config.rdbchecksum)
    };
    let encodings = Encodings {
        compress,
        ..Encodings::default()
    };
    let mut file = File::create(temp)?;
    let mut writer = Writer::new(encodings, checksum);
    let now_ms = shared.clock.now_ms();
    writer.aux(
        "redis-ver",
        crate::cmd::connection::REDIS_VERSION.as_bytes(),
    );
    writer.aux("redis-bits", b"64");
    writer.aux("ctime", (now_ms / 1000).to_string().as_bytes());
    writer.aux(
        "used-mem",
        shared.store.used_memory().to_string().as_bytes(),
    );
    writer.aux("aof-base", b"0");
    let store = &shared.store;
    // Every shard of every database, in the order every multi-shard lock
    // takes them: one point in time.
    let guards: Vec<Vec<_>> = (0..store.databases())
        .map(|db| {
            let database = store.db(db);
            (0..database.shard_count())
                .map(|s| database.lock_shard(s))
                .collect()
        })
        .collect();
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
    file.sync_all()?;
    Ok(Saved { keys, bytes })
}

/// What loading a file found.
#[derive(Debug, Default, Clone, Copy)]
pub struct Loaded {
    /// Keys loaded.
    pub keys: u64,
    /// Keys dropped because they had expired.
    pub expired: u64,
    /// Streams and function libraries skipped (`rdb-skip-unsupported`).
    pub skipped: u64,
}

/// Loads the snapshot file into an empty store, if there is one. Keys
/// already expired are dropped (counted); a stream or function library is
/// an error naming it unless `skip_unsupported`, which logs and skips it.
pub fn load(shared: &Shared, skip_unsupported: bool) -> Result<Option<Loaded>, String> {
    let file = path(shared);
    let data = match std::fs::read(&file) {
        Ok(data) => data,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", file.display())),
    };
    let mut reader = Reader::new(&data).map_err(|e| format!("{}: {e}", file.display()))?;
    let now_ms = shared.clock.now_ms();
    let mut loaded = Loaded::default();
    let store = &shared.store;
    while let Some(item) = reader
        .next_item()
        .map_err(|e| format!("{}: {e}", file.display()))?
    {
        match item {
            Item::Entry(entry) => {
                let db = entry.db as usize;
                if db >= store.databases() {
                    return Err(format!(
                        "{}: key in database {db}, but `databases` is {}",
                        file.display(),
                        store.databases()
                    ));
                }
                if entry.expire_at_ms.is_some_and(|at| at <= now_ms) {
                    loaded.expired += 1;
                    continue;
                }
                let Some(value) = super::from_rdb(entry.value) else {
                    // Redis skips empty collections too.
                    continue;
                };
                let key = store.key(&entry.key);
                let mut shard = store.db(db).lock_for(key);
                shard.set_owned(key, value, entry.expire_at_ms.unwrap_or(0), now_ms);
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
            Item::Aux(..) | Item::ResizeDb { .. } => {}
        }
    }
    shared
        .persistence
        .last_load_keys
        .store(loaded.keys, Ordering::Relaxed);
    shared
        .persistence
        .last_load_expired
        .store(loaded.expired, Ordering::Relaxed);
    Ok(Some(loaded))
}
