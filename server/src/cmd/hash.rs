//! Hash commands: HSET HGET HINCRBY and the rest of the family.

use super::args::{int_arg, is};
use super::collection::{
    either, exists_as, missing_pick, modify_notify, modify_notify_if, pairs, random_pick_args,
    read, scan_collection, Event,
};
use super::error;
use super::propagate;
use super::Ctx;
use crate::event_classes::class;
use crate::float::{add_human, AddError};
use crate::resp::Reply;
use crate::store::object::Hash;

/// HSET key field value [field value ...]
pub fn hset(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    set_fields(ctx, argv, "hset").map_or_else(|r| r, Reply::Int)
}

/// HMSET key field value [field value ...]
pub fn hmset(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    set_fields(ctx, argv, "hmset").map_or_else(|r| r, |_| Reply::Ok)
}

fn set_fields(ctx: &mut Ctx<'_>, argv: &[&[u8]], name: &str) -> Result<i64, Reply> {
    if argv.len() % 2 == 1 {
        return Err(Reply::error(error::wrong_arity(name)));
    }
    let key = ctx.key(argv[1]);
    let limits = ctx.shared.encodings.get();
    let mut shard = ctx.lock(key);
    let event = Event(class::HASH, "hset");
    let added = modify_notify::<Hash, _>(ctx, &mut shard, key, true, event, |hash| {
        argv[2..]
            .chunks_exact(2)
            .filter(|pair| hash.insert(pair[0], pair[1], &limits))
            .count() as i64
    })?;
    Ok(added.unwrap_or(0))
}

/// HSETNX key field value
pub fn hsetnx(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let limits = ctx.shared.encodings.get();
    let mut shard = ctx.lock(key);
    let set = modify_notify_if::<Hash, _>(
        ctx,
        &mut shard,
        key,
        true,
        Event(class::HASH, "hset"),
        |hash| {
            if hash.get(argv[2]).is_some() {
                Reply::Int(0)
            } else {
                hash.insert(argv[2], argv[3], &limits);
                Reply::Int(1)
            }
        },
        |reply| *reply == Reply::Int(1),
    );
    either(set.map(|r| r.unwrap_or(Reply::Int(0))))
}

/// HGET key field
pub fn hget(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    either(
        read::<Hash, _>(&mut shard, key, ctx.now_ms, |hash| {
            hash.get(argv[2]).map_or(Reply::Nil, Reply::bulk)
        })
        .map(|r| r.unwrap_or(Reply::Nil)),
    )
}

/// HMGET key field [field ...]
pub fn hmget(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let fields = &argv[2..];
    either(
        read::<Hash, _>(&mut shard, key, ctx.now_ms, |hash| {
            Reply::Array(
                fields
                    .iter()
                    .map(|f| hash.get(f).map_or(Reply::Nil, Reply::bulk))
                    .collect(),
            )
        })
        .map(|r| r.unwrap_or_else(|| Reply::Array(vec![Reply::Nil; fields.len()]))),
    )
}

/// Which parts of each field HGETALL, HKEYS and HVALS send.
#[derive(Clone, Copy)]
enum Parts {
    Both,
    Fields,
    Values,
}

fn all_of(ctx: &mut Ctx<'_>, argv: &[&[u8]], parts: Parts) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let found = read::<Hash, _>(&mut shard, key, ctx.now_ms, |hash| match parts {
        Parts::Both => Reply::Map(
            hash.iter()
                .map(|(f, v)| (Reply::bulk(f), Reply::bulk(v)))
                .collect(),
        ),
        Parts::Fields => Reply::Array(hash.iter().map(|(f, _)| Reply::bulk(f)).collect()),
        Parts::Values => Reply::Array(hash.iter().map(|(_, v)| Reply::bulk(v)).collect()),
    });
    either(found.map(|r| {
        r.unwrap_or(match parts {
            Parts::Both => Reply::Map(Vec::new()),
            _ => Reply::Array(Vec::new()),
        })
    }))
}

/// HGETALL key
pub fn hgetall(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    all_of(ctx, argv, Parts::Both)
}

/// HKEYS key
pub fn hkeys(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    all_of(ctx, argv, Parts::Fields)
}

/// HVALS key
pub fn hvals(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    all_of(ctx, argv, Parts::Values)
}

/// HDEL key field [field ...]
pub fn hdel(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let removed = modify_notify_if::<Hash, _>(
        ctx,
        &mut shard,
        key,
        false,
        Event(class::HASH, "hdel"),
        |hash| argv[2..].iter().filter(|f| hash.remove(f)).count() as i64,
        |&removed| removed > 0,
    );
    either(removed.map(|r| Reply::Int(r.unwrap_or(0))))
}

/// HGETDEL key FIELDS numfields field [field ...] (Redis 8.0): each
/// field's value (nil for a missing one), deleting those found; the key
/// goes with its last field. Checks and errors in Redis 8's order (the
/// key's type, then FIELDS, then the count).
pub fn hgetdel(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    if let Err(reply) = exists_as::<Hash>(&mut shard, key, ctx.now_ms) {
        return reply;
    }
    if !is(argv[2], "fields") {
        return Reply::error(error::FIELDS_MISSING);
    }
    let count = match super::args::parse_i64(argv[3]) {
        Some(n) if n >= 1 => n as u64,
        _ => return Reply::error("ERR Number of fields must be a positive integer"),
    };
    let fields = &argv[4..];
    if count != fields.len() as u64 {
        return Reply::error("ERR The `numfields` parameter must match the number of arguments");
    }
    let taken = modify_notify_if::<Hash, _>(
        ctx,
        &mut shard,
        key,
        false,
        Event(class::HASH, "hdel"),
        |hash| {
            fields
                .iter()
                .map(|field| {
                    let value = hash.get(field).map(<[u8]>::to_vec);
                    if value.is_some() {
                        hash.remove(field);
                    }
                    value
                })
                .collect::<Vec<_>>()
        },
        |values| values.iter().any(Option::is_some),
    );
    let values = match taken {
        Ok(Some(values)) => values,
        Ok(None) => vec![None; fields.len()],
        Err(reply) => return reply,
    };
    Reply::Array(
        values
            .into_iter()
            .map(|v| v.map_or(Reply::Nil, Reply::Bulk))
            .collect(),
    )
}

/// HEXISTS key field
pub fn hexists(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    either(
        read::<Hash, _>(&mut shard, key, ctx.now_ms, |hash| {
            hash.get(argv[2]).is_some()
        })
        .map(|r| Reply::Int(r.unwrap_or(false) as i64)),
    )
}

/// HLEN key
pub fn hlen(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    either(
        read::<Hash, _>(&mut shard, key, ctx.now_ms, |hash| hash.len() as i64)
            .map(|r| Reply::Int(r.unwrap_or(0))),
    )
}

/// HSTRLEN key field
pub fn hstrlen(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    either(
        read::<Hash, _>(&mut shard, key, ctx.now_ms, |hash| {
            hash.get(argv[2]).map_or(0, |v| v.len() as i64)
        })
        .map(|r| Reply::Int(r.unwrap_or(0))),
    )
}

/// HINCRBY key field increment
pub fn hincrby(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let delta = match int_arg(argv[3]) {
        Ok(n) => n,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let limits = ctx.shared.encodings.get();
    let mut shard = ctx.lock(key);
    // A field that is not a number changes nothing and signals nothing.
    let result = modify_notify_if::<Hash, _>(
        ctx,
        &mut shard,
        key,
        true,
        Event(class::HASH, "hincrby"),
        |hash| {
            let current = match hash.get(argv[2]) {
                Some(value) => match super::args::parse_i64(value) {
                    Some(n) => n,
                    None => return Reply::error(error::HASH_NOT_INTEGER),
                },
                None => 0,
            };
            let Some(next) = current.checked_add(delta) else {
                return Reply::error(error::OVERFLOW);
            };
            hash.insert_keeping_deadline(
                argv[2],
                itoa::Buffer::new().format(next).as_bytes(),
                &limits,
            );
            Reply::Int(next)
        },
        |reply| !reply.is_error(),
    );
    either(result.map(|r| r.unwrap_or(Reply::Nil)))
}

/// HINCRBYFLOAT key field increment
pub fn hincrbyfloat(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    // The increment is checked before the key, as Redis does.
    match add_human(b"0", argv[3]) {
        Err(AddError::NotAFloat) => return Reply::error(error::NOT_FLOAT),
        Err(AddError::NanOrInfinity) => return Reply::error(error::VALUE_NAN_OR_INFINITY),
        Ok(_) => {}
    }
    let key = ctx.key(argv[1]);
    let limits = ctx.shared.encodings.get();
    let mut shard = ctx.lock(key);
    let result = modify_notify_if::<Hash, _>(
        ctx,
        &mut shard,
        key,
        true,
        Event(class::HASH, "hincrbyfloat"),
        |hash| {
            let current = hash.get(argv[2]).unwrap_or(b"0");
            match add_human(current, argv[3]) {
                Ok(sum) => {
                    hash.insert_keeping_deadline(argv[2], &sum, &limits);
                    (Reply::Bulk(sum), hash.deadline(argv[2]))
                }
                Err(AddError::NotAFloat) => (Reply::error(error::HASH_NOT_FLOAT), None),
                Err(AddError::NanOrInfinity) => (Reply::error(error::NAN_OR_INFINITY), None),
            }
        },
        |(reply, _)| !reply.is_error(),
    );
    let (reply, deadline) = match result {
        Ok(Some(outcome)) => outcome,
        Ok(None) => (Reply::Nil, None),
        Err(reply) => return reply,
    };
    // Logged as the value it produced (a replay must not compute a float
    // again), then the field's deadline, which that HSET would drop.
    if let Reply::Bulk(value) = &reply {
        let field = argv[2];
        propagate::effect(ctx, &[b"HSET", argv[1], field, value]);
        if let Some(at) = deadline {
            let at = at.to_string();
            propagate::effect(
                ctx,
                &[
                    b"HPEXPIREAT",
                    argv[1],
                    at.as_bytes(),
                    b"FIELDS",
                    b"1",
                    field,
                ],
            );
        }
    }
    reply
}

/// HRANDFIELD key [count [WITHVALUES]]
pub fn hrandfield(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let (count, with_values) = match random_pick_args(argv, Some("withvalues")) {
        Ok(args) => args,
        Err(reply) => return reply,
    };
    let proto = ctx.client.proto;
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let found = read::<Hash, _>(&mut shard, key, ctx.now_ms, |hash| {
        let chosen = hash.random_fields(count).into_iter();
        if count.is_none() {
            return chosen
                .map(|(f, _)| f)
                .next()
                .map_or(Reply::Nil, Reply::bulk);
        }
        if with_values {
            pairs(
                proto,
                chosen
                    .map(|(f, v)| (Reply::bulk(f), Reply::bulk(v)))
                    .collect(),
            )
        } else {
            Reply::Array(chosen.map(|(f, _)| Reply::bulk(f)).collect())
        }
    });
    either(found.map(|r| r.unwrap_or_else(|| missing_pick(count))))
}

/// HSCAN key cursor [MATCH pattern] [COUNT count]
pub fn hscan(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    scan_collection::<Hash>(ctx, argv, |hash, options| {
        let (next, fields) = hash.scan_page(options.cursor, options.count);
        let fields = fields
            .into_iter()
            .filter(|(f, _)| options.keeps(f))
            .flat_map(|(f, v)| [Reply::bulk(f), Reply::bulk(v)])
            .collect();
        (next, fields)
    })
}
