//! The redis.call / redis.pcall bridge: runs one command for the current
//! script through the ordinary dispatcher, on the shards the script holds.

use std::sync::atomic::Ordering;

use mlua::{MultiValue, Value};

use super::undo::UndoLog;
use super::{convert, RunState};
use crate::catalog::{flags, Command};
use crate::cmd::{self, ClientState, Ctx};
use crate::state::Shared;
use crate::store::ShardLender;

/// Commands whose effect is not confined to their key arguments.
const WHOLE_KEYSPACE: &[&str] = &["flushdb", "flushall", "swapdb", "move", "copy", "select"];

/// The error a redis.call bridge returns to Lua: `{err = text}`.
pub(super) fn lua_error(lua: &mlua::Lua, text: &str) -> mlua::Result<(Value, bool)> {
    let table = lua.create_table()?;
    table.raw_set("err", text)?;
    Ok((Value::Table(table), true))
}

/// The error for a command the script may not run (unknown, wrong arity,
/// not allowed from scripts, a write from a read-only script): counted in
/// INFO errorstats now and marked counted, as Redis's scriptCall does.
fn refused(
    lua: &mlua::Lua,
    bridge: &mut Bridge<'_, '_>,
    command: Option<&Command>,
    text: &str,
) -> mlua::Result<(Value, bool)> {
    bridge.client.batch.errors.count(text.as_bytes());
    if let Some(command) = command {
        bridge.client.batch.count_rejected(command);
    }
    let (table, failed) = lua_error(lua, text)?;
    if let Value::Table(t) = &table {
        t.raw_set(convert::COUNTED_FIELD, true)?;
    }
    Ok((table, failed))
}

/// What redis.call needs during one run. The VM's redis.call and redis.pcall
/// are created once per thread (creating a function per run costs more than
/// a short script), so they reach the run's state through [`BRIDGE`].
pub(super) struct Bridge<'r, 'h> {
    pub(super) shared: &'r Shared,
    pub(super) held: &'r (dyn ShardLender + 'h),
    pub(super) client: ClientState,
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
}

thread_local! {
    /// The running script's [`Bridge`] (type-erased), null between runs.
    pub(super) static BRIDGE: std::cell::Cell<*mut ()> = const { std::cell::Cell::new(std::ptr::null_mut()) };
}

/// Runs `f` on the current run's bridge, if a script is running.
fn with_bridge<R>(f: impl FnOnce(&mut Bridge<'_, '_>) -> R) -> Option<R> {
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

/// redis.call and redis.pcall: run one command for the current script and
/// return its reply as Lua sees it, flagged when it is an error.
pub fn bridge_call(lua: &mlua::Lua, call_args: MultiValue) -> mlua::Result<(Value, bool)> {
    with_bridge(|bridge| call_command(lua, bridge, call_args)).unwrap_or_else(|| {
        lua_error(
            lua,
            "ERR redis.call/pcall can only be called inside a script invocation",
        )
    })
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
const NO_ARGUMENTS: &str = "ERR Please specify at least one argument for this redis lib call";
/// A redis lib call with an argument that is neither a string nor a number.
const BAD_ARGUMENT: &str = "ERR Lua redis lib command arguments must be strings or integers";

/// A number argument of a redis lib call as Redis formats it into the
/// command's argument; `None` for anything else.
fn formatted_number(value: &Value) -> Option<Vec<u8>> {
    match value {
        Value::Integer(i) => Some(crate::float::format_g17(*i as f64).into_bytes()),
        Value::Number(n) => Some(crate::float::format_g17(*n).into_bytes()),
        _ => None,
    }
}

/// A redis lib call's arguments as a command's, copied (redis.call
/// borrows its strings instead: see `run_command`).
fn lua_argv(args: &MultiValue) -> Result<Vec<Vec<u8>>, String> {
    if args.is_empty() {
        return Err(NO_ARGUMENTS.to_string());
    }
    args.iter()
        .map(|value| match value {
            Value::String(s) => Ok(s.as_bytes().to_vec()),
            other => formatted_number(other).ok_or_else(|| BAD_ARGUMENT.to_string()),
        })
        .collect()
}

fn call_command(
    lua: &mlua::Lua,
    bridge: &mut Bridge<'_, '_>,
    call_args: MultiValue,
) -> mlua::Result<(Value, bool)> {
    // Building the reply is tally's work, not the script's: lift the memory
    // limit meanwhile (see `run_once`).
    let limit = lua.set_memory_limit(0).unwrap_or(0);
    let result = run_command(lua, bridge, call_args);
    let _ = lua.set_memory_limit(limit);
    result
}

fn run_command(
    lua: &mlua::Lua,
    bridge: &mut Bridge<'_, '_>,
    call_args: MultiValue,
) -> mlua::Result<(Value, bool)> {
    let held = bridge.held;
    if held.conflicted() {
        return lua_error(lua, "ERR script is being re-run holding every shard");
    }
    if call_args.is_empty() {
        return lua_error(lua, NO_ARGUMENTS);
    }
    // Strings are borrowed from Lua; numbers are formatted as Redis does.
    let mut owned: Vec<Vec<u8>> = Vec::new();
    let mut strings = Vec::with_capacity(call_args.len());
    for value in call_args.iter() {
        match value {
            Value::String(s) => strings.push(Some(s.as_bytes())),
            other => match formatted_number(other) {
                Some(number) => {
                    owned.push(number);
                    strings.push(None);
                }
                None => return lua_error(lua, BAD_ARGUMENT),
            },
        }
    }
    let mut formatted = owned.iter();
    let argv: Vec<&[u8]> = strings
        .iter()
        .map(|s| match s {
            Some(bytes) => &bytes[..],
            // `owned` holds one formatted number per gap, in order.
            None => formatted.next().map_or(&b""[..], |f| f.as_slice()),
        })
        .collect();
    let (index, command) = match cmd::resolve_indexed(&argv) {
        Ok(found) => found,
        Err(_) => {
            return refused(
                lua,
                bridge,
                None,
                "ERR Unknown Redis command called from script",
            )
        }
    };
    if !cmd::arity_ok(command.arity, argv.len()) {
        return refused(
            lua,
            bridge,
            Some(command),
            "ERR Wrong number of args calling Redis command from script",
        );
    }
    if command.flags & flags::NOSCRIPT != 0 {
        return refused(
            lua,
            bridge,
            Some(command),
            "ERR This Redis command is not allowed from script",
        );
    }
    if !bridge.client.user.unrestricted() {
        if let Err(denied) = crate::acl::check_indexed(&bridge.client.user, command, index, &argv) {
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
                &argv,
                denied,
                crate::acl::Context::Lua,
            );
            let text = format!(
                "ERR The user executing the script {}",
                denied.script_message()
            );
            return refused(lua, bridge, Some(command), &text);
        }
    }
    let writes = command.flags & flags::WRITE != 0;
    if writes && bridge.read_only {
        return refused(
            lua,
            bridge,
            Some(command),
            "ERR Write commands are not allowed from read-only scripts.",
        );
    }
    if writes && !bridge.client.master && bridge.shared.master_link.refuses_writes() {
        return refused(lua, bridge, Some(command), cmd::error::READONLY_REPLICA);
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
        return refused(lua, bridge, Some(command), cmd::error::OOM);
    }
    let base = command.name.split('|').next().unwrap_or("");
    if bridge.declared_run && WHOLE_KEYSPACE.contains(&base) {
        held.force_conflict();
        return lua_error(lua, "ERR script is being re-run holding every shard");
    }
    if command.flags & flags::READONLY != 0 {
        bridge.run.read.store(true, Ordering::Relaxed);
    }
    if writes {
        bridge.run.wrote.store(true, Ordering::SeqCst);
        if bridge.declared_run {
            for position in command.key_positions(&argv) {
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
    let reply = cmd::dispatch(&mut script_ctx, &argv);
    convert::reply_to_lua(lua, &reply, bridge.resp3)
}

/// Resets [`BRIDGE`] when a run ends, even by panic.
pub(super) struct BridgeGuard;

impl Drop for BridgeGuard {
    fn drop(&mut self) {
        BRIDGE.with(|b| b.set(std::ptr::null_mut()));
    }
}
