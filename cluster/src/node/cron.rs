//! The periodic work (clusterCron) and failure detection: PFAIL after a
//! PING unanswered for the node timeout, FAIL on a majority of masters'
//! reports.

use super::{Node, Output, Peer, FAIL_REPORT_VALIDITY_MULT, MIN_HANDSHAKE_TIMEOUT_MS};
use crate::message::{kind, node_flags, Body, Message};
use crate::NodeName;

impl Node {
    /// A master's gossip about `node`: a failure report while it says PFAIL
    /// or FAIL, none otherwise; then the node may be marked FAIL.
    pub(super) fn note_report(
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
    pub(super) fn quorum(&self) -> usize {
        self.serving_masters() / 2 + 1
    }

    /// A node this node sees PFAIL becomes FAIL when, with this node's own
    /// view, a majority of the masters reported it failing within twice the
    /// node timeout (markNodeAsFailingIfNeeded); the FAIL goes to every node.
    pub(super) fn mark_failing_if_needed(&mut self, node: &NodeName, now_ms: u64) -> Vec<Output> {
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
        // A master's own view counts as a report; a replica's does not.
        let own = usize::from(self.my_master.is_none());
        let Some(peer) = self.peers.get_mut(node) else {
            return Vec::new();
        };
        if peer.fail_reports.len() + own < quorum {
            return Vec::new();
        }
        peer.flags = (peer.flags & !node_flags::PFAIL) | node_flags::FAIL;
        peer.fail_time_ms = now_ms;
        let mut out = vec![Output::SaveConfig];
        let fail = Message {
            header: self.header(kind::FAIL),
            body: Body::Fail { node: *node },
        };
        out.extend(self.send_where(&fail, |p| p.name != *node));
        out.extend(self.noticed_failure(node, now_ms));
        out
    }

    /// Valid failure reports about `name` (COUNT-FAILURE-REPORTS).
    pub fn failure_reports(&self, name: &NodeName) -> Option<usize> {
        if *name == self.me {
            return Some(0);
        }
        self.peers.get(name).map(|p| p.fail_reports.len())
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
        // Silent for the node timeout: PFAIL, and maybe FAIL already.
        let timed_out: Vec<NodeName> = self
            .peers
            .values()
            .filter(|p| !p.in_handshake() && !p.failing() && self.silent_too_long(p, now_ms))
            .map(|p| p.name)
            .collect();
        for name in &timed_out {
            if let Some(peer) = self.peers.get_mut(name) {
                peer.flags |= node_flags::PFAIL;
            }
            out.push(Output::SaveConfig);
        }
        if !timed_out.is_empty() {
            out.extend(self.spread_suspicion(&timed_out, now_ms));
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
        out.extend(self.failover_tick(now_ms));
        out
    }

    /// Whether `peer` has been unreachable long enough to be suspected: a
    /// PING to it unanswered for the node timeout (Redis's rule). The
    /// clock starts when the PING went, or when the link to the node was
    /// lost ([`Node::link_lost`]): never before the node stopped
    /// answering, so a node is never suspected sooner than the timeout
    /// after it went.
    fn silent_too_long(&self, peer: &Peer, now_ms: u64) -> bool {
        peer.ping_sent_ms != 0 && now_ms.saturating_sub(peer.ping_sent_ms) > self.node_timeout_ms
    }

    /// This node's link to `name` was closed from the other side, or could
    /// not be made (a killed process closes its sockets at once). As Redis
    /// queues a PING on the new link at once and counts a connect that
    /// failed as a PING sent (clusterNodeCronHandleReconnect), the node is
    /// asked now, and the node timeout runs from now if no PING was
    /// already waiting for an answer. A PING already waiting keeps its
    /// time, and nothing is sent: a refused reconnect does not loop.
    pub fn link_lost(&mut self, name: &NodeName, now_ms: u64) -> Vec<Output> {
        match self.peers.get(name) {
            Some(peer) if !peer.in_handshake() && peer.ping_sent_ms == 0 => {}
            _ => return Vec::new(),
        }
        self.ping_now(name, now_ms)
    }

    /// A new suspicion goes to every other master at once, in the gossip of
    /// a PING (which carries every failing node), instead of waiting for the
    /// next scheduled PINGs: the masters that also suspect the node gather
    /// a majority's reports, and mark it FAIL, as soon as the last of them
    /// suspects it.
    fn spread_suspicion(&mut self, suspects: &[NodeName], now_ms: u64) -> Vec<Output> {
        let message = self.ping(kind::PING);
        let out = self.send_where(&message, |p| {
            !p.is_replica() && !p.failing() && !suspects.contains(&p.name)
        });
        for sent in &out {
            if let Output::Send { to, .. } = sent {
                if let Some(peer) = self.peers.get_mut(to) {
                    if peer.ping_sent_ms == 0 {
                        peer.ping_sent_ms = now_ms;
                    }
                    peer.last_ping_ms = now_ms;
                }
            }
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
    pub(super) fn ping_a_random_node(&mut self, now_ms: u64) -> Vec<Output> {
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
}
