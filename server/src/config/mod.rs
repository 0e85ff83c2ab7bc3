//! Server configuration: defaults, redis.conf-style files and memory units.
//!
//! Option names are redis-server's, so an operator's existing knowledge (and a
//! trimmed copy of their redis.conf) carries over. Directives tally does not
//! implement are refused at start-up with the file, line and directive named,
//! rather than silently ignored.
//!
//! The directives and how each is read are in `directives`; the number,
//! memory and yes/no readers Redis's parameters share in `values`.

mod accepted;
pub mod directives;
pub mod rewrite;
pub mod settings;
mod values;

pub use settings::{
    ClientAuth, EndpointType, Fsync, OutputLimit, ProtectedAction, ShutdownFlags, TlsSettings,
};
pub use values::parse_memory;

use std::fmt;
use std::sync::Arc;

use crate::store::{Clock, SystemClock};

/// The only eviction policy: tally never drops a counter to make room, because a
/// dropped rate-limit counter silently grants a client a fresh window.
pub const MAXMEMORY_POLICY: &str = "noeviction";

/// Everything a [`crate::Server`] needs to start.
#[derive(Clone)]
pub struct Config {
    /// The config file the server started with, if any (CONFIG REWRITE
    /// writes it). Not a directive: the binary sets it.
    pub config_file: Option<std::path::PathBuf>,
    /// Addresses to listen on (`bind`); default `127.0.0.1`.
    pub bind: Vec<String>,
    /// TCP port (`port`); 0 picks a free port.
    pub port: u16,
    /// Memory limit in bytes for keys (`maxmemory`); 0 means none.
    pub maxmemory: u64,
    /// Password of the default user (`requirepass`).
    pub requirepass: Option<String>,
    /// Number of databases (`databases`).
    pub databases: usize,
    /// Maximum simultaneous clients (`maxclients`).
    pub maxclients: usize,
    /// Seconds of idleness after which a client is closed (`timeout`); 0 = never.
    pub timeout_secs: u64,
    /// Largest bulk string accepted (`proto-max-bulk-len`).
    pub proto_max_bulk_len: u64,
    /// Largest unprocessed input buffered for one client (`client-query-buffer-limit`).
    pub client_query_buffer_limit: u64,
    /// Keys of a pipeline's next commands prefetched together
    /// (`prefetch-batch-max-size`); 0 or 1 turns the look ahead off.
    pub prefetch_batch_max_size: usize,
    /// Log verbosity (`loglevel`): debug, verbose, notice, warning, nothing.
    pub loglevel: String,
    /// `logfile`: where the binary logs ("" for standard output).
    pub logfile: String,
    /// `syslog-enabled`: log lines also go to the system log.
    pub syslog_enabled: bool,
    /// `syslog-ident`: the name they go under.
    pub syslog_ident: String,
    /// `syslog-facility`: user or local0 to local7.
    pub syslog_facility: String,
    /// `pidfile`: where the binary writes its process id while it runs
    /// ("" for nowhere).
    pub pidfile: String,
    /// `supervised`: how the binary tells a supervisor it is ready (no,
    /// systemd, upstart, or auto: whichever the environment names).
    pub supervised: String,
    /// `unixsocket`: the path of a Unix socket clients may connect to
    /// ("" for none).
    pub unixsocket: String,
    /// `unixsocketperm`: the socket file's permissions (0: as created).
    pub unixsocketperm: u32,
    /// `acl-pubsub-default allchannels`: new users and selectors start
    /// with every channel (false: none, `resetchannels`, Redis 7's default).
    pub acl_pubsub_all_channels: bool,
    /// `notify-keyspace-events`: the classes of keyspace notifications
    /// published, as `crate::event_classes` flags (0: none).
    pub notify_keyspace_events: u32,
    /// Shards per database (rounded up to a power of two).
    pub shards: usize,
    /// `reported-redis-version`: the Redis version INFO, HELLO and Lua
    /// report ("": Redis 7.0.15's, the one tally follows).
    pub reported_redis_version: String,
    /// Active-expiry frequency per second (`hz`).
    pub hz: u32,
    /// Source of time; tests install a [`crate::store::ManualClock`].
    pub clock: Arc<dyn Clock>,
    /// Worker threads of the runtime the binary builds (`io-threads`); 0 = one per core.
    pub io_threads: usize,
    /// Milliseconds a script may run before other clients get BUSY
    /// (`busy-reply-threshold`, formerly `lua-time-limit`).
    pub busy_reply_threshold_ms: u64,
    /// Run the known limiter scripts natively (`lua-native-scripts`).
    pub lua_native_scripts: bool,
    /// Keep the scripts SCRIPT LOAD and EVAL cached in snapshots and the
    /// append-only file, so that EVALSHA works after a restart
    /// (`lua-persist-scripts`; Redis 7 keeps none).
    pub lua_persist_scripts: bool,
    /// `rdb-key-save-delay`, Redis's test knob: microseconds a background
    /// save waits per key it writes (-N: one microsecond for one key in N).
    pub rdb_key_save_delay: i32,
    /// `key-load-delay`, Redis's test knob: microseconds a load waits per
    /// key it stores (-N: one microsecond for one key in N).
    pub key_load_delay: i32,
    /// `repl-backlog-size`: the replication stream's last bytes kept for
    /// replicas that reconnect (PSYNC `+CONTINUE`).
    pub repl_backlog_size: u64,
    /// `repl-backlog-ttl`: seconds without a replica before the backlog is
    /// freed (0: never).
    pub repl_backlog_ttl: u64,
    /// `min-replicas-to-write`: writes are refused (NOREPLICAS) unless this
    /// many replicas acknowledged within `min-replicas-max-lag` seconds
    /// (0: no such check).
    pub min_replicas_to_write: u64,
    /// `min-replicas-max-lag`, in seconds (0: no such check).
    pub min_replicas_max_lag: u64,
    /// `replicaof <host> <port>`: the master to follow (REPLICAOF sets it
    /// at run time).
    pub replicaof: Option<(String, u16)>,
    /// `masteruser`: the user this replica authenticates to its master as
    /// (AUTH user password; empty: AUTH password).
    pub masteruser: String,
    /// `masterauth`: the password this replica authenticates with.
    pub masterauth: String,
    /// `replica-read-only`: clients' writes are refused on a replica.
    pub replica_read_only: bool,
    /// `replica-serve-stale-data`: a replica whose link is down still
    /// answers with the data it has (no: MASTERDOWN).
    pub replica_serve_stale_data: bool,
    /// `replica-ignore-disk-write-errors`: a replica that cannot write to
    /// disk goes on applying its master's writes (no: it stops).
    pub replica_ignore_disk_write_errors: bool,
    /// `repl-timeout`, seconds: a master silent this long is a lost link.
    pub repl_timeout: u64,
    /// `repl-ping-replica-period`, seconds: how often a master PINGs its
    /// replicas.
    pub repl_ping_replica_period: u64,
    /// `repl-diskless-sync` (accepted and shown: tally takes a full sync's
    /// snapshot in memory, never on disk, and sends it sized, `$<len>`,
    /// which every replica reads; Redis's `$EOF:` framing exists because
    /// its child streams a file of unknown size).
    pub repl_diskless_sync: bool,
    /// `repl-diskless-sync-delay`, seconds (accepted and shown: each
    /// replica gets its own snapshot at once, so none waits for others).
    pub repl_diskless_sync_delay: u64,
    /// `repl-diskless-sync-max-replicas` (accepted and shown, as above).
    pub repl_diskless_sync_max_replicas: u64,
    /// `repl-diskless-load`: disabled, on-empty-db or swapdb (accepted and
    /// shown: a replica always receives the snapshot into memory, then
    /// swaps it in whole, which is swapdb's behaviour without its cost on
    /// disk).
    pub repl_diskless_load: String,
    /// `replica-priority` (INFO's slave_priority; Sentinel promotes the
    /// lowest non-zero).
    pub replica_priority: u64,
    /// `replica-announce-ip`: the address a replica tells its master to
    /// list (REPLCONF ip-address), behind NAT.
    pub replica_announce_ip: String,
    /// `replica-announce-port`: the port it tells (0: its own).
    pub replica_announce_port: u16,
    /// `replica-announced`: Sentinel lists this replica.
    pub replica_announced: bool,
    /// Memory one worker's Lua VM may use (`lua-memory-limit`); a script
    /// that needs more fails with an error instead of growing the server.
    pub lua_memory_limit: u64,
    /// `slowlog-log-slower-than` in microseconds (negative: off).
    pub slowlog_log_slower_than: i64,
    /// `slowlog-max-len`.
    pub slowlog_max_len: u64,
    /// `metrics-port`: the Prometheus endpoint's port (0: off).
    pub metrics_port: u16,
    /// `save`: BGSAVE after `seconds` when at least `changes` writes were
    /// made since the last save (Redis's default: 3600 1 300 100 60 10000).
    pub save_points: Vec<(u64, u64)>,
    /// `shutdown-on-sigterm`: what SIGTERM's shutdown does with the
    /// dataset (default: save when save points are configured, as a plain
    /// SHUTDOWN does).
    pub shutdown_on_sigterm: ShutdownFlags,
    /// `shutdown-on-sigint`: the same for SIGINT.
    pub shutdown_on_sigint: ShutdownFlags,
    /// `shutdown-timeout`: seconds a shutdown waits for lagging replicas
    /// to catch up (0: it does not wait).
    pub shutdown_timeout: u64,
    /// `stop-writes-on-bgsave-error`: refuse writes (MISCONF) while the
    /// last background save failed and save points are set.
    pub stop_writes_on_bgsave_error: bool,
    /// `dir`: where the snapshot file is.
    pub dir: String,
    /// `dbfilename`: the snapshot file's name.
    pub dbfilename: String,
    /// `rdbcompression`: LZF for long strings in snapshots and DUMP.
    pub rdbcompression: bool,
    /// `rdbchecksum`: a CRC64 trailer on snapshots.
    pub rdbchecksum: bool,
    /// `rdb-skip-unsupported` (tally's): load a snapshot's other keys when
    /// it holds a stream or a function library.
    pub rdb_skip_unsupported: bool,
    /// The `tls-*` options.
    pub tls: crate::config::TlsSettings,
    /// `cluster-enabled`: run as a Redis Cluster node.
    pub cluster_enabled: bool,
    /// `cluster-config-file`: the node's nodes.conf, in `dir`.
    pub cluster_config_file: String,
    /// `cluster-require-full-coverage`: refuse keyed commands unless every
    /// slot is served.
    pub cluster_require_full_coverage: bool,
    /// `cluster-allow-reads-when-down`.
    pub cluster_allow_reads_when_down: bool,
    /// `cluster-allow-pubsubshard-when-down`.
    pub cluster_allow_pubsubshard_when_down: bool,
    /// `cluster-node-timeout` in ms.
    pub cluster_node_timeout: u64,
    /// `cluster-replica-validity-factor`: how stale a replica's data may
    /// be, in node timeouts, for it to stand for election (0: any).
    pub cluster_replica_validity_factor: u64,
    /// `cluster-replica-no-failover`: no automatic failover.
    pub cluster_replica_no_failover: bool,
    /// `cluster-allow-replica-migration`.
    pub cluster_allow_replica_migration: bool,
    /// `cluster-migration-barrier`: working replicas a master keeps before
    /// one of them may move to a master left without any.
    pub cluster_migration_barrier: u64,
    /// `cluster-port`: the bus port (0: the client port + 10000).
    pub cluster_port: u16,
    /// `cluster-announce-ip`: the IP given to other nodes ("": the one
    /// they see).
    pub cluster_announce_ip: String,
    /// `cluster-announce-port`: the client port given to other nodes (0:
    /// the real one).
    pub cluster_announce_port: u16,
    /// `cluster-announce-bus-port`: the bus port given to other nodes (0:
    /// the real one).
    pub cluster_announce_bus_port: u16,
    /// `cluster-announce-tls-port`: with `tls-cluster`, the TLS port given
    /// to other nodes (0: the real one).
    pub cluster_announce_tls_port: u16,
    /// `cluster-announce-hostname` ("": none).
    pub cluster_announce_hostname: String,
    /// `cluster-preferred-endpoint-type`: how redirects and CLUSTER SLOTS
    /// name a node.
    pub cluster_preferred_endpoint_type: crate::config::EndpointType,
    /// `protected-mode`: with no password on the default user, refuse
    /// clients from outside the loopback interface.
    pub protected_mode: bool,
    /// `enable-protected-configs`: who may CONFIG SET `dir` and
    /// `dbfilename`.
    pub enable_protected_configs: ProtectedAction,
    /// `enable-debug-command`: who may run the DEBUG subcommands that show
    /// the server's internals (OBJECT).
    pub enable_debug_command: ProtectedAction,
    /// `enable-module-command`: who may run MODULE LOAD, LOADEX and UNLOAD
    /// (which, loading no modules, answer Redis's errors where allowed).
    pub enable_module_command: ProtectedAction,
    /// `user` directives: each user's name and rules, applied at start.
    pub users: Vec<Vec<Vec<u8>>>,
    /// `aclfile`: users are loaded from (and ACL SAVE writes) this file.
    pub aclfile: String,
    /// `acllog-max-len`: ACL LOG entries kept.
    pub acllog_max_len: u64,
    /// `appendonly`: keep the append-only file.
    pub appendonly: bool,
    /// `appendfilename`: the log's file names start with it.
    pub appendfilename: String,
    /// `appenddirname`: the log's directory, inside `dir`.
    pub appenddirname: String,
    /// `appendfsync`: when the log is fsynced.
    pub appendfsync: crate::config::Fsync,
    /// `aof-load-truncated`: a log cut short at its end loads up to its
    /// last whole command.
    pub aof_load_truncated: bool,
    /// `auto-aof-rewrite-percentage`: growth over the base that starts a
    /// rewrite (0: never).
    pub auto_aof_rewrite_percentage: u64,
    /// `auto-aof-rewrite-min-size`: no automatic rewrite below this size.
    pub auto_aof_rewrite_min_size: u64,
    /// `no-appendfsync-on-rewrite`: no fsync while a rewrite runs.
    pub no_appendfsync_on_rewrite: bool,
    /// `aof-rewrite-incremental-fsync` (accepted; a rewrite fsyncs its base
    /// once, at its end).
    pub aof_rewrite_incremental_fsync: bool,
    /// Redis's encoding thresholds: `set-max-intset-entries`,
    /// `hash-max-listpack-entries` / `-value`, `zset-max-listpack-entries` /
    /// `-value` (and their `ziplist` aliases).
    pub encodings: crate::store::object::Encodings,
    /// `list-max-listpack-size` (alias `list-max-ziplist-size`): Redis's
    /// list node size. Kept for CONFIG GET and files written for Redis;
    /// tally's list nodes have their own layout, so it changes nothing here.
    pub list_max_listpack_size: i32,
    /// `list-compress-depth`: how many nodes at each end of a Redis list
    /// stay uncompressed. Kept as `list-max-listpack-size` is; tally does
    /// not compress lists.
    pub list_compress_depth: i32,
    /// `tracking-table-max-keys`: keys the CLIENT TRACKING table remembers
    /// before it invalidates some to make room (0: no limit).
    pub tracking_table_max_keys: u64,
    /// `latency-monitor-threshold` in milliseconds (0: the monitor is off).
    pub latency_monitor_threshold_ms: u64,
    /// `latency-tracking`: keep per-command latency histograms.
    pub latency_tracking: bool,
    /// `latency-tracking-info-percentiles`: what INFO latencystats reports.
    pub latency_tracking_info_percentiles: Vec<f64>,
    /// `client-output-buffer-limit pubsub <hard> <soft> <seconds>`.
    pub pubsub_output_limit: crate::config::OutputLimit,
    /// `client-output-buffer-limit replica`: MONITOR clients' limit.
    pub replica_output_limit: crate::config::OutputLimit,
    /// Values of the Redis parameters tally accepts but does not act on
    /// (config/accepted.rs), by name; a missing one shows Redis's default.
    pub accepted: std::collections::BTreeMap<&'static str, String>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("bind", &self.bind)
            .field("port", &self.port)
            .field("maxmemory", &self.maxmemory)
            .field("requirepass", &self.requirepass.as_ref().map(|_| "<set>"))
            .field("databases", &self.databases)
            .field("maxclients", &self.maxclients)
            .field("timeout_secs", &self.timeout_secs)
            .field("shards", &self.shards)
            .finish_non_exhaustive()
    }
}

/// Shards per database when none is configured: enough that the worker threads
/// rarely meet on one lock, few enough that small databases stay small and
/// that a run holding every shard takes few locks.
///
/// Both sides were measured on two workers. A script holds its shards for
/// its whole run, so at 16 shards a token-bucket script (three commands)
/// met the other worker's lock on one call in thirty; at 64 it cost 11%
/// less CPU. But a run holding every shard (EVAL inside MULTI) locks
/// shards × databases: 42 µs of server CPU per transaction at 64 shards
/// against 25 µs at 16. Holding every shard cheaply comes first.
pub fn default_shards() -> usize {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    (cores * 8).next_power_of_two()
}

impl Default for Config {
    fn default() -> Config {
        Config {
            accepted: std::collections::BTreeMap::new(),
            config_file: None,
            bind: vec!["127.0.0.1".to_string()],
            port: 6379,
            maxmemory: 0,
            requirepass: None,
            databases: 16,
            maxclients: 10000,
            timeout_secs: 0,
            proto_max_bulk_len: 512 * 1024 * 1024,
            prefetch_batch_max_size: 16,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            loglevel: "notice".to_string(),
            logfile: String::new(),
            syslog_enabled: false,
            reported_redis_version: String::new(),
            syslog_ident: "redis".to_string(),
            syslog_facility: "local0".to_string(),
            pidfile: String::new(),
            supervised: "no".to_string(),
            unixsocket: String::new(),
            unixsocketperm: 0,
            acl_pubsub_all_channels: false,
            notify_keyspace_events: 0,
            shards: default_shards(),
            hz: 10,
            clock: Arc::new(SystemClock),
            io_threads: 0,
            busy_reply_threshold_ms: 5000,
            lua_native_scripts: true,
            lua_persist_scripts: true,
            rdb_key_save_delay: 0,
            key_load_delay: 0,
            repl_backlog_size: 1024 * 1024,
            repl_backlog_ttl: 3600,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 10,
            replicaof: None,
            masteruser: String::new(),
            masterauth: String::new(),
            replica_read_only: true,
            replica_serve_stale_data: true,
            replica_ignore_disk_write_errors: false,
            repl_timeout: 60,
            repl_ping_replica_period: 10,
            repl_diskless_sync: true,
            repl_diskless_sync_delay: 5,
            repl_diskless_sync_max_replicas: 0,
            repl_diskless_load: "disabled".to_string(),
            replica_priority: 100,
            replica_announce_ip: String::new(),
            replica_announce_port: 0,
            replica_announced: true,
            lua_memory_limit: 256 * 1024 * 1024,
            slowlog_log_slower_than: 10_000,
            slowlog_max_len: 128,
            metrics_port: 0,
            latency_monitor_threshold_ms: 0,
            tracking_table_max_keys: 1_000_000,
            encodings: Default::default(),
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            save_points: vec![(3600, 1), (300, 100), (60, 10000)],
            shutdown_on_sigterm: ShutdownFlags::default(),
            shutdown_on_sigint: ShutdownFlags::default(),
            shutdown_timeout: 10,
            stop_writes_on_bgsave_error: true,
            dir: ".".to_string(),
            dbfilename: "dump.rdb".to_string(),
            rdbcompression: true,
            rdbchecksum: true,
            rdb_skip_unsupported: false,
            tls: crate::config::TlsSettings::default(),
            protected_mode: true,
            enable_protected_configs: ProtectedAction::No,
            enable_debug_command: ProtectedAction::No,
            enable_module_command: ProtectedAction::No,
            cluster_enabled: false,
            cluster_config_file: "nodes.conf".to_string(),
            cluster_require_full_coverage: true,
            cluster_allow_reads_when_down: false,
            cluster_allow_pubsubshard_when_down: true,
            cluster_node_timeout: 15000,
            cluster_replica_validity_factor: 10,
            cluster_replica_no_failover: false,
            cluster_allow_replica_migration: true,
            cluster_migration_barrier: 1,
            cluster_port: 0,
            cluster_announce_ip: String::new(),
            cluster_announce_port: 0,
            cluster_announce_bus_port: 0,
            cluster_announce_tls_port: 0,
            cluster_announce_hostname: String::new(),
            cluster_preferred_endpoint_type: crate::config::EndpointType::Ip,
            users: Vec::new(),
            aclfile: String::new(),
            acllog_max_len: 128,
            appendonly: false,
            appendfilename: "appendonly.aof".to_string(),
            appenddirname: "appendonlydir".to_string(),
            appendfsync: crate::config::Fsync::EverySec,
            aof_load_truncated: true,
            auto_aof_rewrite_percentage: 100,
            auto_aof_rewrite_min_size: 64 * 1024 * 1024,
            no_appendfsync_on_rewrite: false,
            aof_rewrite_incremental_fsync: true,
            latency_tracking: true,
            latency_tracking_info_percentiles: vec![50.0, 99.0, 99.9],
            pubsub_output_limit: crate::config::OutputLimit::PUBSUB_DEFAULT,
            replica_output_limit: crate::config::OutputLimit::REPLICA_DEFAULT,
        }
    }
}

/// A configuration error, phrased for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}
