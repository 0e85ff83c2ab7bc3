//! CLUSTER FAILOVER, as Redis 7.0 runs it: the default asks the master to
//! pause writes (MFSTART) and starts the election once the replica has
//! reached the offset the paused master gave; FORCE starts it at once;
//! TAKEOVER takes a new epoch and the slots without one.

use super::failover::FailoverError;
use super::{Node, Output};
use crate::message::{self, kind, Body, Message};
use crate::NodeName;

/// A manual failover's time limit (CLUSTER_MF_TIMEOUT).
pub(super) const MANUAL_TIMEOUT_MS: u64 = 5000;

/// A master pauses writes for twice the manual failover's time limit
/// (CLUSTER_MF_PAUSE_MULT).
const MANUAL_PAUSE_MULT: u64 = 2;

/// A manual failover under way (clusterState's mf_*).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Manual {
    /// When it gives up (0: none under way).
    pub end_ms: u64,
    /// A replica: the election may start (FORCE, or the offsets met).
    pub can_start: bool,
    /// A replica: the offset its paused master gave.
    pub master_offset: Option<u64>,
    /// A master: the replica taking over (writes are paused for it).
    pub replica: Option<NodeName>,
}

/// CLUSTER FAILOVER's variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailoverKind {
    /// The master pauses writes, the replica catches up, then an election.
    Coordinated,
    /// An election now, without the master.
    Force,
    /// No election: a new epoch taken without consensus.
    Takeover,
}

impl Node {
    /// CLUSTER FAILOVER [FORCE|TAKEOVER] on a replica.
    pub fn manual_failover(
        &mut self,
        how: FailoverKind,
        master_linked: bool,
        now_ms: u64,
    ) -> Result<Vec<Output>, FailoverError> {
        let Some(master) = self.my_master else {
            return Err(FailoverError::NotAReplica);
        };
        let Some(peer) = self.peers.get(&master) else {
            return Err(FailoverError::MasterUnknown);
        };
        if how == FailoverKind::Coordinated && (peer.failed() || !master_linked) {
            return Err(FailoverError::MasterDown);
        }
        let (ip, cport) = (peer.ip.clone(), peer.cport);
        let mut out = self.reset_manual_failover();
        self.manual.end_ms = now_ms + MANUAL_TIMEOUT_MS;
        match how {
            FailoverKind::Takeover => {
                let _ = self.bump_epoch();
                out.extend(self.replace_my_master());
            }
            FailoverKind::Force => self.manual.can_start = true,
            FailoverKind::Coordinated => out.push(Output::Send {
                to: master,
                ip,
                cport,
                message: Message {
                    header: self.header(kind::MFSTART),
                    body: Body::Empty,
                },
            }),
        }
        Ok(out)
    }

    /// MFSTART from one of this master's replicas: writes pause, and this
    /// node's PINGs say so, with the offset the replica must reach.
    pub(super) fn manual_failover_requested(
        &mut self,
        replica: &NodeName,
        now_ms: u64,
    ) -> Vec<Output> {
        let mine = self
            .peers
            .get(replica)
            .is_some_and(|p| p.master == Some(self.me));
        if !mine || self.my_master.is_some() {
            return Vec::new();
        }
        let mut out = self.reset_manual_failover();
        self.manual.end_ms = now_ms + MANUAL_TIMEOUT_MS;
        self.manual.replica = Some(*replica);
        out.push(Output::PauseWritesForFailover {
            replica: *replica,
            until_ms: now_ms + MANUAL_TIMEOUT_MS * MANUAL_PAUSE_MULT,
        });
        out
    }

    /// A replica in a coordinated failover notes its master's offset from
    /// the first message the paused master sends.
    pub(super) fn note_paused_master(&mut self, header: &message::Header) {
        if self.manual.end_ms != 0
            && self.my_master == Some(header.sender)
            && header.mflags[0] & message::MFLAG0_PAUSED != 0
            && self.manual.master_offset.is_none()
        {
            self.manual.master_offset = Some(header.offset);
        }
    }
}
