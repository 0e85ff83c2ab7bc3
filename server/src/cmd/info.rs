//! INFO: the sections and fields Redis 7.0 reports, filled from the
//! server's statistics, the store and the allocator.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::connection::REDIS_VERSION;
use super::table::registry;
use super::Ctx;
use crate::config::MAXMEMORY_POLICY;
use crate::resp::Reply;

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
