//! XREAD, as Redis 7.0's xreadCommand: the entries after an ID from one
//! or more streams, and with BLOCK a wait for the next ones.
//!
//! A reader that finds nothing new waits on its keys as the blocking pops
//! do (`cmd::blocking`), registered as `XREAD COUNT n STREAMS keys... ids...`
//! with `$` already read as each stream's last ID and COUNT as Redis's
//! default for a blocked read (1,000) when none was given: an XADD that
//! makes a key ready runs that command again for it, narrowed to the key,
//! as Redis serves a blocked reader from the key that became ready.

use super::args::{int_arg, is};
use super::blocking::{or_block, Filled};
use super::error;
use super::stream::{entries_reply, parse_id};
use super::Ctx;
use crate::resp::{Protocol, Reply};
use crate::store::object::{Stream, StreamId};
use crate::store::{KeyRef, Kind, ShardData, ValueRef};

/// What a blocked read takes when it gave no COUNT (XREAD_BLOCKED_DEFAULT_COUNT).
const BLOCKED_DEFAULT_COUNT: i64 = 1000;

/// XREAD's options, and where its keys start.
struct Call {
    /// BLOCK's milliseconds (0: forever).
    block: Option<u64>,
    /// COUNT (0: all).
    count: i64,
    /// The index of the first key.
    streams: usize,
    /// How many keys (and IDs).
    keys: usize,
}

fn parse(ctx: &Ctx<'_>, argv: &[&[u8]]) -> Result<Call, Reply> {
    let mut block = None;
    let mut count = 0;
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
            return Ok(Call {
                block,
                count,
                streams: i + 1,
                keys: rest / 2,
            });
        } else if is(option, "group") && more >= 2 {
            return Err(Reply::error(
                "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
            ));
        } else if is(option, "noack") {
            return Err(Reply::error(
                "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
            ));
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
    let call = match parse(ctx, argv) {
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
            let entries = stream.range(start, StreamId::MAX, false, count as usize);
            found.push((name.to_vec(), entries));
        }
    }
    if found.is_empty() {
        return None;
    }
    let found = found
        .into_iter()
        .map(|(key, entries)| (Reply::Bulk(key), entries_reply(entries)));
    Some(match proto {
        Protocol::Resp3 => Reply::Map(found.collect()),
        Protocol::Resp2 => Reply::Array(
            found
                .map(|(key, entries)| Reply::Array(vec![key, entries]))
                .collect(),
        ),
    })
}
