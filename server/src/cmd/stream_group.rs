//! Consumer groups' commands, as Redis 7.0's t_stream.c answers them:
//! XGROUP (CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER, HELP),
//! XACK, XPENDING, XCLAIM and XAUTOCLAIM. XREADGROUP, which delivers to a
//! group, is with XREAD in `stream_read`.
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
use super::stream::{interval_id, parse_id, view_reply};
use super::Ctx;
use crate::event_classes::class;
use crate::resp::Reply;
use crate::store::object::{ConsumerGroup, PendingEntry, Stream, StreamId, ENTRIES_READ_UNKNOWN};
use crate::store::{EntryMut, KeyRef, Kind, ShardData, ValueRef};

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

/// NOGROUP as XPENDING, XCLAIM and XAUTOCLAIM word it.
fn no_key_or_group(key: &[u8], group: &[u8]) -> Reply {
    named_error(&[
        b"NOGROUP No such key '",
        key,
        b"' or consumer group '",
        group,
        b"'",
    ])
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

/// The stream at `key`, open for its groups to change: `None` when the
/// key is missing, WRONGTYPE for another type. `counted` for the commands
/// that look it up as a read (lookupKeyRead), which count in INFO's
/// keyspace hits and misses.
pub(super) fn stream_entry<'s>(
    shard: &'s mut ShardData,
    key: KeyRef<'_>,
    now: u64,
    counted: bool,
) -> Result<Option<EntryMut<'s>>, Reply> {
    if counted {
        // Counted (and a miss's event raised) as a read lookup.
        let _ = shard.lookup_read(key, now);
    }
    let Some(entry) = shard.get_mut(key, now) else {
        return Ok(None);
    };
    let is_stream = matches!(entry.value(), ValueRef::Obj(object) if Stream::of(object).is_some());
    if !is_stream {
        return Err(Reply::error(error::WRONGTYPE));
    }
    Ok(Some(entry))
}

/// The stream of an entry [`stream_entry`] opened. A group's change is
/// not the key's: WATCH and tracking are not told.
pub(super) fn stream_of<'e>(entry: &'e mut EntryMut<'_>) -> Option<&'e mut Stream> {
    entry.object_mut_quietly().and_then(Stream::of_mut)
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
    let mut entry = match stream_entry(&mut shard, key, now, false) {
        Ok(Some(entry)) => entry,
        Ok(None) => return Reply::error(KEY_MUST_EXIST),
        Err(reply) => return reply,
    };
    let Some(stream) = stream_of(&mut entry) else {
        return Reply::error(error::WRONGTYPE);
    };
    match stream.group_mut(argv[3]) {
        Some(group) => change(group, now),
        None => no_group_for_key(argv[2], argv[3]),
    }
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
    let exists = match stream_entry(&mut shard, key, now, false) {
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
    let mut entry = match stream_entry(&mut shard, key, now, false) {
        Ok(Some(entry)) => entry,
        Ok(None) => return Reply::error(KEY_MUST_EXIST),
        Err(reply) => return reply,
    };
    let Some(stream) = stream_of(&mut entry) else {
        return Reply::error(error::WRONGTYPE);
    };
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
    drop(entry);
    ctx.notify(class::STREAM, "xgroup-setid", argv[2]);
    Reply::Ok
}

/// XGROUP DESTROY key group: 1 if the group was there. Clients blocked
/// reading for it get NOGROUP (the write marks the key ready).
pub fn xgroup_destroy(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[2]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let mut entry = match stream_entry(&mut shard, key, now, false) {
        Ok(Some(entry)) => entry,
        Ok(None) => return Reply::error(KEY_MUST_EXIST),
        Err(reply) => return reply,
    };
    let Some(stream) = stream_of(&mut entry) else {
        return Reply::error(error::WRONGTYPE);
    };
    if !stream.destroy_group(argv[3]) {
        return Reply::Int(0);
    }
    drop(entry);
    ctx.notify(class::STREAM, "xgroup-destroy", argv[2]);
    Reply::Int(1)
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
    let mut entry = match stream_entry(&mut shard, key, now, true) {
        Ok(Some(entry)) => entry,
        Ok(None) => return Reply::Int(0),
        Err(reply) => return reply,
    };
    let Some(stream) = stream_of(&mut entry) else {
        return Reply::error(error::WRONGTYPE);
    };
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
}

/// XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
pub fn xpending(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let summary = argv.len() == 3;
    if !summary && !(6..=9).contains(&argv.len()) {
        return Reply::error(error::SYNTAX);
    }
    let mut range = None;
    if !summary {
        match pending_range(argv) {
            Ok(parsed) => range = Some(parsed),
            Err(reply) => return reply,
        }
    }
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let found = match super::collection::read::<Stream, _>(&mut shard, key, now, |stream| {
        let group = stream.group(argv[2])?;
        Some(match &range {
            None => pending_summary(group),
            Some(range) => pending_entries(group, range, now),
        })
    }) {
        Ok(found) => found.flatten(),
        Err(reply) => return reply,
    };
    found.unwrap_or_else(|| no_key_or_group(argv[1], argv[2]))
}

/// XPENDING's extended form: what it lists.
struct PendingRange<'a> {
    min_idle: i64,
    start: StreamId,
    end: StreamId,
    count: usize,
    consumer: Option<&'a [u8]>,
}

fn pending_range<'a>(argv: &[&'a [u8]]) -> Result<PendingRange<'a>, Reply> {
    let mut at = 3;
    let mut min_idle = 0;
    if is(argv[3], "idle") {
        min_idle = int_arg(argv[4])?;
        if argv.len() < 8 {
            return Err(Reply::error(error::SYNTAX));
        }
        at += 2;
    }
    let count = int_arg(argv[at + 2])?.max(0) as usize;
    let (mut start, start_open) = interval_id(argv[at], 0)?;
    if start_open {
        start = start
            .next()
            .ok_or_else(|| Reply::error("ERR invalid start ID for the interval"))?;
    }
    let (mut end, end_open) = interval_id(argv[at + 1], u64::MAX)?;
    if end_open {
        end = end
            .prev()
            .ok_or_else(|| Reply::error("ERR invalid end ID for the interval"))?;
    }
    Ok(PendingRange {
        min_idle,
        start,
        end,
        count,
        consumer: argv.get(at + 3).copied(),
    })
}

/// `[count, first, last, [[consumer, count] ...]]`.
fn pending_summary(group: &ConsumerGroup) -> Reply {
    let (Some((first, _)), Some((last, _))) = (
        group.pending.first_key_value(),
        group.pending.last_key_value(),
    ) else {
        return Reply::Array(vec![Reply::Int(0), Reply::Nil, Reply::Nil, Reply::NilArray]);
    };
    let owners = group
        .consumers
        .iter()
        .filter(|(_, consumer)| !consumer.pending.is_empty())
        .map(|(name, consumer)| {
            Reply::Array(vec![
                Reply::Bulk(name.clone()),
                Reply::Bulk(consumer.pending.len().to_string().into_bytes()),
            ])
        })
        .collect();
    Reply::Array(vec![
        Reply::Int(group.pending.len() as i64),
        Reply::Bulk(first.to_bytes()),
        Reply::Bulk(last.to_bytes()),
        Reply::Array(owners),
    ])
}

/// `[[id, consumer, idle, deliveries] ...]` for the pending entries in
/// the range, of one consumer if named (none if it does not exist).
fn pending_entries(group: &ConsumerGroup, range: &PendingRange<'_>, now: u64) -> Reply {
    if range.start > range.end || range.count == 0 {
        return Reply::Array(Vec::new());
    }
    let ids: Box<dyn Iterator<Item = &StreamId>> = match range.consumer {
        Some(name) => match group.consumers.get(name) {
            Some(consumer) => Box::new(consumer.pending.range(range.start..=range.end)),
            None => return Reply::Array(Vec::new()),
        },
        None => Box::new(
            group
                .pending
                .range(range.start..=range.end)
                .map(|(id, _)| id),
        ),
    };
    let idle_of = |entry: &PendingEntry| now as i64 - entry.delivery_time as i64;
    let listed = ids
        .filter_map(|id| Some((id, group.pending.get(id)?)))
        .filter(|(_, entry)| range.min_idle == 0 || idle_of(entry) >= range.min_idle)
        .take(range.count)
        .map(|(id, entry)| {
            Reply::Array(vec![
                Reply::Bulk(id.to_bytes()),
                Reply::Bulk(entry.owner.clone()),
                Reply::Int(idle_of(entry).max(0)),
                Reply::Int(entry.delivery_count as i64),
            ])
        })
        .collect();
    Reply::Array(listed)
}

/// An entry XCLAIM or XAUTOCLAIM may claim, looked up once: `None` when
/// the stream no longer has it, else its reply (its ID alone with JUSTID,
/// then its fields are not read).
fn claim_lookup(stream: &Stream, id: StreamId, just_id: bool) -> Option<Reply> {
    if just_id {
        stream.contains(id).then(|| Reply::Bulk(id.to_bytes()))
    } else {
        {
            let mut found = None;
            stream.visit_range(id, id, false, 1, |entry| found = Some(view_reply(entry)));
            found
        }
    }
}

/// What XCLAIM and XAUTOCLAIM do to a group's pending entries, kept for
/// the events and the change feed until the key is released.
struct Claims<'a> {
    consumer: &'a [u8],
    now: u64,
    /// The consumer is looked up (made if missing) at the first claim
    /// only, as Redis does.
    looked_up: bool,
    made: bool,
    /// Each pending entry claimed, or dropped as gone from the stream, as
    /// it then stood; `None` while no file or replica takes the feed.
    changes: Option<Vec<(StreamId, PendingEntry)>>,
}

impl<'a> Claims<'a> {
    fn new(ctx: &Ctx<'_>, consumer: &'a [u8]) -> Claims<'a> {
        Claims {
            consumer,
            now: ctx.now_ms,
            looked_up: false,
            made: false,
            changes: ctx.shared.store.feed().active().then(Vec::new),
        }
    }

    /// The pending entry `id` is no longer in the stream: it leaves the
    /// group, logged as it was (replayed, it is dropped there too).
    fn drop_gone(&mut self, group: &mut ConsumerGroup, id: StreamId) {
        if let (Some(gone), Some(changes)) = (group.remove_pending(id), self.changes.as_mut()) {
            changes.push((id, gone));
        }
    }

    /// Gives the pending entry `id` to the consumer, `update` setting its
    /// delivery time and count.
    fn claim(
        &mut self,
        group: &mut ConsumerGroup,
        id: StreamId,
        update: impl FnOnce(&mut PendingEntry),
    ) {
        if !self.looked_up {
            self.made = group.touch_consumer(self.consumer, self.now);
            self.looked_up = true;
        }
        group.claim(id, self.consumer, update);
        if let (Some(pending), Some(changes)) = (group.pending.get(&id), self.changes.as_mut()) {
            changes.push((id, pending.clone()));
        }
    }

    /// Whether anything goes to the change feed.
    fn logged_any(&self) -> bool {
        self.changes.as_ref().is_some_and(|c| !c.is_empty())
    }

    /// Raises the consumer's creation event and logs each change as the
    /// XCLAIM that sets it, the group's last ID being `last_id`.
    fn finish(self, ctx: &mut Ctx<'_>, key: &[u8], group_name: &[u8], last_id: StreamId) {
        if self.made {
            ctx.notify(class::STREAM, "xgroup-createconsumer", key);
        }
        for (id, pending) in self.changes.iter().flatten() {
            propagate_claim(ctx, key, group_name, last_id, *id, pending);
        }
    }
}

/// XCLAIM's options after its IDs.
struct ClaimOptions {
    force: bool,
    just_id: bool,
    /// The delivery time to set (unix ms), from IDLE or TIME.
    delivery_time: Option<i64>,
    retry_count: Option<i64>,
    last_id: StreamId,
}

fn claim_options(argv: &[&[u8]], now: i64) -> Result<ClaimOptions, Reply> {
    let mut options = ClaimOptions {
        force: false,
        just_id: false,
        delivery_time: None,
        retry_count: None,
        last_id: StreamId::MIN,
    };
    let number = |arg: &[u8], message: &'static str| {
        crate::number::parse_i64(arg).ok_or_else(|| Reply::error(message))
    };
    let mut j = 0;
    while j < argv.len() {
        let more = j + 1 < argv.len();
        let option = argv[j];
        if is(option, "force") {
            options.force = true;
        } else if is(option, "justid") {
            options.just_id = true;
        } else if is(option, "idle") && more {
            j += 1;
            let idle = number(argv[j], "ERR Invalid IDLE option argument for XCLAIM")?;
            options.delivery_time = Some(now.wrapping_sub(idle));
        } else if is(option, "time") && more {
            j += 1;
            options.delivery_time = Some(number(
                argv[j],
                "ERR Invalid TIME option argument for XCLAIM",
            )?);
        } else if is(option, "retrycount") && more {
            j += 1;
            options.retry_count = Some(number(
                argv[j],
                "ERR Invalid RETRYCOUNT option argument for XCLAIM",
            )?);
        } else if is(option, "lastid") && more {
            j += 1;
            options.last_id = parse_id(argv[j], true, 0, false)?.0;
        } else {
            return Err(named_error(&[
                b"ERR Unrecognized XCLAIM option '",
                option,
                b"'",
            ]));
        }
        j += 1;
    }
    Ok(options)
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms]
/// [TIME unix-time-milliseconds] [RETRYCOUNT count] [FORCE] [JUSTID]
/// [LASTID lastid]: the entries (or IDs) now the consumer's.
pub fn xclaim(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let mut entry = match stream_entry(&mut shard, key, now, true) {
        Ok(Some(entry)) => entry,
        Ok(None) => return no_key_or_group(argv[1], argv[2]),
        Err(reply) => return reply,
    };
    let Some(stream) = stream_of(&mut entry) else {
        return Reply::error(error::WRONGTYPE);
    };
    if stream.group(argv[2]).is_none() {
        return no_key_or_group(argv[1], argv[2]);
    }
    let min_idle = match crate::number::parse_i64(argv[4]) {
        Some(n) => n.max(0),
        None => return Reply::error("ERR Invalid min-idle-time argument for XCLAIM"),
    };
    // The IDs run up to the first argument that is not one; the rest are
    // options.
    let ids: Vec<StreamId> = argv[5..]
        .iter()
        .map_while(|arg| parse_id(arg, true, 0, false).ok().map(|(id, _)| id))
        .collect();
    let options = match claim_options(&argv[5 + ids.len()..], now as i64) {
        Ok(options) => options,
        Err(reply) => return reply,
    };
    let Some(group) = stream.group_mut(argv[2]) else {
        return no_key_or_group(argv[1], argv[2]);
    };
    let mut group_moved = false;
    if options.last_id > group.last_id {
        group.last_id = options.last_id;
        group_moved = true;
    }
    // A time in the future or before the epoch is taken as now: a
    // client's clock may run ahead of the server's.
    let delivery_time = match options.delivery_time {
        Some(t) if t >= 0 && t <= now as i64 => t as u64,
        _ => now,
    };
    let mut claims = Claims::new(ctx, argv[3]);
    let mut claimed = Vec::new();
    for id in ids {
        let found = claim_lookup(stream, id, options.just_id);
        let Some(group) = stream.group_mut(argv[2]) else {
            break;
        };
        let Some(reply) = found else {
            claims.drop_gone(group, id);
            continue;
        };
        let forced = options.force && !group.pending.contains_key(&id);
        if !forced {
            let Some(pending) = group.pending.get(&id) else {
                continue;
            };
            if min_idle > 0 && (now as i64 - pending.delivery_time as i64) < min_idle {
                continue;
            }
        }
        if forced {
            // Made as delivered now, then claimed as any other.
            group.pending.insert(
                id,
                PendingEntry {
                    owner: argv[3].to_vec(),
                    delivery_time: now,
                    delivery_count: 1,
                },
            );
        }
        claims.claim(group, id, |pending| {
            pending.delivery_time = delivery_time;
            match options.retry_count {
                Some(count) if count >= 0 => pending.delivery_count = count as u64,
                _ if !options.just_id => pending.delivery_count += 1,
                _ => {}
            }
        });
        claimed.push(reply);
    }
    let position = stream
        .group(argv[2])
        .map_or((StreamId::MIN, 0), |g| (g.last_id, g.entries_read));
    drop(entry);
    drop(shard);
    // The XCLAIMs carry the group's last ID; without any, a LASTID that
    // moved it goes as XGROUP SETID.
    let carried = claims.logged_any();
    claims.finish(ctx, argv[1], argv[2], position.0);
    if group_moved && !carried {
        propagate_group_id(ctx, argv[1], argv[2], position);
    }
    Reply::Array(claimed)
}

/// The most XAUTOCLAIM's COUNT may be (LONG_MAX over the larger of an
/// ID's size and the attempts factor, as Redis bounds its allocation).
const AUTOCLAIM_MAX_COUNT: i64 = i64::MAX / 16;
/// How many pending entries XAUTOCLAIM looks at per entry it may claim.
const AUTOCLAIM_ATTEMPTS_FACTOR: usize = 10;

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count]
/// [JUSTID]: `[next cursor, claimed, deleted IDs]`.
pub fn xautoclaim(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let min_idle = match crate::number::parse_i64(argv[4]) {
        Some(n) => n.max(0),
        None => return Reply::error("ERR Invalid min-idle-time argument for XAUTOCLAIM"),
    };
    let (mut start, start_open) = match interval_id(argv[5], 0) {
        Ok(parsed) => parsed,
        Err(reply) => return reply,
    };
    if start_open {
        match start.next() {
            Some(next) => start = next,
            None => return Reply::error("ERR invalid start ID for the interval"),
        }
    }
    let mut count = 100usize;
    let mut just_id = false;
    let mut j = 6;
    while j < argv.len() {
        if is(argv[j], "count") && j + 1 < argv.len() {
            match crate::number::parse_i64(argv[j + 1]) {
                Some(n) if (1..=AUTOCLAIM_MAX_COUNT).contains(&n) => count = n as usize,
                _ => return Reply::error("ERR COUNT must be > 0"),
            }
            j += 1;
        } else if is(argv[j], "justid") {
            just_id = true;
        } else {
            return Reply::error(error::SYNTAX);
        }
        j += 1;
    }
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let mut entry = match stream_entry(&mut shard, key, now, true) {
        Ok(Some(entry)) => entry,
        Ok(None) => return no_key_or_group(argv[1], argv[2]),
        Err(reply) => return reply,
    };
    let Some(stream) = stream_of(&mut entry) else {
        return Reply::error(error::WRONGTYPE);
    };
    if stream.group(argv[2]).is_none() {
        return no_key_or_group(argv[1], argv[2]);
    }
    // Redis sets aside room for COUNT deleted IDs before it looks, and
    // refuses a COUNT it cannot make room for; so does this.
    let mut deleted_ids: Vec<StreamId> = Vec::new();
    if deleted_ids.try_reserve_exact(count).is_err() {
        return Reply::error(
            "ERR Insufficient memory, failed allocating transient memory, COUNT too high.",
        );
    }
    drop(deleted_ids);
    let mut claims = Claims::new(ctx, argv[3]);
    let mut attempts = count.saturating_mul(AUTOCLAIM_ATTEMPTS_FACTOR);
    let mut claimed = Vec::new();
    let mut deleted = Vec::new();
    // The pending entries from `start` on, one at a time: each step looks
    // the next one up again, as the group changes under the walk.
    let next_after = |group: &ConsumerGroup, from: StreamId| {
        group.pending.range(from..).next().map(|(id, _)| *id)
    };
    let mut next = stream.group(argv[2]).and_then(|g| next_after(g, start));
    while attempts > 0 && count > 0 {
        let Some(id) = next else {
            break;
        };
        attempts -= 1;
        let found = claim_lookup(stream, id, just_id);
        let Some(group) = stream.group_mut(argv[2]) else {
            break;
        };
        if found.is_none() {
            claims.drop_gone(group, id);
            deleted.push(Reply::Bulk(id.to_bytes()));
            count -= 1;
        } else if min_idle == 0
            || group
                .pending
                .get(&id)
                .is_some_and(|p| now as i64 - p.delivery_time as i64 >= min_idle)
        {
            claims.claim(group, id, |pending| {
                pending.delivery_time = now;
                if !just_id {
                    pending.delivery_count += 1;
                }
            });
            claimed.extend(found);
            count -= 1;
        }
        next = id
            .next()
            .and_then(|after| stream.group(argv[2]).and_then(|g| next_after(g, after)));
    }
    // The cursor is the pending entry after the last one looked at, or
    // 0-0 when the walk reached the end.
    let resume = next.unwrap_or(StreamId::MIN);
    let last_id = stream.group(argv[2]).map_or(StreamId::MIN, |g| g.last_id);
    drop(entry);
    drop(shard);
    claims.finish(ctx, argv[1], argv[2], last_id);
    Reply::Array(vec![
        Reply::Bulk(resume.to_bytes()),
        Reply::Array(claimed),
        Reply::Array(deleted),
    ])
}
