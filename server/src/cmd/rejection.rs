//! Why a command may not run now: the checks Redis's processCommand makes
//! before it calls a command (arity, authentication, ACL, cluster routing,
//! a busy script, maxmemory, a failed save or append, too few replicas, a
//! replica's read-only and stale states, loading, RESP2 subscribers), and
//! CLIENT PAUSE's hold, which comes after them.

use std::sync::atomic::Ordering;

use super::routing::routed;
use super::{acl, arity_ok, error, multi, pubsub, replication, After, Ctx};
use crate::catalog::{flags, Command};
use crate::resp::Reply;

/// CLIENT PAUSE: true (and the client told to wait) when the command must
/// wait for the pause to end. Checked for clients' own commands only, not
/// for those a script or EXEC runs. Redis checks after arity and
/// authentication; a command those refuse is refused at once here too.
pub(super) fn held_by_pause(
    ctx: &mut Ctx<'_>,
    index: usize,
    command: &'static Command,
    argv: &[&[u8]],
) -> bool {
    if ctx.held.is_some() || ctx.client.in_script || ctx.client.master {
        return false;
    }
    let may_write = || {
        command.flags & (flags::WRITE | flags::MAY_REPLICATE) != 0
            || (command.name == "exec" && multi::may_write(ctx.client))
    };
    if !ctx.shared.pause.holds(may_write) || rejection(ctx, index, command, argv).is_some() {
        return false;
    }
    ctx.client.then(After::WaitForPause);
    true
}

/// Why a command is refused before it runs (arity, authentication, a busy
/// script, maxmemory), if it is.
/// `index`: the command's registry index.
pub(super) fn rejection(
    ctx: &mut Ctx<'_>,
    index: usize,
    command: &'static Command,
    argv: &[&[u8]],
) -> Option<Reply> {
    if !arity_ok(command.arity, argv.len()) {
        Some(Reply::error(error::wrong_arity(command.name)))
    } else if ctx.client.master {
        // The master's commands are obeyed (see `ClientState::master`).
        None
    } else if !ctx.client.authenticated && command.flags & flags::NO_AUTH == 0 {
        Some(Reply::error(error::NOAUTH))
    } else if let Err(denied) = permitted(ctx, index, command, argv) {
        Some(Reply::error(denied))
    } else if let Some(refusal) = routed(ctx, command, argv) {
        Some(refusal)
    } else if ctx.held.is_none()
        && command.flags & flags::ALLOW_BUSY == 0
        && ctx.shared.scripts.busy()
    {
        Some(Reply::error(ctx.shared.scripts.busy_error()))
    } else if ctx.client.monitor.is_some()
        && command.flags & (flags::WRITE | flags::READONLY | flags::MAY_REPLICATE) != 0
    {
        // A monitor is a replica to Redis, and replicas may not touch keys.
        Some(Reply::error("ERR Replica can't interact with the keyspace"))
    } else if command.flags & flags::DENYOOM != 0
        && !ctx.client.in_script
        && over_maxmemory(ctx, argv)
    {
        // A script's commands are checked by the bridge, by Redis's rules
        // for scripts (`scripting::bridge`).
        Some(Reply::error(error::OOM))
    } else if (command.flags & flags::WRITE != 0 || command.name == "ping")
        && ctx
            .shared
            .persistence
            .writes_refused
            .load(Ordering::Relaxed)
    {
        // Redis refuses PING too, so a health check notices.
        Some(Reply::error(error::MISCONF))
    } else if (command.flags & flags::WRITE != 0 || command.name == "ping")
        && ctx.shared.aof.write_failed.load(Ordering::Relaxed)
    {
        ctx.shared
            .aof
            .write_refusal()
            .map(|text| Reply::error_bytes(text.into_bytes()))
    } else if command.flags & flags::WRITE != 0
        && !replication::enough_good_replicas(ctx.shared, ctx.now_ms)
    {
        Some(Reply::error(error::NOREPLICAS))
    } else if (command.flags & flags::WRITE != 0
        || (command.name == "exec" && multi::may_write(ctx.client)))
        && ctx.shared.master_link.refuses_writes()
    {
        Some(Reply::error(error::READONLY_REPLICA))
    } else if command.flags & flags::STALE == 0 && ctx.shared.master_link.refuses_stale_reads() {
        Some(Reply::error(error::MASTERDOWN))
    } else if command.flags & flags::LOADING == 0
        && ctx.shared.persistence.loading.load(Ordering::Relaxed)
    {
        Some(Reply::error(error::LOADING))
    } else {
        pubsub::subscribed_refusal(ctx, command.name)
    }
}

/// The ACL check of a client's command (a script's are checked by the
/// script bridge, with the script's wording): the client's user is read
/// again first if any user changed since; a refusal is logged (ACL LOG)
/// and returned as Redis's NOPERM text.
fn permitted(
    ctx: &Ctx<'_>,
    index: usize,
    command: &'static Command,
    argv: &[&[u8]],
) -> Result<(), String> {
    if ctx.client.in_script {
        return Ok(());
    }
    let user = &ctx.client.user;
    if user.unrestricted() {
        return Ok(());
    }
    crate::acl::check_indexed(user, command, index, argv).map_err(|denied| {
        let context = if ctx.held.is_some() || ctx.client.transaction.is_some() {
            crate::acl::Context::Multi
        } else {
            crate::acl::Context::TopLevel
        };
        acl::log_denial(ctx, user, command, argv, denied, context);
        if ctx.held.is_some() {
            // Run by EXEC: the rules changed since it was queued.
            denied.exec_error()
        } else {
            denied.error(command)
        }
    })
}

/// maxmemory's test for a command that may grow memory, counting its own
/// arguments as Redis does (they are in its used memory while it runs).
fn over_maxmemory(ctx: &Ctx<'_>, argv: &[&[u8]]) -> bool {
    let shared = ctx.shared;
    // No limit: do not even add up the arguments.
    if shared.maxmemory.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        return false;
    }
    shared.over_maxmemory_with(argv.iter().map(|a| a.len()).sum())
}
