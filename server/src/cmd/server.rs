//! Server commands: TIME LASTSAVE WAIT SHUTDOWN DEBUG SLOWLOG, and the HELP reply
//! every family shares. CONFIG, COMMAND and INFO have files of their own.

use std::time::Duration;

use super::args::{is, parse_f64};
use super::error;
use super::Ctx;
use crate::config::ShutdownFlags;
use crate::resp::Reply;

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

/// SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]: saves the snapshot as
/// [`prepare_shutdown`] decides (a failed save refuses the shutdown unless
/// FORCE); then stop accepting, finish the replies owed, exit.
pub fn shutdown(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let mut flags = ShutdownFlags::default();
    for arg in &argv[1..] {
        if is(arg, "abort") {
            return Reply::error("ERR No shutdown in progress.");
        }
        if is(arg, "save") {
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
    if flags.save && flags.nosave {
        return Reply::error(error::SYNTAX);
    }
    if prepare_shutdown(ctx.shared, flags).is_err() {
        return Reply::error("ERR Errors trying to SHUTDOWN. Check logs.");
    }
    ctx.client.then(super::After::Close);
    ctx.shared.begin_shutdown();
    Reply::Nothing
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

/// DEBUG SLEEP seconds | DEBUG PANIC | DEBUG HELP
pub fn debug(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if is(argv[1], "sleep") && argv.len() == 3 {
        let Some(seconds) = parse_f64(argv[2]).filter(|s| *s >= 0.0) else {
            return Reply::error(error::NOT_FLOAT);
        };
        // Redis converts to `long long` microseconds: a value too large for
        // it (inf, 1e300) comes out negative on x86 and nanosleep returns at
        // once. Sleep the same, without Duration's panic on overflow.
        let micros = seconds * 1e6;
        if micros < i64::MAX as f64 {
            ctx.client
                .then(super::After::Sleep(Duration::from_micros(micros as u64)));
        }
        return Reply::Ok;
    }
    if is(argv[1], "panic") && argv.len() == 2 {
        // Redis crashes the whole server here. tally's connection boundary
        // contains a panic to the one client (it gets an error and is
        // closed); this is how that boundary is tested end to end.
        panic!("DEBUG PANIC");
    }
    if is(argv[1], "help") {
        return help_reply(
            "DEBUG",
            &[
                "PANIC",
                "    Panic in this command; tally contains it to this connection.",
                "SLEEP <seconds>",
                "    Stop the server for <seconds>. Decimals allowed.",
            ],
        );
    }
    Reply::error_bytes(error::unknown_subcommand(argv[0], argv[1]))
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
