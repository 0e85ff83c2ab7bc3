//! LMPOP and ZMPOP: pop up to COUNT elements from the first of several
//! keys that has any, as Redis 7.0 answers them (`[key, elements]`, nil
//! when none has). Their blocking forms (`blocking.rs`) pop the same way.

use super::args::{is, parse_i64};
use super::collection::{modify_notify, modify_notify_if, Event};
use super::error;
use super::Ctx;
use crate::event_classes::class;
use crate::resp::Reply;
use crate::store::object::{List, ZSet};

/// The keys, the side word and COUNT of an [LZ]MPOP call, checked in
/// Redis's order.
pub struct Call<'a> {
    /// The keys, in the order they are tried.
    pub keys: &'a [&'a [u8]],
    /// LEFT/RIGHT or MIN/MAX, as given (checked by the caller).
    pub side: &'a [u8],
    /// Elements wanted from the first key that has any.
    pub count: usize,
}

impl<'a> Call<'a> {
    /// Reads `numkeys key ... side [COUNT count]`, preceded by one
    /// argument (the command's name, or B[LZ]MPOP's timeout).
    pub fn parse(argv: &'a [&'a [u8]]) -> Result<Call<'a>, Reply> {
        parse(argv)
    }
}

fn parse<'a>(argv: &'a [&'a [u8]]) -> Result<Call<'a>, Reply> {
    let numkeys = match parse_i64(argv[1]) {
        Some(n) if n >= 1 => n as u64,
        _ => return Err(Reply::error(error::NUMKEYS_POSITIVE)),
    };
    let side_at = 2u64.saturating_add(numkeys);
    if side_at >= argv.len() as u64 {
        return Err(Reply::error(error::SYNTAX));
    }
    let side_at = side_at as usize;
    let mut count = None;
    let mut j = side_at + 1;
    while j < argv.len() {
        if count.is_none() && is(argv[j], "count") && j + 1 < argv.len() {
            count = match parse_i64(argv[j + 1]) {
                Some(n) if n >= 1 => Some(n as usize),
                _ => return Err(Reply::error(error::COUNT_POSITIVE)),
            };
            j += 2;
        } else {
            return Err(Reply::error(error::SYNTAX));
        }
    }
    Ok(Call {
        keys: &argv[2..side_at],
        side: argv[side_at],
        count: count.unwrap_or(1),
    })
}

/// LMPOP numkeys key [key ...] LEFT | RIGHT [COUNT count]
pub fn lmpop(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let call = match parse(argv) {
        Ok(call) => call,
        Err(reply) => return reply,
    };
    let left = match call.side {
        s if is(s, "left") => true,
        s if is(s, "right") => false,
        _ => return Reply::error(error::SYNTAX),
    };
    pop_lists(ctx, call.keys, left, call.count)
}

/// Pops up to `count` elements from the first of `keys` that has any (from
/// the head when `left`): `[key, [element ...]]`, or a nil array.
pub fn pop_lists(ctx: &mut Ctx<'_>, keys: &[&[u8]], left: bool, count: usize) -> Reply {
    for name in keys {
        let key = ctx.key(name);
        let mut shard = ctx.lock(key);
        let event = Event(class::LIST, if left { "lpop" } else { "rpop" });
        let pop = |list: &mut List| {
            (0..count)
                .map_while(|_| list.pop(left))
                .map(Reply::Bulk)
                .collect::<Vec<_>>()
        };
        let popped =
            modify_notify_if::<List, _>(ctx, &mut shard, key, false, event, pop, |e| !e.is_empty());
        match popped {
            Err(reply) => return reply,
            Ok(Some(elements)) if !elements.is_empty() => {
                return Reply::Array(vec![Reply::bulk(name), Reply::Array(elements)]);
            }
            Ok(_) => {}
        }
    }
    Reply::NilArray
}

/// ZMPOP numkeys key [key ...] MIN | MAX [COUNT count]
pub fn zmpop(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let call = match parse(argv) {
        Ok(call) => call,
        Err(reply) => return reply,
    };
    let min = match call.side {
        s if is(s, "min") => true,
        s if is(s, "max") => false,
        _ => return Reply::error(error::SYNTAX),
    };
    pop_zsets(ctx, call.keys, min, call.count)
}

/// Pops up to `count` members from the first of `keys` that has any (the
/// lowest scores when `min`): `[key, [[member, score] ...]]`, or a nil
/// array.
pub fn pop_zsets(ctx: &mut Ctx<'_>, keys: &[&[u8]], min: bool, count: usize) -> Reply {
    for name in keys {
        let key = ctx.key(name);
        let mut shard = ctx.lock(key);
        let event = Event(class::ZSET, if min { "zpopmin" } else { "zpopmax" });
        let popped = modify_notify::<ZSet, _>(ctx, &mut shard, key, false, event, |zset| {
            (0..count)
                .map_while(|_| zset.pop(min))
                .map(|(member, score)| {
                    Reply::Array(vec![Reply::Bulk(member.into_vec()), Reply::Double(score)])
                })
                .collect::<Vec<_>>()
        });
        match popped {
            Err(reply) => return reply,
            Ok(Some(pairs)) => {
                return Reply::Array(vec![Reply::bulk(name), Reply::Array(pairs)]);
            }
            Ok(None) => {}
        }
    }
    Reply::NilArray
}
