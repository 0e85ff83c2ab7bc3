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
pub mod native;
mod raw;
mod undo;
pub mod vm;

pub use bridge::set_resp;
use bridge::{Bridge, BridgeGuard, BRIDGE};
use busy::RunRegistration;
pub use busy::{check_current_run, Killed, RunState};
pub use lookup::Named;
use undo::UndoLog;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use hashbrown::HashMap;
use mlua::Value;
use parking_lot::{Mutex, RwLock};

use crate::cmd::{self, ClientState, Ctx, ErrorCounts};
use crate::resp::Reply;
use crate::store::{HeldShards, ShardLender};
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

/// The server is past maxmemory as a script call starts (Redis's
/// pre_command_oom_state), tested as the dispatcher tests a command that
/// may grow memory: counting the call's own arguments (Redis counts them
/// in its used memory, so EVAL on an empty server past `maxmemory 1` is
/// over). The native path and the Lua run both decide by this, so they
/// refuse the same calls.
fn over_maxmemory_at_start(
    shared: &crate::state::Shared,
    script: &Script,
    keys: &[&[u8]],
    args: &[&[u8]],
) -> bool {
    // A function's call names it; a script's carries its body (or SHA1).
    let named_by = match &script.function {
        Some(target) => target.function.len(),
        None => script.body.len(),
    };
    shared.over_maxmemory_with(named_by + keys.iter().chain(args).map(|a| a.len()).sum::<usize>())
}

/// Why a replica refuses to start the script, if it does: its link is
/// down with `replica-serve-stale-data no` (unless a shebang allows
/// stale data), or it is read-only and the script's shebang does not
/// promise `no-writes`. Redis derives EVAL's command flags from the
/// shebang (evalGetCommandFlags), so these are the errors its command
/// checks give. A script without a shebang starts on a read-only replica
/// and fails at its first write instead (see `bridge.rs`).
fn replica_refusal(ctx: &Ctx<'_>, script: &Script) -> Option<Reply> {
    let link = &ctx.shared.master_link;
    if ctx.client.master || !link.is_replica() {
        return None;
    }
    let flags = &script.flags;
    if link.refuses_stale_reads() && !(flags.shebang && flags.allow_stale) {
        return Some(Reply::error(cmd::error::MASTERDOWN));
    }
    if flags.shebang && !flags.no_writes && link.refuses_writes() {
        return Some(Reply::error(cmd::error::READONLY_REPLICA));
    }
    None
}

/// Runs a loaded script with its keys and arguments (EVAL, EVALSHA and their
/// _RO forms), atomically.
pub fn eval(
    ctx: &mut Ctx<'_>,
    script: &Script,
    keys: &[&[u8]],
    args: &[&[u8]],
    read_only: bool,
) -> Reply {
    run_script(ctx, script, keys, args, read_only)
}

/// Runs a function (FCALL, FCALL_RO) as [`eval`] runs a script; `command`
/// is the call as sent, for FUNCTION STATS.
pub fn call_function(
    ctx: &mut Ctx<'_>,
    function: &Script,
    command: &[&[u8]],
    keys: &[&[u8]],
    args: &[&[u8]],
    read_only: bool,
) -> Reply {
    busy::CallingCommand::lend(command, || run_script(ctx, function, keys, args, read_only))
}

fn run_script(
    ctx: &mut Ctx<'_>,
    script: &Script,
    keys: &[&[u8]],
    args: &[&[u8]],
    read_only: bool,
) -> Reply {
    let shared = ctx.shared;
    ctx.client.script_read = false;
    // Redis's scriptPrepareForRun, for a shebang script or a function.
    if script.flags.no_cluster && shared.cluster.get().is_some() {
        return Reply::error("ERR Can not run script on cluster, 'no-cluster' flag is set.");
    }
    if let Some(refusal) = replica_refusal(ctx, script) {
        return refusal;
    }
    if let Some(index) = script.native {
        // The twins change keys without the commands' keyspace
        // notifications: while anyone may be told of changes, the script
        // runs in Lua, whose redis.calls raise them as Redis's do.
        if shared.scripts.native_enabled.load(Ordering::Relaxed)
            && !shared.keyspace_events.enabled()
            && native::permitted(ctx, index, keys)
        {
            let over_maxmemory = over_maxmemory_at_start(shared, script, keys, args);
            if let Some(reply) = native::run(ctx, index, keys, args, read_only, over_maxmemory) {
                // Counted per batch, like command statistics.
                ctx.client.batch.native_script_runs[index] += 1;
                ctx.client.script_read = native::reads_keys(tally_lua::SCRIPTS[index].twin);
                count_decision(ctx, index, args, &reply);
                return reply;
            }
        }
        ctx.client.batch.fallback_script_runs[index] += 1;
    }
    let may_write = !read_only && !script.flags.no_writes;
    // Redis's scriptPrepareForRun: a script that may write is refused
    // before it runs while too few replicas acknowledge (no shebang: its
    // first write is, in the bridge).
    if script.flags.shebang
        && may_write
        && !ctx.client.master
        && !crate::cmd::replication::enough_good_replicas(shared, ctx.now_ms)
    {
        return Reply::error(cmd::error::NOREPLICAS);
    }
    // Redis refuses such a call before it runs (its command flags say
    // DENYOOM); a function's call is measured with its arguments, as the
    // dispatcher measures a command's.
    if script.flags.shebang
        && may_write
        && !script.flags.allow_oom
        && if script.function.is_some() {
            over_maxmemory_at_start(shared, script, keys, args)
        } else {
            shared.over_maxmemory()
        }
    {
        return Reply::error(cmd::error::OOM);
    }
    let scripts = &shared.scripts;
    // Only a function's run is named for FUNCTION STATS and FUNCTION KILL.
    // Inside EXEC the dispatcher's start is the transaction's, not this
    // run's.
    let started_ns = match ctx.client.started_ns {
        0 => None,
        _ if ctx.held.is_some() => None,
        ns => Some(ns),
    };
    let run = RunState::start(
        script
            .function
            .as_ref()
            .map(|target| target.function.clone()),
        started_ns,
    );
    let registration = RunRegistration::new(scripts, &run);
    let mut everything = script.needs_everything.load(Ordering::Relaxed);
    let (reply, errors) = if let Some(lender) = ctx.held {
        // Inside EXEC: the transaction holds every shard (a queued EVAL
        // makes it take them all) and lends them to the script; nothing
        // can conflict, so there is no undo log and no re-run.
        let mut undo = UndoLog::default();
        run_once(
            ctx, lender, script, keys, args, !may_write, false, &mut undo, &run,
        )
    } else {
        loop {
            let held = if everything {
                HeldShards::everything(&shared.store)
            } else {
                let keyrefs = keys.iter().map(|k| shared.store.key(k));
                HeldShards::declared(&shared.store, ctx.client.db, keyrefs)
            };
            let mut undo = UndoLog::default();
            let outcome = run_once(
                ctx,
                &held,
                script,
                keys,
                args,
                !may_write,
                !everything,
                &mut undo,
                &run,
            );
            if !everything && held.conflicted() {
                undo.rollback(&held, &shared.store, ctx.now_ms);
                ctx.client.propagated.clear();
                script.needs_everything.store(true, Ordering::Relaxed);
                everything = true;
                continue;
            }
            // The effects reach the feed while the script's shards are held.
            crate::cmd::propagate::append_pending(ctx);
            break outcome;
        }
    };
    drop(registration);
    ctx.client.script_read = run.read.load(Ordering::Relaxed);
    RunState::end(run);
    ctx.client.batch.lua_script_runs += 1;
    // The dispatcher must not count the reply's errors: those that came from
    // redis.call were counted when their commands failed; `errors` holds
    // the others.
    ctx.client.batch.errors.merge(errors);
    ctx.client.reply_errors_counted = true;
    if let Some(index) = script.native {
        count_decision(ctx, index, args, &reply);
    }
    reply
}

/// Counts a known limiter script's decision: its reply's first element is
/// 1 when it allowed the request, 0 when it denied it. A lease call that
/// admits nothing (every cost 0: a sync's top-up or give-back) is no
/// request's decision and is not counted.
fn count_decision(ctx: &mut Ctx<'_>, index: usize, args: &[&[u8]], reply: &Reply) {
    let twin = tally_lua::SCRIPTS[index].twin;
    if !twin.replies_decision() || (twin == tally_lua::Twin::Lease && !admits_a_request(args)) {
        return;
    }
    if let Reply::Array(items) = reply {
        match items.first() {
            Some(Reply::Int(1)) => ctx.client.batch.decisions[index].0 += 1,
            Some(Reply::Int(0)) => ctx.client.batch.decisions[index].1 += 1,
            _ => {}
        }
    }
}

/// True when a lease call asks to admit a cost (ARGV[5i] of limit i, see
/// lua/scripts/lease.lua): a request's check, not a sync.
fn admits_a_request(args: &[&[u8]]) -> bool {
    args.chunks(5)
        .filter_map(|limit| limit.get(4))
        .any(|cost| !matches!(*cost, b"0" | b""))
}

thread_local! {
    /// The client redis.call ran as in this thread's last script run, kept
    /// for the next (see [`ClientState::reuse_for_script`]).
    static SCRIPT_CLIENT: std::cell::Cell<Option<Box<ClientState>>> = const { std::cell::Cell::new(None) };
}

#[allow(clippy::too_many_arguments)]
fn run_once(
    ctx: &mut Ctx<'_>,
    held: &dyn ShardLender,
    script: &Script,
    keys: &[&[u8]],
    args: &[&[u8]],
    read_only: bool,
    declared_run: bool,
    undo: &mut UndoLog,
    run: &RunState,
) -> (Reply, ErrorCounts) {
    let shared = ctx.shared;
    let generation = shared.scripts.generation.load(Ordering::SeqCst);
    // redis.call runs as the caller's user, on the caller's database, as a
    // client this thread keeps from run to run.
    let client = match SCRIPT_CLIENT.take() {
        Some(mut client) => {
            client.reuse_for_script(ctx.client);
            client
        }
        None => Box::new(ClientState::for_script(ctx.client)),
    };
    let mut bridge = Bridge {
        shared,
        held,
        client,
        undo: std::mem::take(undo),
        run,
        read_only,
        allow_oom: script.flags.allow_oom,
        oom_at_start: over_maxmemory_at_start(shared, script, keys, args),
        declared_run,
        now_ms: ctx.now_ms,
        resp3: false,
        lua: std::ptr::null(),
    };
    let proto = ctx.client.proto;
    // The errors of the reply that INFO errorstats must count: the dispatcher
    // is told not to count the reply, whose errors from redis.call were
    // counted when their commands failed.
    let mut errors = ErrorCounts::default();
    let outcome = vm::with_vm(|vm| -> Result<(Reply, bool), String> {
        vm.sync_generation(generation);
        // Lua 5.1 has no emergency collection: after a run that came near
        // the limit (one that failed on it, typically), collect before the
        // next run with the limit lifted, so garbage cannot fail it.
        let memory_limit = shared.scripts.memory_limit.load(Ordering::Relaxed) as usize;
        vm.collect_if_near(memory_limit);
        vm.sync_library_generation(shared.scripts.functions.generation());
        let function = match &script.function {
            Some(target) => vm.library_function(target)?,
            None => vm.function_id(&script.sha, &script.body)?,
        };
        bridge.lua = &vm.lua;
        BRIDGE.with(|b| b.set(&mut bridge as *mut Bridge<'_, '_> as *mut ()));
        let _reset = BridgeGuard;
        let mut conversion = convert::Conversion::new(convert::ResultLimits::default());
        let called = raw::run(
            &vm.lua,
            vm.error_handler_id(),
            function,
            script.function.is_some(),
            keys,
            args,
            memory_limit,
            &mut conversion,
        );
        // A memory error can end the call with the limit still on.
        let _ = vm.lua.set_memory_limit(0);
        let ran = match called {
            Ok(ran) => ran,
            // Lua does not run the error handler for memory errors.
            Err(mlua::Error::MemoryError(_)) => {
                vm.collect_if_large();
                return Err(format!(
                    "ERR Error running script {}: the script needed more than lua-memory-limit",
                    script.sha
                ));
            }
            Err(e) => return Err(format!("ERR Error running script: {e}")),
        };
        drop(_reset);
        let reply = match ran {
            raw::Ran::Returned(reply) => (conversion.finish(reply, proto, &mut errors), false),
            raw::Ran::Raised(value) => (script_error(&value, &script.sha, &mut errors), true),
        };
        vm.collect_if_large();
        vm.account_memory(&shared.scripts.vm_memory);
        Ok(reply)
    });
    *undo = std::mem::take(&mut bridge.undo);
    // The script's commands count with the caller's batch, flushed once
    // per batch of the connection's commands.
    bridge.client.batch.flush_errors(shared);
    ctx.client
        .batch
        .absorb_script_commands(&mut bridge.client.batch);
    // The script's effects, for the change feed (Redis 7 replicates
    // scripts by their effects).
    ctx.client.propagated.append(&mut bridge.client.propagated);
    SCRIPT_CLIENT.set(Some(bridge.client));
    let reply = match outcome {
        Ok((_, true)) if run.kill.load(Ordering::SeqCst) => {
            errors = ErrorCounts::default();
            let reply = Reply::error(format!(
                "ERR Script killed by user with SCRIPT KILL... script: {}, on @user_script:1.",
                script.sha
            ));
            errors.count(reply_text(&reply));
            reply
        }
        Ok((reply, _)) => reply,
        Err(text) => {
            errors = ErrorCounts::default();
            errors.count(text.as_bytes());
            Reply::error(text)
        }
    };
    (reply, errors)
}

/// The text of an error reply (empty for any other).
fn reply_text(reply: &Reply) -> &[u8] {
    match reply {
        Reply::Error(text) => text,
        _ => b"",
    }
}

/// The reply for a script that raised an error, as Redis formats it:
/// `<err> script: <sha>, on <source>:<line>.`, counted in `errors` unless
/// it is a redis.call error that was counted when its command failed.
fn script_error(value: &Value, sha: &str, errors: &mut ErrorCounts) -> Reply {
    let reply = script_error_reply(value, sha);
    let counted = match value {
        Value::Table(table) => table
            .raw_get::<bool>(convert::COUNTED_FIELD)
            .unwrap_or(false),
        _ => false,
    };
    if let (Reply::Error(text), false) = (&reply, counted) {
        errors.count(text);
    }
    reply
}

fn script_error_reply(value: &Value, sha: &str) -> Reply {
    // The message's bytes are kept as the script made them (Redis echoes
    // them raw); only CR and LF are blanked out.
    let Value::Table(table) = value else {
        let mut text = format!("ERR Error running script {sha}, ").into_bytes();
        match value {
            Value::String(s) => text.extend_from_slice(&s.as_bytes()),
            _ => text.extend_from_slice(b"execution failure"),
        }
        return Reply::error_bytes(text);
    };
    let mut text = match table.raw_get::<Value>("err") {
        Ok(Value::String(s)) => s.as_bytes().to_vec(),
        _ => b"ERR unknown error".to_vec(),
    };
    let source = table
        .raw_get::<Option<mlua::String>>("source")
        .ok()
        .flatten();
    let line = table.raw_get::<Option<i64>>("line").ok().flatten();
    if let (Some(source), Some(line)) = (source, line) {
        text.extend_from_slice(format!(" script: {sha}, on ").as_bytes());
        text.extend_from_slice(&source.as_bytes());
        text.extend_from_slice(format!(":{line}.").as_bytes());
    }
    Reply::error_bytes(text)
}
