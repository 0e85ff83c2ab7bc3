//! Native twin of Spring Cloud Gateway's token bucket,
//! `scripts/spring_cloud_gateway_request_rate_limiter.lua`, byte for byte
//! as `RedisRateLimiter` loads it from
//! `META-INF/scripts/request_rate_limiter.lua` (spring-cloud-gateway
//! 4.3.x and 5.0.x; the SHA1 a gateway sends is that of these bytes).
//!
//! KEYS = tokens key, timestamp key; ARGV = replenish rate (tokens per
//! second), burst capacity, now (the gateway sends `""`, so the script reads
//! TIME's seconds), requested tokens. The bucket refills by the seconds
//! since the stored timestamp, the request takes its tokens if there are
//! enough, and both keys are SETEX'd for twice the time a bucket takes to
//! fill. Reply `{allowed, tokens left}`.
//!
//! The arithmetic is Lua's, in `f64`, step by step; the numbers the script
//! writes are formatted by the server as Redis formats a Lua number passed
//! to a command (`%.17g`), which this crate has no means to do.

use crate::{lua_number_to_integer, plain_number, stored_number, Fallback, Stored};

/// The clock the script ran on: `tonumber(ARGV[3]) or TIME[1]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Now {
    /// TIME's seconds: the script writes them as TIME's string.
    ServerSeconds(u64),
    /// The caller's number: the script writes it as a Lua number.
    Given(f64),
}

/// The script's reply and writes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// `{allowed and 1 or 0, new_tokens}` as the integers Redis replies.
    pub reply: [i64; 2],
    /// When the script writes (its TTL is positive): SETEX the tokens key
    /// to `tokens`, then the timestamp key to `now`, for `seconds`.
    pub writes: Option<Writes>,
}

/// The two SETEXs of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Writes {
    /// The TTL, a whole number of seconds, at least 1.
    pub seconds: i64,
    /// The bucket's tokens after the request (a Lua number).
    pub tokens: f64,
    /// The time the bucket was refilled to.
    pub now: Now,
}

/// The longest TTL taken, in seconds: SETEX's deadline arithmetic cannot
/// overflow below it, and Lua prints it as the integer it is.
const TTL_BOUND: f64 = 1e10;

/// Runs the script for ARGV = `args` with the server clock at `now_us`
/// microseconds and the two keys as stored.
pub fn run(
    args: &[&[u8]],
    now_us: u64,
    tokens: Stored<'_>,
    timestamp: Stored<'_>,
) -> Result<Outcome, Fallback> {
    let [rate, capacity, now, requested, ..] = args else {
        return Err(Fallback);
    };
    let rate = plain_number(rate)?;
    let capacity = plain_number(capacity)?;
    // `tonumber("")` is nil: the gateway's empty ARGV[3] reads TIME.
    let now = if now.is_empty() {
        Now::ServerSeconds(now_us / 1_000_000)
    } else {
        Now::Given(plain_number(now)?)
    };
    let now_number = match now {
        Now::ServerSeconds(seconds) => seconds as f64,
        Now::Given(n) => n,
    };
    let requested = plain_number(requested)?;

    let fill_time = capacity / rate;
    let ttl = (fill_time * 2.0).floor();
    if !ttl.is_finite() {
        return Err(Fallback);
    }
    let last_tokens = stored_number(tokens)?.unwrap_or(capacity);
    let last_refreshed = stored_number(timestamp)?.unwrap_or(0.0);
    // Lua 5.1's math.max and math.min keep the first argument unless a
    // later one is strictly greater (smaller).
    let elapsed = now_number - last_refreshed;
    let delta = if elapsed > 0.0 { elapsed } else { 0.0 };
    let refilled = last_tokens + delta * rate;
    let filled = if refilled < capacity {
        refilled
    } else {
        capacity
    };
    let allowed = filled >= requested;
    let new_tokens = if allowed { filled - requested } else { filled };
    if !new_tokens.is_finite() {
        return Err(Fallback);
    }
    let writes = if ttl > 0.0 {
        if ttl > TTL_BOUND {
            return Err(Fallback);
        }
        Some(Writes {
            seconds: ttl as i64,
            tokens: new_tokens,
            now,
        })
    } else {
        None
    };
    Ok(Outcome {
        reply: [i64::from(allowed), lua_number_to_integer(new_tokens)],
        writes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_US: u64 = 1_720_000_000_250_000;

    #[test]
    fn a_new_bucket_starts_full_and_pays_for_the_request() {
        let outcome = run(
            &[b"10", b"20", b"", b"1"],
            NOW_US,
            Stored::Missing,
            Stored::Missing,
        );
        assert_eq!(
            outcome,
            Ok(Outcome {
                reply: [1, 19],
                writes: Some(Writes {
                    seconds: 4,
                    tokens: 19.0,
                    now: Now::ServerSeconds(1_720_000_000),
                }),
            })
        );
    }

    #[test]
    fn a_bucket_refills_by_the_seconds_since_its_timestamp() {
        // 2 tokens left 3 s ago at 1 token/s: 5, then 1 taken.
        let outcome = run(
            &[b"1", b"10", b"", b"1"],
            NOW_US,
            Stored::Integer(2),
            Stored::Integer(1_719_999_997),
        )
        .unwrap();
        assert_eq!(outcome.reply, [1, 4]);
        // Not enough tokens: refused, nothing taken, the bucket still written.
        let refused = run(
            &[b"1", b"10", b"", b"6"],
            NOW_US,
            Stored::Integer(2),
            Stored::Integer(1_719_999_997),
        )
        .unwrap();
        assert_eq!(refused.reply, [0, 5]);
        assert_eq!(refused.writes.map(|w| w.tokens), Some(5.0));
    }

    #[test]
    fn fractions_are_kept_and_truncated_in_the_reply() {
        let outcome = run(
            &[b"0.5", b"3", b"1720000000.5", b"1"],
            NOW_US,
            Stored::Text(b"0.25"),
            Stored::Integer(1_720_000_000),
        )
        .unwrap();
        // 0.25 + 0.5 * 0.5 = 0.5 < 1: refused, 0.5 tokens kept.
        assert_eq!(outcome.reply, [0, 0]);
        assert_eq!(
            outcome.writes.map(|w| (w.seconds, w.tokens, w.now)),
            Some((12, 0.5, Now::Given(1_720_000_000.5)))
        );
    }

    #[test]
    fn no_write_without_a_positive_ttl_and_lua_for_the_rest() {
        let outcome = run(
            &[b"10", b"4", b"", b"1"],
            NOW_US,
            Stored::Missing,
            Stored::Missing,
        );
        assert_eq!(outcome.map(|o| o.writes), Ok(None));
        for args in [
            &[&b"0"[..], b"10", b"", b"1"][..],
            &[b"10", b"10", b"abc", b"1"],
            &[b"10", b"10", b""],
            &[b"1e1", b"10", b"", b"1"],
        ] {
            assert_eq!(
                run(args, NOW_US, Stored::Missing, Stored::Missing),
                Err(Fallback),
                "{args:?}"
            );
        }
        assert_eq!(
            run(
                &[b"1", b"10", b"", b"1"],
                NOW_US,
                Stored::Text(b" 1"),
                Stored::Missing
            ),
            Err(Fallback)
        );
    }
}
