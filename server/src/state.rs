//! State shared by every connection: the store, live configuration, the client
//! registry and statistics.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use hashbrown::HashMap;
use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;

use crate::catalog::registry;
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
    /// Set once shutdown began; notified to stop the listener.
    pub shutting_down: AtomicBool,
    /// Turns true when shutdown begins; the listener and sweeper watch it.
    pub shutdown: tokio::sync::watch::Sender<bool>,
    /// Unique id of this run (INFO run_id).
    pub run_id: String,
    /// Loaded scripts and script runs in progress.
    pub scripts: crate::scripting::Scripts,
    /// Channel and pattern subscriptions.
    pub pubsub: crate::pubsub::PubSub,
    /// CLIENT PAUSE.
    pub pause: crate::pause::ClientPause,
    /// MONITOR clients.
    pub monitors: crate::monitor::Monitors,
}

impl Shared {
    /// Builds the state for `config`.
    pub fn new(config: Config) -> Shared {
        let clock = config.clock.clone();
        let store = Store::new(config.databases, config.shards);
        let started_unix = clock.now_ms() / 1000;
        let run_id = {
            // 40 hex characters, as Redis's run_id; uniqueness is all that matters.
            use std::hash::{BuildHasher, Hasher};
            let mut out = String::with_capacity(40);
            let state = hashbrown::DefaultHashBuilder::default();
            for i in 0..3u64 {
                let mut h = state.build_hasher();
                h.write_u64(i ^ clock.now_us());
                out.push_str(&format!("{:016x}", h.finish()));
            }
            out.truncate(40);
            out
        };
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
            slowlog,
            maxmemory: AtomicU64::new(config.maxmemory),
            encodings: crate::store::object::EncodingLimits::new(config.encodings),
            idle_timeout_secs: AtomicU64::new(config.timeout_secs),
            proto_max_bulk_len: AtomicU64::new(config.proto_max_bulk_len),
            client_query_buffer_limit: AtomicU64::new(config.client_query_buffer_limit),
            config: RwLock::new(config),
            clock,
            clients: ClientRegistry::default(),
            stats: Stats::new(registry().len()),
            started: Instant::now(),
            started_unix,
            local_addr: Mutex::new(None),
            shutting_down: AtomicBool::new(false),
            shutdown: tokio::sync::watch::Sender::new(false),
            run_id,
            scripts: crate::scripting::Scripts::default(),
            pubsub: crate::pubsub::PubSub::default(),
            pause: crate::pause::ClientPause::default(),
            monitors: crate::monitor::Monitors::default(),
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
        shared
    }

    /// The users the configuration gives: `requirepass` as the default
    /// user's password, then each `user` directive (a `user default` line
    /// wins). An `aclfile` is loaded by the server's start, which can fail.
    fn install_users(&self) {
        let config = self.config.read();
        self.acl.set_requirepass(config.requirepass.as_deref());
        for words in &config.users {
            if let Ok(user) = crate::acl::file::parse_user(words) {
                self.acl.put(user);
            }
        }
        self.acl
            .log_max_len
            .store(config.acllog_max_len, Ordering::Relaxed);
    }

    /// Installs a new configuration (CONFIG SET), including the copies of hot
    /// values that are read without the lock.
    pub fn install_config(&self, config: Config) {
        self.maxmemory.store(config.maxmemory, Ordering::Relaxed);
        self.encodings.set(config.encodings);
        self.idle_timeout_secs
            .store(config.timeout_secs, Ordering::Relaxed);
        self.proto_max_bulk_len
            .store(config.proto_max_bulk_len, Ordering::Relaxed);
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
        self.store
            .tracking()
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

/// What other connections may read or ask of a client (CLIENT LIST / KILL).
pub struct ClientInfo {
    /// CLIENT ID.
    pub id: u64,
    /// Peer address.
    pub addr: SocketAddr,
    /// Local address.
    pub laddr: SocketAddr,
    /// Connected to the TLS port (a TLS cluster's redirects name TLS ports
    /// to it, plaintext ports to the others).
    pub tls: bool,
    /// Unix ms at connect.
    pub created_ms: u64,
    /// Unix ms of the last command.
    pub last_interaction_ms: AtomicU64,
    /// Selected database.
    pub db: AtomicUsize,
    /// RESP version (2 or 3).
    pub resp: AtomicU8,
    /// CLIENT SETNAME.
    pub name: Mutex<Option<Vec<u8>>>,
    /// CLIENT SETINFO LIB-NAME / LIB-VER.
    pub lib: Mutex<(String, String)>,
    /// The user it authenticated as (CLIENT LIST `user=`).
    pub user: Mutex<String>,
    /// Stats index of the last command (`usize::MAX` before the first).
    pub last_command: AtomicUsize,
    /// Set by CLIENT KILL or shutdown; the connection closes when it sees it.
    pub killed: AtomicBool,
    /// Wakes the connection so it notices `killed` while idle.
    pub kill_notify: Notify,
    /// Wakes an idle connection to give its buffers back (see
    /// [`ClientRegistry::release_idle_buffers`]).
    pub release_notify: Notify,
    /// Buffers and state as of the connection's last batch (CLIENT LIST).
    pub io: ClientIo,
    /// CLIENT NO-EVICT ON.
    pub no_evict: AtomicBool,
    /// In MONITOR mode.
    pub monitoring: AtomicBool,
    /// CLIENT TRACKING: -1 off, else the redirect id (0: none), for CLIENT LIST.
    pub tracking_redirect: AtomicI64,
    /// CLIENT TRACKING in BCAST mode.
    pub tracking_bcast: AtomicBool,
}

/// What a connection publishes of its buffers and state for CLIENT LIST,
/// once per read and per batch (relaxed stores: a listing is a snapshot).
#[derive(Debug)]
pub struct ClientIo {
    /// The socket's file descriptor (-1 where there is none).
    pub fd: AtomicI64,
    /// Unprocessed bytes in the input buffer.
    pub qbuf: AtomicUsize,
    /// Free space in the input buffer.
    pub qbuf_free: AtomicUsize,
    /// Capacity of the reply buffer (`rbs`).
    pub reply_buffer: AtomicUsize,
    /// Largest reply buffer of the connection (`rbp`).
    pub reply_buffer_peak: AtomicUsize,
    /// Bytes of replies being written to a peer that has not read them yet.
    pub writing: AtomicUsize,
    /// Bytes of pub/sub messages, invalidations or MONITOR lines queued for
    /// the connection and not yet written (its output budget's count).
    pub queued: AtomicU64,
    /// Commands queued since MULTI (-1 outside a transaction).
    pub multi: AtomicI64,
    /// Bytes of the queued commands' arguments.
    pub multi_mem: AtomicUsize,
    /// Channel subscriptions.
    pub sub: AtomicUsize,
    /// Pattern subscriptions.
    pub psub: AtomicUsize,
    /// Shard channel subscriptions.
    pub ssub: AtomicUsize,
}

impl Default for ClientIo {
    fn default() -> ClientIo {
        ClientIo {
            fd: AtomicI64::new(-1),
            qbuf: AtomicUsize::new(0),
            qbuf_free: AtomicUsize::new(0),
            reply_buffer: AtomicUsize::new(0),
            reply_buffer_peak: AtomicUsize::new(0),
            writing: AtomicUsize::new(0),
            queued: AtomicU64::new(0),
            multi: AtomicI64::new(-1),
            multi_mem: AtomicUsize::new(0),
            sub: AtomicUsize::new(0),
            psub: AtomicUsize::new(0),
            ssub: AtomicUsize::new(0),
        }
    }
}

impl ClientIo {
    /// Records the input buffer's fill.
    pub fn input(&self, len: usize, capacity: usize) {
        self.qbuf.store(len, Ordering::Relaxed);
        self.qbuf_free
            .store(capacity.saturating_sub(len), Ordering::Relaxed);
    }

    /// Records the reply buffer's size.
    pub fn output(&self, capacity: usize) {
        self.reply_buffer.store(capacity, Ordering::Relaxed);
        self.reply_buffer_peak
            .fetch_max(capacity, Ordering::Relaxed);
    }
}

impl ClientInfo {
    /// A client that connected from `addr` to `laddr` at `now_ms`.
    pub fn new(id: u64, addr: SocketAddr, laddr: SocketAddr, now_ms: u64) -> ClientInfo {
        ClientInfo {
            id,
            addr,
            laddr,
            tls: false,
            created_ms: now_ms,
            last_interaction_ms: AtomicU64::new(now_ms),
            db: AtomicUsize::new(0),
            resp: AtomicU8::new(2),
            name: Mutex::new(None),
            lib: Mutex::new((String::new(), String::new())),
            user: Mutex::new("default".to_string()),
            last_command: AtomicUsize::new(usize::MAX),
            killed: AtomicBool::new(false),
            kill_notify: Notify::new(),
            release_notify: Notify::new(),
            io: ClientIo::default(),
            no_evict: AtomicBool::new(false),
            monitoring: AtomicBool::new(false),
            tracking_redirect: AtomicI64::new(-1),
            tracking_bcast: AtomicBool::new(false),
        }
    }

    /// The same, for a connection to the TLS port.
    pub fn over_tls(mut self, tls: bool) -> ClientInfo {
        self.tls = tls;
        self
    }

    /// Asks the connection to close.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.kill_notify.notify_one();
    }
}

/// How long a client is idle before its buffers are given back (Redis:
/// 2 s, clientsCronResizeQueryBuffer).
pub const IDLE_BUFFERS_MS: u64 = 2000;

/// Every connected client, by id.
#[derive(Default)]
pub struct ClientRegistry {
    clients: Mutex<HashMap<u64, Arc<ClientInfo>>>,
    next_id: AtomicU64,
}

impl ClientRegistry {
    /// A fresh client id (ids start at 1 and never repeat).
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Registers a connection; fails when `maxclients` are already connected.
    pub fn register(
        &self,
        info: Arc<ClientInfo>,
        maxclients: usize,
    ) -> Result<(), Arc<ClientInfo>> {
        let mut clients = self.clients.lock();
        if clients.len() >= maxclients {
            return Err(info);
        }
        clients.insert(info.id, info);
        Ok(())
    }

    /// Removes a connection.
    pub fn unregister(&self, id: u64) {
        self.clients.lock().remove(&id);
    }

    /// Number of connected clients.
    pub fn len(&self) -> usize {
        self.clients.lock().len()
    }

    /// True when nobody is connected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every client, ordered by id.
    pub fn snapshot(&self) -> Vec<Arc<ClientInfo>> {
        let mut all: Vec<_> = self.clients.lock().values().cloned().collect();
        all.sort_by_key(|c| c.id);
        all
    }

    /// Asks every client idle for `IDLE_BUFFERS_MS` or more that still
    /// holds buffers to give them back, as Redis's clientsCron frees the
    /// query buffer of a client idle for 2 s: a gateway fleet keeps many
    /// pooled connections that are idle most of the time.
    pub fn release_idle_buffers(&self, now_ms: u64) {
        for client in self.clients.lock().values() {
            let idle = now_ms.saturating_sub(client.last_interaction_ms.load(Ordering::Relaxed));
            let holding = client.io.qbuf_free.load(Ordering::Relaxed) > 0
                || client.io.reply_buffer.load(Ordering::Relaxed) > 0;
            if idle >= IDLE_BUFFERS_MS && holding && client.io.qbuf.load(Ordering::Relaxed) == 0 {
                client.release_notify.notify_one();
            }
        }
    }

    /// Asks every connection to close.
    pub fn kill_all(&self) {
        for client in self.clients.lock().values() {
            client.kill();
        }
    }
}
