//! Redis's readers of numbers in arguments, strict (or lenient) exactly
//! where Redis is: `string2ll` for integers, `strtold` for floats, C's
//! `atoi` where Redis uses it. Below everything: the protocol parser, the
//! config readers and the stores read numbers with them.

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

/// C's `atoi`: leading blanks, a sign, digits; 0 when there are none.
pub fn c_atoi(bytes: &[u8]) -> i64 {
    let text = bytes.trim_ascii_start();
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let mut value: i64 = 0;
    for &d in digits.iter().take_while(|d| d.is_ascii_digit()) {
        value = value.saturating_mul(10).saturating_add((d - b'0') as i64);
    }
    let value = if negative { -value } else { value };
    // atoi returns an int.
    value.clamp(i32::MIN as i64, i32::MAX as i64)
}

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
