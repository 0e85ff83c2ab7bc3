//! The node's state as nodes.conf lines.

use std::collections::BTreeMap;

use super::Node;
use crate::message::node_flags;
use crate::nodes_conf::{Moving, NodeLine, NodesConf};
use crate::{NodeName, SLOTS};

impl Node {
    /// Open slots in slot order, as Redis lists them on its own line: a
    /// slot both migrating and importing shows as migrating.
    pub(super) fn moving(&self) -> Vec<(u16, Moving)> {
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
            flags: vec![
                "myself".into(),
                if self.my_master.is_some() {
                    "slave"
                } else {
                    "master"
                }
                .into(),
            ],
            master: self.my_master.map(|m| text(&m)),
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
            if peer.flags & node_flags::SLAVE != 0 {
                flags.push("slave".to_string());
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
            if peer.flags & node_flags::NOADDR != 0 {
                flags.push("noaddr".to_string());
            }
            if peer.flags & node_flags::NOFAILOVER != 0 {
                flags.push("nofailover".to_string());
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
                master: peer.master.filter(|_| peer.is_replica()).map(|m| text(&m)),
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
