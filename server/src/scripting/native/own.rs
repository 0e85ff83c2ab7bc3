//! Native runs of tally's own scripts: the seed's sliding window (with the
//! caller's clock or TIME), tally-client's multi-limit check and its lease
//! sync. Their keys hold integer counters; the twins are in `tally_lua`.

use tally_lua::{lease, multi_limit, sliding_window, Twin};

use super::{propagate, Effects};
use crate::cmd::Ctx;
use crate::resp::Reply;
use crate::store::{KeyRef, MultiLock, ValueRef};

/// A stored counter as a twin reads it: absent or an integer; anything else
/// (`None`) is a reason to let Lua handle it.
fn counter(locked: &mut MultiLock<'_>, key: KeyRef<'_>, now: u64) -> Option<Option<i64>> {
    match locked.shard(key).get(key, now).map(|e| e.value()) {
        None => Some(None),
        Some(ValueRef::Int(n)) => Some(Some(n)),
        Some(ValueRef::Str(_) | ValueRef::Obj(_)) => None,
    }
}

/// Every key's stored counter, in KEYS order; `None` when one is not a
/// counter (Lua handles it).
fn counters(locked: &mut MultiLock<'_>, keys: &[KeyRef<'_>], now: u64) -> Option<Vec<Option<i64>>> {
    keys.iter().map(|k| counter(locked, *k, now)).collect()
}

/// A Lua table of integers as Redis replies it.
fn integers(values: &[i64]) -> Reply {
    Reply::Array(values.iter().map(|n| Reply::Int(*n)).collect())
}

/// INCRBY `by` then EXPIRE `seconds`, as the scripts do; returns the
/// deadline set.
fn incr_and_expire(
    locked: &mut MultiLock<'_>,
    key: KeyRef<'_>,
    by: i64,
    seconds: i64,
    now: u64,
) -> u64 {
    let deadline = now + seconds as u64 * 1000;
    let shard = locked.shard(key);
    let updated = match shard.get_mut(key, now) {
        Some(mut entry) => {
            let current = match entry.value() {
                ValueRef::Int(n) => n,
                // Unreachable: `counter` sent anything but an integer to Lua.
                ValueRef::Str(_) | ValueRef::Obj(_) => 0,
            };
            entry.set_value(ValueRef::Int(current + by));
            entry.set_expire_at(deadline);
            true
        }
        None => false,
    };
    if !updated {
        shard.set(key, ValueRef::Int(by), deadline, now);
    }
    deadline
}

/// DECRBY `by` of a key that exists and holds an integer (the lease
/// script's give-back); the key keeps its TTL, as DECRBY does.
fn decrement(locked: &mut MultiLock<'_>, key: KeyRef<'_>, by: i64, now: u64) {
    if let Some(mut entry) = locked.shard(key).get_mut(key, now) {
        if let ValueRef::Int(n) = entry.value() {
            entry.set_value(ValueRef::Int(n - by));
        }
    }
}

/// What the Lua run of a script would propagate for one INCR/INCRBY and
/// EXPIRE (Redis 7 replicates scripts by their effects): the increment as
/// the script calls it and `PEXPIREAT` with the deadline.
fn effects(out: &mut Effects<'_>, key: &[u8], by: Option<i64>, deadline: u64) {
    match by {
        None => out.push(&[b"INCR", key]),
        Some(by) => out.push(&[b"INCRBY", key, itoa::Buffer::new().format(by).as_bytes()]),
    }
    out.push(&[
        b"PEXPIREAT",
        key,
        itoa::Buffer::new().format(deadline).as_bytes(),
    ]);
}

/// Runs one of tally's own scripts, or returns `None` to run Lua.
pub(super) fn run(
    ctx: &mut Ctx<'_>,
    twin: Twin,
    keys: &[&[u8]],
    args: &[&[u8]],
    read_only: bool,
    over_maxmemory: bool,
) -> Option<Reply> {
    let now = ctx.now_ms;
    let keys: Vec<KeyRef<'_>> = keys.iter().map(|k| ctx.key(k)).collect();
    match twin {
        Twin::SlidingWindow | Twin::SlidingWindowServerTime => {
            let [current_key, previous_key] = keys[..] else {
                return None;
            };
            let mut locked = ctx.lock_keys(&keys);
            let previous = counter(&mut locked, previous_key, now)?;
            let current = counter(&mut locked, current_key, now)?;
            let outcome = if twin == Twin::SlidingWindow {
                sliding_window::run(args, current, previous)
            } else {
                sliding_window::run_server_time(args, ctx.shared.clock.now_us(), current, previous)
            }
            .ok()?;
            if let Some(seconds) = outcome.incr_and_expire_secs {
                // Writes past maxmemory or from EVAL_RO fail inside the
                // script with errors Lua formats; let Lua produce them.
                if read_only || over_maxmemory {
                    return None;
                }
                let deadline = incr_and_expire(&mut locked, current_key, 1, seconds, now);
                propagate(ctx, |out| effects(out, current_key.bytes, None, deadline));
            }
            drop(locked);
            Some(Reply::Array(
                outcome.reply.iter().map(|n| Reply::Int(*n)).collect(),
            ))
        }
        Twin::MultiLimit => {
            let mut locked = ctx.lock_keys(&keys);
            let stored = counters(&mut locked, &keys, now)?;
            let outcome =
                multi_limit::run(keys.len(), args, ctx.shared.clock.now_us(), &stored).ok()?;
            if !outcome.writes.is_empty() && (read_only || over_maxmemory) {
                return None;
            }
            // INCRBY applies to the value as it is at that point, so a key
            // named by two limits is incremented twice, as in Lua. The twin
            // bounds stored values and costs by 2^53 and the limits by 1000,
            // so no sum can overflow and no write can fail half way.
            // The effects are kept only while the change feed records.
            let logging = ctx.shared.store.feed().active();
            let mut applied = Vec::new();
            for &(key_index, by, seconds) in &outcome.writes {
                let key = keys[key_index];
                let deadline = incr_and_expire(&mut locked, key, by, seconds, now);
                if logging {
                    applied.push((key, by, deadline));
                }
            }
            propagate(ctx, |out| {
                for (key, by, deadline) in applied {
                    effects(out, key.bytes, Some(by), deadline);
                }
            });
            drop(locked);
            Some(Reply::Array(vec![
                Reply::Int(outcome.allowed),
                integers(&outcome.remaining),
                integers(&outcome.resets),
                Reply::Int(outcome.retry_after),
            ]))
        }
        Twin::Lease => {
            let mut locked = ctx.lock_keys(&keys);
            let stored = counters(&mut locked, &keys, now)?;
            let names: Vec<&[u8]> = keys.iter().map(|k| k.bytes).collect();
            let outcome = lease::run(&names, args, ctx.shared.clock.now_us(), &stored).ok()?;
            if !outcome.writes.is_empty() && (read_only || over_maxmemory) {
                return None;
            }
            // The twin gives back at most what a key holds and bounds every
            // operand by 2^50 and the limits by 1000: no write can overflow
            // or fail half way.
            // Each write with the deadline it set (`None`: a DECRBY), kept
            // only while the change feed records.
            let logging = ctx.shared.store.feed().active();
            let mut applied = Vec::new();
            for write in &outcome.writes {
                let (key, by, deadline) = match *write {
                    lease::Write::DecrBy { key, by } => {
                        decrement(&mut locked, keys[key], by, now);
                        (keys[key], by, None)
                    }
                    lease::Write::IncrByAndExpire { key, by, seconds } => {
                        let deadline = incr_and_expire(&mut locked, keys[key], by, seconds, now);
                        (keys[key], by, Some(deadline))
                    }
                };
                if logging {
                    applied.push((key, by, deadline));
                }
            }
            propagate(ctx, |out| {
                for (key, by, deadline) in applied {
                    match deadline {
                        None => out.push(&[
                            b"DECRBY",
                            key.bytes,
                            itoa::Buffer::new().format(by).as_bytes(),
                        ]),
                        Some(deadline) => effects(out, key.bytes, Some(by), deadline),
                    }
                }
            });
            drop(locked);
            let reply = &outcome.reply;
            Some(Reply::Array(vec![
                Reply::Int(reply.allowed),
                integers(&reply.remaining),
                integers(&reply.resets),
                Reply::Int(reply.retry_after),
                integers(&reply.granted),
                Reply::Int(reply.server_time_ms),
                Reply::Int(reply.free_in_ms),
            ]))
        }
        // The libraries' scripts: run by their own files.
        _ => None,
    }
}
