//! Native runs of Python `limits`' sliding-window counter
//! (`tally_lua::limits_sliding_window`): the previous and current window
//! keys under their shards' locks; the shift of an expired current window
//! (RENAME, then SET) and the acquisition logged as the Lua run's effects.

use tally_lua::fixed_window::Counter;
use tally_lua::limits_sliding_window::{self, Outcome};

use super::fixed_window::{apply, effect, stored_counter};
use super::propagate;
use crate::cmd::Ctx;
use crate::resp::Reply;
use crate::store::{KeyRef, MultiLock, ValueRef};

/// Runs the twin on (previous, current), or returns `None` to run Lua.
pub(super) fn run(
    ctx: &mut Ctx<'_>,
    keys: &[&[u8]],
    args: &[&[u8]],
    writes_refused: bool,
) -> Option<Reply> {
    let [previous_key, current_key] = keys else {
        return None;
    };
    // RENAME of a key onto itself changes nothing, and the script's SET
    // would then overwrite it: Lua handles that.
    if previous_key == current_key {
        return None;
    }
    let now = ctx.now_ms;
    let (previous_key, current_key) = (ctx.key(previous_key), ctx.key(current_key));
    let mut locked = ctx.lock_keys(&[previous_key, current_key]);
    let previous = stored_counter(locked.shard(previous_key), previous_key, now)?;
    let current = stored_counter(locked.shard(current_key), current_key, now)?;
    let outcome = limits_sliding_window::acquire(args, previous, current).ok()?;
    let Outcome::Ran {
        acquired,
        shift,
        write,
    } = outcome
    else {
        return Some(Reply::Nil);
    };
    if (shift.is_some() || write.is_some()) && writes_refused {
        // Past maxmemory or from EVAL_RO the Lua run fails at its first
        // write, with errors Lua formats.
        return None;
    }
    count_reads(
        &mut locked,
        [previous_key, current_key],
        previous,
        current,
        shift,
        acquired,
    );
    let restarted =
        shift.map(|ttl_ms| rename_and_restart(&mut locked, previous_key, current_key, ttl_ms, now));
    let written = write.map(|write| {
        let deadline = apply(locked.shard(current_key), current_key, write, now);
        (write, deadline)
    });
    if restarted.is_some() || written.is_some() {
        propagate(ctx, |out| {
            if let Some(deadline) = restarted {
                out.push(&[b"rename", current_key.bytes, previous_key.bytes]);
                out.push(&[
                    b"SET",
                    current_key.bytes,
                    b"0",
                    b"PXAT",
                    itoa::Buffer::new().format(deadline).as_bytes(),
                ]);
            }
            if let Some((write, deadline)) = written {
                effect(out, current_key.bytes, write, deadline);
            }
        });
    }
    drop(locked);
    Some(if acquired { Reply::Int(1) } else { Reply::Nil })
}

/// `rename current previous` (the counter keeps its deadline) and
/// `set current 0 PX ttl_ms`; returns the new current window's deadline.
fn rename_and_restart(
    locked: &mut MultiLock<'_>,
    previous_key: KeyRef<'_>,
    current_key: KeyRef<'_>,
    ttl_ms: i64,
    now: u64,
) -> u64 {
    let moved = locked
        .shard(current_key)
        .get(current_key, now)
        .map(|entry| (entry.value(), entry.expire_at()));
    // The twin shifts only a live integer window.
    if let Some((ValueRef::Int(value), expire_at)) = moved {
        locked.shard(current_key).remove(current_key, now);
        locked
            .shard(previous_key)
            .set(previous_key, ValueRef::Int(value), expire_at, now);
    }
    let deadline = now + ttl_ms as u64;
    locked
        .shard(current_key)
        .set(current_key, ValueRef::Int(0), deadline, now);
    deadline
}

/// Counts the script's read lookups as Redis counts them: PTTL of the
/// current window, then GET and PTTL of each window after the shift, then
/// EXISTS of the current one when the amount fits.
fn count_reads(
    locked: &mut MultiLock<'_>,
    [previous_key, current_key]: [KeyRef<'_>; 2],
    previous: Option<Counter>,
    current: Option<Counter>,
    shift: Option<i64>,
    acquired: bool,
) {
    let previous_after = previous.is_some() || shift.is_some();
    let current_after = current.is_some();
    locked.shard(current_key).count_read(current.is_some());
    let reads = [
        (previous_key, previous_after),
        (previous_key, previous_after),
        (current_key, current_after),
        (current_key, current_after),
    ];
    for (key, hit) in reads {
        locked.shard(key).count_read(hit);
    }
    if acquired {
        locked.shard(current_key).count_read(current_after);
    }
}
