//! EVAL and friends: the script cache, atomic execution over shard locks, the
//! redis.call bridge, rollback, and busy-script handling.
//!
//! # Atomicity without a global lock
//!
//! A script runs holding the shards of the keys it declares in KEYS, so it is
//! atomic while commands on every other shard carry on. A script that touches
//! a key it did not declare takes that key's shard with `try_lock`; when the
//! shard is busy (waiting could deadlock: the script holds shards out of the
//! global order) the run is abandoned: every write it made is undone from the
//! undo log, the script is remembered as one that needs the whole keyspace,
//! and it runs again holding every shard. Commands that act on whole
//! databases (FLUSHDB, SWAPDB, MOVE, COPY ... DB) cannot be undone key by key,
//! so reaching one from a declared-keys run takes the same path before it
//! runs. See docs/architecture.md.

mod bridge;
mod busy;
pub mod convert;
pub mod functions;
mod lookup;
mod lua_prelude;
pub mod native;
mod raw;
mod run;
mod undo;
pub mod vm;

pub use bridge::set_resp;
pub use busy::{check_current_run, Killed, RunState};
pub use lookup::Named;
pub use run::{call_function, eval};

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use hashbrown::HashMap;
use parking_lot::{Mutex, RwLock};

use crate::striped::StripedCount;

/// Flags from a `#!lua flags=...` first line.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ScriptFlags {
    /// The script starts with a shebang (Redis 7 semantics for OOM).
    pub shebang: bool,
    /// `no-writes`: write commands are refused.
    pub no_writes: bool,
    /// `allow-oom`: may run past maxmemory.
    pub allow_oom: bool,
    /// `allow-stale`: may run on a replica whose link is down with
    /// `replica-serve-stale-data no`.
    pub allow_stale: bool,
    /// `no-cluster`: refused in cluster mode.
    pub no_cluster: bool,
}

/// A loaded script.
#[derive(Debug)]
pub struct Script {
    /// SHA1 of the body, lower-case hex.
    pub sha: String,
    /// The script as the client sent it (its SHA1 is `sha`): what a
    /// snapshot or the append-only file keeps (`lua-persist-scripts`).
    pub source: Vec<u8>,
    /// The body as compiled (a shebang line turned into a Lua comment so line
    /// numbers stay those of the source).
    pub body: Vec<u8>,
    /// Shebang flags.
    pub flags: ScriptFlags,
    /// Index in `tally_lua::SCRIPTS` when a native twin runs this script.
    pub native: Option<usize>,
    /// Set once the script touched a key outside KEYS: it then always runs
    /// holding every shard (see the module docs).
    pub needs_everything: AtomicBool,
    /// For a function (FCALL), which one: its library's code is what runs,
    /// and `sha` is the function's name, as Redis's errors name it.
    pub function: Option<functions::FunctionTarget>,
}

/// Parses the shebang line, if any, as Redis 7.0 does.
pub fn parse_shebang(source: &[u8]) -> Result<(ScriptFlags, Vec<u8>), String> {
    if !source.starts_with(b"#!") {
        return Ok((ScriptFlags::default(), source.to_vec()));
    }
    let line_end = source
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(source.len());
    let line = String::from_utf8_lossy(&source[..line_end]).into_owned();
    let mut words = line.split(' ').filter(|w| !w.is_empty());
    let engine = words.next().unwrap_or("");
    if engine != "#!lua" {
        return Err(format!("ERR Unexpected engine in script shebang: {line}"));
    }
    let mut flags = ScriptFlags {
        shebang: true,
        ..ScriptFlags::default()
    };
    for word in words {
        let Some(list) = word.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {word}"));
        };
        for flag in list.split(',').filter(|f| !f.is_empty()) {
            match flag {
                "no-writes" => flags.no_writes = true,
                "allow-oom" => flags.allow_oom = true,
                "allow-stale" => flags.allow_stale = true,
                "no-cluster" => flags.no_cluster = true,
                "allow-cross-slot-keys" => {}
                other => return Err(format!("ERR Unexpected flag in script shebang: {other}")),
            }
        }
    }
    let mut body = source.to_vec();
    body[0] = b'-';
    body[1] = b'-';
    Ok((flags, body))
}

/// Scripts known to a server and the runs in progress.
pub struct Scripts {
    /// The known limiter scripts, always loaded, looked up without a lock on
    /// the hot EVALSHA path: each as shipped and without its final newline
    /// (what `$(cat file)` and many client libraries send).
    known: Vec<Arc<Script>>,
    cache: RwLock<HashMap<String, Arc<Script>>>,
    pub(super) running: Mutex<Vec<Arc<RunState>>>,
    /// Runs past the busy threshold; non-zero makes other clients get BUSY.
    pub(super) busy: Arc<AtomicUsize>,
    /// Lua runs in progress, busy or not: SCRIPT KILL waits for one of them
    /// to pass the threshold, as it would on Redis.
    pub(super) lua_running: StripedCount,
    /// Set when the server stops: every running script is stopped at its
    /// next hook, killable or not (SHUTDOWN NOSAVE, SIGTERM).
    pub(super) stopping: AtomicBool,
    /// `busy-reply-threshold` (`lua-time-limit`) in milliseconds.
    pub busy_threshold_ms: AtomicU64,
    /// Bumped by SCRIPT FLUSH so worker VMs drop their compiled functions.
    generation: AtomicU64,
    /// Lua executions of any script, for INFO.
    pub lua_runs: AtomicU64,
    /// Per known script (`tally_lua::SCRIPTS` order): native and Lua runs.
    pub known_runs: Vec<(AtomicU64, AtomicU64)>,
    /// Per known script: requests it allowed and denied (its reply's first
    /// element, 1 or 0), by either path.
    pub known_decisions: Vec<(AtomicU64, AtomicU64)>,
    /// `lua-native-scripts`: run known scripts natively.
    pub native_enabled: AtomicBool,
    /// `lua-memory-limit` in bytes, applied to the VM of each run.
    pub memory_limit: AtomicU64,
    /// Bytes the worker threads' Lua VMs hold, as of their last runs
    /// (INFO used_memory_lua).
    pub vm_memory: StripedCount,
    /// The function libraries (FUNCTION LOAD, FCALL).
    pub functions: functions::Functions,
}

impl Default for Scripts {
    fn default() -> Scripts {
        Scripts {
            known: tally_lua::SCRIPTS
                .iter()
                .enumerate()
                .flat_map(|(index, known)| {
                    [known.source, known.source.trim_end()].map(|text| {
                        // The shipped limiter scripts, tested to parse.
                        #[allow(clippy::expect_used)]
                        let (flags, body) = parse_shebang(text.as_bytes())
                            .expect("known scripts have no shebang errors");
                        Arc::new(Script {
                            sha: vm::sha1(text.as_bytes()),
                            source: text.as_bytes().to_vec(),
                            body,
                            flags,
                            native: Some(index),
                            needs_everything: AtomicBool::new(false),
                            function: None,
                        })
                    })
                })
                .collect(),
            cache: RwLock::new(HashMap::new()),
            running: Mutex::new(Vec::new()),
            busy: Arc::new(AtomicUsize::new(0)),
            lua_running: StripedCount::default(),
            stopping: AtomicBool::new(false),
            busy_threshold_ms: AtomicU64::new(5000),
            generation: AtomicU64::new(0),
            lua_runs: AtomicU64::new(0),
            known_runs: tally_lua::SCRIPTS
                .iter()
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
            known_decisions: tally_lua::SCRIPTS
                .iter()
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
            native_enabled: AtomicBool::new(true),
            memory_limit: AtomicU64::new(256 * 1024 * 1024),
            vm_memory: StripedCount::default(),
            functions: functions::Functions::default(),
        }
    }
}

/// `-BUSY` text.
pub const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

impl Scripts {
    /// Compiles-checks nothing: stores the script by its SHA1 and returns it.
    /// Shebang errors are returned as Redis words them.
    pub fn load(&self, source: &[u8]) -> Result<Arc<Script>, String> {
        self.load_telling(source).map(|(script, _)| script)
    }

    /// [`Scripts::load`], telling whether the script was new to the cache.
    pub fn load_telling(&self, source: &[u8]) -> Result<(Arc<Script>, bool), String> {
        let hex = tally_lua::sha1_hex_bytes(source);
        let sha = std::str::from_utf8(&hex).unwrap_or_default();
        if let Some(script) = self.cache.read().get(sha) {
            return Ok((script.clone(), false));
        }
        let sha = sha.to_string();
        let (flags, body) = parse_shebang(source)?;
        // Trailing whitespace does not change what a script does, and shells
        // and client libraries add or strip a final newline freely.
        let trimmed = source.trim_ascii_end();
        let native = tally_lua::SCRIPTS
            .iter()
            .position(|known| known.source.trim_end().as_bytes() == trimmed);
        let script = Arc::new(Script {
            sha: sha.clone(),
            source: source.to_vec(),
            body,
            flags,
            native,
            needs_everything: AtomicBool::new(false),
            function: None,
        });
        self.cache.write().insert(sha, script.clone());
        Ok((script, true))
    }

    /// A loaded script by SHA1 (any case): a known one or one in the cache.
    pub fn get(&self, sha: &[u8]) -> Option<Arc<Script>> {
        self.known(sha).cloned().or_else(|| self.cached(sha))
    }

    /// A script SCRIPT LOAD or EVAL put in the cache, by SHA1 (any case).
    pub fn cached(&self, sha: &[u8]) -> Option<Arc<Script>> {
        if sha.len() != 40 {
            return None;
        }
        let mut lower = [0u8; 40];
        lower.copy_from_slice(sha);
        lower.make_ascii_lowercase();
        let lower = std::str::from_utf8(&lower).ok()?;
        self.cache.read().get(lower).cloned()
    }

    /// A known limiter script by SHA1 (any case), borrowed: no lock, no
    /// reference count touched.
    pub fn known(&self, sha: &[u8]) -> Option<&Arc<Script>> {
        self.known
            .iter()
            .find(|script| script.sha.as_bytes().eq_ignore_ascii_case(sha))
    }

    /// Drops one script (one whose body did not compile).
    pub fn forget(&self, sha: &str) {
        self.cache.write().remove(sha);
    }

    /// Loads every script with a native twin, so EVALSHA of a known limiter
    /// script works at boot without SCRIPT LOAD.
    pub fn preload_known(&self) {
        for known in tally_lua::SCRIPTS {
            let _ = self.load(known.source.as_bytes());
        }
    }

    /// Scripts in the cache (the known limiter scripts included) and the
    /// bytes of their bodies (INFO number_of_cached_scripts,
    /// used_memory_scripts_eval).
    pub fn cache_stats(&self) -> (usize, usize) {
        let cache = self.cache.read();
        let bytes = cache.values().map(|s| s.body.len() + s.sha.len()).sum();
        (cache.len(), bytes)
    }

    /// The scripts SCRIPT LOAD or EVAL cached, without the known limiter
    /// scripts (always loaded): what a snapshot keeps of the cache.
    pub fn loaded_by_clients(&self) -> Vec<Arc<Script>> {
        let mut scripts: Vec<Arc<Script>> = self
            .cache
            .read()
            .values()
            .filter(|script| script.native.is_none())
            .cloned()
            .collect();
        // A stable order, so that two snapshots of one cache are equal.
        scripts.sort_by(|a, b| a.sha.cmp(&b.sha));
        scripts
    }

    /// SCRIPT FLUSH. The known limiter scripts are loaded again at once: a
    /// flush must not turn every gateway's EVALSHA into NOSCRIPT.
    pub fn flush(&self) {
        self.cache.write().clear();
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.preload_known();
    }
}
