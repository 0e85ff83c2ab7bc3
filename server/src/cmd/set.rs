//! Set commands: SADD SREM SMEMBERS, the set algebra and random picks.

use super::args::is;
use super::collection::{
    either, exists_as, missing_pick, modify, modify_if, modify_notify_if, notify_changed,
    positive_count, random_pick_args, read, read_for_write, scan_collection, Event,
};
use super::error;
use super::Ctx;
use crate::event_classes::class;
use crate::resp::Reply;
use crate::store::object::{Encodings, Member, Set};
use crate::store::{KeyRef, MultiLock};

fn member_reply(member: Member<'_>) -> Reply {
    match member {
        Member::Int(n) => Reply::BulkInt(n),
        Member::Bytes(bytes) => Reply::bulk(bytes),
    }
}

/// SADD key member [member ...]
pub fn sadd(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let limits = ctx.shared.encodings.get();
    let mut shard = ctx.lock(key);
    let added = modify_notify_if::<Set, _>(
        ctx,
        &mut shard,
        key,
        true,
        Event(class::SET, "sadd"),
        |set| argv[2..].iter().filter(|m| set.insert(m, &limits)).count() as i64,
        |&added| added > 0,
    );
    either(added.map(|r| Reply::Int(r.unwrap_or(0))))
}

/// SREM key member [member ...]
pub fn srem(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let removed = modify_notify_if::<Set, _>(
        ctx,
        &mut shard,
        key,
        false,
        Event(class::SET, "srem"),
        |set| argv[2..].iter().filter(|m| set.remove(m)).count() as i64,
        |&removed| removed > 0,
    );
    either(removed.map(|r| Reply::Int(r.unwrap_or(0))))
}

/// SMEMBERS key
pub fn smembers(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    either(
        read::<Set, _>(&mut shard, key, ctx.now_ms, |set| {
            Reply::Set(set.iter().map(member_reply).collect())
        })
        .map(|r| r.unwrap_or(Reply::Set(Vec::new()))),
    )
}

/// SISMEMBER key member
pub fn sismember(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    either(
        read::<Set, _>(&mut shard, key, ctx.now_ms, |set| set.contains(argv[2]))
            .map(|r| Reply::Int(r.unwrap_or(false) as i64)),
    )
}

/// SMISMEMBER key member [member ...]
pub fn smismember(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let members = &argv[2..];
    either(
        read::<Set, _>(&mut shard, key, ctx.now_ms, |set| {
            members
                .iter()
                .map(|m| Reply::Int(set.contains(m) as i64))
                .collect()
        })
        .map(|r| Reply::Array(r.unwrap_or_else(|| vec![Reply::Int(0); members.len()]))),
    )
}

/// SCARD key
pub fn scard(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    either(
        read::<Set, _>(&mut shard, key, ctx.now_ms, |set| set.len() as i64)
            .map(|r| Reply::Int(r.unwrap_or(0))),
    )
}

/// SPOP key [count]
pub fn spop(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if argv.len() > 3 {
        return Reply::error(error::SYNTAX);
    }
    let count = match argv.get(2).map(|c| positive_count(c)).transpose() {
        Ok(count) => count,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    // SPOP key 0 removes nothing and signals nothing.
    let popped = modify_notify_if::<Set, _>(
        ctx,
        &mut shard,
        key,
        false,
        Event(class::SET, "spop"),
        |set| {
            let members: Vec<Vec<u8>> = set
                .random_members(count.unwrap_or(1).min(set.len()) as i64)
                .into_iter()
                .map(Member::to_vec)
                .collect();
            for member in &members {
                set.remove(member);
            }
            let replies = members.into_iter().map(Reply::Bulk);
            match count {
                None => replies.into_iter().next().unwrap_or(Reply::Nil),
                Some(_) => Reply::Set(replies.collect()),
            }
        },
        |_| count != Some(0),
    );
    either(popped.map(|r| {
        r.unwrap_or(match count {
            None => Reply::Nil,
            Some(_) => Reply::Set(Vec::new()),
        })
    }))
}

/// SRANDMEMBER key [count]
pub fn srandmember(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let count = match random_pick_args(argv, None) {
        Ok((count, _)) => count,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let found = read::<Set, _>(&mut shard, key, ctx.now_ms, |set| match count {
        None => set.random_member().map_or(Reply::Nil, member_reply),
        Some(n) => Reply::Array(
            set.random_members(n)
                .into_iter()
                .map(member_reply)
                .collect(),
        ),
    });
    either(found.map(|r| r.unwrap_or_else(|| missing_pick(count))))
}

/// SMOVE source destination member
pub fn smove(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let (src, dst) = (ctx.key(argv[1]), ctx.key(argv[2]));
    let now = ctx.now_ms;
    let limits = ctx.shared.encodings.get();
    let mut locked = ctx.lock_keys(&[src, dst]);
    let in_source =
        match read_for_write::<Set, _>(locked.shard(src), src, now, |set| set.contains(argv[3])) {
            Ok(Some(found)) => found,
            // A missing source answers 0 before the destination's type is
            // looked at, as in Redis.
            Ok(None) => return Reply::Int(0),
            Err(reply) => return reply,
        };
    if let Err(reply) = exists_as::<Set>(locked.shard(dst), dst, now) {
        return reply;
    }
    if !in_source {
        return Reply::Int(0);
    }
    if argv[1] == argv[2] {
        return Reply::Int(1);
    }
    let _ = modify::<Set, _>(locked.shard(src), src, now, false, |set| {
        set.remove(argv[3])
    });
    notify_changed(ctx, locked.shard(src), src, Event(class::SET, "srem"));
    // The destination is signalled only when the member was new there.
    let added = modify_if::<Set, _>(
        locked.shard(dst),
        dst,
        now,
        true,
        |set| set.insert(argv[3], &limits),
        |&added| added,
    );
    if let Ok(Some(true)) = added {
        ctx.notify(class::SET, "sadd", argv[2]);
    }
    Reply::Int(1)
}

/// The set algebra of SINTER, SUNION and SDIFF.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Algebra {
    Inter,
    Union,
    Diff,
}

/// Computes the algebra over the sets at `keys` (all locked). A missing key
/// is an empty set; any other type is WRONGTYPE, checked for every key
/// before the result (as Redis does for the intersection's early exit too).
/// The sources are read lookups even for the *STORE forms, as in Redis 7.0.
fn combine(
    locked: &mut MultiLock<'_>,
    keys: &[KeyRef<'_>],
    limits: &Encodings,
    now: u64,
    algebra: Algebra,
    limit: usize,
) -> Result<Vec<Vec<u8>>, Reply> {
    let mut sets: Vec<Option<Set>> = Vec::with_capacity(keys.len());
    for key in keys {
        sets.push(read::<Set, _>(locked.shard(*key), *key, now, Set::clone)?);
    }
    let members = |set: &Set| set.iter().map(Member::to_vec).collect::<Vec<_>>();
    let result = match algebra {
        Algebra::Inter => {
            if sets.iter().any(Option::is_none) {
                return Ok(Vec::new());
            }
            let mut sets: Vec<Set> = sets.into_iter().flatten().collect();
            // Walk the smallest set, as Redis does (so its order is kept).
            sets.sort_by_key(Set::len);
            let mut out = Vec::new();
            for member in members(&sets[0]) {
                if out.len() >= limit {
                    break;
                }
                if sets[1..].iter().all(|s| s.contains(&member)) {
                    out.push(member);
                }
            }
            out
        }
        Algebra::Union => {
            let mut union = Set::default();
            for set in sets.iter().flatten() {
                for member in members(set) {
                    union.insert(&member, limits);
                }
            }
            members(&union)
        }
        Algebra::Diff => match &sets[0] {
            None => Vec::new(),
            Some(first) => members(first)
                .into_iter()
                .filter(|m| !sets[1..].iter().flatten().any(|s| s.contains(m)))
                .collect(),
        },
    };
    Ok(result)
}

fn algebra_reply(ctx: &mut Ctx<'_>, argv: &[&[u8]], algebra: Algebra) -> Reply {
    let keys: Vec<_> = argv[1..].iter().map(|k| ctx.key(k)).collect();
    let now = ctx.now_ms;
    let limits = ctx.shared.encodings.get();
    let mut locked = ctx.lock_keys(&keys);
    match combine(&mut locked, &keys, &limits, now, algebra, usize::MAX) {
        Ok(members) => Reply::Set(members.into_iter().map(Reply::Bulk).collect()),
        Err(reply) => reply,
    }
}

fn algebra_store(ctx: &mut Ctx<'_>, argv: &[&[u8]], algebra: Algebra) -> Reply {
    let dst = ctx.key(argv[1]);
    let sources: Vec<_> = argv[2..].iter().map(|k| ctx.key(k)).collect();
    let mut all = sources.clone();
    all.push(dst);
    let now = ctx.now_ms;
    let limits = ctx.shared.encodings.get();
    let mut locked = ctx.lock_keys(&all);
    let members = match combine(&mut locked, &sources, &limits, now, algebra, usize::MAX) {
        Ok(members) => members,
        Err(reply) => return reply,
    };
    let shard = locked.shard(dst);
    if members.is_empty() {
        if shard.remove(dst, now) {
            ctx.notify(class::GENERIC, "del", argv[1]);
        }
        return Reply::Int(0);
    }
    let mut set = Set::default();
    for member in &members {
        set.insert(member, &limits);
    }
    let len = set.len() as i64;
    // Replaced in place (a destination that existed is not `new`).
    shard.set_object(dst, Box::new(crate::store::Object::Set(set)), 0, now);
    let event = match algebra {
        Algebra::Inter => "sinterstore",
        Algebra::Union => "sunionstore",
        Algebra::Diff => "sdiffstore",
    };
    ctx.notify(class::SET, event, argv[1]);
    Reply::Int(len)
}

/// SINTER key [key ...]
pub fn sinter(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    algebra_reply(ctx, argv, Algebra::Inter)
}

/// SUNION key [key ...]
pub fn sunion(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    algebra_reply(ctx, argv, Algebra::Union)
}

/// SDIFF key [key ...]
pub fn sdiff(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    algebra_reply(ctx, argv, Algebra::Diff)
}

/// SINTERSTORE destination key [key ...]
pub fn sinterstore(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    algebra_store(ctx, argv, Algebra::Inter)
}

/// SUNIONSTORE destination key [key ...]
pub fn sunionstore(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    algebra_store(ctx, argv, Algebra::Union)
}

/// SDIFFSTORE destination key [key ...]
pub fn sdiffstore(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    algebra_store(ctx, argv, Algebra::Diff)
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]
pub fn sintercard(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let numkeys = match super::args::parse_i64(argv[1]) {
        Some(n) if n > 0 => n as usize,
        _ => return Reply::error(error::NUMKEYS_POSITIVE),
    };
    if numkeys > argv.len() - 2 {
        return Reply::error(error::NUMKEYS_TOO_MANY);
    }
    let mut limit = usize::MAX;
    let mut i = 2 + numkeys;
    while i < argv.len() {
        if is(argv[i], "limit") && i + 1 < argv.len() {
            // Redis's getPositiveLongFromObjectOrReply: one error for a
            // negative number and for anything that is not a number.
            limit = match super::args::parse_i64(argv[i + 1]) {
                Some(0) => usize::MAX,
                Some(n) if n > 0 => n as usize,
                _ => return Reply::error(error::LIMIT_NEGATIVE),
            };
            i += 2;
        } else {
            return Reply::error(error::SYNTAX);
        }
    }
    let keys: Vec<_> = argv[2..2 + numkeys].iter().map(|k| ctx.key(k)).collect();
    let now = ctx.now_ms;
    let limits = ctx.shared.encodings.get();
    let mut locked = ctx.lock_keys(&keys);
    match combine(&mut locked, &keys, &limits, now, Algebra::Inter, limit) {
        Ok(members) => Reply::Int(members.len() as i64),
        Err(reply) => reply,
    }
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]
pub fn sscan(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    scan_collection::<Set>(ctx, argv, |set, options| {
        let (next, members) = set.scan_page(options.cursor, options.count);
        let members = members
            .into_iter()
            .map(Member::to_vec)
            .filter(|m| options.keeps(m))
            .map(Reply::Bulk)
            .collect();
        (next, members)
    })
}
