//! CL.THROTTLE, redis-cell's rate limiter as a command of the server
//! (the arithmetic is `crate::throttle`'s): a redis-cell user switches to
//! tally without changing a call, and a managed deployment that cannot
//! load modules gets it too.
//!
//! `CL.THROTTLE key max_burst count period [quantity]` replies
//! `[limited, limit, remaining, retry_after, reset_after]`. The key is a
//! string holding the theoretical arrival time in nanoseconds, with a TTL
//! that ends when the limit is full again: redis-cell's layout, so keys
//! carry over either way. Time is the server's clock. Errors are worded as
//! redis-cell words them ("Cell error: Store error: ..."), its usage error for a wrong
//! argument count included (the module checks its own arguments); only a
//! call without a key gets the arity error of any command, since routing
//! and ACL need the key's position.

use super::string::string_of;
use super::Ctx;
use crate::resp::Reply;
use crate::store::ValueRef;
use crate::throttle::{self, Request};

/// redis-cell's usage error.
const USAGE: &str = "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]";

/// CL.THROTTLE key max_burst count period [quantity]
pub fn cl_throttle(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if argv.len() != 5 && argv.len() != 6 {
        return Reply::error(USAGE);
    }
    let mut numbers = [0i64; 4];
    for (slot, arg) in numbers.iter_mut().zip(&argv[2..]) {
        match std::str::from_utf8(arg)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
        {
            Some(n) => *slot = n,
            None => {
                return Reply::error_bytes(
                    [
                        &b"Cell error: Store error: Couldn't parse as integer: "[..],
                        arg,
                    ]
                    .concat(),
                )
            }
        }
    }
    let request = Request {
        max_burst: numbers[0],
        count: numbers[1],
        period_seconds: numbers[2],
        quantity: if argv.len() == 6 { numbers[3] } else { 1 },
    };
    let key = ctx.key(argv[1]);
    // The clock in microseconds (redis-cell reads nanoseconds, so its
    // TATs carry the clock's last three digits; tally's do not), read
    // once for the whole call.
    let now_us = ctx.shared.clock.now_us();
    let now_ms = now_us / 1000;
    let mut shard = ctx.lock(key);
    let stored = match shard.lookup_read(key, now_ms) {
        None => None,
        Some(entry) => match string_of(entry) {
            Err(reply) => return reply,
            Ok(ValueRef::Int(n)) if n >= 0 => Some(n as u64),
            Ok(ValueRef::Str(bytes)) => {
                match std::str::from_utf8(bytes)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
                {
                    Some(n) => Some(n),
                    None => return Reply::error(NOT_A_TAT),
                }
            }
            Ok(_) => return Reply::error(NOT_A_TAT),
        },
    };
    let now_ns = i64::try_from(now_us)
        .ok()
        .and_then(|us| us.checked_mul(1000))
        .ok_or(throttle::Refusal::OutOfRange);
    let decision = match now_ns.and_then(|now_ns| throttle::decide(request, stored, now_ns)) {
        Ok(decision) => decision,
        Err(refusal) => {
            return Reply::error(format!("Cell error: Store error: {}", refusal.message()))
        }
    };
    if let Some((tat, ttl_ms)) = decision.store {
        // A TAT past i64 was refused by `decide`; a TTL of -1 is none.
        let deadline = match u64::try_from(ttl_ms) {
            Ok(ttl_ms) => now_ms.saturating_add(ttl_ms),
            Err(_) => 0,
        };
        shard.set(key, ValueRef::Int(tat as i64), deadline, now_ms);
        drop(shard);
        // Logged as its effect, the stored value with an absolute expiry,
        // so that a replica or a replay sets what this server set.
        let (tat, at) = (tat.to_string(), deadline.to_string());
        let mut change: Vec<&[u8]> = vec![b"SET", argv[1], tat.as_bytes()];
        if deadline != 0 {
            change.extend([&b"PXAT"[..], at.as_bytes()]);
        }
        super::propagate::effect(ctx, &change);
    }
    Reply::Array(vec![
        Reply::Int(i64::from(decision.limited)),
        Reply::Int(decision.limit),
        Reply::Int(decision.remaining),
        Reply::Int(throttle::reply_seconds(decision.retry_after_ns)),
        Reply::Int(throttle::reply_seconds(decision.reset_after_ns)),
    ])
}

/// A key CL.THROTTLE finds holding something other than a TAT (redis-cell
/// panics, taking the server down).
const NOT_A_TAT: &str = "Cell error: Store error: the key does not hold a CL.THROTTLE timestamp";
