//! The connected clients as the rest of the server sees them: what a
//! connection publishes of itself ([`ClientInfo`], [`ClientIo`]: CLIENT
//! LIST, CLIENT KILL, ACL LOG, pub/sub's output limits) and the registry
//! of every one by id. Kept apart from the server's shared state so that
//! a module that needs to know a client (pub/sub, tracking) does not
//! depend on all of it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use hashbrown::HashMap;
use parking_lot::Mutex;
use tokio::sync::Notify;

/// Where a client is connected from or to: a TCP address, or the path of
/// the Unix socket (`unixsocket`), which Redis shows as `<path>:0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientAddr {
    /// A TCP connection's address.
    Tcp(SocketAddr),
    /// The Unix socket's path.
    Unix(Arc<str>),
}

impl ClientAddr {
    /// True for a client on this host: the loopback interface or the Unix
    /// socket (protected mode lets both in, as Redis's does).
    pub fn is_local(&self) -> bool {
        match self {
            ClientAddr::Tcp(addr) => {
                addr.ip().is_loopback() || addr.ip().to_canonical().is_loopback()
            }
            ClientAddr::Unix(_) => true,
        }
    }

    /// The host part: the IP address, or the socket's path.
    pub fn host(&self) -> String {
        match self {
            ClientAddr::Tcp(addr) => addr.ip().to_string(),
            ClientAddr::Unix(path) => path.to_string(),
        }
    }
}

impl From<SocketAddr> for ClientAddr {
    fn from(addr: SocketAddr) -> ClientAddr {
        ClientAddr::Tcp(addr)
    }
}

impl std::fmt::Display for ClientAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientAddr::Tcp(addr) => write!(f, "{addr}"),
            ClientAddr::Unix(path) => write!(f, "{path}:0"),
        }
    }
}

/// What a replica's connection has said of itself (REPLCONF) and how
/// far it has acknowledged the stream (INFO's `slave<n>` lines, ROLE).
#[derive(Default)]
pub struct ReplicaLink {
    /// Set by PSYNC: this connection is a replica (CLIENT LIST flag `S`,
    /// CLIENT KILL TYPE replica).
    pub is_replica: AtomicBool,
    /// This connection is the link to the master this server replicates
    /// (CLIENT LIST flag `M`, CLIENT KILL TYPE master).
    pub is_master: AtomicBool,
    /// REPLCONF listening-port: the port the replica serves clients on.
    pub listening_port: AtomicU64,
    /// REPLCONF ACK: the stream offset the replica has processed.
    pub ack_offset: AtomicU64,
    /// When the last ACK came (unix ms).
    pub ack_ms: AtomicU64,
    /// REPLCONF ACK ... FACK: the stream offset the replica's append-only
    /// file has fsynced (Redis 7.2; WAITAOF counts it).
    pub fack_offset: AtomicU64,
    /// REPLCONF ip-address: the address the replica announces (its
    /// connection's peer address stands for it when it announces none).
    pub announced_ip: Mutex<Option<String>>,
    /// REPLCONF rdb-only 1: it wants the snapshot and no stream
    /// (`redis-cli --rdb`).
    pub rdb_only: AtomicBool,
    /// Its snapshot is being written in the background (INFO's
    /// `state=wait_bgsave`, as Redis says while its child writes it).
    pub awaits_snapshot: AtomicBool,
}

impl ClientInfo {
    /// A replica's address as INFO, ROLE and FAILOVER name it: the one it
    /// announced, else its connection's (Redis's slave_addr, else the
    /// peer's address).
    pub fn replica_ip(&self) -> String {
        match &*self.replica.announced_ip.lock() {
            Some(ip) => ip.clone(),
            None => self.addr.host(),
        }
    }
}

/// What other connections may read or ask of a client (CLIENT LIST / KILL).
pub struct ClientInfo {
    /// CLIENT ID.
    pub id: u64,
    /// Peer address.
    pub addr: ClientAddr,
    /// Local address.
    pub laddr: ClientAddr,
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
    /// CLIENT NO-TOUCH ON (flag `T`).
    pub no_touch: AtomicBool,
    /// READONLY (cluster mode): CLIENT LIST's `r` flag.
    pub readonly: AtomicBool,
    /// In MONITOR mode.
    pub monitoring: AtomicBool,
    /// Set once the connection is a replica (PSYNC).
    pub replica: ReplicaLink,
    /// CLIENT TRACKING: -1 off, else the redirect id (0: none), for CLIENT LIST.
    pub tracking_redirect: AtomicI64,
    /// CLIENT TRACKING in BCAST mode.
    pub tracking_bcast: AtomicBool,
    /// Blocked on keys (CLIENT LIST's `b` flag); kept by `crate::blocking`.
    pub blocked: AtomicBool,
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
    pub fn new(
        id: u64,
        addr: impl Into<ClientAddr>,
        laddr: impl Into<ClientAddr>,
        now_ms: u64,
    ) -> ClientInfo {
        ClientInfo {
            id,
            addr: addr.into(),
            laddr: laddr.into(),
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
            no_touch: AtomicBool::new(false),
            readonly: AtomicBool::new(false),
            monitoring: AtomicBool::new(false),
            replica: ReplicaLink::default(),
            tracking_redirect: AtomicI64::new(-1),
            tracking_bcast: AtomicBool::new(false),
            blocked: AtomicBool::new(false),
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
