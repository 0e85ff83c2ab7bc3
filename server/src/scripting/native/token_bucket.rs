//! Native runs of Spring Cloud Gateway's token bucket
//! (`tally_lua::token_bucket`): two keys read and written under their
//! shards' locks, the SETEXs logged as the Lua run's effects would be.

use tally_lua::token_bucket::{self, Now};
use tally_lua::Stored;

use super::{propagate, stored_string};
use crate::cmd::Ctx;
use crate::float::format_g17;
use crate::resp::Reply;
use crate::store::{KeyRef, MultiLock, ValueRef};

/// Runs the twin on the tokens and timestamp keys, or returns `None` to
/// run Lua.
pub(super) fn run(
    ctx: &mut Ctx<'_>,
    keys: &[&[u8]],
    args: &[&[u8]],
    writes_refused: bool,
) -> Option<Reply> {
    let [tokens_key, timestamp_key] = keys else {
        return None;
    };
    let now = ctx.now_ms;
    let keys = [ctx.key(tokens_key), ctx.key(timestamp_key)];
    let mut locked = ctx.lock_keys(&keys);
    let tokens = stored(&mut locked, keys[0], now)?;
    let timestamp = stored(&mut locked, keys[1], now)?;
    let outcome = token_bucket::run(
        args,
        ctx.shared.clock.now_us(),
        tokens.as_stored(),
        timestamp.as_stored(),
    )
    .ok()?;
    if outcome.writes.is_some() && writes_refused {
        // Past maxmemory or from EVAL_RO the Lua run fails at its SETEX,
        // with errors Lua formats.
        return None;
    }
    // The script's two GETs are reads, counted as Redis counts them.
    locked.shard(keys[0]).count_read(tokens != Held::Missing);
    locked.shard(keys[1]).count_read(timestamp != Held::Missing);
    if let Some(writes) = outcome.writes {
        // The numbers as Redis formats a Lua number passed to a command;
        // TIME's seconds as TIME's string.
        let tokens = format_g17(writes.tokens);
        let written_now = match writes.now {
            Now::ServerSeconds(seconds) => seconds.to_string(),
            Now::Given(n) => format_g17(n),
        };
        let deadline = now + writes.seconds as u64 * 1000;
        for (key, value) in [(keys[0], &tokens), (keys[1], &written_now)] {
            locked
                .shard(key)
                .set(key, ValueRef::string(value.as_bytes()), deadline, now);
        }
        // SETEX propagates as SET with the absolute deadline.
        propagate(ctx, |out| {
            let mut at = itoa::Buffer::new();
            let at = at.format(deadline).as_bytes();
            for (key, value) in [(keys[0], &tokens), (keys[1], &written_now)] {
                out.push(&[b"SET", key.bytes, value.as_bytes(), b"PXAT", at]);
            }
        });
    }
    drop(locked);
    Some(Reply::Array(
        outcome.reply.iter().map(|n| Reply::Int(*n)).collect(),
    ))
}

/// A key's value as the twin reads it, copied out of the store (both keys
/// are read before the twin runs); only a non-integer string is copied.
#[derive(PartialEq)]
enum Held {
    Missing,
    Integer(i64),
    Text(Vec<u8>),
}

impl Held {
    fn as_stored(&self) -> Stored<'_> {
        match self {
            Held::Missing => Stored::Missing,
            Held::Integer(n) => Stored::Integer(*n),
            Held::Text(bytes) => Stored::Text(bytes),
        }
    }
}

/// A key as `tonumber(GET key)` reads it ([`stored_string`]), held.
fn stored(locked: &mut MultiLock<'_>, key: KeyRef<'_>, now: u64) -> Option<Held> {
    Some(
        match stored_string(locked.shard(key).get(key, now).map(|e| e.value()))? {
            Stored::Missing => Held::Missing,
            Stored::Integer(n) => Held::Integer(n),
            Stored::Text(bytes) => Held::Text(bytes.to_vec()),
        },
    )
}
