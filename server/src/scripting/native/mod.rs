//! Native execution of the known limiter scripts (`tally_lua::SCRIPTS`).
//!
//! A twin (in `tally_lua`) decides from the arguments and the stored
//! values; a runner here per family (`own.rs` for tally's own scripts, one
//! file per library's) reads those values and applies the twin's writes
//! under the same shard locks a Lua run would hold, logging them as the Lua
//! run's effects. Whenever the twin or the runner cannot promise Lua's exact
//! reply (`None`), the caller runs the Lua script instead. This file routes
//! a run to its runner and says which commands each script's Lua run may
//! call, which the ACL check of a native run needs.

mod compare_and_swap;
mod fixed_window;
mod gcra;
mod limits_moving_window;
mod limits_sliding_window;
mod own;
mod token_bucket;

use tally_lua::compare_and_swap::Script;
use tally_lua::{Stored, Twin};

use crate::cmd::Ctx;
use crate::resp::Reply;
use crate::store::feed::Change;
use crate::store::ValueRef;

/// Where a native run writes the commands its Lua run would propagate,
/// straight into the client's pending change.
struct Effects<'a> {
    change: &'a mut Change,
    db: usize,
}

impl Effects<'_> {
    /// One command of the run's effects.
    fn push(&mut self, argv: &[&[u8]]) {
        self.change.push(self.db, argv);
    }
}

/// Hands a native run's effects, as `write` gives them, to the change
/// feed, as the Lua run's would be: appended now (the run's shard locks are
/// still held by the caller) unless a transaction encloses the run.
/// Nothing is built while the feed records nothing.
fn propagate(ctx: &mut Ctx<'_>, write: impl FnOnce(&mut Effects<'_>)) {
    if !ctx.shared.store.feed().active() {
        return;
    }
    let db = ctx.client.db;
    write(&mut Effects {
        change: &mut ctx.client.propagated,
        db,
    });
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
    // Past maxmemory or from EVAL_RO, a Lua run fails at its first write
    // with errors Lua formats: a run that would write is left to it.
    let writes_refused = read_only || over_maxmemory;
    match twin {
        Twin::SlidingWindow | Twin::SlidingWindowServerTime | Twin::MultiLimit | Twin::Lease => {
            own::run(ctx, twin, keys, args, read_only, over_maxmemory)
        }
        Twin::LimitsIncrExpire
        | Twin::RateLimitRedis
        | Twin::RateLimiterFlexible
        | Twin::RateLimiterFlexibleValkeyGlide => {
            fixed_window::run(ctx, twin, one(keys)?, args, writes_refused)
        }
        Twin::LimitsSlidingWindow => limits_sliding_window::run(ctx, keys, args, writes_refused),
        Twin::LimitsMovingWindow => {
            limits_moving_window::run(ctx, one(keys)?, args, writes_refused)
        }
        Twin::SpringCloudGateway => token_bucket::run(ctx, keys, args, writes_refused),
        Twin::RedisRateAllowN | Twin::RedisRateAllowAtMost => {
            gcra::run(ctx, twin, one(keys)?, args, writes_refused)
        }
        Twin::Bucket4j(script) => {
            compare_and_swap::run(ctx, script, one(keys)?, args, writes_refused)
        }
    }
}

/// A key as the twins that read `tonumber(GET key)` take it; `None` for a
/// key of another type (GET fails on it, which Lua reports).
fn stored_string(value: Option<ValueRef<'_>>) -> Option<Stored<'_>> {
    match value {
        None => Some(Stored::Missing),
        Some(ValueRef::Int(n)) => Some(Stored::Integer(n)),
        Some(ValueRef::Str(bytes)) => Some(Stored::Text(bytes)),
        Some(ValueRef::Obj(_)) => None,
    }
}

/// The only key of a one-key script (a call with more or fewer is Lua's).
fn one<'k>(keys: &[&'k [u8]]) -> Option<&'k [u8]> {
    match keys {
        [key] => Some(key),
        _ => None,
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
        Twin::RateLimiterFlexibleValkeyGlide => {
            const CALLS: &[Call] = &[
                call("set", EACH, &["0", "EX", "1", "NX"]),
                call("incrby", EACH, &["1"]),
                call("pttl", EACH, &[]),
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
