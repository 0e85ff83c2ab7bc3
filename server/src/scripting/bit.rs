//! The `bit` library Redis ships (LuaBitOp): 32-bit operations on Lua
//! numbers, results as signed 32-bit numbers.

use mlua::{Lua, Variadic};

/// LuaBitOp's argument normalisation: round to an integer, then wrap to 32 bits.
fn tobit(n: f64) -> i32 {
    let wrapped = n.round_ties_even().rem_euclid(4_294_967_296.0);
    wrapped as u32 as i32
}

/// Registers the global `bit` table.
pub fn install(lua: &Lua) -> mlua::Result<()> {
    let bit = lua.create_table()?;
    bit.set("tobit", lua.create_function(|_, n: f64| Ok(tobit(n)))?)?;
    bit.set("bnot", lua.create_function(|_, n: f64| Ok(!tobit(n)))?)?;
    let fold = |op: fn(i32, i32) -> i32| {
        move |_: &Lua, (first, rest): (f64, Variadic<f64>)| {
            Ok(rest.iter().fold(tobit(first), |acc, n| op(acc, tobit(*n))))
        }
    };
    bit.set("band", lua.create_function(fold(|a, b| a & b))?)?;
    bit.set("bor", lua.create_function(fold(|a, b| a | b))?)?;
    bit.set("bxor", lua.create_function(fold(|a, b| a ^ b))?)?;
    let shift = |op: fn(i32, u32) -> i32| {
        move |_: &Lua, (n, by): (f64, f64)| Ok(op(tobit(n), (tobit(by) & 31) as u32))
    };
    bit.set(
        "lshift",
        lua.create_function(shift(|a, s| ((a as u32) << s) as i32))?,
    )?;
    bit.set(
        "rshift",
        lua.create_function(shift(|a, s| ((a as u32) >> s) as i32))?,
    )?;
    bit.set("arshift", lua.create_function(shift(|a, s| a >> s))?)?;
    bit.set(
        "rol",
        lua.create_function(shift(|a, s| (a as u32).rotate_left(s) as i32))?,
    )?;
    bit.set(
        "ror",
        lua.create_function(shift(|a, s| (a as u32).rotate_right(s) as i32))?,
    )?;
    bit.set(
        "bswap",
        lua.create_function(|_, n: f64| Ok(tobit(n).swap_bytes()))?,
    )?;
    bit.set(
        "tohex",
        lua.create_function(|_, (n, digits): (f64, Option<f64>)| {
            let mut width = digits.map(tobit).unwrap_or(8);
            let upper = width < 0;
            width = width.unsigned_abs().min(8) as i32;
            let value = tobit(n) as u32 as u64;
            let masked = if width == 8 {
                value
            } else {
                value & ((1u64 << (4 * width)) - 1)
            };
            let text = format!("{:0width$x}", masked, width = width as usize);
            Ok(if upper { text.to_uppercase() } else { text })
        })?,
    )?;
    lua.globals().raw_set("bit", bit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_wraps_to_signed_32_bits() {
        assert_eq!(tobit(4294967295.0), -1);
        assert_eq!(tobit(2147483648.0), i32::MIN);
        assert_eq!(tobit(-1.0), -1);
        assert_eq!(tobit(1.5), 2);
    }
}
