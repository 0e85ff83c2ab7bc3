//! MEMORY USAGE / STATS / DOCTOR / HELP. tally reports its own memory: a
//! key's usage is what the key costs here (its table slot, its block and
//! any collection), which is smaller than the same key on Redis;
//! docs/compatibility.md.

use super::args::{is, parse_i64};
use super::error;
use super::server::help_reply;
use super::Ctx;
use crate::resp::Reply;

/// Bytes a key costs besides its block: its slot in the table (a pointer)
/// and the table's control byte.
const SLOT_BYTES: usize = std::mem::size_of::<usize>() + 1;

/// MEMORY USAGE key [SAMPLES count]
pub fn memory_usage(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let mut i = 3;
    while i < argv.len() {
        if is(argv[i], "samples") && i + 1 < argv.len() {
            // Counted exactly here, so the count only needs to be valid.
            match parse_i64(argv[i + 1]) {
                Some(n) if n >= 0 => {}
                Some(_) => return Reply::error(error::SYNTAX),
                None => return Reply::error(error::NOT_INTEGER),
            }
            i += 2;
        } else {
            return Reply::error(error::SYNTAX);
        }
    }
    // The key as the table holds it, past its deadline too, and left
    // unstamped: Redis reads its dict directly here.
    let key = ctx.key(argv[2]);
    let shard = ctx.lock(key);
    match shard.peek(key) {
        Some(entry) => Reply::Int((SLOT_BYTES + entry.heap_size()) as i64),
        None => Reply::Nil,
    }
}

/// What MEMORY STATS and MEMORY DOCTOR read.
struct Overview {
    peak: u64,
    used: u64,
    table_bytes: u64,
    keys: u64,
    scripts_bytes: u64,
    scripts: usize,
    per_db: Vec<(usize, u64)>,
    allocator: Option<crate::allocator::AllocatorStats>,
    rss: u64,
}

fn overview(ctx: &Ctx<'_>) -> Overview {
    let shared = ctx.shared;
    let used = shared.store.used_memory() as u64;
    let peak = shared.stats.note_memory(used);
    let (mut keys, mut table_bytes, mut per_db) = (0u64, 0u64, Vec::new());
    for db in 0..shared.store.databases() {
        let (mut db_keys, mut db_table) = (0, 0);
        for index in 0..shared.store.db(db).shard_count() {
            let shard = ctx.lock_shard(db, index);
            db_keys += shard.len();
            db_table += shard.table_bytes() as u64;
        }
        if db_keys > 0 {
            per_db.push((db, db_table));
        }
        keys += db_keys as u64;
        table_bytes += db_table;
    }
    let (scripts, scripts_bytes) = shared.scripts.cache_stats();
    Overview {
        peak,
        used,
        table_bytes: table_bytes.min(used),
        keys,
        scripts_bytes: scripts_bytes as u64,
        scripts,
        per_db,
        allocator: crate::allocator::stats(),
        rss: super::info::rss_bytes(),
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// MEMORY STATS: Redis's map, in its order.
pub fn memory_stats(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let o = overview(ctx);
    let int = |n: u64| Reply::Int(n as i64);
    let signed = |a: u64, b: u64| Reply::Int(a as i64 - b as i64);
    let mut pairs: Vec<(&str, Reply)> = vec![
        ("peak.allocated", int(o.peak)),
        ("total.allocated", int(o.used)),
        ("startup.allocated", int(0)),
        ("replication.backlog", int(0)),
        ("clients.slaves", int(0)),
        ("clients.normal", int(0)),
        ("cluster.links", int(0)),
        ("aof.buffer", int(0)),
        ("lua.caches", int(o.scripts_bytes)),
        ("functions.caches", int(0)),
    ];
    let mut reply: Vec<(Reply, Reply)> = pairs
        .drain(..)
        .map(|(name, value)| (Reply::bulk(name.as_bytes()), value))
        .collect();
    for (db, table) in &o.per_db {
        reply.push((
            Reply::Bulk(format!("db.{db}").into_bytes()),
            Reply::Map(vec![
                (Reply::bulk(b"overhead.hashtable.main"), int(*table)),
                (Reply::bulk(b"overhead.hashtable.expires"), int(0)),
                (Reply::bulk(b"overhead.hashtable.slot-to-keys"), int(0)),
            ]),
        ));
    }
    let dataset = o.used - o.table_bytes;
    let (allocated, active, resident) = o.allocator.map_or((o.used, o.used, o.rss), |a| {
        (a.allocated, a.active, a.resident)
    });
    let tail: Vec<(&str, Reply)> = vec![
        ("overhead.total", int(o.table_bytes)),
        ("keys.count", int(o.keys)),
        (
            "keys.bytes-per-key",
            int(o.used.checked_div(o.keys).unwrap_or(0)),
        ),
        ("dataset.bytes", int(dataset)),
        (
            "dataset.percentage",
            Reply::Double(ratio(dataset, o.used) * 100.0),
        ),
        (
            "peak.percentage",
            Reply::Double(ratio(o.used, o.peak) * 100.0),
        ),
        ("allocator.allocated", int(allocated)),
        ("allocator.active", int(active)),
        ("allocator.resident", int(resident)),
        (
            "allocator-fragmentation.ratio",
            Reply::Double(ratio(active, allocated)),
        ),
        ("allocator-fragmentation.bytes", signed(active, allocated)),
        (
            "allocator-rss.ratio",
            Reply::Double(ratio(resident, active)),
        ),
        ("allocator-rss.bytes", signed(resident, active)),
        ("rss-overhead.ratio", Reply::Double(ratio(o.rss, resident))),
        ("rss-overhead.bytes", signed(o.rss, resident)),
        // As INFO's mem_fragmentation_ratio: against what the process
        // allocated, not the keyspace alone.
        ("fragmentation", Reply::Double(ratio(o.rss, allocated))),
        ("fragmentation.bytes", signed(o.rss, allocated)),
    ];
    reply.extend(
        tail.into_iter()
            .map(|(name, value)| (Reply::bulk(name.as_bytes()), value)),
    );
    Reply::Map(reply)
}

/// MEMORY DOCTOR: Redis's report, on the figures tally has (no replicas;
/// client buffers are not counted yet).
pub fn memory_doctor(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let o = overview(ctx);
    Reply::Verbatim(doctor_report(&o).into_bytes())
}

const MB10: u64 = 10 << 20;

fn doctor_report(o: &Overview) -> String {
    // Redis tests its own total allocation; tally's whole allocation is the
    // allocator's figure where there is one.
    let total = o.allocator.map_or(o.used, |a| a.allocated);
    let mut findings: Vec<&str> = Vec::new();
    if total < 5 << 20 {
        return "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n".to_string();
    }
    if ratio(o.peak, o.used) > 1.5 {
        findings.push(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n");
    }
    let high_frag;
    if ratio(o.rss, total) > 1.4 && o.rss.saturating_sub(total) > MB10 {
        high_frag = format!(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"{}\".\n\n", crate::allocator::name());
        findings.push(&high_frag);
    }
    if let Some(a) = o.allocator {
        if ratio(a.active, a.allocated) > 1.1 && a.active.saturating_sub(a.allocated) > MB10 {
            findings.push(" * High allocator fragmentation: This instance has an allocator external fragmentation greater than 1.1. This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. You can try enabling 'activedefrag' config option.\n\n");
        }
        if ratio(a.resident, a.active) > 1.1 && a.resident.saturating_sub(a.active) > MB10 {
            findings.push(" * High allocator RSS overhead: This instance has an RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the allocator is much larger than the sum what the allocator actually holds). This problem is usually due to a large peak memory (check if there is a peak memory entry above in the report), you can try the MEMORY PURGE command to reclaim it.\n\n");
        }
        if ratio(o.rss, a.resident) > 1.1 && o.rss.saturating_sub(a.resident) > MB10 {
            findings.push(" * High process RSS overhead: This instance has non-allocator RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the Redis process is much larger than the RSS the allocator holds). This problem may be due to Lua scripts or Modules.\n\n");
        }
    }
    if o.scripts > 1000 {
        findings.push(" * Many scripts: There seem to be many cached scripts in this instance (more than 1000). This may be because scripts are generated and `EVAL`ed, instead of being parameterized (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless `SCRIPT FLUSH` is called periodically, the scripts' caches may end up consuming most of your memory.\n\n");
    }
    if findings.is_empty() {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n".to_string();
    }
    let mut report =
        "Sam, I detected a few issues in this Redis instance memory implants:\n\n".to_string();
    for finding in findings {
        report.push_str(finding);
    }
    report.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
    report
}

/// MEMORY MALLOC-STATS
pub fn memory_malloc_stats(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    match crate::allocator::report() {
        Some(report) => Reply::bulk(report.as_bytes()),
        None => Reply::bulk(b"Stats not supported for the current allocator"),
    }
}

/// MEMORY PURGE
pub fn memory_purge(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    crate::allocator::purge();
    Reply::Ok
}

/// MEMORY HELP
pub fn memory_help(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    help_reply(
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    )
}
