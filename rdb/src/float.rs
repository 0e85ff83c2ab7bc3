//! Scores as Redis 7.0 writes them into a sorted set's listpack
//! (zzlInsertAt): integral values in range as integers, any other as
//! d2string's `%.17g`.

/// double2ll: the integer a score is exactly, within ±LLONG_MAX/2.
pub fn as_integer(value: f64) -> Option<i64> {
    const LIMIT: f64 = (i64::MAX / 2) as f64;
    if !(-LIMIT..=LIMIT).contains(&value) {
        return None;
    }
    let integer = value as i64;
    (integer as f64 == value).then_some(integer)
}

/// d2string for a value that is not an integer: "nan", "inf", "-inf", or
/// C's `%.17g`.
pub fn d2string(value: f64) -> String {
    if value.is_nan() {
        return "nan".into();
    }
    if value.is_infinite() {
        return if value < 0.0 { "-inf" } else { "inf" }.into();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.into();
    }
    format_g17(value)
}

/// C's `%.17g` for a finite, non-zero value: 17 significant digits,
/// scientific notation when the exponent is below -4 or at least 17,
/// trailing zeros removed.
fn format_g17(value: f64) -> String {
    const PRECISION: i32 = 17;
    // `{:.16e}` rounds the exact binary value to 17 significant digits,
    // as printf does.
    let scientific = format!("{:.16e}", value);
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if !(-4..PRECISION).contains(&exponent) {
        out.push_str(&digits[..1]);
        let fraction = digits[1..].trim_end_matches('0');
        if !fraction.is_empty() {
            out.push('.');
            out.push_str(fraction);
        }
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exponent.abs()));
    } else if exponent < 0 {
        out.push_str("0.");
        for _ in 0..(-exponent - 1) {
            out.push('0');
        }
        out.push_str(digits.trim_end_matches('0'));
    } else {
        let point = exponent as usize + 1;
        out.push_str(&digits[..point]);
        let fraction = digits[point..].trim_end_matches('0');
        if !fraction.is_empty() {
            out.push('.');
            out.push_str(fraction);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_print_as_c_s_g17() {
        for (value, text) in [
            (1.5, "1.5"),
            (0.1, "0.10000000000000001"),
            (-2.25, "-2.25"),
            (1e-5, "1.0000000000000001e-05"),
            (0.0001, "0.0001"),
            (1e20, "1e+20"),
            (123456789.125, "123456789.125"),
            (3.0e-300, "3.0000000000000002e-300"),
            (f64::INFINITY, "inf"),
            (-0.0, "-0"),
        ] {
            assert_eq!(d2string(value), text, "{value}");
        }
    }

    #[test]
    fn integral_scores_are_integers_within_half_the_range() {
        assert_eq!(as_integer(3.0), Some(3));
        assert_eq!(as_integer(-0.0), Some(0));
        assert_eq!(as_integer(0.5), None);
        assert_eq!(as_integer(1e300), None);
    }
}
