//! Sorted-set commands that take a range: ZCOUNT and ZLEXCOUNT, ZRANGE with
//! its BYSCORE/BYLEX/REV/LIMIT options and its legacy forms (ZRANGEBYSCORE,
//! ZREVRANGE, ...), ZRANGESTORE, and ZREMRANGEBYRANK/SCORE/LEX; with the
//! parsing of score bounds (`(1`, `-inf`) and lex bounds (`[a`, `(a`, `-`,
//! `+`) as Redis reads them.

use std::ops::Bound;

use super::args::{int_pair, is};
use super::collection::{either, index_range, modify_notify_if, read, Event};
use super::error;
use super::zset::member_score;
use super::Ctx;
use crate::event_classes::class;
use crate::resp::Reply;
use crate::store::object::ZSet;
use crate::store::Object;

/// A score bound: `1.5`, `(1.5` (exclusive), `-inf`, `+inf`, read as
/// Redis's `zslParseRange` reads it.
fn score_bound(arg: &[u8]) -> Option<Bound<f64>> {
    match arg.strip_prefix(b"(") {
        Some(rest) => crate::float::strtod_bound(rest).map(Bound::Excluded),
        None => crate::float::strtod_bound(arg).map(Bound::Included),
    }
}

fn score_range(min: &[u8], max: &[u8]) -> Result<(Bound<f64>, Bound<f64>), Reply> {
    match (score_bound(min), score_bound(max)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(Reply::error(error::MIN_MAX_NOT_FLOAT)),
    }
}

/// A lex bound: `[a`, `(a`, `-`, `+`.
#[derive(Clone, Debug)]
enum Lex {
    Min,
    Max,
    Included(Vec<u8>),
    Excluded(Vec<u8>),
}

fn lex_bound(arg: &[u8]) -> Option<Lex> {
    match arg.first()? {
        b'-' if arg.len() == 1 => Some(Lex::Min),
        b'+' if arg.len() == 1 => Some(Lex::Max),
        b'[' => Some(Lex::Included(arg[1..].to_vec())),
        b'(' => Some(Lex::Excluded(arg[1..].to_vec())),
        _ => None,
    }
}

fn lex_range(min: &[u8], max: &[u8]) -> Result<(Lex, Lex), Reply> {
    match (lex_bound(min), lex_bound(max)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(Reply::error(error::MIN_MAX_NOT_STRING_RANGE)),
    }
}

fn above_min(member: &[u8], min: &Lex) -> bool {
    match min {
        Lex::Min => true,
        Lex::Max => false,
        Lex::Included(m) => member >= m.as_slice(),
        Lex::Excluded(m) => member > m.as_slice(),
    }
}

fn below_max(member: &[u8], max: &Lex) -> bool {
    match max {
        Lex::Min => false,
        Lex::Max => true,
        Lex::Included(m) => member <= m.as_slice(),
        Lex::Excluded(m) => member < m.as_slice(),
    }
}

/// Orders two lex bounds' values (`-` lowest, `+` highest), as sdscmplex.
fn lex_cmp(a: &Lex, b: &Lex) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    let rank = |l: &Lex| match l {
        Lex::Min => 0,
        Lex::Included(_) | Lex::Excluded(_) => 1,
        Lex::Max => 2,
    };
    match (a, b) {
        (Lex::Included(x) | Lex::Excluded(x), Lex::Included(y) | Lex::Excluded(y)) => x.cmp(y),
        _ => match rank(a).cmp(&rank(b)) {
            Equal => Equal,
            other => other,
        },
    }
}

/// Where a lex range starts and ends in score order, as Redis's listpack
/// code finds them (`zzlFirstInLexRange`, `zzlLastInLexRange`): the first
/// member at or above `min`, if it is within `max`; the last member at or
/// below `max`, if it is within `min`. Lex ranges are meant for sets whose
/// members share one score; this reproduces Redis's answers when they do
/// not, too.
fn lex_ends(members: &[(&[u8], f64)], min: &Lex, max: &Lex) -> Option<(usize, usize)> {
    let cmp = lex_cmp(min, max);
    let exclusive = matches!(min, Lex::Excluded(_)) || matches!(max, Lex::Excluded(_));
    if cmp.is_gt() || (cmp.is_eq() && exclusive) {
        return None;
    }
    let (first, last) = (members.first()?, members.last()?);
    if !above_min(last.0, min) || !below_max(first.0, max) {
        return None;
    }
    let start = members.iter().position(|(m, _)| above_min(m, min))?;
    let end = members.iter().rposition(|(m, _)| below_max(m, max))?;
    (below_max(members[start].0, max) && above_min(members[end].0, min)).then_some((start, end))
}

/// Members of a lex range in reply order: forward from the first member in
/// range while within `max`, or (reverse) back from the last while within
/// `min`, as Redis walks them.
fn lex_members<'z>(zset: &'z ZSet, min: &Lex, max: &Lex, reverse: bool) -> Vec<(&'z [u8], f64)> {
    let members: Vec<_> = zset.iter().collect();
    let Some((start, end)) = lex_ends(&members, min, max) else {
        return Vec::new();
    };
    if reverse {
        members[..=end]
            .iter()
            .rev()
            .take_while(|(m, _)| above_min(m, min))
            .copied()
            .collect()
    } else {
        members[start..]
            .iter()
            .take_while(|(m, _)| below_max(m, max))
            .copied()
            .collect()
    }
}

/// ZCOUNT key min max
pub fn zcount(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let (min, max) = match score_range(argv[2], argv[3]) {
        Ok(range) => range,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    either(
        read::<ZSet, _>(&mut shard, key, ctx.now_ms, |zset| {
            zset.range_by_score(min, max).count() as i64
        })
        .map(|r| Reply::Int(r.unwrap_or(0))),
    )
}

/// ZLEXCOUNT key min max
pub fn zlexcount(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let (min, max) = match lex_range(argv[2], argv[3]) {
        Ok(range) => range,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    either(
        read::<ZSet, _>(&mut shard, key, ctx.now_ms, |zset| {
            // Counted by walking forward from the first member in range, as
            // Redis does for a listpack.
            lex_members(zset, &min, &max, false).len() as i64
        })
        .map(|r| Reply::Int(r.unwrap_or(0))),
    )
}

/// The kind of range a ZRANGE-family command selects by.
#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Auto,
    Rank,
    Score,
    Lex,
}

/// How a ZRANGE-family command was called.
struct RangeCall {
    /// Index of the source key in argv.
    key: usize,
    by: By,
    /// `Some(true)` for the REV forms, `None` when REV may be given.
    reverse: Option<bool>,
    /// ZRANGESTORE: the destination's argv index.
    store: Option<usize>,
}

/// A parsed range, resolved against one sorted set.
enum Range {
    Rank(i64, i64),
    Score(Bound<f64>, Bound<f64>),
    Lex(Lex, Lex),
}

/// Redis's zrangeGenericCommand: options, conflicts, range parsing, lookup.
fn zrange_generic(ctx: &mut Ctx<'_>, argv: &[&[u8]], call: RangeCall) -> Reply {
    let mut by = call.by;
    let mut reverse = call.reverse;
    let mut with_scores = false;
    let mut limit: Option<(i64, i64)> = None;
    let mut j = call.key + 3;
    while j < argv.len() {
        let left = argv.len() - j - 1;
        if call.store.is_none() && is(argv[j], "withscores") {
            with_scores = true;
        } else if is(argv[j], "limit") && left >= 2 {
            match int_pair(argv[j + 1], argv[j + 2]) {
                Ok(pair) => limit = Some(pair),
                Err(reply) => return reply,
            }
            j += 2;
        } else if reverse.is_none() && is(argv[j], "rev") {
            reverse = Some(true);
        } else if by == By::Auto && is(argv[j], "bylex") {
            by = By::Lex;
        } else if by == By::Auto && is(argv[j], "byscore") {
            by = By::Score;
        } else {
            return Reply::error(error::SYNTAX);
        }
        j += 1;
    }
    let reverse = reverse.unwrap_or(false);
    if by == By::Auto {
        by = By::Rank;
    }
    // Redis 7.0 tests only the count: `LIMIT <offset> -1` (the default
    // count) passes with a rank range, and the offset is then ignored.
    if limit.is_some_and(|(_, count)| count != -1) && by == By::Rank {
        return Reply::error(error::LIMIT_NEEDS_BY);
    }
    if with_scores && by == By::Lex {
        return Reply::error(error::BYLEX_WITHSCORES);
    }
    let (mut lo, mut hi) = (argv[call.key + 1], argv[call.key + 2]);
    if reverse && by != By::Rank {
        // The reverse forms take the range as max, min.
        std::mem::swap(&mut lo, &mut hi);
    }
    let range = match by {
        By::Score => match score_range(lo, hi) {
            Ok((a, b)) => Range::Score(a, b),
            Err(reply) => return reply,
        },
        By::Lex => match lex_range(lo, hi) {
            Ok((a, b)) => Range::Lex(a, b),
            Err(reply) => return reply,
        },
        _ => match int_pair(lo, hi) {
            Ok((a, b)) => Range::Rank(a, b),
            Err(reply) => return reply,
        },
    };
    let proto = ctx.client.proto;
    let now = ctx.now_ms;
    let source = ctx.key(argv[call.key]);
    let Some(dst_index) = call.store else {
        let mut shard = ctx.lock(source);
        let found = read::<ZSet, _>(&mut shard, source, now, |zset| {
            member_score(proto, select(zset, &range, reverse, limit), with_scores)
        });
        return either(found.map(|r| r.unwrap_or(Reply::Array(Vec::new()))));
    };
    let dst = ctx.key(argv[dst_index]);
    let limits = ctx.shared.encodings.get();
    let mut locked = ctx.lock_keys(&[source, dst]);
    let selected = read::<ZSet, _>(locked.shard(source), source, now, |zset| {
        let mut out = ZSet::default();
        for (member, score) in select(zset, &range, reverse, limit) {
            out.insert(member, score, &limits);
        }
        out
    });
    let result = match selected {
        Ok(result) => result.unwrap_or_default(),
        Err(reply) => return reply,
    };
    let shard = locked.shard(dst);
    let len = result.len() as i64;
    if len == 0 {
        if shard.remove(dst, now) {
            ctx.notify(class::GENERIC, "del", argv[dst_index]);
        }
        return Reply::Int(0);
    }
    // Replaced in place (a destination that existed is not `new`).
    shard.set_object(dst, Box::new(Object::ZSet(result)), 0, now);
    ctx.notify(class::ZSET, "zrangestore", argv[dst_index]);
    Reply::Int(len)
}

/// The members a range selects, in reply order, after LIMIT.
fn select<'z>(
    zset: &'z ZSet,
    range: &Range,
    reverse: bool,
    limit: Option<(i64, i64)>,
) -> Vec<(&'z [u8], f64)> {
    let (offset, count) = limit.unwrap_or((0, -1));
    if offset < 0 {
        // Redis skips while `offset--` is non-zero: a negative offset
        // skips everything.
        return Vec::new();
    }
    let take = if count < 0 {
        usize::MAX
    } else {
        count as usize
    };
    let skip = offset as usize;
    match range {
        Range::Rank(start, stop) => {
            let r = index_range(*start, *stop, zset.len());
            if reverse {
                zset.iter().rev().skip(r.start).take(r.len()).collect()
            } else {
                zset.iter().skip(r.start).take(r.len()).collect()
            }
        }
        Range::Score(min, max) => {
            let found = zset.range_by_score(*min, *max);
            if reverse {
                found.rev().skip(skip).take(take).collect()
            } else {
                found.skip(skip).take(take).collect()
            }
        }
        Range::Lex(min, max) => {
            let found = lex_members(zset, min, max, reverse);
            found.into_iter().skip(skip).take(take).collect()
        }
    }
}

/// ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
pub fn zrange(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    zrange_generic(
        ctx,
        argv,
        RangeCall {
            key: 1,
            by: By::Auto,
            reverse: None,
            store: None,
        },
    )
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
pub fn zrangestore(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    zrange_generic(
        ctx,
        argv,
        RangeCall {
            key: 2,
            by: By::Auto,
            reverse: None,
            store: Some(1),
        },
    )
}

/// ZREVRANGE key start stop [WITHSCORES]
pub fn zrevrange(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    zrange_generic(
        ctx,
        argv,
        RangeCall {
            key: 1,
            by: By::Rank,
            reverse: Some(true),
            store: None,
        },
    )
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
pub fn zrangebyscore(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    zrange_generic(
        ctx,
        argv,
        RangeCall {
            key: 1,
            by: By::Score,
            reverse: Some(false),
            store: None,
        },
    )
}

/// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]
pub fn zrevrangebyscore(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    zrange_generic(
        ctx,
        argv,
        RangeCall {
            key: 1,
            by: By::Score,
            reverse: Some(true),
            store: None,
        },
    )
}

/// ZRANGEBYLEX key min max [LIMIT offset count]
pub fn zrangebylex(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    zrange_generic(
        ctx,
        argv,
        RangeCall {
            key: 1,
            by: By::Lex,
            reverse: Some(false),
            store: None,
        },
    )
}

/// ZREVRANGEBYLEX key max min [LIMIT offset count]
pub fn zrevrangebylex(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    zrange_generic(
        ctx,
        argv,
        RangeCall {
            key: 1,
            by: By::Lex,
            reverse: Some(true),
            store: None,
        },
    )
}

fn remove_range(ctx: &mut Ctx<'_>, argv: &[&[u8]], range: Range) -> Reply {
    let event = match range {
        Range::Rank(..) => "zremrangebyrank",
        Range::Score(..) => "zremrangebyscore",
        Range::Lex(..) => "zremrangebylex",
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let removed = modify_notify_if::<ZSet, _>(
        ctx,
        &mut shard,
        key,
        false,
        Event(class::ZSET, event),
        |zset| {
            let doomed: Vec<Vec<u8>> = select(zset, &range, false, None)
                .into_iter()
                .map(|(m, _)| m.to_vec())
                .collect();
            for member in &doomed {
                zset.remove(member);
            }
            doomed.len() as i64
        },
        |&removed| removed > 0,
    );
    either(removed.map(|r| Reply::Int(r.unwrap_or(0))))
}

/// ZREMRANGEBYRANK key start stop
pub fn zremrangebyrank(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    match int_pair(argv[2], argv[3]) {
        Ok((a, b)) => remove_range(ctx, argv, Range::Rank(a, b)),
        Err(reply) => reply,
    }
}

/// ZREMRANGEBYSCORE key min max
pub fn zremrangebyscore(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    match score_range(argv[2], argv[3]) {
        Ok((a, b)) => remove_range(ctx, argv, Range::Score(a, b)),
        Err(reply) => reply,
    }
}

/// ZREMRANGEBYLEX key min max
pub fn zremrangebylex(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    match lex_range(argv[2], argv[3]) {
        Ok((a, b)) => remove_range(ctx, argv, Range::Lex(a, b)),
        Err(reply) => reply,
    }
}
