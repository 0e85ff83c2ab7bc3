//! Pub/sub commands: SUBSCRIBE and friends, PUBLISH, PUBSUB introspection.
//! Delivery itself lives in `crate::pubsub`.

use super::args::glob_match;
use super::error;
use super::Ctx;
use crate::pubsub::Subscriptions;
use crate::resp::{Protocol, Reply};

/// Commands a RESP2 client may send while subscribed.
const ALLOWED_WHILE_SUBSCRIBED: &[&str] = &[
    "subscribe",
    "psubscribe",
    "ssubscribe",
    "unsubscribe",
    "punsubscribe",
    "sunsubscribe",
    "ping",
    "quit",
    "reset",
];

/// The error a RESP2 subscriber gets for any other command, as Redis 7.0
/// words it; `None` when the command may run.
pub fn subscribed_refusal(ctx: &Ctx<'_>, name: &str) -> Option<Reply> {
    if ctx.client.proto != Protocol::Resp2 || !in_subscribe_mode(ctx) || ctx.held.is_some() {
        return None;
    }
    let base = name.split('|').next().unwrap_or(name);
    if ALLOWED_WHILE_SUBSCRIBED.contains(&base) {
        return None;
    }
    Some(Reply::error(format!(
        "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
    )))
}

/// SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH: their channels are routed as keys.
pub fn is_shard_channel_command(name: &str) -> bool {
    matches!(name, "ssubscribe" | "sunsubscribe" | "spublish")
}

/// True when the client has at least one subscription.
pub fn in_subscribe_mode(ctx: &Ctx<'_>) -> bool {
    ctx.client.pubsub.as_ref().is_some_and(|s| s.total() > 0)
}

/// The connection's queue for pushed messages, made on first use (a
/// subscription, or CLIENT TRACKING's invalidations) and made reachable
/// for invalidations redirected to this client.
pub fn subscriptions<'c>(ctx: &'c mut Ctx<'_>) -> &'c mut Subscriptions {
    let shared = ctx.shared;
    let info = ctx.client.info.clone();
    ctx.client.pubsub.get_or_insert_with(|| {
        let subs = Subscriptions::new(info);
        shared
            .tracking
            .register_outbox(subs.subscriber.id(), subs.subscriber.clone());
        subs
    })
}

fn confirmation(kind: &'static [u8], name: Option<&[u8]>, count: usize) -> Reply {
    Reply::Push(vec![
        Reply::BulkStatic(kind),
        name.map_or(Reply::Nil, Reply::bulk),
        Reply::Int(count as i64),
    ])
}

/// Which kind of subscription a command is about.
#[derive(Clone, Copy)]
enum Target {
    Channels,
    Patterns,
    ShardChannels,
}

impl Target {
    /// The client's subscriptions of this kind.
    fn names(self, subs: &mut Subscriptions) -> &mut indexmap::IndexSet<Vec<u8>> {
        match self {
            Target::Channels => &mut subs.channels,
            Target::Patterns => &mut subs.patterns,
            Target::ShardChannels => &mut subs.shard_channels,
        }
    }

    /// The count confirmations carry: shard channels are counted apart
    /// from channels and patterns, as Redis does.
    fn count(self, subs: &Subscriptions) -> usize {
        match self {
            Target::Channels | Target::Patterns => subs.count(),
            Target::ShardChannels => subs.shard_channels.len(),
        }
    }

    /// The confirmation words: (subscribe, unsubscribe).
    fn words(self) -> (&'static [u8], &'static [u8]) {
        match self {
            Target::Channels => (b"subscribe", b"unsubscribe"),
            Target::Patterns => (b"psubscribe", b"punsubscribe"),
            Target::ShardChannels => (b"ssubscribe", b"sunsubscribe"),
        }
    }

    fn register(self, pubsub: &crate::pubsub::PubSub, name: &[u8], subs: &Subscriptions) {
        match self {
            Target::Channels => pubsub.subscribe(name, &subs.subscriber),
            Target::Patterns => pubsub.psubscribe(name, &subs.subscriber),
            Target::ShardChannels => pubsub.ssubscribe(name, &subs.subscriber),
        }
    }

    fn unregister(self, pubsub: &crate::pubsub::PubSub, name: &[u8], subs: &Subscriptions) {
        match self {
            Target::Channels => pubsub.unsubscribe(name, &subs.subscriber),
            Target::Patterns => pubsub.punsubscribe(name, &subs.subscriber),
            Target::ShardChannels => pubsub.sunsubscribe(name, &subs.subscriber),
        }
    }
}

/// SUBSCRIBE / PSUBSCRIBE: one confirmation per name.
fn subscribe_to(ctx: &mut Ctx<'_>, argv: &[&[u8]], target: Target) -> Reply {
    let shared = ctx.shared;
    let subs = subscriptions(ctx);
    let mut replies = Vec::with_capacity(argv.len() - 1);
    for name in &argv[1..] {
        if target.names(subs).insert(name.to_vec()) {
            target.register(&shared.pubsub, name, subs);
        }
        replies.push(confirmation(
            target.words().0,
            Some(name),
            target.count(subs),
        ));
    }
    Reply::Multi(replies)
}

/// UNSUBSCRIBE / PUNSUBSCRIBE: the names given, or every one of the kind;
/// with none at all, one confirmation naming nothing.
fn unsubscribe_from(ctx: &mut Ctx<'_>, argv: &[&[u8]], target: Target) -> Reply {
    let shared = ctx.shared;
    let subs = subscriptions(ctx);
    let names: Vec<Vec<u8>> = if argv.len() > 1 {
        argv[1..].iter().map(|c| c.to_vec()).collect()
    } else {
        target.names(subs).iter().cloned().collect()
    };
    let word = target.words().1;
    if names.is_empty() {
        return confirmation(word, None, target.count(subs));
    }
    let mut replies = Vec::with_capacity(names.len());
    for name in &names {
        if target.names(subs).shift_remove(name) {
            target.unregister(&shared.pubsub, name, subs);
        }
        replies.push(confirmation(word, Some(name), target.count(subs)));
    }
    Reply::Multi(replies)
}

/// SUBSCRIBE channel [channel ...]
pub fn subscribe(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    subscribe_to(ctx, argv, Target::Channels)
}

/// PSUBSCRIBE pattern [pattern ...]
pub fn psubscribe(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    subscribe_to(ctx, argv, Target::Patterns)
}

/// UNSUBSCRIBE [channel ...]
pub fn unsubscribe(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    unsubscribe_from(ctx, argv, Target::Channels)
}

/// PUNSUBSCRIBE [pattern ...]
pub fn punsubscribe(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    unsubscribe_from(ctx, argv, Target::Patterns)
}

/// SSUBSCRIBE shardchannel [shardchannel ...]: routed by the channels'
/// slot in cluster mode, like keys.
pub fn ssubscribe(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if ctx.held.is_some() {
        // Inside EXEC: unlike SUBSCRIBE, Redis 7.0 refuses it there.
        return Reply::error("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client");
    }
    subscribe_to(ctx, argv, Target::ShardChannels)
}

/// SUNSUBSCRIBE [shardchannel ...]
pub fn sunsubscribe(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    unsubscribe_from(ctx, argv, Target::ShardChannels)
}

/// Drops every subscription of the client (RESET, disconnect).
pub fn unsubscribe_all(ctx: &mut Ctx<'_>) {
    let Some(subs) = ctx.client.pubsub.as_mut() else {
        return;
    };
    for channel in subs.channels.drain(..) {
        ctx.shared.pubsub.unsubscribe(&channel, &subs.subscriber);
    }
    for pattern in subs.patterns.drain(..) {
        ctx.shared.pubsub.punsubscribe(&pattern, &subs.subscriber);
    }
    for channel in subs.shard_channels.drain(..) {
        ctx.shared.pubsub.sunsubscribe(&channel, &subs.subscriber);
    }
}

/// PUBLISH channel message: delivered here, and in cluster mode relayed
/// to every other node over the bus. The count is of this node's
/// receivers, as in Redis.
pub fn publish(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let receivers = ctx.shared.pubsub.publish(argv[1], argv[2], ctx.now_ms);
    super::cluster::relay_publish(ctx, argv[1], argv[2], false);
    Reply::Int(receivers as i64)
}

/// SPUBLISH shardchannel message: routed by the channel's slot; only
/// shard channel subscribers receive it.
pub fn spublish(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let receivers = ctx.shared.pubsub.spublish(argv[1], argv[2], ctx.now_ms);
    super::cluster::relay_publish(ctx, argv[1], argv[2], true);
    Reply::Int(receivers as i64)
}

/// The channels of one registry matching PUBSUB CHANNELS' (or
/// SHARDCHANNELS') optional pattern (Redis's channelList).
fn channel_list(argv: &[&[u8]], channels: Vec<Vec<u8>>) -> Reply {
    if argv.len() > 3 {
        return Reply::error_bytes(error::subcommand_syntax("PUBSUB", argv[1]));
    }
    let pattern = argv.get(2);
    Reply::Array(
        channels
            .into_iter()
            .filter(|c| pattern.is_none_or(|p| glob_match(p, c, false)))
            .map(Reply::Bulk)
            .collect(),
    )
}

/// Each channel named after the subcommand with its subscriber count.
fn subscriber_counts(argv: &[&[u8]], count: impl Fn(&[u8]) -> usize) -> Reply {
    Reply::Array(
        argv[2..]
            .iter()
            .flat_map(|c| [Reply::bulk(c), Reply::Int(count(c) as i64)])
            .collect(),
    )
}

/// PUBSUB CHANNELS [pattern]
pub fn pubsub_channels(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    channel_list(argv, ctx.shared.pubsub.channels())
}

/// PUBSUB SHARDCHANNELS [pattern]
pub fn pubsub_shardchannels(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    channel_list(argv, ctx.shared.pubsub.shard_channels())
}

/// PUBSUB NUMSUB [channel ...]
pub fn pubsub_numsub(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    subscriber_counts(argv, |c| ctx.shared.pubsub.numsub(c))
}

/// PUBSUB SHARDNUMSUB [shardchannel ...]
pub fn pubsub_shardnumsub(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    subscriber_counts(argv, |c| ctx.shared.pubsub.shard_numsub(c))
}

/// PUBSUB NUMPAT
pub fn pubsub_numpat(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    Reply::Int(ctx.shared.pubsub.numpat() as i64)
}

/// PUBSUB HELP
pub fn pubsub_help(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    super::server::help_reply(
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    )
}
