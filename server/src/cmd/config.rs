//! CONFIG GET / SET / RESETSTAT / HELP: the live configuration as Redis
//! shows and changes it.

use super::args::glob_match;
use super::error;
use super::server::help_reply;
use super::Ctx;
use crate::config::{Config, MAXMEMORY_POLICY};
use crate::resp::Reply;

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
        // Redis lists both names of an aliased parameter.
        (
            "set-max-intset-entries",
            config.encodings.set_max_intset_entries.to_string(),
        ),
        (
            "hash-max-listpack-entries",
            config.encodings.hash_max_listpack_entries.to_string(),
        ),
        (
            "hash-max-ziplist-entries",
            config.encodings.hash_max_listpack_entries.to_string(),
        ),
        (
            "hash-max-listpack-value",
            config.encodings.hash_max_listpack_value.to_string(),
        ),
        (
            "hash-max-ziplist-value",
            config.encodings.hash_max_listpack_value.to_string(),
        ),
        (
            "zset-max-listpack-entries",
            config.encodings.zset_max_listpack_entries.to_string(),
        ),
        (
            "zset-max-ziplist-entries",
            config.encodings.zset_max_listpack_entries.to_string(),
        ),
        (
            "zset-max-listpack-value",
            config.encodings.zset_max_listpack_value.to_string(),
        ),
        (
            "zset-max-ziplist-value",
            config.encodings.zset_max_listpack_value.to_string(),
        ),
        (
            "list-max-listpack-size",
            config.list_max_listpack_size.to_string(),
        ),
        (
            "list-max-ziplist-size",
            config.list_max_listpack_size.to_string(),
        ),
        (
            "list-compress-depth",
            config.list_compress_depth.to_string(),
        ),
        ("shards", config.shards.to_string()),
        ("io-threads", config.io_threads.max(1).to_string()),
        (
            "busy-reply-threshold",
            config.busy_reply_threshold_ms.to_string(),
        ),
        ("lua-time-limit", config.busy_reply_threshold_ms.to_string()),
        ("lua-memory-limit", config.lua_memory_limit.to_string()),
        ("slowlog-max-len", config.slowlog_max_len.to_string()),
        (
            "slowlog-log-slower-than",
            config.slowlog_log_slower_than.to_string(),
        ),
        ("metrics-port", config.metrics_port.to_string()),
        (
            "latency-monitor-threshold",
            config.latency_monitor_threshold_ms.to_string(),
        ),
        ("latency-tracking", yes_no(config.latency_tracking)),
        (
            "tracking-table-max-keys",
            config.tracking_table_max_keys.to_string(),
        ),
        (
            "latency-tracking-info-percentiles",
            config
                .latency_tracking_info_percentiles
                .iter()
                .map(|p| crate::float::trim_double(*p))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        (
            "client-output-buffer-limit",
            format!(
                "normal 0 0 0 slave {} {} {} pubsub {} {} {}",
                config.replica_output_limit.hard,
                config.replica_output_limit.soft,
                config.replica_output_limit.soft_seconds,
                config.pubsub_output_limit.hard,
                config.pubsub_output_limit.soft,
                config.pubsub_output_limit.soft_seconds
            ),
        ),
        ("lua-native-scripts", yes_no(config.lua_native_scripts)),
        (
            "save",
            config
                .save_points
                .iter()
                .map(|(seconds, changes)| format!("{seconds} {changes}"))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        (
            "stop-writes-on-bgsave-error",
            yes_no(config.stop_writes_on_bgsave_error),
        ),
        ("protected-mode", yes_no(config.protected_mode)),
        ("cluster-enabled", yes_no(config.cluster_enabled)),
        ("cluster-config-file", config.cluster_config_file.clone()),
        (
            "cluster-require-full-coverage",
            yes_no(config.cluster_require_full_coverage),
        ),
        (
            "cluster-allow-reads-when-down",
            yes_no(config.cluster_allow_reads_when_down),
        ),
        (
            "cluster-allow-pubsubshard-when-down",
            yes_no(config.cluster_allow_pubsubshard_when_down),
        ),
        (
            "cluster-node-timeout",
            config.cluster_node_timeout.to_string(),
        ),
        ("cluster-port", config.cluster_port.to_string()),
        ("cluster-announce-ip", config.cluster_announce_ip.clone()),
        (
            "cluster-announce-hostname",
            config.cluster_announce_hostname.clone(),
        ),
        (
            "cluster-announce-port",
            config.cluster_announce_port.to_string(),
        ),
        (
            "cluster-preferred-endpoint-type",
            config.cluster_preferred_endpoint_type.name().to_string(),
        ),
        (
            "cluster-announce-bus-port",
            config.cluster_announce_bus_port.to_string(),
        ),
        (
            "cluster-announce-tls-port",
            config.cluster_announce_tls_port.to_string(),
        ),
        ("tls-port", config.tls.port.to_string()),
        ("tls-cert-file", config.tls.cert_file.clone()),
        ("tls-key-file", config.tls.key_file.clone()),
        ("tls-key-file-pass", config.tls.key_file_pass.clone()),
        ("tls-client-cert-file", config.tls.client_cert_file.clone()),
        ("tls-client-key-file", config.tls.client_key_file.clone()),
        (
            "tls-client-key-file-pass",
            config.tls.client_key_file_pass.clone(),
        ),
        ("tls-cluster", yes_no(config.tls.cluster)),
        ("tls-ca-cert-file", config.tls.ca_cert_file.clone()),
        ("tls-ca-cert-dir", config.tls.ca_cert_dir.clone()),
        (
            "tls-auth-clients",
            config.tls.auth_clients.name().to_string(),
        ),
        ("tls-protocols", config.tls.protocols.clone()),
        ("tls-ciphersuites", config.tls.ciphersuites.clone()),
        ("tls-ciphers", config.tls.ciphers.clone()),
        (
            "tls-prefer-server-ciphers",
            yes_no(config.tls.prefer_server_ciphers),
        ),
        ("tls-session-caching", yes_no(config.tls.session_caching)),
        (
            "tls-session-cache-size",
            config.tls.session_cache_size.to_string(),
        ),
        (
            "tls-session-cache-timeout",
            config.tls.session_cache_timeout.to_string(),
        ),
        ("aclfile", config.aclfile.clone()),
        ("acllog-max-len", config.acllog_max_len.to_string()),
        ("appendonly", yes_no(config.appendonly)),
        ("appendfilename", config.appendfilename.clone()),
        ("appenddirname", config.appenddirname.clone()),
        ("appendfsync", config.appendfsync.name().to_string()),
        ("aof-load-truncated", yes_no(config.aof_load_truncated)),
        ("aof-use-rdb-preamble", "yes".to_string()),
        (
            "auto-aof-rewrite-percentage",
            config.auto_aof_rewrite_percentage.to_string(),
        ),
        (
            "auto-aof-rewrite-min-size",
            config.auto_aof_rewrite_min_size.to_string(),
        ),
        (
            "no-appendfsync-on-rewrite",
            yes_no(config.no_appendfsync_on_rewrite),
        ),
        (
            "aof-rewrite-incremental-fsync",
            yes_no(config.aof_rewrite_incremental_fsync),
        ),
        ("dir", config.dir.clone()),
        ("dbfilename", config.dbfilename.clone()),
        ("rdbcompression", yes_no(config.rdbcompression)),
        ("rdbchecksum", yes_no(config.rdbchecksum)),
        ("rdb-skip-unsupported", yes_no(config.rdb_skip_unsupported)),
        ("daemonize", "no".to_string()),
    ]
}

fn yes_no(flag: bool) -> String {
    if flag { "yes" } else { "no" }.to_string()
}

/// Parameters that only take effect at start.
const IMMUTABLE: &[&str] = &[
    "bind",
    "port",
    "databases",
    "shards",
    "io-threads",
    "daemonize",
    "metrics-port",
    "appendfilename",
    "appenddirname",
    "aclfile",
    "tls-port",
    "cluster-enabled",
    "cluster-config-file",
    "cluster-port",
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
