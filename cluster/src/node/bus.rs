//! The bus messages a node sends and what it learns from those it
//! receives: MEET and the handshake, PING/PONG with gossip, FAIL,
//! PUBLISH, UPDATE.

use super::{Node, Output, Peer, FAIL_REPORT_VALIDITY_MULT, FAIL_UNDO_TIME_MULT};
use crate::message::{self, kind, node_flags, Body, Gossip, Header, Message};
use crate::NodeName;

impl Node {
    /// CLUSTER MEET: a half-known node at that address, and a MEET to it.
    pub fn meet(&mut self, ip: &[u8], port: u16, cport: u16, now_ms: u64) -> Vec<Output> {
        self.start_handshake(ip, (port, 0), cport, now_ms, true)
    }

    /// A half-known node at `ip`, its client and plaintext ports `ports`.
    pub(super) fn start_handshake(
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
        let mut peer = Peer::new(
            name,
            ip,
            (port, pport),
            cport,
            node_flags::HANDSHAKE | node_flags::MEET,
        );
        peer.created_ms = now_ms;
        peer.ping_sent_ms = now_ms;
        peer.last_ping_ms = now_ms;
        self.peers.insert(name, peer);
        let message = self.ping(if meet { kind::MEET } else { kind::PING });
        vec![Output::Send {
            to: name,
            ip: ip.to_vec(),
            cport,
            message,
        }]
    }

    /// The header of a message from this node. A replica sends its
    /// master's slots and config epoch, flagged as a replica so that no
    /// one takes them for its claims (clusterBuildMessageHdr); every
    /// message carries the replication offset (a replica's election rank,
    /// a manual failover's meeting point).
    pub(super) fn header(&self, message_kind: u16) -> Header {
        let mut header = Header::new(message_kind, self.me);
        header.port = self.port;
        header.pport = self.pport;
        header.cport = self.cport;
        header.ip = self.announced_ip.clone().unwrap_or_default();
        header.current_epoch = self.current_epoch;
        header.offset = self.replication.offset;
        match self.my_master {
            Some(master) => {
                header.flags = node_flags::SLAVE | node_flags::MYSELF;
                header.slaveof = master;
                header.config_epoch = self.epoch_of(&master);
                *header.slots = self.slots_of(&master);
            }
            None => {
                header.flags = node_flags::MASTER | node_flags::MYSELF;
                header.config_epoch = self.config_epoch;
                header.slots.copy_from_slice(&self.my_slots[..]);
                if self.manual.end_ms != 0 {
                    header.mflags[0] |= message::MFLAG0_PAUSED;
                }
            }
        }
        if self.failover_settings.no_failover {
            header.flags |= node_flags::NOFAILOVER;
        }
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
    pub(super) fn ping(&mut self, message_kind: u16) -> Message {
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
                        let node = *node;
                        out.extend(self.noticed_failure(&node, now_ms));
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
            // After the epochs the header brought are learned.
            match header.kind {
                kind::FAILOVER_AUTH_REQUEST => out.extend(self.vote_if_deserved(message, now_ms)),
                kind::FAILOVER_AUTH_ACK => out.extend(self.count_vote(header)),
                kind::MFSTART => {
                    out.extend(self.manual_failover_requested(&header.sender, now_ms));
                }
                _ => {}
            }
        }
        out
    }

    /// A PUBLISH for every other node (clusterPropagatePublish: every node
    /// out of handshake, each over its link). SPUBLISH goes to the other
    /// nodes of this node's shard only: its master and that master's
    /// replicas (clusterPropagatePublishShard).
    pub fn publish(&self, channel: &[u8], message: &[u8], sharded: bool) -> Vec<Output> {
        let publish = Message {
            header: self.header(if sharded {
                kind::PUBLISHSHARD
            } else {
                kind::PUBLISH
            }),
            body: Body::Publish {
                channel: channel.to_vec(),
                message: message.to_vec(),
            },
        };
        if !sharded {
            return self.broadcast(&publish);
        }
        let master = self.my_master.unwrap_or(self.me);
        self.send_where(&publish, |p| {
            p.name == master || (p.is_replica() && p.master == Some(master))
        })
    }

    /// `message` to every node out of handshake (clusterBroadcastMessage).
    pub(super) fn broadcast(&self, message: &Message) -> Vec<Output> {
        self.send_where(message, |_| true)
    }

    /// `message` to every node out of handshake that `wanted` picks.
    pub(super) fn send_where(
        &self,
        message: &Message,
        wanted: impl Fn(&Peer) -> bool,
    ) -> Vec<Output> {
        self.peers
            .values()
            .filter(|p| !p.in_handshake() && wanted(p))
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
            out.extend(self.pong_received(&header.sender, now_ms));
        }
        out.extend(self.learn_from(message, now_ms));
        out
    }

    /// A PONG from a known node: its pending PING is answered, PFAIL is
    /// lifted, and FAIL too (clearNodeFailureIfNeeded) when it is a
    /// replica or a master left without slots (no failover can be under
    /// way for it), or a master whose failure is old enough that nobody
    /// is going to take its slots.
    fn pong_received(&mut self, sender: &NodeName, now_ms: u64) -> Vec<Output> {
        let undo_after = self.node_timeout_ms * FAIL_UNDO_TIME_MULT;
        let slotless = self.slot_count_of(sender) == 0;
        let Some(peer) = self.peers.get_mut(sender) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        peer.pong_received_ms = now_ms;
        peer.ping_sent_ms = 0;
        if peer.flags & node_flags::PFAIL != 0 {
            peer.flags &= !node_flags::PFAIL;
            out.push(Output::SaveConfig);
        }
        if peer.flags & node_flags::FAIL != 0
            && (peer.is_replica()
                || slotless
                || now_ms.saturating_sub(peer.fail_time_ms) > undo_after)
        {
            peer.flags &= !node_flags::FAIL;
            peer.fail_reports.clear();
            out.push(Output::SaveConfig);
        }
        out
    }

    /// What a fully known sender's header and gossip teach: its epochs,
    /// its slots (when its config epoch is newer than the owner's), and
    /// nodes this node has not met.
    pub(super) fn learn_from(&mut self, message: &Message, now_ms: u64) -> Vec<Output> {
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
            peer.repl_offset = header.offset;
        }
        self.note_paused_master(header);
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
        if claims {
            // A role switch is learned before the claims, which only a
            // master's count.
            changed |= self.learn_role(header);
        }
        if claims && header.flags & node_flags::MASTER != 0 && header.sender != self.me {
            changed |= self.update_slots_with(
                &header.sender,
                header.config_epoch,
                &header.slots,
                &mut out,
            );
            out.extend(self.update_if_stale(message));
            // Two masters with one config epoch: the one with the smaller
            // name takes a new epoch (clusterHandleConfigEpochCollision),
            // so every master's claims are ordered.
            if self.my_master.is_none()
                && header.config_epoch == self.config_epoch
                && header.sender > self.me
            {
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
                    // A node this node took for a replica is a master.
                    if peer.is_replica() {
                        peer.flags = (peer.flags & !node_flags::SLAVE) | node_flags::MASTER;
                        peer.master = None;
                    }
                    let node = *node;
                    self.update_slots_with(&node, *config_epoch, slots, &mut out);
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
    pub(super) fn learn_from_gossip(&mut self, g: &Gossip, now_ms: u64) -> Vec<Output> {
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
}

/// Encodes and decodes every message the node emits, so a simulation
/// exercises the real wire format too.
pub fn through_the_wire(message: &Message) -> Message {
    message::decode(&message::encode(message)).unwrap_or_else(|_| message.clone())
}
