//! Native execution of the known limiter scripts (`tally_lua::SCRIPTS`).
//!
//! The twin decides from the arguments and the stored counters; this file
//! (tally's own scripts), `fixed_window.rs` and `token_bucket.rs` (the
//! libraries' scripts) read those counters and apply the twin's writes
//! under the same shard locks a Lua run would hold. Whenever the twin or the runner cannot promise
//! Lua's exact reply (`None`), the caller runs the Lua script instead.

mod compare_and_swap;
mod fixed_window;
mod gcra;
mod limits_moving_window;
mod limits_sliding_window;
mod token_bucket;

use tally_lua::compare_and_swap::Script;
use tally_lua::{lease, multi_limit, sliding_window, Twin};

use crate::cmd::Ctx;
use crate::resp::Reply;
use crate::store::feed::{encoded, Encoded};
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
fn effects(key: &[u8], by: Option<i64>, deadline: u64) -> [Encoded; 2] {
    let deadline = deadline.to_string();
    let increment = match by {
        None => encoded(&[&b"INCR"[..], key]),
        Some(by) => encoded(&[&b"INCRBY"[..], key, by.to_string().as_bytes()]),
    };
    [
        increment,
        encoded(&[&b"PEXPIREAT"[..], key, deadline.as_bytes()]),
    ]
}

/// Hands a native run's effects to the change feed, as the Lua run's would
/// be: appended now (the run's shard locks are still held by the caller)
/// unless a transaction encloses the run.
fn propagate(ctx: &mut Ctx<'_>, changes: impl IntoIterator<Item = Encoded>) {
    if !ctx.shared.store.feed().active() {
        return;
    }
    let db = ctx.client.db;
    ctx.client
        .propagated
        .extend(changes.into_iter().map(|change| (db, change)));
    if !crate::cmd::propagate::inside_run(ctx) {
        crate::cmd::propagate::append_pending(ctx);
    }
}

/// Runs known script `index` natively, or returns `None` to run Lua.
/// `over_maxmemory`: the server was past maxmemory as the call started
/// (then a run that writes is left to Lua, whose first write is refused).
pub fn run(
    ctx: &mut Ctx<'_>,
    index: usize,
    keys: &[&[u8]],
    args: &[&[u8]],
    read_only: bool,
    over_maxmemory: bool,
) -> Option<Reply> {
    let twin = tally_lua::SCRIPTS[index].twin;
    if let Twin::LimitsIncrExpire | Twin::RateLimitRedis | Twin::RateLimiterFlexible = twin {
        let [key] = keys else {
            return None;
        };
        return fixed_window::run(ctx, twin, key, args, read_only || over_maxmemory);
    }
    if twin == Twin::SpringCloudGateway {
        return token_bucket::run(ctx, keys, args, read_only || over_maxmemory);
    }
    if twin == Twin::LimitsSlidingWindow {
        return limits_sliding_window::run(ctx, keys, args, read_only || over_maxmemory);
    }
    if let Twin::RedisRateAllowN | Twin::RedisRateAllowAtMost = twin {
        let [key] = keys else {
            return None;
        };
        return gcra::run(ctx, twin, key, args, read_only || over_maxmemory);
    }
    if twin == Twin::LimitsMovingWindow {
        let [key] = keys else {
            return None;
        };
        return limits_moving_window::run(ctx, key, args, read_only || over_maxmemory);
    }
    if let Twin::Bucket4j(script) = twin {
        let [key] = keys else {
            return None;
        };
        return compare_and_swap::run(ctx, script, key, args, read_only || over_maxmemory);
    }
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
                if ctx.shared.store.feed().active() {
                    propagate(ctx, effects(current_key.bytes, None, deadline));
                }
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
            // The effects are built only while the change feed records.
            let logging = ctx.shared.store.feed().active();
            let mut changes = Vec::new();
            for (key_index, by, seconds) in &outcome.writes {
                let key = keys[*key_index];
                let deadline = incr_and_expire(&mut locked, key, *by, *seconds, now);
                if logging {
                    changes.extend(effects(key.bytes, Some(*by), deadline));
                }
            }
            if logging {
                propagate(ctx, changes);
            }
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
            let logging = ctx.shared.store.feed().active();
            let mut changes = Vec::new();
            for write in &outcome.writes {
                match *write {
                    lease::Write::DecrBy { key, by } => {
                        decrement(&mut locked, keys[key], by, now);
                        if logging {
                            changes.push(encoded(&[
                                &b"DECRBY"[..],
                                keys[key].bytes,
                                by.to_string().as_bytes(),
                            ]));
                        }
                    }
                    lease::Write::IncrByAndExpire { key, by, seconds } => {
                        let deadline = incr_and_expire(&mut locked, keys[key], by, seconds, now);
                        if logging {
                            changes.extend(effects(keys[key].bytes, Some(by), deadline));
                        }
                    }
                }
            }
            if logging {
                propagate(ctx, changes);
            }
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
        // Run by their own files above.
        Twin::LimitsIncrExpire
        | Twin::RateLimitRedis
        | Twin::RateLimiterFlexible
        | Twin::SpringCloudGateway
        | Twin::LimitsSlidingWindow
        | Twin::RedisRateAllowN
        | Twin::RedisRateAllowAtMost
        | Twin::Bucket4j(_)
        | Twin::LimitsMovingWindow => None,
    }
}

/// True when the caller's user may run every command the script's Lua run
/// could call on these keys: the native run must not reach what the Lua run
/// could not. When false the caller runs Lua, which refuses with Redis's own
/// error and ACL LOG entry (or succeeds, when the call it lacks is one this
/// run would not have made).
pub fn permitted(ctx: &Ctx<'_>, index: usize, keys: &[&[u8]]) -> bool {
    // Every known script writes: on a read-only replica the Lua run fails
    // at its first write, with the line Redis names.
    if ctx.shared.master_link.refuses_writes() && !ctx.client.master {
        return false;
    }
    let user = &ctx.client.user;
    if user.unrestricted() {
        return true;
    }
    let twin = tally_lua::SCRIPTS[index].twin;
    if let [selector] = &user.selectors[..] {
        // One selector (the usual gateway user): the keys were checked with
        // EVALSHA itself, read and write (its key spec), which covers what
        // every call needs of them; the calls' command bits remain.
        let registry = CalledCommands::get();
        return calls(twin).iter().all(|call| {
            let i = registry.index(call.name);
            selector.all_commands || selector.allowed.get(i).copied().unwrap_or(false)
        });
    }
    // Several selectors: each call is checked as the Lua run would make it,
    // on each key it would touch.
    calls(twin).iter().all(|call| {
        let mut argvs: Vec<Vec<&[u8]>> = Vec::new();
        let name = call.name.as_bytes();
        match call.keys {
            Keys::None => argvs.push(vec![name]),
            Keys::Every(step, first) => {
                for key in keys.iter().skip(first).step_by(step) {
                    let mut argv = vec![name, key];
                    argv.extend(call.rest.iter().map(|a| a.as_bytes()));
                    argvs.push(argv);
                }
            }
            Keys::Two(a, b) => {
                if let (Some(a), Some(b)) = (keys.get(a), keys.get(b)) {
                    argvs.push(vec![name, a, b]);
                }
            }
        }
        argvs.iter().all(|argv| {
            crate::cmd::resolve_indexed(argv).is_ok_and(|(index, command)| {
                crate::acl::check_indexed(user, command, index, argv).is_ok()
            })
        })
    })
}

/// Which of a script's keys a call is made on.
#[derive(Clone, Copy)]
enum Keys {
    /// None (TIME).
    None,
    /// Every `step`th key from KEYS[`first` + 1].
    Every(usize, usize),
    /// KEYS[`a` + 1] then KEYS[`b` + 1] (RENAME's source and target).
    Two(usize, usize),
}

/// One command a known script's Lua run may call: its catalog name, the
/// keys it is called on, and the arguments after the key (as the ACL
/// check of a call needs its shape, not its values).
struct Call {
    name: &'static str,
    keys: Keys,
    rest: &'static [&'static str],
}

const fn call(name: &'static str, keys: Keys, rest: &'static [&'static str]) -> Call {
    Call { name, keys, rest }
}

const EACH: Keys = Keys::Every(1, 0);

/// The commands each known script's Lua run may call, on which keys.
fn calls(twin: Twin) -> &'static [Call] {
    match twin {
        Twin::SlidingWindow => {
            const CALLS: &[Call] = &[
                call("get", EACH, &[]),
                call("incr", Keys::Every(2, 0), &[]),
                call("expire", Keys::Every(2, 0), &["1"]),
            ];
            CALLS
        }
        Twin::SlidingWindowServerTime => {
            const CALLS: &[Call] = &[
                call("get", EACH, &[]),
                call("incr", Keys::Every(2, 0), &[]),
                call("expire", Keys::Every(2, 0), &["1"]),
                call("time", Keys::None, &[]),
            ];
            CALLS
        }
        // KEYS are (window key, previous window key) per limit.
        Twin::MultiLimit => {
            const CALLS: &[Call] = &[
                call("get", EACH, &[]),
                call("incrby", Keys::Every(2, 0), &["1"]),
                call("expire", Keys::Every(2, 0), &["1"]),
                call("time", Keys::None, &[]),
            ];
            CALLS
        }
        // KEYS are (window key, previous window key, reserved-on key) per
        // limit; the give-back DECRBYs the reserved-on key.
        Twin::Lease => {
            const CALLS: &[Call] = &[
                call("get", EACH, &[]),
                call("incrby", Keys::Every(3, 0), &["1"]),
                call("expire", Keys::Every(3, 0), &["1"]),
                call("decrby", Keys::Every(3, 2), &["1"]),
                call("time", Keys::None, &[]),
            ];
            CALLS
        }
        Twin::LimitsIncrExpire => {
            const CALLS: &[Call] = &[call("incrby", EACH, &["1"]), call("expire", EACH, &["1"])];
            CALLS
        }
        Twin::RateLimitRedis => {
            const CALLS: &[Call] = &[
                call("pttl", EACH, &[]),
                call("set", EACH, &["1", "PX", "1"]),
                call("incr", EACH, &[]),
            ];
            CALLS
        }
        // KEYS are the previous and the current window.
        Twin::LimitsSlidingWindow => {
            const CALLS: &[Call] = &[
                call("pttl", EACH, &[]),
                call("rename", Keys::Two(1, 0), &[]),
                call("get", EACH, &[]),
                call("exists", Keys::Every(2, 1), &[]),
                call("incrby", Keys::Every(2, 1), &["1"]),
                call("set", Keys::Every(2, 1), &["1", "PX", "1"]),
            ];
            CALLS
        }
        Twin::LimitsMovingWindow => {
            const CALLS: &[Call] = &[
                call("lindex", EACH, &["0"]),
                call("lpush", EACH, &["1"]),
                call("ltrim", EACH, &["0", "1"]),
                call("expire", EACH, &["1"]),
            ];
            CALLS
        }
        Twin::RedisRateAllowN | Twin::RedisRateAllowAtMost => {
            const CALLS: &[Call] = &[
                call("time", Keys::None, &[]),
                call("get", EACH, &[]),
                call("set", EACH, &["1", "EX", "1"]),
            ];
            CALLS
        }
        Twin::Bucket4j(Script::SetNxPx | Script::SetNx) => {
            const CALLS: &[Call] = &[call("set", EACH, &["1", "nx"])];
            CALLS
        }
        Twin::Bucket4j(Script::CompareAndSwapPx) => {
            const CALLS: &[Call] = &[call("get", EACH, &[]), call("psetex", EACH, &["1", "1"])];
            CALLS
        }
        Twin::Bucket4j(Script::CompareAndSwap) => {
            const CALLS: &[Call] = &[call("get", EACH, &[]), call("set", EACH, &["1"])];
            CALLS
        }
        // KEYS are the tokens key and the timestamp key.
        Twin::SpringCloudGateway => {
            const CALLS: &[Call] = &[
                call("get", EACH, &[]),
                call("setex", EACH, &["1", "1"]),
                call("time", Keys::None, &[]),
            ];
            CALLS
        }
        Twin::RateLimiterFlexible => {
            const CALLS: &[Call] = &[
                call("set", EACH, &["0", "EX", "1", "NX"]),
                call("incrby", EACH, &["1"]),
                call("pttl", EACH, &[]),
                call("expire", EACH, &["1"]),
            ];
            CALLS
        }
    }
}

/// True when the script's Lua run calls a read-only command on its keys
/// (what client-side caching tracks a script's keys by).
pub fn reads_keys(twin: Twin) -> bool {
    calls(twin)
        .iter()
        .any(|call| matches!(call.name, "get" | "pttl" | "exists" | "lindex"))
}

/// Every command the known scripts call.
const CALLED: [&str; 12] = [
    "get", "incr", "incrby", "decrby", "expire", "time", "pttl", "set", "setex", "exists",
    "rename", "psetex",
];

/// Registry indexes of [`CALLED`], in its order.
struct CalledCommands {
    indexes: [usize; CALLED.len()],
}

impl CalledCommands {
    fn get() -> &'static CalledCommands {
        static INDEXES: std::sync::OnceLock<CalledCommands> = std::sync::OnceLock::new();
        INDEXES.get_or_init(|| {
            let registry = crate::catalog::registry();
            CalledCommands {
                indexes: CALLED
                    .map(|name| registry.index_of(name.as_bytes()).unwrap_or(usize::MAX)),
            }
        })
    }

    /// The registry index of `name`, one of [`CALLED`].
    fn index(&self, name: &str) -> usize {
        CALLED
            .iter()
            .position(|n| *n == name)
            .map_or(usize::MAX, |i| self.indexes[i])
    }
}
