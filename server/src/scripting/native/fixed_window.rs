//! Native runs of the limiter libraries' fixed-window scripts
//! (`tally_lua::fixed_window`): one key, read and written under its
//! shard's lock, the writes logged as the Lua run's effects would be.

use tally_lua::fixed_window::{self, Counter, Outcome, Write};
use tally_lua::Twin;

use super::{propagate, Effects};
use crate::cmd::Ctx;
use crate::resp::Reply;
use crate::store::{KeyRef, ShardData, ValueRef};

/// Runs a library twin on `key`, or returns `None` to run Lua.
pub(super) fn run(
    ctx: &mut Ctx<'_>,
    twin: Twin,
    key: &[u8],
    args: &[&[u8]],
    writes_refused: bool,
) -> Option<Reply> {
    let now = ctx.now_ms;
    let key = ctx.key(key);
    let mut shard = ctx.lock(key);
    let stored = stored_counter(&mut shard, key, now)?;
    let outcome: Outcome = match twin {
        Twin::LimitsIncrExpire => fixed_window::limits_incr_expire(args, stored),
        Twin::RateLimitRedis => fixed_window::rate_limit_redis(args, stored),
        Twin::RateLimiterFlexible => fixed_window::rate_limiter_flexible(args, stored),
        Twin::RateLimiterFlexibleValkeyGlide => {
            fixed_window::rate_limiter_flexible_valkey_glide(args, stored)
        }
        _ => return None,
    }
    .ok()?;
    // Every one of these scripts writes: past maxmemory, or run as
    // EVAL_RO, the Lua run fails at its first write with errors Lua formats.
    if writes_refused {
        return None;
    }
    // PTTL is a read: Redis counts its lookup in keyspace_hits/misses.
    match twin {
        // rate-limit-redis reads PTTL before writing.
        Twin::RateLimitRedis => shard.count_read(stored.is_some()),
        // rate-limiter-flexible reads it after its SET NX made the key.
        Twin::RateLimiterFlexible | Twin::RateLimiterFlexibleValkeyGlide => shard.count_read(true),
        _ => {}
    }
    let applied = outcome
        .writes
        .map(|write| write.map(|write| (write, apply(&mut shard, key, write, now))));
    propagate(ctx, |out| {
        for (write, deadline) in applied.into_iter().flatten() {
            effect(out, key.bytes, write, deadline);
        }
    });
    drop(shard);
    Some(match outcome.reply {
        fixed_window::Reply::Integer(n) => Reply::Int(n),
        fixed_window::Reply::Pair(a, b) => Reply::Array(vec![Reply::Int(a), Reply::Int(b)]),
    })
}

/// The key as the twins take it: missing, or an integer with PTTL's
/// answer; anything else (`None`) is left to Lua.
pub(super) fn stored_counter(
    shard: &mut ShardData,
    key: KeyRef<'_>,
    now: u64,
) -> Option<Option<Counter>> {
    let Some(entry) = shard.get(key, now) else {
        return Some(None);
    };
    let ValueRef::Int(value) = entry.value() else {
        return None;
    };
    let at = entry.expire_at();
    // As PTTL answers: a key at its deadline is still live, with 0 left.
    let pttl = if at == 0 {
        -1
    } else {
        (at as i64 - now as i64).max(0)
    };
    Some(Some(Counter { value, pttl }))
}

/// Makes one write; returns the deadline it set, if it set one. The twin
/// has bounded every operand, so nothing overflows or fails half way.
pub(super) fn apply(shard: &mut ShardData, key: KeyRef<'_>, write: Write, now: u64) -> u64 {
    match write {
        Write::Set { value, ttl_ms } => {
            let deadline = now + ttl_ms as u64;
            shard.set(key, ValueRef::Int(value), deadline, now);
            deadline
        }
        Write::Increment { by, .. } => {
            let updated = match shard.get_mut(key, now) {
                Some(mut entry) => {
                    if let ValueRef::Int(n) = entry.value() {
                        entry.set_value(ValueRef::Int(n + by));
                    }
                    true
                }
                None => false,
            };
            if !updated {
                shard.set(key, ValueRef::Int(by), 0, now);
            }
            0
        }
        Write::Expire { seconds } => {
            let deadline = now + seconds as u64 * 1000;
            if let Some(mut entry) = shard.get_mut(key, now) {
                entry.set_expire_at(deadline);
            }
            deadline
        }
    }
}

/// The command Redis 7 logs for one write of the script (scripts are
/// replicated by their effects, each as its command propagates).
pub(super) fn effect(out: &mut Effects<'_>, key: &[u8], write: Write, deadline: u64) {
    let mut number = itoa::Buffer::new();
    let mut at = itoa::Buffer::new();
    match write {
        Write::Set { value, .. } => out.push(&[
            b"SET",
            key,
            number.format(value).as_bytes(),
            b"PXAT",
            at.format(deadline).as_bytes(),
        ]),
        Write::Increment { spelled, .. } if spelled.eq_ignore_ascii_case("incr") => {
            out.push(&[spelled.as_bytes(), key])
        }
        Write::Increment { by, spelled } => {
            out.push(&[spelled.as_bytes(), key, number.format(by).as_bytes()])
        }
        Write::Expire { .. } => out.push(&[b"PEXPIREAT", key, at.format(deadline).as_bytes()]),
    }
}
