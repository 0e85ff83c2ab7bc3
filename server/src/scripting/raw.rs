//! The per-call path between a script and tally on Lua's own stack: KEYS
//! and ARGV are built, and redis.call reads its arguments and pushes its
//! reply, with Lua's C API, as Redis's luaRedisGenericCommand does.
//!
//! Every value mlua hands to Rust holds a slot of a reference stack and is
//! counted, and a Rust function's arguments arrive as a vector of them: for
//! a one-command script that bookkeeping cost more than the command. Here a
//! string argument is a borrowed slice of Lua's own string (valid while it
//! is on the stack, which it is for the whole call), and the reply is built
//! in place.
//!
//! A Lua error is a long jump, which skips Rust destructors. The two places
//! that can raise are written so that nothing with a destructor is alive
//! across them: building KEYS and ARGV runs protected (`exec_raw`), and
//! redis.call pushes its reply only once every other Rust value of the call
//! is dropped, holding the reply itself in a `ManuallyDrop` (a memory error
//! while pushing leaks it rather than skipping its destructor).

use std::ffi::c_int;
use std::mem::ManuallyDrop;

use mlua::ffi::{self, lua_State};

use super::bridge::{self, Refused, BAD_ARGUMENT, NO_ARGUMENTS, OUTSIDE_A_RUN};
use super::convert;
use super::vm::readonly;
use crate::resp::Reply;

/// How a script run ended.
pub(super) enum Ran {
    /// It returned: its result, converted (see [`convert::Conversion`]).
    Returned(Reply),
    /// It raised this error value.
    Raised(mlua::Value),
}

/// Runs the compiled script at registry index `function` under Redis's
/// error handler (also by registry index, given to `lua_pcall` as Redis's
/// luaCallFunction does, with no wrapper to call through), its KEYS
/// and ARGV set to `keys` and `args` (globals for a script, the two
/// arguments of a function when `as_function`), the VM's memory limited to
/// `memory_limit` while the script's own code runs, and converts what it
/// returned with `conversion`. One protected call does it all: a
/// second one to convert the result cost a short script a tenth of its
/// time (each protected call makes two C closures for the collector).
///
/// The globals are read-only to scripts; they are opened for exactly the
/// two stores of KEYS and ARGV, as Redis's luaCallFunction does. The limit
/// is off while tally builds or reads values in the VM (with a limit set,
/// mlua guards each of its API calls against memory errors, a third of a
/// short script's cost).
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    lua: &mlua::Lua,
    handler: c_int,
    function: c_int,
    as_function: bool,
    keys: &[&[u8]],
    args: &[&[u8]],
    memory_limit: usize,
    conversion: &mut convert::Conversion,
) -> mlua::Result<Ran> {
    let mut returned = None;
    // SAFETY: exec_raw runs the closure in protected mode, so a memory
    // error returns as an error; the closure captures only borrowed values
    // and the result's slot, written once nothing can raise any more. The
    // runner catches every error the script raises, so the one Lua call
    // below returns. The conversion reads with raw accesses only, so no
    // script code runs in it.
    let left = unsafe {
        lua.exec_raw::<mlua::Value>((), |state| {
            // The error handler and the script, by their registry indexes
            // (see `Vm::function_id`).
            ffi::luaL_checkstack(state, 4, c"a script run".as_ptr());
            ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, handler as ffi::lua_Integer);
            ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, function as ffi::lua_Integer);
            // Both tables are made before the globals open, so that a
            // memory error cannot leave them writable.
            push_sequence(state, keys);
            push_sequence(state, args);
            // A function (FCALL) is given KEYS and ARGV as its two
            // arguments; a script (EVAL) finds them as globals.
            let arguments = if as_function {
                2
            } else {
                readonly::enable(state, ffi::LUA_GLOBALSINDEX, false);
                ffi::lua_setfield(state, ffi::LUA_GLOBALSINDEX, c"ARGV".as_ptr());
                ffi::lua_setfield(state, ffi::LUA_GLOBALSINDEX, c"KEYS".as_ptr());
                readonly::enable(state, ffi::LUA_GLOBALSINDEX, true);
                0
            };
            let _ = lua.set_memory_limit(memory_limit);
            let status = ffi::lua_pcall(state, arguments, 1, 1);
            let _ = lua.set_memory_limit(0);
            // The handler at 1, then the result or the error value (the
            // handler's table; a memory error's message, which Lua hands
            // no handler): a result is converted here and nothing is left;
            // an error value is left for the caller.
            if status == 0 {
                let resp3 = bridge::with_bridge(|bridge| bridge.resp3).unwrap_or(false);
                let reply = conversion.convert_top(state, resp3);
                ffi::lua_settop(state, 0);
                returned = Some(reply);
            } else {
                ffi::lua_remove(state, 1);
            }
        })
    }?;
    Ok(match returned {
        Some(reply) => Ran::Returned(reply),
        None => Ran::Raised(left),
    })
}

/// Pushes a new table holding `items` as strings, 1-based.
unsafe fn push_sequence(state: *mut lua_State, items: &[&[u8]]) {
    // SAFETY: called from `run`'s protected closure, which made room for
    // the table and one string.
    unsafe {
        ffi::lua_createtable(state, items.len() as c_int, 0);
        for (i, item) in items.iter().enumerate() {
            ffi::lua_pushlstring(state, item.as_ptr().cast(), item.len());
            ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
        }
    }
}

/// `redis.call(...)`: runs the command and returns its reply; an error
/// reply is raised as its `{err=...}` table.
///
/// # Safety
/// Called by Lua only, as a C function registered on a worker's VM.
pub unsafe extern "C-unwind" fn call(state: *mut lua_State) -> c_int {
    // SAFETY: as the function's contract.
    unsafe { call_raising(state, true) }
}

/// `redis.pcall(...)`: as redis.call, but an error reply is returned.
///
/// # Safety
/// As [`call`].
pub unsafe extern "C-unwind" fn pcall(state: *mut lua_State) -> c_int {
    // SAFETY: as the function's contract.
    unsafe { call_raising(state, false) }
}

/// What one redis.call gives the script.
enum Outcome {
    Reply(Reply),
    Refused(Refused),
}

unsafe fn call_raising(state: *mut lua_State, raise: bool) -> c_int {
    // Everything with a destructor lives inside `run` and is dropped when it
    // returns, except the outcome, which is pushed from a ManuallyDrop.
    // SAFETY: the arguments are this C function's own stack.
    let run = bridge::with_bridge(|bridge| {
        // Building the reply is tally's work, not the script's: the memory
        // limit is lifted until the reply is on the stack (see `run_once`).
        let limit = bridge.lua().set_memory_limit(0).unwrap_or(0);
        let outcome = unsafe { run_from_stack(state, bridge) };
        (outcome, bridge.resp3, limit)
    });
    let Some((outcome, resp3, limit)) = run else {
        // SAFETY: room for one value is guaranteed to a C function.
        unsafe { convert::push_error_table(state, OUTSIDE_A_RUN.as_bytes(), false) };
        return if raise {
            // SAFETY: nothing with a destructor is alive in this frame.
            unsafe { ffi::lua_error(state) }
        } else {
            1
        };
    };
    let outcome = ManuallyDrop::new(outcome);
    // SAFETY: a C function has room for one value on top of its arguments;
    // a memory error here leaks the outcome (see the module docs).
    let failed = unsafe {
        match &*outcome {
            Outcome::Reply(reply) => convert::push_reply(state, reply, resp3),
            Outcome::Refused(refused) => {
                convert::push_error_table(state, refused.text.as_bytes(), refused.counted);
                true
            }
        }
    };
    drop(ManuallyDrop::into_inner(outcome));
    bridge::with_bridge(|bridge| bridge.lua().set_memory_limit(limit));
    if failed && raise {
        // SAFETY: every Rust value of the call is dropped.
        unsafe { ffi::lua_error(state) }
    } else {
        1
    }
}

/// Reads the command from the C function's arguments and runs it.
unsafe fn run_from_stack(state: *mut lua_State, bridge: &mut bridge::Bridge<'_, '_>) -> Outcome {
    // SAFETY: the indexes read are the function's arguments, 1..=top.
    let argc = unsafe { ffi::lua_gettop(state) };
    if argc == 0 {
        return Outcome::Refused(Refused::plain(NO_ARGUMENTS));
    }
    // Numbers are formatted first, into buffers that outlive `argv`.
    let mut numbers: Vec<Vec<u8>> = Vec::new();
    for i in 1..=argc {
        // SAFETY: as above.
        match unsafe { ffi::lua_type(state, i) } {
            ffi::LUA_TSTRING => {}
            ffi::LUA_TNUMBER => numbers.push(bridge::formatted_number(unsafe {
                ffi::lua_tonumber(state, i)
            })),
            _ => return Outcome::Refused(Refused::plain(BAD_ARGUMENT)),
        }
    }
    let mut formatted = numbers.iter();
    let mut argv: Vec<&[u8]> = Vec::with_capacity(argc as usize);
    for i in 1..=argc {
        // SAFETY: a string argument stays on the stack, and so alive, for
        // the whole call; Lua strings do not move.
        let bytes = unsafe {
            if ffi::lua_type(state, i) == ffi::LUA_TSTRING {
                let mut len = 0;
                let data = ffi::lua_tolstring(state, i, &mut len);
                std::slice::from_raw_parts(data.cast::<u8>(), len)
            } else {
                formatted.next().map_or(&b""[..], Vec::as_slice)
            }
        };
        argv.push(bytes);
    }
    match bridge::execute(bridge, &argv) {
        Ok(reply) => Outcome::Reply(reply),
        Err(refused) => Outcome::Refused(refused),
    }
}
