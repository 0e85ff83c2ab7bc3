//! Replicas and failover, as Redis 7.0's cluster does them:
//! - a node becomes a replica with CLUSTER REPLICATE, or when the master
//!   it served (or replicated) lost its last slot to a node with a newer
//!   config epoch (clusterSetMaster);
//! - a replica whose master is FAIL asks every master for its vote in a
//!   new epoch, at once if no other replica of its master has a newer
//!   offset (Valkey's change; ties broken by name), else after 500 ms plus
//!   up to 500 ms at random plus a second per better replica, as Redis
//!   waits; with a majority of the masters serving slots it takes its
//!   master's slots under that epoch (clusterHandleSlaveFailover);
//! - a master votes once per epoch, and once per failed master per twice
//!   the node timeout, for a replica whose master is FAIL and whose claim
//!   is not older than any slot's owner (clusterSendFailoverAuthIfNeeded);
//! - CLUSTER FAILOVER: the default waits for the master to pause writes
//!   and for the replica to reach the master's offset, FORCE skips that,
//!   TAKEOVER skips the election too (`manual.rs`);
//! - a spare replica moves to a master left without a working one
//!   (replica migration, `migration.rs`).
//!
//! The driver tells the node its replication offset and how long its
//! master link has been down ([`Node::observe_replication`]) and points
//! its replication at [`Node::replicating`] when the role changes.

use super::{Node, Output};
use crate::message::{self, kind, node_flags, Body, Message};
use crate::{NodeName, SLOTS};

/// What the driver last told of this node's replication.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Replication {
    /// A master's stream offset, or a replica's processed offset.
    pub offset: u64,
    /// How long a replica's master link has been silent or down (0 for a
    /// master, or a replica that just heard from its master).
    pub data_age_ms: u64,
}

/// The settings elections follow.
#[derive(Debug, Clone, Copy)]
pub(super) struct Settings {
    /// `cluster-replica-validity-factor`: a replica whose data is older
    /// than the node timeout times this (plus the ping period) does not
    /// stand for election; 0 always stands.
    pub validity_factor: u64,
    /// `repl-ping-replica-period`, in ms.
    pub ping_period_ms: u64,
    /// `cluster-replica-no-failover`: never stand unless asked (CLUSTER
    /// FAILOVER).
    pub no_failover: bool,
    /// `cluster-allow-replica-migration`: a master whose slots all went
    /// to another node follows it even if that node serves others too,
    /// and a spare replica moves to a master left without one.
    pub allow_replica_migration: bool,
    /// `cluster-migration-barrier`: a replica moves to an orphaned master
    /// only if its own keeps more working replicas than this.
    pub migration_barrier: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            validity_factor: 10,
            ping_period_ms: 10_000,
            no_failover: false,
            allow_replica_migration: true,
            migration_barrier: 1,
        }
    }
}

/// A replica's election (clusterState's failover_auth_*).
#[derive(Debug, Clone, Default)]
pub(super) struct Election {
    /// When the election may start (or started); 0: never scheduled.
    pub at_ms: u64,
    /// The masters that voted for this replica (a set: a vote that
    /// arrives twice counts once).
    pub voters: Vec<NodeName>,
    /// The request for votes went out.
    pub asked: bool,
    /// This replica's rank when the election was scheduled.
    pub rank: u64,
    /// The epoch votes were asked in.
    pub epoch: u64,
}

/// Why CLUSTER FAILOVER or CLUSTER REPLICATE is refused (Redis's texts
/// come from [`std::fmt::Display`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailoverError {
    /// CLUSTER FAILOVER on a master.
    NotAReplica,
    /// A replica whose master this node does not know.
    MasterUnknown,
    /// The master is failing or unreachable and FORCE was not given.
    MasterDown,
    /// CLUSTER REPLICATE of an unknown node.
    UnknownNode(String),
    /// CLUSTER REPLICATE of this node.
    ReplicateMyself,
    /// CLUSTER REPLICATE of a replica.
    ReplicateAReplica,
    /// CLUSTER REPLICATE on a master with slots or keys.
    NotEmpty,
}

impl std::fmt::Display for FailoverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FailoverError::NotAReplica => {
                f.write_str("You should send CLUSTER FAILOVER to a replica")
            }
            FailoverError::MasterUnknown => {
                f.write_str("I'm a replica but my master is unknown to me")
            }
            FailoverError::MasterDown => {
                f.write_str("Master is down or failed, please use CLUSTER FAILOVER FORCE")
            }
            FailoverError::UnknownNode(name) => write!(f, "Unknown node {name}"),
            FailoverError::ReplicateMyself => f.write_str("Can't replicate myself"),
            FailoverError::ReplicateAReplica => {
                f.write_str("I can only replicate a master, not a replica.")
            }
            FailoverError::NotEmpty => {
                f.write_str("To set a master the node must be empty and without assigned slots.")
            }
        }
    }
}

impl Node {
    /// The election settings: `cluster-replica-validity-factor`,
    /// `repl-ping-replica-period` (seconds), `cluster-replica-no-failover`,
    /// `cluster-allow-replica-migration` and `cluster-migration-barrier`.
    pub fn set_failover_settings(
        &mut self,
        validity_factor: u64,
        ping_period_s: u64,
        no_failover: bool,
        allow_replica_migration: bool,
        migration_barrier: usize,
    ) {
        self.failover_settings = Settings {
            validity_factor,
            ping_period_ms: ping_period_s.saturating_mul(1000),
            no_failover,
            allow_replica_migration,
            migration_barrier,
        };
    }

    /// The driver's view of replication: this node's offset (a master's
    /// stream, a replica's processed stream) and, for a replica, how long
    /// since its master was last heard from.
    pub fn observe_replication(&mut self, offset: u64, data_age_ms: u64) {
        self.replication = super::failover::Replication {
            offset,
            data_age_ms,
        };
    }

    /// This node replicates `master`, as nodes.conf said at start.
    pub fn restore_my_master(&mut self, master: NodeName) {
        self.my_master = Some(master);
    }

    /// The master this node replicates (None: it is a master).
    pub fn my_master(&self) -> Option<&NodeName> {
        self.my_master.as_ref()
    }

    /// Where this node's replication should point: its master's IP, client
    /// port and plaintext port (0 unless the cluster runs TLS, when the
    /// client port is the TLS one), once known; None for a master.
    pub fn replicating(&self) -> Option<(Vec<u8>, u16, u16)> {
        let master = self.my_master?;
        let peer = self.peers.get(&master)?;
        (!peer.in_handshake() && !peer.ip.is_empty() && peer.flags & node_flags::NOADDR == 0)
            .then(|| (peer.ip.clone(), peer.port, peer.pport))
    }

    /// The replication offset `name` last gave (this node's own for itself).
    pub fn repl_offset_of(&self, name: &NodeName) -> u64 {
        if *name == self.me {
            return self.replication.offset;
        }
        self.peers.get(name).map_or(0, |p| p.repl_offset)
    }

    /// The known replicas of `master`.
    pub fn replicas_of(&self, master: &NodeName) -> Vec<NodeName> {
        self.peers
            .values()
            .filter(|p| p.is_replica() && p.master.as_ref() == Some(master))
            .map(|p| p.name)
            .chain(self.my_master.filter(|m| m == master).map(|_| self.me))
            .collect()
    }

    /// True when `name` (a peer, or this node) is a replica.
    pub fn is_replica(&self, name: &NodeName) -> bool {
        if *name == self.me {
            return self.my_master.is_some();
        }
        self.peers.get(name).is_some_and(|p| p.is_replica())
    }

    /// CLUSTER REPLICATE <master>: `keys` is how many keys this node holds
    /// (a master must hold none, and no slot, to become a replica).
    pub fn replicate(&mut self, master: &[u8], keys: usize) -> Result<Vec<Output>, FailoverError> {
        let unknown = || FailoverError::UnknownNode(String::from_utf8_lossy(master).into_owned());
        let master: NodeName = master.try_into().map_err(|_| unknown())?;
        if master == self.me {
            return Err(FailoverError::ReplicateMyself);
        }
        let peer = self.peers.get(&master).ok_or_else(unknown)?;
        if peer.is_replica() {
            return Err(FailoverError::ReplicateAReplica);
        }
        if self.my_master.is_none() && (self.my_slot_count() != 0 || keys != 0) {
            return Err(FailoverError::NotEmpty);
        }
        Ok(self.set_master(master))
    }

    /// How many slots this node serves.
    pub(super) fn my_slot_count(&self) -> usize {
        self.known_owner_id(&self.me)
            .map_or(0, |id| self.slot_counts[usize::from(id)] as usize)
    }

    /// How many slots `name` serves.
    pub(super) fn slot_count_of(&self, name: &NodeName) -> usize {
        self.known_owner_id(name)
            .map_or(0, |id| self.slot_counts[usize::from(id)] as usize)
    }

    /// `name`'s slots as a bitmap (a replica's header carries its master's).
    pub(super) fn slots_of(&self, name: &NodeName) -> [u8; SLOTS / 8] {
        let mut slots = [0u8; SLOTS / 8];
        if let Some(id) = self.known_owner_id(name) {
            for (slot, &owner) in self.owners.iter().enumerate() {
                if owner == id {
                    slots[slot / 8] |= 1 << (slot % 8);
                }
            }
        }
        slots
    }

    /// Frees every slot `name` serves (a node forgotten, a master that
    /// became a replica).
    pub(super) fn clear_slots_of(&mut self, name: &NodeName) {
        if let Some(id) = self.known_owner_id(name) {
            for slot in 0..SLOTS as u16 {
                if self.owners[slot as usize] == id {
                    self.set_owner(slot, None);
                }
            }
        }
    }

    /// This node replicates `master` from now on (clusterSetMaster): a
    /// master gives up its open slots (it has no slots left by the time
    /// this is called), and a manual failover under way ends.
    pub(super) fn set_master(&mut self, master: NodeName) -> Vec<Output> {
        if self.my_master.is_none() {
            self.migrating.clear();
            self.importing.clear();
        }
        self.my_master = Some(master);
        self.election = Election::default();
        let mut out = self.reset_manual_failover();
        out.extend([Output::RoleChanged, Output::SaveConfig]);
        out
    }

    /// Ends a manual failover; a master that paused writes for it resumes
    /// them (resetManualFailover).
    pub(super) fn reset_manual_failover(&mut self) -> Vec<Output> {
        let paused = self.manual.replica.is_some();
        self.manual = super::manual::Manual::default();
        if paused {
            vec![Output::ResumeWrites]
        } else {
            Vec::new()
        }
    }

    /// What a PING, PONG or MEET header says of the sender's role
    /// (clusterProcessPacket's role switch): a master that now replicates
    /// gives up its slots; a replica's master is recorded. True when
    /// something changed.
    pub(super) fn learn_role(&mut self, header: &message::Header) -> bool {
        let known_master = header.slaveof != [0; 40] && self.knows(&header.slaveof);
        let Some(peer) = self.peers.get_mut(&header.sender) else {
            return false;
        };
        if header.slaveof == [0; 40] {
            if peer.is_replica() || peer.flags & node_flags::MASTER == 0 {
                // A replica turned master (a failover) is a place for a
                // spare replica to go (clusterSetNodeAsMaster).
                let promoted = peer.is_replica();
                peer.flags = (peer.flags & !node_flags::SLAVE) | node_flags::MASTER;
                if promoted {
                    peer.flags |= node_flags::MIGRATE_TO;
                }
                peer.master = None;
                return true;
            }
            return false;
        }
        let mut changed = false;
        if peer.flags & node_flags::MASTER != 0 || !peer.is_replica() {
            peer.flags =
                (peer.flags & !(node_flags::MASTER | node_flags::MIGRATE_TO)) | node_flags::SLAVE;
            changed = true;
        }
        if known_master && peer.master != Some(header.slaveof) {
            peer.master = Some(header.slaveof);
            changed = true;
        }
        if changed {
            let sender = header.sender;
            self.clear_slots_of(&sender);
            // A master that had a replica may be orphaned later
            // (clusterNodeAddSlave's MIGRATE_TO).
            if let Some(master) = self.peers.get_mut(&header.slaveof) {
                master.flags |= node_flags::MIGRATE_TO;
            }
        }
        changed
    }

    /// A replica's rank among its master's replicas: how many of them
    /// (able to fail over) claim a newer offset (clusterGetSlaveRank), or
    /// the same offset and a smaller name. The tie-break is tally's (as
    /// Valkey's): replicas of an idle master all have one offset, and with
    /// Redis's rank they would all be rank 0 and, asking for votes at once,
    /// split them.
    fn rank(&self) -> u64 {
        let Some(master) = self.my_master else {
            return 0;
        };
        let mine = self.replication.offset;
        self.peers
            .values()
            .filter(|p| {
                p.master == Some(master)
                    && p.is_replica()
                    && p.flags & node_flags::NOFAILOVER == 0
                    && (p.repl_offset > mine || (p.repl_offset == mine && p.name < self.me))
            })
            .count() as u64
    }

    /// The election, run every tick on a replica (clusterHandleSlaveFailover).
    pub(super) fn run_election(&mut self, now_ms: u64) -> Vec<Output> {
        let manual = self.manual.end_ms != 0 && self.manual.can_start;
        let Some(master) = self.my_master else {
            return Vec::new();
        };
        let master_failed = self.peers.get(&master).is_some_and(|p| p.failed());
        let automatic = master_failed && !self.failover_settings.no_failover;
        if !(automatic || manual) || self.slot_count_of(&master) == 0 {
            return Vec::new();
        }
        let auth_timeout = (self.node_timeout_ms * 2).max(2000);
        let auth_retry = auth_timeout * 2;
        let auth_age = now_ms.saturating_sub(self.election.at_ms);
        let mut data_age = self.replication.data_age_ms;
        if data_age > self.node_timeout_ms {
            data_age -= self.node_timeout_ms;
        }
        let settings = self.failover_settings;
        if settings.validity_factor != 0
            && data_age > settings.ping_period_ms + self.node_timeout_ms * settings.validity_factor
            && !manual
        {
            return Vec::new();
        }
        let mut out = Vec::new();
        if self.election.at_ms == 0 || auth_age > auth_retry {
            let rank = self.rank();
            // The best-ranked replica asks at once (Valkey's change): the
            // FAIL that started this reached the voters when it reached
            // this replica. The others wait as Redis has every replica
            // wait, half a second and up to half a second more at random,
            // plus a second per rank, so the best one wins first.
            let delay = if rank == 0 {
                0
            } else {
                500 + self.random() % 500 + rank * 1000
            };
            self.election = Election {
                at_ms: now_ms + delay,
                voters: Vec::new(),
                asked: false,
                rank,
                epoch: 0,
            };
            if self.manual.end_ms != 0 {
                self.election.at_ms = now_ms;
                self.election.rank = 0;
            }
            // The other replicas learn this one's offset, and wait longer
            // if it is newer than theirs.
            let pong = self.ping(kind::PONG);
            out.extend(self.send_where(&pong, |p| p.master == Some(master) && p.is_replica()));
        }
        let auth_age = now_ms.saturating_sub(self.election.at_ms);
        if !self.election.asked && self.manual.end_ms == 0 {
            let rank = self.rank();
            if rank > self.election.rank {
                self.election.at_ms += (rank - self.election.rank) * 1000;
                self.election.rank = rank;
            }
        }
        if now_ms < self.election.at_ms || auth_age > auth_timeout {
            return out;
        }
        if !self.election.asked {
            self.current_epoch += 1;
            self.election.epoch = self.current_epoch;
            self.election.asked = true;
            let request = self.auth_request();
            out.extend(self.broadcast(&request));
            out.push(Output::SaveConfig);
            return out;
        }
        let won = self.win_if_elected();
        if !won.is_empty() {
            out.extend(won);
            return out;
        }
        // Still short of a majority: the request again, in the same epoch,
        // to the masters that have not voted. A master that refused it
        // because the FAIL had not reached it yet votes now; one that
        // voted in this epoch refuses again (one vote per epoch), so this
        // never wins an election Redis's single request could not.
        if self.current_epoch == self.election.epoch {
            let request = self.auth_request();
            out.extend(self.send_where(&request, |p| !self.election.voters.contains(&p.name)));
        }
        out
    }

    /// A FAILOVER_AUTH_REQUEST for the current epoch (FORCEACK in a manual
    /// failover).
    fn auth_request(&self) -> Message {
        let mut request = Message {
            header: self.header(kind::FAILOVER_AUTH_REQUEST),
            body: Body::Empty,
        };
        if self.manual.end_ms != 0 {
            request.header.mflags[0] |= message::MFLAG0_FORCEACK;
        }
        request
    }

    /// With a majority of the masters' votes, the replica takes over under
    /// the election's epoch.
    fn win_if_elected(&mut self) -> Vec<Output> {
        if !self.election.asked
            || self.my_master.is_none()
            || self.election.voters.len() < self.quorum()
        {
            return Vec::new();
        }
        if self.config_epoch < self.election.epoch {
            self.config_epoch = self.election.epoch;
        }
        self.replace_my_master()
    }

    /// This node just learned that `node` is FAIL: if it is this replica's
    /// master, the election runs now rather than at the next tick.
    pub(super) fn noticed_failure(&mut self, node: &NodeName, now_ms: u64) -> Vec<Output> {
        if self.my_master.as_ref() == Some(node) {
            self.run_election(now_ms)
        } else {
            Vec::new()
        }
    }

    /// The replica becomes the master of its master's slots and tells
    /// every node (clusterFailoverReplaceYourMaster).
    pub(super) fn replace_my_master(&mut self) -> Vec<Output> {
        let Some(old) = self.my_master.take() else {
            return Vec::new();
        };
        let me = self.me;
        if let Some(id) = self.known_owner_id(&old) {
            for slot in 0..SLOTS as u16 {
                if self.owners[slot as usize] == id {
                    self.set_owner(slot, Some(me));
                }
            }
        }
        self.election = Election::default();
        let mut out = self.reset_manual_failover();
        out.extend([Output::RoleChanged, Output::SaveConfig]);
        let pong = self.ping(kind::PONG);
        out.extend(self.broadcast(&pong));
        out
    }

    /// A master's answer to a replica asking for its vote
    /// (clusterSendFailoverAuthIfNeeded).
    pub(super) fn vote_if_deserved(&mut self, request: &Message, now_ms: u64) -> Vec<Output> {
        let header = &request.header;
        if self.my_master.is_some() || self.my_slot_count() == 0 {
            return Vec::new();
        }
        if header.current_epoch < self.current_epoch || self.last_vote_epoch == self.current_epoch {
            return Vec::new();
        }
        let force = header.mflags[0] & message::MFLAG0_FORCEACK != 0;
        let Some(candidate) = self.peers.get(&header.sender) else {
            return Vec::new();
        };
        let Some(master) = candidate.master.filter(|_| candidate.is_replica()) else {
            return Vec::new();
        };
        let master_failed = if master == self.me {
            false
        } else {
            self.peers.get(&master).is_some_and(|p| p.failed())
        };
        if !master_failed && !force {
            return Vec::new();
        }
        let voted_ms = self.peers.get(&master).map_or(0, |p| p.voted_ms);
        if voted_ms != 0 && now_ms.saturating_sub(voted_ms) < self.node_timeout_ms * 2 {
            return Vec::new();
        }
        let stale = super::slots::claimed(&header.slots).any(|slot| {
            let owner = self.owners[slot as usize];
            owner != 0
                && self
                    .name_of_owner(owner)
                    .is_some_and(|o| self.epoch_of(o) > header.config_epoch)
        });
        if stale {
            return Vec::new();
        }
        self.last_vote_epoch = self.current_epoch;
        if let Some(master) = self.peers.get_mut(&master) {
            master.voted_ms = now_ms;
        }
        let Some(candidate) = self.peers.get(&header.sender) else {
            return Vec::new();
        };
        vec![
            Output::SaveConfig,
            Output::Send {
                to: candidate.name,
                ip: candidate.ip.clone(),
                cport: candidate.cport,
                message: Message {
                    header: self.header(kind::FAILOVER_AUTH_ACK),
                    body: Body::Empty,
                },
            },
        ]
    }

    /// A vote counts if it comes from a master serving slots, in this
    /// election's epoch or later; the vote that makes a majority wins the
    /// election at once.
    pub(super) fn count_vote(&mut self, header: &message::Header) -> Vec<Output> {
        let from_serving_master = self
            .peers
            .get(&header.sender)
            .is_some_and(|p| !p.is_replica())
            && self.slot_count_of(&header.sender) > 0;
        if from_serving_master
            && header.current_epoch >= self.election.epoch
            && !self.election.voters.contains(&header.sender)
        {
            self.election.voters.push(header.sender);
        }
        self.win_if_elected()
    }

    /// Every tick: a manual failover past its time ends
    /// (manualFailoverCheckTimeout); a replica whose offset reached its
    /// paused master's may start the election (clusterHandleManualFailover);
    /// then the election itself.
    pub(super) fn failover_tick(&mut self, now_ms: u64) -> Vec<Output> {
        let mut out = Vec::new();
        if self.manual.end_ms != 0 && self.manual.end_ms < now_ms {
            out.extend(self.reset_manual_failover());
        }
        if self.my_master.is_none() {
            return out;
        }
        if self.manual.end_ms != 0 && !self.manual.can_start {
            // The replica applies the stream the master sent before it
            // paused: at that offset it has everything.
            if self
                .manual
                .master_offset
                .is_some_and(|offset| self.replication.offset >= offset)
            {
                self.manual.can_start = true;
            }
        }
        out.extend(self.run_election(now_ms));
        out.extend(self.migrate_if_spare(now_ms));
        out
    }
}
