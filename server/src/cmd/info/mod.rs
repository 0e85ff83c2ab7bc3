//! INFO: the sections and fields Redis 7.0 reports, in its order, filled
//! from the server's statistics, the store, the scripts and the allocator.
//! Fields for machinery tally does not have (a fork, defragmentation,
//! modules) are reported with the values Redis gives when it is idle, so
//! that exporters and dashboards find every field they read.

use std::sync::atomic::Ordering;

mod durability;
mod process;

use durability::{persistence, replication};
pub use process::rss_bytes;
use process::{cpu_seconds, os_name, total_system_memory};

use super::Ctx;
use crate::catalog::registry;
use crate::config::MAXMEMORY_POLICY;
use crate::resp::Reply;
use crate::store::shard::LookupCounts;

/// Bytes as Redis's bytesToHuman writes them (`992.62K`, `1.09M`).
fn human_bytes(n: u64) -> String {
    const UNITS: [(f64, &str); 5] = [
        (1024.0, "K"),
        (1024.0 * 1024.0, "M"),
        (1024.0 * 1024.0 * 1024.0, "G"),
        (1024.0 * 1024.0 * 1024.0 * 1024.0, "T"),
        (1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0, "P"),
    ];
    let value = n as f64;
    if value < 1024.0 {
        return format!("{n}B");
    }
    let mut chosen = UNITS[0];
    for unit in UNITS {
        if value >= unit.0 {
            chosen = unit;
        }
    }
    format!("{:.2}{}", value / chosen.0, chosen.1)
}

/// INFO sections in the order Redis prints them; `limiter_scripts` is
/// tally's own and comes last.
const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
    "limiter_scripts",
];

/// Sections that only `INFO all`, `INFO everything` or their name select.
const NOT_DEFAULT: &[&str] = &["commandstats", "latencystats"];

/// INFO [section [section ...]]
pub fn info(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    // Count this batch's work before reporting it.
    ctx.client.batch.flush(ctx.shared, ctx.client.info.id);
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
    let totals = ShardTotals::gather(ctx);
    let mut text = String::new();
    for section in SECTIONS.iter().copied().filter(|s| selected(s)) {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        let lines = section_lines(ctx, section, &totals);
        text.push_str(&format!("# {}\r\n", title(section)));
        for line in lines {
            text.push_str(&line);
            text.push_str("\r\n");
        }
    }
    Reply::Verbatim(text.into_bytes())
}

fn title(section: &str) -> String {
    match section {
        "cpu" => "CPU".to_string(),
        other => {
            let mut t = other.to_string();
            t[..1].make_ascii_uppercase();
            t
        }
    }
}

/// What INFO reads from every shard, in one pass over them.
struct ShardTotals {
    /// (keys, keys with a deadline) per database.
    per_db: Vec<(usize, usize)>,
    lookups: LookupCounts,
    /// Bytes of the hash tables themselves (INFO used_memory_overhead).
    table_bytes: usize,
}

impl ShardTotals {
    fn gather(ctx: &Ctx<'_>) -> ShardTotals {
        let store = &ctx.shared.store;
        let mut totals = ShardTotals {
            per_db: Vec::with_capacity(store.databases()),
            lookups: LookupCounts::default(),
            table_bytes: 0,
        };
        for db in 0..store.databases() {
            let (mut keys, mut volatile) = (0, 0);
            for index in 0..store.db(db).shard_count() {
                let shard = ctx.lock_shard(db, index);
                keys += shard.len();
                volatile += shard.volatile_len();
                let lookups = shard.lookup_counts();
                totals.lookups.hits += lookups.hits;
                totals.lookups.misses += lookups.misses;
                totals.table_bytes += shard.table_bytes();
            }
            totals.per_db.push((keys, volatile));
        }
        totals
    }
}

fn section_lines(ctx: &Ctx<'_>, section: &str, totals: &ShardTotals) -> Vec<String> {
    match section {
        "server" => server(ctx),
        "clients" => clients(ctx),
        "memory" => memory(ctx, totals),
        "persistence" => persistence(ctx),
        "stats" => stats(ctx, totals),
        "replication" => replication(ctx),
        "cpu" => cpu(),
        "commandstats" => commandstats(ctx),
        "errorstats" => errorstats(ctx),
        "latencystats" => latencystats(ctx),
        "cluster" => vec![format!(
            "cluster_enabled:{}",
            u8::from(ctx.shared.cluster.get().is_some())
        )],
        "keyspace" => keyspace(totals),
        "limiter_scripts" => limiter_scripts(ctx),
        _ => Vec::new(),
    }
}

pub(super) fn load(counter: &std::sync::atomic::AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

fn server(ctx: &Ctx<'_>) -> Vec<String> {
    let shared = ctx.shared;
    let config = shared.config.read();
    let uptime = shared.started.elapsed().as_secs();
    let port = shared.local_addr.lock().map(|a| a.port()).unwrap_or(0);
    let executable = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    vec![
        format!("redis_version:{}", crate::catalog::reported_version()),
        format!("tally_version:{}", env!("CARGO_PKG_VERSION")),
        "redis_git_sha1:00000000".to_string(),
        "redis_git_dirty:0".to_string(),
        format!("redis_build_id:{}", build_id()),
        "redis_mode:standalone".to_string(),
        format!("os:{}", os_name()),
        "arch_bits:64".to_string(),
        "monotonic_clock:POSIX clock_gettime".to_string(),
        "multiplexing_api:epoll".to_string(),
        "atomicvar_api:c11-builtin".to_string(),
        "gcc_version:0.0.0".to_string(),
        format!("process_id:{}", std::process::id()),
        "process_supervised:no".to_string(),
        format!("run_id:{}", shared.run_id),
        format!("tcp_port:{port}"),
        format!("server_time_usec:{}", shared.clock.now_us()),
        format!("uptime_in_seconds:{uptime}"),
        format!("uptime_in_days:{}", uptime / 86400),
        format!("hz:{}", config.hz),
        format!("configured_hz:{}", config.hz),
        // Redis's LRU clock: seconds, in 24 bits.
        format!(
            "lru_clock:{}",
            (shared.clock.now_ms() / 1000) & ((1 << 24) - 1)
        ),
        format!("executable:{executable}"),
        "config_file:".to_string(),
        "io_threads_active:0".to_string(),
    ]
}

/// A stable identifier of this build (Redis hashes its build environment).
fn build_id() -> String {
    let digest = tally_lua::sha1_hex(concat!("tally-", env!("CARGO_PKG_VERSION")));
    digest[..16].to_string()
}

fn clients(ctx: &Ctx<'_>) -> Vec<String> {
    let shared = ctx.shared;
    let config = shared.config.read();
    vec![
        format!("connected_clients:{}", shared.clients.len()),
        "cluster_connections:0".to_string(),
        format!("maxclients:{}", config.maxclients),
        format!(
            "client_recent_max_input_buffer:{}",
            load(&shared.stats.max_input_buffer)
        ),
        "client_recent_max_output_buffer:0".to_string(),
        format!("blocked_clients:{}", shared.blocked.count()),
        format!("tracking_clients:{}", shared.tracking.counts().0),
        format!("clients_in_timeout_table:{}", shared.blocked.timed()),
    ]
}

fn memory(ctx: &Ctx<'_>, totals: &ShardTotals) -> Vec<String> {
    let shared = ctx.shared;
    let config = shared.config.read();
    let used = shared.store.used_memory() as u64;
    let peak = shared.stats.note_memory(used);
    let rss = rss_bytes();
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let percent = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            a as f64 * 100.0 / b as f64
        }
    };
    // used_memory is the keyspace (what maxmemory limits): its overhead is
    // the hash tables themselves, its dataset the entries and values;
    // docs/compatibility.md.
    let overhead = (totals.table_bytes as u64).min(used);
    let dataset = used - overhead;
    let lua = shared.scripts.vm_memory.sum().max(0) as u64;
    let (cached_scripts, script_bytes) = shared.scripts.cache_stats();
    let (libraries, functions) = shared.scripts.functions.counts();
    let function_bytes = shared.scripts.functions.memory();
    let system = total_system_memory();
    let mut lines = vec![
        format!("used_memory:{used}"),
        format!("used_memory_human:{}", human_bytes(used)),
        format!("used_memory_rss:{rss}"),
        format!("used_memory_rss_human:{}", human_bytes(rss)),
        format!("used_memory_peak:{peak}"),
        format!("used_memory_peak_human:{}", human_bytes(peak)),
        format!("used_memory_peak_perc:{:.2}%", percent(used, peak)),
        format!("used_memory_overhead:{overhead}"),
        "used_memory_startup:0".to_string(),
        format!("used_memory_dataset:{dataset}"),
        format!("used_memory_dataset_perc:{:.2}%", percent(dataset, used)),
    ];
    let allocator = crate::allocator::stats();
    if let Some(a) = allocator {
        lines.extend([
            format!("allocator_allocated:{}", a.allocated),
            format!("allocator_active:{}", a.active),
            format!("allocator_resident:{}", a.resident),
        ]);
    }
    lines.extend([
        format!("total_system_memory:{system}"),
        format!("total_system_memory_human:{}", human_bytes(system)),
        format!("used_memory_lua:{lua}"),
        format!("used_memory_vm_eval:{lua}"),
        format!("used_memory_lua_human:{}", human_bytes(lua)),
        format!("used_memory_scripts_eval:{script_bytes}"),
        format!("number_of_cached_scripts:{cached_scripts}"),
        format!("number_of_functions:{functions}"),
        format!("number_of_libraries:{libraries}"),
        // Functions run in the same worker VMs as scripts: their Lua
        // memory is counted under used_memory_vm_eval.
        "used_memory_vm_functions:0".to_string(),
        format!("used_memory_vm_total:{lua}"),
        format!("used_memory_vm_total_human:{}", human_bytes(lua)),
        format!("used_memory_functions:{function_bytes}"),
        format!("used_memory_scripts:{}", script_bytes + function_bytes),
        format!(
            "used_memory_scripts_human:{}",
            human_bytes((script_bytes + function_bytes) as u64)
        ),
        format!("maxmemory:{}", config.maxmemory),
        format!("maxmemory_human:{}", human_bytes(config.maxmemory)),
        format!("maxmemory_policy:{MAXMEMORY_POLICY}"),
    ]);
    // Fragmentation is measured against what the process allocated, where
    // the allocator tells it, not against used_memory (the keyspace alone):
    // a ratio of RSS to the keyspace would read in the tens on an empty
    // server; docs/compatibility.md.
    let base = match allocator {
        Some(a) => {
            lines.extend([
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
        "mem_not_counted_for_evict:0".to_string(),
        "mem_replication_backlog:0".to_string(),
        "mem_total_replication_buffers:0".to_string(),
        "mem_clients_slaves:0".to_string(),
        "mem_clients_normal:0".to_string(),
        "mem_cluster_links:0".to_string(),
        format!("mem_aof_buffer:{}", ctx.shared.store.feed().buffered()),
        format!("mem_allocator:{}", crate::allocator::name()),
        "active_defrag_running:0".to_string(),
        "lazyfree_pending_objects:0".to_string(),
        "lazyfreed_objects:0".to_string(),
    ]);
    lines
}

fn stats(ctx: &Ctx<'_>, totals: &ShardTotals) -> Vec<String> {
    let shared = ctx.shared;
    let stats = &shared.stats;
    let (input_kbps, output_kbps) = stats.instantaneous.kbps();
    let (channels, patterns) = shared.pubsub.counts();
    let tracking = shared.tracking.counts();
    vec![
        format!(
            "total_connections_received:{}",
            load(&stats.connections_received)
        ),
        format!(
            "total_commands_processed:{}",
            load(&stats.commands_processed)
        ),
        format!(
            "instantaneous_ops_per_sec:{}",
            stats.instantaneous.ops_per_sec()
        ),
        format!("total_net_input_bytes:{}", load(&stats.net_input_bytes)),
        format!("total_net_output_bytes:{}", load(&stats.net_output_bytes)),
        "total_net_repl_input_bytes:0".to_string(),
        "total_net_repl_output_bytes:0".to_string(),
        format!("instantaneous_input_kbps:{input_kbps:.2}"),
        format!("instantaneous_output_kbps:{output_kbps:.2}"),
        "instantaneous_input_repl_kbps:0.00".to_string(),
        "instantaneous_output_repl_kbps:0.00".to_string(),
        format!("rejected_connections:{}", load(&stats.rejected_connections)),
        format!("sync_full:{}", load(&ctx.shared.stats.sync_full)),
        format!(
            "sync_partial_ok:{}",
            load(&ctx.shared.stats.sync_partial_ok)
        ),
        format!(
            "sync_partial_err:{}",
            load(&ctx.shared.stats.sync_partial_err)
        ),
        format!("expired_subkeys:{}", load(&stats.expired_subkeys)),
        format!("expired_keys:{}", load(&stats.expired_keys)),
        "expired_stale_perc:0.00".to_string(),
        "expired_time_cap_reached_count:0".to_string(),
        "expire_cycle_cpu_milliseconds:0".to_string(),
        "evicted_keys:0".to_string(),
        "evicted_clients:0".to_string(),
        "total_eviction_exceeded_time:0".to_string(),
        "current_eviction_exceeded_time:0".to_string(),
        format!("keyspace_hits:{}", totals.lookups.hits),
        format!("keyspace_misses:{}", totals.lookups.misses),
        format!("pubsub_channels:{channels}"),
        format!("pubsub_patterns:{patterns}"),
        format!("pubsubshard_channels:{}", shared.pubsub.shard_count()),
        "latest_fork_usec:0".to_string(),
        "total_forks:0".to_string(),
        "migrate_cached_sockets:0".to_string(),
        "slave_expires_tracked_keys:0".to_string(),
        "active_defrag_hits:0".to_string(),
        "active_defrag_misses:0".to_string(),
        "active_defrag_key_hits:0".to_string(),
        "active_defrag_key_misses:0".to_string(),
        "total_active_defrag_time:0".to_string(),
        "current_active_defrag_time:0".to_string(),
        format!("tracking_total_keys:{}", tracking.1),
        format!("tracking_total_items:{}", tracking.2),
        format!("tracking_total_prefixes:{}", tracking.3),
        "unexpected_error_replies:0".to_string(),
        format!("total_error_replies:{}", load(&stats.total_error_replies)),
        "dump_payload_sanitizations:0".to_string(),
        format!("total_reads_processed:{}", load(&stats.reads_processed)),
        format!("total_writes_processed:{}", load(&stats.writes_processed)),
        "io_threaded_reads_processed:0".to_string(),
        "io_threaded_writes_processed:0".to_string(),
        "reply_buffer_shrinks:0".to_string(),
        "reply_buffer_expands:0".to_string(),
        format!("tally_contained_panics:{}", load(&stats.panics)),
    ]
}

fn cpu() -> Vec<String> {
    let (user, sys) = cpu_seconds();
    // tally has no main thread: every worker serves clients, so the
    // main-thread figures are the process's; docs/compatibility.md.
    vec![
        format!("used_cpu_sys:{sys:.6}"),
        format!("used_cpu_user:{user:.6}"),
        "used_cpu_sys_children:0.000000".to_string(),
        "used_cpu_user_children:0.000000".to_string(),
        format!("used_cpu_sys_main_thread:{sys:.6}"),
        format!("used_cpu_user_main_thread:{user:.6}"),
    ]
}

fn commandstats(ctx: &Ctx<'_>) -> Vec<String> {
    let stats = &ctx.shared.stats;
    let mut lines = Vec::new();
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
    lines
}

fn errorstats(ctx: &Ctx<'_>) -> Vec<String> {
    ctx.shared
        .stats
        .errorstats
        .lock()
        .iter()
        .map(|(code, count)| format!("errorstat_{}:count={count}", String::from_utf8_lossy(code)))
        .collect()
}

fn latencystats(ctx: &Ctx<'_>) -> Vec<String> {
    let percentiles = ctx
        .shared
        .config
        .read()
        .latency_tracking_info_percentiles
        .clone();
    let latencies = &ctx.shared.stats.latencies;
    registry()
        .all()
        .enumerate()
        .filter_map(|(index, command)| {
            let histogram = latencies.of(index)?;
            Some(format!(
                "latency_percentiles_usec_{}:{}",
                command.name,
                crate::latency::percentiles_line(&histogram, &percentiles)
            ))
        })
        .collect()
}

fn keyspace(totals: &ShardTotals) -> Vec<String> {
    totals
        .per_db
        .iter()
        .enumerate()
        .filter(|(_, (keys, _))| *keys > 0)
        .map(|(index, (keys, volatile))| {
            format!("db{index}:keys={keys},expires={volatile},avg_ttl=0")
        })
        .collect()
}

fn limiter_scripts(ctx: &Ctx<'_>) -> Vec<String> {
    let scripts = &ctx.shared.scripts;
    let mut lines = vec![
        format!(
            "native_scripts_enabled:{}",
            scripts.native_enabled.load(Ordering::Relaxed) as u8
        ),
        format!("lua_runs:{}", load(&scripts.lua_runs)),
    ];
    for (known, (native, lua)) in tally_lua::SCRIPTS.iter().zip(&scripts.known_runs) {
        lines.push(format!(
            "script_{}:sha={},native_runs={},lua_runs={}",
            known.name,
            tally_lua::sha1_hex(known.source),
            load(native),
            load(lua)
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_reads_as_redis_writes_it() {
        assert_eq!(human_bytes(0), "0B");
        assert_eq!(human_bytes(1023), "1023B");
        assert_eq!(human_bytes(1016448), "992.62K");
        assert_eq!(human_bytes(1138616), "1.09M");
        assert_eq!(human_bytes(25276514304), "23.54G");
    }
}
