//! Publish/subscribe: the channel and pattern registry, and delivery with
//! Redis's output-buffer limit for subscribers.
//!
//! PUBLISH never waits for a subscriber. Each subscriber has an unbounded
//! queue drained by its own connection task, plus a count of the bytes
//! queued and not yet written to its socket. A subscriber that does not read
//! lets that count grow; past `client-output-buffer-limit pubsub` (Redis's
//! default: 32mb hard, or 8mb for 60 s) it is disconnected and its queue
//! dropped, so a slow reader costs the publisher and the other subscribers
//! nothing and the server a bounded amount of memory.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use hashbrown::HashMap;
use indexmap::IndexSet;
use parking_lot::RwLock;
use tokio::sync::mpsc;

use crate::clients::ClientInfo;
use crate::config::OutputLimit;
use crate::glob::glob_match;
use crate::resp::Reply;

/// The channel RESP2 clients subscribe to for redirected invalidations.
pub const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

/// One message on its way to a subscriber.
#[derive(Debug, Clone)]
pub enum Message {
    /// For a channel subscription.
    Channel {
        /// The channel published to.
        channel: Bytes,
        /// The payload.
        payload: Bytes,
    },
    /// For a pattern subscription.
    Pattern {
        /// The pattern that matched.
        pattern: Bytes,
        /// The channel published to.
        channel: Bytes,
        /// The payload.
        payload: Bytes,
    },
    /// For a shard channel subscription (SPUBLISH).
    Shard {
        /// The shard channel published to.
        channel: Bytes,
        /// The payload.
        payload: Bytes,
    },
    /// The shard channel's slot left this node: the subscription is gone
    /// (the connection drops it and tells the client with `sunsubscribe`).
    ShardDropped(Bytes),
    /// CLIENT TRACKING: these keys changed (`None`: everything, a flush).
    Invalidate {
        /// The keys, or none for a flush.
        keys: Option<Vec<Bytes>>,
        /// Sent to a redirect target rather than the tracking client.
        redirected: bool,
    },
    /// CLIENT TRACKING: the redirect target (this id) is gone.
    RedirectBroken(u64),
}

impl Message {
    /// What the receiving connection is sent, by its protocol: pub/sub
    /// messages always; invalidations as RESP3 `invalidate` pushes, or on
    /// RESP2 as `__redis__:invalidate` messages to a redirect target
    /// subscribed to that channel, else nothing (RESP2 has no pushes), as
    /// Redis's sendTrackingMessage decides.
    pub fn reply_for(
        &self,
        proto: crate::resp::Protocol,
        invalidate_subscribed: bool,
    ) -> Option<Reply> {
        let resp3 = proto == crate::resp::Protocol::Resp3;
        match self {
            Message::Invalidate { keys, redirected } => {
                let keys = match keys {
                    Some(keys) => Reply::Array(keys.iter().map(|k| Reply::bulk(k)).collect()),
                    None => Reply::Nil,
                };
                if resp3 {
                    Some(Reply::Push(vec![Reply::BulkStatic(b"invalidate"), keys]))
                } else if *redirected && invalidate_subscribed {
                    Some(Reply::Push(vec![
                        Reply::BulkStatic(b"message"),
                        Reply::BulkStatic(INVALIDATE_CHANNEL),
                        keys,
                    ]))
                } else {
                    None
                }
            }
            Message::ShardDropped(_) => None,
            Message::RedirectBroken(id) => resp3.then(|| {
                Reply::Push(vec![
                    Reply::BulkStatic(b"tracking-redir-broken"),
                    Reply::Int(*id as i64),
                ])
            }),
            _ => Some(self.reply()),
        }
    }

    /// The push reply a subscriber receives for a published message.
    pub fn reply(&self) -> Reply {
        match self {
            Message::Channel { channel, payload } => Reply::Push(vec![
                Reply::BulkStatic(b"message"),
                Reply::bulk(channel),
                Reply::bulk(payload),
            ]),
            Message::Pattern {
                pattern,
                channel,
                payload,
            } => Reply::Push(vec![
                Reply::BulkStatic(b"pmessage"),
                Reply::bulk(pattern),
                Reply::bulk(channel),
                Reply::bulk(payload),
            ]),
            Message::Shard { channel, payload } => Reply::Push(vec![
                Reply::BulkStatic(b"smessage"),
                Reply::bulk(channel),
                Reply::bulk(payload),
            ]),
            Message::Invalidate { .. } | Message::RedirectBroken(_) | Message::ShardDropped(_) => {
                Reply::Nothing
            }
        }
    }

    /// Bytes the message occupies in an output buffer (its RESP encoding,
    /// near enough), as the output-buffer limit counts them.
    pub fn size(&self) -> u64 {
        let parts = match self {
            Message::Channel { channel, payload } | Message::Shard { channel, payload } => {
                8 + channel.len() + payload.len()
            }
            Message::ShardDropped(channel) => 14 + channel.len(),
            Message::Pattern {
                pattern,
                channel,
                payload,
            } => 8 + pattern.len() + channel.len() + payload.len(),
            Message::Invalidate { keys, .. } => {
                30 + keys
                    .as_ref()
                    .map_or(0, |k| k.iter().map(|k| k.len() + 8).sum())
            }
            Message::RedirectBroken(_) => 40,
        };
        (parts + 40) as u64
    }
}

/// The bytes queued for one connection and not yet written to its socket,
/// against an output-buffer limit: pub/sub subscribers and MONITOR clients,
/// whose output others produce, are cut when they do not keep up.
pub struct OutputBudget {
    /// The connection; its `io.queued` counts the bytes queued or encoded
    /// but not yet written to the socket (CLIENT LIST `omem`).
    info: Arc<ClientInfo>,
    /// When `pending` first went above the soft limit (unix ms), 0 if below.
    over_soft_since_ms: AtomicU64,
    /// Which limit, for the log line (`pubsub`, `replica`).
    class: &'static str,
}

impl OutputBudget {
    /// A budget for the connection described by `info`.
    pub fn new(info: Arc<ClientInfo>, class: &'static str) -> OutputBudget {
        OutputBudget {
            info,
            over_soft_since_ms: AtomicU64::new(0),
            class,
        }
    }

    /// The connection's CLIENT ID.
    pub fn id(&self) -> u64 {
        self.info.id
    }

    /// Counts `size` more bytes queued; false (and the connection killed)
    /// when that passes the limit, or when the connection is gone already.
    pub fn admit(&self, size: u64, limit: OutputLimit, now_ms: u64) -> bool {
        if self.info.killed.load(Ordering::Relaxed) {
            return false;
        }
        let pending = self.info.io.queued.fetch_add(size, Ordering::AcqRel) + size;
        if limit.hard > 0 && pending > limit.hard {
            self.disconnect("hard");
            return false;
        }
        if limit.soft > 0 && pending > limit.soft {
            let since = self.over_soft_since_ms.load(Ordering::Acquire);
            if since == 0 {
                self.over_soft_since_ms.store(now_ms, Ordering::Release);
            } else if now_ms.saturating_sub(since) >= limit.soft_seconds * 1000 {
                self.disconnect("soft");
                return false;
            }
        }
        true
    }

    fn disconnect(&self, which: &str) {
        tracing::warn!(
            client = self.info.id,
            limit = which,
            class = self.class,
            "closing client: client-output-buffer-limit reached"
        );
        self.info.kill();
    }

    /// Records that `bytes` of queued output reached the socket.
    pub fn written(&self, bytes: u64, limit: OutputLimit) {
        let pending = self.info.io.queued.fetch_sub(bytes, Ordering::AcqRel) - bytes;
        if limit.soft == 0 || pending <= limit.soft {
            self.over_soft_since_ms.store(0, Ordering::Release);
        }
    }
}

/// The sending end of one subscribed connection.
pub struct Subscriber {
    /// What the connection has queued, against the pubsub limit.
    pub budget: OutputBudget,
    sender: mpsc::UnboundedSender<Message>,
}

impl Subscriber {
    /// The connection's CLIENT ID.
    pub fn id(&self) -> u64 {
        self.budget.id()
    }

    /// Queues `message` unless the output-buffer limit cuts the client.
    pub fn deliver(&self, message: Message, limit: OutputLimit, now_ms: u64) {
        if self.budget.admit(message.size(), limit, now_ms) {
            // A send fails only when the connection is gone.
            let _ = self.sender.send(message);
        }
    }
}

/// A connection's own side of its subscriptions.
pub struct Subscriptions {
    /// What PUBLISH calls deliver to.
    pub subscriber: Arc<Subscriber>,
    /// Messages waiting to be written, drained by the connection task.
    pub receiver: mpsc::UnboundedReceiver<Message>,
    /// Subscribed channels, in subscription order.
    pub channels: IndexSet<Vec<u8>>,
    /// Subscribed patterns, in subscription order.
    pub patterns: IndexSet<Vec<u8>>,
    /// Subscribed shard channels (SSUBSCRIBE), in subscription order.
    pub shard_channels: IndexSet<Vec<u8>>,
}

impl Subscriptions {
    /// Subscriptions for the connection described by `info`.
    pub fn new(info: Arc<ClientInfo>) -> Subscriptions {
        let (sender, receiver) = mpsc::unbounded_channel();
        Subscriptions {
            subscriber: Arc::new(Subscriber {
                budget: OutputBudget::new(info, "pubsub"),
                sender,
            }),
            receiver,
            channels: IndexSet::new(),
            patterns: IndexSet::new(),
            shard_channels: IndexSet::new(),
        }
    }

    /// Channels plus patterns: the count SUBSCRIBE and friends reply with
    /// (shard channels are counted apart, as Redis does).
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// Every subscription, shard channels included: the client is in
    /// subscribed mode while this is above zero.
    pub fn total(&self) -> usize {
        self.count() + self.shard_channels.len()
    }
}

type Subscribers = Vec<Arc<Subscriber>>;
type Registry = HashMap<Box<[u8]>, Subscribers>;

/// Every channel and pattern subscription of the server.
#[derive(Default)]
pub struct PubSub {
    channels: RwLock<Registry>,
    patterns: RwLock<Registry>,
    shard_channels: RwLock<Registry>,
    hard: AtomicU64,
    soft: AtomicU64,
    soft_seconds: AtomicU64,
}

fn add(registry: &RwLock<Registry>, name: &[u8], subscriber: &Arc<Subscriber>) {
    registry
        .write()
        .entry(name.into())
        .or_default()
        .push(subscriber.clone());
}

fn remove(registry: &RwLock<Registry>, name: &[u8], subscriber: &Arc<Subscriber>) {
    let mut registry = registry.write();
    if let Some(list) = registry.get_mut(name) {
        list.retain(|s| !Arc::ptr_eq(s, subscriber));
        if list.is_empty() {
            registry.remove(name);
        }
    }
}

impl PubSub {
    /// Installs the subscriber output-buffer limit.
    pub fn set_limit(&self, limit: OutputLimit) {
        self.hard.store(limit.hard, Ordering::Relaxed);
        self.soft.store(limit.soft, Ordering::Relaxed);
        self.soft_seconds
            .store(limit.soft_seconds, Ordering::Relaxed);
    }

    /// The subscriber output-buffer limit.
    pub fn limit(&self) -> OutputLimit {
        OutputLimit {
            hard: self.hard.load(Ordering::Relaxed),
            soft: self.soft.load(Ordering::Relaxed),
            soft_seconds: self.soft_seconds.load(Ordering::Relaxed),
        }
    }

    /// Registers a channel subscription.
    pub fn subscribe(&self, channel: &[u8], subscriber: &Arc<Subscriber>) {
        add(&self.channels, channel, subscriber);
    }

    /// Removes a channel subscription.
    pub fn unsubscribe(&self, channel: &[u8], subscriber: &Arc<Subscriber>) {
        remove(&self.channels, channel, subscriber);
    }

    /// Registers a pattern subscription.
    pub fn psubscribe(&self, pattern: &[u8], subscriber: &Arc<Subscriber>) {
        add(&self.patterns, pattern, subscriber);
    }

    /// Removes a pattern subscription.
    pub fn punsubscribe(&self, pattern: &[u8], subscriber: &Arc<Subscriber>) {
        remove(&self.patterns, pattern, subscriber);
    }

    /// Registers a shard channel subscription.
    pub fn ssubscribe(&self, channel: &[u8], subscriber: &Arc<Subscriber>) {
        add(&self.shard_channels, channel, subscriber);
    }

    /// Removes a shard channel subscription.
    pub fn sunsubscribe(&self, channel: &[u8], subscriber: &Arc<Subscriber>) {
        remove(&self.shard_channels, channel, subscriber);
    }

    /// Delivers a message to a shard channel's subscribers (patterns do
    /// not see shard channels); returns how many received it.
    pub fn spublish(&self, channel: &[u8], payload: &[u8], now_ms: u64) -> usize {
        let Some(subscribers) = self.shard_channels.read().get(channel).cloned() else {
            return 0;
        };
        let limit = self.limit();
        let channel = Bytes::copy_from_slice(channel);
        let payload = Bytes::copy_from_slice(payload);
        for subscriber in &subscribers {
            let message = Message::Shard {
                channel: channel.clone(),
                payload: payload.clone(),
            };
            subscriber.deliver(message, limit, now_ms);
        }
        subscribers.len()
    }

    /// Ends every subscription to the shard channels `in_dropped_slot`
    /// picks (their slots left this node: Redis's removeChannelsInSlot);
    /// each subscriber is told with `sunsubscribe`.
    pub fn drop_shard_channels(&self, in_dropped_slot: impl Fn(&[u8]) -> bool, now_ms: u64) {
        let dropped: Vec<(Box<[u8]>, Subscribers)> = {
            let mut registry = self.shard_channels.write();
            let names: Vec<Box<[u8]>> = registry
                .keys()
                .filter(|c| in_dropped_slot(c))
                .cloned()
                .collect();
            names
                .into_iter()
                .filter_map(|name| registry.remove_entry(&name))
                .collect()
        };
        let limit = self.limit();
        for (channel, subscribers) in dropped {
            let channel = Bytes::copy_from_slice(&channel);
            for subscriber in subscribers {
                subscriber.deliver(Message::ShardDropped(channel.clone()), limit, now_ms);
            }
        }
    }

    /// Shard channels with at least one subscriber (PUBSUB SHARDCHANNELS).
    pub fn shard_channels(&self) -> Vec<Vec<u8>> {
        self.shard_channels
            .read()
            .keys()
            .map(|c| c.to_vec())
            .collect()
    }

    /// Subscribers of a shard channel (PUBSUB SHARDNUMSUB).
    pub fn shard_numsub(&self, channel: &[u8]) -> usize {
        self.shard_channels.read().get(channel).map_or(0, Vec::len)
    }

    /// Shard channels with subscribers (INFO pubsubshard_channels).
    pub fn shard_count(&self) -> usize {
        self.shard_channels.read().len()
    }

    /// Delivers a message; returns how many subscriptions received it.
    pub fn publish(&self, channel: &[u8], payload: &[u8], now_ms: u64) -> usize {
        let limit = self.limit();
        let channel = Bytes::copy_from_slice(channel);
        let payload = Bytes::copy_from_slice(payload);
        let mut receivers = 0;
        if let Some(subscribers) = self.channels.read().get(&*channel) {
            for subscriber in subscribers {
                let message = Message::Channel {
                    channel: channel.clone(),
                    payload: payload.clone(),
                };
                subscriber.deliver(message, limit, now_ms);
                receivers += 1;
            }
        }
        for (pattern, subscribers) in self.patterns.read().iter() {
            if !glob_match(pattern, &channel, false) {
                continue;
            }
            let pattern = Bytes::copy_from_slice(pattern);
            for subscriber in subscribers {
                let message = Message::Pattern {
                    pattern: pattern.clone(),
                    channel: channel.clone(),
                    payload: payload.clone(),
                };
                subscriber.deliver(message, limit, now_ms);
                receivers += 1;
            }
        }
        receivers
    }

    /// Channels with at least one subscriber (PUBSUB CHANNELS).
    pub fn channels(&self) -> Vec<Vec<u8>> {
        self.channels.read().keys().map(|c| c.to_vec()).collect()
    }

    /// Subscribers of a channel (PUBSUB NUMSUB).
    pub fn numsub(&self, channel: &[u8]) -> usize {
        self.channels.read().get(channel).map_or(0, Vec::len)
    }

    /// Channels and patterns with subscribers (INFO pubsub_channels and
    /// pubsub_patterns).
    pub fn counts(&self) -> (usize, usize) {
        (self.channels.read().len(), self.numpat())
    }

    /// Distinct patterns subscribed to (PUBSUB NUMPAT).
    pub fn numpat(&self) -> usize {
        self.patterns.read().len()
    }
}
