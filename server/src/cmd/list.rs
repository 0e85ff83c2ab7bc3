//! List commands: pushes and pops at both ends, ranges, LMOVE and friends.
//! The blocking forms (BLPOP ...) are `blocking.rs`'s.

use super::args::{int_arg, int_pair, is};
use super::collection::{
    either, exists_as, index_range, modify, modify_notify, modify_notify_if, notify_changed,
    positive_count, read, Event,
};
use super::error;
use super::Ctx;
use crate::event_classes::class;
use crate::resp::{BulkList, Reply};
use crate::store::object::List;

fn push(ctx: &mut Ctx<'_>, argv: &[&[u8]], left: bool, only_existing: bool) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let event = Event(class::LIST, if left { "lpush" } else { "rpush" });
    let pushed = modify_notify::<List, _>(ctx, &mut shard, key, !only_existing, event, |list| {
        for value in &argv[2..] {
            list.push(value, left);
        }
        list.len() as i64
    });
    either(pushed.map(|r| Reply::Int(r.unwrap_or(0))))
}

/// LPUSH key element [element ...]
pub fn lpush(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    push(ctx, argv, true, false)
}

/// RPUSH key element [element ...]
pub fn rpush(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    push(ctx, argv, false, false)
}

/// LPUSHX key element [element ...]
pub fn lpushx(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    push(ctx, argv, true, true)
}

/// RPUSHX key element [element ...]
pub fn rpushx(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    push(ctx, argv, false, true)
}

fn pop(ctx: &mut Ctx<'_>, argv: &[&[u8]], left: bool) -> Reply {
    if argv.len() > 3 {
        let name = if left { "lpop" } else { "rpop" };
        return Reply::error(error::wrong_arity(name));
    }
    let count = match argv.get(2).map(|c| positive_count(c)).transpose() {
        Ok(count) => count,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    // A count of 0 pops nothing and signals nothing.
    let event = if left { "lpop" } else { "rpop" };
    let popped = modify_notify_if::<List, _>(
        ctx,
        &mut shard,
        key,
        false,
        Event(class::LIST, event),
        |list| match count {
            None => list.pop(left).map_or(Reply::Nil, Reply::Bulk),
            Some(n) => Reply::Array(
                (0..n)
                    .map_while(|_| list.pop(left))
                    .map(Reply::Bulk)
                    .collect(),
            ),
        },
        |_| count != Some(0),
    );
    either(popped.map(|r| {
        r.unwrap_or(match count {
            None => Reply::Nil,
            Some(_) => Reply::NilArray,
        })
    }))
}

/// LPOP key [count]
pub fn lpop(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    pop(ctx, argv, true)
}

/// RPOP key [count]
pub fn rpop(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    pop(ctx, argv, false)
}

/// LLEN key
pub fn llen(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    either(
        read::<List, _>(&mut shard, key, ctx.now_ms, |list| list.len() as i64)
            .map(|r| Reply::Int(r.unwrap_or(0))),
    )
}

/// A Redis list index (negative from the tail) as a position, if in range.
fn position(index: i64, len: usize) -> Option<usize> {
    let resolved = if index < 0 { len as i64 + index } else { index };
    (0..len as i64)
        .contains(&resolved)
        .then_some(resolved as usize)
}

/// LINDEX key index
pub fn lindex(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let index = match int_arg(argv[2]) {
        Ok(n) => n,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    either(
        read::<List, _>(&mut shard, key, ctx.now_ms, |list| {
            position(index, list.len())
                .and_then(|i| list.get(i))
                .map_or(Reply::Nil, Reply::bulk)
        })
        .map(|r| r.unwrap_or(Reply::Nil)),
    )
}

/// LRANGE key start stop
pub fn lrange(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let (start, stop) = match int_pair(argv[2], argv[3]) {
        Ok(pair) => pair,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    either(
        read::<List, _>(&mut shard, key, ctx.now_ms, |list| {
            let range = index_range(start, stop, list.len());
            let items = list.iter().skip(range.start).take(range.len());
            Reply::Bulks(BulkList::collect(items))
        })
        .map(|r| r.unwrap_or(Reply::Array(Vec::new()))),
    )
}

/// LTRIM key start stop
pub fn ltrim(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let (start, stop) = match int_pair(argv[2], argv[3]) {
        Ok(pair) => pair,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let event = Event(class::LIST, "ltrim");
    let trimmed = modify_notify::<List, _>(ctx, &mut shard, key, false, event, |list| {
        let range = index_range(start, stop, list.len());
        list.retain_range(range.start, range.end);
    });
    either(trimmed.map(|_| Reply::Ok))
}

/// LSET key index element
pub fn lset(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let index = match int_arg(argv[2]) {
        Ok(n) => n,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let set = modify_notify_if::<List, _>(
        ctx,
        &mut shard,
        key,
        false,
        Event(class::LIST, "lset"),
        |list| match position(index, list.len()) {
            Some(i) => {
                list.set(i, argv[3]);
                Reply::Ok
            }
            None => Reply::error(error::INDEX_OUT_OF_RANGE),
        },
        |reply| *reply == Reply::Ok,
    );
    either(set.map(|r| r.unwrap_or_else(|| Reply::error(error::NO_SUCH_KEY))))
}

/// LREM key count element
pub fn lrem(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let count = match int_arg(argv[2]) {
        Ok(n) => n,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let removed = modify_notify_if::<List, _>(
        ctx,
        &mut shard,
        key,
        false,
        Event(class::LIST, "lrem"),
        |list| {
            let limit = if count == 0 {
                usize::MAX
            } else {
                count.unsigned_abs() as usize
            };
            let matches: Vec<usize> = if count < 0 {
                let len = list.len();
                (0..len)
                    .rev()
                    .filter(|&i| list.get(i) == Some(argv[3]))
                    .take(limit)
                    .collect()
            } else {
                (0..list.len())
                    .filter(|&i| list.get(i) == Some(argv[3]))
                    .take(limit)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect()
            };
            // Highest position first, so earlier positions stay valid.
            for &i in &matches {
                list.remove(i);
            }
            matches.len() as i64
        },
        |&removed| removed > 0,
    );
    either(removed.map(|r| Reply::Int(r.unwrap_or(0))))
}

/// LINSERT key BEFORE|AFTER pivot element
pub fn linsert(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let after = if is(argv[2], "after") {
        true
    } else if is(argv[2], "before") {
        false
    } else {
        return Reply::error(error::SYNTAX);
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let inserted = modify_notify_if::<List, _>(
        ctx,
        &mut shard,
        key,
        false,
        Event(class::LIST, "linsert"),
        |list| {
            let pivot = list.iter().position(|v| v == argv[3]);
            match pivot {
                Some(i) => {
                    list.insert(i + after as usize, argv[4]);
                    list.len() as i64
                }
                None => -1,
            }
        },
        |&length| length > 0,
    );
    either(inserted.map(|r| Reply::Int(r.unwrap_or(0))))
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
pub fn lpos(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let mut rank = 1i64;
    let mut count: Option<usize> = None;
    let mut maxlen = 0usize;
    let mut i = 3;
    while i < argv.len() {
        if i + 1 >= argv.len() {
            return Reply::error(error::SYNTAX);
        }
        let value = match int_arg(argv[i + 1]) {
            Ok(n) => n,
            Err(reply) => return reply,
        };
        if is(argv[i], "rank") {
            if value == 0 {
                return Reply::error(error::RANK_ZERO);
            }
            rank = value;
        } else if is(argv[i], "count") {
            if value < 0 {
                return Reply::error(error::COUNT_NEGATIVE);
            }
            count = Some(value as usize);
        } else if is(argv[i], "maxlen") {
            if value < 0 {
                return Reply::error(error::MAXLEN_NEGATIVE);
            }
            maxlen = value as usize;
        } else {
            return Reply::error(error::SYNTAX);
        }
        i += 2;
    }
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let found = read::<List, _>(&mut shard, key, ctx.now_ms, |list| {
        let len = list.len();
        let scan = if maxlen == 0 { len } else { maxlen.min(len) };
        let order: Box<dyn Iterator<Item = usize>> = if rank > 0 {
            Box::new(0..scan)
        } else {
            Box::new((len - scan..len).rev())
        };
        let wanted = match count {
            Some(0) => usize::MAX,
            Some(n) => n,
            None => 1,
        };
        // Redis negates a negative rank, which leaves i64::MIN negative, and
        // then takes every match from the first ("matches >= rank").
        let mut skip = if rank == i64::MIN {
            0
        } else {
            rank.unsigned_abs() - 1
        };
        let mut hits = Vec::new();
        for index in order {
            if list.get(index) != Some(argv[2]) {
                continue;
            }
            if skip > 0 {
                skip -= 1;
                continue;
            }
            hits.push(Reply::Int(index as i64));
            if hits.len() >= wanted {
                break;
            }
        }
        match count {
            Some(_) => Reply::Array(hits),
            None => hits.pop().unwrap_or(Reply::Nil),
        }
    });
    either(found.map(|r| {
        r.unwrap_or(match count {
            Some(_) => Reply::Array(Vec::new()),
            None => Reply::Nil,
        })
    }))
}

/// Which end LMOVE takes from or adds to.
pub fn end(arg: &[u8]) -> Option<bool> {
    if is(arg, "left") {
        Some(true)
    } else if is(arg, "right") {
        Some(false)
    } else {
        None
    }
}

fn move_element(ctx: &mut Ctx<'_>, argv: &[&[u8]], from_left: bool, to_left: bool) -> Reply {
    let (src, dst) = (ctx.key(argv[1]), ctx.key(argv[2]));
    let now = ctx.now_ms;
    let mut locked = ctx.lock_keys(&[src, dst]);
    // The destination's type is checked first when the source exists, as
    // Redis does, so a failed LMOVE changes nothing.
    let source_exists = match exists_as::<List>(locked.shard(src), src, now) {
        Ok(exists) => exists,
        Err(reply) => return reply,
    };
    if !source_exists {
        return Reply::Nil;
    }
    if let Err(reply) = exists_as::<List>(locked.shard(dst), dst, now) {
        return reply;
    }
    let push_event = if to_left { "lpush" } else { "rpush" };
    let pop_event = if from_left { "lpop" } else { "rpop" };
    if argv[1] == argv[2] {
        // A rotation: the list never empties on the way.
        let moved = modify::<List, _>(locked.shard(src), src, now, false, |list| {
            let value = list.pop(from_left)?;
            list.push(&value, to_left);
            Some(value)
        });
        let Ok(Some(Some(value))) = moved else {
            return Reply::Nil;
        };
        notify_changed(ctx, locked.shard(dst), dst, Event(class::LIST, push_event));
        notify_changed(ctx, locked.shard(src), src, Event(class::LIST, pop_event));
        return Reply::Bulk(value);
    }
    let popped = modify::<List, _>(locked.shard(src), src, now, false, |list| {
        list.pop(from_left)
    });
    let Ok(Some(Some(value))) = popped else {
        return Reply::Nil;
    };
    let pushed = modify::<List, _>(locked.shard(dst), dst, now, true, |list| {
        list.push(&value, to_left)
    });
    // Redis pushes before it pops: the destination's event comes first.
    if let Ok(Some(_)) = pushed {
        notify_changed(ctx, locked.shard(dst), dst, Event(class::LIST, push_event));
        notify_changed(ctx, locked.shard(src), src, Event(class::LIST, pop_event));
    }
    either(pushed.map(|_| Reply::Bulk(value)))
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT
pub fn lmove(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    match (end(argv[3]), end(argv[4])) {
        (Some(from), Some(to)) => move_element(ctx, argv, from, to),
        _ => Reply::error(error::SYNTAX),
    }
}

/// RPOPLPUSH source destination
pub fn rpoplpush(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    move_element(ctx, argv, false, true)
}
