//! Conversions between command replies and Lua values, by Redis 7.0's rules.

use mlua::{Lua, Table, Value};

use crate::resp::Reply;

/// A command's reply as the Lua value redis.call/pcall returns; the flag is
/// true for error replies (redis.call raises them).
pub fn reply_to_lua(lua: &Lua, reply: &Reply, resp3: bool) -> mlua::Result<(Value, bool)> {
    let value = match reply {
        Reply::Ok => status_table(lua, "OK")?,
        Reply::Status(text) => status_table(lua, text)?,
        Reply::Error(text) => {
            let table = lua.create_table()?;
            table.raw_set("err", text.trim_end_matches(['\r', '\n']))?;
            return Ok((Value::Table(table), true));
        }
        Reply::Int(n) => Value::Number(*n as f64),
        Reply::Bulk(bytes) => Value::String(lua.create_string(bytes)?),
        Reply::BulkStatic(bytes) => Value::String(lua.create_string(bytes)?),
        Reply::BulkInt(n) => Value::String(lua.create_string(itoa::Buffer::new().format(*n))?),
        Reply::Nil | Reply::NilArray | Reply::Nothing => {
            if resp3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        Reply::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                table.raw_set(i + 1, reply_to_lua(lua, item, resp3)?.0)?;
            }
            Value::Table(table)
        }
        Reply::Map(pairs) if resp3 => {
            let inner = lua.create_table()?;
            for (k, v) in pairs {
                inner.raw_set(
                    reply_to_lua(lua, k, resp3)?.0,
                    reply_to_lua(lua, v, resp3)?.0,
                )?;
            }
            let outer = lua.create_table()?;
            outer.raw_set("map", inner)?;
            Value::Table(outer)
        }
        Reply::Map(pairs) => {
            let table = lua.create_table_with_capacity(pairs.len() * 2, 0)?;
            for (i, (k, v)) in pairs.iter().enumerate() {
                table.raw_set(2 * i + 1, reply_to_lua(lua, k, resp3)?.0)?;
                table.raw_set(2 * i + 2, reply_to_lua(lua, v, resp3)?.0)?;
            }
            Value::Table(table)
        }
        Reply::Set(items) if resp3 => {
            let inner = lua.create_table()?;
            for item in items {
                inner.raw_set(reply_to_lua(lua, item, resp3)?.0, true)?;
            }
            let outer = lua.create_table()?;
            outer.raw_set("set", inner)?;
            Value::Table(outer)
        }
        Reply::Set(items) => reply_to_lua(lua, &Reply::Array(items.clone()), resp3)?.0,
        Reply::Bulks(list) => {
            let table = lua.create_table_with_capacity(list.len(), 0)?;
            for (i, item) in list.iter().enumerate() {
                table.raw_set(i + 1, lua.create_string(item)?)?;
            }
            Value::Table(table)
        }
        // Scripts cannot subscribe (SUBSCRIBE is `noscript`); shown as arrays.
        Reply::Push(items) | Reply::Multi(items) => {
            reply_to_lua(lua, &Reply::Array(items.clone()), resp3)?.0
        }
        Reply::Bool(b) if resp3 => Value::Boolean(*b),
        Reply::Bool(b) => Value::Number(*b as i64 as f64),
        Reply::Verbatim(text) if resp3 => {
            let inner = lua.create_table()?;
            inner.raw_set("format", "txt")?;
            inner.raw_set("string", lua.create_string(text)?)?;
            let outer = lua.create_table()?;
            outer.raw_set("verbatim_string", inner)?;
            Value::Table(outer)
        }
        Reply::Verbatim(text) => Value::String(lua.create_string(text)?),
        Reply::Double(d) if resp3 => {
            let outer = lua.create_table()?;
            outer.raw_set("double", *d)?;
            Value::Table(outer)
        }
        Reply::Double(d) => Value::String(lua.create_string(crate::float::format_g17(*d))?),
    };
    Ok((value, false))
}

fn status_table(lua: &Lua, text: &str) -> mlua::Result<Value> {
    let table = lua.create_table()?;
    table.raw_set("ok", text)?;
    Ok(Value::Table(table))
}

/// Replaces CR and LF with spaces, as Redis does for status and error lines.
fn one_line(text: &[u8]) -> String {
    String::from_utf8_lossy(text)
        .chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect()
}

fn field(table: &Table, name: &str) -> Value {
    table.raw_get(name).unwrap_or(Value::Nil)
}

/// A script's return value (or an element of it) as a reply. `resp3` is the
/// level the script chose with redis.setresp.
pub fn lua_to_reply(value: &Value, resp3: bool) -> Reply {
    match value {
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Boolean(b) if resp3 => Reply::Bool(*b),
        Value::Boolean(true) => Reply::Int(1),
        Value::Boolean(false) => Reply::Nil,
        Value::Number(n) => Reply::Int(tally_lua::lua_number_to_integer(*n)),
        Value::Integer(n) => Reply::Int(*n),
        Value::Table(table) => {
            if let Value::String(err) = field(table, "err") {
                return Reply::Error(one_line(&err.as_bytes()).into());
            }
            if let Value::String(ok) = field(table, "ok") {
                return Reply::Status(one_line(&ok.as_bytes()).into());
            }
            if let Some(d) = match field(table, "double") {
                Value::Number(d) => Some(d),
                Value::Integer(i) => Some(i as f64),
                _ => None,
            } {
                return Reply::Bulk(crate::float::format_g17(d).into_bytes());
            }
            if let Value::Table(map) = field(table, "map") {
                let pairs = map
                    .pairs::<Value, Value>()
                    .filter_map(Result::ok)
                    .map(|(k, v)| (lua_to_reply(&k, resp3), lua_to_reply(&v, resp3)))
                    .collect();
                return Reply::Map(pairs);
            }
            if let Value::Table(set) = field(table, "set") {
                let items = set
                    .pairs::<Value, Value>()
                    .filter_map(Result::ok)
                    .map(|(k, _)| lua_to_reply(&k, resp3))
                    .collect();
                return Reply::Set(items);
            }
            let mut items = Vec::new();
            for i in 1.. {
                let item: Value = table.raw_get(i).unwrap_or(Value::Nil);
                if item == Value::Nil {
                    break;
                }
                items.push(lua_to_reply(&item, resp3));
            }
            Reply::Array(items)
        }
        _ => Reply::Nil,
    }
}
