//! How Redis 7.0 reads a parameter's value: memory amounts with units,
//! bounded numbers (with its error texts), yes/no.

/// Parses a memory amount as Redis's `memtoull` does: a plain byte count, or a
/// number followed by k/kb/m/mb/g/gb (case-insensitive), where k = 1000 and
/// kb = 1024.
pub fn parse_memory(text: &str) -> Option<u64> {
    let lower = text.trim().to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(split);
    if digits.is_empty() {
        return None;
    }
    let number: u64 = digits.parse().ok()?;
    number.checked_mul(memory_unit(unit)?)
}

/// The multiplier of a memory unit as Redis spells them (any case).
fn memory_unit(unit: &str) -> Option<u64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    })
}

/// Redis's `memtoull`: digits and an optional unit, read with strtoull, so
/// overflow saturates and the unit's multiplication wraps, exactly as Redis
/// stores `maxmemory 99999999999999999999999gb` (18446744072635809792).
pub(super) fn memtoull(text: &str) -> Option<u64> {
    if text.starts_with('-') {
        return None;
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let multiplier = memory_unit(unit)?;
    if digits.len() >= 128 {
        return None;
    }
    // strtoull of no digits is 0; of too many, ULLONG_MAX.
    let value = if digits.is_empty() {
        0
    } else {
        digits.parse::<u64>().unwrap_or(u64::MAX)
    };
    Some(value.wrapping_mul(multiplier))
}

/// The range a numeric parameter accepts, as Redis declares it: signed
/// (`createIntConfig`, `createLongLongConfig`) or unsigned
/// (`createUIntConfig`, `createULongLongConfig`).
#[derive(Clone, Copy)]
pub(super) enum Range {
    Signed(i64, i64),
    Unsigned(u64, u64),
}

/// Reads a numeric parameter as Redis 7.0's `numericParseString` and bounds
/// check do, with their error texts.
pub(super) fn redis_number(text: &str, memory: bool, range: Range) -> Result<i128, String> {
    // Parsed as a long long (a memory value is its unsigned bits).
    let raw: i64 = if memory {
        memtoull(text).ok_or("argument must be a memory value")? as i64
    } else {
        crate::number::parse_i64(text.as_bytes())
            .ok_or("argument couldn't be parsed into an integer")?
    };
    match range {
        Range::Signed(min, max) if raw < min || raw > max => Err(format!(
            "argument must be between {min} and {max} inclusive"
        )),
        Range::Unsigned(min, max) if (raw as u64) < min || (raw as u64) > max => Err(format!(
            "argument must be between {min} and {max} inclusive"
        )),
        Range::Signed(..) => Ok(raw as i128),
        Range::Unsigned(..) => Ok(raw as u64 as i128),
    }
}

pub(super) fn parse_yes_no(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}
