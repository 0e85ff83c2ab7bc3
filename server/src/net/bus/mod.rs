//! The cluster bus: the sockets and timers around the cluster state
//! machine (`tally_cluster::node`). A listener on the bus port takes links
//! other nodes open (their MEET and PING, answered on the same link); this
//! node opens one link per peer it knows and reads the PONGs back on it;
//! every 100 ms the state machine's tick runs. Messages are Redis 7.0's
//! `clusterMsg`, framed by their `totlen`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hashbrown::HashMap;
use parking_lot::Mutex;
use tally_cluster::message::{self, Message};
use tally_cluster::node::Output;
use tally_cluster::NodeName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};

use crate::state::Shared;

mod replication;
use replication::{follow_the_cluster, pause_for_failover, replication_seen};

/// The largest message accepted (Redis: 1 GB for PUBLISH; gossip is small).
const MAX_MESSAGE: usize = 64 << 20;

/// One bus link, as CLUSTER LINKS shows it.
struct LinkState {
    /// When it was made (unix ms): opened, or accepted.
    created_ms: u64,
    /// Connected and being read (Redis: a read handler installed).
    reading: AtomicBool,
    /// Bytes queued on it and not written yet (Redis: its send buffer).
    queued: AtomicUsize,
    /// Wakes an inbound link's task to close it: its node was forgotten,
    /// or a newer link came from the same node (Redis frees the older).
    closing: Notify,
}

impl LinkState {
    fn new(created_ms: u64, reading: bool) -> Arc<LinkState> {
        Arc::new(LinkState {
            created_ms,
            reading: AtomicBool::new(reading),
            queued: AtomicUsize::new(0),
            closing: Notify::new(),
        })
    }

    /// Redis's `events` field: `r` while read, `w` while bytes wait.
    fn events(&self) -> &'static str {
        let reading = self.reading.load(Ordering::Relaxed);
        let writing = self.queued.load(Ordering::Relaxed) > 0;
        match (reading, writing) {
            (true, true) => "rw",
            (true, false) => "r",
            (false, true) => "w",
            (false, false) => "",
        }
    }
}

/// The link this node opened to a peer: the queue of encoded messages its
/// task writes.
struct Outbound {
    queue: mpsc::UnboundedSender<Vec<u8>>,
    state: Arc<LinkState>,
}

/// This node's bus links: the ones it opened, by the name it knows each
/// peer by, and the ones peers opened, by the node that sent on them (a
/// link is tied to its node by the first message from a known sender,
/// as Redis ties them).
#[derive(Default)]
pub struct Links {
    outbound: Mutex<HashMap<NodeName, Outbound>>,
    inbound: Mutex<HashMap<NodeName, (u64, Arc<LinkState>)>>,
    next_inbound: AtomicU64,
}

/// One entry of CLUSTER LINKS.
pub struct LinkDescription {
    /// A link the peer opened (`from`) or this node opened (`to`).
    pub inbound: bool,
    /// The peer.
    pub node: NodeName,
    /// When the link was made, unix ms.
    pub created_ms: u64,
    /// `r`, `w`, `rw` or empty, as Redis shows its handlers.
    pub events: &'static str,
    /// Bytes queued and not yet written. tally keeps no send buffer of its
    /// own beyond them, so they are also what it has allocated.
    pub send_buffer: usize,
}

impl Links {
    /// The links of `peers` (the nodes this node knows), each peer's
    /// outbound link before its inbound one, as Redis lists them.
    pub fn describe(&self, peers: &[NodeName]) -> Vec<LinkDescription> {
        let outbound = self.outbound.lock();
        let inbound = self.inbound.lock();
        let describe = |node: &NodeName, inbound: bool, state: &LinkState| LinkDescription {
            inbound,
            node: *node,
            created_ms: state.created_ms,
            events: state.events(),
            send_buffer: state.queued.load(Ordering::Relaxed),
        };
        let mut links = Vec::new();
        for node in peers {
            // A link whose task ended is gone (the next message opens another).
            if let Some(link) = outbound.get(node).filter(|l| !l.queue.is_closed()) {
                links.push(describe(node, false, &link.state));
            }
            if let Some((_, state)) = inbound.get(node) {
                links.push(describe(node, true, state));
            }
        }
        links
    }

    /// True while this node's own link to `node` is open (Redis's
    /// `node->link`).
    pub fn linked(&self, node: &NodeName) -> bool {
        self.outbound
            .lock()
            .get(node)
            .is_some_and(|link| !link.queue.is_closed())
    }

    /// Ties inbound link `id` to `node`; an older link from it is closed.
    fn attach_inbound(&self, node: NodeName, id: u64, state: Arc<LinkState>) {
        if let Some((_, older)) = self.inbound.lock().insert(node, (id, state)) {
            older.closing.notify_one();
        }
    }

    /// Forgets inbound link `id` of `node` (if it is still the one tied).
    fn detach_inbound(&self, node: &NodeName, id: u64) {
        let mut inbound = self.inbound.lock();
        if inbound.get(node).is_some_and(|(tied, _)| *tied == id) {
            inbound.remove(node);
        }
    }

    /// Closes both links of a node this node no longer knows.
    fn drop_node(&self, node: &NodeName) {
        self.outbound.lock().remove(node);
        if let Some((_, state)) = self.inbound.lock().remove(node) {
            state.closing.notify_one();
        }
    }
}

/// Ends the bus's tasks when the bus stops, however it stops (shutdown,
/// or its task dropped with the runtime): the listener closes, and this
/// node's links close with their queues.
struct StopOnDrop {
    shared: Arc<Shared>,
    accepting: tokio::task::AbortHandle,
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.accepting.abort();
        self.shared.bus_links.outbound.lock().clear();
        for (_, (_, state)) in self.shared.bus_links.inbound.lock().drain() {
            state.closing.notify_one();
        }
    }
}

/// Runs the bus until shutdown: the listener and the 100 ms tick.
pub async fn run(shared: Arc<Shared>, listener: TcpListener) {
    let mut stopping = shared.shutdown.subscribe();
    let accepting = {
        let shared = shared.clone();
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, peer)) => {
                        tokio::spawn(inbound(shared.clone(), stream, peer));
                    }
                    // That connection's own failure: take the next at once.
                    Err(e) if super::accept_failed_for_that_connection_only(&e) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            }
        })
    };
    let _stop = StopOnDrop {
        shared: shared.clone(),
        accepting: accepting.abort_handle(),
    };
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = stopping.wait_for(|&stop| stop) => break,
        }
        let Some(cluster) = shared.cluster.get() else {
            break;
        };
        let now = shared.clock.now_ms();
        let settings = {
            let config = shared.config.read();
            (
                config.cluster_replica_validity_factor,
                config.repl_ping_replica_period,
                config.cluster_replica_no_failover,
                config.cluster_allow_replica_migration,
                config.cluster_migration_barrier as usize,
            )
        };
        let (offset, data_age) = replication_seen(&shared, now);
        let outputs = cluster.with_node(|node| {
            let (validity, ping_period, no_failover, migration, barrier) = settings;
            node.set_failover_settings(validity, ping_period, no_failover, migration, barrier);
            node.observe_replication(offset, data_age);
            node.tick(now)
        });
        carry_out(&shared, outputs, None);
        // A node restarted as a replica (nodes.conf), or whose master's
        // address was learned late, starts replicating here.
        follow_the_cluster(&shared);
        // The state routing reads: failing owners, the writable delay.
        cluster.state_ok();
    }
    // Stopped: the listener is closed when this returns (the server's
    // shutdown waits for it), not whenever the runtime drops the task.
    accepting.abort();
    let _ = accepting.await;
}

/// What one framed message on a link turned out to be.
enum Incoming {
    /// A message that decoded (boxed: a message is a few hundred bytes,
    /// and a refusal none).
    Message(Box<Message>),
    /// A message whose contents Redis's checks refuse: another protocol
    /// version, a gossip count or extension running past its length (the
    /// shape of CVE-2026-21863), a hostname extension without its NUL
    /// (CVE-2026-92925). Redis counts it, logs it and ignores it, keeping
    /// the link; so does this.
    Refused,
}

/// Reads one framed message and counts it by its type (CLUSTER INFO
/// `cluster_stats_messages_*_received`), whether or not its contents
/// decode, as Redis counts before it checks. None: the link must close
/// (closed, not `RCmb`, or a length no message has).
async fn read_message(
    shared: &Shared,
    stream: &mut (impl AsyncReadExt + Unpin),
) -> Option<Incoming> {
    let mut head = [0u8; 8];
    stream.read_exact(&mut head).await.ok()?;
    let total = message::frame_len(&head).ok()??;
    if !(message::HEADER_LEN..=MAX_MESSAGE).contains(&total) {
        return None;
    }
    let mut bytes = head.to_vec();
    bytes.resize(total, 0);
    stream.read_exact(&mut bytes[8..]).await.ok()?;
    if let Some(cluster) = shared.cluster.get() {
        cluster.bus_stats.received(message::kind_of(&bytes));
    }
    match message::decode(&bytes) {
        Ok(message) => Some(Incoming::Message(Box::new(message))),
        Err(e) => {
            tracing::warn!("cluster bus: ignoring a message: {e}");
            Some(Incoming::Refused)
        }
    }
}

/// Counts a message sent (CLUSTER INFO `cluster_stats_messages_*`).
fn count_sent(shared: &Shared, message: &Message) {
    if let Some(cluster) = shared.cluster.get() {
        cluster.bus_stats.sent(message.header.kind);
    }
}

/// How long a peer has to finish a TLS handshake on the bus.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// A link another node opened (over TLS with `tls-cluster`, a certificate
/// required of the peer, as Redis requires one).
async fn inbound(shared: Arc<Shared>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let local_ip = stream
        .local_addr()
        .map(|a| a.ip().to_canonical().to_string())
        .unwrap_or_default();
    let peer_ip = peer.ip().to_canonical().to_string();
    if !shared.cluster.get().is_some_and(|c| c.tls()) {
        return serve_inbound(shared, stream, peer_ip, local_ip).await;
    }
    let Some((acceptor, _)) = shared.tls.cluster() else {
        tracing::warn!(%peer, "tls-cluster is on but TLS is not configured: bus link refused");
        return;
    };
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => serve_inbound(shared, stream, peer_ip, local_ip).await,
        Ok(Err(e)) => tracing::debug!(%peer, "bus TLS handshake failed: {e}"),
        Err(_) => tracing::debug!(%peer, "bus TLS handshake timed out"),
    }
}

/// The messages of a link another node opened go to the state machine,
/// the replies back on the link.
async fn serve_inbound(
    shared: Arc<Shared>,
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    peer_ip: String,
    local_ip: String,
) {
    let links = &shared.bus_links;
    let id = links.next_inbound.fetch_add(1, Ordering::Relaxed);
    let state = LinkState::new(shared.clock.now_ms(), true);
    let mut tied_to = None;
    loop {
        let incoming = tokio::select! {
            incoming = read_message(&shared, &mut stream) => incoming,
            _ = state.closing.notified() => None,
        };
        let message = match incoming {
            Some(Incoming::Message(message)) => *message,
            Some(Incoming::Refused) => continue,
            None => break,
        };
        let Some(cluster) = shared.cluster.get() else {
            break;
        };
        let now = shared.clock.now_ms();
        let outputs = cluster.with_node(|node| {
            // Redis ties the link to its sender before processing the
            // message, once the sender is a node it knows by that name.
            let sender = message.header.sender;
            if tied_to.is_none() && sender != *node.name() && node.knows(&sender) {
                links.attach_inbound(sender, id, state.clone());
                tied_to = Some(sender);
            }
            node.on_inbound(&message, peer_ip.as_bytes(), local_ip.as_bytes(), now)
        });
        let mut replies = Vec::new();
        let others: Vec<Output> = outputs
            .into_iter()
            .filter_map(|o| match o {
                Output::Reply(m) => {
                    replies.push(m);
                    None
                }
                other => Some(other),
            })
            .collect();
        carry_out(&shared, others, None);
        let replies: Vec<Vec<u8>> = replies
            .iter()
            .map(|reply| {
                count_sent(&shared, reply);
                message::encode(reply)
            })
            .collect();
        let bytes = replies.iter().map(Vec::len).sum();
        state.queued.fetch_add(bytes, Ordering::Relaxed);
        for reply in &replies {
            if stream.write_all(reply).await.is_err() {
                break;
            }
        }
        let _ = stream.flush().await;
        state.queued.fetch_sub(bytes, Ordering::Relaxed);
    }
    if let Some(node) = tied_to {
        links.detach_inbound(&node, id);
    }
}

/// Carries out what the state machine asked: messages to peers (over
/// their links, opened on demand), dropped peers' links closed, nodes.conf
/// saved.
pub fn carry_out(shared: &Arc<Shared>, outputs: Vec<Output>, _from: Option<NodeName>) {
    let Some(cluster) = shared.cluster.get() else {
        return;
    };
    let mut save = false;
    let mut role_changed = false;
    for output in outputs {
        match output {
            Output::Send {
                to,
                ip,
                cport,
                message,
            } => {
                count_sent(shared, &message);
                let bytes = message::encode(&message);
                let mut links = shared.bus_links.outbound.lock();
                let open = || {
                    let (queue, receiver) = mpsc::unbounded_channel();
                    let state = LinkState::new(shared.clock.now_ms(), false);
                    let address = format!("{}:{cport}", String::from_utf8_lossy(&ip));
                    tokio::spawn(outbound(
                        shared.clone(),
                        to,
                        address,
                        state.clone(),
                        receiver,
                    ));
                    Outbound { queue, state }
                };
                let link = links.entry(to).or_insert_with(open);
                if link.queue.is_closed() {
                    // The link's task ended: open a new one for this message.
                    *link = open();
                }
                link.state.queued.fetch_add(bytes.len(), Ordering::Relaxed);
                if let Err(unsent) = link.queue.send(bytes) {
                    link.state
                        .queued
                        .fetch_sub(unsent.0.len(), Ordering::Relaxed);
                }
            }
            Output::Dropped(name) => shared.bus_links.drop_node(&name),
            Output::SaveConfig => save = true,
            Output::SlotsLost(slots) => drop_slots(shared, &slots),
            Output::Publish {
                channel,
                message,
                sharded,
            } => {
                let now_ms = shared.clock.now_ms();
                if sharded {
                    shared.pubsub.spublish(&channel, &message, now_ms);
                } else {
                    shared.pubsub.publish(&channel, &message, now_ms);
                }
            }
            Output::RoleChanged => role_changed = true,
            Output::PauseWritesForFailover { replica, until_ms } => {
                pause_for_failover(shared, &replica, until_ms);
            }
            Output::ResumeWrites => shared.pause.unpause(crate::pause::PausePurpose::Failover),
            Output::Reply(_) => {}
        }
    }
    if role_changed {
        follow_the_cluster(shared);
    }
    if save {
        cluster.sync_slots();
        if let Err(e) = cluster.save() {
            tracing::warn!("{e}");
        }
    }
}

/// Drops the keys of slots another node took over (Redis's delKeysInSlot
/// for dirty slots), each logged as a DEL.
fn drop_slots(shared: &Shared, slots: &[u16]) {
    let now_ms = shared.clock.now_ms();
    let db = shared.store.db(0);
    for &slot in slots {
        let mut dropped = 0;
        for index in 0..db.shard_count() {
            let mut shard = db.lock_shard(index);
            let mut keys = Vec::new();
            shard.keys_in_slot(slot, usize::MAX, &mut keys);
            dropped += keys.len();
            for key in keys {
                let key = shared.store.key(&key);
                if shard.remove(key, now_ms) && shared.store.feed().active() {
                    shared.store.feed().append(&crate::store::feed::Change::one(
                        0,
                        &[&b"DEL"[..], key.bytes],
                    ));
                }
            }
        }
        if dropped > 0 {
            tracing::warn!(
                "slot {slot} is served by another node now: its {dropped} keys here were dropped"
            );
        }
    }
}

/// This node's link to the peer it knows as `via`: messages queued for it
/// are written, its answers read back into the state machine. The link
/// ends on any error; the next message opens a new one.
async fn outbound(
    shared: Arc<Shared>,
    via: NodeName,
    address: String,
    state: Arc<LinkState>,
    queue: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    let Ok(Ok(stream)) =
        tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(&address)).await
    else {
        return link_lost(&shared, &via);
    };
    let _ = stream.set_nodelay(true);
    if !shared.cluster.get().is_some_and(|c| c.tls()) {
        return serve_outbound(shared, via, state, queue, stream).await;
    }
    let Some((_, connector)) = shared.tls.cluster() else {
        tracing::warn!(
            address,
            "tls-cluster is on but TLS is not configured: no bus link"
        );
        return;
    };
    let host = address
        .rsplit_once(':')
        .map_or(address.as_str(), |(h, _)| h);
    let Some(name) = crate::net::tls::peer_name(host) else {
        return;
    };
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, connector.connect(name, stream)).await {
        Ok(Ok(stream)) => serve_outbound(shared, via, state, queue, stream).await,
        Ok(Err(e)) => {
            tracing::debug!(address, "bus TLS handshake failed: {e}");
            link_lost(&shared, &via);
        }
        Err(_) => {
            tracing::debug!(address, "bus TLS handshake timed out");
            link_lost(&shared, &via);
        }
    }
}

/// The link to `via` failed from the other side (closed, refused, broken):
/// the node asks it again at once and starts its node timeout
/// (`Node::link_lost`).
fn link_lost(shared: &Arc<Shared>, via: &NodeName) {
    let Some(cluster) = shared.cluster.get() else {
        return;
    };
    let now = shared.clock.now_ms();
    let outputs = cluster.with_node(|node| node.link_lost(via, now));
    carry_out(shared, outputs, None);
}

/// Writes the link's queue, and reads the answers back into the state
/// machine, until either side fails (then the node hears of it) or the
/// link is dropped on purpose.
async fn serve_outbound(
    shared: Arc<Shared>,
    via: NodeName,
    state: Arc<LinkState>,
    mut queue: mpsc::UnboundedReceiver<Vec<u8>>,
    stream: impl AsyncRead + AsyncWrite + Send + 'static,
) {
    let (mut reader, mut writer) = tokio::io::split(stream);
    let mut reading = {
        let shared = shared.clone();
        tokio::spawn(async move {
            while let Some(incoming) = read_message(&shared, &mut reader).await {
                let Incoming::Message(message) = incoming else {
                    continue;
                };
                let message = *message;
                let Some(cluster) = shared.cluster.get() else {
                    return;
                };
                let now = shared.clock.now_ms();
                let outputs = cluster.with_node(|node| node.on_outbound(&via, &message, now));
                carry_out(&shared, outputs, Some(via));
            }
        })
    };
    state.reading.store(true, Ordering::Relaxed);
    let failed = loop {
        tokio::select! {
            // The other side closed the link or it broke: a killed node's
            // links close at once, which starts its node timeout now.
            _ = &mut reading => break true,
            next = queue.recv() => {
                let Some(bytes) = next else {
                    break false;
                };
                // A TLS stream may hold records back until flushed.
                let written = match writer.write_all(&bytes).await {
                    Ok(()) => writer.flush().await,
                    failed => failed,
                };
                state.queued.fetch_sub(bytes.len(), Ordering::Relaxed);
                if written.is_err() {
                    break true;
                }
            }
        }
    };
    state.reading.store(false, Ordering::Relaxed);
    reading.abort();
    // The queue is closed first, so the PING the node sends goes on a new
    // link.
    queue.close();
    drop(queue);
    if failed {
        link_lost(&shared, &via);
    }
}
