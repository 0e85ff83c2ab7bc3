//! One script run, start to end: the checks before it (cluster flags, a
//! replica's refusals, maxmemory, too few replicas), the native twin when
//! the script has one, else the Lua run over the shards of its declared
//! keys (again over every shard when it reached past them, its first
//! run's writes undone), and the reply and error counts Redis gives.

use std::sync::atomic::Ordering;

use mlua::Value;

use super::bridge::{Bridge, BridgeGuard, BRIDGE};
use super::busy::{self, RunRegistration, RunState};
use super::undo::UndoLog;
use super::{convert, native, raw, vm, Script};
use crate::cmd::{self, ClientState, Ctx, ErrorCounts};
use crate::resp::Reply;
use crate::store::{HeldShards, ShardLender};

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
                // Collected now if large, and counted, so that the next
                // run's `collect_if_near` sees what this one left.
                vm.settle_after_run(&shared.scripts.vm_memory);
                return Err(format!(
                    "ERR Error running script {}: the script needed more than lua-memory-limit",
                    script.sha
                ));
            }
            Err(e) => {
                vm.settle_after_run(&shared.scripts.vm_memory);
                return Err(format!("ERR Error running script: {e}"));
            }
        };
        drop(_reset);
        let reply = match ran {
            raw::Ran::Returned(reply) => (conversion.finish(reply, proto, &mut errors), false),
            raw::Ran::Raised(value) => (script_error(&value, &script.sha, &mut errors), true),
        };
        vm.settle_after_run(&shared.scripts.vm_memory);
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
