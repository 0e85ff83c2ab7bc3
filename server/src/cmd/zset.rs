//! Sorted-set commands: ZADD and its options, single members, ranks, pops,
//! random picks and ZSCAN. The commands that take a range (by rank, score
//! or lex) are in `zset_range.rs`, ZUNION and its kin in `zset_algebra.rs`.

use super::args::is;
use super::collection::{
    either, missing_pick, modify_notify_if, pairs, positive_count, random_pick_args, read,
    scan_collection, Event,
};
use super::error;
use super::Ctx;
use crate::event_classes::class;
use crate::resp::{Protocol, Reply};
use crate::store::object::{Encodings, ZSet};

/// A score argument (ZADD, ZINCRBY), read as Redis reads it (`string2d`).
fn score_arg(arg: &[u8]) -> Result<f64, Reply> {
    crate::float::string2d(arg).ok_or_else(|| Reply::error(error::NOT_FLOAT))
}

pub(super) fn member_score(proto: Protocol, items: Vec<(&[u8], f64)>, with_scores: bool) -> Reply {
    if with_scores {
        pairs(
            proto,
            items
                .into_iter()
                .map(|(m, s)| (Reply::bulk(m), Reply::Double(s)))
                .collect(),
        )
    } else {
        Reply::Array(items.into_iter().map(|(m, _)| Reply::bulk(m)).collect())
    }
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
pub fn zadd(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, false);
    let mut first = 2;
    while first < argv.len() {
        let opt = argv[first];
        if is(opt, "nx") {
            nx = true;
        } else if is(opt, "xx") {
            xx = true;
        } else if is(opt, "ch") {
            ch = true;
        } else if is(opt, "incr") {
            incr = true;
        } else if is(opt, "gt") {
            gt = true;
        } else if is(opt, "lt") {
            lt = true;
        } else {
            break;
        }
        first += 1;
    }
    let rest = &argv[first..];
    if rest.is_empty() || rest.len() % 2 == 1 {
        return Reply::error(error::SYNTAX);
    }
    if nx && xx {
        return Reply::error(error::XX_AND_NX);
    }
    if ((gt || lt) && nx) || (gt && lt) {
        return Reply::error(error::GT_LT_NX);
    }
    if incr && rest.len() > 2 {
        return Reply::error(error::INCR_SINGLE_PAIR);
    }
    let mut scores = Vec::with_capacity(rest.len() / 2);
    for pair in rest.chunks_exact(2) {
        match score_arg(pair[0]) {
            Ok(score) => scores.push(score),
            Err(reply) => return reply,
        }
    }
    let options = AddOptions {
        nx,
        xx,
        gt,
        lt,
        incr,
    };
    let key = ctx.key(argv[1]);
    let limits = ctx.shared.encodings.get();
    let mut shard = ctx.lock(key);
    // Signalled only when a member was added or its score changed.
    let change = |zset: &mut ZSet| {
        let (mut added, mut updated, mut last) = (0, 0, None);
        for (pair, score) in rest.chunks_exact(2).zip(scores) {
            match add(zset, pair[1], score, options, &limits) {
                Err(()) => return (Err(Reply::error(error::SCORE_NAN)), added + updated > 0),
                Ok(Added::New(s)) => {
                    added += 1;
                    last = Some(s);
                }
                Ok(Added::Updated(s)) => {
                    updated += 1;
                    last = Some(s);
                }
                Ok(Added::Same(s)) => last = Some(s),
                Ok(Added::Nothing) => last = None,
            }
        }
        let reply = if incr {
            last.map_or(Reply::Nil, Reply::Double)
        } else {
            Reply::Int(if ch { added + updated } else { added })
        };
        (Ok(reply), added + updated > 0)
    };
    let event = Event(class::ZSET, if incr { "zincr" } else { "zadd" });
    let result = modify_notify_if::<ZSet, _>(ctx, &mut shard, key, !xx, event, change, |r| r.1);
    match result {
        Ok(Some((Ok(reply) | Err(reply), _))) => reply,
        Ok(None) if incr => Reply::Nil,
        Ok(None) => Reply::Int(0),
        Err(reply) => reply,
    }
}

#[derive(Clone, Copy)]
struct AddOptions {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    incr: bool,
}

/// What one ZADD pair did, with the member's resulting score.
enum Added {
    New(f64),
    Updated(f64),
    /// Processed but the score did not change.
    Same(f64),
    /// Skipped by NX, XX, GT or LT.
    Nothing,
}

/// Redis's zsetAdd: one member under the ZADD options. `Err` on a NaN sum.
fn add(
    zset: &mut ZSet,
    member: &[u8],
    score: f64,
    options: AddOptions,
    limits: &Encodings,
) -> Result<Added, ()> {
    match zset.score(member) {
        Some(current) => {
            if options.nx {
                return Ok(Added::Nothing);
            }
            let score = if options.incr { score + current } else { score };
            if score.is_nan() {
                return Err(());
            }
            if (options.lt && score >= current) || (options.gt && score <= current) {
                return Ok(Added::Nothing);
            }
            if score != current {
                zset.insert(member, score, limits);
                Ok(Added::Updated(score))
            } else {
                Ok(Added::Same(score))
            }
        }
        None if !options.xx => {
            zset.insert(member, score, limits);
            Ok(Added::New(score))
        }
        None => Ok(Added::Nothing),
    }
}

/// ZINCRBY key increment member
pub fn zincrby(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    zadd(ctx, &[argv[0], argv[1], b"incr", argv[2], argv[3]])
}

/// ZREM key member [member ...]
pub fn zrem(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let removed = modify_notify_if::<ZSet, _>(
        ctx,
        &mut shard,
        key,
        false,
        Event(class::ZSET, "zrem"),
        |zset| {
            argv[2..]
                .iter()
                .filter(|m| zset.remove(m).is_some())
                .count() as i64
        },
        |&removed| removed > 0,
    );
    either(removed.map(|r| Reply::Int(r.unwrap_or(0))))
}

/// ZCARD key
pub fn zcard(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    either(
        read::<ZSet, _>(&mut shard, key, ctx.now_ms, |zset| zset.len() as i64)
            .map(|r| Reply::Int(r.unwrap_or(0))),
    )
}

/// ZSCORE key member
pub fn zscore(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    either(
        read::<ZSet, _>(&mut shard, key, ctx.now_ms, |zset| zset.score(argv[2]))
            .map(|r| r.flatten().map_or(Reply::Nil, Reply::Double)),
    )
}

/// ZMSCORE key member [member ...]
pub fn zmscore(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let members = &argv[2..];
    either(
        read::<ZSet, _>(&mut shard, key, ctx.now_ms, |zset| {
            members
                .iter()
                .map(|m| zset.score(m).map_or(Reply::Nil, Reply::Double))
                .collect()
        })
        .map(|r| Reply::Array(r.unwrap_or_else(|| vec![Reply::Nil; members.len()]))),
    )
}

fn rank(ctx: &mut Ctx<'_>, argv: &[&[u8]], reverse: bool) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    either(
        read::<ZSet, _>(&mut shard, key, ctx.now_ms, |zset| {
            zset.rank(argv[2])
                .map(|r| if reverse { zset.len() - 1 - r } else { r })
        })
        .map(|r| r.flatten().map_or(Reply::Nil, |r| Reply::Int(r as i64))),
    )
}

/// ZRANK key member
pub fn zrank(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    rank(ctx, argv, false)
}

/// ZREVRANK key member
pub fn zrevrank(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    rank(ctx, argv, true)
}

fn pop(ctx: &mut Ctx<'_>, argv: &[&[u8]], min: bool) -> Reply {
    if argv.len() > 3 {
        return Reply::error(error::SYNTAX);
    }
    let count = match argv.get(2).map(|c| positive_count(c)).transpose() {
        Ok(count) => count,
        Err(reply) => return reply,
    };
    let proto = ctx.client.proto;
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    // A count of 0 pops nothing and signals nothing.
    let event = if min { "zpopmin" } else { "zpopmax" };
    let popped = modify_notify_if::<ZSet, _>(
        ctx,
        &mut shard,
        key,
        false,
        Event(class::ZSET, event),
        |zset| {
            let taken: Vec<_> = (0..count.unwrap_or(1))
                .map_while(|_| zset.pop(min))
                .map(|(m, s)| (Reply::Bulk(m.into()), Reply::Double(s)))
                .collect();
            match count {
                // Without a count the pair is flat in RESP3 too.
                None => Reply::Array(taken.into_iter().flat_map(|(m, s)| [m, s]).collect()),
                Some(_) => pairs(proto, taken),
            }
        },
        |_| count != Some(0),
    );
    either(popped.map(|r| r.unwrap_or(Reply::Array(Vec::new()))))
}

/// ZPOPMIN key [count]
pub fn zpopmin(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    pop(ctx, argv, true)
}

/// ZPOPMAX key [count]
pub fn zpopmax(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    pop(ctx, argv, false)
}

/// ZRANDMEMBER key [count [WITHSCORES]]
pub fn zrandmember(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let (count, with_scores) = match random_pick_args(argv, Some("withscores")) {
        Ok(args) => args,
        Err(reply) => return reply,
    };
    let proto = ctx.client.proto;
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let found = read::<ZSet, _>(&mut shard, key, ctx.now_ms, |zset| {
        let Some(count) = count else {
            let index = crate::util::random_u64() as usize % zset.len();
            return zset
                .nth(index)
                .map_or(Reply::Nil, |(member, _)| Reply::bulk(member));
        };
        member_score(proto, zset.random_members(count), with_scores)
    });
    either(found.map(|r| r.unwrap_or_else(|| missing_pick(count))))
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count]
pub fn zscan(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    scan_collection::<ZSet>(ctx, argv, |zset, options| {
        let (next, page) = zset.scan_page(options.cursor, options.count);
        let members = page
            .into_iter()
            .filter(|(m, _)| options.keeps(m))
            .flat_map(|(m, s)| {
                [
                    Reply::bulk(m),
                    Reply::Bulk(crate::float::format_g17(s).into_bytes()),
                ]
            })
            .collect();
        (next, members)
    })
}
