//! CONFIG GET / SET / RESETSTAT / HELP: the live configuration as Redis
//! shows and changes it.

use super::args::glob_match;
use super::error;
use super::server::help_reply;
use super::Ctx;
use crate::config::directives::{self, Change, DIRECTIVES};
use crate::config::Config;
use crate::resp::Reply;

/// Every CONFIG parameter with its current value, in the table's order,
/// each alias listed beside its directive as Redis 7.0 lists them.
/// A hidden one (Redis's test knobs) comes with `true`.
fn config_parameters(config: &Config) -> Vec<(&'static str, String, bool)> {
    DIRECTIVES
        .iter()
        .filter_map(|directive| Some((directive, directive.get(config)?)))
        .flat_map(|(directive, value)| {
            directive
                .names()
                .map(move |name| (name, value.clone(), directive.hidden))
        })
        .collect()
}

/// CONFIG GET parameter [parameter ...], as Redis 7.0 answers it: a name
/// without glob characters is looked up as written (any case, hidden
/// parameters too) and answered under the spelling sent; a pattern matches
/// the parameters that are not hidden (Redis's test knobs). Each parameter
/// once, first come.
pub fn config_get(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let params = config_parameters(&ctx.shared.config.read());
    let is_glob = |pattern: &[u8]| pattern.iter().any(|b| matches!(b, b'[' | b'*' | b'?'));
    let mut shown: Vec<String> = Vec::new();
    let mut pairs = Vec::new();
    for pattern in &argv[2..] {
        if !is_glob(pattern) {
            let found = params
                .iter()
                .find(|(name, _, _)| name.as_bytes().eq_ignore_ascii_case(pattern));
            if let Some((name, value, _)) = found {
                if !shown.iter().any(|s| s == name) {
                    shown.push(name.to_string());
                    pairs.push((
                        Reply::bulk(pattern),
                        Reply::Bulk(value.clone().into_bytes()),
                    ));
                }
            }
            continue;
        }
        for (name, value, hidden) in &params {
            if *hidden || shown.iter().any(|s| s == name) {
                continue;
            }
            if glob_match(pattern, name.as_bytes(), true) {
                shown.push(name.to_string());
                pairs.push((
                    Reply::bulk(name.as_bytes()),
                    Reply::Bulk(value.clone().into_bytes()),
                ));
            }
        }
    }
    Reply::Map(pairs)
}

/// CONFIG SET parameter value [parameter value ...], all or nothing.
pub fn config_set(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if argv.len() % 2 != 0 {
        return Reply::error(error::wrong_arity("config|set"));
    }
    let mut next = ctx.shared.config.read().clone();
    // As Redis: every name is checked (unknown, immutable, given twice)
    // before any value is read.
    let mut names: Vec<String> = Vec::new();
    for pair in argv[2..].chunks(2) {
        let name = String::from_utf8_lossy(pair[0]).to_ascii_lowercase();
        let failed = |why: &str| {
            Reply::error(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
            ))
        };
        // A directive CONFIG does not know (a file's `user` lines) is
        // unknown here too.
        let Some(directive) = directives::lookup(&name).filter(|d| d.is_parameter()) else {
            // The name as sent, bytes and all, as Redis echoes it.
            let mut message =
                b"ERR Unknown option or number of arguments for CONFIG SET - '".to_vec();
            message.extend_from_slice(&error::sanitize(pair[0], usize::MAX));
            message.push(b'\'');
            return Reply::error_bytes(message);
        };
        if directive.change == Change::AtStart {
            return failed("can't set immutable config");
        }
        if directive.change == Change::AtStartOwn {
            let value = String::from_utf8_lossy(pair[1]).into_owned();
            let mut probe = next.clone();
            let unchanged = probe.apply(&name, &[value]).is_ok()
                && directive.get(&probe) == directive.get(&next);
            if !unchanged {
                return failed("can't set immutable config");
            }
        }
        if directive.protected
            && !next
                .enable_protected_configs
                .allows(ctx.client.info.addr.is_local())
        {
            return failed("can't set protected config");
        }
        if names.contains(&name) {
            return failed("duplicate parameter");
        }
        names.push(name);
    }
    for (pair, name) in argv[2..].chunks(2).zip(&names) {
        let value = String::from_utf8_lossy(pair[1]).into_owned();
        if let Err(why) = next.apply(name, &[value]) {
            return Reply::error(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
            ));
        }
    }
    // A `tls-*` option rebuilds TLS from the files (the same path again
    // reloads rotated certificates); a failure changes nothing, as Redis.
    if names.iter().any(|n| n.starts_with("tls-")) {
        if let Err(why) = ctx.shared.tls.install(&next.tls) {
            tracing::warn!("CONFIG SET of TLS options refused: {why}");
            return Reply::error(format!(
                "ERR CONFIG SET failed (possibly related to argument '{}') - Unable to update \
                 TLS configuration. Check server logs.",
                names
                    .iter()
                    .find(|n| n.starts_with("tls-"))
                    .map_or("", |n| n.as_str())
            ));
        }
    }
    if let Err(reply) = listen_as_configured(ctx.shared, &next) {
        return reply;
    }
    let appendonly = next.appendonly;
    let was_on = ctx.shared.config.read().appendonly;
    ctx.shared.install_config(next);
    if appendonly != was_on {
        if let Some(reply) = switch_appendonly(ctx, appendonly) {
            return reply;
        }
    }
    Reply::Ok
}

/// CONFIG SET bind or port: the client ports are listened on as `next`
/// says, or nothing changes and the error is Redis's (its apply step).
/// A port of 0 given at start picked a free port, which stays the port.
fn listen_as_configured(shared: &crate::state::Shared, next: &Config) -> Result<(), Reply> {
    let current = shared.config.read();
    let bind_changed = current.bind != next.bind;
    let port_changed = current.port != next.port;
    if !bind_changed && !port_changed {
        return Ok(());
    }
    let picked = shared.local_addr.lock().map_or(0, |a| a.port());
    let port = match next.port {
        0 if current.port == 0 && current.tls.port == 0 => picked,
        port => port,
    };
    let tls_port = current.tls.port;
    drop(current);
    match crate::net::listener::relisten(shared, &next.bind, port, tls_port) {
        Ok(first) => {
            if let Some(first) = first {
                *shared.local_addr.lock() = Some(first);
            }
            Ok(())
        }
        Err(_) if bind_changed => Err(Reply::error(
            "ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to \
             specified addresses.",
        )),
        Err(_) => Err(Reply::error(
            "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on \
             this port. Check server logs.",
        )),
    }
}

/// CONFIG SET appendonly: turning the log on starts a rewrite that gives
/// it a base (the feed starts at that snapshot's moment); turning it off
/// writes what the feed holds and closes the file.
fn switch_appendonly(ctx: &mut Ctx<'_>, on: bool) -> Option<Reply> {
    use crate::persistence::aof;
    if !on {
        aof::stop(ctx.shared);
        return None;
    }
    let shared = ctx.shared.itself.get().and_then(std::sync::Weak::upgrade)?;
    if aof::bgrewriteaof(&shared) == aof::RewriteStart::AlreadyRunning {
        // A rewrite of a log being turned off still runs: the new one
        // starts when it ends.
        shared
            .aof
            .rewrite_scheduled
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
    None
}

/// CONFIG RESETSTAT
pub fn config_resetstat(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    // What this batch counted so far goes too, as on Redis, whose counters
    // are updated command by command.
    ctx.client.batch.flush(ctx.shared, ctx.client.info.id);
    ctx.shared.stats.reset();
    let store = &ctx.shared.store;
    for db in 0..store.databases() {
        for index in 0..store.db(db).shard_count() {
            ctx.lock_shard(db, index).reset_lookup_counts();
        }
    }
    Reply::Ok
}

/// CONFIG REWRITE: the config file the server started with, brought up
/// to date (`config::rewrite`).
pub fn config_rewrite(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let config = ctx.shared.config.read().clone();
    let Some(path) = &config.config_file else {
        return Reply::error("ERR The server is running without a config file");
    };
    match crate::config::rewrite::rewrite(path, &config) {
        Ok(()) => Reply::Ok,
        Err(e) => Reply::error(format!("ERR Rewriting config file: {e}")),
    }
}

/// CONFIG HELP
pub fn config_help(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    help_reply(
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    )
}
