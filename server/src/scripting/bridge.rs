//! The redis.call / redis.pcall bridge: runs one command for the current
//! script through the ordinary dispatcher, on the shards the script holds,
//! with Redis's checks for scripts (scriptCall). `raw.rs` moves the
//! arguments and the reply between Lua's stack and this.

use std::borrow::Cow;
use std::sync::atomic::Ordering;

use mlua::MultiValue;

use super::undo::UndoLog;
use super::RunState;
use crate::catalog::{flags, Command};
use crate::cmd::{self, ClientState, Ctx};
use crate::resp::Reply;
use crate::state::Shared;
use crate::store::ShardLender;

/// Commands whose effect is not confined to their key arguments.
const WHOLE_KEYSPACE: &[&str] = &["flushdb", "flushall", "swapdb", "move", "copy", "select"];

/// A command redis.call did not run, or could not: the text of the
/// `{err=...}` table the script gets, and whether INFO errorstats counted
/// it already.
pub(super) struct Refused {
    pub(super) text: Cow<'static, str>,
    pub(super) counted: bool,
}

impl Refused {
    /// An error that is not a command's (no arguments, a re-run): counted
    /// as the script's if the script returns or raises it.
    pub(super) fn plain(text: &'static str) -> Refused {
        Refused {
            text: Cow::Borrowed(text),
            counted: false,
        }
    }
}

/// The error for a command the script may not run (unknown, wrong arity,
/// not allowed from scripts, a write from a read-only script): counted in
/// INFO errorstats now and marked counted, as Redis's scriptCall does.
fn refused(
    bridge: &mut Bridge<'_, '_>,
    command: Option<&Command>,
    text: impl Into<Cow<'static, str>>,
) -> Refused {
    let text = text.into();
    bridge.client.batch.errors.count(text.as_bytes());
    if let Some(command) = command {
        bridge.client.batch.count_rejected(command);
    }
    Refused {
        text,
        counted: true,
    }
}

/// What redis.call needs during one run. The VM's redis.call and redis.pcall
/// are created once per thread (creating a function per run costs more than
/// a short script), so they reach the run's state through [`BRIDGE`].
pub(super) struct Bridge<'r, 'h> {
    pub(super) shared: &'r Shared,
    pub(super) held: &'r (dyn ShardLender + 'h),
    pub(super) client: Box<ClientState>,
    pub(super) undo: UndoLog,
    pub(super) run: &'r RunState,
    pub(super) read_only: bool,
    /// The script's `allow-oom` flag: no command of it is refused for
    /// maxmemory.
    pub(super) allow_oom: bool,
    /// The server was past maxmemory when the script started (Redis's
    /// pre_command_oom_state).
    pub(super) oom_at_start: bool,
    pub(super) declared_run: bool,
    pub(super) now_ms: u64,
    pub(super) resp3: bool,
    /// The VM the script runs in, set as the run starts (see
    /// [`Bridge::lua`]).
    pub(super) lua: *const mlua::Lua,
}

impl Bridge<'_, '_> {
    /// The VM the script runs in.
    pub(super) fn lua(&self) -> &mlua::Lua {
        // SAFETY: `run_once` sets `lua` to its worker's VM, which it
        // borrows for the whole run, before BRIDGE points here; the bridge
        // is only reached through BRIDGE during that run.
        unsafe { &*self.lua }
    }
}

thread_local! {
    /// The running script's [`Bridge`] (type-erased), null between runs.
    pub(super) static BRIDGE: std::cell::Cell<*mut ()> = const { std::cell::Cell::new(std::ptr::null_mut()) };
}

/// Runs `f` on the current run's bridge, if a script is running.
pub(super) fn with_bridge<R>(f: impl FnOnce(&mut Bridge<'_, '_>) -> R) -> Option<R> {
    let ptr = BRIDGE.with(|b| b.get());
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `run_once` points BRIDGE at a Bridge that lives on its stack
    // for the whole Lua call and resets it to null before returning; this
    // thread is the only one that reads it, and redis.call cannot re-enter a
    // script (EVAL is refused inside scripts), so the borrow is exclusive.
    Some(f(unsafe { &mut *(ptr as *mut Bridge<'_, '_>) }))
}

/// redis.setresp: the RESP version redis.call replies are converted from.
pub fn set_resp(version: i64) {
    with_bridge(|bridge| {
        bridge.resp3 = version == 3;
        // Handlers shape some replies by protocol (RESP3 score pairs).
        bridge.client.proto = if bridge.resp3 {
            crate::resp::Protocol::Resp3
        } else {
            crate::resp::Protocol::Resp2
        };
    });
}

/// redis.acl_check_cmd: whether the script's user may run this command
/// with these arguments, keys and channels included (Redis 7.0's
/// luaRedisAclCheckCmdPermissionsCommand; arity is not checked). `Err`
/// holds the error the script raises.
pub fn acl_check(args: MultiValue) -> Result<bool, String> {
    with_bridge(|bridge| {
        let argv = lua_argv(&args)?;
        let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        let Ok(command) = cmd::resolve(&argv) else {
            return Err("ERR Invalid command passed to redis.acl_check_cmd()".to_string());
        };
        let user = &bridge.client.user;
        Ok(user.unrestricted() || crate::acl::check(user, command, &argv).is_ok())
    })
    .unwrap_or_else(|| {
        Err("ERR redis.acl_check_cmd can only be called inside a script invocation".to_string())
    })
}

/// A redis lib call with no argument.
pub(super) const NO_ARGUMENTS: &str =
    "ERR Please specify at least one argument for this redis lib call";
/// A redis lib call with an argument that is neither a string nor a number.
pub(super) const BAD_ARGUMENT: &str =
    "ERR Lua redis lib command arguments must be strings or integers";
/// redis.call outside a script run (a function kept from one and called
/// later cannot reach one).
pub(super) const OUTSIDE_A_RUN: &str =
    "ERR redis.call/pcall can only be called inside a script invocation";

/// A number argument of a redis lib call as Redis formats it into the
/// command's argument (`%.17g`).
pub(super) fn formatted_number(number: f64) -> Vec<u8> {
    crate::float::format_g17(number).into_bytes()
}

/// A redis lib call's arguments as a command's, copied (redis.call
/// borrows its strings instead: see `raw.rs`).
fn lua_argv(args: &MultiValue) -> Result<Vec<Vec<u8>>, String> {
    if args.is_empty() {
        return Err(NO_ARGUMENTS.to_string());
    }
    args.iter()
        .map(|value| match value {
            mlua::Value::String(s) => Ok(s.as_bytes().to_vec()),
            mlua::Value::Integer(i) => Ok(formatted_number(*i as f64)),
            mlua::Value::Number(n) => Ok(formatted_number(*n)),
            _ => Err(BAD_ARGUMENT.to_string()),
        })
        .collect()
}

/// Why a declared-keys run stops: it is run again holding every shard.
const RERUN: &str = "ERR script is being re-run holding every shard";

/// Runs one command of the script (`argv`, at least one argument) with
/// Redis's checks for a script's commands, and returns its reply.
pub(super) fn execute(bridge: &mut Bridge<'_, '_>, argv: &[&[u8]]) -> Result<Reply, Refused> {
    let held = bridge.held;
    if held.conflicted() {
        return Err(Refused::plain(RERUN));
    }
    let (index, command) = match cmd::resolve_indexed(argv) {
        Ok(found) => found,
        Err(_) => {
            return Err(refused(
                bridge,
                None,
                "ERR Unknown Redis command called from script",
            ))
        }
    };
    if !cmd::arity_ok(command.arity, argv.len()) {
        return Err(refused(
            bridge,
            Some(command),
            "ERR Wrong number of args calling Redis command from script",
        ));
    }
    if command.flags & flags::NOSCRIPT != 0
        && !bridge
            .shared
            .scripts_may_call_noscript
            .load(std::sync::atomic::Ordering::Relaxed)
    {
        return Err(refused(
            bridge,
            Some(command),
            "ERR This Redis command is not allowed from script",
        ));
    }
    if !bridge.client.user.unrestricted() {
        if let Err(denied) = crate::acl::check_indexed(&bridge.client.user, command, index, argv) {
            let ctx = Ctx {
                shared: bridge.shared,
                client: &mut bridge.client,
                now_ms: bridge.now_ms,
                held: None,
            };
            let user = ctx.client.user.clone();
            crate::cmd::acl::log_denial(
                &ctx,
                &user,
                command,
                argv,
                denied,
                crate::acl::Context::Lua,
            );
            let text = format!(
                "ERR The user executing the script {}",
                denied.script_message()
            );
            return Err(refused(bridge, Some(command), text));
        }
    }
    let writes = command.flags & flags::WRITE != 0;
    if writes && bridge.read_only {
        return Err(refused(
            bridge,
            Some(command),
            "ERR Write commands are not allowed from read-only scripts.",
        ));
    }
    if writes && !bridge.client.master && bridge.shared.master_link.refuses_writes() {
        return Err(refused(bridge, Some(command), cmd::error::READONLY_REPLICA));
    }
    // Redis's scriptVerifyOOM: a command that may grow memory is refused
    // only while the script has written nothing (it cannot be stopped
    // half-way through its writes), only if the server was past maxmemory
    // when the script started, and never in a script flagged allow-oom.
    // The dispatcher leaves a script's commands to this check.
    if command.flags & flags::DENYOOM != 0
        && bridge.oom_at_start
        && !bridge.allow_oom
        && !bridge.run.wrote.load(Ordering::SeqCst)
    {
        return Err(refused(bridge, Some(command), cmd::error::OOM));
    }
    let base = command.name.split('|').next().unwrap_or("");
    if bridge.declared_run && WHOLE_KEYSPACE.contains(&base) {
        held.force_conflict();
        return Err(Refused::plain(RERUN));
    }
    if command.flags & flags::READONLY != 0 {
        bridge.run.read.store(true, Ordering::Relaxed);
    }
    if writes {
        bridge.run.wrote.store(true, Ordering::SeqCst);
        if bridge.declared_run {
            for position in command.key_positions(argv) {
                let key = bridge.shared.store.key(argv[position]);
                bridge.undo.snapshot(
                    held,
                    &bridge.shared.store,
                    bridge.client.db,
                    key,
                    bridge.now_ms,
                );
            }
        }
    }
    let mut script_ctx = Ctx {
        shared: bridge.shared,
        client: &mut bridge.client,
        now_ms: bridge.now_ms,
        held: Some(held),
    };
    // Looked up and checked above, as Redis's scriptCall hands call() the
    // command it found.
    Ok(cmd::dispatch_checked(&mut script_ctx, index, command, argv))
}

/// Resets [`BRIDGE`] when a run ends, even by panic.
pub(super) struct BridgeGuard;

impl Drop for BridgeGuard {
    fn drop(&mut self) {
        BRIDGE.with(|b| b.set(std::ptr::null_mut()));
    }
}
