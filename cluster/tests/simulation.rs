//! A deterministic simulation of tally-cluster nodes: N nodes (3 to 12) on
//! a simulated network that delays, drops and duplicates messages, driven
//! by a seed. A cluster is formed as `redis-cli --cluster create` forms
//! one (distinct config epochs, slots split, every node MEET from the
//! first) or, for a third of the seeds, as CLUSTER ADDSLOTS and MEET alone
//! leave it (every config epoch 0, which the nodes must make distinct).
//! Once the network has had time, every node must know every other by its
//! real name, none half-known, all must agree on the owner of every slot
//! and on the current epoch, and no two masters may share a config epoch.
//! Then either the last node stops (as under SIGSTOP), and every other
//! node must mark it FAIL; or the network splits into a majority and a
//! minority, and the majority marks every minority node FAIL. Then the
//! network heals: nothing may be left failing and the cluster is as
//! before. Throughout, no node's epochs may go backwards, and no node may
//! be declared FAIL unless a majority of the masters suspected it within
//! the reports' validity (the simulation watches every node's flags, so
//! this is checked against what really happened, not against the
//! reports a node kept). A failing seed is printed and replays exactly.
//!
//! TALLY_SIM_SEEDS sets how many seeds run (default 1000, about 80 s); TALLY_SIM_SEED=<n>
//! replays seed n alone.

mod network;

use network::{index_of, name_of, port_of, Network, Rng, MAX_DELAY_MS};
use tally_cluster::message::node_flags;
use tally_cluster::node::Node;
use tally_cluster::{NodeName, SLOTS};

const NODE_TIMEOUT_MS: u64 = 2000;
/// The simulation's step.
const STEP_MS: u64 = 10;

fn run(seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let n = 3 + rng.below(10) as usize;
    let drop_per_mille = rng.below(150);
    // As CLUSTER ADDSLOTS + MEET without SET-CONFIG-EPOCH: all epochs 0.
    let epochs_from_create = seed % 3 != 0;
    let partition = seed % 2 == 0;
    let mut nodes = network::new_nodes(n, NODE_TIMEOUT_MS, seed);
    // As redis-cli --cluster create: epochs 1..n, slots split, then MEET.
    let per_node = SLOTS / n;
    for (i, node) in nodes.iter_mut().enumerate() {
        if epochs_from_create {
            node.set_config_epoch(i as u64 + 1);
        }
        let start = i * per_node;
        let end = if i == n - 1 { SLOTS } else { start + per_node };
        let _ = node.add_slots((start..end).map(|s| s as u16));
    }
    let mut net = Network::new(nodes, seed, drop_per_mille);
    for j in 1..n {
        let out = net.nodes[0].meet(b"127.0.0.1", port_of(j), port_of(j) + 10000, 0);
        net.route(0, out, None);
    }
    // Three phases, in 10 ms steps, every node ticking every 100 ms: 20 s
    // to form; 12 s with the last node stopped (nothing to or from it, as a
    // SIGSTOP) or with the network split; 15 s on a healed network (no
    // loss), after which nothing may be left failing.
    let stopped_node = n - 1;
    // The minority: the last (n - 1) / 2 nodes (at least one).
    let minority = ((n - 1) / 2).max(1);
    let side = |i: usize| usize::from(i >= n - minority);
    let mut suspected_at: Vec<Vec<Option<u64>>> = vec![vec![None; n]; n];
    let mut declared = vec![false; n];
    let mut epochs: Vec<(u64, u64)> = net
        .nodes
        .iter()
        .map(|node| (node.current_epoch(), node.config_epoch()))
        .collect();
    for (phase, (end, cut)) in [(20_000u64, false), (32_000, true), (47_000, false)]
        .into_iter()
        .enumerate()
    {
        if phase == 2 {
            net.drop_per_mille = 0;
        }
        net.stopped[stopped_node] = cut && !partition;
        net.sides = (cut && partition).then(|| (0..n).map(side).collect());
        while net.now < end {
            net.step(STEP_MS);
            let now = net.now;
            let nodes = &net.nodes;
            if now % 100 == 0 {
                for (i, node) in nodes.iter().enumerate() {
                    let now_epochs = (node.current_epoch(), node.config_epoch());
                    if now_epochs.0 < epochs[i].0 || now_epochs.1 < epochs[i].1 {
                        return Err(format!(
                            "seed {seed}: node {i}'s epochs went from {:?} to {now_epochs:?} at {now} ms",
                            epochs[i]
                        ));
                    }
                    epochs[i] = now_epochs;
                }
            }
            // Ground truth for failure detection: when each node last had
            // each other suspected; the first FAIL anywhere must follow a
            // majority of the masters suspecting the node within the
            // reports' validity (2 x node timeout).
            let mut failed_somewhere = vec![false; n];
            for (i, node) in nodes.iter().enumerate() {
                for peer in node.peers() {
                    let Some(j) = index_of(&peer.name).filter(|&j| j < n) else {
                        continue; // a half-known node's random name
                    };
                    failed_somewhere[j] |= peer.flags & node_flags::FAIL != 0;
                    if peer.failing() {
                        suspected_at[i][j] = Some(now);
                    }
                    if peer.flags & node_flags::FAIL != 0 && !declared[j] {
                        declared[j] = true;
                        // A report is valid 2 x node timeout from its
                        // arrival; it left its sender up to MAX_DELAY_MS
                        // earlier, and flags are sampled every STEP_MS.
                        let window = 2 * NODE_TIMEOUT_MS + MAX_DELAY_MS + STEP_MS;
                        let suspecting = (0..n)
                            .filter(|&k| suspected_at[k][j].is_some_and(|at| now - at <= window))
                            .count();
                        if suspecting < n / 2 + 1 {
                            return Err(format!(
                                "seed {seed}: node {i} declared node {j} FAIL at {now} ms with only {suspecting} of {n} masters suspecting it"
                            ));
                        }
                    }
                }
            }
            for (declared, failed) in declared.iter_mut().zip(failed_somewhere) {
                *declared &= failed;
            }
        }
        let split = cut && partition;
        let nodes = &net.nodes;
        let context = format!(
            "seed {seed} ({n} nodes, {drop_per_mille}/1000 dropped, {}, {}), phase {phase}",
            if epochs_from_create {
                "create"
            } else {
                "epochs 0"
            },
            if partition { "split" } else { "stop" },
        );
        match phase {
            1 if split => {
                // The majority marks every minority node FAIL.
                for (i, node) in nodes.iter().enumerate().filter(|(i, _)| side(*i) == 0) {
                    for j in (0..n).filter(|&j| side(j) == 1) {
                        let flagged = node
                            .peers()
                            .find(|p| p.name == name_of(j))
                            .is_some_and(|p| p.flags & node_flags::FAIL != 0);
                        if !flagged {
                            return Err(format!("{context}: node {i} does not have node {j} FAIL"));
                        }
                    }
                }
            }
            1 => {
                // Every other node has the stopped one FAIL (a majority of
                // the masters is still up).
                for (i, node) in nodes.iter().enumerate().filter(|(i, _)| *i != stopped_node) {
                    let flagged = node
                        .peers()
                        .find(|p| p.name == name_of(stopped_node))
                        .is_some_and(|p| p.flags & node_flags::FAIL != 0);
                    if !flagged {
                        return Err(format!(
                            "{context}: node {i} does not have node {stopped_node} FAIL"
                        ));
                    }
                }
            }
            _ => {
                converged(nodes, n, per_node, &context)?;
                if phase == 2 {
                    for (i, node) in nodes.iter().enumerate() {
                        if let Some(p) = node.peers().find(|p| p.failing()) {
                            return Err(format!(
                                "{context}: node {i} still has {} failing",
                                String::from_utf8_lossy(&p.name)
                            ));
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Every node knows every other by name (none half-known), all agree on
/// every slot's owner (the node that claimed it) and on the epoch.
fn converged(nodes: &[Node], n: usize, per_node: usize, context: &str) -> Result<(), String> {
    for (i, node) in nodes.iter().enumerate() {
        let mut known: Vec<NodeName> = node
            .peers()
            .filter(|p| p.flags & node_flags::HANDSHAKE == 0)
            .map(|p| p.name)
            .collect();
        known.sort();
        let expected: Vec<NodeName> = (0..n).filter(|&j| j != i).map(name_of).collect();
        if known != expected {
            return Err(format!(
                "{context}: node {i} knows {} of {} nodes",
                known.len(),
                n - 1
            ));
        }
        if node.peers().any(|p| p.flags & node_flags::HANDSHAKE != 0) {
            return Err(format!("{context}: node {i} still has a half-known node"));
        }
        if node.current_epoch() != nodes[0].current_epoch() {
            return Err(format!(
                "{context}: node {i} current epoch {} but node 0 has {}",
                node.current_epoch(),
                nodes[0].current_epoch()
            ));
        }
    }
    // Config epochs are distinct (from create, or made so by collisions).
    let mut config_epochs: Vec<u64> = nodes.iter().map(|node| node.config_epoch()).collect();
    config_epochs.sort();
    config_epochs.dedup();
    if config_epochs.len() != n {
        return Err(format!(
            "{context}: {} distinct config epochs among {n} masters",
            config_epochs.len()
        ));
    }
    for slot in 0..SLOTS as u16 {
        let claimed = name_of(((slot as usize) / per_node).min(n - 1));
        for (i, node) in nodes.iter().enumerate() {
            if node.owner(slot) != Some(&claimed) {
                return Err(format!(
                    "{context}: node {i} has the wrong owner for slot {slot}"
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn clusters_form_and_agree_under_a_lossy_network() {
    network::run_seeds("TALLY_SIM_SEEDS", "TALLY_SIM_SEED", 1000, run);
}
