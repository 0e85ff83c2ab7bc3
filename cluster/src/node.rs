//! A cluster node's view of the cluster, as a state machine with no I/O
//! and no clock: the driver (the server, or the simulation in the tests)
//! hands it messages and the time, and carries out what it returns. This
//! first version covers joining (MEET and the handshake, gossip that
//! introduces the other nodes), slot ownership by config epoch
//! (clusterUpdateSlotsConfigWith) and the epochs; failure detection and
//! failover come next.

use std::collections::BTreeMap;

use crate::message::{self, kind, node_flags, Body, Gossip, Header, Message};
use crate::nodes_conf::{Moving, NodeLine, NodesConf};
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
}

impl Peer {
    fn in_handshake(&self) -> bool {
        self.flags & node_flags::HANDSHAKE != 0
    }

    /// Marked PFAIL or FAIL.
    pub fn failing(&self) -> bool {
        self.flags & (node_flags::PFAIL | node_flags::FAIL) != 0
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
    /// slots as the file says until its own messages say otherwise.
    #[allow(clippy::too_many_arguments)]
    pub fn restore_peer(
        &mut self,
        name: NodeName,
        ip: &[u8],
        port: u16,
        cport: u16,
        config_epoch: u64,
        slots: impl IntoIterator<Item = u16>,
        now_ms: u64,
    ) {
        if name == self.me {
            return;
        }
        self.peers.insert(
            name,
            Peer {
                name,
                ip: ip.to_vec(),
                port,
                pport: 0,
                cport,
                flags: node_flags::MASTER,
                config_epoch,
                created_ms: now_ms,
                ping_sent_ms: 0,
                pong_received_ms: now_ms,
                last_ping_ms: 0,
                fail_reports: Vec::new(),
                fail_time_ms: 0,
                hostname: Vec::new(),
            },
        );
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

    /// Who serves `slot`, as this node believes.
    pub fn owner(&self, slot: u16) -> Option<&NodeName> {
        self.name_of_owner(self.owners[slot as usize])
    }

    /// Gives `slot` to owner number `id` (0: none), keeping the counts.
    fn assign(&mut self, slot: u16, id: u16) {
        let was = std::mem::replace(&mut self.owners[slot as usize], id);
        self.slot_counts[usize::from(was)] -= 1;
        self.slot_counts[usize::from(id)] += 1;
    }

    /// The name behind an owner number (0: none).
    fn name_of_owner(&self, id: u16) -> Option<&NodeName> {
        (id as usize).checked_sub(1).map(|i| &self.owner_names[i])
    }

    /// The owner number of `name`, given one if it has none yet.
    fn owner_id(&mut self, name: &NodeName) -> u16 {
        match self.known_owner_id(name) {
            Some(id) => id,
            None => {
                self.owner_names.push(*name);
                self.slot_counts.push(0);
                self.owner_names.len() as u16
            }
        }
    }

    /// The owner number of `name`, if it ever owned a slot here.
    fn known_owner_id(&self, name: &NodeName) -> Option<u16> {
        self.owner_names
            .iter()
            .position(|n| n == name)
            .map(|i| i as u16 + 1)
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

    /// Slots with an owner.
    pub fn assigned_slots(&self) -> usize {
        SLOTS - self.slot_counts[0] as usize
    }

    /// Masters that serve at least one slot (CLUSTER INFO's cluster_size).
    pub fn serving_masters(&self) -> usize {
        self.slot_counts[1..].iter().filter(|&&n| n > 0).count()
    }

    /// True for this node and every node it knows by name.
    pub fn knows(&self, name: &NodeName) -> bool {
        *name == self.me || self.peers.contains_key(name)
    }

    /// The node `slot` is migrating to (SETSLOT MIGRATING), if any.
    pub fn migrating_to(&self, slot: u16) -> Option<&NodeName> {
        self.migrating.get(&slot)
    }

    /// The node `slot` is being imported from (SETSLOT IMPORTING), if any.
    pub fn importing_from(&self, slot: u16) -> Option<&NodeName> {
        self.importing.get(&slot)
    }

    /// Slots migrating away from this node.
    pub fn migrating_slots(&self) -> impl Iterator<Item = u16> + '_ {
        self.migrating.keys().copied()
    }

    /// Slots this node is importing (SETSLOT IMPORTING).
    pub fn importing_slots(&self) -> impl Iterator<Item = u16> + '_ {
        self.importing.keys().copied()
    }

    /// SETSLOT MIGRATING (`Some`) or its end (`None`).
    pub fn set_migrating(&mut self, slot: u16, to: Option<NodeName>) -> Vec<Output> {
        match to {
            Some(to) => self.migrating.insert(slot, to),
            None => self.migrating.remove(&slot),
        };
        vec![Output::SaveConfig]
    }

    /// SETSLOT IMPORTING (`Some`) or its end (`None`).
    pub fn set_importing(&mut self, slot: u16, from: Option<NodeName>) -> Vec<Output> {
        match from {
            Some(from) => self.importing.insert(slot, from),
            None => self.importing.remove(&slot),
        };
        vec![Output::SaveConfig]
    }

    /// SETSLOT STABLE.
    pub fn set_stable(&mut self, slot: u16) -> Vec<Output> {
        self.migrating.remove(&slot);
        self.importing.remove(&slot);
        vec![Output::SaveConfig]
    }

    /// SETSLOT NODE, once the caller checked the node is known and no keys
    /// are left here if the slot goes elsewhere; `keys_here` is how many
    /// this node holds in it. Closing an import bumps this node's config
    /// epoch (without consensus, as Redis) and tells every node at once,
    /// so the new owner wins everywhere.
    pub fn assign_slot(&mut self, slot: u16, owner: NodeName, keys_here: usize) -> Vec<Output> {
        if keys_here == 0 {
            self.migrating.remove(&slot);
        }
        self.set_owner(slot, Some(owner));
        let mut out = vec![Output::SaveConfig];
        if owner == self.me && self.importing.remove(&slot).is_some() {
            let _ = self.bump_epoch();
            let pong = self.ping(kind::PONG);
            out.extend(self.broadcast(&pong));
        }
        out
    }

    /// CLUSTER FORGET: the node is dropped and not learnt again from
    /// gossip for a minute (the caller refuses this node's own name).
    pub fn forget(&mut self, name: &NodeName, now_ms: u64) -> Vec<Output> {
        self.forgotten.retain(|_, until| *until > now_ms);
        self.forgotten.insert(*name, now_ms + FORGET_TTL_MS);
        self.peers.remove(name);
        if let Some(id) = self.known_owner_id(name) {
            for slot in 0..SLOTS as u16 {
                if self.owners[slot as usize] == id {
                    self.assign(slot, 0);
                }
            }
        }
        self.migrating.retain(|_, to| to != name);
        self.importing.retain(|_, from| from != name);
        vec![Output::Dropped(*name), Output::SaveConfig]
    }

    /// Records `owner` as serving `slot` (this node's bitmap follows).
    fn set_owner(&mut self, slot: u16, owner: Option<NodeName>) {
        let id = owner.map_or(0, |name| self.owner_id(&name));
        self.assign(slot, id);
        if owner == Some(self.me) {
            self.my_slots[slot as usize / 8] |= 1 << (slot % 8);
        } else {
            self.my_slots[slot as usize / 8] &= !(1 << (slot % 8));
        }
    }

    /// This node's slots, one bit each (bit `slot % 8` of byte `slot / 8`).
    pub fn my_slots(&self) -> &[u8; SLOTS / 8] {
        &self.my_slots
    }

    /// Frees slots this node serves (DELSLOTS, FLUSHSLOTS).
    pub fn del_slots(&mut self, slots: impl IntoIterator<Item = u16>) -> Vec<Output> {
        let me = self.owner_id(&self.me.clone());
        for slot in slots {
            if self.owners[slot as usize] == me {
                self.assign(slot, 0);
            }
            self.my_slots[slot as usize / 8] &= !(1 << (slot % 8));
        }
        vec![Output::SaveConfig]
    }

    /// CLUSTER BUMPEPOCH (without consensus): `Some(epoch)` when bumped.
    pub fn bump_epoch(&mut self) -> Option<u64> {
        let max = self
            .peers
            .values()
            .map(|p| p.config_epoch)
            .chain([self.current_epoch, self.config_epoch])
            .max()
            .unwrap_or(0);
        if self.config_epoch == 0 || self.config_epoch != max {
            self.current_epoch += 1;
            self.config_epoch = self.current_epoch;
            Some(self.config_epoch)
        } else {
            None
        }
    }

    /// Claims slots for this node (ADDSLOTS).
    pub fn add_slots(&mut self, slots: impl IntoIterator<Item = u16>) -> Vec<Output> {
        let me = self.owner_id(&self.me.clone());
        for slot in slots {
            self.assign(slot, me);
            self.my_slots[slot as usize / 8] |= 1 << (slot % 8);
        }
        vec![Output::SaveConfig]
    }

    /// CLUSTER MEET: a half-known node at that address, and a MEET to it.
    pub fn meet(&mut self, ip: &[u8], port: u16, cport: u16, now_ms: u64) -> Vec<Output> {
        self.start_handshake(ip, (port, 0), cport, now_ms, true)
    }

    /// A half-known node at `ip`, its client and plaintext ports `ports`.
    fn start_handshake(
        &mut self,
        ip: &[u8],
        ports: (u16, u16),
        cport: u16,
        now_ms: u64,
        meet: bool,
    ) -> Vec<Output> {
        let (port, pport) = ports;
        // One handshake per address at a time (clusterHandshakeInProgress).
        if self
            .peers
            .values()
            .any(|p| p.in_handshake() && p.ip == ip && p.port == port && p.cport == cport)
        {
            return Vec::new();
        }
        let name = self.random_name();
        self.peers.insert(
            name,
            Peer {
                name,
                ip: ip.to_vec(),
                port,
                pport,
                cport,
                flags: node_flags::HANDSHAKE | node_flags::MEET,
                config_epoch: 0,
                created_ms: now_ms,
                ping_sent_ms: now_ms,
                pong_received_ms: 0,
                last_ping_ms: now_ms,
                fail_reports: Vec::new(),
                fail_time_ms: 0,
                hostname: Vec::new(),
            },
        );
        let message = self.ping(if meet { kind::MEET } else { kind::PING });
        vec![Output::Send {
            to: name,
            ip: ip.to_vec(),
            cport,
            message,
        }]
    }

    /// The header of a message from this node.
    fn header(&self, message_kind: u16) -> Header {
        let mut header = Header::new(message_kind, self.me);
        header.port = self.port;
        header.pport = self.pport;
        header.cport = self.cport;
        header.ip = self.announced_ip.clone().unwrap_or_default();
        header.current_epoch = self.current_epoch;
        header.config_epoch = self.config_epoch;
        header.flags = node_flags::MASTER | node_flags::MYSELF;
        header.slots.copy_from_slice(&self.my_slots[..]);
        header
    }

    /// A PING, PONG or MEET with gossip about other nodes, chosen as
    /// Redis's clusterSendPing chooses them: a tenth of the nodes (at least
    /// three, at most all but this node and the receiver), at random,
    /// never one in handshake or without an address; then every failing
    /// node. Redis appends the PFAIL ones only; tally adds the FAIL ones
    /// too, so that a node that missed the one FAIL broadcast still
    /// gathers a majority's reports (a seeded simulation with lost
    /// messages found nodes left without the FAIL otherwise).
    fn ping(&mut self, message_kind: u16) -> Message {
        let entry = |p: &Peer| Gossip {
            node: p.name,
            ping_sent: (p.ping_sent_ms / 1000) as u32,
            pong_received: (p.pong_received_ms / 1000) as u32,
            ip: p.ip.clone(),
            port: p.port,
            cport: p.cport,
            flags: p.flags,
            pport: p.pport,
        };
        let nodes = self.peers.len() + 1;
        let fresh = nodes.saturating_sub(2);
        let wanted = (nodes / 10).max(3).min(fresh);
        let mut candidates: Vec<NodeName> = self
            .peers
            .values()
            .filter(|p| !p.in_handshake() && !p.failing() && p.flags & node_flags::NOADDR == 0)
            .map(|p| p.name)
            .collect();
        let mut chosen: Vec<NodeName> = Vec::with_capacity(wanted);
        while chosen.len() < wanted && !candidates.is_empty() {
            let at = (self.random() % candidates.len() as u64) as usize;
            chosen.push(candidates.swap_remove(at));
        }
        let mut gossip: Vec<Gossip> = chosen
            .iter()
            .filter_map(|name| self.peers.get(name).map(entry))
            .collect();
        gossip.extend(
            self.peers
                .values()
                .filter(|p| !p.in_handshake() && p.flags & node_flags::NOADDR == 0 && p.failing())
                .map(entry),
        );
        let extensions = if self.hostname.is_empty() {
            Vec::new()
        } else {
            vec![crate::message::Extension::Hostname(self.hostname.clone())]
        };
        Message {
            header: self.header(message_kind),
            body: Body::Ping { gossip, extensions },
        }
    }

    /// A message that arrived on a link another node opened to this one.
    /// `peer_ip` is the link's remote address, `local_ip` its local one
    /// (how a node learns its own IP from a MEET, as Redis does).
    pub fn on_inbound(
        &mut self,
        message: &Message,
        peer_ip: &[u8],
        local_ip: &[u8],
        now_ms: u64,
    ) -> Vec<Output> {
        let header = &message.header;
        let mut out = Vec::new();
        let known = self.peers.contains_key(&header.sender);
        // A node learns its own address from the links others open to it:
        // from every MEET, and from a PING while it has none (Redis's
        // clusterProcessPacket).
        let learns = header.kind == kind::MEET || (header.kind == kind::PING && self.ip.is_empty());
        if learns && self.announced_ip.is_none() && !local_ip.is_empty() && self.ip != local_ip {
            self.ip = local_ip.to_vec();
            out.push(Output::SaveConfig);
        }
        // The sender's address: the one it announces, else the link's
        // (nodeIp2String).
        let sender_ip = if header.ip.is_empty() {
            peer_ip
        } else {
            &header.ip[..]
        };
        if header.kind == kind::MEET && !known {
            // Redis adds the sender as a half-known node under a random
            // name; the handshake from this side learns its name.
            let ports = (header.port, header.pport);
            out.extend(self.start_handshake(sender_ip, ports, header.cport, now_ms, false));
        }
        if header.kind == kind::PING {
            // A known node pinging from another address than the one on
            // record moved (nodeUpdateAddressIfNeeded): reconnect there.
            if let Some(peer) = self.peers.get_mut(&header.sender) {
                let moved = peer.ip != sender_ip
                    || peer.port != header.port
                    || peer.pport != header.pport
                    || peer.cport != header.cport;
                if !peer.in_handshake() && moved {
                    peer.ip = sender_ip.to_vec();
                    peer.port = header.port;
                    peer.pport = header.pport;
                    peer.cport = header.cport;
                    out.push(Output::Dropped(header.sender));
                    out.push(Output::SaveConfig);
                }
            }
        }
        if matches!(header.kind, kind::PING | kind::MEET) {
            out.push(Output::Reply(self.ping(kind::PONG)));
        }
        if self.peers.contains_key(&header.sender) {
            if let Body::Fail { node } = &message.body {
                if let Some(failing) = self.peers.get_mut(node) {
                    if failing.flags & node_flags::FAIL == 0 {
                        failing.flags = (failing.flags & !node_flags::PFAIL) | node_flags::FAIL;
                        failing.fail_time_ms = now_ms;
                        out.push(Output::SaveConfig);
                    }
                }
            }
            if let Body::Publish { channel, message } = &message.body {
                out.push(Output::Publish {
                    channel: channel.clone(),
                    message: message.clone(),
                    sharded: header.kind == kind::PUBLISHSHARD,
                });
            }
            out.extend(self.learn_from(message, now_ms));
        }
        out
    }

    /// A PUBLISH for every other node (clusterPropagatePublish: every node
    /// out of handshake, each over its link). SPUBLISH goes to the
    /// replicas of this node's shard only, and tally nodes have none yet,
    /// so a sharded message is sent nowhere.
    pub fn publish(&self, channel: &[u8], message: &[u8], sharded: bool) -> Vec<Output> {
        if sharded {
            return Vec::new();
        }
        let publish = Message {
            header: self.header(kind::PUBLISH),
            body: Body::Publish {
                channel: channel.to_vec(),
                message: message.to_vec(),
            },
        };
        self.broadcast(&publish)
    }

    /// `message` to every node out of handshake (clusterBroadcastMessage).
    fn broadcast(&self, message: &Message) -> Vec<Output> {
        self.peers
            .values()
            .filter(|p| !p.in_handshake())
            .map(|p| Output::Send {
                to: p.name,
                ip: p.ip.clone(),
                cport: p.cport,
                message: message.clone(),
            })
            .collect()
    }

    /// A message that arrived on this node's own link to the peer it knows
    /// as `via` (the PONG to its PING or MEET).
    pub fn on_outbound(&mut self, via: &NodeName, message: &Message, now_ms: u64) -> Vec<Output> {
        let header = &message.header;
        let mut out = Vec::new();
        let Some(peer) = self.peers.get(via) else {
            return out;
        };
        if peer.in_handshake() {
            let Some(mut peer) = self.peers.remove(via) else {
                return out;
            };
            if self.peers.contains_key(&header.sender) || header.sender == self.me {
                // Already known under its name (or it is this node): the
                // half-known entry goes.
                out.push(Output::Dropped(*via));
                return out;
            }
            peer.name = header.sender;
            peer.flags =
                header.flags & !(node_flags::MYSELF | node_flags::HANDSHAKE | node_flags::MEET);
            self.peers.insert(header.sender, peer);
            out.push(Output::Dropped(*via));
            out.push(Output::SaveConfig);
        }
        if header.kind == kind::PONG {
            let undo_after = self.node_timeout_ms * FAIL_UNDO_TIME_MULT;
            if let Some(peer) = self.peers.get_mut(&header.sender) {
                peer.pong_received_ms = now_ms;
                peer.ping_sent_ms = 0;
                if peer.flags & node_flags::PFAIL != 0 {
                    peer.flags &= !node_flags::PFAIL;
                    out.push(Output::SaveConfig);
                }
                // A failed master that answers again is cleared once the
                // failure is old enough that no failover is under way
                // (clearNodeFailureIfNeeded).
                if peer.flags & node_flags::FAIL != 0
                    && now_ms.saturating_sub(peer.fail_time_ms) > undo_after
                {
                    peer.flags &= !node_flags::FAIL;
                    peer.fail_reports.clear();
                    out.push(Output::SaveConfig);
                }
            }
        }
        out.extend(self.learn_from(message, now_ms));
        out
    }

    /// What a fully known sender's header and gossip teach: its epochs,
    /// its slots (when its config epoch is newer than the owner's), and
    /// nodes this node has not met.
    fn learn_from(&mut self, message: &Message, now_ms: u64) -> Vec<Output> {
        let header = &message.header;
        let mut out = Vec::new();
        let mut changed = false;
        if header.current_epoch > self.current_epoch {
            self.current_epoch = header.current_epoch;
            changed = true;
        }
        if let Some(peer) = self.peers.get_mut(&header.sender) {
            if header.config_epoch > peer.config_epoch {
                peer.config_epoch = header.config_epoch;
                changed = true;
            }
        }
        // Slots are claimed by PING, PONG and MEET headers only, as
        // clusterProcessPacket reads them.
        let claims = matches!(header.kind, kind::PING | kind::PONG | kind::MEET);
        if claims {
            // Its hostname extension, or none: a node that stops sending
            // one has none any more (clusterProcessPingExt).
            if let (Some(peer), Body::Ping { extensions, .. }) =
                (self.peers.get_mut(&header.sender), &message.body)
            {
                let hostname = extensions
                    .iter()
                    .find_map(|e| match e {
                        // Kept only if nodes.conf can hold it (the
                        // characters cluster-announce-hostname allows).
                        crate::message::Extension::Hostname(name)
                            if name.len() < 256
                                && name
                                    .iter()
                                    .all(|b| b.is_ascii_alphanumeric() || b"-.".contains(b)) =>
                        {
                            Some(name.clone())
                        }
                        _ => None,
                    })
                    .unwrap_or_default();
                if peer.hostname != hostname {
                    peer.hostname = hostname;
                    changed = true;
                }
            }
        }
        if claims && header.flags & node_flags::MASTER != 0 && header.sender != self.me {
            let (slots_changed, lost) =
                self.update_slots_with(&header.sender, header.config_epoch, &header.slots);
            changed |= slots_changed;
            if !lost.is_empty() {
                out.push(Output::SlotsLost(lost));
            }
            out.extend(self.update_if_stale(message));
            // Two masters with one config epoch: the one with the smaller
            // name takes a new epoch (clusterHandleConfigEpochCollision),
            // so every master's claims are ordered.
            if header.config_epoch == self.config_epoch && header.sender > self.me {
                self.current_epoch += 1;
                self.config_epoch = self.current_epoch;
                changed = true;
            }
        }
        if let Body::Update {
            config_epoch,
            node,
            slots,
        } = &message.body
        {
            // What another node knows of `node`'s slots, newer than this
            // node's view (clusterProcessPacket's UPDATE).
            if let Some(peer) = self.peers.get_mut(node) {
                if peer.config_epoch < *config_epoch {
                    peer.config_epoch = *config_epoch;
                    let (_, lost) = self.update_slots_with(node, *config_epoch, slots);
                    if !lost.is_empty() {
                        out.push(Output::SlotsLost(lost));
                    }
                    changed = true;
                }
            }
        }
        if let Body::Ping { gossip, .. } = &message.body {
            let from_master = header.flags & node_flags::MASTER != 0;
            for g in gossip {
                if g.node == self.me {
                    continue;
                }
                if self.peers.contains_key(&g.node) {
                    if from_master {
                        out.extend(self.note_report(&g.node, &header.sender, g.flags, now_ms));
                    }
                    out.extend(self.learn_from_gossip(g, now_ms));
                    continue;
                }
                let banned = self
                    .forgotten
                    .get(&g.node)
                    .is_some_and(|&until| until > now_ms);
                if !banned && g.flags & (node_flags::NOADDR | node_flags::HANDSHAKE) == 0 {
                    let ports = (g.port, g.pport);
                    out.extend(self.start_handshake(&g.ip, ports, g.cport, now_ms, false));
                }
            }
        }
        if changed {
            out.push(Output::SaveConfig);
        }
        out
    }

    /// What one gossip entry about a known node teaches besides failure
    /// reports (clusterProcessGossipSection):
    /// - a PONG it had from the node later than this node's last one
    ///   counts as this node's own, while this node has no PING pending
    ///   and no live failure report for it. This is what keeps a big
    ///   cluster's bus quiet: a node is pinged for being silent only when
    ///   nobody heard from it for half the node timeout, not when this
    ///   node did not. The time comes in whole seconds; one more than half
    ///   a second ahead of this node's clock is not believed;
    /// - a node this node sees failing, seen reachable at another address
    ///   by the sender, moved there: its links close and reopen there.
    fn learn_from_gossip(&mut self, g: &Gossip, now_ms: u64) -> Vec<Output> {
        let validity = self.node_timeout_ms * FAIL_REPORT_VALIDITY_MULT;
        let Some(peer) = self.peers.get_mut(&g.node) else {
            return Vec::new();
        };
        let reported_failing = g.flags & (node_flags::PFAIL | node_flags::FAIL) != 0;
        let live_reports = peer
            .fail_reports
            .iter()
            .any(|(_, at)| now_ms.saturating_sub(*at) <= validity);
        if !reported_failing && peer.ping_sent_ms == 0 && !live_reports {
            let pong_ms = u64::from(g.pong_received) * 1000;
            if pong_ms <= now_ms + 500 && pong_ms > peer.pong_received_ms {
                peer.pong_received_ms = pong_ms;
            }
        }
        let moved = peer.ip != g.ip || peer.port != g.port || peer.cport != g.cport;
        if peer.failing() && !reported_failing && g.flags & node_flags::NOADDR == 0 && moved {
            peer.ip = g.ip.clone();
            peer.port = g.port;
            peer.pport = g.pport;
            peer.cport = g.cport;
            return vec![Output::Dropped(g.node), Output::SaveConfig];
        }
        Vec::new()
    }

    /// Takes the slots `sender` claims whose owner has an older config
    /// epoch, or none (clusterUpdateSlotsConfigWith); a slot being
    /// imported is left to the operator. Returns whether anything changed
    /// and the slots taken from this node.
    fn update_slots_with(
        &mut self,
        sender: &NodeName,
        epoch: u64,
        slots: &[u8; SLOTS / 8],
    ) -> (bool, Vec<u16>) {
        let mut changed = false;
        let mut lost = Vec::new();
        let sender_id = self.known_owner_id(sender);
        let me = self.known_owner_id(&self.me);
        // Owners come in long runs: each one's epoch is looked up once a run.
        let mut last: Option<(u16, u64)> = None;
        for slot in claimed(slots) {
            let owner = self.owners[slot as usize];
            if (owner != 0 && Some(owner) == sender_id) || self.importing.contains_key(&slot) {
                continue;
            }
            let older = owner == 0 || {
                let owner_epoch = match last {
                    Some((id, e)) if id == owner => e,
                    _ => {
                        let e = self.name_of_owner(owner).map_or(0, |o| self.epoch_of(o));
                        last = Some((owner, e));
                        e
                    }
                };
                owner_epoch < epoch
            };
            if older {
                if owner != 0 && Some(owner) == me {
                    lost.push(slot);
                }
                self.set_owner(slot, Some(*sender));
                changed = true;
            }
        }
        (changed, lost)
    }

    /// A sender that claims a slot this node knows is served with a newer
    /// config epoch is told so with an UPDATE about the owner (one per
    /// message, as Redis).
    fn update_if_stale(&self, message: &Message) -> Vec<Output> {
        let header = &message.header;
        let Some(sender) = self.peers.get(&header.sender) else {
            return Vec::new();
        };
        let sender_id = self.known_owner_id(&header.sender);
        let mut last: Option<(u16, u64)> = None;
        let newer = claimed(&header.slots).find_map(|slot| {
            let owner = self.owners[slot as usize];
            if owner == 0 || Some(owner) == sender_id {
                return None;
            }
            let owner_epoch = match last {
                Some((id, e)) if id == owner => e,
                _ => {
                    let e = self.name_of_owner(owner).map_or(0, |o| self.epoch_of(o));
                    last = Some((owner, e));
                    e
                }
            };
            (owner_epoch > header.config_epoch).then_some(owner)
        });
        let Some(owner) = newer else {
            return Vec::new();
        };
        let mut slots = Box::new([0u8; SLOTS / 8]);
        for (slot, &o) in self.owners.iter().enumerate() {
            if o == owner {
                slots[slot / 8] |= 1 << (slot % 8);
            }
        }
        let Some(&owner) = self.name_of_owner(owner) else {
            return Vec::new();
        };
        vec![Output::Send {
            to: sender.name,
            ip: sender.ip.clone(),
            cport: sender.cport,
            message: Message {
                header: self.header(kind::UPDATE),
                body: Body::Update {
                    config_epoch: self.epoch_of(&owner),
                    node: owner,
                    slots,
                },
            },
        }]
    }

    /// A master's gossip about `node`: a failure report while it says PFAIL
    /// or FAIL, none otherwise; then the node may be marked FAIL.
    fn note_report(
        &mut self,
        node: &NodeName,
        reporter: &NodeName,
        flags: u16,
        now_ms: u64,
    ) -> Vec<Output> {
        let Some(peer) = self.peers.get_mut(node) else {
            return Vec::new();
        };
        peer.fail_reports.retain(|(who, _)| who != reporter);
        if flags & (node_flags::PFAIL | node_flags::FAIL) != 0 {
            peer.fail_reports.push((*reporter, now_ms));
        }
        self.mark_failing_if_needed(node, now_ms)
    }

    /// Masters serving slots: the cluster's size, and the quorum is a
    /// majority of it.
    fn quorum(&self) -> usize {
        self.serving_masters() / 2 + 1
    }

    /// A node this node sees PFAIL becomes FAIL when, with this node's own
    /// view, a majority of the masters reported it failing within twice the
    /// node timeout (markNodeAsFailingIfNeeded); the FAIL goes to every node.
    fn mark_failing_if_needed(&mut self, node: &NodeName, now_ms: u64) -> Vec<Output> {
        let validity = self.node_timeout_ms * FAIL_REPORT_VALIDITY_MULT;
        let Some(peer) = self.peers.get_mut(node) else {
            return Vec::new();
        };
        peer.fail_reports
            .retain(|(_, at)| now_ms.saturating_sub(*at) <= validity);
        if peer.flags & node_flags::PFAIL == 0 || peer.flags & node_flags::FAIL != 0 {
            return Vec::new();
        }
        // Counted only for a suspect: it walks the slot table.
        let quorum = self.quorum();
        let Some(peer) = self.peers.get_mut(node) else {
            return Vec::new();
        };
        // This node is a master: its own view counts.
        if peer.fail_reports.len() + 1 < quorum {
            return Vec::new();
        }
        peer.flags = (peer.flags & !node_flags::PFAIL) | node_flags::FAIL;
        peer.fail_time_ms = now_ms;
        let mut out = vec![Output::SaveConfig];
        let fail = Message {
            header: self.header(kind::FAIL),
            body: Body::Fail { node: *node },
        };
        for other in self
            .peers
            .values()
            .filter(|p| !p.in_handshake() && p.name != *node)
        {
            out.push(Output::Send {
                to: other.name,
                ip: other.ip.clone(),
                cport: other.cport,
                message: fail.clone(),
            });
        }
        out
    }

    /// Slots whose owner is reachable (this node, or a peer not FAIL).
    pub fn slots_ok(&self) -> usize {
        // Runs every tick: adds up the counts of the reachable owners.
        self.owner_names
            .iter()
            .zip(&self.slot_counts[1..])
            .filter(|(name, _)| {
                **name == self.me
                    || self
                        .peers
                        .get(*name)
                        .is_some_and(|p| p.flags & node_flags::FAIL == 0)
            })
            .map(|(_, &count)| count as usize)
            .sum()
    }

    /// Valid failure reports about `name` (COUNT-FAILURE-REPORTS).
    pub fn failure_reports(&self, name: &NodeName) -> Option<usize> {
        if *name == self.me {
            return Some(0);
        }
        self.peers.get(name).map(|p| p.fail_reports.len())
    }

    fn epoch_of(&self, name: &NodeName) -> u64 {
        if *name == self.me {
            self.config_epoch
        } else {
            self.peers.get(name).map_or(0, |p| p.config_epoch)
        }
    }

    /// The periodic work (Redis's clusterCron, every 100 ms): half-known
    /// nodes that never answered are dropped; once a second the node with
    /// the oldest PONG of five picked at random is pinged, and so is any
    /// node whose PONG is older than half the node timeout.
    pub fn tick(&mut self, now_ms: u64) -> Vec<Output> {
        let mut out = Vec::new();
        self.ticks += 1;
        if self.ticks % 10 == 0 {
            out.extend(self.ping_a_random_node(now_ms));
        }
        let handshake_timeout = self.node_timeout_ms.max(MIN_HANDSHAKE_TIMEOUT_MS);
        let expired: Vec<NodeName> = self
            .peers
            .values()
            .filter(|p| p.in_handshake() && now_ms.saturating_sub(p.created_ms) > handshake_timeout)
            .map(|p| p.name)
            .collect();
        for name in expired {
            self.peers.remove(&name);
            out.push(Output::Dropped(name));
        }
        let half = self.node_timeout_ms / 2;
        let due: Vec<NodeName> = self
            .peers
            .values()
            .filter(|p| {
                !p.in_handshake()
                    && ((p.ping_sent_ms == 0 && now_ms.saturating_sub(p.pong_received_ms) > half)
                        // A PING unanswered for half the timeout is sent
                        // again (the link may be gone; Redis reconnects).
                        || (p.ping_sent_ms != 0 && now_ms.saturating_sub(p.last_ping_ms) > half))
            })
            .map(|p| p.name)
            .collect();
        for name in due {
            let message = self.ping(kind::PING);
            if let Some(peer) = self.peers.get_mut(&name) {
                if peer.ping_sent_ms == 0 {
                    peer.ping_sent_ms = now_ms;
                }
                peer.last_ping_ms = now_ms;
                out.push(Output::Send {
                    to: name,
                    ip: peer.ip.clone(),
                    cport: peer.cport,
                    message,
                });
            }
        }
        // No PONG within the node timeout: PFAIL, and maybe FAIL already.
        let timed_out: Vec<NodeName> = self
            .peers
            .values()
            .filter(|p| {
                !p.in_handshake()
                    && !p.failing()
                    && p.ping_sent_ms != 0
                    && now_ms.saturating_sub(p.ping_sent_ms) > self.node_timeout_ms
            })
            .map(|p| p.name)
            .collect();
        for name in timed_out {
            if let Some(peer) = self.peers.get_mut(&name) {
                peer.flags |= node_flags::PFAIL;
            }
            out.push(Output::SaveConfig);
        }
        let suspects: Vec<NodeName> = self
            .peers
            .values()
            .filter(|p| p.flags & node_flags::PFAIL != 0)
            .map(|p| p.name)
            .collect();
        for name in suspects {
            out.extend(self.mark_failing_if_needed(&name, now_ms));
        }
        // A handshake whose MEET or PING went unanswered is retried (the
        // link may have failed), until it times out.
        let retry: Vec<(NodeName, Vec<u8>, u16, bool)> = self
            .peers
            .values()
            .filter(|p| p.in_handshake())
            .map(|p| {
                (
                    p.name,
                    p.ip.clone(),
                    p.cport,
                    p.flags & node_flags::MEET != 0,
                )
            })
            .collect();
        for (name, ip, cport, meet) in retry {
            let message = self.ping(if meet { kind::MEET } else { kind::PING });
            out.push(Output::Send {
                to: name,
                ip,
                cport,
                message,
            });
        }
        out
    }

    /// A PING to a known node now, outside the tick's schedule: lets a
    /// test or a simulation stage one exchange on its own.
    pub fn ping_now(&mut self, to: &NodeName, now_ms: u64) -> Vec<Output> {
        let message = self.ping(kind::PING);
        let Some(peer) = self.peers.get_mut(to) else {
            return Vec::new();
        };
        if peer.ping_sent_ms == 0 {
            peer.ping_sent_ms = now_ms;
        }
        peer.last_ping_ms = now_ms;
        vec![Output::Send {
            to: *to,
            ip: peer.ip.clone(),
            cport: peer.cport,
            message,
        }]
    }

    /// clusterCron's once-a-second PING: of five nodes picked at random
    /// (fully known, no PING pending), the one heard from longest ago. It
    /// is what spreads news (a new node, a new owner) in a few seconds
    /// whatever the node timeout.
    fn ping_a_random_node(&mut self, now_ms: u64) -> Vec<Output> {
        let candidates: Vec<NodeName> = self
            .peers
            .values()
            .filter(|p| !p.in_handshake() && p.ping_sent_ms == 0)
            .map(|p| p.name)
            .collect();
        if candidates.is_empty() {
            return Vec::new();
        }
        let mut oldest: Option<(u64, NodeName)> = None;
        for _ in 0..5 {
            let name = candidates[(self.random() % candidates.len() as u64) as usize];
            let pong = self.peers.get(&name).map_or(0, |p| p.pong_received_ms);
            if oldest.is_none_or(|(at, _)| pong < at) {
                oldest = Some((pong, name));
            }
        }
        let Some((_, name)) = oldest else {
            return Vec::new();
        };
        let message = self.ping(kind::PING);
        let Some(peer) = self.peers.get_mut(&name) else {
            return Vec::new();
        };
        peer.ping_sent_ms = now_ms;
        peer.last_ping_ms = now_ms;
        vec![Output::Send {
            to: name,
            ip: peer.ip.clone(),
            cport: peer.cport,
            message,
        }]
    }

    /// Open slots in slot order, as Redis lists them on its own line: a
    /// slot both migrating and importing shows as migrating.
    fn moving(&self) -> Vec<(u16, Moving)> {
        let text = |name: &NodeName| String::from_utf8_lossy(name).into_owned();
        let mut moving: Vec<(u16, Moving)> = self
            .migrating
            .iter()
            .map(|(&slot, to)| (slot, Moving::To(text(to))))
            .chain(
                self.importing
                    .iter()
                    .filter(|(slot, _)| !self.migrating.contains_key(slot))
                    .map(|(&slot, from)| (slot, Moving::From(text(from)))),
            )
            .collect();
        moving.sort_by_key(|(slot, _)| *slot);
        moving
    }

    /// The node's nodes.conf.
    pub fn nodes_conf(&self) -> NodesConf {
        // Every owner's ranges in one pass over the slots (a reshard saves
        // this file for every slot it moves).
        let mut by_owner: BTreeMap<NodeName, Vec<(u16, u16)>> = BTreeMap::new();
        let mut slot = 0;
        while slot < SLOTS {
            let Some(&owner) = self.name_of_owner(self.owners[slot]) else {
                slot += 1;
                continue;
            };
            let start = slot;
            while slot + 1 < SLOTS && self.owners[slot + 1] == self.owners[start] {
                slot += 1;
            }
            by_owner
                .entry(owner)
                .or_default()
                .push((start as u16, slot as u16));
            slot += 1;
        }
        let mut ranges = |name: &NodeName| by_owner.remove(name).unwrap_or_default();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        let mut nodes = vec![NodeLine {
            name: text(&self.me),
            ip: text(&self.ip),
            port: self.port,
            pport: self.pport,
            cport: self.cport,
            hostname: (!self.hostname.is_empty()).then(|| text(&self.hostname)),
            flags: vec!["myself".into(), "master".into()],
            master: None,
            ping_sent: 0,
            pong_received: 0,
            config_epoch: self.config_epoch,
            link: "connected".into(),
            slots: ranges(&self.me),
            moving: self.moving(),
        }];
        for peer in self.peers.values() {
            let mut flags = Vec::new();
            if peer.flags & node_flags::MASTER != 0 {
                flags.push("master".to_string());
            }
            if peer.flags & node_flags::PFAIL != 0 {
                flags.push("fail?".to_string());
            }
            if peer.flags & node_flags::FAIL != 0 {
                flags.push("fail".to_string());
            }
            if peer.in_handshake() {
                flags.push("handshake".to_string());
            }
            if flags.is_empty() {
                flags.push("noflags".to_string());
            }
            nodes.push(NodeLine {
                name: text(&peer.name),
                ip: text(&peer.ip),
                port: peer.port,
                pport: peer.pport,
                cport: peer.cport,
                hostname: (!peer.hostname.is_empty()).then(|| text(&peer.hostname)),
                flags,
                master: None,
                ping_sent: peer.ping_sent_ms,
                pong_received: peer.pong_received_ms,
                config_epoch: peer.config_epoch,
                link: "connected".into(),
                slots: ranges(&peer.name),
                moving: Vec::new(),
            });
        }
        NodesConf {
            nodes,
            current_epoch: self.current_epoch,
            last_vote_epoch: self.last_vote_epoch,
        }
    }
}

/// The slots set in a slot bitmap.
fn claimed(slots: &[u8; SLOTS / 8]) -> impl Iterator<Item = u16> + '_ {
    // A 64-bit word at a time, one trailing-zero count per set bit: every
    // PING's claims go through here.
    slots
        .chunks_exact(8)
        .enumerate()
        .flat_map(|(word_index, word)| {
            let mut bits = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let bit = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some((word_index * 64 + bit) as u16)
            })
        })
}

/// Encodes and decodes every message the node emits, so a simulation
/// exercises the real wire format too.
pub fn through_the_wire(message: &Message) -> Message {
    message::decode(&message::encode(message)).unwrap_or_else(|_| message.clone())
}
