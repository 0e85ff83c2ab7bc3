//! Conversions between command replies and Lua values, by Redis 7.0's rules.

use std::ffi::c_int;

use mlua::{ffi, Lua, Value};

use crate::cmd::ErrorCounts;
use crate::resp::{Protocol, Reply};

/// The field Redis 7.0 sets in the error tables of redis.call/pcall to say
/// that INFO errorstats already counted the error.
pub const COUNTED_FIELD: &str = "ignore_error_stats_update";

/// A command's reply as the Lua value redis.call/pcall returns; the flag is
/// true for error replies (redis.call raises them). The value is built by
/// [`push_reply`], protected: a memory error is returned, not raised.
pub fn reply_to_lua(lua: &Lua, reply: &Reply, resp3: bool) -> mlua::Result<(Value, bool)> {
    let mut failed = false;
    // SAFETY: exec_raw runs the closure in protected mode with room for
    // three values, and takes the one value it leaves.
    let value = unsafe {
        lua.exec_raw::<Value>((), |state| {
            failed = push_reply(state, reply, resp3);
        })?
    };
    Ok((value, failed))
}

/// Pushes a command's reply onto the Lua stack as the value redis.call and
/// redis.pcall return, by Redis 7.0's rules (redisProtocolToLuaType), and
/// tells whether it is an error (a `{err=...}` table, which redis.call
/// raises). This works on Lua's stack directly: the reply of a short
/// command through mlua's values costs more than the command.
///
/// # Safety
/// `state` must be a running Lua state with room for one more value. Lua
/// raises a memory error with a long jump, skipping Rust destructors: a
/// caller outside protected mode must hold nothing whose destructor
/// matters (see `raw.rs`).
pub unsafe fn push_reply(state: *mut ffi::lua_State, reply: &Reply, resp3: bool) -> bool {
    // SAFETY: as the function's contract; every branch pushes exactly one
    // value and leaves nothing else.
    unsafe {
        match reply {
            Reply::Ok => push_field_table(state, c"ok", b"OK"),
            Reply::Status(text) => push_field_table(state, c"ok", text.as_bytes()),
            Reply::Error(text) => {
                let end = text
                    .iter()
                    .rposition(|&b| b != b'\r' && b != b'\n')
                    .map_or(0, |i| i + 1);
                push_error_table(state, &text[..end], true);
                return true;
            }
            Reply::Int(n) => ffi::lua_pushnumber(state, *n as f64),
            Reply::Bulk(bytes) => push_bytes(state, bytes),
            Reply::BulkStatic(bytes) => push_bytes(state, bytes),
            Reply::BulkInt(n) => push_bytes(state, itoa::Buffer::new().format(*n).as_bytes()),
            Reply::Nil | Reply::NilArray | Reply::Nothing | Reply::Raw(_) => {
                if resp3 {
                    ffi::lua_pushnil(state)
                } else {
                    ffi::lua_pushboolean(state, 0)
                }
            }
            Reply::Array(items) | Reply::Push(items) | Reply::Multi(items) => {
                // Scripts cannot subscribe (SUBSCRIBE is `noscript`): pushes
                // are shown as arrays.
                push_sequence(state, items.iter(), items.len(), resp3)
            }
            Reply::Set(items) if !resp3 => push_sequence(state, items.iter(), items.len(), resp3),
            Reply::Set(items) => {
                ffi::lua_createtable(state, 0, 1);
                ffi::lua_createtable(state, 0, items.len() as c_int);
                if room(state) {
                    for item in items {
                        push_reply(state, item, resp3);
                        ffi::lua_pushboolean(state, 1);
                        set_keyed(state);
                    }
                }
                ffi::lua_setfield(state, -2, c"set".as_ptr());
            }
            Reply::Map(pairs) if resp3 => {
                ffi::lua_createtable(state, 0, 1);
                ffi::lua_createtable(state, 0, pairs.len() as c_int);
                if room(state) {
                    for (k, v) in pairs {
                        push_reply(state, k, resp3);
                        push_reply(state, v, resp3);
                        set_keyed(state);
                    }
                }
                ffi::lua_setfield(state, -2, c"map".as_ptr());
            }
            Reply::Map(pairs) => {
                ffi::lua_createtable(state, (pairs.len() * 2) as c_int, 0);
                if room(state) {
                    for (i, (k, v)) in pairs.iter().enumerate() {
                        push_reply(state, k, resp3);
                        ffi::lua_rawseti(state, -2, (2 * i + 1) as ffi::lua_Integer);
                        push_reply(state, v, resp3);
                        ffi::lua_rawseti(state, -2, (2 * i + 2) as ffi::lua_Integer);
                    }
                }
            }
            Reply::Bulks(list) => {
                ffi::lua_createtable(state, list.len() as c_int, 0);
                for (i, item) in list.iter().enumerate() {
                    push_bytes(state, item);
                    ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
                }
            }
            Reply::Bool(b) if resp3 => ffi::lua_pushboolean(state, c_int::from(*b)),
            Reply::Bool(b) => ffi::lua_pushnumber(state, f64::from(u8::from(*b))),
            Reply::Verbatim(text) if resp3 => {
                ffi::lua_createtable(state, 0, 1);
                ffi::lua_createtable(state, 0, 2);
                push_bytes(state, b"txt");
                ffi::lua_setfield(state, -2, c"format".as_ptr());
                push_bytes(state, text);
                ffi::lua_setfield(state, -2, c"string".as_ptr());
                ffi::lua_setfield(state, -2, c"verbatim_string".as_ptr());
            }
            Reply::Verbatim(text) => push_bytes(state, text),
            Reply::Double(d) if resp3 => {
                ffi::lua_createtable(state, 0, 1);
                ffi::lua_pushnumber(state, *d);
                ffi::lua_setfield(state, -2, c"double".as_ptr());
            }
            Reply::Double(d) => push_bytes(state, crate::float::format_g17(*d).as_bytes()),
            // Redis converts a RESP3 double to a Lua number, whatever its digits.
            Reply::HumanDouble(text) if resp3 => {
                ffi::lua_createtable(state, 0, 1);
                // Printed from a finite long double, so it parses; one past
                // f64's range becomes an infinity, as the C cast would.
                let value = std::str::from_utf8(text)
                    .ok()
                    .and_then(|t| t.parse::<f64>().ok())
                    .unwrap_or(f64::NAN);
                ffi::lua_pushnumber(state, value);
                ffi::lua_setfield(state, -2, c"double".as_ptr());
            }
            Reply::HumanDouble(text) => push_bytes(state, text),
            // Only script results are pre-encoded, and scripts never see those.
            Reply::Encoded(bytes) => push_bytes(state, bytes),
        }
    }
    false
}

/// Pushes `{err = text}`, marked counted when INFO errorstats counted the
/// error already (as Redis marks redis.call's errors: the script that
/// returns or raises it must not count it again).
///
/// # Safety
/// As [`push_reply`].
pub unsafe fn push_error_table(state: *mut ffi::lua_State, text: &[u8], counted: bool) {
    // SAFETY: as the function's contract.
    unsafe {
        push_field_table(state, c"err", text);
        if counted {
            ffi::lua_pushboolean(state, 1);
            ffi::lua_setfield(state, -2, COUNTED_FIELD_C.as_ptr());
        }
    }
}

/// [`COUNTED_FIELD`] for Lua's C API.
const COUNTED_FIELD_C: &std::ffi::CStr = c"ignore_error_stats_update";

/// Pushes `{[field] = text}`.
unsafe fn push_field_table(state: *mut ffi::lua_State, field: &std::ffi::CStr, text: &[u8]) {
    // SAFETY: the caller's contract ([`push_reply`]).
    unsafe {
        ffi::lua_createtable(state, 0, 2);
        push_bytes(state, text);
        ffi::lua_setfield(state, -2, field.as_ptr());
    }
}

unsafe fn push_bytes(state: *mut ffi::lua_State, bytes: &[u8]) {
    // SAFETY: the caller's contract; Lua copies the bytes.
    unsafe {
        ffi::lua_pushlstring(state, bytes.as_ptr().cast(), bytes.len());
    }
}

/// Pushes an array of replies as a sequence.
unsafe fn push_sequence<'a>(
    state: *mut ffi::lua_State,
    items: impl Iterator<Item = &'a Reply>,
    len: usize,
    resp3: bool,
) {
    // SAFETY: the caller's contract ([`push_reply`]).
    unsafe {
        ffi::lua_createtable(state, len as c_int, 0);
        if room(state) {
            for (i, item) in items.enumerate() {
                push_reply(state, item, resp3);
                ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
            }
        }
    }
}

/// Room for a nested level's key and value on top of its table. A reply
/// nested past Lua's C stack (no command's is) stays an empty table where
/// Redis would panic.
unsafe fn room(state: *mut ffi::lua_State) -> bool {
    // SAFETY: the caller's contract ([`push_reply`]).
    unsafe { ffi::lua_checkstack(state, 3) != 0 }
}

/// `table[key] = value` with the key and value on top of the table. A key
/// Lua cannot hold (nil, NaN) is left out, as Lua's "table index is nil"
/// would otherwise fail the whole call.
unsafe fn set_keyed(state: *mut ffi::lua_State) {
    // SAFETY: the caller's contract ([`push_reply`]); the two values on
    // top are the key and the value.
    unsafe {
        let bad_key = match ffi::lua_type(state, -2) {
            ffi::LUA_TNIL => true,
            ffi::LUA_TNUMBER => ffi::lua_tonumber(state, -2).is_nan(),
            _ => false,
        };
        if bad_key {
            ffi::lua_pop(state, 2);
        } else {
            ffi::lua_rawset(state, -3);
        }
    }
}

/// Replaces CR and LF with spaces, as Redis does for status and error lines.
fn one_line(text: &[u8]) -> String {
    String::from_utf8_lossy(text)
        .chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect()
}

/// How large a script's result may be.
#[derive(Debug, Clone, Copy)]
pub struct ResultLimits {
    /// Values (strings, numbers, tables, ...) in the whole result.
    pub elements: usize,
    /// Bytes of strings in the whole result.
    pub bytes: usize,
}

impl Default for ResultLimits {
    /// 4M values (about 256 MB while converted) and 512 MB of strings (the
    /// largest value a client may send): far past any real script's result.
    fn default() -> ResultLimits {
        ResultLimits {
            elements: 1 << 22,
            bytes: 512 << 20,
        }
    }
}

/// The reply for a result past [`ResultLimits`].
pub const RESULT_TOO_LARGE: &str =
    "ERR the script's result is too large to send (more than 4194304 values or 512 MB)";

/// How a script's return value becomes a reply: a script run converts
/// its result with a [`Conversion`] inside the run's protected call; this
/// converts a value held by mlua, within `limits` (the fuzzers use small
/// ones). `resp3` is the level the script chose with redis.setresp.
///
/// This walks the value on Lua's own stack, as Redis's
/// `luaReplyToRedisReply` does, because that is what bounds it: nested
/// tables (a table holding itself included) are converted until the C call's
/// stack would pass LUAI_MAXCSTACK, where the element becomes `-ERR reached
/// lua stack limit` and the levels above it are still returned, byte for
/// byte as Redis does. (mlua's values would not do: each holds a slot of
/// mlua's reference stack, which has the same 8000-slot limit and panics.)
/// The Rust recursion runs on a stack that grows on demand.
///
/// A result can also be broad as well as deep: `t = {t, t}` describes 2^8000
/// elements, which Redis would try to send (and never finish). Conversion
/// stops past [`ResultLimits`] and the whole reply becomes an error instead;
/// docs/compatibility.md.
///
/// Every error in the result (at any depth, as Redis counts them when it
/// adds them to the reply) is counted in `errors`, except those redis.call
/// or redis.pcall returned, which were counted when their command failed.
pub fn lua_to_reply_within(
    lua: &Lua,
    value: Value,
    resp3: bool,
    proto: Protocol,
    limits: ResultLimits,
    errors: &mut ErrorCounts,
) -> Reply {
    let mut conversion = Conversion::new(limits);
    conversion.walk.resp3 = resp3;
    let reply = convert(lua, value, &mut conversion.walk);
    conversion.finish(reply, proto, errors)
}

/// One conversion of a script's result, for a caller that is already
/// inside a protected call with the result on Lua's stack (the script
/// run itself: see `raw::run`), so no second protected call is needed.
pub(super) struct Conversion {
    walk: Walk,
}

impl Conversion {
    /// A conversion within `limits`; the protocol is the script's as its
    /// result is converted (see [`Conversion::convert_top`]).
    pub(super) fn new(limits: ResultLimits) -> Conversion {
        Conversion {
            walk: Walk {
                resp3: false,
                deepest: 0,
                elements_left: limits.elements,
                bytes_left: limits.bytes,
                exceeded: false,
                errors: ErrorCounts::default(),
            },
        }
    }

    /// Converts the value on top of the stack and pops it; `resp3` is the
    /// protocol the script chose with redis.setresp, which shapes how its
    /// tables convert.
    ///
    /// # Safety
    /// As [`convert_top`]: `state` is inside a protected call, with the
    /// value on top and room for each level of nesting.
    pub(super) unsafe fn convert_top(&mut self, state: *mut ffi::lua_State, resp3: bool) -> Reply {
        self.walk.resp3 = resp3;
        // SAFETY: as the function's contract.
        unsafe { convert_top(state, &mut self.walk) }
    }

    /// The reply for what [`Conversion::convert_top`] gave: an error if a
    /// limit was passed; the errors met counted in `errors`; a deep tree
    /// encoded at once.
    pub(super) fn finish(self, reply: Reply, proto: Protocol, errors: &mut ErrorCounts) -> Reply {
        let walk = self.walk;
        if walk.exceeded {
            let reply = Reply::error(RESULT_TOO_LARGE);
            errors.count(RESULT_TOO_LARGE.as_bytes());
            return reply;
        }
        errors.merge(walk.errors);
        if walk.deepest < DEEP_REPLY {
            return reply;
        }
        // Encoding and dropping a tree would recurse once per level: encode
        // it now, without recursion, and keep the bytes.
        let mut out = bytes::BytesMut::new();
        reply.encode_deep(proto, &mut out);
        Reply::Encoded(out.to_vec())
    }
}

/// Nesting from which a script's result is encoded at once (see
/// [`Reply::Encoded`]); limiter scripts return two levels at most.
const DEEP_REPLY: usize = 64;

/// The state of one conversion.
struct Walk {
    resp3: bool,
    /// Most Lua stack slots in use at any point.
    deepest: usize,
    elements_left: usize,
    bytes_left: usize,
    /// Set once a limit was passed: the walk stops descending.
    exceeded: bool,
    /// Errors met that INFO errorstats has not counted yet.
    errors: ErrorCounts,
}

fn convert(lua: &Lua, value: Value, walk: &mut Walk) -> Reply {
    let mut reply = None;
    // SAFETY: exec_raw runs the closure inside a protected call with `value`
    // at index 1; convert_top keeps the stack balanced and only reads.
    let ran = unsafe {
        lua.exec_raw::<()>(value, |state| {
            // The value's copy on top, above the argument: two slots in use,
            // as in Redis when it converts a script's result (the error
            // handler and the result).
            ffi::lua_pushvalue(state, 1);
            reply = Some(convert_top(state, walk));
            ffi::lua_settop(state, 0);
        })
    };
    match (ran, reply) {
        (Ok(()), Some(reply)) => reply,
        (Err(e), _) => {
            let text = format!("ERR {e}");
            walk.errors.count(text.as_bytes());
            Reply::error(text)
        }
        (Ok(()), None) => Reply::Nil,
    }
}

/// The string at `index` (which must be a string or a number: a number is
/// converted in place, so never call this on a key `lua_next` still needs).
///
/// # Safety
/// `state` is a live Lua state inside a protected call, and `index` is a
/// valid stack index holding a string or a number.
unsafe fn bytes_at(state: *mut ffi::lua_State, index: c_int) -> Vec<u8> {
    let mut len = 0usize;
    // SAFETY: the caller guarantees a string or number at `index`; Lua keeps
    // the bytes alive while the value is on the stack.
    unsafe {
        let data = ffi::lua_tolstring(state, index, &mut len);
        if data.is_null() {
            return Vec::new();
        }
        std::slice::from_raw_parts(data as *const u8, len).to_vec()
    }
}

/// Converts the value on top of the stack and pops it.
///
/// # Safety
/// `state` is a live Lua state inside a protected call (a Lua error in
/// here must unwind to it), with the value to convert on top and a free
/// stack slot for each level of nesting `walk` allows.
unsafe fn convert_top(state: *mut ffi::lua_State, walk: &mut Walk) -> Reply {
    // SAFETY: every call keeps the stack balanced (one value in, none out).
    unsafe {
        let used = ffi::lua_gettop(state).max(0) as usize;
        walk.deepest = walk.deepest.max(used);
        if walk.exceeded || walk.elements_left == 0 {
            walk.exceeded = true;
            ffi::lua_pop(state, 1);
            return Reply::Nil;
        }
        walk.elements_left -= 1;
        // Redis: room for 4 more slots (a map pushes 4), or this element is
        // the "stack limit" error.
        if ffi::lua_checkstack(state, 4) == 0 {
            ffi::lua_pop(state, 1);
            return Reply::error("ERR reached lua stack limit");
        }
        let resp3 = walk.resp3;
        let reply = stacker::maybe_grow(64 * 1024, 1024 * 1024, || {
            match ffi::lua_type(state, -1) {
                ffi::LUA_TSTRING => {
                    // Counted before it is copied.
                    match walk.bytes_left.checked_sub(ffi::lua_objlen(state, -1)) {
                        Some(left) => {
                            walk.bytes_left = left;
                            Reply::Bulk(bytes_at(state, -1))
                        }
                        None => {
                            walk.exceeded = true;
                            Reply::Nil
                        }
                    }
                }
                ffi::LUA_TBOOLEAN => {
                    let b = ffi::lua_toboolean(state, -1) != 0;
                    match (resp3, b) {
                        (true, b) => Reply::Bool(b),
                        (false, true) => Reply::Int(1),
                        (false, false) => Reply::Nil,
                    }
                }
                ffi::LUA_TNUMBER => Reply::Int(tally_lua::lua_number_to_integer(
                    ffi::lua_tonumber(state, -1),
                )),
                ffi::LUA_TTABLE => convert_table_top(state, walk),
                _ => Reply::Nil,
            }
        });
        ffi::lua_pop(state, 1);
        reply
    }
}

/// After a `lua_next` loop: one stopped by a limit left its key on the stack
/// (the loop tests the limit before calling lua_next, which would pop it).
///
/// # Safety
/// `state` is a live Lua state and, when `walk.exceeded`, the stopped
/// loop's key is on top of its stack.
unsafe fn stop_iteration(state: *mut ffi::lua_State, walk: &Walk) {
    if walk.exceeded {
        // SAFETY: the key the loop left is on top.
        unsafe { ffi::lua_pop(state, 1) };
    }
}

/// Pushes `table[name]` (raw) for the table on top and returns its type.
///
/// # Safety
/// `state` is a live Lua state inside a protected call, with a table on
/// top of its stack and room for one more value.
unsafe fn push_field(state: *mut ffi::lua_State, name: &'static std::ffi::CStr) -> c_int {
    // SAFETY: a table is on top; pushes exactly one value.
    unsafe {
        ffi::lua_pushstring(state, name.as_ptr());
        ffi::lua_rawget(state, -2)
    }
}

/// Converts the table on top of the stack (left there), in Redis's order of
/// checks: err, ok, double, map, set, then an array up to the first nil.
///
/// # Safety
/// As [`convert_top`], with a table on top of the stack.
unsafe fn convert_table_top(state: *mut ffi::lua_State, walk: &mut Walk) -> Reply {
    // SAFETY: each branch pops what it pushed; the table stays on top.
    unsafe {
        if push_field(state, c"err") == ffi::LUA_TSTRING {
            let text = bytes_at(state, -1);
            ffi::lua_pop(state, 1);
            let counted = push_field(state, c"ignore_error_stats_update") != ffi::LUA_TNIL
                && ffi::lua_toboolean(state, -1) != 0;
            ffi::lua_pop(state, 1);
            if !counted {
                walk.errors.count(&text);
            }
            return Reply::error_bytes(text);
        }
        ffi::lua_pop(state, 1);
        if push_field(state, c"ok") == ffi::LUA_TSTRING {
            let text = bytes_at(state, -1);
            ffi::lua_pop(state, 1);
            return Reply::Status(one_line(&text).into());
        }
        ffi::lua_pop(state, 1);
        if push_field(state, c"double") == ffi::LUA_TNUMBER {
            let d = ffi::lua_tonumber(state, -1);
            ffi::lua_pop(state, 1);
            return Reply::Double(d);
        }
        ffi::lua_pop(state, 1);
        if push_field(state, c"map") == ffi::LUA_TTABLE {
            let mut pairs = Vec::new();
            ffi::lua_pushnil(state);
            while !walk.exceeded && ffi::lua_next(state, -2) != 0 {
                // table, map, key, value: convert a copy of the key (the
                // original must stay for lua_next), then the value.
                ffi::lua_pushvalue(state, -2);
                let key = convert_top(state, walk);
                let value = convert_top(state, walk);
                pairs.push((key, value));
            }
            stop_iteration(state, walk);
            ffi::lua_pop(state, 1);
            return Reply::Map(pairs);
        }
        ffi::lua_pop(state, 1);
        if push_field(state, c"set") == ffi::LUA_TTABLE {
            let mut items = Vec::new();
            ffi::lua_pushnil(state);
            while !walk.exceeded && ffi::lua_next(state, -2) != 0 {
                ffi::lua_pop(state, 1);
                ffi::lua_pushvalue(state, -1);
                items.push(convert_top(state, walk));
            }
            stop_iteration(state, walk);
            ffi::lua_pop(state, 1);
            return Reply::Set(items);
        }
        ffi::lua_pop(state, 1);
        let mut items = Vec::new();
        for j in 1.. {
            if walk.exceeded {
                break;
            }
            ffi::lua_pushnumber(state, j as ffi::lua_Number);
            if ffi::lua_rawget(state, -2) == ffi::LUA_TNIL {
                ffi::lua_pop(state, 1);
                break;
            }
            items.push(convert_top(state, walk));
        }
        Reply::Array(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A map or set reply with a key Lua cannot hold converts without that
    /// key. No memory limit is set here, as while tally builds a reply for
    /// redis.call: before, Lua's error for the nil key aborted the process.
    #[test]
    fn reply_keys_lua_cannot_hold_are_left_out() {
        let lua = Lua::new();
        let map = Reply::Map(vec![
            (Reply::Nil, Reply::Int(1)),
            (Reply::Bulk(b"kept".to_vec()), Reply::Int(2)),
        ]);
        let (value, is_error) = reply_to_lua(&lua, &map, true).unwrap();
        assert!(!is_error);
        let Value::Table(outer) = value else {
            panic!("a map converts to a table")
        };
        let inner: mlua::Table = outer.raw_get("map").unwrap();
        let pairs: Vec<(String, i64)> = inner.pairs().map(|pair| pair.unwrap()).collect();
        assert_eq!(pairs, vec![("kept".to_string(), 2)]);

        let set = Reply::Set(vec![Reply::Nil, Reply::Bulk(b"member".to_vec())]);
        let Value::Table(outer) = reply_to_lua(&lua, &set, true).unwrap().0 else {
            panic!("a set converts to a table")
        };
        let inner: mlua::Table = outer.raw_get("set").unwrap();
        let members: Vec<(String, bool)> = inner.pairs().map(|pair| pair.unwrap()).collect();
        assert_eq!(members, vec![("member".to_string(), true)]);
    }
}
