//! XREAD and XREADGROUP, as Redis 7.0's xreadCommand: the entries after
//! an ID from one or more streams, and with BLOCK a wait for the next
//! ones; for a consumer group, the entries no consumer of the group has
//! had (`>`), or the reading consumer's own pending ones (an ID).
//!
//! A reader that finds nothing new waits on its keys as the blocking pops
//! do (`cmd::blocking`), registered as `XREAD COUNT n STREAMS keys... ids...`
//! with `$` already read as each stream's last ID and COUNT as Redis's
//! default for a blocked read (1,000) when none was given: an XADD that
//! makes a key ready runs that command again for it, narrowed to the key,
//! as Redis serves a blocked reader from the key that became ready. A
//! blocked XREADGROUP waits as `XREADGROUP GROUP g c COUNT n [NOACK]
//! STREAMS keys... >...`; run again for a key that no longer holds a
//! stream, or whose group is gone, it answers Redis's errors for that.

use super::args::{int_arg, is};
use super::blocking::{or_block, Filled};
use super::error;
use super::stream::{entry_reply, parse_id, range_reply, view_reply};
use super::stream_group::{
    named_error, on_stream, propagate_claim, propagate_consumer_creation, propagate_group_id,
};
use super::Ctx;
use crate::event_classes::class;
use crate::resp::{Protocol, Reply};
use crate::store::object::{PendingEntry, Stream, StreamId};
use crate::store::{KeyRef, Kind, ShardData, ValueRef};

/// What a blocked read takes when it gave no COUNT (XREAD_BLOCKED_DEFAULT_COUNT).
const BLOCKED_DEFAULT_COUNT: i64 = 1000;

/// XREADGROUP's group, consumer and NOACK.
struct GroupRead<'a> {
    name: &'a [u8],
    consumer: &'a [u8],
    noack: bool,
}

/// XREAD's and XREADGROUP's options, and where their keys start.
struct Call<'a> {
    /// GROUP (XREADGROUP).
    group: Option<GroupRead<'a>>,
    /// BLOCK's milliseconds (0: forever).
    block: Option<u64>,
    /// COUNT (0: all).
    count: i64,
    /// The index of the first key.
    streams: usize,
    /// How many keys (and IDs).
    keys: usize,
}

fn parse<'a>(ctx: &Ctx<'_>, argv: &[&'a [u8]], xreadgroup: bool) -> Result<Call<'a>, Reply> {
    let mut block = None;
    let mut count = 0;
    let mut group = None;
    let mut noack = false;
    let mut i = 1;
    while i < argv.len() {
        let more = argv.len() - i - 1;
        let option = argv[i];
        if is(option, "block") && more > 0 {
            if ctx.client.in_script {
                return Err(Reply::error_bytes(
                    [
                        b"ERR ",
                        argv[0],
                        b" command is not allowed with BLOCK option from scripts",
                    ]
                    .concat(),
                ));
            }
            i += 1;
            block = Some(timeout_ms(argv[i])?);
        } else if is(option, "count") && more > 0 {
            i += 1;
            count = int_arg(argv[i])?.max(0);
        } else if is(option, "streams") && more > 0 {
            let rest = argv.len() - i - 1;
            if rest % 2 != 0 {
                return Err(Reply::error(
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            if xreadgroup && group.is_none() {
                return Err(Reply::error("ERR Missing GROUP option for XREADGROUP"));
            }
            return Ok(Call {
                group: group.map(|(name, consumer)| GroupRead {
                    name,
                    consumer,
                    noack,
                }),
                block,
                count,
                streams: i + 1,
                keys: rest / 2,
            });
        } else if is(option, "group") && more >= 2 {
            if !xreadgroup {
                return Err(Reply::error(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            group = Some((argv[i + 1], argv[i + 2]));
            i += 2;
        } else if is(option, "noack") {
            if !xreadgroup {
                return Err(Reply::error(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            noack = true;
        } else {
            return Err(Reply::error(error::SYNTAX));
        }
        i += 1;
    }
    Err(Reply::error(error::SYNTAX))
}

/// BLOCK's timeout in milliseconds (getTimeoutFromObjectOrReply): an
/// integer, not negative.
fn timeout_ms(arg: &[u8]) -> Result<u64, Reply> {
    match crate::number::parse_i64(arg) {
        None => Err(Reply::error(
            "ERR timeout is not an integer or out of range",
        )),
        Some(ms) if ms < 0 => Err(Reply::error("ERR timeout is negative")),
        Some(ms) => Ok(ms as u64),
    }
}

/// The stream at `key`, as lookupKeyRead finds it and checkType judges it.
fn stream_at<'s>(
    shard: &'s mut ShardData,
    key: KeyRef<'_>,
    now: u64,
) -> Result<Option<&'s Stream>, Reply> {
    match shard.lookup_read(key, now).map(|entry| entry.value()) {
        None => Ok(None),
        Some(ValueRef::Obj(object)) => Stream::of(object)
            .map(Some)
            .ok_or_else(|| Reply::error(error::WRONGTYPE)),
        Some(_) => Err(Reply::error(error::WRONGTYPE)),
    }
}

/// XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...]
pub fn xread(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let call = match parse(ctx, argv, false) {
        Ok(call) => call,
        Err(reply) => return reply,
    };
    let keys = &argv[call.streams..call.streams + call.keys];
    let id_args = &argv[call.streams + call.keys..];
    // Each key's type, then its ID, in turn; `$` is the stream's last ID
    // now (0-0 for a missing key).
    let refs: Vec<KeyRef<'_>> = keys.iter().map(|k| ctx.key(k)).collect();
    let now = ctx.now_ms;
    let mut ids = Vec::with_capacity(call.keys);
    {
        let mut locked = ctx.lock_keys(&refs);
        for (key, arg) in refs.iter().zip(id_args) {
            let last = match stream_at(locked.shard(*key), *key, now) {
                Ok(stream) => stream.map_or(StreamId::MIN, Stream::last_id),
                Err(reply) => return reply,
            };
            let id = match *arg {
                b"$" => last,
                b">" => {
                    return Reply::error(
                        "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                    )
                }
                arg => match parse_id(arg, true, 0, false) {
                    Ok((id, _)) => id,
                    Err(reply) => return reply,
                },
            };
            ids.push(id);
        }
    }
    let Some(block_ms) = call.block else {
        return read(ctx, keys, &ids, call.count).unwrap_or(Reply::NilArray);
    };
    // What a waiter runs again: `$` resolved, COUNT given.
    let count = if call.count == 0 {
        BLOCKED_DEFAULT_COUNT
    } else {
        call.count
    };
    let mut waiting: Vec<Vec<u8>> = vec![
        argv[0].to_vec(),
        b"COUNT".to_vec(),
        count.to_string().into_bytes(),
        b"STREAMS".to_vec(),
    ];
    let mut unique: Vec<(&[u8], StreamId)> = Vec::new();
    for (key, id) in keys.iter().zip(&ids) {
        // A key named twice waits for the first of its IDs, as Redis
        // registers it once.
        if !unique.iter().any(|(k, _)| k == key) {
            unique.push((key, *id));
        }
    }
    waiting.extend(unique.iter().map(|(key, _)| key.to_vec()));
    waiting.extend(unique.iter().map(|(_, id)| id.to_bytes()));
    let waiting: Vec<&[u8]> = waiting.iter().map(Vec::as_slice).collect();
    let wait_keys: Vec<&[u8]> = unique.iter().map(|(key, _)| *key).collect();
    let after: Vec<StreamId> = unique.iter().map(|(_, id)| *id).collect();
    // The same test as `read`'s: a live entry past the ID.
    let has_new: Filled<'_> = &|shard, key, at, now| {
        matches!(
            stream_at(shard, key, now),
            Ok(Some(stream)) if !stream.is_empty() && stream.edge_id(false, true) > after[at]
        )
    };
    let count = call.count;
    or_block(
        ctx,
        &waiting,
        &wait_keys,
        block_ms,
        Reply::NilArray,
        has_new,
        |ctx| read(ctx, &wait_keys, &after, count).unwrap_or(Reply::NilArray),
    )
}

/// The entries after each key's ID, for the keys that have any: `None`
/// when none has.
fn read(ctx: &mut Ctx<'_>, keys: &[&[u8]], ids: &[StreamId], count: i64) -> Option<Reply> {
    let refs: Vec<KeyRef<'_>> = keys.iter().map(|k| ctx.key(k)).collect();
    let now = ctx.now_ms;
    let proto = ctx.client.proto;
    let mut found = Vec::new();
    {
        let mut locked = ctx.lock_keys(&refs);
        for ((key, name), after) in refs.iter().zip(keys).zip(ids) {
            let shard = locked.shard(*key);
            let Ok(Some(stream)) = stream_at(shard, *key, now) else {
                continue;
            };
            if stream.is_empty() || stream.edge_id(false, true) <= *after {
                continue;
            }
            // The ID after `after`; past the last ID there is nothing to read.
            let Some(start) = after.next() else {
                continue;
            };
            let entries = range_reply(stream, start, StreamId::MAX, false, count as usize);
            found.push((name.to_vec(), entries));
        }
    }
    if found.is_empty() {
        return None;
    }
    Some(by_key(proto, found))
}

/// Each key with what was read from it: a map in RESP3, an array of
/// pairs in RESP2.
fn by_key(proto: Protocol, found: Vec<(Vec<u8>, Reply)>) -> Reply {
    let found = found
        .into_iter()
        .map(|(key, entries)| (Reply::Bulk(key), entries));
    match proto {
        Protocol::Resp3 => Reply::Map(found.collect()),
        Protocol::Resp2 => Reply::Array(
            found
                .map(|(key, entries)| Reply::Array(vec![key, entries]))
                .collect(),
        ),
    }
}

/// XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds]
/// [NOACK] STREAMS key [key ...] id [id ...]
pub fn xreadgroup(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let call = match parse(ctx, argv, true) {
        Ok(call) => call,
        Err(reply) => return reply,
    };
    let Some(group) = call.group else {
        return Reply::error(error::SYNTAX);
    };
    let keys = &argv[call.streams..call.streams + call.keys];
    let id_args = &argv[call.streams + call.keys..];
    let Some(block_ms) = call.block else {
        return read_group(ctx, &group, keys, id_args, call.count);
    };
    // Only `>` can find nothing (a consumer's history is always answered,
    // if empty), so a waiter waits with `>` for each of its keys.
    let count = if call.count == 0 {
        BLOCKED_DEFAULT_COUNT
    } else {
        call.count
    };
    let mut unique: Vec<&[u8]> = Vec::new();
    for key in keys {
        if !unique.contains(key) {
            unique.push(key);
        }
    }
    let mut waiting: Vec<&[u8]> = vec![argv[0], b"GROUP", group.name, group.consumer];
    let count_arg = count.to_string().into_bytes();
    waiting.extend([b"COUNT".as_slice(), &count_arg]);
    if group.noack {
        waiting.push(b"NOACK");
    }
    waiting.push(b"STREAMS");
    waiting.extend(&unique);
    waiting.extend(unique.iter().map(|_| b">".as_slice()));
    // Something new for the group, or a key or group gone (then reading
    // again answers the error).
    let has_new: Filled<'_> = &|shard, key, _, now| match stream_at(shard, key, now) {
        Ok(Some(stream)) => stream
            .group(group.name)
            .is_none_or(|g| !stream.is_empty() && stream.edge_id(false, true) > g.last_id),
        _ => true,
    };
    let count = call.count;
    or_block(
        ctx,
        &waiting,
        &unique,
        block_ms,
        Reply::NilArray,
        has_new,
        |ctx| read_group(ctx, &group, keys, id_args, count),
    )
}

/// XREADGROUP's reading (without BLOCK): each key checked (its type, its
/// group, its ID) in turn, then each served: with `>` the entries after
/// the group's last one, delivered to the consumer; with an ID the
/// consumer's pending entries after it. NilArray when no key had anything.
fn read_group(
    ctx: &mut Ctx<'_>,
    group: &GroupRead<'_>,
    keys: &[&[u8]],
    id_args: &[&[u8]],
    count: i64,
) -> Reply {
    let refs: Vec<KeyRef<'_>> = keys.iter().map(|k| ctx.key(k)).collect();
    let now = ctx.now_ms;
    let proto = ctx.client.proto;
    let rerun = ctx.client.serving_waiter;
    let logging = ctx.shared.store.feed().active();
    let mut locked = ctx.lock_keys(&refs);
    // `None` for `>`.
    let mut ids: Vec<Option<StreamId>> = Vec::with_capacity(keys.len());
    for ((key, name), arg) in refs.iter().zip(keys).zip(id_args) {
        let stream = match stream_at(locked.shard(*key), *key, now) {
            Ok(Some(stream)) => stream,
            // Run again for a blocked client: its key is gone, or is no
            // longer a stream.
            Ok(None) | Err(_) if rerun => {
                return Reply::error("UNBLOCKED the stream key no longer exists")
            }
            Ok(None) => return no_group_to_read(name, group.name),
            Err(reply) => return reply,
        };
        if stream.group(group.name).is_none() {
            if rerun {
                return Reply::error(
                    "NOGROUP the consumer group this client was blocked on no longer exists",
                );
            }
            return no_group_to_read(name, group.name);
        }
        ids.push(match *arg {
            b"$" => {
                return Reply::error(
                    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.",
                )
            }
            b">" => None,
            arg => match parse_id(arg, true, 0, false) {
                Ok((id, _)) => Some(id),
                Err(reply) => return reply,
            },
        });
    }
    let mut found = Vec::new();
    let mut events = Vec::new();
    let mut changes = Vec::new();
    for ((key, name), id) in refs.iter().zip(keys).zip(ids) {
        let shard = locked.shard(*key);
        // What the key has for the consumer: `None` when nothing.
        let served = on_stream(shard, *key, now, true, |stream| {
            // `>` (the largest ID, as Redis marks it) reads new entries,
            // and only when there are some past the group's last one.
            let history = id.filter(|id| *id != StreamId::MAX);
            let last = stream.group(group.name)?.last_id;
            let after = match history {
                Some(id) => id,
                None if !stream.is_empty() && stream.edge_id(false, true) > last => last,
                None => return None,
            };
            if stream
                .group_mut(group.name)?
                .touch_consumer(group.consumer, now)
            {
                events.push(name.to_vec());
                if group.noack {
                    changes.push(Change::Consumer(name.to_vec()));
                }
            }
            let start = after.next().unwrap_or(StreamId::MAX);
            Some(match history {
                Some(_) => history_reply(stream, group, start, count, now),
                None => deliver(
                    stream,
                    group,
                    name,
                    start,
                    count,
                    now,
                    logging.then_some(&mut changes),
                ),
            })
        });
        let Ok(Some(Some(entries))) = served else {
            continue;
        };
        found.push((name.to_vec(), entries));
    }
    drop(locked);
    for key in &events {
        ctx.notify(class::STREAM, "xgroup-createconsumer", key);
    }
    for change in changes {
        match change {
            Change::Consumer(key) => {
                propagate_consumer_creation(ctx, &key, group.name, group.consumer)
            }
            Change::Claim(key, last_id, id, entry) => {
                propagate_claim(ctx, &key, group.name, last_id, id, &entry)
            }
            Change::GroupId(key, position) => propagate_group_id(ctx, &key, group.name, position),
        }
    }
    if found.is_empty() {
        return Reply::NilArray;
    }
    by_key(proto, found)
}

/// NOGROUP as XREADGROUP words it.
fn no_group_to_read(key: &[u8], group: &[u8]) -> Reply {
    named_error(&[
        b"NOGROUP No such key '",
        key,
        b"' or consumer group '",
        group,
        b"' in XREADGROUP with GROUP option",
    ])
}

/// What a group read puts in the change feed, in order.
enum Change {
    /// `XGROUP CREATECONSUMER` (a consumer a NOACK read made).
    Consumer(Vec<u8>),
    /// A delivery, as XCLAIM: the key, the group's last ID then, the
    /// entry's ID and its pending entry.
    Claim(Vec<u8>, StreamId, StreamId, PendingEntry),
    /// `XGROUP SETID` (a NOACK read moved the group).
    GroupId(Vec<u8>, (StreamId, i64)),
}

/// The entries from `start` on (at most `count`, 0: all), delivered to
/// the reading consumer (streamReplyWithRange with a group): the group
/// moves past each, and each becomes the consumer's pending entry unless
/// NOACK. What the change feed gets goes to `log` (none while no file or
/// replica takes it).
fn deliver(
    stream: &mut Stream,
    group: &GroupRead<'_>,
    key: &[u8],
    start: StreamId,
    count: i64,
    now: u64,
    mut log: Option<&mut Vec<Change>>,
) -> Reply {
    let mut ids = Vec::new();
    let mut replies = Vec::new();
    stream.visit_range(start, StreamId::MAX, false, count as usize, |entry| {
        ids.push(entry.id());
        replies.push(view_reply(entry));
    });
    let mut moved = false;
    for id in ids {
        moved |= stream.advance_group(group.name, id);
        if group.noack {
            continue;
        }
        let Some(consumers) = stream.group_mut(group.name) else {
            continue;
        };
        consumers.deliver(id, group.consumer, now);
        if let (Some(log), Some(pending)) = (log.as_mut(), consumers.pending.get(&id)) {
            log.push(Change::Claim(
                key.to_vec(),
                consumers.last_id,
                id,
                pending.clone(),
            ));
        }
    }
    if group.noack && moved {
        if let (Some(log), Some(g)) = (log, stream.group(group.name)) {
            log.push(Change::GroupId(key.to_vec(), (g.last_id, g.entries_read)));
        }
    }
    Reply::Array(replies)
}

/// The reading consumer's pending entries from `start` on (at most
/// `count`, 0: all), each counted as delivered again; an entry no longer
/// in the stream is answered with its ID and a null.
fn history_reply(
    stream: &mut Stream,
    group: &GroupRead<'_>,
    start: StreamId,
    count: i64,
    now: u64,
) -> Reply {
    let limit = if count == 0 {
        usize::MAX
    } else {
        count as usize
    };
    let owned: Vec<StreamId> = stream
        .group(group.name)
        .and_then(|g| g.consumers.get(group.consumer))
        .map(|c| c.pending.range(start..).take(limit).copied().collect())
        .unwrap_or_default();
    let found = stream.entries_at(&owned);
    let mut replies = Vec::with_capacity(owned.len());
    let mut delivered = Vec::with_capacity(owned.len());
    for (id, entry) in owned.into_iter().zip(found) {
        match entry {
            Some(entry) => {
                delivered.push(id);
                replies.push(entry_reply(entry));
            }
            None => replies.push(Reply::Array(vec![
                Reply::Bulk(id.to_bytes()),
                Reply::NilArray,
            ])),
        }
    }
    if let Some(group) = stream.group_mut(group.name) {
        for id in delivered {
            if let Some(pending) = group.pending.get_mut(&id) {
                pending.delivery_time = now;
                pending.delivery_count += 1;
            }
        }
    }
    Reply::Array(replies)
}
