//! Slot ownership moving between nodes, step by step on a perfect network:
//! closing an import (SETSLOT NODE on the importer) wins everywhere by its
//! new config epoch, the old owner is told to drop the slot's keys, an
//! importing slot is left alone, a stale claim is corrected with UPDATE,
//! a forgotten node is not learnt again from gossip, and a PUBLISH reaches
//! every other node once, and gossip about a known node counts its PONGs
//! and moves it when it failed here and answers elsewhere.

use tally_cluster::message::{node_flags, Body, Gossip, Message};
use tally_cluster::node::{Node, Output};
use tally_cluster::{NodeName, SLOTS};

const BASE_PORT: u16 = 7000;

fn name_of(i: usize) -> NodeName {
    let mut name = [b'0'; 40];
    name.copy_from_slice(format!("{i:040x}").as_bytes());
    name
}

/// (channel, message, sharded) of a relayed PUBLISH.
type Published = (Vec<u8>, Vec<u8>, bool);

/// Nodes joined by a network that delivers everything at once.
struct Net {
    nodes: Vec<Node>,
    now: u64,
    /// Slots each node was told it lost (Output::SlotsLost).
    lost: Vec<Vec<u16>>,
    /// (channel, message, sharded) each node was given to deliver.
    published: Vec<Vec<Published>>,
}

impl Net {
    /// `n` nodes, config epochs 1..=n, node 0 owning every slot, all met.
    fn new(n: usize) -> Net {
        let mut net = Net {
            nodes: (0..n)
                .map(|i| {
                    Node::new(
                        name_of(i),
                        BASE_PORT + i as u16,
                        BASE_PORT + 10000 + i as u16,
                        2000,
                        i as u64 + 1,
                    )
                })
                .collect(),
            now: 1000,
            lost: vec![Vec::new(); n],
            published: vec![Vec::new(); n],
        };
        for (i, node) in net.nodes.iter_mut().enumerate() {
            node.set_config_epoch(i as u64 + 1);
        }
        let _ = net.nodes[0].add_slots((0..SLOTS).map(|s| s as u16));
        for j in 1..n {
            let out = net.nodes[0].meet(
                b"127.0.0.1",
                BASE_PORT + j as u16,
                BASE_PORT + 10000 + j as u16,
                net.now,
            );
            net.deliver(0, out);
        }
        net.settle();
        net
    }

    /// Carries `out` (from node `from`) out, and everything it causes.
    fn deliver(&mut self, from: usize, out: Vec<Output>) {
        let mut work = vec![(from, out, None::<(usize, NodeName)>)];
        while let Some((from, out, reply_to)) = work.pop() {
            for output in out {
                match output {
                    Output::Send {
                        to, cport, message, ..
                    } => {
                        let target = (cport - BASE_PORT - 10000) as usize;
                        let answer = self.nodes[target].on_inbound(
                            &tally_cluster::node::through_the_wire(&message),
                            b"127.0.0.1",
                            b"127.0.0.1",
                            self.now,
                        );
                        work.push((target, answer, Some((from, to))));
                    }
                    Output::Reply(message) => {
                        if let Some((back, via)) = reply_to {
                            let answer = self.nodes[back].on_outbound(
                                &via,
                                &tally_cluster::node::through_the_wire(&message),
                                self.now,
                            );
                            work.push((back, answer, None));
                        }
                    }
                    Output::SlotsLost(slots) => self.lost[from].extend(slots),
                    Output::Publish {
                        channel,
                        message,
                        sharded,
                    } => self.published[from].push((channel, message, sharded)),
                    Output::Dropped(_)
                    | Output::SaveConfig
                    | Output::RoleChanged
                    | Output::PauseWritesForFailover { .. }
                    | Output::ResumeWrites => {}
                }
            }
        }
    }

    /// Ticks every node for a few simulated seconds.
    fn settle(&mut self) {
        for _ in 0..60 {
            self.now += 100;
            for i in 0..self.nodes.len() {
                let out = self.nodes[i].tick(self.now);
                self.deliver(i, out);
            }
        }
    }
}

#[test]
fn closing_an_import_wins_everywhere_and_the_old_owner_drops_the_slot() {
    let mut net = Net::new(3);
    let (a, b) = (name_of(0), name_of(1));
    for node in &net.nodes {
        assert_eq!(node.owner(100), Some(&a));
    }
    let _ = net.nodes[1].set_importing(100, Some(a));
    let _ = net.nodes[0].set_migrating(100, Some(b));
    let before = net.nodes.iter().map(Node::current_epoch).max().unwrap_or(0);
    // SETSLOT 100 NODE <b> on b, the importer, and nowhere else.
    let out = net.nodes[1].assign_slot(100, b, 3);
    assert!(
        net.nodes[1].config_epoch() > before,
        "the importer's epoch is bumped"
    );
    assert_eq!(net.nodes[1].importing_from(100), None);
    let pongs = out
        .iter()
        .filter(|o| matches!(o, Output::Send { .. }))
        .count();
    assert_eq!(pongs, 2, "every other node is told at once");
    net.deliver(1, out);
    for node in &net.nodes {
        assert_eq!(node.owner(100), Some(&b));
    }
    assert_eq!(
        net.lost[0],
        vec![100],
        "the old owner drops the slot's keys"
    );
    assert!(net.lost[1].is_empty() && net.lost[2].is_empty());
    // The migrating mark stays until SETSLOT closes it there too.
    assert_eq!(net.nodes[0].migrating_to(100), Some(&b));
    let _ = net.nodes[0].assign_slot(100, b, 0);
    assert_eq!(net.nodes[0].migrating_to(100), None);
}

#[test]
fn a_slot_being_imported_is_left_to_the_operator() {
    let mut net = Net::new(3);
    let (a, c) = (name_of(0), name_of(2));
    let _ = net.nodes[1].set_importing(200, Some(a));
    // c takes slot 200 with a new epoch (as if resharded to it).
    let _ = net.nodes[2].set_importing(200, Some(a));
    let out = net.nodes[2].assign_slot(200, c, 0);
    net.deliver(2, out);
    assert_eq!(net.nodes[0].owner(200), Some(&c));
    assert_eq!(
        net.nodes[1].owner(200),
        Some(&a),
        "an importing node keeps its view until SETSLOT"
    );
    net.settle();
    assert_eq!(net.nodes[1].owner(200), Some(&a));
    let _ = net.nodes[1].set_stable(200);
    net.settle();
    assert_eq!(net.nodes[1].owner(200), Some(&c));
}

#[test]
fn a_stale_owner_is_corrected_with_an_update() {
    let mut net = Net::new(3);
    let (a, b) = (name_of(0), name_of(1));
    // Node b takes slot 300 while a hears nothing (a partition): b's
    // import closes and only c learns it.
    let _ = net.nodes[1].set_importing(300, Some(a));
    let out = net.nodes[1].assign_slot(300, b, 0);
    let to_c: Vec<Output> = out
        .into_iter()
        .filter(|o| matches!(o, Output::Send { cport, .. } if *cport == BASE_PORT + 10002))
        .collect();
    net.deliver(1, to_c);
    assert_eq!(net.nodes[0].owner(300), Some(&a), "a has not heard");
    assert_eq!(net.nodes[2].owner(300), Some(&b));
    // a pings c, claiming slot 300 with its old epoch: c answers with an
    // UPDATE about b, and a gives the slot up.
    let ping = net.nodes[0].ping_now(&name_of(2), net.now);
    net.deliver(0, ping);
    assert_eq!(net.nodes[0].owner(300), Some(&b));
    assert_eq!(net.lost[0], vec![300]);
}

#[test]
fn a_forgotten_node_is_not_learnt_again_from_gossip_for_a_minute() {
    let mut net = Net::new(3);
    let c = name_of(2);
    let out = net.nodes[0].forget(&c, net.now);
    net.deliver(0, out);
    assert!(!net.nodes[0].knows(&c));
    // Node b still gossips about c; a minute is 600 ticks of 100 ms.
    net.settle();
    assert!(!net.nodes[0].knows(&c), "banned while the minute runs");
    for _ in 0..11 {
        net.settle();
    }
    assert!(
        net.nodes[0].knows(&c),
        "learnt again from gossip once the ban ends"
    );
}

#[test]
fn a_publish_reaches_every_other_node_once_and_a_shard_publish_none() {
    let mut net = Net::new(4);
    let out = net.nodes[2].publish(b"rules", b"v2", false);
    assert_eq!(out.len(), 3, "one PUBLISH per other node");
    net.deliver(2, out);
    for (i, got) in net.published.iter().enumerate() {
        let expected = if i == 2 {
            Vec::new()
        } else {
            vec![(b"rules".to_vec(), b"v2".to_vec(), false)]
        };
        assert_eq!(got, &expected, "node {i}");
    }
    // SPUBLISH goes to this shard's replicas, and there are none.
    assert!(net.nodes[2].publish(b"rules", b"v3", true).is_empty());
    // A PUBLISH from a node nobody knows is ignored, as Redis does.
    let mut stranger = Node::new(name_of(9), 7009, 17009, 2000, 9);
    let mut message = None;
    let _ = stranger.meet(b"127.0.0.1", BASE_PORT, BASE_PORT + 10000, net.now);
    for output in stranger.publish(b"rules", b"v4", false) {
        if let Output::Send { message: m, .. } = output {
            message = Some(m);
        }
    }
    // The stranger knows node 0 only half (in handshake): nothing is sent.
    assert!(message.is_none());
    let forged = tally_cluster::message::Message {
        header: tally_cluster::message::Header::new(
            tally_cluster::message::kind::PUBLISH,
            name_of(9),
        ),
        body: tally_cluster::message::Body::Publish {
            channel: b"rules".to_vec(),
            message: b"v4".to_vec(),
        },
    };
    let out = net.nodes[0].on_inbound(&forged, b"127.0.0.1", b"127.0.0.1", net.now);
    assert!(!out.iter().any(|o| matches!(o, Output::Publish { .. })));
}

#[test]
fn a_hostname_nodes_conf_cannot_hold_is_not_taken() {
    let mut net = Net::new(2);
    let mut hostile = None;
    for output in net.nodes[1].ping_now(&name_of(0), net.now) {
        if let Output::Send { mut message, .. } = output {
            if let tally_cluster::message::Body::Ping { extensions, .. } = &mut message.body {
                extensions.push(tally_cluster::message::Extension::Hostname(
                    b"evil\nname other".to_vec(),
                ));
            }
            hostile = Some(message);
        }
    }
    let hostile = hostile.expect("a PING to node 0");
    let _ = net.nodes[0].on_inbound(&hostile, b"127.0.0.1", b"127.0.0.1", net.now);
    let peer = net.nodes[0]
        .peers()
        .find(|p| p.name == name_of(1))
        .expect("node 1 known");
    assert!(peer.hostname.is_empty());
    let conf = net.nodes[0].nodes_conf().render();
    assert!(
        tally_cluster::nodes_conf::NodesConf::parse(&conf).is_ok(),
        "{conf}"
    );
}

/// Node 1's next PING to node 0 with one gossip entry: node 2 as node 1
/// sees it, changed by `edit`. (With three nodes a PING gossips about one
/// of the other two, chosen at random as Redis does.)
fn ping_with_gossip_about_2(net: &mut Net, edit: impl Fn(&mut Gossip)) -> Message {
    let seen = net.nodes[1]
        .peers()
        .find(|p| p.name == name_of(2))
        .expect("node 1 knows node 2");
    let mut entry = Gossip {
        node: seen.name,
        ping_sent: (seen.ping_sent_ms / 1000) as u32,
        pong_received: (seen.pong_received_ms / 1000) as u32,
        ip: seen.ip.clone(),
        port: seen.port,
        cport: seen.cport,
        flags: seen.flags,
        pport: seen.pport,
    };
    edit(&mut entry);
    for output in net.nodes[1].ping_now(&name_of(0), net.now) {
        if let Output::Send { mut message, .. } = output {
            if let Body::Ping { gossip, .. } = &mut message.body {
                *gossip = vec![entry];
            }
            return message;
        }
    }
    panic!("no PING from node 1 to node 0");
}

fn pong_time_of_2(node: &Node) -> u64 {
    node.peers()
        .find(|p| p.name == name_of(2))
        .expect("node 2 known")
        .pong_received_ms
}

#[test]
fn a_pong_another_node_had_counts_as_this_nodes_own() {
    let mut net = Net::new(3);
    net.now = 20_000;
    let before = pong_time_of_2(&net.nodes[0]);
    assert!(before < 19_000, "{before}");
    // Gossip that calls node 2 failing carries no PONG time worth taking.
    let failing = ping_with_gossip_about_2(&mut net, |g| {
        g.pong_received = 20;
        g.flags |= node_flags::PFAIL;
    });
    let _ = net.nodes[0].on_inbound(&failing, b"127.0.0.1", b"127.0.0.1", net.now);
    assert_eq!(pong_time_of_2(&net.nodes[0]), before);
    // A time more than half a second ahead of this node's clock is not
    // believed.
    let ahead = ping_with_gossip_about_2(&mut net, |g| g.pong_received = 21);
    let _ = net.nodes[0].on_inbound(&ahead, b"127.0.0.1", b"127.0.0.1", net.now);
    assert_eq!(pong_time_of_2(&net.nodes[0]), before);
    let fresh = ping_with_gossip_about_2(&mut net, |g| g.pong_received = 20);
    let _ = net.nodes[0].on_inbound(&fresh, b"127.0.0.1", b"127.0.0.1", net.now);
    assert_eq!(pong_time_of_2(&net.nodes[0]), 20_000);
    // So node 2 is not pinged for silence (half the 2 s timeout) although
    // node 0 itself has not heard from it for 13 s; node 1 is.
    net.now += 900;
    let pinged: Vec<NodeName> = net.nodes[0]
        .tick(net.now)
        .into_iter()
        .filter_map(|o| match o {
            Output::Send { to, .. } => Some(to),
            _ => None,
        })
        .collect();
    assert_eq!(pinged, vec![name_of(1)]);
}

#[test]
fn a_failing_node_seen_elsewhere_at_a_new_address_moves_there() {
    let mut net = Net::new(3);
    // Node 0's PING to node 2 is lost; after the 2 s timeout it is PFAIL.
    let _ = net.nodes[0].ping_now(&name_of(2), net.now);
    net.now += 2100;
    let _ = net.nodes[0].tick(net.now);
    let suspect = |node: &Node| {
        node.peers()
            .find(|p| p.name == name_of(2))
            .is_some_and(|p| p.failing())
    };
    assert!(suspect(&net.nodes[0]));
    // Another address from a node that also sees node 2 failing: ignored.
    let also_failing = ping_with_gossip_about_2(&mut net, |g| {
        g.ip = b"127.0.0.2".to_vec();
        g.flags |= node_flags::PFAIL;
    });
    let out = net.nodes[0].on_inbound(&also_failing, b"127.0.0.1", b"127.0.0.1", net.now);
    assert!(!out.iter().any(|o| matches!(o, Output::Dropped(_))));
    let (ip, port, _) = net.nodes[0].address_of(&name_of(2)).unwrap();
    assert_eq!((&ip[..], port), (&b"127.0.0.1"[..], BASE_PORT + 2));
    // From a node that reaches it there: node 0 moves its links there.
    let reachable = ping_with_gossip_about_2(&mut net, |g| {
        g.ip = b"127.0.0.2".to_vec();
        g.port = 7100;
        g.cport = 17100;
    });
    let out = net.nodes[0].on_inbound(&reachable, b"127.0.0.1", b"127.0.0.1", net.now);
    assert!(out
        .iter()
        .any(|o| matches!(o, Output::Dropped(n) if *n == name_of(2))));
    let (ip, port, _) = net.nodes[0].address_of(&name_of(2)).unwrap();
    assert_eq!((&ip[..], port), (&b"127.0.0.2"[..], 7100));
    let line = net.nodes[0].nodes_conf().render();
    assert!(line.contains("127.0.0.2:7100@17100"), "{line}");
}

/// Coverage as a count over every slot, to check the per-owner counts
/// that `slots_ok`, `assigned_slots` and `serving_masters` add up.
fn recount(node: &Node) -> (usize, usize, usize) {
    let me = *node.name();
    let reachable = |name: &NodeName| {
        *name == me
            || node
                .peers()
                .any(|p| p.name == *name && p.flags & node_flags::FAIL == 0)
    };
    let owners: Vec<Option<&NodeName>> = (0..SLOTS).map(|s| node.owner(s as u16)).collect();
    let assigned = owners.iter().filter(|o| o.is_some()).count();
    let ok = owners.iter().flatten().filter(|n| reachable(n)).count();
    let mut masters: Vec<&NodeName> = owners.iter().flatten().copied().collect();
    masters.sort();
    masters.dedup();
    (assigned, ok, masters.len())
}

#[test]
fn coverage_counts_follow_every_change_of_owner() {
    let mut net = Net::new(3);
    let (a, b, c) = (name_of(0), name_of(1), name_of(2));
    let counted = |net: &Net| {
        for node in &net.nodes {
            assert_eq!(
                (
                    node.assigned_slots(),
                    node.slots_ok(),
                    node.serving_masters()
                ),
                recount(node)
            );
        }
    };
    counted(&net);
    // Slots move to b and c (closing imports), a frees some, c is
    // forgotten by a (its slots become unassigned there).
    for (slot, to) in [(10u16, 1usize), (11, 1), (5000, 2), (16383, 2)] {
        let owner = [a, b, c][to];
        let _ = net.nodes[to].set_importing(slot, Some(a));
        let out = net.nodes[to].assign_slot(slot, owner, 0);
        net.deliver(to, out);
    }
    net.settle();
    counted(&net);
    assert_eq!(net.nodes[0].serving_masters(), 3);
    let out = net.nodes[0].del_slots(0..100);
    net.deliver(0, out);
    net.settle();
    counted(&net);
    assert_eq!(net.nodes[0].assigned_slots(), SLOTS - 98, "b's two stay");
    let out = net.nodes[0].forget(&c, net.now);
    net.deliver(0, out);
    counted(&net);
    assert_eq!(net.nodes[0].assigned_slots(), SLOTS - 100);
    assert_eq!(net.nodes[0].serving_masters(), 2);
}
