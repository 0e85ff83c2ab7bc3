//! Argument parsing shared by every command family, strict in the ways Redis is.

use super::error;
use crate::resp::Reply;

/// Parses a canonical 64-bit signed decimal integer exactly as Redis's
/// `string2ll`: no sign but a leading `-`, no leading zeros, no spaces, at most
/// 20 characters.
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    if bytes.is_empty() || bytes.len() > 20 {
        return None;
    }
    if bytes == b"0" {
        return Some(0);
    }
    let (negative, digits) = match bytes[0] {
        b'-' => (true, &bytes[1..]),
        _ => (false, bytes),
    };
    if digits.is_empty() || !(b'1'..=b'9').contains(&digits[0]) {
        return None;
    }
    let mut value: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add((b - b'0') as u64)?;
    }
    if negative {
        if value > i64::MAX as u64 + 1 {
            None
        } else {
            Some((value as i64).wrapping_neg())
        }
    } else {
        i64::try_from(value).ok()
    }
}

/// Parses an integer argument, or gives the reply Redis sends for a bad one.
pub fn int_arg(bytes: &[u8]) -> Result<i64, Reply> {
    parse_i64(bytes).ok_or_else(|| Reply::error(error::NOT_INTEGER))
}

/// Parses two integer arguments (a range's ends, LIMIT's offset and count);
/// the first bad one gives the reply.
pub fn int_pair(a: &[u8], b: &[u8]) -> Result<(i64, i64), Reply> {
    Ok((int_arg(a)?, int_arg(b)?))
}

/// Parses a float the way Redis's `string2ld`/`strtold` accepts it: no
/// surrounding spaces, `inf` allowed, `nan` refused.
pub fn parse_f64(bytes: &[u8]) -> Option<f64> {
    if bytes.is_empty() || bytes.len() > 5000 {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    if text.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let value: f64 = text.parse().ok()?;
    if value.is_nan() {
        None
    } else {
        Some(value)
    }
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
#[inline]
pub fn is(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

pub use crate::glob::glob_match;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_must_be_canonical() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        for bad in [
            &b"9223372036854775808"[..],
            b"-0",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"",
            b"-",
            b"1.0",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn floats_refuse_nan_and_spaces() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"1 "), None);
    }
}
