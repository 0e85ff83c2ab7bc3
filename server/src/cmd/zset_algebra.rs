//! Sorted-set algebra: ZUNION, ZINTER, ZDIFF, their STORE forms and
//! ZINTERCARD, as Redis 7.0's zunionInterDiffGenericCommand computes them.
//! Sets count as sorted sets whose scores are all 1. Scores are combined in
//! Redis's order (the inputs from the smallest to the largest, for union
//! and intersection), so that floating-point sums come out to the bit.

use super::args::{int_arg, is};
use super::collection::pairs;
use super::error;
use super::Ctx;
use crate::event_classes::class;
use crate::resp::Reply;
use crate::store::object::{Member, Object, ZSet};
use crate::store::{KeyRef, ValueRef};

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// Redis's zunionInterAggregate.
fn aggregate(target: &mut f64, value: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *target += value;
            // +inf and -inf make NaN, which no score may be.
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => *target = if value < *target { value } else { *target },
        Aggregate::Max => *target = if value > *target { value } else { *target },
    }
}

/// One input: its members and scores in its own order, the same by
/// member, and its weight.
struct Source {
    members: Vec<(Vec<u8>, f64)>,
    scores: hashbrown::HashMap<Vec<u8>, f64>,
    weight: f64,
}

impl Source {
    fn new(members: Vec<(Vec<u8>, f64)>) -> Source {
        let scores = members.iter().cloned().collect();
        Source {
            members,
            scores,
            weight: 1.0,
        }
    }

    fn find(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }
}

/// ZUNION numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub fn zunion(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    generic(ctx, argv, None, Op::Union, false)
}

/// ZINTER numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub fn zinter(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    generic(ctx, argv, None, Op::Inter, false)
}

/// ZDIFF numkeys key [key ...] [WITHSCORES]
pub fn zdiff(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    generic(ctx, argv, None, Op::Diff, false)
}

/// ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS ...] [AGGREGATE ...]
pub fn zunionstore(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    generic(ctx, argv, Some(argv[1]), Op::Union, false)
}

/// ZINTERSTORE destination numkeys key [key ...] [WEIGHTS ...] [AGGREGATE ...]
pub fn zinterstore(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    generic(ctx, argv, Some(argv[1]), Op::Inter, false)
}

/// ZDIFFSTORE destination numkeys key [key ...]
pub fn zdiffstore(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    generic(ctx, argv, Some(argv[1]), Op::Diff, false)
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]
pub fn zintercard(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    generic(ctx, argv, None, Op::Inter, true)
}

fn generic(
    ctx: &mut Ctx<'_>,
    argv: &[&[u8]],
    destination: Option<&[u8]>,
    op: Op,
    cardinality_only: bool,
) -> Reply {
    let numkeys_at = if destination.is_some() { 2 } else { 1 };
    let count = match int_arg(argv[numkeys_at]) {
        Ok(n) => n,
        Err(reply) => return reply,
    };
    if count < 1 {
        let name = String::from_utf8_lossy(argv[0]).to_lowercase();
        return Reply::error(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        ));
    }
    if count > (argv.len() - numkeys_at - 1) as i64 {
        return Reply::error(error::SYNTAX);
    }
    let count = count as usize;
    let first = numkeys_at + 1;
    let keys: Vec<KeyRef<'_>> = argv[first..first + count]
        .iter()
        .map(|k| ctx.key(k))
        .collect();
    let dst = destination.map(|d| ctx.key(d));
    let now = ctx.now_ms;
    let limits = ctx.shared.encodings.get();
    let proto = ctx.client.proto;
    let mut locked = ctx.lock_keys(&keys.iter().copied().chain(dst).collect::<Vec<_>>());
    // Every input is read, and its type checked, before the options.
    let mut sources = Vec::with_capacity(count);
    for key in &keys {
        let members = match locked.shard(*key).lookup_read(*key, now).map(|e| e.value()) {
            None => Vec::new(),
            Some(ValueRef::Obj(Object::ZSet(zset))) => {
                zset.iter().map(|(m, s)| (m.to_vec(), s)).collect()
            }
            Some(ValueRef::Obj(Object::Set(set))) => {
                set.iter().map(|m: Member<'_>| (m.to_vec(), 1.0)).collect()
            }
            Some(_) => return Reply::error(error::WRONGTYPE),
        };
        sources.push(Source::new(members));
    }
    let mut how = Aggregate::Sum;
    let mut with_scores = false;
    let mut limit = 0usize;
    let mut j = first + count;
    while j < argv.len() {
        let remaining = argv.len() - j;
        let word = argv[j];
        if op != Op::Diff && !cardinality_only && remaining > count && is(word, "weights") {
            for (i, source) in sources.iter_mut().enumerate() {
                match crate::float::string2d(argv[j + 1 + i]) {
                    Some(weight) => source.weight = weight,
                    None => return Reply::error(error::WEIGHT_NOT_FLOAT),
                }
            }
            j += 1 + count;
        } else if op != Op::Diff && !cardinality_only && remaining >= 2 && is(word, "aggregate") {
            how = match argv[j + 1] {
                w if is(w, "sum") => Aggregate::Sum,
                w if is(w, "min") => Aggregate::Min,
                w if is(w, "max") => Aggregate::Max,
                _ => return Reply::error(error::SYNTAX),
            };
            j += 2;
        } else if destination.is_none() && !cardinality_only && is(word, "withscores") {
            with_scores = true;
            j += 1;
        } else if cardinality_only && remaining >= 2 && is(word, "limit") {
            limit = match int_arg(argv[j + 1]) {
                Ok(n) if n >= 0 => n as usize,
                _ => return Reply::error(error::LIMIT_NEGATIVE),
            };
            j += 2;
        } else {
            return Reply::error(error::SYNTAX);
        }
    }
    if op != Op::Diff {
        // Smallest first, as Redis orders them (a stable sort: its qsort
        // keeps equal sizes in order on these short arrays).
        sources.sort_by_key(|s| s.members.len());
    }
    let mut result: Vec<(Vec<u8>, f64)> = Vec::new();
    let mut cardinality = 0usize;
    match op {
        Op::Inter => {
            for (member, score) in &sources[0].members {
                let mut total = sources[0].weight * score;
                if total.is_nan() {
                    total = 0.0;
                }
                let mut everywhere = true;
                for source in &sources[1..] {
                    match source.find(member) {
                        Some(value) => aggregate(&mut total, value * source.weight, how),
                        None => {
                            everywhere = false;
                            break;
                        }
                    }
                }
                if !everywhere {
                    continue;
                }
                if cardinality_only {
                    cardinality += 1;
                    if limit != 0 && cardinality >= limit {
                        break;
                    }
                } else {
                    result.push((member.clone(), total));
                }
            }
        }
        Op::Union => {
            let mut index: hashbrown::HashMap<Vec<u8>, usize> = hashbrown::HashMap::new();
            for source in &sources {
                for (member, score) in &source.members {
                    let mut value = source.weight * score;
                    if value.is_nan() {
                        value = 0.0;
                    }
                    match index.get(member) {
                        Some(&at) => aggregate(&mut result[at].1, value, how),
                        None => {
                            index.insert(member.clone(), result.len());
                            result.push((member.clone(), value));
                        }
                    }
                }
            }
        }
        Op::Diff => {
            for (member, score) in &sources[0].members {
                if sources[1..].iter().all(|s| s.find(member).is_none()) {
                    result.push((member.clone(), *score));
                }
            }
        }
    }
    if cardinality_only {
        return Reply::Int(cardinality as i64);
    }
    // A sorted set's order: by score, then by member.
    result.sort_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
    let Some(dst) = dst else {
        return if with_scores {
            pairs(
                proto,
                result
                    .into_iter()
                    .map(|(m, s)| (Reply::Bulk(m), Reply::Double(s)))
                    .collect(),
            )
        } else {
            Reply::Array(result.into_iter().map(|(m, _)| Reply::Bulk(m)).collect())
        };
    };
    let shard = locked.shard(dst);
    if result.is_empty() {
        if shard.remove(dst, now) {
            ctx.notify(class::GENERIC, "del", argv[1]);
        }
        return Reply::Int(0);
    }
    let mut zset = ZSet::default();
    for (member, score) in &result {
        zset.insert(member, *score, &limits);
    }
    let len = zset.len() as i64;
    // Replaced in place (a destination that existed is not `new`).
    shard.set_object(dst, Box::new(Object::ZSet(zset)), 0, now);
    let event = match op {
        Op::Union => "zunionstore",
        Op::Inter => "zinterstore",
        Op::Diff => "zdiffstore",
    };
    ctx.notify(class::ZSET, event, argv[1]);
    Reply::Int(len)
}
