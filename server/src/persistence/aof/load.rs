//! Loading the append-only file at start: the manifest read (or an
//! old-style single `appendonly.aof` taken over, as Redis 7 upgrades it),
//! the base loaded, then every increment's commands run in order, as
//! Redis's loadAppendOnlyFiles does, with its checks and messages.
//!
//! Commands are replayed at time 0 ([`REPLAY_NOW_MS`]): nothing expires
//! during a replay, as nothing does while Redis loads. Deadlines in the
//! log are absolute, and each expiry that happened is in the log as the
//! DEL it caused, at the point it happened.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::manifest::{self, FileInfo, Kind, Manifest};
use crate::state::Shared;

/// The clock a replay runs at: before every deadline.
pub const REPLAY_NOW_MS: u64 = 0;

/// How a logged command is run: the server's replay client behind a
/// closure, so that the loader reads files and knows no command. `Err`
/// for a command the server does not have.
pub type Replay<'a> = dyn FnMut(&[&[u8]]) -> Result<(), ()> + 'a;

/// What a load will read: the manifest (its files checked to exist).
pub struct Plan {
    manifest: Manifest,
    /// Size of the files to load.
    total_bytes: u64,
}

/// What a load did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Loaded {
    /// Keys in the base.
    pub base_keys: u64,
    /// Commands replayed from increments (and an old-style file's tail).
    pub commands: u64,
    /// The last file was cut at its last whole command (`aof-load-truncated`).
    pub truncated: bool,
}

/// Reads the manifest (taking over an old-style `appendonly.aof` in `dir`
/// when there is no manifest, as Redis 7 does) and checks that every file
/// it names exists.
pub fn plan(shared: &Shared) -> Result<Plan, String> {
    let (dir, appenddir, filename) = {
        let config = shared.config.read();
        (
            PathBuf::from(&config.dir),
            Path::new(&config.dir).join(&config.appenddirname),
            config.appendfilename.clone(),
        )
    };
    let manifest_path = appenddir.join(manifest::manifest_name(&filename));
    let mut manifest = match std::fs::read(&manifest_path) {
        Ok(bytes) => Manifest::parse(&String::from_utf8_lossy(&bytes))
            .map_err(|e| format!("Fatal AOF manifest file error: {e}"))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Manifest::default(),
        Err(e) => {
            return Err(format!(
                "Fatal error: can't open the AOF manifest file {} for reading: {e}",
                manifest_path.display()
            ))
        }
    };
    let old_style = dir.join(&filename);
    if manifest.base.is_none() && manifest.incrs.is_empty() && old_style.is_file() {
        // Redis's aofUpgradePrepare: the old file becomes the base.
        std::fs::create_dir_all(&appenddir).map_err(|e| {
            format!(
                "Can't open or create append-only dir {}: {e}",
                appenddir.display()
            )
        })?;
        std::fs::rename(&old_style, appenddir.join(&filename)).map_err(|e| {
            format!(
                "Error trying to rename the old AOF file {filename} into {}: {e}",
                appenddir.display()
            )
        })?;
        manifest.base_seq = 1;
        manifest.base = Some(FileInfo {
            name: filename.clone(),
            seq: 1,
            kind: Kind::Base,
        });
        manifest::persist(&appenddir, &filename, &manifest)
            .map_err(|e| format!("Can't persist the AOF manifest: {e}"))?;
        tracing::info!(
            "Successfully migrated an old-style AOF file ({filename}) into the AOF directory ({}).",
            appenddir.display()
        );
    }
    let mut total_bytes = 0;
    for file in manifest.files_to_load() {
        let path = appenddir.join(&file.name);
        match std::fs::metadata(&path) {
            Ok(meta) => total_bytes += meta.len(),
            Err(e) => {
                return Err(format!(
                    "The append log file {} doesn't exist: {e}",
                    file.name
                ))
            }
        }
    }
    Ok(Plan {
        manifest,
        total_bytes,
    })
}

/// How reading one file of commands ended.
enum Ending {
    /// At its end, after a whole command.
    Complete,
    /// In the middle of a command or transaction: `valid_up_to` bytes hold
    /// whole ones.
    Truncated { valid_up_to: usize },
}

/// Loads the planned files into the store; returns what was loaded and
/// the manifest, for the log to be opened with.
pub fn load(
    shared: &Shared,
    plan: Plan,
    replay: &mut Replay<'_>,
) -> Result<(Loaded, Manifest), String> {
    let state = &shared.persistence;
    state
        .loading_total_bytes
        .store(plan.total_bytes, Ordering::Relaxed);
    state
        .loading_start_unix
        .store(shared.clock.now_ms() / 1000, Ordering::Relaxed);
    let (appenddir, truncate_ok, skip_unsupported) = {
        let config = shared.config.read();
        (
            Path::new(&config.dir).join(&config.appenddirname),
            config.aof_load_truncated,
            config.rdb_skip_unsupported,
        )
    };
    let files: Vec<FileInfo> = plan.manifest.files_to_load().into_iter().cloned().collect();
    let mut loaded = Loaded::default();
    let mut progress = 0u64;
    for (index, file) in files.iter().enumerate() {
        let last = index + 1 == files.len();
        let path = appenddir.join(&file.name);
        let data = std::fs::read(&path).map_err(|e| {
            format!(
                "Fatal error: can't open the append log file {} for reading: {e}",
                file.name
            )
        })?;
        if data.is_empty() {
            continue;
        }
        let mut start = 0;
        if data.starts_with(b"REDIS") {
            let (base, end) = crate::persistence::snapshot::load_entries(
                shared,
                &data,
                skip_unsupported,
                &path,
                true,
                progress,
            )
            .map_err(|e| {
                format!(
                    "Error reading the RDB base file {}, AOF loading aborted: {e}",
                    file.name
                )
            })?;
            loaded.base_keys += base.keys;
            start = end;
        }
        let ending = replay_file(
            shared,
            replay,
            &data[start..],
            &file.name,
            progress + start as u64,
            &mut loaded,
        )?;
        if let Ending::Truncated { valid_up_to } = ending {
            let valid = (start + valid_up_to) as u64;
            if !truncate_ok {
                return Err(format!(
                    "Unexpected end of file reading the append only file {}. You can: \
                     1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. \
                     2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.",
                    file.name
                ));
            }
            if !last {
                return Err("Fatal error: the truncated file is not the last file".to_string());
            }
            tracing::warn!(
                "!!! Warning: short read while loading the AOF file {}!!!",
                file.name
            );
            tracing::warn!("!!! Truncating the AOF {} at offset {valid} !!!", file.name);
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(valid))
                .map_err(|e| format!("Error truncating the AOF file {}: {e}", file.name))?;
            tracing::warn!(
                "AOF {} loaded anyway because aof-load-truncated is enabled",
                file.name
            );
            loaded.truncated = true;
        }
        progress += data.len() as u64;
        state
            .loading_loaded_bytes
            .store(progress, Ordering::Relaxed);
        tracing::info!(
            "DB loaded from {} file {}",
            if file.kind == Kind::Base {
                "base"
            } else {
                "incr"
            },
            file.name
        );
    }
    state
        .last_load_keys
        .store(loaded.base_keys, Ordering::Relaxed);
    Ok((loaded, plan.manifest))
}

/// One command of a file, or why there is none.
pub(crate) enum Parsed {
    /// A command and the bytes it took.
    Command(Vec<Vec<u8>>, usize),
    /// An annotation line (`#...`) and its bytes.
    Annotation(usize),
    /// The bytes end inside a command.
    Incomplete,
}

/// Parses the command at the start of `input` as Redis's loader reads it:
/// `*<argc>` and `$<len>` lines, arguments followed by CRLF.
pub(crate) fn parse_command(input: &[u8]) -> Result<Parsed, ()> {
    let line = |from: usize| -> Option<(&[u8], usize)> {
        let end = input[from..].iter().position(|&b| b == b'\n')?;
        let text = &input[from..from + end];
        Some((text.strip_suffix(b"\r").unwrap_or(text), from + end + 1))
    };
    let Some((first, mut at)) = line(0) else {
        return Ok(Parsed::Incomplete);
    };
    if first.first() == Some(&b'#') {
        return Ok(Parsed::Annotation(at));
    }
    if first.first() != Some(&b'*') {
        return Err(());
    }
    let argc: i64 = atoi(&first[1..]);
    if argc < 1 {
        return Err(());
    }
    let mut argv = Vec::with_capacity(argc.min(1024) as usize);
    for _ in 0..argc {
        let Some((header, next)) = line(at) else {
            return Ok(Parsed::Incomplete);
        };
        if header.first() != Some(&b'$') {
            return Err(());
        }
        let len = atoi(&header[1..]).max(0) as usize;
        if input.len() < next + len + 2 {
            return Ok(Parsed::Incomplete);
        }
        argv.push(input[next..next + len].to_vec());
        at = next + len + 2;
    }
    Ok(Parsed::Command(argv, at))
}

/// C's atoi: optional sign and digits, anything after ignored.
fn atoi(text: &[u8]) -> i64 {
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let value = digits
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0i64, |n, &b| {
            n.saturating_mul(10).saturating_add((b - b'0') as i64)
        });
    if negative {
        -value
    } else {
        value
    }
}

/// Runs the commands of `input` (one file, or an old-style file's tail)
/// in the replay client. A transaction runs at its EXEC; one the file
/// ends inside is dropped and the file counted as truncated before its
/// MULTI, as Redis reverts it.
fn replay_file(
    shared: &Shared,
    replay: &mut Replay<'_>,
    input: &[u8],
    name: &str,
    progress_base: u64,
    loaded: &mut Loaded,
) -> Result<Ending, String> {
    let mut pos = 0;
    let mut transaction: Option<(usize, Vec<Vec<Vec<u8>>>)> = None;
    let bad_format = || {
        format!(
            "Bad file format reading the append only file {name}: make a backup of your AOF file, \
             then use ./redis-check-aof --fix <filename.manifest>"
        )
    };
    while pos < input.len() {
        let (argv, used) = match parse_command(&input[pos..]).map_err(|()| bad_format())? {
            Parsed::Incomplete => {
                let valid_up_to = transaction.map_or(pos, |(start, _)| start);
                return Ok(Ending::Truncated { valid_up_to });
            }
            Parsed::Annotation(used) => {
                pos += used;
                continue;
            }
            Parsed::Command(argv, used) => (argv, used),
        };
        let start = pos;
        pos += used;
        let name_lower = argv[0].to_ascii_lowercase();
        match (name_lower.as_slice(), transaction.as_mut()) {
            (b"multi", None) => transaction = Some((start, Vec::new())),
            (b"exec", Some(_)) => {
                let (_, queued) = transaction.take().unwrap_or_default();
                for argv in &queued {
                    run(replay, argv, name)?;
                }
                loaded.commands += queued.len() as u64;
            }
            (_, Some((_, queued))) => queued.push(argv),
            _ => {
                run(replay, &argv, name)?;
                loaded.commands += 1;
            }
        }
        if loaded.commands % 1024 == 0 {
            shared
                .persistence
                .loading_loaded_bytes
                .store(progress_base + pos as u64, Ordering::Relaxed);
        }
    }
    match transaction {
        Some((start, _)) => {
            tracing::warn!("Revert incomplete MULTI/EXEC transaction in AOF file {name}");
            Ok(Ending::Truncated { valid_up_to: start })
        }
        None => Ok(Ending::Complete),
    }
}

/// Runs one logged command through `replay` (the server's replay client:
/// see `cmd::persistence::aof_replayer`); an unknown command stops the load,
/// as in Redis.
fn run(replay: &mut Replay<'_>, argv: &[Vec<u8>], file: &str) -> Result<(), String> {
    let args: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    replay(&args).map_err(|()| {
        format!(
            "Unknown command '{}' reading the append only file {file}",
            String::from_utf8_lossy(&argv[0])
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_parsed_as_redis_writes_them() {
        let input = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*1\r\n$4\r\nPING\r\n";
        match parse_command(input) {
            Ok(Parsed::Command(argv, used)) => {
                assert_eq!(argv, vec![b"SELECT".to_vec(), b"0".to_vec()]);
                assert_eq!(used, 23);
            }
            _ => panic!("a whole command"),
        }
        assert!(matches!(
            parse_command(b"*2\r\n$6\r\nSEL"),
            Ok(Parsed::Incomplete)
        ));
        assert!(matches!(
            parse_command(b"#TS:123\r\n"),
            Ok(Parsed::Annotation(9))
        ));
        assert!(parse_command(b"SET k v\r\n").is_err());
        assert!(parse_command(b"*0\r\n").is_err());
    }
}
