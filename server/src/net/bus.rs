//! The cluster bus: the sockets and timers around the cluster state
//! machine (`tally_cluster::node`). A listener on the bus port takes links
//! other nodes open (their MEET and PING, answered on the same link); this
//! node opens one link per peer it knows and reads the PONGs back on it;
//! every 100 ms the state machine's tick runs. Messages are Redis 7.0's
//! `clusterMsg`, framed by their `totlen`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hashbrown::HashMap;
use parking_lot::Mutex;
use tally_cluster::message::{self, Message};
use tally_cluster::node::Output;
use tally_cluster::NodeName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::state::Shared;

/// The largest message accepted (Redis: 1 GB for PUBLISH; gossip is small).
const MAX_MESSAGE: usize = 64 << 20;

/// This node's links to its peers, by the name it knows each by.
#[derive(Default)]
pub struct Links {
    outbound: Mutex<HashMap<NodeName, mpsc::UnboundedSender<Message>>>,
}

/// Ends the bus's tasks when the bus stops, however it stops (shutdown,
/// or the server's task aborting it): the listener closes, and this node's
/// links close with their queues.
struct StopOnDrop {
    shared: Arc<Shared>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.accepting.abort();
        self.shared.bus_links.outbound.lock().clear();
    }
}

/// Runs the bus until shutdown: the listener and the 100 ms tick.
pub async fn run(shared: Arc<Shared>, listener: TcpListener) {
    let mut stopping = shared.shutdown.subscribe();
    let accepting = {
        let shared = shared.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                tokio::spawn(inbound(shared.clone(), stream, peer));
            }
        })
    };
    let _stop = StopOnDrop {
        shared: shared.clone(),
        accepting,
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
        let outputs = cluster.with_node(|node| node.tick(now));
        carry_out(&shared, outputs, None);
        // The state routing reads: failing owners, the writable delay.
        cluster.state_ok();
    }
}

/// Reads one framed message.
async fn read_message(stream: &mut (impl AsyncReadExt + Unpin)) -> Option<Message> {
    let mut head = [0u8; 8];
    stream.read_exact(&mut head).await.ok()?;
    let total = message::frame_len(&head).ok()??;
    if !(message::HEADER_LEN..=MAX_MESSAGE).contains(&total) {
        return None;
    }
    let mut bytes = head.to_vec();
    bytes.resize(total, 0);
    stream.read_exact(&mut bytes[8..]).await.ok()?;
    message::decode(&bytes).ok()
}

/// Counts a message sent (CLUSTER INFO `cluster_stats_messages_*`).
fn count_sent(shared: &Shared, message: &Message) {
    if let Some(cluster) = shared.cluster.get() {
        cluster.bus_stats.sent(message.header.kind);
    }
}

/// Counts a message received.
fn count_received(shared: &Shared, message: &Message) {
    if let Some(cluster) = shared.cluster.get() {
        cluster.bus_stats.received(message.header.kind);
    }
}

/// A link another node opened: its messages go to the state machine, the
/// replies back on the link.
async fn inbound(shared: Arc<Shared>, mut stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let local_ip = stream
        .local_addr()
        .map(|a| a.ip().to_canonical().to_string())
        .unwrap_or_default();
    let peer_ip = peer.ip().to_canonical().to_string();
    while let Some(message) = read_message(&mut stream).await {
        count_received(&shared, &message);
        let Some(cluster) = shared.cluster.get() else {
            return;
        };
        let now = shared.clock.now_ms();
        let outputs = cluster.with_node(|node| {
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
        for reply in replies {
            count_sent(&shared, &reply);
            if stream.write_all(&message::encode(&reply)).await.is_err() {
                return;
            }
        }
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
    for output in outputs {
        match output {
            Output::Send {
                to,
                ip,
                cport,
                message,
            } => {
                let mut links = shared.bus_links.outbound.lock();
                let sender = links.entry(to).or_insert_with(|| {
                    let (tx, rx) = mpsc::unbounded_channel();
                    let address = format!("{}:{cport}", String::from_utf8_lossy(&ip));
                    tokio::spawn(outbound(shared.clone(), to, address, rx));
                    tx
                });
                if sender.send(message.clone()).is_err() {
                    // The link's task ended: open a new one for this message.
                    let (tx, rx) = mpsc::unbounded_channel();
                    let address = format!("{}:{cport}", String::from_utf8_lossy(&ip));
                    tokio::spawn(outbound(shared.clone(), to, address, rx));
                    let _ = tx.send(message);
                    links.insert(to, tx);
                }
            }
            Output::Dropped(name) => {
                shared.bus_links.outbound.lock().remove(&name);
            }
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
            Output::Reply(_) => {}
        }
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
                    shared
                        .store
                        .feed()
                        .append(&[(0, vec![b"DEL".to_vec(), key.bytes.to_vec()])]);
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
    mut queue: mpsc::UnboundedReceiver<Message>,
) {
    let Ok(Ok(stream)) =
        tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(&address)).await
    else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = stream.into_split();
    let reading = {
        let shared = shared.clone();
        tokio::spawn(async move {
            while let Some(message) = read_message(&mut reader).await {
                count_received(&shared, &message);
                let Some(cluster) = shared.cluster.get() else {
                    return;
                };
                let now = shared.clock.now_ms();
                let outputs = cluster.with_node(|node| node.on_outbound(&via, &message, now));
                carry_out(&shared, outputs, Some(via));
            }
        })
    };
    while let Some(message) = queue.recv().await {
        count_sent(&shared, &message);
        if writer.write_all(&message::encode(&message)).await.is_err() {
            break;
        }
    }
    reading.abort();
}
