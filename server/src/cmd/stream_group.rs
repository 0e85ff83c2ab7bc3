//! Consumer groups' commands, as Redis 7.0's t_stream.c answers them:
//! XGROUP (CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER, HELP) and
//! XACK, and what the group commands share (opening a stream for its
//! groups, their errors, their change-feed forms). XPENDING, XCLAIM and
//! XAUTOCLAIM, which read and move pending entries, are in
//! `stream_pending`; XREADGROUP, which delivers to a group, is with XREAD
//! in `stream_read`.
//!
//! What a group command changes goes to the append-only file and the
//! replicas as Redis propagates it: a delivery or a claim as an XCLAIM
//! that sets the pending entry whole (owner, time, count, and the group's
//! last ID), a read that needs no acknowledgement as XGROUP SETID, so that
//! a replay ends with the same groups whenever it runs. Group changes do
//! not touch WATCHed keys, as Redis signals no change to the key for them.

use super::args::{int_arg, is};
use super::error;
use super::propagate;
use super::stream::parse_id;
use super::Ctx;
use crate::event_classes::class;
use crate::resp::Reply;
use crate::store::object::{ConsumerGroup, PendingEntry, Stream, StreamId, ENTRIES_READ_UNKNOWN};
use crate::store::{KeyRef, Kind, ShardData};

/// A message naming a key or group: Redis formats them with `%s`, which
/// ends at a NUL byte.
pub(super) fn named_error(parts: &[&[u8]]) -> Reply {
    let mut message = Vec::new();
    for (at, part) in parts.iter().enumerate() {
        // Literal text at even places, names at odd ones.
        if at % 2 == 1 {
            message.extend_from_slice(&error::sanitize(part, usize::MAX));
        } else {
            message.extend_from_slice(part);
        }
    }
    Reply::error_bytes(message)
}

/// NOGROUP as XGROUP and XINFO CONSUMERS word it.
pub(super) fn no_group_for_key(key: &[u8], group: &[u8]) -> Reply {
    named_error(&[
        b"NOGROUP No such consumer group '",
        group,
        b"' for key name '",
        key,
        b"'",
    ])
}

/// Runs `change` on the stream at `key`, open for its groups to change:
/// `Ok(None)` when the key is missing, WRONGTYPE for another type. A
/// group's change is not the key's: WATCH and tracking are not told.
/// `counted` for the commands that look the key up as a read
/// (lookupKeyRead), which count in INFO's keyspace hits and misses.
pub(super) fn on_stream<R>(
    shard: &mut ShardData,
    key: KeyRef<'_>,
    now: u64,
    counted: bool,
    change: impl FnOnce(&mut Stream) -> R,
) -> Result<Option<R>, Reply> {
    if counted {
        // Counted (and a miss's event raised) as a read lookup.
        let _ = shard.lookup_read(key, now);
    }
    let Some(mut entry) = shard.get_mut(key, now) else {
        return Ok(None);
    };
    match entry.object_mut_quietly().and_then(Stream::of_mut) {
        Some(stream) => Ok(Some(change(stream))),
        None => Err(Reply::error(error::WRONGTYPE)),
    }
}

/// [`on_stream`] for a command that answers `missing` when there is no
/// key.
pub(super) fn on_existing_stream(
    shard: &mut ShardData,
    key: KeyRef<'_>,
    now: u64,
    counted: bool,
    missing: impl FnOnce() -> Reply,
    change: impl FnOnce(&mut Stream) -> Reply,
) -> Reply {
    match on_stream(shard, key, now, counted, change) {
        Ok(Some(reply)) => reply,
        Ok(None) => missing(),
        Err(reply) => reply,
    }
}

/// The change feed's XCLAIM that sets pending entry `id` of `group` as it
/// is now (streamPropagateXCLAIM): replayed, it gives the entry the same
/// owner, time and count, or drops it where the stream no longer has it.
pub(super) fn propagate_claim(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    group_name: &[u8],
    group_last_id: StreamId,
    id: StreamId,
    entry: &PendingEntry,
) {
    if !ctx.shared.store.feed().active() {
        return;
    }
    propagate::effect_owned(
        ctx,
        vec![
            b"XCLAIM".to_vec(),
            key.to_vec(),
            group_name.to_vec(),
            entry.owner.clone(),
            b"0".to_vec(),
            id.to_bytes(),
            b"TIME".to_vec(),
            entry.delivery_time.to_string().into_bytes(),
            b"RETRYCOUNT".to_vec(),
            entry.delivery_count.to_string().into_bytes(),
            b"FORCE".to_vec(),
            b"JUSTID".to_vec(),
            b"LASTID".to_vec(),
            group_last_id.to_bytes(),
        ],
    );
}

/// The change feed's `XGROUP SETID key group id ENTRIESREAD n`, for a move
/// of the group no XCLAIM carries (streamPropagateGroupID).
pub(super) fn propagate_group_id(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    group_name: &[u8],
    (last_id, entries_read): (StreamId, i64),
) {
    if !ctx.shared.store.feed().active() {
        return;
    }
    propagate::effect_owned(
        ctx,
        vec![
            b"XGROUP".to_vec(),
            b"SETID".to_vec(),
            key.to_vec(),
            group_name.to_vec(),
            last_id.to_bytes(),
            b"ENTRIESREAD".to_vec(),
            entries_read.to_string().into_bytes(),
        ],
    );
}

/// The change feed's `XGROUP CREATECONSUMER`, for a consumer no XCLAIM
/// makes (streamPropagateConsumerCreation).
pub(super) fn propagate_consumer_creation(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    group_name: &[u8],
    consumer: &[u8],
) {
    if !ctx.shared.store.feed().active() {
        return;
    }
    propagate::effect_owned(
        ctx,
        vec![
            b"XGROUP".to_vec(),
            b"CREATECONSUMER".to_vec(),
            key.to_vec(),
            group_name.to_vec(),
            consumer.to_vec(),
        ],
    );
}

/// What XGROUP's subcommands share (the head of xgroupCommand): CREATE's
/// and SETID's options, then the key and, for all but CREATE and DESTROY,
/// the group, checked in Redis's order.
struct GroupCall {
    mkstream: bool,
    entries_read: i64,
}

fn group_call(argv: &[&[u8]]) -> Result<GroupCall, Reply> {
    let create = is(argv[1], "create");
    let setid = is(argv[1], "setid");
    let mut call = GroupCall {
        mkstream: false,
        entries_read: ENTRIES_READ_UNKNOWN,
    };
    let mut i = 5;
    while i < argv.len() {
        if create && is(argv[i], "mkstream") {
            call.mkstream = true;
            i += 1;
        } else if (create || setid) && is(argv[i], "entriesread") && i + 1 < argv.len() {
            let n = int_arg(argv[i + 1])?;
            if n < 0 && n != ENTRIES_READ_UNKNOWN {
                return Err(Reply::error(
                    "ERR value for ENTRIESREAD must be positive or -1",
                ));
            }
            call.entries_read = n;
            i += 2;
        } else {
            return Err(subcommand_syntax(argv));
        }
    }
    Ok(call)
}

fn subcommand_syntax(argv: &[&[u8]]) -> Reply {
    Reply::error_bytes(error::subcommand_syntax("XGROUP", argv[1]))
}

const KEY_MUST_EXIST: &str = "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.";

fn key_must_exist() -> Reply {
    Reply::error(KEY_MUST_EXIST)
}

/// Runs `change` on the stream at argv[2] and its group argv[3], both
/// required to exist, as XGROUP SETID, CREATECONSUMER and DELCONSUMER do.
fn with_group(
    ctx: &mut Ctx<'_>,
    argv: &[&[u8]],
    change: impl FnOnce(&mut ConsumerGroup, u64) -> Reply,
) -> Reply {
    let key = ctx.key(argv[2]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    on_existing_stream(
        &mut shard,
        key,
        now,
        false,
        key_must_exist,
        |stream| match stream.group_mut(argv[3]) {
            Some(group) => change(group, now),
            None => no_group_for_key(argv[2], argv[3]),
        },
    )
}

/// XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD entries-read]
pub fn xgroup_create(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let call = match group_call(argv) {
        Ok(call) => call,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[2]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let exists = match on_stream(&mut shard, key, now, false, |_| ()) {
        Ok(found) => found.is_some(),
        Err(reply) => return reply,
    };
    if !exists && !call.mkstream {
        return Reply::error(KEY_MUST_EXIST);
    }
    if argv.len() > 8 {
        return subcommand_syntax(argv);
    }
    let id = if argv[4] == b"$" {
        None
    } else {
        match parse_id(argv[4], true, 0, false) {
            Ok((id, _)) => Some(id),
            Err(reply) => return reply,
        }
    };
    let make = || Some(Box::new(Stream::empty()));
    let Some(mut entry) = shard.get_mut_or_create(key, now, make) else {
        return Reply::error(KEY_MUST_EXIST);
    };
    // A stream made here is a new key (WATCH saw it made); a group added
    // to one that was there is not a change of the key.
    let Some(stream) = entry.object_mut_quietly().and_then(Stream::of_mut) else {
        return Reply::error(error::WRONGTYPE);
    };
    let last_id = id.unwrap_or(stream.last_id());
    let created = stream.create_group(argv[3], ConsumerGroup::new(last_id, call.entries_read));
    drop(entry);
    if !created {
        return Reply::error("BUSYGROUP Consumer Group name already exists");
    }
    ctx.notify(class::STREAM, "xgroup-create", argv[2]);
    Reply::Ok
}

/// XGROUP SETID key group id|$ [ENTRIESREAD entries-read]
pub fn xgroup_setid(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let call = match group_call(argv) {
        Ok(call) => call,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[2]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let reply = on_existing_stream(&mut shard, key, now, false, key_must_exist, |stream| {
        let last_id = stream.last_id();
        let Some(group) = stream.group_mut(argv[3]) else {
            return no_group_for_key(argv[2], argv[3]);
        };
        if argv.len() != 5 && argv.len() != 7 {
            return subcommand_syntax(argv);
        }
        // SETID takes `-` and `+` (streamParseIDOrReply), CREATE does not.
        let id = if argv[4] == b"$" {
            last_id
        } else {
            match parse_id(argv[4], false, 0, false) {
                Ok((id, _)) => id,
                Err(reply) => return reply,
            }
        };
        group.last_id = id;
        group.entries_read = call.entries_read;
        Reply::Ok
    });
    if matches!(reply, Reply::Ok) {
        ctx.notify(class::STREAM, "xgroup-setid", argv[2]);
    }
    reply
}

/// XGROUP DESTROY key group: 1 if the group was there. Clients blocked
/// reading for it get NOGROUP (the write marks the key ready).
pub fn xgroup_destroy(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[2]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let reply = on_existing_stream(&mut shard, key, now, false, key_must_exist, |stream| {
        Reply::Int(i64::from(stream.destroy_group(argv[3])))
    });
    if matches!(reply, Reply::Int(1)) {
        ctx.notify(class::STREAM, "xgroup-destroy", argv[2]);
    }
    reply
}

/// XGROUP CREATECONSUMER key group consumer: 1 if it was made.
pub fn xgroup_createconsumer(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let reply = with_group(ctx, argv, |group, now| {
        Reply::Int(i64::from(group.add_consumer(argv[4], now)))
    });
    if matches!(reply, Reply::Int(1)) {
        ctx.notify(class::STREAM, "xgroup-createconsumer", argv[2]);
    }
    reply
}

/// XGROUP DELCONSUMER key group consumer: the pending entries it had.
pub fn xgroup_delconsumer(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let mut deleted = false;
    let reply = with_group(ctx, argv, |group, _| match group.delete_consumer(argv[4]) {
        Some(pending) => {
            deleted = true;
            Reply::Int(pending as i64)
        }
        None => Reply::Int(0),
    });
    if deleted {
        ctx.notify(class::STREAM, "xgroup-delconsumer", argv[2]);
        propagate::effect(ctx, argv);
    }
    reply
}

/// XGROUP HELP
pub fn xgroup_help(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    super::server::help_reply(
        "XGROUP",
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    )
}

/// XACK key group id [id ...]: how many of the entries were pending and
/// are acknowledged. Every ID is checked before any is acknowledged.
pub fn xack(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    on_existing_stream(
        &mut shard,
        key,
        now,
        true,
        || Reply::Int(0),
        |stream| {
            let Some(group) = stream.group_mut(argv[2]) else {
                return Reply::Int(0);
            };
            let mut ids = Vec::with_capacity(argv.len() - 3);
            for arg in &argv[3..] {
                match parse_id(arg, true, 0, false) {
                    Ok((id, _)) => ids.push(id),
                    Err(reply) => return reply,
                }
            }
            let acknowledged = ids
                .into_iter()
                .filter(|id| group.remove_pending(*id).is_some())
                .count();
            Reply::Int(acknowledged as i64)
        },
    )
}
