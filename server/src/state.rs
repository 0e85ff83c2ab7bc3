//! State shared by every connection: the store, live configuration, the client
//! registry and statistics.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;

use crate::catalog::registry;
pub use crate::clients::{ClientInfo, ClientIo, ClientRegistry};
use crate::config::Config;
use crate::stats::Stats;
use crate::store::{Clock, Store};

/// Server-wide state, one per running server.
pub struct Shared {
    /// The keyspace.
    pub store: Store,
    /// SLOWLOG's entries and settings.
    pub slowlog: crate::slowlog::SlowLog,
    /// Live configuration (CONFIG SET writes here).
    pub config: RwLock<Config>,
    /// `maxmemory`, read on every write, kept outside the lock.
    pub maxmemory: AtomicU64,
    /// The encoding thresholds (`set-max-intset-entries`,
    /// `hash-max-listpack-*`, `zset-max-listpack-*`) writes convert at.
    pub encodings: crate::store::object::EncodingLimits,
    /// `timeout` in seconds, read by every connection on every read.
    pub idle_timeout_secs: AtomicU64,
    /// `proto-max-bulk-len`, read while framing.
    pub proto_max_bulk_len: AtomicU64,
    /// `prefetch-batch-max-size`, read before each look ahead and by each
    /// command that locks several keys (0 and 1 turn prefetching off).
    pub prefetch_batch_max_size: AtomicUsize,
    /// `client-query-buffer-limit`, read after every socket read.
    pub client_query_buffer_limit: AtomicU64,
    /// The clock every time-dependent command reads.
    pub clock: Arc<dyn Clock>,
    /// Connected clients.
    pub clients: ClientRegistry,
    /// Counters for INFO.
    pub stats: Stats,
    /// When the server started (uptime).
    pub started: Instant,
    /// Unix seconds at start.
    pub started_unix: u64,
    /// Snapshot state (LASTSAVE, INFO persistence).
    pub persistence: crate::persistence::PersistenceState,
    /// The append-only file.
    pub aof: crate::persistence::aof::Aof,
    /// Users and their permissions.
    pub acl: crate::acl::Acl,
    /// The TLS acceptor.
    pub tls: crate::net::tls::Tls,
    /// This node's cluster state, with `cluster-enabled yes` (set at start).
    pub cluster: std::sync::OnceLock<crate::cluster::Cluster>,
    /// The cluster bus's links to other nodes.
    pub bus_links: crate::net::bus::Links,
    /// The server's own handle, for work that outlives a command (BGSAVE's
    /// thread); set when the server starts.
    pub itself: std::sync::OnceLock<std::sync::Weak<Shared>>,
    /// The address actually bound.
    pub local_addr: Mutex<Option<SocketAddr>>,
    /// The client ports' sockets, once the server listens (CONFIG SET bind
    /// and port replace them).
    pub listening: Mutex<Option<crate::net::listener::Listening>>,
    /// Set once shutdown began; notified to stop the listener.
    pub shutting_down: AtomicBool,
    /// The active expiry runs (DEBUG SET-ACTIVE-EXPIRE 0 stops it, for
    /// tests that need a key past its deadline to stay in the table).
    pub active_expire: AtomicBool,
    /// Scripts may call commands flagged `noscript` (DEBUG
    /// SET-DISABLE-DENY-SCRIPTS 1, which Redis's tests use to call CLIENT
    /// LIST or DEBUG from a script).
    pub scripts_may_call_noscript: AtomicBool,
    /// Turns true when shutdown begins; the listener and sweeper watch it.
    pub shutdown: tokio::sync::watch::Sender<bool>,
    /// Unique id of this run (INFO run_id).
    pub run_id: String,
    /// Loaded scripts and script runs in progress.
    pub scripts: crate::scripting::Scripts,
    /// Channel and pattern subscriptions.
    pub pubsub: Arc<crate::pubsub::PubSub>,
    /// Keyspace notifications (`notify-keyspace-events`), and the store's
    /// key observer.
    pub keyspace_events: Arc<crate::keyspace_events::KeyspaceEvents>,
    /// Clients blocked on keys (BLPOP and its kin).
    pub blocked: crate::blocking::Blocked,
    /// CLIENT PAUSE.
    pub pause: crate::pause::ClientPause,
    /// MONITOR clients.
    pub monitors: crate::monitor::Monitors,
    /// CLIENT TRACKING's table; the store tells it of every modified key.
    pub tracking: Arc<crate::tracking::Tracking>,
    /// Notified when a replica acknowledges an offset (REPLCONF ACK), for
    /// the clients in WAIT.
    pub replica_acks: Notify,
    /// A shutdown waiting for its replicas to catch up (`shutdown-timeout`).
    pub pending_shutdown: PendingShutdown,
    /// `min-replicas-to-write` and `min-replicas-max-lag`, read by every
    /// write command without the config lock.
    pub min_replicas: (AtomicU64, AtomicU64),
    /// The master this server replicates, if any (REPLICAOF).
    pub master_link: crate::master_link::MasterLink,
    /// A coordinated failover under way, if any (FAILOVER).
    pub failover: crate::failover::Failover,
}

impl Shared {
    /// Whether a command naming several keys asks for their memory
    /// before its lookups: prefetching is on and the keyspace is past the
    /// caches (see `store::shard::prefetch`).
    #[inline]
    pub fn prefetching(&self) -> bool {
        self.prefetch_batch_max_size.load(Ordering::Relaxed) > 1 && self.store.outgrows_cache()
    }

    /// Builds the state for `config`.
    pub fn new(config: Config) -> Shared {
        let reported = &config.reported_redis_version;
        crate::catalog::set_reported_version((!reported.is_empty()).then_some(reported.as_str()));
        let clock = config.clock.clone();
        let tracking = Arc::new(crate::tracking::Tracking::default());
        let pubsub = Arc::new(crate::pubsub::PubSub::default());
        let keyspace_events = Arc::new(crate::keyspace_events::KeyspaceEvents::new(
            config.notify_keyspace_events,
            pubsub.clone(),
            tracking.clone(),
        ));
        let store = Store::new(config.databases, config.shards, keyspace_events.clone());
        let started_unix = clock.now_ms() / 1000;
        let run_id = crate::util::random_hex_id();
        let busy_threshold = config.busy_reply_threshold_ms;
        let pubsub_limit = config.pubsub_output_limit;
        let native_scripts = config.lua_native_scripts;
        let lua_memory_limit = config.lua_memory_limit;
        let slowlog = crate::slowlog::SlowLog::new(
            config.slowlog_log_slower_than,
            config.slowlog_max_len as usize,
        );
        let shared = Shared {
            store,
            tracking,
            slowlog,
            maxmemory: AtomicU64::new(config.maxmemory),
            encodings: crate::store::object::EncodingLimits::new(config.encodings),
            idle_timeout_secs: AtomicU64::new(config.timeout_secs),
            proto_max_bulk_len: AtomicU64::new(config.proto_max_bulk_len),
            prefetch_batch_max_size: AtomicUsize::new(config.prefetch_batch_max_size),
            client_query_buffer_limit: AtomicU64::new(config.client_query_buffer_limit),
            config: RwLock::new(config),
            clock,
            clients: ClientRegistry::default(),
            stats: Stats::new(registry().len()),
            started: Instant::now(),
            started_unix,
            local_addr: Mutex::new(None),
            listening: Mutex::new(None),
            shutting_down: AtomicBool::new(false),
            active_expire: AtomicBool::new(true),
            scripts_may_call_noscript: AtomicBool::new(false),
            shutdown: tokio::sync::watch::Sender::new(false),
            run_id,
            scripts: crate::scripting::Scripts::default(),
            pubsub,
            keyspace_events,
            blocked: crate::blocking::Blocked::default(),
            pause: crate::pause::ClientPause::default(),
            monitors: crate::monitor::Monitors::default(),
            replica_acks: Notify::new(),
            pending_shutdown: PendingShutdown::default(),
            min_replicas: (AtomicU64::new(0), AtomicU64::new(0)),
            master_link: crate::master_link::MasterLink::default(),
            failover: crate::failover::Failover::default(),
            persistence: crate::persistence::PersistenceState::new(started_unix),
            aof: crate::persistence::aof::Aof::default(),
            acl: crate::acl::Acl::default(),
            tls: crate::net::tls::Tls::default(),
            cluster: std::sync::OnceLock::new(),
            bus_links: crate::net::bus::Links::default(),
            itself: std::sync::OnceLock::new(),
        };
        shared
            .scripts
            .busy_threshold_ms
            .store(busy_threshold, Ordering::Relaxed);
        shared
            .scripts
            .native_enabled
            .store(native_scripts, Ordering::Relaxed);
        shared
            .scripts
            .memory_limit
            .store(lua_memory_limit, Ordering::Relaxed);
        shared.pubsub.set_limit(pubsub_limit);
        shared
            .monitors
            .set_limit(shared.config.read().replica_output_limit);
        shared.install_latency_settings(&shared.config.read());
        shared.scripts.preload_known();
        shared.install_users();
        let backlog_size = shared.config.read().repl_backlog_size;
        shared.store.feed().set_backlog_size(backlog_size);
        shared.install_min_replicas(&shared.config.read());
        shared.install_replica_settings(&shared.config.read());
        let replicaof = shared.config.read().replicaof.clone();
        if let Some((host, port)) = replicaof {
            shared
                .master_link
                .set_target(Some(crate::master_link::Target { host, port }));
            shared.store.feed().start_following();
        }
        shared
    }

    /// The users the configuration gives: `requirepass` as the default
    /// user's password, then each `user` directive (a `user default` line
    /// wins). An `aclfile` is loaded by the server's start, which can fail.
    fn install_users(&self) {
        let config = self.config.read();
        self.acl.set_requirepass(config.requirepass.as_deref());
        self.acl
            .channels_by_default
            .store(config.acl_pubsub_all_channels, Ordering::Relaxed);
        for words in &config.users {
            if let Ok(user) = crate::acl::file::parse_user(words, config.acl_pubsub_all_channels) {
                self.acl.put(user);
            }
        }
        self.acl
            .log_max_len
            .store(config.acllog_max_len, Ordering::Relaxed);
    }

    /// Installs a new configuration (CONFIG SET), including the copies of hot
    /// values that are read without the lock.
    fn install_min_replicas(&self, config: &Config) {
        self.min_replicas
            .0
            .store(config.min_replicas_to_write, Ordering::Relaxed);
        self.min_replicas
            .1
            .store(config.min_replicas_max_lag, Ordering::Relaxed);
    }

    /// The replica settings commands read without the config lock.
    fn install_replica_settings(&self, config: &Config) {
        let link = &self.master_link;
        link.read_only
            .store(config.replica_read_only, Ordering::Relaxed);
        link.serve_stale
            .store(config.replica_serve_stale_data, Ordering::Relaxed);
    }

    /// Installs a changed configuration (CONFIG SET).
    pub fn install_config(&self, config: Config) {
        self.install_replica_settings(&config);
        self.maxmemory.store(config.maxmemory, Ordering::Relaxed);
        self.store.feed().set_backlog_size(config.repl_backlog_size);
        self.install_min_replicas(&config);
        self.encodings.set(config.encodings);
        self.keyspace_events
            .set_flags(config.notify_keyspace_events);
        self.idle_timeout_secs
            .store(config.timeout_secs, Ordering::Relaxed);
        self.proto_max_bulk_len
            .store(config.proto_max_bulk_len, Ordering::Relaxed);
        self.prefetch_batch_max_size
            .store(config.prefetch_batch_max_size, Ordering::Relaxed);
        self.client_query_buffer_limit
            .store(config.client_query_buffer_limit, Ordering::Relaxed);
        self.scripts
            .busy_threshold_ms
            .store(config.busy_reply_threshold_ms, Ordering::Relaxed);
        self.scripts
            .native_enabled
            .store(config.lua_native_scripts, Ordering::Relaxed);
        self.scripts
            .memory_limit
            .store(config.lua_memory_limit, Ordering::Relaxed);
        self.pubsub.set_limit(config.pubsub_output_limit);
        self.monitors.set_limit(config.replica_output_limit);
        self.slowlog.configure(
            config.slowlog_log_slower_than,
            config.slowlog_max_len as usize,
        );
        self.install_latency_settings(&config);
        self.persistence.refresh_write_refusal(&config);
        if let Some(cluster) = self.cluster.get() {
            cluster
                .allow_reads_when_down
                .store(config.cluster_allow_reads_when_down, Ordering::Relaxed);
            cluster.allow_pubsubshard_when_down.store(
                config.cluster_allow_pubsubshard_when_down,
                Ordering::Relaxed,
            );
            cluster.announce(&config);
        }
        if self.config.read().requirepass != config.requirepass {
            self.acl.set_requirepass(config.requirepass.as_deref());
        }
        self.acl
            .log_max_len
            .store(config.acllog_max_len, Ordering::Relaxed);
        self.acl
            .channels_by_default
            .store(config.acl_pubsub_all_channels, Ordering::Relaxed);
        self.tracking
            .set_max_keys(config.tracking_table_max_keys as usize);
        *self.config.write() = config;
    }

    fn install_latency_settings(&self, config: &Config) {
        self.stats
            .latency_tracking
            .store(config.latency_tracking, Ordering::Relaxed);
        self.stats
            .latency_monitor_threshold_ms
            .store(config.latency_monitor_threshold_ms, Ordering::Relaxed);
    }

    /// Begins a graceful shutdown: stop accepting, let connections finish
    /// the replies they owe, then exit.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.scripts.stop_all();
        self.shutdown.send_replace(true);
        self.clients.kill_all();
    }

    /// True when writes that may grow memory must be refused.
    pub fn over_maxmemory(&self) -> bool {
        self.over_maxmemory_with(0)
    }

    /// True when the keyspace plus `pending` bytes (the arguments of the
    /// command about to run) pass maxmemory. Redis counts a command's
    /// arguments in used memory while it runs, so one write larger than
    /// what is left is refused, not accepted and then found over the limit.
    pub fn over_maxmemory_with(&self, pending: usize) -> bool {
        let limit = self.maxmemory.load(Ordering::Relaxed);
        limit != 0 && (self.store.used_memory() as u64).saturating_add(pending as u64) > limit
    }
}

/// A shutdown that waits, writes paused, for lagging replicas to
/// acknowledge everything, up to `shutdown-timeout` (Redis 7.0's
/// isShutdownInitiated state).
#[derive(Default)]
pub struct PendingShutdown {
    /// The waiting shutdown's flags and deadline, if one waits.
    pub waiting: Mutex<Option<(crate::config::ShutdownFlags, std::time::Instant)>>,
    /// Woken when the waiting shutdown is decided: it went ahead (the
    /// server stops), its save failed, or SHUTDOWN ABORT cancelled it.
    pub decided: Notify,
}
