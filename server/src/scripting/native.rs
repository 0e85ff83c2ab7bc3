//! Native execution of the known limiter scripts (`tally_lua::SCRIPTS`).
//!
//! The twin decides from the arguments and the stored counters; this file
//! reads those counters and applies the twin's writes under the same shard
//! locks a Lua run would hold. Whenever the twin or this file cannot promise
//! Lua's exact reply (`None`), the caller runs the Lua script instead.

use tally_lua::{multi_limit, sliding_window, Twin};

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

/// INCRBY `by` then EXPIRE `seconds`, as the scripts do.
fn incr_and_expire(locked: &mut MultiLock<'_>, key: KeyRef<'_>, by: i64, seconds: i64, now: u64) {
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
}

/// Runs known script `index` natively, or returns `None` to run Lua.
pub fn run(
    ctx: &mut Ctx<'_>,
    index: usize,
    keys: &[&[u8]],
    args: &[&[u8]],
    read_only: bool,
) -> Option<Reply> {
    let twin = tally_lua::SCRIPTS[index].twin;
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
                if read_only || ctx.shared.over_maxmemory() {
                    return None;
                }
                incr_and_expire(&mut locked, current_key, 1, seconds, now);
            }
            Some(Reply::Array(
                outcome.reply.iter().map(|n| Reply::Int(*n)).collect(),
            ))
        }
        Twin::MultiLimit => {
            let mut locked = ctx.lock_keys(&keys);
            let stored = keys
                .iter()
                .map(|k| counter(&mut locked, *k, now))
                .collect::<Option<Vec<_>>>()?;
            let outcome =
                multi_limit::run(keys.len(), args, ctx.shared.clock.now_us(), &stored).ok()?;
            if !outcome.writes.is_empty() && (read_only || ctx.shared.over_maxmemory()) {
                return None;
            }
            // INCRBY applies to the value as it is at that point, so a key
            // named by two limits is incremented twice, as in Lua. The twin
            // bounds stored values and costs by 2^53 and the limits by 1000,
            // so no sum can overflow and no write can fail half way.
            for (key_index, by, seconds) in &outcome.writes {
                incr_and_expire(&mut locked, keys[*key_index], *by, *seconds, now);
            }
            let ints = |v: &[i64]| Reply::Array(v.iter().map(|n| Reply::Int(*n)).collect());
            Some(Reply::Array(vec![
                Reply::Int(outcome.allowed),
                ints(&outcome.remaining),
                ints(&outcome.resets),
                Reply::Int(outcome.retry_after),
            ]))
        }
    }
}
