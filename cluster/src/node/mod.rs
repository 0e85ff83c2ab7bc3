//! A cluster node's view of the cluster, as a state machine with no I/O
//! and no clock: the driver (the server, or the simulation in the tests)
//! hands it messages and the time, and carries out what it returns. It
//! covers joining (MEET and the handshake, gossip that introduces the
//! other nodes), slot ownership by config epoch, the epochs, failure
//! detection, replicas and failover (elections, CLUSTER FAILOVER).
//!
//! The node's state and its accessors are here; what it does is in
//! [`slots`] (the slot table), [`bus`] (messages sent and received),
//! [`cron`] (the periodic work and failure detection), [`failover`]
//! (replicas, elections and votes), [`manual`] (CLUSTER FAILOVER),
//! [`migration`] (replica migration) and [`conf`] (nodes.conf).

mod bus;
mod conf;
mod cron;
mod failover;
mod manual;
mod migration;
mod slots;

pub use failover::FailoverError;
pub use manual::FailoverKind;

pub use bus::through_the_wire;

use std::collections::BTreeMap;

use crate::message::{node_flags, Message};
use crate::{NodeName, SLOTS};

/// How long a handshake may take before the half-known node is dropped
/// (Redis: the node timeout, at least one second).
const MIN_HANDSHAKE_TIMEOUT_MS: u64 = 1000;

/// Failure reports count for twice the node timeout
/// (CLUSTER_FAIL_REPORT_VALIDITY_MULT).
const FAIL_REPORT_VALIDITY_MULT: u64 = 2;

/// A failed master that answers again is cleared after twice the node
/// timeout (CLUSTER_FAIL_UNDO_TIME_MULT).
const FAIL_UNDO_TIME_MULT: u64 = 2;

/// What the node knows of another.
#[derive(Debug, Clone)]
pub struct Peer {
    /// Its name (random while the handshake runs, its own after).
    pub name: NodeName,
    /// Its IP.
    pub ip: Vec<u8>,
    /// Its client port (its TLS port in a cluster with `tls-cluster`).
    pub port: u16,
    /// Its plaintext client port in a TLS cluster (0: none, or not TLS).
    pub pport: u16,
    /// Its bus port.
    pub cport: u16,
    /// [`node_flags`] as this node sees it.
    pub flags: u16,
    /// Its config epoch.
    pub config_epoch: u64,
    /// When it was created (handshakes time out).
    pub created_ms: u64,
    /// When the last PING went to it (0: none pending).
    pub ping_sent_ms: u64,
    /// When its last PONG arrived.
    pub pong_received_ms: u64,
    /// When a PING last went to it (a pending one is sent again).
    pub last_ping_ms: u64,
    /// Masters that reported it failing, and when they last did.
    pub fail_reports: Vec<(NodeName, u64)>,
    /// When it was marked FAIL.
    pub fail_time_ms: u64,
    /// The hostname it announces (empty: none).
    pub hostname: Vec<u8>,
    /// The master it replicates, for a replica (from its own messages).
    pub master: Option<NodeName>,
    /// Its replication offset, as its last message gave it (a replica's
    /// election rank compares them).
    pub repl_offset: u64,
    /// When this node last voted for a replica of it (a master): one vote
    /// per master per twice the node timeout.
    pub voted_ms: u64,
    /// Since when this master (one that had replicas) has had none working
    /// (0: it has one, or never had one).
    pub orphaned_since_ms: u64,
}

impl Peer {
    fn in_handshake(&self) -> bool {
        self.flags & node_flags::HANDSHAKE != 0
    }

    /// Marked PFAIL or FAIL.
    pub fn failing(&self) -> bool {
        self.flags & (node_flags::PFAIL | node_flags::FAIL) != 0
    }

    /// Marked FAIL (a majority agreed).
    pub fn failed(&self) -> bool {
        self.flags & node_flags::FAIL != 0
    }

    /// A replica (of `master`, when this node knows which).
    pub fn is_replica(&self) -> bool {
        self.flags & node_flags::SLAVE != 0
    }

    /// A peer as a MEET, a handshake or nodes.conf first makes it known.
    fn new(name: NodeName, ip: &[u8], ports: (u16, u16), cport: u16, flags: u16) -> Peer {
        Peer {
            name,
            ip: ip.to_vec(),
            port: ports.0,
            pport: ports.1,
            cport,
            flags,
            config_epoch: 0,
            created_ms: 0,
            ping_sent_ms: 0,
            pong_received_ms: 0,
            last_ping_ms: 0,
            fail_reports: Vec::new(),
            fail_time_ms: 0,
            hostname: Vec::new(),
            master: None,
            repl_offset: 0,
            voted_ms: 0,
            orphaned_since_ms: 0,
        }
    }
}

/// What the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Send `message` to the peer known as `to`, at `ip`:`cport` (opening
    /// the link if there is none).
    Send {
        /// The peer's name as this node knows it.
        to: NodeName,
        /// Its IP.
        ip: Vec<u8>,
        /// Its bus port.
        cport: u16,
        /// The message.
        message: Message,
    },
    /// Answer on the link the handled message came in on.
    Reply(Message),
    /// The peer known as `name` is gone (its link can close).
    Dropped(NodeName),
    /// The configuration changed: write nodes.conf.
    SaveConfig,
    /// These slots were served here and another node took them with a
    /// newer config epoch: drop the keys still held in them (Redis's
    /// dirty slots).
    SlotsLost(Vec<u16>),
    /// This node's role changed (it became a replica, or a replica won an
    /// election or took over): the driver points its replication at
    /// [`Node::replicating`] (or stops replicating) at once.
    RoleChanged,
    /// A replica of this master asked for a manual failover (MFSTART):
    /// writes pause until `until_ms`, then this node's offset (taken after
    /// the pause) goes to the replica in a PING ([`Node::ping_now`]).
    PauseWritesForFailover {
        /// The replica taking over.
        replica: NodeName,
        /// When the pause ends at the latest.
        until_ms: u64,
    },
    /// The manual failover this master paused writes for is over.
    ResumeWrites,
    /// A known node relayed a PUBLISH (or SPUBLISH): deliver it to this
    /// node's subscribers.
    Publish {
        /// The channel.
        channel: Vec<u8>,
        /// The payload.
        message: Vec<u8>,
        /// Published with SPUBLISH (shard channels, no patterns).
        sharded: bool,
    },
}

/// One node's state.
pub struct Node {
    me: NodeName,
    ip: Vec<u8>,
    /// The client port it announces (the TLS port with `tls-cluster`).
    port: u16,
    /// The plaintext port it announces with `tls-cluster` (0: none).
    pport: u16,
    cport: u16,
    current_epoch: u64,
    config_epoch: u64,
    last_vote_epoch: u64,
    node_timeout_ms: u64,
    peers: BTreeMap<NodeName, Peer>,
    /// Each slot's owner as a small number (0: none) naming an entry of
    /// `owner_names`: the per-slot loops (every PING's claims, coverage,
    /// nodes.conf) compare two bytes instead of 40.
    owners: Vec<u16>,
    /// The names behind `owners`' numbers (number n is entry n - 1);
    /// a name keeps its number for the node's life.
    owner_names: Vec<NodeName>,
    /// How many slots each owner number has (entry 0: unassigned slots),
    /// kept with `owners` by [`Node::assign`]: coverage, checked on every
    /// tick, adds up a few numbers instead of looping over 16384 slots.
    slot_counts: Vec<u32>,
    /// This node's own slots as the header's bitmap (kept with `owners`).
    my_slots: Box<[u8; SLOTS / 8]>,
    /// Slots this node serves and is moving to another (SETSLOT MIGRATING).
    migrating: BTreeMap<u16, NodeName>,
    /// Slots this node is taking from another (SETSLOT IMPORTING).
    importing: BTreeMap<u16, NodeName>,
    /// Forgotten nodes, not re-added from gossip until this time
    /// (CLUSTER FORGET's ban).
    forgotten: BTreeMap<NodeName, u64>,
    rng: u64,
    /// Ticks so far (every tenth pings a random node, as clusterCron).
    ticks: u64,
    /// `cluster-announce-ip`: the IP this node gives in its messages
    /// (then it never learns its own from a MEET).
    announced_ip: Option<Vec<u8>>,
    /// `cluster-announce-hostname` (empty: none), sent in every PING, PONG
    /// and MEET as Redis 7.0's hostname extension.
    hostname: Vec<u8>,
    /// The master this node replicates (None: it is a master).
    my_master: Option<NodeName>,
    /// What the driver last told of this node's replication.
    replication: failover::Replication,
    /// The settings elections follow.
    failover_settings: failover::Settings,
    /// This replica's election, if one is under way (clusterState's
    /// failover_auth_*).
    election: failover::Election,
    /// A manual failover under way (CLUSTER FAILOVER), on either side.
    manual: manual::Manual,
}

/// How long a forgotten node stays banned (CLUSTER_BLACKLIST_TTL).
const FORGET_TTL_MS: u64 = 60_000;

impl Node {
    /// A node that knows only itself. `seed` drives its random choices
    /// (names of half-known nodes, whom to ping), so a simulation replays.
    pub fn new(me: NodeName, port: u16, cport: u16, node_timeout_ms: u64, seed: u64) -> Node {
        Node {
            me,
            ip: Vec::new(),
            port,
            pport: 0,
            cport,
            current_epoch: 0,
            config_epoch: 0,
            last_vote_epoch: 0,
            node_timeout_ms,
            peers: BTreeMap::new(),
            owners: vec![0; SLOTS],
            owner_names: Vec::new(),
            slot_counts: vec![SLOTS as u32],
            my_slots: Box::new([0; SLOTS / 8]),
            migrating: BTreeMap::new(),
            importing: BTreeMap::new(),
            forgotten: BTreeMap::new(),
            rng: seed | 1,
            ticks: 0,
            announced_ip: None,
            hostname: Vec::new(),
            my_master: None,
            replication: failover::Replication::default(),
            failover_settings: failover::Settings::default(),
            election: failover::Election::default(),
            manual: manual::Manual::default(),
        }
    }

    /// `cluster-announce-hostname` (empty: none).
    pub fn announce_hostname(&mut self, hostname: &[u8]) {
        self.hostname = hostname.to_vec();
    }

    /// `cluster-announce-ip`, `-port`, `-tls-port` and `-bus-port`
    /// (clusterUpdateMyself*): what this node tells others its address is,
    /// when it is not the one they see (NAT, containers with mapped
    /// ports). `None` keeps the real one. `port` is the TLS port in a
    /// cluster with `tls-cluster`, `pport` the plaintext one (else 0), as
    /// Redis's deriveAnnouncedPorts gives them.
    pub fn announce(&mut self, ip: Option<Vec<u8>>, port: u16, pport: u16, cport: u16) {
        if let Some(ip) = &ip {
            self.ip = ip.clone();
        }
        self.announced_ip = ip;
        self.port = port;
        self.pport = pport;
        self.cport = cport;
    }

    fn random(&mut self) -> u64 {
        // xorshift64*: deterministic per seed.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn random_name(&mut self) -> NodeName {
        let mut name = [0u8; 40];
        for chunk in name.chunks_mut(16) {
            let value = self.random();
            for (i, b) in chunk.iter_mut().enumerate() {
                *b = b"0123456789abcdef"[((value >> (i * 4)) & 0xf) as usize];
            }
        }
        name
    }

    /// This node's name.
    pub fn name(&self) -> &NodeName {
        &self.me
    }

    /// The cluster's current epoch as this node knows it.
    pub fn current_epoch(&self) -> u64 {
        self.current_epoch
    }

    /// This node's config epoch.
    pub fn config_epoch(&self) -> u64 {
        self.config_epoch
    }

    /// The epochs read back from nodes.conf at start.
    pub fn restore_epochs(&mut self, current: u64, config: u64, last_vote: u64) {
        self.current_epoch = current.max(config);
        self.config_epoch = config;
        self.last_vote_epoch = last_vote;
    }

    /// A node read back from nodes.conf at start: known by name, its
    /// slots as the file says until its own messages say otherwise; a
    /// replica with the master the file names.
    #[allow(clippy::too_many_arguments)]
    pub fn restore_peer(
        &mut self,
        name: NodeName,
        ip: &[u8],
        port: u16,
        cport: u16,
        config_epoch: u64,
        master: Option<NodeName>,
        slots: impl IntoIterator<Item = u16>,
        now_ms: u64,
    ) {
        if name == self.me {
            return;
        }
        let role = if master.is_some() {
            node_flags::SLAVE
        } else {
            node_flags::MASTER
        };
        let mut peer = Peer::new(name, ip, (port, 0), cport, role);
        peer.config_epoch = config_epoch;
        peer.created_ms = now_ms;
        peer.pong_received_ms = now_ms;
        peer.master = master;
        self.peers.insert(name, peer);
        let id = self.owner_id(&name);
        for slot in slots {
            if self.owners[slot as usize] == 0 {
                self.assign(slot, id);
            }
        }
    }

    /// CLUSTER SET-CONFIG-EPOCH (the caller checks it is allowed).
    pub fn set_config_epoch(&mut self, epoch: u64) {
        self.config_epoch = epoch;
        self.current_epoch = self.current_epoch.max(epoch);
    }

    /// The nodes known, half-known ones included.
    pub fn peers(&self) -> impl Iterator<Item = &Peer> {
        self.peers.values()
    }

    /// This node's IP as it learned it (empty before a MEET reached it).
    pub fn ip(&self) -> &[u8] {
        &self.ip
    }

    /// The IP, client port and plaintext port (0: none) of a fully known
    /// node (or of this one).
    pub fn address_of(&self, name: &NodeName) -> Option<(Vec<u8>, u16, u16)> {
        if *name == self.me {
            return Some((self.ip.clone(), self.port, self.pport));
        }
        self.peers
            .get(name)
            .filter(|p| !p.in_handshake())
            .map(|p| (p.ip.clone(), p.port, p.pport))
    }

    /// The hostname a fully known node (or this one) announces; empty
    /// when it announces none.
    pub fn hostname_of(&self, name: &NodeName) -> Option<&[u8]> {
        if *name == self.me {
            return Some(&self.hostname);
        }
        self.peers
            .get(name)
            .filter(|p| !p.in_handshake())
            .map(|p| p.hostname.as_slice())
    }

    /// Nodes known fully, this one included (CLUSTER INFO's known nodes).
    pub fn known_nodes(&self) -> usize {
        1 + self.peers.values().filter(|p| !p.in_handshake()).count()
    }

    /// True for this node and every node it knows by name.
    pub fn knows(&self, name: &NodeName) -> bool {
        *name == self.me || self.peers.contains_key(name)
    }

    /// CLUSTER FORGET: the node is dropped and not learnt again from
    /// gossip for a minute (the caller refuses this node's own name).
    pub fn forget(&mut self, name: &NodeName, now_ms: u64) -> Vec<Output> {
        self.forgotten.retain(|_, until| *until > now_ms);
        self.forgotten.insert(*name, now_ms + FORGET_TTL_MS);
        self.peers.remove(name);
        self.clear_slots_of(name);
        for peer in self.peers.values_mut() {
            if peer.master.as_ref() == Some(name) {
                peer.master = None;
            }
        }
        self.migrating.retain(|_, to| to != name);
        self.importing.retain(|_, from| from != name);
        vec![Output::Dropped(*name), Output::SaveConfig]
    }
}
