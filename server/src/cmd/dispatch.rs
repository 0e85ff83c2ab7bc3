//! The dispatcher: a command from its name to its reply. It looks the
//! command up, asks `rejection.rs` whether it may run, runs its handler
//! (holding its keys' shards when the append-only file records it), and
//! keeps Redis's books on the way: command statistics, the slow log, the
//! latency monitor, MONITOR and CLIENT TRACKING.

use std::sync::atomic::Ordering;

use super::rejection::{held_by_pause, rejection};
use super::routing::{is_cluster_redirection, slot_gate};
use super::{
    access_clock, acl, blocking, handlers, multi, propagate, resolve_indexed, routing, After, Ctx,
    ShardLender,
};
use crate::catalog::{flags, Command};
use crate::resp::Reply;
use crate::state::{ClientInfo, Shared};

/// Runs one command: table lookup, arity, authentication, the maxmemory
/// check, then the handler, with statistics.
pub fn dispatch(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if ctx.client.acl_generation != ctx.shared.acl.generation() {
        acl::refresh_user(ctx);
    }
    let (index, command) = match resolve_indexed(argv) {
        Ok(found) => found,
        Err(reply) => {
            count_errors(ctx, &reply);
            multi::flag_failed(ctx);
            forget_asking(ctx, None);
            return reply;
        }
    };
    let reply = dispatch_resolved(ctx, index, command, argv);
    forget_asking(ctx, Some(command));
    reply
}

/// [`dispatch`] for a command already looked up: a script's redis.call
/// resolves the command for its own checks first, as Redis's scriptCall
/// hands call() the command it found.
pub fn dispatch_checked(
    ctx: &mut Ctx<'_>,
    index: usize,
    command: &'static Command,
    argv: &[&[u8]],
) -> Reply {
    if ctx.client.acl_generation != ctx.shared.acl.generation() {
        acl::refresh_user(ctx);
    }
    let reply = dispatch_resolved(ctx, index, command, argv);
    forget_asking(ctx, Some(command));
    reply
}

/// ASKING holds for the next command only (a transaction's until EXEC),
/// as Redis's resetClient.
#[inline]
fn forget_asking(ctx: &mut Ctx<'_>, command: Option<&'static Command>) {
    if ctx.client.asking
        && ctx.held.is_none()
        && !ctx.client.in_script
        && ctx.client.transaction.is_none()
        && command.is_none_or(|c| c.name != "asking")
    {
        ctx.client.asking = false;
    }
}

fn dispatch_resolved(
    ctx: &mut Ctx<'_>,
    index: usize,
    command: &'static Command,
    argv: &[&[u8]],
) -> Reply {
    if held_by_pause(ctx, index, command, argv) {
        return Reply::Nothing;
    }
    if multi::queues(ctx, command) {
        return match rejection(ctx, index, command, argv) {
            Some(_) if ctx.client.after.retries() => Reply::Nothing,
            Some(reply) => {
                ctx.client.batch.counts(index).rejected += 1;
                count_errors(ctx, &reply);
                multi::flag_failed(ctx);
                reply
            }
            None => multi::queue(ctx, command, argv),
        };
    }
    let reply = check_and_call(ctx, index, command, argv);
    // A script's reply was counted by the script run, error by error.
    if !std::mem::take(&mut ctx.client.reply_errors_counted) {
        count_errors(ctx, &reply);
    }
    reply
}

/// Counts an error reply in INFO's total_error_replies and errorstats.
fn count_errors(ctx: &mut Ctx<'_>, reply: &Reply) {
    if let Reply::Error(text) = reply {
        ctx.client.batch.errors.count(text);
    }
}

/// Adds a command to the slow log. A script's commands are shown as Redis
/// shows its Lua client's: address `?:0`, no name.
#[cold]
fn log_slow(ctx: &Ctx<'_>, argv: &[&[u8]], usec: u64) {
    let caller = if ctx.client.in_script {
        crate::slowlog::Caller {
            peer: "?:0".to_string(),
            name: Vec::new(),
        }
    } else {
        crate::slowlog::Caller {
            peer: ctx.client.info.addr.to_string(),
            name: ctx.client.info.name.lock().clone().unwrap_or_default(),
        }
    };
    ctx.shared
        .slowlog
        .record(argv, usec, ctx.now_ms / 1000, caller);
}

/// Adds a blocked command to the slow log once it is answered (served or
/// unblocked by CLIENT UNBLOCK, not timed out: `Outcome::logged`), with
/// the duration of the call that blocked, as Redis's updateStatsOnUnblock
/// logs it: the waiting is not counted.
pub fn log_unblocked(shared: &Shared, info: &ClientInfo, argv: &[Vec<u8>], call_usec: u64) {
    if !shared.slowlog.wants(call_usec) {
        return;
    }
    let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    let caller = crate::slowlog::Caller {
        peer: info.addr.to_string(),
        name: info.name.lock().clone().unwrap_or_default(),
    };
    shared
        .slowlog
        .record(&argv, call_usec, shared.clock.now_ms() / 1000, caller);
}

/// Shows a command to the MONITOR clients: as the script's (`lua`) when a
/// script runs it, else as the client's.
#[cold]
pub fn feed_monitors(ctx: &Ctx<'_>, argv: &[&[u8]]) {
    let source = match &ctx.client.info.addr {
        _ if ctx.client.in_script => "lua".to_string(),
        // Redis names a Unix socket client `unix:<path>` here.
        crate::clients::ClientAddr::Unix(path) => format!("unix:{path}"),
        addr => addr.to_string(),
    };
    ctx.shared
        .monitors
        .feed(ctx.shared.clock.now_us(), ctx.client.db, &source, argv);
}

/// CLIENT TRACKING (default mode): remembers the keys a read-only command
/// read, unless OPTIN/OPTOUT with CLIENT CACHING say otherwise; then
/// CLIENT CACHING's word is spent, as in Redis (unless inside MULTI or the
/// command was a CLIENT subcommand). A script's declared keys are
/// remembered when the script ran a read-only command (EVAL_RO included,
/// whatever its own flags), as Redis's call() does.
#[cold]
fn track_reads(ctx: &mut Ctx<'_>, command: &Command, argv: &[&[u8]]) {
    let Some(mode) = &ctx.client.tracking else {
        return;
    };
    let caching = ctx.client.caching;
    let read = if command.group == "scripting" && command.name.starts_with("eval") {
        std::mem::take(&mut ctx.client.script_read)
    } else {
        command.flags & flags::READONLY != 0
    };
    let wanted = !mode.bcast && read && !((mode.optin && !caching) || (mode.optout && caching));
    if wanted {
        let keys: Vec<&[u8]> = command
            .key_positions(argv)
            .into_iter()
            .map(|i| argv[i])
            .collect();
        if !keys.is_empty() {
            ctx.shared.tracking.remember(ctx.client.info.id, &keys);
        }
    }
    if ctx.client.transaction.is_none() && !command.name.starts_with("client|") {
        ctx.client.caching = false;
    }
}

/// Adds a command past `latency-monitor-threshold` to the latency monitor,
/// as Redis's call() does: `fast-command` for a command flagged fast,
/// `command` for any other. EXEC and script runs are measured whole.
#[cold]
fn monitor_latency(ctx: &Ctx<'_>, command: &Command, latency_ms: u64) {
    let event = if command.flags & flags::FAST != 0 {
        "fast-command"
    } else {
        "command"
    };
    ctx.shared
        .stats
        .latency_monitor
        .add(event, latency_ms, ctx.now_ms / 1000);
}

/// Runs the handler. While the append-only file is on, a write command
/// also leaves what it propagates: on its own, it runs holding the shards
/// of its keys (all of them when its keys are not known up front) and its
/// change is appended to the feed before they are released, so changes
/// reach the feed in the order they reached the keys; inside a
/// transaction or script, its change is kept for the enclosing run to
/// append.
#[inline]
pub(super) fn call(
    ctx: &mut Ctx<'_>,
    index: usize,
    command: &'static Command,
    argv: &[&[u8]],
) -> Reply {
    let handler = handlers::handler(index);
    // CLIENT NO-TOUCH (Redis 7.2): the client's commands leave the keys'
    // access times alone, except TOUCH, whose purpose they are.
    let _access = ctx
        .client
        .info
        .no_touch
        .load(Ordering::Relaxed)
        .then(|| access_clock::scope(command.name != "touch"));
    if command.flags & flags::WRITE == 0 {
        let reply = handler(ctx, argv);
        // A read that refreshed a cache held in the value (PFCOUNT) left
        // that change to propagate; inside a run, the run appends it.
        if !ctx.client.propagated.is_empty() && !propagate::inside_run(ctx) {
            propagate::append_pending(ctx);
        }
        return reply;
    }
    if propagate::inside_run(ctx) {
        // The enclosing run holds the shards: the feed cannot switch on
        // between this test and the change.
        let reply = handler(ctx, argv);
        if ctx.shared.store.feed().active() {
            record_change(ctx, command, argv, &reply);
        }
        return reply;
    }
    let feed = ctx.shared.store.feed();
    if let Some(reply) = feed.unrecorded(|| handler(ctx, argv)) {
        return reply;
    }
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let (one, many);
    let held: &dyn ShardLender = if multi::keys_known(command) {
        let keys: Vec<_> = command
            .key_positions(argv)
            .into_iter()
            .map(|i| store.key(argv[i]))
            .collect();
        let database = store.db(db);
        match keys.split_first() {
            // The usual write: every key in one shard.
            Some((first, rest))
                if rest
                    .iter()
                    .all(|k| database.shard_of(*k) == database.shard_of(*first)) =>
            {
                one = crate::store::OneShard::lock(store, db, database.shard_of(*first));
                &one
            }
            _ => {
                many = crate::store::HeldShards::declared(store, db, keys.iter().copied());
                &many
            }
        }
    } else {
        many = crate::store::HeldShards::everything(store);
        &many
    };
    let mut inner = Ctx {
        shared: ctx.shared,
        client: &mut *ctx.client,
        now_ms: ctx.now_ms,
        held: Some(held),
    };
    let reply = handler(&mut inner, argv);
    // The shards of a command's keys are all it touches (commands that
    // reach further take every shard above), so nothing can have gone to
    // a stand-in shard.
    debug_assert!(
        !held.conflicted(),
        "{} touched a shard it did not declare",
        command.name
    );
    // Appended while the shards are still held (they go with `one` or
    // `many` on return).
    record_change(&mut inner, command, argv, &reply);
    propagate::append_pending(&mut inner);
    reply
}

/// Keeps what a write command that succeeded propagates (see
/// `propagate.rs`).
fn record_change(ctx: &mut Ctx<'_>, command: &Command, argv: &[&[u8]], reply: &Reply) {
    if reply.is_error() {
        return;
    }
    let db = ctx.client.db;
    match propagate::propagated(command, argv, reply, ctx.now_ms) {
        propagate::Propagation::AsItCame => ctx.client.propagated.push(db, argv),
        propagate::Propagation::Instead(commands) => {
            for change in commands {
                ctx.client.propagated.push(db, &change);
            }
        }
    }
}

fn check_and_call(
    ctx: &mut Ctx<'_>,
    index: usize,
    command: &'static Command,
    argv: &[&[u8]],
) -> Reply {
    let _gate = slot_gate(ctx, command, argv);
    let rejected = rejection(ctx, index, command, argv);
    ctx.client.gate_slots = routing::GateSlots::Unknown;
    if let Some(reply) = rejected {
        if ctx.client.after.retries() {
            // Not refused: it runs again once its keys are moved.
            return Reply::Nothing;
        }
        ctx.client.batch.counts(index).rejected += 1;
        if command.name == "exec" {
            if is_cluster_redirection(&reply) {
                // Redis discards the transaction and redirects the client
                // (clusterRedirectClient), with no EXECABORT around it.
                ctx.client.transaction = None;
                multi::unwatch_all(ctx);
                return reply;
            }
            return multi::exec_abort(ctx, reply);
        }
        return reply;
    }
    ctx.client.info.last_command.store(index, Ordering::Relaxed);
    // Commands a script runs are counted but not timed: their time is the
    // script's, which EVAL's own entry measures, and two clock reads per
    // redis.call would be a fifth of a short script's cost.
    let errors_before = ctx.client.batch.errors.total;
    // CLIENT TRACKING NOLOOP tells this client's own writes apart; nothing
    // to mark while nobody tracks.
    let _writer = ctx
        .shared
        .tracking
        .active()
        .then(|| crate::tracking::WriterGuard::enter(ctx.client.info.id));
    // Only a client's own command may block; inside EXEC or a script the
    // blocking commands answer at once.
    ctx.client.may_block = ctx.held.is_none() && !ctx.client.in_script;
    let reply;
    let usec = if ctx.held.is_some() {
        reply = call(ctx, index, command, argv);
        0
    } else {
        let started = crate::latency::monotonic_ns();
        ctx.client.started_ns = started;
        reply = call(ctx, index, command, argv);
        ctx.client.started_ns = 0;
        let mut ns = crate::latency::monotonic_ns().saturating_sub(started);
        // DEBUG SLEEP's pause is taken after the handler, by its connection
        // alone; it is still the command's duration, as Redis measures it.
        if let After::Sleep(pause) = ctx.client.after {
            ns = ns.saturating_add(pause.as_nanos().min(u64::MAX as u128) as u64);
        }
        let stats = &ctx.shared.stats;
        if stats.latency_tracking.load(Ordering::Relaxed) {
            ctx.client.batch.durations.push((index, ns));
        }
        let threshold_ms = stats.latency_monitor_threshold_ms.load(Ordering::Relaxed);
        if threshold_ms != 0 && ns / 1_000_000 >= threshold_ms {
            monitor_latency(ctx, command, ns / 1_000_000);
        }
        ns / 1000
    };
    // A write to a key a client is blocked on: that client is served once
    // the command that wrote it has run whole (`blocking::serve_ready`).
    // The master's stream serves nobody: a replica's clients cannot have
    // blocked on its keys, which are read-only to them.
    if command.flags & flags::WRITE != 0
        && ctx.shared.blocked.any()
        && !ctx.client.master
        && !reply.is_error()
    {
        blocking::signal(ctx, command, argv);
    }
    if let After::Block { call_usec, .. } = &mut ctx.client.after {
        // Logged when it is answered (`log_unblocked`), as Redis logs a
        // blocked command on unblocking, not when it blocks.
        *call_usec = usec;
    } else if command.flags & flags::SKIP_SLOWLOG == 0 && ctx.shared.slowlog.wants(usec) {
        log_slow(ctx, argv, usec);
    }
    if ctx.shared.monitors.any() && command.flags & (flags::ADMIN | flags::SKIP_MONITOR) == 0 {
        feed_monitors(ctx, argv);
    }
    if ctx.client.tracking.is_some() {
        track_reads(ctx, command, argv);
    }
    // Failed, as Redis counts it: the reply is an error, or holds one (a
    // script's result may).
    let failed = reply.is_error() || ctx.client.batch.errors.total != errors_before;
    let counts = ctx.client.batch.counts(index);
    counts.calls += 1;
    counts.usec += usec;
    if failed {
        counts.failed += 1;
    }
    ctx.client.info.last_command.store(index, Ordering::Relaxed);
    reply
}
