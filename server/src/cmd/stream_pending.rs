//! XPENDING, XCLAIM and XAUTOCLAIM, as Redis 7.0's t_stream.c answers
//! them: a group's pending entries listed, and moved to another consumer
//! (one by one, or by a walk from a cursor). A claim goes to the change
//! feed as the XCLAIM that sets its pending entry whole, as Redis
//! propagates it; a claimed entry no longer in the stream leaves the group.

use super::args::{int_arg, is};
use super::error;
use super::stream::{interval_id, parse_id, view_reply};
use super::stream_group::{named_error, on_stream, propagate_claim, propagate_group_id};
use super::Ctx;
use crate::event_classes::class;
use crate::resp::Reply;
use crate::store::object::{ConsumerGroup, PendingEntry, Stream, StreamId};

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
    let mut claims = Claims::new(ctx, argv[3]);
    let claimed = on_stream(&mut shard, key, now, true, |stream| {
        if stream.group(argv[2]).is_none() {
            return Err(no_key_or_group(argv[1], argv[2]));
        }
        let min_idle = match crate::number::parse_i64(argv[4]) {
            Some(n) => n.max(0),
            None => {
                return Err(Reply::error(
                    "ERR Invalid min-idle-time argument for XCLAIM",
                ))
            }
        };
        // The IDs run up to the first argument that is not one; the rest are
        // options.
        let ids: Vec<StreamId> = argv[5..]
            .iter()
            .map_while(|arg| parse_id(arg, true, 0, false).ok().map(|(id, _)| id))
            .collect();
        let options = claim_options(&argv[5 + ids.len()..], now as i64)?;
        let Some(group) = stream.group_mut(argv[2]) else {
            return Err(no_key_or_group(argv[1], argv[2]));
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
        Ok((claimed, group_moved, position))
    });
    drop(shard);
    let (claimed, group_moved, position) = match claimed {
        Ok(Some(Ok(done))) => done,
        Ok(None) => return no_key_or_group(argv[1], argv[2]),
        Ok(Some(Err(reply))) | Err(reply) => return reply,
    };
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
    let mut claims = Claims::new(ctx, argv[3]);
    let walked = on_stream(&mut shard, key, now, true, |stream| {
        if stream.group(argv[2]).is_none() {
            return Err(no_key_or_group(argv[1], argv[2]));
        }
        // Redis sets aside room for COUNT deleted IDs before it looks, and
        // refuses a COUNT it cannot make room for; so does this.
        let mut deleted_ids: Vec<StreamId> = Vec::new();
        if deleted_ids.try_reserve_exact(count).is_err() {
            return Err(Reply::error(
                "ERR Insufficient memory, failed allocating transient memory, COUNT too high.",
            ));
        }
        drop(deleted_ids);
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
        Ok((resume, claimed, deleted, last_id))
    });
    drop(shard);
    let (resume, claimed, deleted, last_id) = match walked {
        Ok(Some(Ok(done))) => done,
        Ok(None) => return no_key_or_group(argv[1], argv[2]),
        Ok(Some(Err(reply))) | Err(reply) => return reply,
    };
    claims.finish(ctx, argv[1], argv[2], last_id);
    Reply::Array(vec![
        Reply::Bulk(resume.to_bytes()),
        Reply::Array(claimed),
        Reply::Array(deleted),
    ])
}
