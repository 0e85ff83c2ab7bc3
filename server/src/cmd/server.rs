//! Server commands: INFO CONFIG COMMAND TIME LASTSAVE WAIT SHUTDOWN DEBUG.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::args::{glob_match, int_arg, is, parse_f64};
use super::connection::REDIS_VERSION;
use super::error;
use super::table::{flags, registry, Command};
use super::Ctx;
use crate::config::{Config, MAXMEMORY_POLICY};
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

/// LASTSAVE: tally never saves, so this is the start time, as for a Redis
/// that has not saved since it started.
pub fn lastsave(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    Reply::Int(ctx.shared.started_unix as i64)
}

/// WAIT numreplicas timeout: there are no replicas, so 0 at once.
pub fn wait(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if let Err(reply) = int_arg(argv[1]) {
        return reply;
    }
    match int_arg(argv[2]) {
        Ok(t) if t < 0 => Reply::error(error::TIMEOUT_NEGATIVE),
        Ok(_) => Reply::Int(0),
        Err(reply) => reply,
    }
}

/// SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]: stop accepting, finish the
/// replies owed, exit. Nothing is saved because nothing is ever persisted.
pub fn shutdown(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    for arg in &argv[1..] {
        if is(arg, "abort") {
            return Reply::error("ERR No shutdown in progress.");
        }
        if !["nosave", "save", "now", "force"]
            .iter()
            .any(|k| is(arg, k))
        {
            return Reply::error(error::SYNTAX);
        }
    }
    ctx.client.close_after_reply = true;
    ctx.shared.begin_shutdown();
    Reply::Nothing
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
            ctx.client.sleep = Some(Duration::from_micros(micros as u64));
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

/// Every CONFIG parameter tally knows, with its current value.
fn config_parameters(config: &Config) -> Vec<(&'static str, String)> {
    vec![
        ("bind", config.bind.join(" ")),
        ("port", config.port.to_string()),
        ("maxmemory", config.maxmemory.to_string()),
        ("maxmemory-policy", MAXMEMORY_POLICY.to_string()),
        (
            "requirepass",
            config.requirepass.clone().unwrap_or_default(),
        ),
        ("databases", config.databases.to_string()),
        ("maxclients", config.maxclients.to_string()),
        ("timeout", config.timeout_secs.to_string()),
        ("proto-max-bulk-len", config.proto_max_bulk_len.to_string()),
        (
            "client-query-buffer-limit",
            config.client_query_buffer_limit.to_string(),
        ),
        ("loglevel", config.loglevel.clone()),
        ("hz", config.hz.to_string()),
        ("shards", config.shards.to_string()),
        ("io-threads", config.io_threads.max(1).to_string()),
        (
            "busy-reply-threshold",
            config.busy_reply_threshold_ms.to_string(),
        ),
        ("lua-time-limit", config.busy_reply_threshold_ms.to_string()),
        ("lua-memory-limit", config.lua_memory_limit.to_string()),
        (
            "client-output-buffer-limit",
            format!(
                "normal 0 0 0 slave 268435456 67108864 60 pubsub {} {} {}",
                config.pubsub_output_limit.hard,
                config.pubsub_output_limit.soft,
                config.pubsub_output_limit.soft_seconds
            ),
        ),
        (
            "lua-native-scripts",
            if config.lua_native_scripts {
                "yes"
            } else {
                "no"
            }
            .to_string(),
        ),
        ("save", String::new()),
        ("appendonly", "no".to_string()),
        ("daemonize", "no".to_string()),
    ]
}

/// Parameters that only take effect at start.
const IMMUTABLE: &[&str] = &[
    "bind",
    "port",
    "databases",
    "shards",
    "io-threads",
    "daemonize",
];

/// CONFIG GET parameter [parameter ...]
pub fn config_get(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let params = config_parameters(&ctx.shared.config.read());
    let pairs = params
        .into_iter()
        .filter(|(name, _)| {
            argv[2..]
                .iter()
                .any(|pattern| glob_match(pattern, name.as_bytes(), true))
        })
        .map(|(name, value)| {
            (
                Reply::bulk(name.as_bytes()),
                Reply::Bulk(value.into_bytes()),
            )
        })
        .collect();
    Reply::Map(pairs)
}

/// CONFIG SET parameter value [parameter value ...], all or nothing.
pub fn config_set(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if argv.len() % 2 != 0 {
        return Reply::error(error::wrong_arity("config|set"));
    }
    let mut next = ctx.shared.config.read().clone();
    let known: Vec<&str> = config_parameters(&next).iter().map(|(n, _)| *n).collect();
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
        if !known.contains(&name.as_str()) {
            // The name as sent, bytes and all, as Redis echoes it.
            let mut message =
                b"ERR Unknown option or number of arguments for CONFIG SET - '".to_vec();
            message.extend_from_slice(&error::sanitize(pair[0], usize::MAX));
            message.push(b'\'');
            return Reply::error_bytes(message);
        }
        if IMMUTABLE.contains(&name.as_str()) {
            return failed("can't set immutable config");
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
    ctx.shared.install_config(next);
    Reply::Ok
}

/// CONFIG RESETSTAT
pub fn config_resetstat(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    ctx.shared.stats.reset();
    Reply::Ok
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
        ],
    )
}

fn flag_names(command: &Command) -> Vec<Reply> {
    flags::NAMES
        .iter()
        .filter(|(bit, _)| command.flags & bit != 0)
        .map(|(_, name)| Reply::status(name))
        .collect()
}

fn acl_categories(command: &Command) -> Vec<Reply> {
    let mut categories = vec![Reply::Status(format!("@{}", command.group).into())];
    for (bit, name) in [
        (flags::WRITE, "@write"),
        (flags::READONLY, "@read"),
        (flags::ADMIN, "@admin"),
        (flags::ADMIN, "@dangerous"),
    ] {
        if command.flags & bit != 0 {
            categories.push(Reply::status(name));
        }
    }
    categories.push(Reply::status(if command.flags & flags::FAST != 0 {
        "@fast"
    } else {
        "@slow"
    }));
    categories
}

/// One COMMAND INFO entry in Redis 7's ten-field form.
fn command_info(command: &'static Command) -> Reply {
    Reply::Array(vec![
        Reply::bulk(command.name.as_bytes()),
        Reply::Int(command.arity as i64),
        Reply::Set(flag_names(command)),
        Reply::Int(command.keys.first as i64),
        Reply::Int(command.keys.last as i64),
        Reply::Int(command.keys.step as i64),
        Reply::Set(acl_categories(command)),
        Reply::Set(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(command.subcommands.iter().map(command_info).collect()),
    ])
}

/// COMMAND (every command's info)
pub fn command(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    Reply::Array(registry().top_level().map(command_info).collect())
}

/// COMMAND COUNT
pub fn command_count(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    Reply::Int(registry().top_level().count() as i64)
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]
pub fn command_list(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let names = registry().top_level().map(|c| c.name);
    let filtered: Vec<&str> = match argv.len() {
        2 => names.collect(),
        5 if is(argv[2], "filterby") => {
            let value = argv[4];
            if is(argv[3], "pattern") {
                names
                    .filter(|n| glob_match(value, n.as_bytes(), true))
                    .collect()
            } else if is(argv[3], "aclcat") {
                registry()
                    .top_level()
                    .filter(|c| {
                        acl_categories(c).iter().any(|cat| match cat {
                            Reply::Status(s) => s[1..].as_bytes().eq_ignore_ascii_case(value),
                            _ => false,
                        })
                    })
                    .map(|c| c.name)
                    .collect()
            } else if is(argv[3], "module") {
                Vec::new()
            } else {
                return Reply::error(error::SYNTAX);
            }
        }
        _ => return Reply::error(error::SYNTAX),
    };
    Reply::Array(
        filtered
            .into_iter()
            .map(|n| Reply::bulk(n.as_bytes()))
            .collect(),
    )
}

/// COMMAND INFO [command-name ...]
pub fn command_info_cmd(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if argv.len() == 2 {
        return Reply::Array(registry().top_level().map(command_info).collect());
    }
    Reply::Array(
        argv[2..]
            .iter()
            .map(|name| match registry().lookup_full(name) {
                Some(command) => command_info(command),
                None => Reply::NilArray,
            })
            .collect(),
    )
}

/// COMMAND DOCS [command-name ...]
pub fn command_docs(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let docs = |command: &'static Command| {
        (
            Reply::bulk(command.name.as_bytes()),
            Reply::Map(vec![
                (
                    Reply::bulk(b"summary"),
                    Reply::bulk(command.summary.as_bytes()),
                ),
                (Reply::bulk(b"since"), Reply::bulk(command.since.as_bytes())),
                (Reply::bulk(b"group"), Reply::bulk(command.group.as_bytes())),
            ]),
        )
    };
    let pairs = if argv.len() == 2 {
        registry().top_level().map(docs).collect()
    } else {
        argv[2..]
            .iter()
            .filter_map(|name| registry().lookup_full(name))
            .map(docs)
            .collect()
    };
    Reply::Map(pairs)
}

/// COMMAND GETKEYS command [arg ...]
pub fn command_getkeys(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let target = &argv[2..];
    let command = match super::resolve(target) {
        Ok(command) => command,
        Err(_) => return Reply::error("ERR Invalid command specified"),
    };
    // Redis's order: keys at all, then arity, then the keys of this call.
    let counted = counted_keys(command.name);
    if command.keys.first <= 0 && counted.is_none() {
        return Reply::error("ERR The command has no key arguments");
    }
    if !super::arity_ok(command.arity, target.len()) {
        return Reply::error("ERR Invalid number of arguments specified for command");
    }
    let positions = match counted {
        Some((count_at, first, mandatory)) => {
            // genericGetKeys: atoi of the count, no keys when out of range.
            let count = c_atoi(target.get(count_at).copied().unwrap_or_default());
            let available = target.len().saturating_sub(first) as i64;
            if count < 1 || count > available {
                return if mandatory {
                    Reply::error("ERR Invalid arguments specified for command")
                } else {
                    Reply::Array(Vec::new())
                };
            }
            (first..first + count as usize).collect()
        }
        None => command.keys.positions(target.len()),
    };
    Reply::Array(
        positions
            .into_iter()
            .map(|i| Reply::bulk(target[i]))
            .collect(),
    )
}

/// Commands whose keys are counted by an argument (Redis's movable keys):
/// where the count is, where the keys start, and whether a call without
/// keys is an error (commands not flagged NO_MANDATORY_KEYS).
fn counted_keys(name: &str) -> Option<(usize, usize, bool)> {
    match name {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" => Some((2, 3, false)),
        "sintercard" => Some((1, 2, true)),
        _ => None,
    }
}

/// C's `atoi`: leading blanks, a sign, digits; 0 when there are none.
fn c_atoi(bytes: &[u8]) -> i64 {
    let text = bytes.trim_ascii_start();
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let mut value: i64 = 0;
    for &d in digits.iter().take_while(|d| d.is_ascii_digit()) {
        value = value.saturating_mul(10).saturating_add((d - b'0') as i64);
    }
    let value = if negative { -value } else { value };
    // atoi returns an int.
    value.clamp(i32::MIN as i64, i32::MAX as i64)
}

/// COMMAND HELP
pub fn command_help(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    help_reply(
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
        ],
    )
}

fn human_bytes(n: u64) -> String {
    let n = n as f64;
    if n < 1024.0 {
        format!("{n}B")
    } else if n < 1024.0 * 1024.0 {
        format!("{:.2}K", n / 1024.0)
    } else if n < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}M", n / (1024.0 * 1024.0))
    } else {
        format!("{:.2}G", n / (1024.0 * 1024.0 * 1024.0))
    }
}

/// Resident set size of this process, from /proc (0 where unavailable).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

/// User and system CPU seconds of this process, from /proc.
fn cpu_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) / 100.0, ticks(12) / 100.0)
}

/// INFO sections in the order Redis prints them.
const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "limiter_scripts",
    "commandstats",
    "keyspace",
];

/// Sections that only `INFO all`, `INFO everything` or their name select.
const NOT_DEFAULT: &[&str] = &["commandstats"];

/// INFO [section [section ...]]
pub fn info(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    // Count this batch's work before reporting it.
    ctx.client.batch.flush(ctx.shared);
    let wanted: Vec<String> = argv[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let everything = wanted.iter().any(|w| w == "all" || w == "everything");
    let default = wanted.is_empty() || wanted.iter().any(|w| w == "default");
    let selected = |section: &str| {
        everything
            || (default && !NOT_DEFAULT.contains(&section))
            || wanted.iter().any(|w| w == section)
    };
    let mut text = String::new();
    for section in SECTIONS.iter().copied().filter(|s| selected(s)) {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        write_section(ctx, section, &mut text);
    }
    Reply::Verbatim(text.into_bytes())
}

fn write_section(ctx: &Ctx<'_>, section: &str, out: &mut String) {
    let shared = ctx.shared;
    let config = shared.config.read();
    let stats = &shared.stats;
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let mut lines: Vec<String> = Vec::new();
    match section {
        "server" => {
            let uptime = shared.started.elapsed().as_secs();
            let addr = shared.local_addr.lock().map(|a| a.port()).unwrap_or(0);
            lines.extend([
                format!("redis_version:{REDIS_VERSION}"),
                format!("tally_version:{}", env!("CARGO_PKG_VERSION")),
                "redis_git_sha1:00000000".to_string(),
                "redis_git_dirty:0".to_string(),
                "redis_mode:standalone".to_string(),
                format!("os:{} {}", std::env::consts::OS, std::env::consts::ARCH),
                "arch_bits:64".to_string(),
                "multiplexing_api:epoll".to_string(),
                format!("process_id:{}", std::process::id()),
                format!("run_id:{}", shared.run_id),
                format!("tcp_port:{addr}"),
                format!("server_time_usec:{}", shared.clock.now_us()),
                format!("uptime_in_seconds:{uptime}"),
                format!("uptime_in_days:{}", uptime / 86400),
                format!("hz:{}", config.hz),
                format!("configured_hz:{}", config.hz),
                "executable:tally-server".to_string(),
                "config_file:".to_string(),
            ]);
        }
        "clients" => lines.extend([
            format!("connected_clients:{}", shared.clients.len()),
            format!("maxclients:{}", config.maxclients),
            format!(
                "client_recent_max_input_buffer:{}",
                load(&stats.max_input_buffer)
            ),
            "client_recent_max_output_buffer:0".to_string(),
            "blocked_clients:0".to_string(),
            "tracking_clients:0".to_string(),
        ]),
        "memory" => {
            let used = shared.store.used_memory() as u64;
            let rss = rss_bytes();
            let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
            lines.extend([
                format!("used_memory:{used}"),
                format!("used_memory_human:{}", human_bytes(used)),
                format!("used_memory_rss:{rss}"),
                format!("used_memory_rss_human:{}", human_bytes(rss)),
                format!("maxmemory:{}", config.maxmemory),
                format!("maxmemory_human:{}", human_bytes(config.maxmemory)),
                format!("maxmemory_policy:{MAXMEMORY_POLICY}"),
            ]);
            // used_memory is the keyspace alone (what maxmemory limits), so
            // fragmentation is measured against what the process allocated,
            // where the allocator tells it; docs/compatibility.md.
            let base = match crate::allocator::stats() {
                Some(a) => {
                    lines.extend([
                        format!("allocator_allocated:{}", a.allocated),
                        format!("allocator_active:{}", a.active),
                        format!("allocator_resident:{}", a.resident),
                        format!("allocator_frag_ratio:{:.2}", ratio(a.active, a.allocated)),
                        format!(
                            "allocator_frag_bytes:{}",
                            a.active as i64 - a.allocated as i64
                        ),
                        format!("allocator_rss_ratio:{:.2}", ratio(a.resident, a.active)),
                        format!(
                            "allocator_rss_bytes:{}",
                            a.resident as i64 - a.active as i64
                        ),
                        format!("rss_overhead_ratio:{:.2}", ratio(rss, a.resident)),
                        format!("rss_overhead_bytes:{}", rss as i64 - a.resident as i64),
                    ]);
                    a.allocated
                }
                None => used,
            };
            lines.extend([
                format!("mem_fragmentation_ratio:{:.2}", ratio(rss, base)),
                format!("mem_fragmentation_bytes:{}", rss as i64 - base as i64),
                format!("mem_allocator:{}", crate::allocator::name()),
            ]);
        }
        "persistence" => lines.extend([
            "loading:0".to_string(),
            "async_loading:0".to_string(),
            "rdb_changes_since_last_save:0".to_string(),
            "rdb_bgsave_in_progress:0".to_string(),
            format!("rdb_last_save_time:{}", shared.started_unix),
            "rdb_last_bgsave_status:ok".to_string(),
            "aof_enabled:0".to_string(),
            "aof_rewrite_in_progress:0".to_string(),
            "aof_last_write_status:ok".to_string(),
        ]),
        "stats" => lines.extend([
            format!(
                "total_connections_received:{}",
                load(&stats.connections_received)
            ),
            format!(
                "total_commands_processed:{}",
                load(&stats.commands_processed)
            ),
            format!("total_net_input_bytes:{}", load(&stats.net_input_bytes)),
            format!("total_net_output_bytes:{}", load(&stats.net_output_bytes)),
            format!("rejected_connections:{}", load(&stats.rejected_connections)),
            format!("expired_keys:{}", load(&stats.expired_keys)),
            "evicted_keys:0".to_string(),
            format!("keyspace_hits:{}", load(&stats.keyspace_hits)),
            format!("keyspace_misses:{}", load(&stats.keyspace_misses)),
            "pubsub_channels:0".to_string(),
            "pubsub_patterns:0".to_string(),
            format!("total_error_replies:{}", load(&stats.total_error_replies)),
            format!("tally_contained_panics:{}", load(&stats.panics)),
        ]),
        "replication" => lines.extend([
            "role:master".to_string(),
            "connected_slaves:0".to_string(),
            format!("master_replid:{}", shared.run_id),
            "master_repl_offset:0".to_string(),
        ]),
        "cpu" => {
            let (user, sys) = cpu_seconds();
            lines.extend([
                format!("used_cpu_sys:{sys:.6}"),
                format!("used_cpu_user:{user:.6}"),
            ]);
        }
        "cluster" => lines.push("cluster_enabled:0".to_string()),
        "limiter_scripts" => {
            let scripts = &shared.scripts;
            lines.push(format!(
                "native_scripts_enabled:{}",
                scripts.native_enabled.load(Ordering::Relaxed) as u8
            ));
            lines.push(format!("lua_runs:{}", load(&scripts.lua_runs)));
            for (known, (native, lua)) in tally_lua::SCRIPTS.iter().zip(&scripts.known_runs) {
                lines.push(format!(
                    "script_{}:sha={},native_runs={},lua_runs={}",
                    known.name,
                    tally_lua::sha1_hex(known.source),
                    load(native),
                    load(lua)
                ));
            }
        }
        "commandstats" => {
            for (index, command) in registry().all().enumerate() {
                let c = &stats.commands[index];
                let calls = load(&c.calls);
                let (rejected, failed) = (load(&c.rejected_calls), load(&c.failed_calls));
                if calls == 0 && rejected == 0 && failed == 0 {
                    continue;
                }
                let usec = load(&c.usec);
                let per_call = if calls == 0 {
                    0.0
                } else {
                    usec as f64 / calls as f64
                };
                lines.push(format!(
                    "cmdstat_{}:calls={calls},usec={usec},usec_per_call={per_call:.2},\
                     rejected_calls={rejected},failed_calls={failed}",
                    command.name
                ));
            }
        }
        "keyspace" => {
            for index in 0..shared.store.databases() {
                let (keys, volatile) = ctx.db_sizes(index);
                if keys > 0 {
                    lines.push(format!(
                        "db{index}:keys={keys},expires={volatile},avg_ttl=0"
                    ));
                }
            }
        }
        _ => {}
    }
    let title = match section {
        "cpu" => "CPU".to_string(),
        "limiter_scripts" => "Limiter_scripts".to_string(),
        other => {
            let mut t = other.to_string();
            t[..1].make_ascii_uppercase();
            t
        }
    };
    let _ = write!(out, "# {title}\r\n");
    for line in lines {
        out.push_str(&line);
        out.push_str("\r\n");
    }
}
