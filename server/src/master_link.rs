//! This server as a replica: the master it follows (REPLICAOF), and the
//! state of the link as INFO replication and ROLE show it. The link itself,
//! the handshake, the transfer and applying the stream, is `net::replica`;
//! this is what commands read and set, with no socket in it.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use parking_lot::Mutex;

/// The master to follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Host name or address, as REPLICAOF gave it.
    pub host: String,
    /// Its port.
    pub port: u16,
}

/// Where the link is, in Redis's terms (ROLE's fourth field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum LinkState {
    /// Not a replica.
    None = 0,
    /// About to connect (and after a link was lost, before reconnecting).
    Connect = 1,
    /// Connecting.
    Connecting = 2,
    /// Connected; PING, AUTH, REPLCONF and PSYNC under way.
    Handshake = 3,
    /// Receiving the master's snapshot.
    Sync = 4,
    /// Streaming.
    Connected = 5,
}

impl LinkState {
    fn from_u8(value: u8) -> LinkState {
        match value {
            1 => LinkState::Connect,
            2 => LinkState::Connecting,
            3 => LinkState::Handshake,
            4 => LinkState::Sync,
            5 => LinkState::Connected,
            _ => LinkState::None,
        }
    }

    /// ROLE's name for it.
    pub fn role_name(self) -> &'static str {
        match self {
            LinkState::None => "none",
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Handshake => "handshake",
            LinkState::Sync => "sync",
            LinkState::Connected => "connected",
        }
    }
}

/// The master this server follows, if any, and its link.
pub struct MasterLink {
    target: Mutex<Option<Target>>,
    /// Bumped at every REPLICAOF: the link task drops a link made for an
    /// older generation.
    generation: tokio::sync::watch::Sender<u64>,
    state: AtomicU8,
    /// `replica-read-only`.
    pub read_only: AtomicBool,
    /// `replica-serve-stale-data`.
    pub serve_stale: AtomicBool,
    /// Unix ms of the last bytes from the master (0: none yet).
    pub last_io_ms: AtomicU64,
    /// Unix ms the link went down (0: it was never up).
    pub down_since_ms: AtomicU64,
    /// The master's stream offset this server has read (INFO's
    /// slave_read_repl_offset; -1 with no link).
    pub read_offset: AtomicI64,
    /// The offset it has applied (slave_repl_offset and ROLE's offset; -1
    /// with no link).
    pub applied_offset: AtomicI64,
    /// The size of the snapshot being received (-1: sent without one, as
    /// a diskless master sends it).
    pub sync_total_bytes: AtomicI64,
    /// Its bytes read so far.
    pub sync_read_bytes: AtomicU64,
    /// Unix ms the transfer began.
    pub sync_started_ms: AtomicU64,
    /// The database the master's stream has SELECTed: a link that
    /// continues the stream (`+CONTINUE`) continues in it.
    pub stream_db: AtomicUsize,
}

impl Default for MasterLink {
    fn default() -> MasterLink {
        MasterLink {
            target: Mutex::new(None),
            generation: tokio::sync::watch::Sender::new(0),
            state: AtomicU8::new(LinkState::None as u8),
            read_only: AtomicBool::new(true),
            serve_stale: AtomicBool::new(true),
            last_io_ms: AtomicU64::new(0),
            down_since_ms: AtomicU64::new(0),
            read_offset: AtomicI64::new(-1),
            applied_offset: AtomicI64::new(-1),
            sync_total_bytes: AtomicI64::new(0),
            sync_read_bytes: AtomicU64::new(0),
            sync_started_ms: AtomicU64::new(0),
            stream_db: AtomicUsize::new(0),
        }
    }
}

impl MasterLink {
    /// The master followed, if any.
    pub fn target(&self) -> Option<Target> {
        self.target.lock().clone()
    }

    /// True while this server follows a master (whatever the link's state).
    pub fn is_replica(&self) -> bool {
        self.state() != LinkState::None
    }

    /// Follows `target` from now on (`None`: follows no master), and tells
    /// the link task, which drops the link it has. Returns the previous
    /// target.
    pub fn set_target(&self, target: Option<Target>) -> Option<Target> {
        let mut current = self.target.lock();
        let previous = std::mem::replace(&mut *current, target);
        let state = if current.is_some() {
            LinkState::Connect
        } else {
            LinkState::None
        };
        self.set_state(state);
        self.read_offset.store(-1, Ordering::Relaxed);
        self.applied_offset.store(-1, Ordering::Relaxed);
        if previous.is_none() {
            self.down_since_ms.store(0, Ordering::Relaxed);
        }
        self.generation.send_modify(|g| *g += 1);
        previous
    }

    /// The current generation, and a receiver that sees the next.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// The link's state.
    pub fn state(&self) -> LinkState {
        LinkState::from_u8(self.state.load(Ordering::Acquire))
    }

    /// Moves the link to `state`.
    pub fn set_state(&self, state: LinkState) {
        self.state.store(state as u8, Ordering::Release);
    }

    /// Moves the link to `state` unless REPLICAOF changed the target since
    /// `generation` (the task is then about to drop this link).
    pub fn set_state_for(&self, generation: u64, state: LinkState) {
        let _target = self.target.lock();
        if *self.generation.borrow() == generation {
            self.set_state(state);
        }
    }

    /// The link made for `generation` is gone; the task connects again
    /// soon. A link that was up has been down since `now_ms`.
    pub fn lost(&self, generation: u64, now_ms: u64) {
        let _target = self.target.lock();
        if *self.generation.borrow() != generation {
            return;
        }
        if self.state() == LinkState::Connected {
            self.down_since_ms.store(now_ms.max(1), Ordering::Relaxed);
        }
        self.set_state(LinkState::Connect);
        self.applied_offset.store(-1, Ordering::Relaxed);
    }

    /// Write commands from clients are refused (`replica-read-only`).
    pub fn refuses_writes(&self) -> bool {
        self.is_replica() && self.read_only.load(Ordering::Relaxed)
    }

    /// Commands that need fresh data are refused: the link is down and
    /// `replica-serve-stale-data` is off.
    pub fn refuses_stale_reads(&self) -> bool {
        self.is_replica()
            && self.state() != LinkState::Connected
            && !self.serve_stale.load(Ordering::Relaxed)
    }
}
