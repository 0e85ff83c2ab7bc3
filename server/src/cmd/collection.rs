//! What every collection command does around its own work: find the key,
//! refuse a key of another type with WRONGTYPE, create the collection on the
//! first write, and delete the key when its collection ends up empty (Redis
//! never keeps an empty hash, list, set or sorted set).

use super::args::{glob_match, int_arg, is};
use super::error;
use super::keys::parse_cursor;
use crate::resp::{Protocol, Reply};
use crate::store::{KeyRef, Kind, ShardData, ValueRef};

/// Runs `read` on the collection at `key` for a command that reads it:
/// `Ok(None)` when the key does not exist, WRONGTYPE when it holds another
/// type. The lookup counts in INFO's keyspace hits and misses.
pub fn read<T: Kind, R>(
    shard: &mut ShardData,
    key: KeyRef<'_>,
    now_ms: u64,
    read: impl FnOnce(&T) -> R,
) -> Result<Option<R>, Reply> {
    let entry = shard.lookup_read(key, now_ms);
    of_kind(entry.map(|entry| entry.value()), read)
}

/// [`read`] for a command that writes (the source of LMOVE or SMOVE, the
/// inputs of SINTERSTORE): not counted, as Redis's lookupKeyWrite is not.
pub fn read_for_write<T: Kind, R>(
    shard: &mut ShardData,
    key: KeyRef<'_>,
    now_ms: u64,
    read: impl FnOnce(&T) -> R,
) -> Result<Option<R>, Reply> {
    of_kind(shard.get(key, now_ms).map(|entry| entry.value()), read)
}

fn of_kind<T: Kind, R>(
    value: Option<ValueRef<'_>>,
    read: impl FnOnce(&T) -> R,
) -> Result<Option<R>, Reply> {
    match value {
        None => Ok(None),
        Some(ValueRef::Obj(object)) => match T::of(object) {
            Some(value) => Ok(Some(read(value))),
            None => Err(Reply::error(error::WRONGTYPE)),
        },
        Some(_) => Err(Reply::error(error::WRONGTYPE)),
    }
}

/// Runs `change` on the collection at `key`, first creating an empty one
/// when the key is missing and `create` is set (`Ok(None)` when it is
/// missing and not created). A collection left empty is deleted with its key.
/// The key counts as modified (WATCH, client tracking) whatever `change`
/// did, as Redis signals HSET, LSET, LTRIM and the like.
pub fn modify<T: Kind, R>(
    shard: &mut ShardData,
    key: KeyRef<'_>,
    now_ms: u64,
    create: bool,
    change: impl FnOnce(&mut T) -> R,
) -> Result<Option<R>, Reply> {
    modify_if(shard, key, now_ms, create, change, |_| true)
}

/// [`modify`] for a command Redis signals only when it changed something
/// (SADD, SREM, HDEL, ZADD, LREM ...): `changed` tells from `change`'s
/// result whether it did.
pub fn modify_if<T: Kind, R>(
    shard: &mut ShardData,
    key: KeyRef<'_>,
    now_ms: u64,
    create: bool,
    change: impl FnOnce(&mut T) -> R,
    changed: impl FnOnce(&R) -> bool,
) -> Result<Option<R>, Reply> {
    Ok(change_collection(shard, key, now_ms, create, change, changed)?.map(|(result, _)| result))
}

/// The keyspace notification a collection command raises when it changed
/// its key: Redis's class and event name (`class::SET`, `"sadd"`).
#[derive(Debug, Clone, Copy)]
pub struct Event(pub u32, pub &'static str);

/// [`modify`], raising `event` after the change (and `del` when it emptied
/// the key), as Redis's handlers signal theirs.
pub fn modify_notify<T: Kind, R>(
    ctx: &super::Ctx<'_>,
    shard: &mut ShardData,
    key: KeyRef<'_>,
    create: bool,
    event: Event,
    change: impl FnOnce(&mut T) -> R,
) -> Result<Option<R>, Reply> {
    modify_notify_if(ctx, shard, key, create, event, change, |_| true)
}

/// [`modify_if`], raising `event` when `changed` says the change changed
/// something (and `del` when it emptied the key).
pub fn modify_notify_if<T: Kind, R>(
    ctx: &super::Ctx<'_>,
    shard: &mut ShardData,
    key: KeyRef<'_>,
    create: bool,
    event: Event,
    change: impl FnOnce(&mut T) -> R,
    changed: impl FnOnce(&R) -> bool,
) -> Result<Option<R>, Reply> {
    let outcome = change_collection(shard, key, ctx.now_ms, create, change, changed)?;
    Ok(outcome.map(|(result, changed)| {
        if changed {
            notify_changed(ctx, shard, key, event);
        }
        result
    }))
}

/// The one body of the `modify` family: the change, whether it changed
/// anything, and the key deleted when it left the collection empty.
fn change_collection<T: Kind, R>(
    shard: &mut ShardData,
    key: KeyRef<'_>,
    now_ms: u64,
    create: bool,
    change: impl FnOnce(&mut T) -> R,
    changed: impl FnOnce(&R) -> bool,
) -> Result<Option<(R, bool)>, Reply> {
    let make = || create.then(|| Box::new(T::empty()));
    let Some(mut entry) = shard.get_mut_or_create(key, now_ms, make) else {
        return Ok(None);
    };
    let Some(value) = entry.object_mut().and_then(T::of_mut) else {
        return Err(Reply::error(error::WRONGTYPE));
    };
    let result = change(value);
    let now_empty = entry.object_mut().is_some_and(|object| object.is_empty());
    let changed = changed(&result);
    if !changed {
        entry.leave_unmodified();
    }
    drop(entry);
    if now_empty {
        shard.remove(key, now_ms);
    }
    Ok(Some((result, changed)))
}

/// Raises keyspace notification `event` about `key` after a change to its
/// collection, then `del` when the change left it empty and so deleted it,
/// as Redis's handlers do. A lookup only while someone listens.
pub fn notify_changed(ctx: &super::Ctx<'_>, shard: &mut ShardData, key: KeyRef<'_>, event: Event) {
    let Event(class, name) = event;
    let events = &ctx.shared.keyspace_events;
    if !events.wants(class) && !events.wants(crate::event_classes::class::GENERIC) {
        return;
    }
    ctx.notify(class, name, key.bytes);
    if !shard.contains(key, ctx.now_ms) {
        ctx.notify(crate::event_classes::class::GENERIC, "del", key.bytes);
    }
}

/// Checks that `key` is missing or of type `T`; true when it exists.
pub fn exists_as<T: Kind>(
    shard: &mut ShardData,
    key: KeyRef<'_>,
    now_ms: u64,
) -> Result<bool, Reply> {
    read_for_write::<T, ()>(shard, key, now_ms, |_| ()).map(|found| found.is_some())
}

/// Turns `Result<Reply, Reply>` into the reply, whichever it is.
pub fn either(result: Result<Reply, Reply>) -> Reply {
    result.unwrap_or_else(|reply| reply)
}

/// Elements with their scores or values, as Redis 7.0 pairs them: a flat
/// array in RESP2, an array of two-element arrays in RESP3.
pub fn pairs(proto: Protocol, items: Vec<(Reply, Reply)>) -> Reply {
    match proto {
        Protocol::Resp2 => Reply::Array(items.into_iter().flat_map(|(a, b)| [a, b]).collect()),
        Protocol::Resp3 => Reply::Array(
            items
                .into_iter()
                .map(|(a, b)| Reply::Array(vec![a, b]))
                .collect(),
        ),
    }
}

/// The cursor, MATCH and COUNT of HSCAN, SSCAN and ZSCAN.
pub struct ScanOptions<'a> {
    pattern: Option<&'a [u8]>,
    /// Where the page starts (0: at the beginning).
    pub cursor: u64,
    /// About how many elements to visit (Redis's default 10).
    pub count: usize,
}

impl<'a> ScanOptions<'a> {
    /// Parses `cursor [MATCH pattern] [COUNT count]` as Redis does.
    pub fn parse(cursor: &[u8], options: &[&'a [u8]]) -> Result<ScanOptions<'a>, Reply> {
        let Some(cursor) = parse_cursor(cursor) else {
            return Err(Reply::error(error::INVALID_CURSOR));
        };
        let mut pattern = None;
        let mut count = 10;
        let mut i = 0;
        while i < options.len() {
            let remaining = options.len() - i;
            if is(options[i], "count") && remaining >= 2 {
                let n = int_arg(options[i + 1])?;
                if n < 1 {
                    return Err(Reply::error(error::SYNTAX));
                }
                count = usize::try_from(n).unwrap_or(usize::MAX);
            } else if is(options[i], "match") && remaining >= 2 {
                pattern = Some(options[i + 1]).filter(|p| *p != b"*");
            } else {
                return Err(Reply::error(error::SYNTAX));
            }
            i += 2;
        }
        Ok(ScanOptions {
            pattern,
            cursor,
            count,
        })
    }

    /// True when `element` passes MATCH.
    pub fn keeps(&self, element: &[u8]) -> bool {
        self.pattern.is_none_or(|p| glob_match(p, element, false))
    }

    /// The reply: the next cursor (0 when the walk is done) and the
    /// elements of this page.
    pub fn reply(next: u64, elements: Vec<Reply>) -> Reply {
        let cursor = Reply::Bulk(itoa::Buffer::new().format(next).as_bytes().to_vec());
        Reply::Array(vec![cursor, Reply::Array(elements)])
    }
}

/// A count argument that must not be negative (LPOP, SPOP, ZPOPMIN ...).
/// Anything but a non-negative integer gets the same error, as with Redis's
/// getPositiveLongFromObjectOrReply.
pub fn positive_count(arg: &[u8]) -> Result<usize, Reply> {
    match super::args::parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n as usize),
        _ => Err(Reply::error(error::MUST_BE_POSITIVE)),
    }
}

/// Resolves a Redis index range (negative counts from the end) over `len`
/// elements into `start..end`, empty when nothing is in range.
pub fn index_range(start: i64, stop: i64, len: usize) -> std::ops::Range<usize> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    if start > stop || start >= len {
        0..0
    } else {
        start as usize..stop as usize + 1
    }
}

/// The largest number of repeated picks a negative count may ask for: Redis
/// would try to build a reply of any size, which here would exhaust memory
/// (docs/compatibility.md).
const MAX_RANDOM_PICKS: u64 = 1 << 24;

/// The arguments of HRANDFIELD, SRANDMEMBER and ZRANDMEMBER after the key:
/// `[count [<with>]]` (SRANDMEMBER has no `with` word). Returns the count,
/// if given, and whether `with` was. Checked in Redis's order: the count's
/// range, the syntax, then (with `with`) Redis's bound of ±LONG_MAX/2, its
/// fix for CVE-2023-22458 (twice the count is the reply's length); then
/// tally's own bound on repeated picks.
pub fn random_pick_args(argv: &[&[u8]], with: Option<&str>) -> Result<(Option<i64>, bool), Reply> {
    let count = match argv.get(2) {
        Some(arg) => match int_arg(arg)? {
            i64::MIN => return Err(Reply::error(error::COUNT_RANGE)),
            count => Some(count),
        },
        None => None,
    };
    let with_given = match (argv.len(), with) {
        (2 | 3, _) => false,
        (4, Some(word)) if is(argv[3], word) => true,
        _ => return Err(Reply::error(error::SYNTAX)),
    };
    let Some(count) = count else {
        return Ok((None, with_given));
    };
    if with_given && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(Reply::error(error::OUT_OF_RANGE));
    }
    if count < 0 && count.unsigned_abs() > MAX_RANDOM_PICKS {
        return Err(Reply::error(error::MUST_BE_POSITIVE_OR_SMALL));
    }
    Ok((Some(count), with_given))
}

/// The reply of a random pick from a missing key: nil without a count, an
/// empty array with one.
pub fn missing_pick(count: Option<i64>) -> Reply {
    match count {
        None => Reply::Nil,
        Some(_) => Reply::Array(Vec::new()),
    }
}

/// HSCAN, SSCAN and ZSCAN: parses `cursor [MATCH] [COUNT]`, then replies
/// with the next cursor and the elements `page` gives for the collection
/// (none, and cursor 0, when missing).
pub fn scan_collection<T: Kind>(
    ctx: &mut super::Ctx<'_>,
    argv: &[&[u8]],
    page: impl FnOnce(&T, &ScanOptions<'_>) -> (u64, Vec<Reply>),
) -> Reply {
    let options = match ScanOptions::parse(argv[2], &argv[3..]) {
        Ok(options) => options,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let found = read::<T, _>(&mut shard, key, ctx.now_ms, |value| page(value, &options));
    either(found.map(|r| {
        let (next, elements) = r.unwrap_or_default();
        ScanOptions::reply(next, elements)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_ranges_clamp_like_redis() {
        assert_eq!(index_range(0, -1, 5), 0..5);
        assert_eq!(index_range(-100, 100, 3), 0..3);
        assert_eq!(index_range(2, 1, 5), 0..0);
        assert_eq!(index_range(5, 10, 5), 0..0);
        assert_eq!(index_range(-2, -1, 5), 3..5);
        assert_eq!(index_range(0, -6, 5), 0..0);
        assert_eq!(index_range(0, 0, 0), 0..0);
    }
}
