//! Native runs of bucket4j's scripts (`tally_lua::compare_and_swap`): one
//! key compared and set under its shard's lock, the write logged as the Lua
//! run's effect would be.

use tally_lua::compare_and_swap::{self, Current, Script};

use super::{propagate, Effects};
use crate::cmd::Ctx;
use crate::resp::Reply;
use crate::store::ValueRef;

/// Runs `script` on `key`, or returns `None` to run Lua.
pub(super) fn run(
    ctx: &mut Ctx<'_>,
    script: Script,
    key: &[u8],
    args: &[&[u8]],
    writes_refused: bool,
) -> Option<Reply> {
    let now = ctx.now_ms;
    let key = ctx.key(key);
    let mut shard = ctx.lock(key);
    let (write, found) = {
        let mut digits = itoa::Buffer::new();
        let current = match shard.get(key, now).map(|e| e.value()) {
            None => Current::Missing,
            // GET gives an integer as its digits.
            Some(ValueRef::Int(n)) => Current::Text(digits.format(n).as_bytes()),
            Some(ValueRef::Str(bytes)) => Current::Text(bytes),
            Some(ValueRef::Obj(_)) => Current::Other,
        };
        let found = current != Current::Missing;
        (compare_and_swap::run(script, args, current).ok()?, found)
    };
    if write.is_some() && writes_refused {
        // Past maxmemory or from EVAL_RO the Lua run fails at its write,
        // with errors Lua formats.
        return None;
    }
    if let Script::CompareAndSwapPx | Script::CompareAndSwap = script {
        // The swap's GET is a read, counted as Redis counts it.
        shard.count_read(found);
    }
    let Some(write) = write else {
        return Some(Reply::Int(0));
    };
    let value = args[write.value];
    let deadline = write.ttl_ms.map_or(0, |ms| now + ms as u64);
    shard.set(key, ValueRef::string(value), deadline, now);
    propagate(ctx, |out| effect(out, script, key.bytes, value, deadline));
    drop(shard);
    Some(Reply::Int(1))
}

/// What Redis 7 logs for the script's write: a deadline as `PXAT` (SET PX
/// and PSETEX alike), a SET without one as the script called it.
fn effect(out: &mut Effects<'_>, script: Script, key: &[u8], value: &[u8], deadline: u64) {
    match script {
        Script::SetNxPx | Script::CompareAndSwapPx => out.push(&[
            b"SET",
            key,
            value,
            b"PXAT",
            itoa::Buffer::new().format(deadline).as_bytes(),
        ]),
        Script::SetNx => out.push(&[b"set", key, value, b"nx"]),
        Script::CompareAndSwap => out.push(&[b"set", key, value]),
    }
}
