//! INCRBYFLOAT's (and INCREX BYFLOAT's) arithmetic, done by libc in
//! `long double` as Redis does it;
//! see `csrc/long_double.c` for why Rust's f64 would not give the same digits.

use std::os::raw::{c_char, c_int};

extern "C" {
    fn tally_long_double_add(
        a: *const c_char,
        alen: usize,
        b: *const c_char,
        blen: usize,
        out: *mut c_char,
        outlen: usize,
    ) -> c_int;
    fn tally_long_double_increx(
        current: *const c_char,
        current_len: usize,
        incr: *const c_char,
        incr_len: usize,
        lower: *const c_char,
        lower_len: usize,
        upper: *const c_char,
        upper_len: usize,
        saturate: c_int,
        value_out: *mut c_char,
        delta_out: *mut c_char,
        outlen: usize,
        value_len: *mut c_int,
        delta_len: *mut c_int,
    ) -> c_int;
    fn tally_format_g(value: f64, precision: c_int, out: *mut c_char, outlen: usize) -> c_int;
    fn tally_format_human_double(value: f64, out: *mut c_char, outlen: usize) -> c_int;
    fn tally_string2d(s: *const c_char, slen: usize, out: *mut f64) -> c_int;
    fn tally_strtod_bound(s: *const c_char, out: *mut f64) -> c_int;
    fn tally_strtod_sort_weight(s: *const c_char, out: *mut f64) -> c_int;
    fn tally_timeout_ms(s: *const c_char, slen: usize, out: *mut i64) -> c_int;
}

/// `bytes` with a NUL after them, as the C readers need.
fn c_string(bytes: &[u8]) -> Vec<u8> {
    let mut text = Vec::with_capacity(bytes.len() + 1);
    text.extend_from_slice(bytes);
    text.push(0);
    text
}

/// A score (ZADD, ZINCRBY) read as Redis's `string2d`: strtod over the whole
/// argument, no leading space, no NaN, no overflow to infinity and no
/// underflow to zero (`1e400`, `1e-400` refused; `0x10`, `inf` accepted).
pub fn string2d(bytes: &[u8]) -> Option<f64> {
    let text = c_string(bytes);
    let mut value = 0.0;
    // SAFETY: `text` is NUL-terminated at `bytes.len()` and outlives the call.
    let ok = unsafe { tally_string2d(text.as_ptr() as *const c_char, bytes.len(), &mut value) };
    (ok != 0).then_some(value)
}

/// A score bound (ZRANGEBYSCORE, ZCOUNT, ...) read as Redis's
/// `zslParseRange`: strtod to the end of the C string, NaN refused,
/// overflow allowed (`1e400` is +inf), leading spaces skipped.
pub fn strtod_bound(bytes: &[u8]) -> Option<f64> {
    let text = c_string(bytes);
    let mut value = 0.0;
    // SAFETY: `text` is NUL-terminated and outlives the call.
    let ok = unsafe { tally_strtod_bound(text.as_ptr() as *const c_char, &mut value) };
    (ok != 0).then_some(value)
}

/// A SORT weight read as Redis 7.0's SORT reads one: strtod to the end of
/// the C string (so to a NUL byte inside the value), leading spaces
/// skipped, NaN and out-of-range values (overflow or underflow) refused,
/// the empty string 0.
pub fn sort_weight(bytes: &[u8]) -> Option<f64> {
    let text = c_string(bytes);
    let mut value = 0.0;
    // SAFETY: `text` is NUL-terminated and outlives the call.
    let ok = unsafe { tally_strtod_sort_weight(text.as_ptr() as *const c_char, &mut value) };
    (ok != 0).then_some(value)
}

/// A blocking command's timeout, given in seconds, in milliseconds as
/// Redis 7.0 computes it: `(long long) ceill(seconds * 1000)` in long
/// double, with the machine's conversion of a value past the range (a
/// negative number on x86-64, which Redis then refuses as negative).
/// `None`: not a float.
pub fn timeout_ms(bytes: &[u8]) -> Option<i64> {
    let mut ms = 0i64;
    // SAFETY: the C reader copies at most `bytes.len()` bytes of `bytes`.
    let ok = unsafe { tally_timeout_ms(bytes.as_ptr() as *const c_char, bytes.len(), &mut ms) };
    (ok != 0).then_some(ms)
}

/// Formats `value` as C's `%.17g`, as Redis 7.0 formats numbers passed from
/// Lua to redis.call and double replies.
pub fn format_g17(value: f64) -> String {
    format_g(value, 17)
}

/// Formats `value` as C's `%.<precision>g`.
pub fn format_g(value: f64, precision: i32) -> String {
    // An integer of at most `precision` digits prints as its digits, with
    // no point and no exponent: the common number a script passes to
    // redis.call (a timestamp, a count, a TTL), for which snprintf cost a
    // limiter script more than its command. Zero keeps its sign, as in C.
    if (1..=17).contains(&precision)
        && value.fract() == 0.0
        && value.abs() < 10f64.powi(precision)
        && (value != 0.0 || value.is_sign_positive())
    {
        return (value as i64).to_string();
    }
    format_g_in_c(value, precision)
}

/// [`format_g`] by C's snprintf, for every value.
fn format_g_in_c(value: f64, precision: i32) -> String {
    let mut out = [0u8; 64];
    // SAFETY: the buffer is 64 bytes and the C function writes at most outlen.
    let len = unsafe { tally_format_g(value, precision, out.as_mut_ptr().cast(), out.len()) };
    String::from_utf8_lossy(&out[..(len.max(0) as usize).min(out.len())]).into_owned()
}

/// A finite double as Redis's addReplyHumanLongDouble prints it (GEOPOS's
/// coordinates): promoted to long double, `%.17Lf`, trailing zeros and a
/// bare point removed.
pub fn format_human(value: f64) -> Vec<u8> {
    // 17 decimals after up to 309 integer digits, a sign and a point.
    let mut out = [0u8; 400];
    // SAFETY: the buffer is 400 bytes and the C function writes at most outlen.
    let len = unsafe { tally_format_human_double(value, out.as_mut_ptr().cast(), out.len()) };
    out[..(len.max(0) as usize).min(out.len())].to_vec()
}

/// A distance as Redis's addReplyDoubleDistance prints it (fixedpoint_d2string
/// with four decimals): the value times 10^4 rounded half to even (`llrint`)
/// and written with the point put back.
pub fn format_fixed4(value: f64) -> String {
    let scaled = (value * 10000.0).round_ties_even() as i64;
    let sign = if scaled < 0 { "-" } else { "" };
    let magnitude = scaled.unsigned_abs();
    format!("{sign}{}.{:04}", magnitude / 10000, magnitude % 10000)
}

/// Why an addition failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddError {
    /// An operand is not a float Redis accepts.
    NotAFloat,
    /// The sum is NaN or infinite.
    NanOrInfinity,
}

/// Adds two decimal strings in long double and formats the sum as Redis's
/// INCRBYFLOAT does (`%.17Lf`, trailing zeros removed).
pub fn add_human(a: &[u8], b: &[u8]) -> Result<Vec<u8>, AddError> {
    let mut out = vec![0u8; 5 * 1024 + 64];
    // SAFETY: the pointers and lengths describe live buffers; the C function
    // reads at most alen/blen bytes and writes at most outlen bytes.
    let len = unsafe {
        tally_long_double_add(
            a.as_ptr().cast(),
            a.len(),
            b.as_ptr().cast(),
            b.len(),
            out.as_mut_ptr().cast(),
            out.len(),
        )
    };
    match len {
        -2 => Err(AddError::NanOrInfinity),
        n if n < 0 => Err(AddError::NotAFloat),
        n => {
            out.truncate(n as usize);
            Ok(out)
        }
    }
}

/// Why INCREX BYFLOAT refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncrexError {
    /// The increment or a bound is not a finite float.
    NotAFloat,
    /// The lower bound is above the upper one.
    BoundsCrossed,
    /// The key holds something that is not a float.
    CurrentNotAFloat,
    /// The increment applied would be infinite (saturating from one end
    /// of the long double range to the other).
    Infinite,
}

/// What INCREX BYFLOAT leaves: the key's value and the increment applied,
/// both as Redis prints long doubles (INCRBYFLOAT's form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FloatIncrement {
    /// The key's value afterwards.
    pub value: Vec<u8>,
    /// The increment applied ("0" when skipped).
    pub delta: Vec<u8>,
    /// The sum fell outside the bounds without SATURATE: nothing changes.
    pub skipped: bool,
}

/// INCREX BYFLOAT's arithmetic in long double, as Redis 8.8 does it (see
/// `tally_long_double_increx`). With `current` `None` only the arguments
/// are checked, so a bad one is refused before the key is looked up.
pub fn increx(
    current: Option<&[u8]>,
    incr: &[u8],
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
    saturate: bool,
) -> Result<FloatIncrement, IncrexError> {
    const MAX: usize = 5 * 1024 + 64;
    let mut value = vec![0u8; MAX];
    let mut delta = vec![0u8; MAX];
    let (mut value_len, mut delta_len) = (0, 0);
    let pointer =
        |arg: Option<&[u8]>| arg.map_or((std::ptr::null(), 0), |a| (a.as_ptr().cast(), a.len()));
    let (current_ptr, current_len) = pointer(current);
    let (lower_ptr, lower_len) = pointer(lower);
    let (upper_ptr, upper_len) = pointer(upper);
    // SAFETY: each pointer is null or describes a live buffer of the length
    // passed with it; the C function writes at most MAX bytes to each output
    // buffer, both of which are MAX long.
    let status = unsafe {
        tally_long_double_increx(
            current_ptr,
            current_len,
            incr.as_ptr().cast(),
            incr.len(),
            lower_ptr,
            lower_len,
            upper_ptr,
            upper_len,
            c_int::from(saturate),
            value.as_mut_ptr().cast(),
            delta.as_mut_ptr().cast(),
            MAX,
            &mut value_len,
            &mut delta_len,
        )
    };
    match status {
        -1 => Err(IncrexError::NotAFloat),
        -2 => Err(IncrexError::Infinite),
        -4 => Err(IncrexError::BoundsCrossed),
        -5 => Err(IncrexError::CurrentNotAFloat),
        0 | 1 if current.is_some() => {
            value.truncate(value_len as usize);
            delta.truncate(delta_len as usize);
            Ok(FloatIncrement {
                value,
                delta,
                skipped: status == 1,
            })
        }
        0 => Ok(FloatIncrement {
            value: Vec::new(),
            delta: Vec::new(),
            skipped: false,
        }),
        // The buffers hold the longest long double printed with "%.17Lf".
        _ => unreachable!("INCREX's long double did not fit {MAX} bytes"),
    }
}

/// `%f` with its trailing zeros (and a bare point) removed, as Redis's
/// trimDoubleString leaves it: 99.9 → `99.9`, 50 → `50`.
pub fn trim_double(value: f64) -> String {
    let text = format!("{value:.6}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geo_coordinates_and_distances_print_as_redis_prints_them() {
        // GEOPOS of `GEOADD Sicily 13.361389 38.115556 Palermo` on Redis 7.0.
        assert_eq!(format_human(13.361389338970184), b"13.36138933897018433");
        assert_eq!(format_human(-0.0), b"0");
        assert_eq!(format_human(2.5), b"2.5");
        assert_eq!(format_human(-180.0), b"-180");
        assert_eq!(format_fixed4(0.0), "0.0000");
        assert_eq!(format_fixed4(0.00004), "0.0000");
        assert_eq!(format_fixed4(1.23456), "1.2346");
        assert_eq!(format_fixed4(166274.15156), "166274.1516");
        assert_eq!(format_fixed4(-2.5), "-2.5000");
    }

    #[test]
    fn integers_print_as_c_prints_them() {
        let mut values = vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            9.0,
            10.0,
            99.0,
            1e15,
            1e16,
            1e17,
            -1e17,
            1e18,
            1720000030000.0,
            123456789012345678.0,
            9007199254740992.0,
            4.0e16 + 2.0,
        ];
        for exponent in 0..19 {
            let power = 10f64.powi(exponent);
            values.extend([power - 1.0, power, power + 1.0, -(power - 1.0), -power]);
        }
        for value in values {
            for precision in [1, 2, 5, 14, 15, 16, 17] {
                assert_eq!(
                    format_g(value, precision),
                    format_g_in_c(value, precision),
                    "{value} at %.{precision}g"
                );
            }
        }
        // Not integers: the C path, untouched.
        assert_eq!(format_g17(0.1), "0.10000000000000001");
        assert_eq!(format_g17(-2.5), "-2.5");
        assert_eq!(format_g17(f64::INFINITY), "inf");
    }

    #[test]
    fn sums_match_redis_long_double_output() {
        // Expected strings were read from redis-server 7.0.15 INCRBYFLOAT.
        assert_eq!(
            add_human(b"0", b"12345.6").unwrap(),
            b"12345.59999999999999964"
        );
        assert_eq!(add_human(b"0.1", b"0.2").unwrap(), b"0.3");
        assert_eq!(add_human(b"0", b"1e20").unwrap(), b"100000000000000000000");
        assert_eq!(
            add_human(b"1", b"0.333333333333333333333").unwrap(),
            b"1.33333333333333333"
        );
        assert_eq!(add_human(b"10.5", b"0.1").unwrap(), b"10.6");
        assert_eq!(add_human(b"1", b"-1").unwrap(), b"0");
    }

    #[test]
    fn g17_formats_like_printf() {
        assert_eq!(format_g17(0.1), "0.10000000000000001");
        assert_eq!(format_g17(3.0), "3");
        assert_eq!(format_g17(1e20), "1e+20");
        assert_eq!(format_g17(-2.5), "-2.5");
    }

    #[test]
    fn invalid_operands_and_infinities_are_refused() {
        assert_eq!(add_human(b"abc", b"1"), Err(AddError::NotAFloat));
        assert_eq!(add_human(b"1", b" 1"), Err(AddError::NotAFloat));
        assert_eq!(add_human(b"1", b"nan"), Err(AddError::NotAFloat));
        assert_eq!(add_human(b"05\x00\x00115", b"1"), Err(AddError::NotAFloat));
        assert_eq!(add_human(b"inf", b"-inf"), Err(AddError::NanOrInfinity));
        assert_eq!(
            add_human(b"1e4932", b"1e4932"),
            Err(AddError::NanOrInfinity)
        );
    }
}
