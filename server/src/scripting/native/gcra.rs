//! Native runs of go-redis/redis_rate's GCRA scripts (`tally_lua::gcra`):
//! one key read and written under its shard's lock, the SET logged as the
//! Lua run's effect would be.

use tally_lua::gcra::{self, Script};
use tally_lua::{Stored, Twin};

use super::{propagate, stored_string};
use crate::cmd::Ctx;
use crate::float::{format_g, format_g17};
use crate::resp::Reply;
use crate::store::ValueRef;

/// Runs `allowN` or `allowAtMost` on `key`, or returns `None` to run Lua.
pub(super) fn run(
    ctx: &mut Ctx<'_>,
    twin: Twin,
    key: &[u8],
    args: &[&[u8]],
    writes_refused: bool,
) -> Option<Reply> {
    let script = match twin {
        Twin::RedisRateAllowN => Script::AllowN,
        Twin::RedisRateAllowAtMost => Script::AllowAtMost,
        _ => return None,
    };
    let now = ctx.now_ms;
    let key = ctx.key(key);
    let mut shard = ctx.lock(key);
    let now_us = ctx.shared.clock.now_us();
    let (outcome, found) = {
        let stored = stored_string(shard.get(key, now).map(|e| e.value()))?;
        let found = stored != Stored::Missing;
        (gcra::run(script, args, now_us, stored).ok()?, found)
    };
    if outcome.write.is_some() && writes_refused {
        // Past maxmemory or from EVAL_RO the Lua run fails at its SET,
        // with errors Lua formats.
        return None;
    }
    // The script's GET is a read, counted as Redis counts it.
    shard.count_read(found);
    if let Some(write) = outcome.write {
        // A Lua number passed to SET, as Redis formats it.
        let tat = format_g17(write.tat);
        let deadline = now + write.seconds as u64 * 1000;
        shard.set(key, ValueRef::string(tat.as_bytes()), deadline, now);
        // SET ... EX propagates with the absolute deadline.
        propagate(ctx, |out| {
            out.push(&[
                b"SET",
                key.bytes,
                tat.as_bytes(),
                b"PXAT",
                itoa::Buffer::new().format(deadline).as_bytes(),
            ])
        });
    }
    drop(shard);
    // `tostring` of a Lua number is `%.14g`.
    let text = |n: f64| Reply::bulk(format_g(n, 14).as_bytes());
    Some(Reply::Array(vec![
        Reply::Int(tally_lua::lua_number_to_integer(outcome.allowed)),
        Reply::Int(tally_lua::lua_number_to_integer(outcome.remaining)),
        text(outcome.retry_after),
        text(outcome.reset_after),
    ]))
}
