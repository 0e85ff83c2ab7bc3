//! Native runs of Python `limits`' moving window
//! (`tally_lua::limits_moving_window`): the list of hit timestamps read and
//! written under its shard's lock, the LPUSH, LTRIM and EXPIRE logged as
//! the Lua run's effects would be.

use tally_lua::limits_moving_window::Plan;

use super::propagate;
use crate::cmd::collection::modify;
use crate::cmd::Ctx;
use crate::float::format_g17;
use crate::resp::Reply;
use crate::store::object::{List, Object};
use crate::store::ValueRef;

/// Runs the twin on the list `key`, or returns `None` to run Lua.
pub(super) fn run(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    args: &[&[u8]],
    writes_refused: bool,
) -> Option<Reply> {
    let plan = Plan::read(args).ok()?;
    if plan.too_large() {
        return Some(Reply::Nil);
    }
    let now = ctx.now_ms;
    let key = ctx.key(key);
    let mut shard = ctx.lock(key);
    let (acquired, found) = match shard.get(key, now).map(|e| e.value()) {
        None => (true, false),
        Some(ValueRef::Obj(Object::List(list))) => {
            (plan.acquired(list.get(plan.index())).ok()?, true)
        }
        // LINDEX of another type fails; Lua reports it.
        Some(_) => return None,
    };
    if acquired && writes_refused {
        // Past maxmemory or from EVAL_RO the Lua run fails at its LPUSH,
        // with errors Lua formats.
        return None;
    }
    // LINDEX is a read, counted as Redis counts it.
    shard.count_read(found);
    if !acquired {
        return Some(Reply::Nil);
    }
    // The timestamp as Redis formats a Lua number passed to a command.
    let timestamp = format_g17(plan.timestamp);
    let limit = plan.limit as usize;
    let pushed = modify::<List, _>(&mut shard, key, now, true, |list| {
        for _ in 0..plan.amount {
            list.push(timestamp.as_bytes(), true);
        }
        // LTRIM key 0 limit-1.
        list.retain_range(0, limit);
    });
    if pushed.is_err() {
        // Not reached: the key was checked to be a list or missing.
        return None;
    }
    let deadline = now + plan.expiry as u64 * 1000;
    if let Some(mut entry) = shard.get_mut(key, now) {
        entry.set_expire_at(deadline);
    }
    propagate(ctx, |out| {
        let mut push: Vec<&[u8]> = vec![b"lpush", key.bytes];
        push.extend(std::iter::repeat_n(
            timestamp.as_bytes(),
            plan.amount as usize,
        ));
        out.push(&push);
        let mut last = itoa::Buffer::new();
        out.push(&[
            b"ltrim",
            key.bytes,
            b"0",
            last.format(plan.limit - 1).as_bytes(),
        ]);
        let mut at = itoa::Buffer::new();
        out.push(&[b"PEXPIREAT", key.bytes, at.format(deadline).as_bytes()]);
    });
    drop(shard);
    Some(Reply::Int(1))
}
