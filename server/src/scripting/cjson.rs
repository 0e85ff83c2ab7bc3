//! The `cjson` library Redis ships (lua-cjson 2.1), for scripts that build or
//! read JSON: `cjson.encode`, `cjson.decode` and `cjson.null`.
//!
//! Encoding follows lua-cjson's rules exactly: numbers as `%.14g`, `/`
//! escaped, a table with only positive integer keys is an array (holes become
//! `null`, an excessively sparse one is an error), any other table an object
//! whose keys come out in Lua's own iteration order (the same Lua 5.1 as
//! Redis's, so the same order), an empty table `{}`. Decoding parses with
//! serde_json; its error messages differ from lua-cjson's (see
//! docs/compatibility.md).

use mlua::{LightUserData, Lua, Table, Value};

const MAX_DEPTH: usize = 1000;
/// lua-cjson's `encode_sparse_ratio` and `encode_sparse_safe` defaults.
const SPARSE_RATIO: usize = 2;
const SPARSE_SAFE: usize = 10;

fn format_number(n: f64) -> Result<String, String> {
    if !n.is_finite() {
        return Err("Cannot serialise number: must not be NaN or Inf".to_string());
    }
    Ok(crate::float::format_g(n, 14))
}

fn escape_into(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            8 => out.extend_from_slice(b"\\b"),
            12 => out.extend_from_slice(b"\\f"),
            0..=31 | 127 => out.extend_from_slice(format!("\\u{:04x}", b).as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// The array length lua-cjson would use, `None` for an object.
fn array_length(table: &Table) -> Result<Option<usize>, String> {
    let mut max = 0usize;
    let mut items = 0usize;
    for pair in table.pairs::<Value, Value>() {
        let (key, _) = pair.map_err(|e| e.to_string())?;
        let index = match key {
            Value::Integer(i) if i >= 1 => i as usize,
            Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => n as usize,
            _ => return Ok(None),
        };
        max = max.max(index);
        items += 1;
    }
    if max > items * SPARSE_RATIO && max > SPARSE_SAFE {
        return Err("Cannot serialise table: excessively sparse array".to_string());
    }
    Ok(if max == 0 { None } else { Some(max) })
}

fn encode_value(out: &mut Vec<u8>, value: &Value, depth: usize) -> Result<(), String> {
    match value {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(ud) if ud.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(format_number(*i as f64)?.as_bytes()),
        Value::Number(n) => out.extend_from_slice(format_number(*n)?.as_bytes()),
        Value::String(s) => escape_into(out, &s.as_bytes()),
        Value::Table(table) => {
            if depth > MAX_DEPTH {
                return Err(format!("Cannot serialise, excessive nesting ({depth})"));
            }
            match array_length(table)? {
                Some(len) => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        let item: Value = table.raw_get(i).map_err(|e| e.to_string())?;
                        encode_value(out, &item, depth + 1)?;
                    }
                    out.push(b']');
                }
                None => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in table.pairs::<Value, Value>() {
                        let (key, item) = pair.map_err(|e| e.to_string())?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match key {
                            Value::String(s) => escape_into(out, &s.as_bytes()),
                            Value::Integer(i) => {
                                escape_into(out, format_number(i as f64)?.as_bytes())
                            }
                            Value::Number(n) => escape_into(out, format_number(n)?.as_bytes()),
                            _ => {
                                return Err(
                                    "Cannot serialise table: table key must be a number or string"
                                        .to_string(),
                                )
                            }
                        }
                        out.push(b':');
                        encode_value(out, &item, depth + 1)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            ))
        }
    }
    Ok(())
}

fn decode_value(lua: &Lua, value: serde_json::Value) -> mlua::Result<Value> {
    Ok(match value {
        serde_json::Value::Null => Value::LightUserData(LightUserData(std::ptr::null_mut())),
        serde_json::Value::Bool(b) => Value::Boolean(b),
        serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::String(s) => Value::String(lua.create_string(&s)?),
        serde_json::Value::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.into_iter().enumerate() {
                table.raw_set(i + 1, decode_value(lua, item)?)?;
            }
            Value::Table(table)
        }
        serde_json::Value::Object(map) => {
            let table = lua.create_table_with_capacity(0, map.len())?;
            for (key, item) in map {
                table.raw_set(key, decode_value(lua, item)?)?;
            }
            Value::Table(table)
        }
    })
}

/// Registers the global `cjson` table.
pub fn install(lua: &Lua) -> mlua::Result<()> {
    let cjson = lua.create_table()?;
    cjson.set(
        "encode",
        lua.create_function(|lua, value: Value| {
            let mut out = Vec::new();
            encode_value(&mut out, &value, 1).map_err(mlua::Error::runtime)?;
            lua.create_string(&out)
        })?,
    )?;
    cjson.set(
        "decode",
        lua.create_function(|lua, text: mlua::String| {
            let parsed: serde_json::Value = serde_json::from_slice(&text.as_bytes())
                .map_err(|e| mlua::Error::runtime(format!("Expected value but {e}")))?;
            decode_value(lua, parsed)
        })?,
    )?;
    cjson.set("null", LightUserData(std::ptr::null_mut()))?;
    lua.globals().raw_set("cjson", cjson)
}
