//! Server commands: TIME LASTSAVE WAIT SHUTDOWN DEBUG SLOWLOG, and the HELP reply
//! every family shares. CONFIG, COMMAND and INFO have files of their own.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::args::is;
use super::error;
use super::Ctx;
use crate::config::ShutdownFlags;
use crate::pause::{PauseKind, PausePurpose};
use crate::resp::Reply;
use crate::state::Shared;

/// The reply of every `<COMMAND> HELP`: a header line, the lines, and the
/// trailing HELP entry, as Redis's addReplyHelp builds it.
pub fn help_reply(command: &str, lines: &[&str]) -> Reply {
    let mut out = vec![Reply::Status(
        format!("{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:").into(),
    )];
    out.extend(lines.iter().map(|l| Reply::Status(l.to_string().into())));
    out.push(Reply::status("HELP"));
    out.push(Reply::status("    Prints this help."));
    Reply::Array(out)
}

/// TIME: the server clock as [seconds, microseconds].
pub fn time(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let us = ctx.shared.clock.now_us();
    Reply::Array(vec![
        Reply::Bulk((us / 1_000_000).to_string().into_bytes()),
        Reply::Bulk((us % 1_000_000).to_string().into_bytes()),
    ])
}

/// SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]: starts the shutdown
/// ([`start_shutdown`]); the client waits while it waits for replicas, and
/// gets Redis's error if its save fails or SHUTDOWN ABORT cancels it.
pub fn shutdown(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let mut flags = ShutdownFlags::default();
    let mut abort = false;
    for arg in &argv[1..] {
        if is(arg, "abort") {
            abort = true;
        } else if is(arg, "save") {
            flags.save = true;
        } else if is(arg, "nosave") {
            flags.nosave = true;
        } else if is(arg, "now") {
            flags.now = true;
        } else if is(arg, "force") {
            flags.force = true;
        } else {
            return Reply::error(error::SYNTAX);
        }
    }
    if (abort && flags != ShutdownFlags::default()) || (flags.save && flags.nosave) {
        return Reply::error(error::SYNTAX);
    }
    if abort {
        return if abort_shutdown(ctx.shared) {
            Reply::Ok
        } else {
            Reply::error("ERR No shutdown in progress.")
        };
    }
    match start_shutdown(ctx.shared, flags) {
        ShutdownStart::Stopping => {
            ctx.client.then(super::After::Close);
            Reply::Nothing
        }
        ShutdownStart::Waiting => {
            ctx.client.then(super::After::WaitForShutdown);
            Reply::Nothing
        }
        ShutdownStart::Refused => Reply::error(SHUTDOWN_FAILED),
    }
}

/// Redis's reply when a shutdown did not happen.
pub const SHUTDOWN_FAILED: &str = "ERR Errors trying to SHUTDOWN. Check logs.";

/// How a shutdown request went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownStart {
    /// The server is stopping.
    Stopping,
    /// It waits, writes paused, for lagging replicas, and goes ahead by
    /// itself once they caught up or `shutdown-timeout` passed.
    Waiting,
    /// Its save failed: the server keeps running.
    Refused,
}

/// Starts a shutdown as Redis 7.0's prepareForShutdown: unless NOW (or
/// `shutdown-timeout 0`), a master whose replicas have not acknowledged
/// its whole stream pauses writes, asks them for their offsets, and
/// waits for them up to `shutdown-timeout` seconds before it saves and
/// stops, so that a graceful stop loses no write a replica could have
/// had. A shutdown already waiting is joined. Used by SHUTDOWN and by the
/// binary's signals.
pub fn start_shutdown(shared: &Shared, flags: ShutdownFlags) -> ShutdownStart {
    let mut waiting = shared.pending_shutdown.waiting.lock();
    if waiting.is_some() {
        return ShutdownStart::Waiting;
    }
    let timeout = shared.config.read().shutdown_timeout;
    // The waiting thread holds the server (set once it started).
    let server = shared.itself.get().and_then(std::sync::Weak::upgrade);
    if let Some(server) =
        server.filter(|_| !flags.now && timeout > 0 && !replicas_caught_up(shared))
    {
        *waiting = Some((flags, Instant::now() + Duration::from_secs(timeout)));
        drop(waiting);
        // Until the decision: a pause of its own, lifted by the decision.
        let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
        shared
            .pause
            .pause(PausePurpose::Shutdown, PauseKind::Write, far);
        shared.store.feed().request_acks();
        tracing::info!("Waiting for replicas before shutting down.");
        let spawned = std::thread::Builder::new()
            .name("shutdown-wait".into())
            .spawn(move || shut_down_once_replicas_caught_up(&server));
        if let Err(e) = spawned {
            tracing::warn!("cannot wait for the replicas: {e}");
            shared.pending_shutdown.waiting.lock().take();
            shared.pause.unpause(PausePurpose::Shutdown);
        } else {
            return ShutdownStart::Waiting;
        }
    } else {
        drop(waiting);
    }
    finish_shutdown(shared, flags)
}

/// The save, then the stop; a failed save lifts the shutdown's pause.
fn finish_shutdown(shared: &Shared, flags: ShutdownFlags) -> ShutdownStart {
    let outcome = prepare_shutdown(shared, flags);
    shared.pause.unpause(PausePurpose::Shutdown);
    match outcome {
        Ok(()) => {
            shared.begin_shutdown();
            ShutdownStart::Stopping
        }
        Err(_) => ShutdownStart::Refused,
    }
}

/// SHUTDOWN ABORT: cancels a shutdown waiting for its replicas (writes
/// resume; its SHUTDOWN callers get the error). False when none waits.
pub fn abort_shutdown(shared: &Shared) -> bool {
    let cancelled = shared.pending_shutdown.waiting.lock().take().is_some();
    if cancelled {
        shared.pause.unpause(PausePurpose::Shutdown);
        tracing::warn!("Shutdown manually aborted.");
        shared.pending_shutdown.decided.notify_waiters();
    }
    cancelled
}

/// True when every replica has acknowledged this server's whole stream
/// (Redis's isReadyToShutdown).
fn replicas_caught_up(shared: &Shared) -> bool {
    let offset = shared.store.feed().replication_offset();
    super::replication::replicas(shared)
        .iter()
        .all(|r| r.replica.ack_offset.load(Ordering::Relaxed) == offset)
}

/// The waiting shutdown's own thread (Redis does this from its cron):
/// once the replicas caught up or the deadline passed, it saves and
/// stops the server, or, if the save fails, lets it run on. A SHUTDOWN
/// ABORT meanwhile ends it with nothing done.
fn shut_down_once_replicas_caught_up(shared: &Shared) {
    let mut asked = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(10));
        let Some((_, deadline)) = *shared.pending_shutdown.waiting.lock() else {
            return;
        };
        let timed_out = Instant::now() >= deadline;
        if !timed_out && !replicas_caught_up(shared) {
            if asked.elapsed() >= Duration::from_secs(1) {
                shared.store.feed().request_acks();
                asked = Instant::now();
            }
            continue;
        }
        // Taken before the save: an ABORT from now on finds nothing to cancel.
        let Some((flags, _)) = shared.pending_shutdown.waiting.lock().take() else {
            return;
        };
        if timed_out {
            let offset = shared.store.feed().replication_offset();
            for replica in super::replication::replicas(shared) {
                let acked = replica.replica.ack_offset.load(Ordering::Relaxed);
                if acked != offset {
                    tracing::warn!(
                        "Lagging replica {} reported offset {acked} behind master, lag={}",
                        replica.addr,
                        offset.saturating_sub(acked)
                    );
                }
            }
        }
        if finish_shutdown(shared, flags) == ShutdownStart::Refused {
            tracing::warn!(
                "Errors trying to shut down the server. Check the logs for more information."
            );
        }
        shared.pending_shutdown.decided.notify_waiters();
        return;
    }
}

/// What a shutdown does before the server stops, as Redis's
/// prepareForShutdown: the snapshot is saved when SAVE is asked, or when
/// save points are configured and NOSAVE is not (so that a server run
/// with Redis's defaults keeps its dataset across a SHUTDOWN or a
/// `systemctl stop`); a save that fails stops the shutdown unless FORCE.
/// The append-only file is flushed and fsynced by the server's own
/// shutdown. Used by SHUTDOWN and by the binary's SIGTERM and SIGINT.
/// The error is the save's.
pub fn prepare_shutdown(
    shared: &crate::state::Shared,
    flags: ShutdownFlags,
) -> std::io::Result<()> {
    // A file still loading is not the dataset: saving it would overwrite
    // the file with part of itself (Redis forces NOSAVE while loading too).
    if shared
        .persistence
        .loading
        .load(std::sync::atomic::Ordering::SeqCst)
    {
        return Ok(());
    }
    let save_points = !shared.config.read().save_points.is_empty();
    let save = flags.save || (save_points && !flags.nosave);
    if !save {
        return Ok(());
    }
    match super::persistence::save_now(shared) {
        Err(e) if !flags.force => {
            tracing::warn!("Error trying to save the DB, can't exit.");
            Err(e)
        }
        Err(_) => {
            tracing::warn!("Error trying to save the DB. Exit anyway.");
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

/// SLOWLOG GET [count]
pub fn slowlog_get(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let count = match argv.len() {
        2 => 10,
        3 => match crate::cmd::args::parse_i64(argv[2]) {
            Some(-1) => usize::MAX,
            Some(n) if n >= 0 => n as usize,
            _ => return Reply::error("ERR count should be greater than or equal to -1"),
        },
        _ => return Reply::error_bytes(error::subcommand_syntax("SLOWLOG", argv[1])),
    };
    ctx.shared.slowlog.newest(count)
}

/// SLOWLOG LEN
pub fn slowlog_len(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    Reply::Int(ctx.shared.slowlog.len() as i64)
}

/// SLOWLOG RESET
pub fn slowlog_reset(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    ctx.shared.slowlog.reset();
    Reply::Ok
}

/// SLOWLOG HELP
pub fn slowlog_help(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    help_reply(
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    )
}

/// MONITOR: from now on, every command the server runs is written to this
/// connection (see `crate::monitor`). A second MONITOR is ignored, with no
/// reply, as in Redis.
pub fn monitor(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    if ctx.held.is_some() {
        // Inside EXEC: a transaction's client expects one reply per command.
        return Reply::error("ERR MONITOR isn't allowed for DENY BLOCKING client");
    }
    if ctx.client.monitor.is_some() {
        return Reply::Nothing;
    }
    let mode = ctx.shared.monitors.add(ctx.client.info.clone());
    ctx.client.monitor = Some(mode);
    ctx.client
        .info
        .monitoring
        .store(true, std::sync::atomic::Ordering::Relaxed);
    Reply::Ok
}

/// Ends MONITOR mode (RESET, or the connection closing).
pub fn stop_monitor(ctx: &mut Ctx<'_>) {
    if let Some(mode) = ctx.client.monitor.take() {
        ctx.shared.monitors.remove(&mode.sink);
        ctx.client
            .info
            .monitoring
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }
}
