//! Native twins of the fixed-window counters that the most used limiter
//! libraries run, each taken byte for byte from the library's package (the
//! SHA1 a client sends with EVALSHA is that of these bytes):
//!
//! - `scripts/limits_incr_expire.lua`: Python's `limits` 5.8.0
//!   (`limits/resources/redis/lua_scripts/incr_expire.lua`), behind
//!   Flask-Limiter and slowapi. ARGV = expiry seconds, amount.
//! - `scripts/rate_limit_redis_increment.lua`: npm `rate-limit-redis` 6.0.1
//!   (the store of express-rate-limit), its `increment` script after the
//!   package's own whitespace stripping. ARGV = window ms.
//! - `scripts/rate_limiter_flexible_valkey_glide.lua`: npm
//!   rate-limiter-flexible 11.4.0's `DEFAULT_VALKEY_SCRIPT`, the body of the
//!   `consume` function `RateLimiterValkeyGlide` loads (FUNCTION LOAD) and
//!   calls with FCALL.
//! - `scripts/rate_limiter_flexible_incr_ttl.lua`: npm
//!   `rate-limiter-flexible` 11.4.0, `RateLimiterRedis`'s consume script
//!   (one line: the source ends its lines with `\`). ARGV = points,
//!   duration seconds (the package sends two more that the script ignores).
//!
//! Each twin takes its key as stored and returns the reply and the writes
//! in the order the script makes them, so the server can log them as the
//! Lua run's effects. Only canonical integers (the only form every command
//! these scripts call accepts as Lua formats it) in a range where Lua's
//! double arithmetic is exact are handled; the rest runs in Lua.

use crate::{Fallback, EXACT_INTEGER};

/// A key as these scripts see it: an integer counter and its remaining
/// time to live as PTTL answers it (`-1` without a deadline). A missing key
/// is `None`; a key holding anything else is not handed to a twin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    /// The stored integer.
    pub value: i64,
    /// PTTL's answer: milliseconds left, or `-1`.
    pub pttl: i64,
}

/// One command the script makes on its key, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// `SET key value PX ttl_ms` (Redis logs it with the absolute
    /// deadline, `SET key value PXAT`).
    Set {
        /// The value stored.
        value: i64,
        /// Time to live in milliseconds, at least 1.
        ttl_ms: i64,
    },
    /// `INCRBY key by`, or `INCR key` (`by` 1). The key keeps its
    /// deadline; a missing key starts from 0 without one.
    Increment {
        /// The amount added.
        by: i64,
        /// The command as the script spells it: Redis logs a script's
        /// calls verbatim, `incrby` in lower case included.
        spelled: &'static str,
    },
    /// `EXPIRE key seconds` (logged as `PEXPIREAT`), at least 1.
    Expire {
        /// The new time to live.
        seconds: i64,
    },
}

/// What the script replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// An integer.
    Integer(i64),
    /// A table of two integers.
    Pair(i64, i64),
}

/// A twin's result: the reply and at most two writes, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The script's reply.
    pub reply: Reply,
    /// The writes, in the order the script makes them.
    pub writes: [Option<Write>; 2],
}

/// The largest magnitude taken from an argument: Lua prints a number of at
/// most 14 digits exactly as the integer it holds, so the argument the
/// script passes on to a command is the one the client sent.
const ARGUMENT_BOUND: i64 = 99_999_999_999_999;

/// The longest expiry taken, in seconds (about 3,000 years): EXPIRE and
/// SET's deadline arithmetic cannot overflow below it.
const SECONDS_BOUND: i64 = 100_000_000_000;

/// An argument as a canonical decimal integer (what Redis's string2ll
/// accepts: no sign but `-`, no leading zero, no space) within
/// [`ARGUMENT_BOUND`].
pub(crate) fn canonical_integer(arg: &[u8]) -> Result<i64, Fallback> {
    let n: i64 = std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(Fallback)?;
    if n.abs() > ARGUMENT_BOUND || n.to_string().as_bytes() != arg {
        return Err(Fallback);
    }
    Ok(n)
}

/// An expiry argument: canonical and at least 1 (zero and negative
/// expiries delete the key or fail, which Lua handles).
fn positive(arg: &[u8], bound: i64) -> Result<i64, Fallback> {
    let n = canonical_integer(arg)?;
    if n < 1 || n > bound {
        return Err(Fallback);
    }
    Ok(n)
}

/// `value + by` as INCRBY computes it, when the result is one Lua holds
/// exactly (the scripts hand it back through a Lua number).
pub(crate) fn add(value: i64, by: i64) -> Result<i64, Fallback> {
    value
        .checked_add(by)
        .filter(|n| n.abs() <= EXACT_INTEGER)
        .ok_or(Fallback)
}

/// `limits`' `incr_expire.lua`: INCRBY the amount; when the result equals
/// the amount (a new window), EXPIRE the key. Replies the new count.
pub fn limits_incr_expire(args: &[&[u8]], stored: Option<Counter>) -> Result<Outcome, Fallback> {
    let [expiry, amount, ..] = args else {
        return Err(Fallback);
    };
    let seconds = positive(expiry, SECONDS_BOUND)?;
    let amount = canonical_integer(amount)?;
    let current = add(stored.map_or(0, |c| c.value), amount)?;
    let increment = Write::Increment {
        by: amount,
        spelled: "incrby",
    };
    let expire = (current == amount).then_some(Write::Expire { seconds });
    Ok(Outcome {
        reply: Reply::Integer(current),
        writes: [Some(increment), expire],
    })
}

/// `rate-limit-redis`' `increment`: a key without time left (missing, no
/// deadline, or at its deadline) is SET to 1 for the window and replies
/// `{1, window}`; otherwise INCR and reply `{hits, PTTL}`.
pub fn rate_limit_redis(args: &[&[u8]], stored: Option<Counter>) -> Result<Outcome, Fallback> {
    let [window_ms, ..] = args else {
        return Err(Fallback);
    };
    let window_ms = positive(window_ms, SECONDS_BOUND * 1000)?;
    match stored {
        Some(Counter { value, pttl }) if pttl > 0 => Ok(Outcome {
            reply: Reply::Pair(add(value, 1)?, pttl),
            writes: [
                Some(Write::Increment {
                    by: 1,
                    spelled: "INCR",
                }),
                None,
            ],
        }),
        _ => Ok(Outcome {
            reply: Reply::Pair(1, window_ms),
            writes: [
                Some(Write::Set {
                    value: 1,
                    ttl_ms: window_ms,
                }),
                None,
            ],
        }),
    }
}

/// `rate-limiter-flexible`'s consume: SET 0 for the duration if missing,
/// INCRBY the points, and give a key without a deadline one; replies
/// `{consumed, ms left}`.
pub fn rate_limiter_flexible(args: &[&[u8]], stored: Option<Counter>) -> Result<Outcome, Fallback> {
    set_nx_incrby_pttl(args, stored, true)
}

/// `scripts/rate_limiter_flexible_valkey_glide.lua`, the consume function
/// `RateLimiterValkeyGlide` loads as a library: with a duration, SET NX EX
/// then INCRBY and PTTL, and unlike `RateLimiterRedis`' script no repair of
/// a key left without a deadline (its PTTL, -1, is the reply). A duration
/// of 0 (no deadline) runs in Lua.
pub fn rate_limiter_flexible_valkey_glide(
    args: &[&[u8]],
    stored: Option<Counter>,
) -> Result<Outcome, Fallback> {
    set_nx_incrby_pttl(args, stored, false)
}

/// rate-limiter-flexible's consume: SET NX EX, INCRBY, PTTL; when
/// `give_deadline`, a key found without one gets the window's (EXPIRE).
fn set_nx_incrby_pttl(
    args: &[&[u8]],
    stored: Option<Counter>,
    give_deadline: bool,
) -> Result<Outcome, Fallback> {
    let [points, duration, ..] = args else {
        return Err(Fallback);
    };
    let seconds = positive(duration, SECONDS_BOUND)?;
    let points = canonical_integer(points)?;
    let increment = Write::Increment {
        by: points,
        spelled: "incrby",
    };
    let (reply, writes) = match stored {
        None => (
            Reply::Pair(points, seconds * 1000),
            [
                Some(Write::Set {
                    value: 0,
                    ttl_ms: seconds * 1000,
                }),
                Some(increment),
            ],
        ),
        Some(Counter { value, pttl: -1 }) if give_deadline => (
            Reply::Pair(add(value, points)?, seconds * 1000),
            [Some(increment), Some(Write::Expire { seconds })],
        ),
        Some(Counter { value, pttl }) => (
            Reply::Pair(add(value, points)?, pttl),
            [Some(increment), None],
        ),
    };
    Ok(Outcome { reply, writes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(value: i64, pttl: i64) -> Option<Counter> {
        Some(Counter { value, pttl })
    }

    #[test]
    fn only_canonical_integers_in_range_are_taken() {
        assert_eq!(canonical_integer(b"42"), Ok(42));
        assert_eq!(canonical_integer(b"-7"), Ok(-7));
        assert_eq!(canonical_integer(b"0"), Ok(0));
        for arg in [
            &b"07"[..],
            b"+7",
            b" 7",
            b"7 ",
            b"1e3",
            b"1.0",
            b"-0",
            b"",
            b"x",
        ] {
            assert_eq!(canonical_integer(arg), Err(Fallback), "{arg:?}");
        }
        assert_eq!(canonical_integer(b"99999999999999"), Ok(ARGUMENT_BOUND));
        assert_eq!(canonical_integer(b"100000000000000"), Err(Fallback));
    }

    #[test]
    fn limits_expires_only_a_new_window() {
        let fresh = limits_incr_expire(&[b"60", b"1"], None).unwrap();
        assert_eq!(fresh.reply, Reply::Integer(1));
        assert_eq!(
            fresh.writes,
            [
                Some(Write::Increment {
                    by: 1,
                    spelled: "incrby"
                }),
                Some(Write::Expire { seconds: 60 })
            ]
        );
        let later = limits_incr_expire(&[b"60", b"1"], counter(4, 3000)).unwrap();
        assert_eq!(later.reply, Reply::Integer(5));
        assert_eq!(later.writes[1], None);
        // A stored 0 incremented by 0 equals the amount: Lua expires it.
        let zero = limits_incr_expire(&[b"60", b"0"], counter(0, -1)).unwrap();
        assert_eq!(zero.writes[1], Some(Write::Expire { seconds: 60 }));
        assert_eq!(limits_incr_expire(&[b"0", b"1"], None), Err(Fallback));
        assert_eq!(limits_incr_expire(&[b"60"], None), Err(Fallback));
    }

    #[test]
    fn rate_limit_redis_restarts_a_key_without_time_left() {
        for stored in [None, counter(9, -1), counter(9, 0)] {
            let outcome = rate_limit_redis(&[b"1000"], stored).unwrap();
            assert_eq!(outcome.reply, Reply::Pair(1, 1000));
            assert_eq!(
                outcome.writes[0],
                Some(Write::Set {
                    value: 1,
                    ttl_ms: 1000
                })
            );
        }
        let counting = rate_limit_redis(&[b"1000"], counter(9, 250)).unwrap();
        assert_eq!(counting.reply, Reply::Pair(10, 250));
    }

    #[test]
    fn the_valkey_glide_consume_leaves_a_key_without_deadline_as_it_is() {
        let fresh = rate_limiter_flexible_valkey_glide(&[b"2", b"10"], None).unwrap();
        assert_eq!(fresh.reply, Reply::Pair(2, 10_000));
        let unbounded = rate_limiter_flexible_valkey_glide(&[b"2", b"10"], counter(5, -1)).unwrap();
        assert_eq!(unbounded.reply, Reply::Pair(7, -1));
        assert_eq!(unbounded.writes[1], None);
        assert!(rate_limiter_flexible_valkey_glide(&[b"2", b"0"], None).is_err());
        assert!(rate_limiter_flexible_valkey_glide(&[b"2"], None).is_err());
    }

    #[test]
    fn rate_limiter_flexible_gives_every_key_a_deadline() {
        let fresh = rate_limiter_flexible(&[b"2", b"10"], None).unwrap();
        assert_eq!(fresh.reply, Reply::Pair(2, 10_000));
        let unbounded = rate_limiter_flexible(&[b"2", b"10"], counter(5, -1)).unwrap();
        assert_eq!(unbounded.reply, Reply::Pair(7, 10_000));
        assert_eq!(unbounded.writes[1], Some(Write::Expire { seconds: 10 }));
        let running = rate_limiter_flexible(&[b"2", b"10"], counter(5, 0)).unwrap();
        assert_eq!(running.reply, Reply::Pair(7, 0));
        assert_eq!(
            rate_limiter_flexible(&[b"2", b"10"], counter(i64::MAX, 5)),
            Err(Fallback)
        );
    }
}
