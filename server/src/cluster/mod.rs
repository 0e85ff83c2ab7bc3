//! `cluster-enabled yes`: tally as a Redis Cluster node. The node's view
//! of the cluster is `tally_cluster::node::Node` (a state machine without
//! I/O) behind a mutex; the bus (`crate::net::bus`) feeds it messages and
//! the time and carries out what it returns. The slots this node serves
//! are mirrored in a bitmap of atomics, read by every keyed command's
//! routing without a lock; only a redirect consults the state machine.
//!
//! Routing is in `routing`, the announced address in `announce`, the bus
//! message counts in `bus_stats`.

mod announce;
mod bus_stats;
mod routing;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::slot_gate::SlotGates;
use tally_cluster::node::{FailoverError, FailoverKind};
use tally_cluster::node::{Node, Output};
use tally_cluster::nodes_conf::{Moving, NodeLine, NodesConf};
use tally_cluster::{NodeName, SLOTS};

pub use crate::config::EndpointType;
use announce::{apply_announced, Announced};
pub use bus_stats::BusStats;
pub use routing::{Access, KeysHere, Redirect, Route};

/// Redis's CLUSTER_WRITABLE_DELAY: a node reports `ok` only this long
/// after it started, so a restarted master does not take writes before
/// the others could tell it about a failover.
const WRITABLE_DELAY: Duration = Duration::from_millis(2000);

/// This node's cluster state.
pub struct Cluster {
    /// The slots this node serves: one bit each.
    owned: Box<[AtomicU64]>,
    /// Open slots, one bit each: migrating from or importing to this
    /// node, or with a MIGRATE under way. Commands on them take the slow
    /// path of [`SlotGates`].
    open: Box<[AtomicU64]>,
    /// Slots with MIGRATEs under way, and how many.
    moving_now: Mutex<HashMap<u16, usize>>,
    /// How many bits of `open` are set (0: routing skips the open-slot
    /// checks altogether).
    open_count: AtomicUsize,
    /// Slots a keyed command runs on with no routing beyond its gate:
    /// served here, not open, the cluster up (`owned & !open` while
    /// `state_ok`, else none), one bit each. Rebuilt by
    /// [`Self::refresh_plain`] after any of the three changes; an opener
    /// clears a slot's bit before it waits for the commands inside.
    plain: Box<[AtomicU64]>,
    /// Serializes rebuilds of `plain`, so that the last one stored read
    /// the newest bits.
    plain_rebuild: Mutex<()>,
    /// Entered by every keyed command from before its routing to after
    /// its run; SETSLOT and MIGRATE wait for the commands they could
    /// surprise (see [`crate::slot_gate`]).
    gates: SlotGates,
    /// Keys a MIGRATE has copied out and not yet dropped; commands on them
    /// wait ([`Route::Open`]).
    pub in_flight: Mutex<HashSet<Vec<u8>>>,
    /// The cluster can serve, as last computed.
    state_ok: AtomicBool,
    /// `cluster-allow-reads-when-down`, read by routing without the config lock.
    pub allow_reads_when_down: AtomicBool,
    /// `cluster-allow-pubsubshard-when-down`.
    pub allow_pubsubshard_when_down: AtomicBool,
    /// `cluster-preferred-endpoint-type`, as [`EndpointType::code`].
    preferred_endpoint: AtomicU8,
    /// `tls-cluster` (with a TLS port): the bus runs TLS, nodes announce
    /// their TLS port, and clients on the plaintext port are given the
    /// others' plaintext ports.
    tls: AtomicBool,
    /// The address announced, applied again after CLUSTER RESET.
    announced: Mutex<Announced>,
    /// Bus messages sent and received, by type (CLUSTER INFO).
    pub bus_stats: BusStats,
    /// Run with the slots this node stopped serving (see `on_slots_lost`).
    on_slots_lost: std::sync::OnceLock<SlotsLostHook>,
    node: Mutex<Node>,
    config_file: PathBuf,
    /// One writer of `config_file` at a time (the bus and commands both
    /// save; they share the temporary file).
    saving: Mutex<()>,
    require_full_coverage: bool,
    port: u16,
    cport: u16,
    node_timeout_ms: u64,
    started: Instant,
    /// When this node last saw itself among a minority of the masters.
    among_minority_at: Mutex<Option<Instant>>,
}

/// What runs with the slots this node stopped serving.
pub type SlotsLostHook = Box<dyn Fn(&[u16]) + Send + Sync>;

/// A node name: 40 random hex characters.
fn random_name() -> NodeName {
    let mut bytes = [0u8; 20];
    let _ = getrandom::fill(&mut bytes);
    let mut name = [0u8; 40];
    for (i, b) in bytes.iter().enumerate() {
        name[2 * i] = b"0123456789abcdef"[(b >> 4) as usize];
        name[2 * i + 1] = b"0123456789abcdef"[(b & 0xf) as usize];
    }
    name
}

fn seed() -> u64 {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    u64::from_le_bytes(bytes)
}

impl Cluster {
    /// Loads `config_file` (Redis's nodes.conf: this node and the others it
    /// knew, whom it pings again) or starts a new node with a random name,
    /// and writes the file.
    pub fn open(
        config_file: PathBuf,
        port: u16,
        cport: u16,
        node_timeout_ms: u64,
        require_full_coverage: bool,
    ) -> Result<Cluster, String> {
        let owned: Box<[AtomicU64]> = (0..SLOTS / 64).map(|_| AtomicU64::new(0)).collect();
        let mut node = Node::new(random_name(), port, cport, node_timeout_ms, seed());
        match std::fs::read_to_string(&config_file) {
            Ok(text) if !text.trim().is_empty() => {
                let conf = NodesConf::parse(&text)?;
                let me = conf
                    .nodes
                    .iter()
                    .find(|n| n.flags.iter().any(|f| f == "myself"))
                    .ok_or("Unrecoverable error: corrupted cluster config file: no myself")?;
                let name: NodeName =
                    me.name.as_bytes().try_into().map_err(|_| {
                        format!("corrupted cluster config file: node name {}", me.name)
                    })?;
                node = Node::new(name, port, cport, node_timeout_ms, seed());
                node.restore_epochs(conf.current_epoch, me.config_epoch, conf.last_vote_epoch);
                let slots: Vec<u16> = me.slots.iter().flat_map(|&(a, b)| a..=b).collect();
                for &slot in &slots {
                    set_bit(&owned, slot, true);
                }
                let _ = node.add_slots(slots);
                let ids: Vec<NodeName> = conf
                    .nodes
                    .iter()
                    .filter_map(|n| n.name.as_bytes().try_into().ok())
                    .collect();
                let open = me.moving.iter().filter_map(|(slot, moving)| {
                    let (to, name) = match moving {
                        Moving::To(name) => (true, name),
                        Moving::From(name) => (false, name),
                    };
                    let name = ids.iter().find(|id| id[..] == *name.as_bytes())?;
                    Some((*slot, to, *name))
                });
                let open: Vec<(u16, bool, NodeName)> = open.collect();
                let master_of = |line: &NodeLine| -> Option<NodeName> {
                    line.master.as_ref()?.as_bytes().try_into().ok()
                };
                for other in conf.nodes.iter().filter(|n| n.name != me.name) {
                    let Ok(name) = <NodeName>::try_from(other.name.as_bytes()) else {
                        continue;
                    };
                    node.restore_peer(
                        name,
                        other.ip.as_bytes(),
                        other.port,
                        other.cport,
                        other.config_epoch,
                        master_of(other),
                        other.slots.iter().flat_map(|&(a, b)| a..=b),
                        0,
                    );
                }
                if let Some(master) = master_of(me) {
                    node.restore_my_master(master);
                }
                for (slot, to, name) in open {
                    let _ = if to {
                        node.set_migrating(slot, Some(name))
                    } else {
                        node.set_importing(slot, Some(name))
                    };
                }
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {e}", config_file.display())),
        }
        let cluster = Cluster {
            owned,
            open: (0..SLOTS / 64).map(|_| AtomicU64::new(0)).collect(),
            open_count: AtomicUsize::new(0),
            plain: (0..SLOTS / 64).map(|_| AtomicU64::new(0)).collect(),
            plain_rebuild: Mutex::new(()),
            moving_now: Mutex::new(HashMap::new()),
            gates: SlotGates::default(),
            in_flight: Mutex::new(HashSet::new()),
            state_ok: AtomicBool::new(false),
            allow_reads_when_down: AtomicBool::new(false),
            allow_pubsubshard_when_down: AtomicBool::new(true),
            preferred_endpoint: AtomicU8::new(EndpointType::Ip.code()),
            tls: AtomicBool::new(false),
            announced: Mutex::new(Announced::default()),
            on_slots_lost: std::sync::OnceLock::new(),
            bus_stats: BusStats::default(),
            node: Mutex::new(node),
            config_file,
            saving: Mutex::new(()),
            require_full_coverage,
            port,
            cport,
            node_timeout_ms,
            started: Instant::now(),
            among_minority_at: Mutex::new(None),
        };
        cluster.sync_slots();
        cluster.save()?;
        Ok(cluster)
    }

    /// This node's name.
    pub fn myid(&self) -> String {
        String::from_utf8_lossy(self.node.lock().name()).into_owned()
    }

    /// The bus port.
    pub fn cport(&self) -> u16 {
        self.cport
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// True when this node serves `slot`.
    #[inline]
    pub fn owns(&self, slot: u16) -> bool {
        bit(&self.owned, slot)
    }

    /// Slots with an owner, as this node knows.
    pub fn assigned(&self) -> usize {
        self.node.lock().assigned_slots()
    }

    /// Slots whose owner is not failing.
    pub fn slots_ok(&self) -> usize {
        self.node.lock().slots_ok()
    }

    /// Valid failure reports about a node, if it is known.
    pub fn failure_reports(&self, name: &[u8]) -> Option<usize> {
        let name: NodeName = name.try_into().ok()?;
        self.node.lock().failure_reports(&name)
    }

    /// `ok` or `fail`, as clusterUpdateState decides it: every slot served
    /// by a node not failing (when full coverage is required), a majority
    /// of the masters reachable, not before the writable delay, and for a
    /// master that was among the minority, not before the rejoin delay
    /// (the node timeout, within 0.5-5 s) has passed since: time to learn
    /// of a failover before it takes writes again.
    pub fn state_ok(&self) -> bool {
        if self.started.elapsed() < WRITABLE_DELAY {
            // Nothing is judged yet (Redis returns before it looks, so a
            // node given its slots in its first seconds was never among a
            // minority).
            return false;
        }
        let (slots_ok, minority, master) = {
            let node = self.node.lock();
            (
                node.slots_ok(),
                node.among_minority(),
                node.my_master().is_none(),
            )
        };
        let mut among_minority = self.among_minority_at.lock();
        if minority {
            *among_minority = Some(Instant::now());
        }
        let rejoin_delay = Duration::from_millis(self.node_timeout_ms.clamp(500, 5000));
        let rejoining = master
            && among_minority.is_some_and(|at| at.elapsed() < rejoin_delay)
            && !self.state_ok.load(Ordering::SeqCst);
        drop(among_minority);
        let ok = (!self.require_full_coverage || slots_ok == SLOTS) && !minority && !rejoining;
        if self.state_ok.swap(ok, Ordering::SeqCst) != ok {
            self.refresh_plain();
        }
        ok
    }

    /// Rebuilds the slots served plainly from the slots owned, the slots
    /// open and the state. Under a lock, reading the bits inside it: of
    /// two rebuilds at once the later stores what both would, so a slot
    /// just opened (its open bit stored before this is called) never
    /// reads as plain again once its opener's rebuild returned.
    fn refresh_plain(&self) {
        let _rebuilding = self.plain_rebuild.lock();
        let ok = self.state_ok.load(Ordering::SeqCst);
        for ((plain, owned), open) in self.plain.iter().zip(&*self.owned).zip(&*self.open) {
            let bits = if ok {
                owned.load(Ordering::SeqCst) & !open.load(Ordering::SeqCst)
            } else {
                0
            };
            plain.store(bits, Ordering::SeqCst);
        }
    }

    /// Mirrors the state machine's slots (this node's, and the open ones)
    /// into the bitmaps routing reads, and recomputes the state.
    pub fn sync_slots(&self) {
        let node = self.node.lock();
        let mine = node.my_slots();
        let mut lost = Vec::new();
        for (i, word) in self.owned.iter().enumerate() {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&mine[i * 8..i * 8 + 8]);
            let bits = u64::from_le_bytes(bytes);
            let mut gone = word.swap(bits, Ordering::Relaxed) & !bits;
            while gone != 0 {
                lost.push((i * 64) as u16 + gone.trailing_zeros() as u16);
                gone &= gone - 1;
            }
        }
        let mut open = vec![0u64; SLOTS / 64];
        let moving = self.moving_now.lock();
        let open_slots = node
            .migrating_slots()
            .chain(node.importing_slots())
            .chain(moving.keys().copied());
        for slot in open_slots {
            open[slot as usize / 64] |= 1 << (slot % 64);
        }
        let mut opened = false;
        let mut count = 0;
        for (word, bits) in self.open.iter().zip(open) {
            let before = word.swap(bits, Ordering::SeqCst);
            opened |= bits & !before != 0;
            count += bits.count_ones() as usize;
        }
        self.open_count.store(count, Ordering::SeqCst);
        // A slot just opened stops reading as plain before its commands
        // are waited for below.
        self.refresh_plain();
        // Stored before the locks go: two syncs at once (the bus's and a
        // SETSLOT's) must not let the older view land last, or a slot
        // just opened would read as closed and a key missing here be
        // created instead of sent on with ASK.
        drop(moving);
        drop(node);
        if opened || count > 0 {
            // Commands that entered a slot just opened before it was: let
            // them finish first. Also when this call opened nothing: a
            // concurrent sync (the bus's) may have stored the bit and be
            // waiting still, and the SETSLOT or MIGRATE that called this
            // must not go on before those commands are done.
            crate::slot_gate::quiesce();
        }
        self.state_ok();
        if !lost.is_empty() {
            if let Some(hook) = self.on_slots_lost.get() {
                hook(&lost);
            }
        }
    }

    /// Installs what runs when slots stop being served here (shard
    /// channel subscriptions in them end, as Redis's removeChannelsInSlot).
    pub fn on_slots_lost(&self, hook: SlotsLostHook) {
        let _ = self.on_slots_lost.set(hook);
    }

    /// CLUSTER SETSLOT <slot> MIGRATING|IMPORTING|STABLE|NODE [<node>],
    /// with Redis's checks; `keys_here` counts this node's keys in the
    /// slot. What the state machine asks (PONGs after an import closes)
    /// is returned for the bus.
    pub fn set_slot(
        &self,
        slot: u16,
        action: SetSlot,
        keys_here: usize,
    ) -> Result<Vec<Output>, String> {
        // No command of this slot is between its routing and its run.
        let _closed = self.close([slot]);
        let mut node = self.node.lock();
        let me = *node.name();
        let lookup = |node: &Node, name: &[u8], unknown: &str| -> Result<NodeName, String> {
            name.try_into()
                .ok()
                .filter(|n: &NodeName| node.knows(n))
                .ok_or_else(|| format!("ERR {unknown} {}", String::from_utf8_lossy(name)))
        };
        let outputs = match action {
            SetSlot::Migrating(name) => {
                if node.owner(slot) != Some(&me) {
                    return Err(format!("ERR I'm not the owner of hash slot {slot}"));
                }
                let target = lookup(&node, &name, "I don't know about node")?;
                node.set_migrating(slot, Some(target))
            }
            SetSlot::Importing(name) => {
                if node.owner(slot) == Some(&me) {
                    return Err(format!("ERR I'm already the owner of hash slot {slot}"));
                }
                let source = lookup(&node, &name, "I don't know about node")?;
                node.set_importing(slot, Some(source))
            }
            SetSlot::Stable => node.set_stable(slot),
            SetSlot::Node(name) => {
                let owner = lookup(&node, &name, "Unknown node")?;
                if node.owner(slot) == Some(&me) && owner != me && keys_here != 0 {
                    return Err(format!(
                        "ERR Can't assign hashslot {slot} to a different node while I still \
                         hold keys for this hash slot."
                    ));
                }
                node.assign_slot(slot, owner, keys_here)
            }
        };
        drop(node);
        self.sync_slots();
        self.save().map_err(|e| format!("ERR {e}"))?;
        Ok(outputs)
    }

    /// CLUSTER FORGET <node>.
    pub fn forget(&self, name: &[u8], now_ms: u64) -> Result<Vec<Output>, String> {
        let mut node = self.node.lock();
        let unknown = || format!("ERR Unknown node {}", String::from_utf8_lossy(name));
        let name: NodeName = name.try_into().map_err(|_| unknown())?;
        if name == *node.name() {
            return Err("ERR I tried hard but I can't forget myself...".to_string());
        }
        if !node.knows(&name) {
            return Err(unknown());
        }
        if node.my_master() == Some(&name) {
            return Err("ERR Can't forget my master!".to_string());
        }
        let outputs = node.forget(&name, now_ms);
        drop(node);
        self.sync_slots();
        Ok(outputs)
    }

    /// Assigns or frees slots (ADDSLOTS, DELSLOTS and their ranges): all
    /// checked first, as Redis does, then applied and saved.
    pub fn change_slots(&self, slots: &[u16], add: bool) -> Result<(), String> {
        let mut seen = std::collections::HashSet::new();
        {
            let node = self.node.lock();
            for &slot in slots {
                if add && node.owner(slot).is_some() {
                    return Err(format!("ERR Slot {slot} is already busy"));
                }
                if !add && node.owner(slot).is_none() {
                    return Err(format!("ERR Slot {slot} is already unassigned"));
                }
                if !seen.insert(slot) {
                    return Err(format!("ERR Slot {slot} specified multiple times"));
                }
            }
        }
        {
            let mut node = self.node.lock();
            if add {
                let _ = node.add_slots(slots.iter().copied());
            } else {
                let _ = node.del_slots(slots.iter().copied());
            }
        }
        for &slot in slots {
            set_bit(&self.owned, slot, add);
        }
        self.refresh_plain();
        self.state_ok();
        self.save().map_err(|e| format!("ERR {e}"))
    }

    /// CLUSTER FLUSHSLOTS.
    pub fn flush_slots(&self) -> Result<(), String> {
        let mine: Vec<u16> = (0..SLOTS as u16).filter(|&s| self.owns(s)).collect();
        let _ = self.node.lock().del_slots(mine);
        self.sync_slots();
        self.save().map_err(|e| format!("ERR {e}"))
    }

    /// CLUSTER REPLICATE <master>: `keys` is how many keys this node
    /// holds (a master must hold none to become a replica).
    pub fn replicate(&self, master: &[u8], keys: usize) -> Result<Vec<Output>, String> {
        let outputs = self
            .node
            .lock()
            .replicate(master, keys)
            .map_err(|e| format!("ERR {e}"))?;
        self.sync_slots();
        self.save().map_err(|e| format!("ERR {e}"))?;
        Ok(outputs)
    }

    /// CLUSTER FAILOVER [FORCE|TAKEOVER]; `master_linked` tells whether
    /// this replica's bus link to its master is up.
    pub fn failover(
        &self,
        how: FailoverKind,
        master_linked: bool,
        now_ms: u64,
    ) -> Result<Vec<Output>, FailoverError> {
        self.node.lock().manual_failover(how, master_linked, now_ms)
    }

    /// The master this node replicates, if it is a replica.
    pub fn my_master(&self) -> Option<NodeName> {
        self.node.lock().my_master().copied()
    }

    /// Where this node's replication should point (its master's IP, client
    /// port, and plaintext port in a TLS cluster), None for a master.
    pub fn replicating(&self) -> Option<(Vec<u8>, u16, u16)> {
        self.node.lock().replicating()
    }

    /// Every known node's replication offset, by name (this node's own
    /// as last observed).
    pub fn repl_offsets(&self) -> HashMap<String, u64> {
        let node = self.node.lock();
        node.peers()
            .map(|p| p.name)
            .chain([*node.name()])
            .map(|name| {
                (
                    String::from_utf8_lossy(&name).into_owned(),
                    node.repl_offset_of(&name),
                )
            })
            .collect()
    }

    /// CLUSTER REPLICAS <node>: the lines of its replicas.
    pub fn replicas_of(&self, name: &[u8], tls_client: bool) -> Result<Vec<NodeLine>, String> {
        let unknown = || format!("ERR Unknown node {}", String::from_utf8_lossy(name));
        let name: NodeName = name.try_into().map_err(|_| unknown())?;
        let replicas = {
            let node = self.node.lock();
            if !node.knows(&name) {
                return Err(unknown());
            }
            if node.is_replica(&name) {
                return Err("ERR The specified node is not a master".to_string());
            }
            node.replicas_of(&name)
        };
        let wanted: Vec<String> = replicas
            .iter()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .collect();
        Ok(self
            .nodes_for_client(tls_client)
            .nodes
            .into_iter()
            .filter(|line| wanted.contains(&line.name))
            .collect())
    }

    /// CLUSTER SET-CONFIG-EPOCH (refused once the node knows others, or
    /// its epoch is non-zero).
    pub fn set_config_epoch(&self, epoch: u64) -> Result<(), String> {
        let mut node = self.node.lock();
        if node.known_nodes() > 1 {
            return Err(
                "ERR The user can assign a config epoch only when the node does not \
                        know any other node."
                    .to_string(),
            );
        }
        if node.config_epoch() != 0 {
            return Err("ERR Node config epoch is already non-zero".to_string());
        }
        node.set_config_epoch(epoch);
        drop(node);
        self.save().map_err(|e| format!("ERR {e}"))
    }

    /// CLUSTER BUMPEPOCH: `BUMPED n` or `STILL n`.
    pub fn bump_epoch(&self) -> Result<String, String> {
        let mut node = self.node.lock();
        match node.bump_epoch() {
            Some(epoch) => {
                drop(node);
                self.save().map_err(|e| format!("ERR {e}"))?;
                Ok(format!("BUMPED {epoch}"))
            }
            None => Ok(format!("STILL {}", node.config_epoch())),
        }
    }

    /// CLUSTER RESET: every other node forgotten, slots flushed; HARD also
    /// takes a new name and zeroes the epochs.
    pub fn reset(&self, hard: bool) -> Result<(), String> {
        let mut node = self.node.lock();
        let name = if hard { random_name() } else { *node.name() };
        let epoch = if hard { 0 } else { node.config_epoch() };
        *node = Node::new(name, self.port, self.cport, self.node_timeout_ms, seed());
        // The same node still: the address it announces stays.
        apply_announced(&mut node, &self.announced.lock());
        node.set_config_epoch(epoch);
        drop(node);
        self.sync_slots();
        self.save().map_err(|e| format!("ERR {e}"))
    }

    /// (current epoch, config epoch).
    pub fn epochs(&self) -> (u64, u64) {
        let node = self.node.lock();
        (node.current_epoch(), node.config_epoch())
    }

    /// Known nodes and masters serving slots (CLUSTER INFO).
    pub fn sizes(&self) -> (usize, usize) {
        let node = self.node.lock();
        (node.known_nodes(), node.serving_masters())
    }

    /// The cluster as nodes.conf / CLUSTER NODES see it.
    pub fn nodes_conf(&self) -> NodesConf {
        self.node.lock().nodes_conf()
    }

    /// CLUSTER MEET: the handshake starts; the bus carries it out.
    pub fn meet(&self, ip: &[u8], port: u16, cport: u16, now_ms: u64) -> Vec<Output> {
        self.node.lock().meet(ip, port, cport, now_ms)
    }

    /// Runs `f` on the state machine (the bus's entry point).
    pub fn with_node<R>(&self, f: impl FnOnce(&mut Node) -> R) -> R {
        f(&mut self.node.lock())
    }

    /// Writes nodes.conf (a temporary file renamed over it, fsynced).
    pub fn save(&self) -> Result<(), String> {
        let _one_at_a_time = self.saving.lock();
        let text = self.nodes_conf().render();
        let path = &self.config_file;
        let temp = path.with_extension("tmp-tally");
        std::fs::write(&temp, text)
            .and_then(|()| std::fs::File::open(&temp)?.sync_all())
            .and_then(|()| std::fs::rename(&temp, path))
            .map_err(|e| format!("Could not save the cluster config {}: {e}", path.display()))
    }
}

/// What CLUSTER SETSLOT does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetSlot {
    /// MIGRATING <node>.
    Migrating(Vec<u8>),
    /// IMPORTING <node>.
    Importing(Vec<u8>),
    /// STABLE.
    Stable,
    /// NODE <node>.
    Node(Vec<u8>),
}

#[inline]
fn bit(words: &[AtomicU64], slot: u16) -> bool {
    let slot = slot as usize;
    words[slot / 64].load(Ordering::Relaxed) & (1 << (slot % 64)) != 0
}

fn set_bit(words: &[AtomicU64], slot: u16, on: bool) {
    let slot = slot as usize;
    let bit = 1u64 << (slot % 64);
    if on {
        words[slot / 64].fetch_or(bit, Ordering::Relaxed);
    } else {
        words[slot / 64].fetch_and(!bit, Ordering::Relaxed);
    }
}
