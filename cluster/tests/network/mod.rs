//! A seeded simulated network for tally-cluster nodes: messages go through
//! the wire format, arrive 1-80 ms later, are dropped at a chosen rate and
//! now and then duplicated; a node can be stopped (nothing to or from it,
//! as under SIGSTOP), or the network split in two. A failing seed replays
//! exactly.

// Each simulation binary includes this module and uses part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;

use tally_cluster::message::Message;
use tally_cluster::node::{through_the_wire, Node, Output};
use tally_cluster::NodeName;

/// The simulation's random numbers (xorshift).
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Node `i`'s name: its index in hex, zero-padded.
pub fn name_of(i: usize) -> NodeName {
    let mut name = [b'0'; 40];
    name.copy_from_slice(format!("{i:040x}").as_bytes());
    name
}

/// The index behind a simulated name (None for a half-known node's
/// random name).
pub fn index_of(name: &NodeName) -> Option<usize> {
    if name[..36].iter().any(|&b| b != b'0') {
        return None;
    }
    usize::from_str_radix(std::str::from_utf8(&name[36..]).ok()?, 16).ok()
}

/// `n` nodes that know only themselves, node `i` named [`name_of`]`(i)`
/// on [`port_of`]`(i)`, each with its own seed drawn from `seed`.
pub fn new_nodes(n: usize, node_timeout_ms: u64, seed: u64) -> Vec<Node> {
    (0..n)
        .map(|i| {
            let port = port_of(i);
            Node::new(
                name_of(i),
                port,
                port + 10000,
                node_timeout_ms,
                seed ^ (i as u64 + 1),
            )
        })
        .collect()
}

/// Node `i`'s client port; its bus port is 10000 above.
pub fn port_of(i: usize) -> u16 {
    BASE_PORT + i as u16
}

const BASE_PORT: u16 = 7000;
/// The longest a message is in flight.
pub const MAX_DELAY_MS: u64 = 80;

enum Arrival {
    /// On a link `from` opened; replies go back as arriving on `from`'s
    /// link to the peer it calls `via`.
    Inbound {
        from: usize,
        via: NodeName,
        message: Message,
    },
    /// On the receiver's own link to the peer it calls `via`.
    Outbound { via: NodeName, message: Message },
}

struct Delivery {
    from: usize,
    to: usize,
    what: Arrival,
}

/// What the nodes asked of their drivers besides sending.
#[derive(Default)]
pub struct Requests {
    /// (node, replica) for each PauseWritesForFailover.
    pub pauses: Vec<(usize, NodeName)>,
    /// Nodes that asked to resume writes.
    pub resumes: Vec<usize>,
}

/// The network and the nodes on it.
pub struct Network {
    /// The nodes, node `i` named [`name_of`]`(i)`.
    pub nodes: Vec<Node>,
    queue: BTreeMap<u64, Vec<Delivery>>,
    /// The simulated time, ms.
    pub now: u64,
    rng: Rng,
    /// Messages dropped per thousand.
    pub drop_per_mille: u64,
    /// Nodes that neither send nor receive.
    pub stopped: Vec<bool>,
    /// A partition: each node's side (messages between sides are lost).
    pub sides: Option<Vec<usize>>,
    /// Each node's clock, ahead of the simulation's by this many ms (the
    /// nodes' clocks disagree; each only ever compares its own times).
    pub skew: Vec<u64>,
    /// What the nodes asked for.
    pub requests: Requests,
}

impl Network {
    /// A network of `nodes`, its randomness from `seed`.
    pub fn new(nodes: Vec<Node>, seed: u64, drop_per_mille: u64) -> Network {
        let stopped = vec![false; nodes.len()];
        let nodes_len = nodes.len();
        Network {
            nodes,
            queue: BTreeMap::new(),
            now: 0,
            rng: Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
            drop_per_mille,
            stopped,
            sides: None,
            skew: vec![0; nodes_len],
            requests: Requests::default(),
        }
    }

    /// Whether messages pass between nodes `a` and `b` now.
    pub fn connected(&self, a: usize, b: usize) -> bool {
        !self.stopped[a]
            && !self.stopped[b]
            && self.sides.as_ref().is_none_or(|sides| sides[a] == sides[b])
    }

    /// Node `i`'s clock now.
    pub fn clock(&self, i: usize) -> u64 {
        self.now + self.skew[i]
    }

    /// A random number below `n` from the network's generator.
    pub fn below(&mut self, n: u64) -> u64 {
        self.rng.below(n)
    }

    /// Carries out what node `from` returned; `reply_to` is where a reply
    /// goes (the node whose link the handled message came on, and the name
    /// it knows the replier by).
    pub fn route(&mut self, from: usize, out: Vec<Output>, reply_to: Option<(usize, NodeName)>) {
        for output in out {
            let (delivery, copies) = match output {
                Output::Send {
                    to, cport, message, ..
                } => {
                    let target = (cport - BASE_PORT - 10000) as usize;
                    let copies = 1 + (self.rng.below(20) == 0) as usize;
                    let what = Arrival::Inbound {
                        from,
                        via: to,
                        message: through_the_wire(&message),
                    };
                    (
                        Delivery {
                            from,
                            to: target,
                            what,
                        },
                        copies,
                    )
                }
                Output::Reply(message) => {
                    let Some((back, via)) = reply_to else {
                        continue;
                    };
                    let what = Arrival::Outbound {
                        via,
                        message: through_the_wire(&message),
                    };
                    (
                        Delivery {
                            from,
                            to: back,
                            what,
                        },
                        1,
                    )
                }
                Output::PauseWritesForFailover { replica, .. } => {
                    self.requests.pauses.push((from, replica));
                    continue;
                }
                Output::ResumeWrites => {
                    self.requests.resumes.push(from);
                    continue;
                }
                Output::Dropped(_)
                | Output::SaveConfig
                | Output::SlotsLost(_)
                | Output::RoleChanged
                | Output::Publish { .. } => continue,
            };
            for _ in 0..copies {
                if self.rng.below(1000) < self.drop_per_mille {
                    continue;
                }
                let at = self.now + 1 + self.rng.below(MAX_DELAY_MS);
                let what = match &delivery.what {
                    Arrival::Inbound { from, via, message } => Arrival::Inbound {
                        from: *from,
                        via: *via,
                        message: message.clone(),
                    },
                    Arrival::Outbound { via, message } => Arrival::Outbound {
                        via: *via,
                        message: message.clone(),
                    },
                };
                self.queue.entry(at).or_default().push(Delivery {
                    from: delivery.from,
                    to: delivery.to,
                    what,
                });
            }
        }
    }

    /// Advances the time by `step_ms`, delivering what is due; every
    /// 100 ms each running node ticks.
    pub fn step(&mut self, step_ms: u64) {
        self.now += step_ms;
        let later = self.queue.split_off(&(self.now + 1));
        let due = std::mem::replace(&mut self.queue, later);
        for delivery in due.into_values().flatten() {
            if !self.connected(delivery.to, delivery.from) {
                continue;
            }
            let now = self.now + self.skew[delivery.to];
            match delivery.what {
                Arrival::Inbound { from, via, message } => {
                    let out = self.nodes[delivery.to].on_inbound(
                        &message,
                        b"127.0.0.1",
                        b"127.0.0.1",
                        now,
                    );
                    self.route(delivery.to, out, Some((from, via)));
                }
                Arrival::Outbound { via, message } => {
                    let out = self.nodes[delivery.to].on_outbound(&via, &message, now);
                    self.route(delivery.to, out, None);
                }
            }
        }
        if self.now % 100 == 0 {
            for i in 0..self.nodes.len() {
                if self.stopped[i] {
                    continue;
                }
                let out = self.nodes[i].tick(self.now + self.skew[i]);
                self.route(i, out, None);
            }
        }
    }
}

/// Runs `run` for seeds 1..=N (N from the environment variable `count_var`,
/// else `default`), or for the one seed `seed_var` names (a replay), and
/// fails with the first failures' messages.
pub fn run_seeds(
    count_var: &str,
    seed_var: &str,
    default: u64,
    run: impl Fn(u64) -> Result<(), String>,
) {
    let count: u64 = std::env::var(count_var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    let seeds: Vec<u64> = match std::env::var(seed_var).ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => (1..=count).collect(),
    };
    let total = seeds.len();
    let failures: Vec<String> = seeds
        .into_iter()
        .filter_map(|seed| run(seed).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {total} seeds failed; first: {:?}",
        failures.len(),
        failures.iter().take(5).collect::<Vec<_>>()
    );
}
