//! Native execution of the known limiter scripts (`tally_lua::SCRIPTS`).
//!
//! The twin decides from the arguments and the stored counters; this file
//! reads those counters and applies the twin's writes under the same shard
//! locks a Lua run would hold. Whenever the twin or this file cannot promise
//! Lua's exact reply (`None`), the caller runs the Lua script instead.

use tally_lua::{sliding_window, Twin};

use crate::cmd::Ctx;
use crate::resp::Reply;
use crate::store::ValueRef;

/// A stored counter as a twin reads it: absent, an integer, or (anything
/// else) a reason to let Lua handle it.
fn counter(value: Option<ValueRef<'_>>) -> Option<Option<i64>> {
    match value {
        None => Some(None),
        Some(ValueRef::Int(n)) => Some(Some(n)),
        Some(ValueRef::Str(_)) => None,
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
    match tally_lua::SCRIPTS[index].twin {
        Twin::SlidingWindow => sliding_window(ctx, keys, args, read_only),
    }
}

fn sliding_window(
    ctx: &mut Ctx<'_>,
    keys: &[&[u8]],
    args: &[&[u8]],
    read_only: bool,
) -> Option<Reply> {
    let [current_key, previous_key] = keys else {
        return None;
    };
    let now = ctx.now_ms;
    let (current_key, previous_key) = (ctx.key(current_key), ctx.key(previous_key));
    let mut locked = ctx.lock_keys(&[current_key, previous_key]);
    let previous = counter(
        locked
            .shard(previous_key)
            .get(previous_key, now)
            .map(|e| e.value()),
    )?;
    let current = counter(
        locked
            .shard(current_key)
            .get(current_key, now)
            .map(|e| e.value()),
    )?;
    let outcome = sliding_window::run(args, current, previous).ok()?;
    if let Some(seconds) = outcome.incr_and_expire_secs {
        // Writes past maxmemory or from EVAL_RO fail inside the script with
        // errors Lua formats; let Lua produce them.
        if read_only || ctx.shared.over_maxmemory() {
            return None;
        }
        let deadline = now + seconds as u64 * 1000;
        let shard = locked.shard(current_key);
        let updated = match shard.get_mut(current_key, now) {
            Some(mut entry) => {
                entry.set_value(ValueRef::Int(current.unwrap_or(0) + 1));
                entry.set_expire_at(deadline);
                true
            }
            None => false,
        };
        if !updated {
            shard.set(current_key, ValueRef::Int(1), deadline, now);
        }
    }
    Some(Reply::Array(
        outcome.reply.iter().map(|n| Reply::Int(*n)).collect(),
    ))
}
