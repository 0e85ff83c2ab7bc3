//! Where a keyed command runs in a cluster (Redis's getNodeByQuery): here,
//! refused (CROSSSLOT, CLUSTERDOWN, TRYAGAIN), or sent on with MOVED or
//! ASK; the slot gates that keep SETSLOT and MIGRATE from surprising a
//! command between its routing and its run; and the address a redirect
//! names, as the client on this port can reach it.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLockWriteGuard;
use tally_cluster::node::Node;
use tally_cluster::nodes_conf::NodesConf;
use tally_cluster::NodeName;

use super::{bit, Cluster};
use crate::slot_gate::Entered;

/// What routing decided for a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Served here.
    Here,
    /// Refused with this error (CROSSSLOT, CLUSTERDOWN, TRYAGAIN).
    Refused(String),
    /// Sent to another node (MOVED, ASK): the error names its address as
    /// the client sees it ([`Cluster::redirect_error`]).
    Redirect(Redirect),
    /// The slot is being migrated or imported: whether the command runs
    /// here depends on which of its keys exist ([`Cluster::route_open`]).
    Open(u16),
}

/// A MOVED or ASK: to which node, for which slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Redirect {
    /// ASK (the slot is moving there) rather than MOVED.
    pub ask: bool,
    /// The slot.
    pub slot: u16,
    /// The node to ask.
    pub to: NodeName,
}

/// What [`Cluster::route_open`] needs to know of a command's keys.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeysHere {
    /// Keys this node holds.
    pub existing: usize,
    /// Keys it does not.
    pub missing: usize,
    /// More than one distinct key.
    pub multiple: bool,
}

/// What a command does with its slot, for routing while the cluster is
/// down (Redis's getNodeByQuery).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Only reads: served with `cluster-allow-reads-when-down`.
    Read,
    /// Writes: never served while down.
    Write,
    /// A shard channel command (SSUBSCRIBE, SPUBLISH, SUNSUBSCRIBE):
    /// served with `cluster-allow-pubsubshard-when-down`.
    ShardChannel,
}

const CLUSTER_DOWN: &str = "CLUSTERDOWN The cluster is down";
const CLUSTER_DOWN_READ_ONLY: &str =
    "CLUSTERDOWN The cluster is down and only accepts read commands";

/// Redis's reply to several keys of a slot being moved.
const TRYAGAIN: &str = "TRYAGAIN Multiple keys request during rehashing of slot";

impl Cluster {
    /// Where a command with these keys may run (getNodeByQuery, in its
    /// order): the first key's slot must be served (here, or a MOVED to its
    /// owner), every other key in that slot, then the cluster up.
    pub fn route(&self, mut slots: impl Iterator<Item = u16>, access: Access) -> Route {
        let Some(first) = slots.next() else {
            return Route::Here;
        };
        let here = self.owns(first);
        let moved = if here {
            None
        } else {
            Some(self.owner_with_address(first))
        };
        if let Some(None) = moved {
            return Route::Refused("CLUSTERDOWN Hash slot not served".to_string());
        }
        if slots.any(|slot| slot != first) {
            return Route::Refused(
                "CROSSSLOT Keys in request don't hash to the same slot".to_string(),
            );
        }
        // Kept current by the bus's tick and every slot change.
        if !self.state_ok.load(Ordering::Relaxed) {
            let (allowed, refusal) = match access {
                Access::ShardChannel => (
                    self.allow_pubsubshard_when_down.load(Ordering::Relaxed),
                    CLUSTER_DOWN,
                ),
                Access::Read => (
                    self.allow_reads_when_down.load(Ordering::Relaxed),
                    CLUSTER_DOWN,
                ),
                Access::Write if self.allow_reads_when_down.load(Ordering::Relaxed) => {
                    (false, CLUSTER_DOWN_READ_ONLY)
                }
                Access::Write => (false, CLUSTER_DOWN),
            };
            if !allowed {
                return Route::Refused(refusal.to_string());
            }
        }
        if self.open_count.load(Ordering::Relaxed) != 0 && bit(&self.open, first) {
            return Route::Open(first);
        }
        match moved {
            Some(Some(to)) => Route::Redirect(Redirect {
                ask: false,
                slot: first,
                to,
            }),
            _ => Route::Here,
        }
    }

    /// Enters `slot` for a keyed command (see [`crate::slot_gate`]).
    /// [`Entered::Plain`]: the slot is served here, is not open and the
    /// cluster is up ([`Self::route`] would say `Here`), so a command
    /// whose keys are all in it needs no routing; read with the gate's
    /// bit test, in one load.
    #[inline(always)]
    pub fn enter(&self, slot: u16) -> Entered<'_> {
        let test = |words: &[AtomicU64], slot: u16| {
            let slot = slot as usize;
            words[slot / 64].load(Ordering::SeqCst) & (1 << (slot % 64)) != 0
        };
        self.gates.enter(
            slot,
            |slot| test(&self.plain, slot),
            |slot| test(&self.open, slot),
        )
    }

    /// The stripes of open `slots`, exclusively, in stripe order.
    pub fn close(&self, slots: impl IntoIterator<Item = u16>) -> Vec<RwLockWriteGuard<'_, ()>> {
        self.gates.close(slots)
    }

    /// A MIGRATE starts on `slots`: they are open until [`Self::end_moving`].
    pub fn begin_moving(&self, slots: &[u16]) {
        {
            let mut moving = self.moving_now.lock();
            for &slot in slots {
                *moving.entry(slot).or_default() += 1;
            }
        }
        self.sync_slots();
    }

    /// A MIGRATE on `slots` ended.
    pub fn end_moving(&self, slots: &[u16]) {
        {
            let mut moving = self.moving_now.lock();
            for slot in slots {
                if let Some(count) = moving.get_mut(slot) {
                    *count -= 1;
                    if *count == 0 {
                        moving.remove(slot);
                    }
                }
            }
        }
        self.sync_slots();
    }

    /// True while some slot is migrating or importing here.
    #[inline]
    pub fn any_open(&self) -> bool {
        self.open_count.load(Ordering::Relaxed) != 0
    }

    /// True when `slot` is migrating or importing here.
    #[inline]
    pub fn is_open(&self, slot: u16) -> bool {
        self.open_count.load(Ordering::Relaxed) != 0 && bit(&self.open, slot)
    }

    /// The rest of getNodeByQuery for a slot being moved, once the keys
    /// were looked up: MIGRATE runs here; a migrating slot sends missing
    /// keys on with ASK (TRYAGAIN when only some are missing); an
    /// importing slot serves a client that said ASKING (TRYAGAIN for
    /// several keys not all here yet); anything else goes to the owner.
    pub fn route_open(&self, slot: u16, keys: KeysHere, asking: bool, is_migrate: bool) -> Route {
        let node = self.node.lock();
        let owner = node.owner(slot).copied();
        let mine = owner.as_ref() == Some(node.name());
        let migrating_to = node.migrating_to(slot).filter(|_| mine).copied();
        let importing = migrating_to.is_none() && node.importing_from(slot).is_some();
        let reachable = |name: &NodeName| node.address_of(name).is_some();
        if is_migrate && (migrating_to.is_some() || importing) {
            return Route::Here;
        }
        if let Some(target) = migrating_to {
            if keys.missing > 0 {
                if keys.existing > 0 {
                    return Route::Refused(TRYAGAIN.to_string());
                }
                if reachable(&target) {
                    return Route::Redirect(Redirect {
                        ask: true,
                        slot,
                        to: target,
                    });
                }
            }
        }
        if importing && asking {
            if keys.multiple && keys.missing > 0 {
                return Route::Refused(TRYAGAIN.to_string());
            }
            return Route::Here;
        }
        match owner {
            Some(owner) if !mine && reachable(&owner) => Route::Redirect(Redirect {
                ask: false,
                slot,
                to: owner,
            }),
            Some(_) if !mine => Route::Refused("CLUSTERDOWN Hash slot not served".to_string()),
            _ => Route::Here,
        }
    }

    /// The node serving `slot`, if there is one and its address is known.
    fn owner_with_address(&self, slot: u16) -> Option<NodeName> {
        let node = self.node.lock();
        let owner = *node.owner(slot)?;
        node.address_of(&owner).map(|_| owner)
    }

    /// The error of a MOVED or ASK for a client (on the TLS port or not):
    /// `MOVED <slot> <endpoint>:<port>`, the port the client can use.
    pub fn redirect_error(&self, redirect: &Redirect, tls_client: bool) -> String {
        let node = self.node.lock();
        match self.redirect_address(&node, &redirect.to, tls_client) {
            Some(address) => {
                let kind = if redirect.ask { "ASK" } else { "MOVED" };
                format!("{kind} {} {address}", redirect.slot)
            }
            // Forgotten since routing: as if it had not been known then.
            None => "CLUSTERDOWN Hash slot not served".to_string(),
        }
    }

    /// The cluster as a client sees it: in a TLS cluster a client on the
    /// plaintext port is given each node's plaintext port (Redis's
    /// use_pport), one on the TLS port the TLS ports.
    pub fn nodes_for_client(&self, tls_client: bool) -> NodesConf {
        let mut conf = self.nodes_conf();
        if self.tls() && !tls_client {
            for line in &mut conf.nodes {
                if line.pport != 0 {
                    line.port = line.pport;
                }
            }
        }
        conf
    }

    /// `<endpoint>:<port>` of a fully known node, for MOVED and ASK.
    fn redirect_address(&self, node: &Node, name: &NodeName, tls_client: bool) -> Option<String> {
        let (ip, port, pport) = node.address_of(name)?;
        let port = if self.tls() && !tls_client && pport != 0 {
            pport
        } else {
            port
        };
        let hostname = node.hostname_of(name).unwrap_or_default();
        let (ip, hostname) = (
            String::from_utf8_lossy(&ip),
            String::from_utf8_lossy(hostname),
        );
        let endpoint = self.preferred_endpoint().endpoint(&ip, &hostname);
        Some(format!("{endpoint}:{port}"))
    }
}
