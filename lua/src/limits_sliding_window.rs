//! Native twin of Python `limits`' sliding-window counter,
//! `scripts/limits_acquire_sliding_window.lua` (limits 5.8.0,
//! `limits/resources/redis/lua_scripts/acquire_sliding_window.lua`, which
//! `SlidingWindowCounterRateLimiter.hit` runs through EVALSHA).
//!
//! KEYS = previous window, current window; ARGV = limit, window seconds,
//! amount. A current window with less than one window left has expired
//! into the previous one: it is RENAMEd over the previous key and a new
//! current window of 0 starts (its deadline one window after the old one's).
//! The previous window's count, weighted by the share of its TTL left, plus
//! the current count, must leave room for the amount; then the current
//! window is incremented (INCRBY), or created for two windows (SET ... PX).
//! Replies true (1) when acquired and false (nil) when not.

use crate::fixed_window::{add, canonical_integer, Counter, Write};
use crate::window::{stored_count, window_seconds};
use crate::{plain_number, Fallback};

/// The script's reply and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// `amount > limit`: false before any call.
    TooLarge,
    /// The script read the windows.
    Ran {
        /// Whether the amount was acquired (the reply).
        acquired: bool,
        /// The current window had expired into the previous one: RENAME
        /// current to previous, then SET current 0 with this TTL (ms).
        shift: Option<i64>,
        /// The acquisition's write on the current window, in order after
        /// the shift.
        write: Option<Write>,
    },
}

/// Runs the script for ARGV = `args` with both windows as stored.
pub fn acquire(
    args: &[&[u8]],
    previous: Option<Counter>,
    current: Option<Counter>,
) -> Result<Outcome, Fallback> {
    let [limit, window, amount, ..] = args else {
        return Err(Fallback);
    };
    let limit = plain_number(limit)?;
    // A whole number of seconds: the script passes `expiry * 2` and
    // `current_ttl + expiry` to PX, which takes integers only.
    let expiry = window_seconds(window)? * 1000.0;
    // The amount reaches INCRBY or SET as Lua prints it: a canonical
    // integer prints as itself.
    let amount_integer = canonical_integer(amount)?;
    let amount = amount_integer as f64;
    if amount > limit {
        return Ok(Outcome::TooLarge);
    }
    let mut previous = previous;
    let mut current = current;
    let mut shift = None;
    if let Some(window) = current {
        let ttl = window.pttl as f64;
        if ttl > 0.0 && ttl < expiry {
            let new_ttl = window.pttl + expiry as i64;
            previous = Some(window);
            current = Some(Counter {
                value: 0,
                pttl: new_ttl,
            });
            shift = Some(new_ttl);
        }
    }
    // `tonumber(GET) or 0`, and PTTL (-2 for a missing key) floored at 0.
    let count = |w: Option<Counter>| stored_count(w.map(|w| w.value));
    let ttl = |w: Option<Counter>| w.map_or(0.0, |w| w.pttl.max(0) as f64);
    let weighted = (count(previous)? * ttl(previous) / expiry).floor() + count(current)?;
    if weighted + amount > limit {
        return Ok(Outcome::Ran {
            acquired: false,
            shift,
            write: None,
        });
    }
    let write = match current {
        Some(window) => {
            add(window.value, amount_integer)?;
            Write::Increment {
                by: amount_integer,
                spelled: "incrby",
            }
        }
        None => Write::Set {
            value: amount_integer,
            ttl_ms: expiry as i64 * 2,
        },
    };
    Ok(Outcome::Ran {
        acquired: true,
        shift,
        write: Some(write),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(value: i64, pttl: i64) -> Option<Counter> {
        Some(Counter { value, pttl })
    }

    #[test]
    fn a_first_hit_creates_the_current_window_for_two_windows() {
        assert_eq!(
            acquire(&[b"10", b"60", b"1"], None, None),
            Ok(Outcome::Ran {
                acquired: true,
                shift: None,
                write: Some(Write::Set {
                    value: 1,
                    ttl_ms: 120_000
                }),
            })
        );
    }

    #[test]
    fn an_expired_current_window_becomes_the_previous_one() {
        // 8 hits with 30 s left of the current window: it shifts, and 8
        // weighted by 30/60 is 4, so 6 more fit in a limit of 10.
        let outcome = acquire(&[b"10", b"60", b"6"], None, window(8, 30_000));
        assert_eq!(
            outcome,
            Ok(Outcome::Ran {
                acquired: true,
                shift: Some(90_000),
                write: Some(Write::Increment {
                    by: 6,
                    spelled: "incrby"
                }),
            })
        );
        let refused = acquire(&[b"10", b"60", b"7"], None, window(8, 30_000));
        assert_eq!(
            refused,
            Ok(Outcome::Ran {
                acquired: false,
                shift: Some(90_000),
                write: None,
            })
        );
    }

    #[test]
    fn too_large_an_amount_is_refused_first_and_the_rest_goes_to_lua() {
        assert_eq!(
            acquire(&[b"5", b"60", b"6"], None, None),
            Ok(Outcome::TooLarge)
        );
        for args in [
            &[&b"5"[..], b"0", b"1"][..],
            &[b"5", b"1.5", b"1"],
            &[b"5", b"60", b"1.0"],
            &[b"abc", b"60", b"1"],
            &[b"5", b"60"],
        ] {
            assert_eq!(acquire(args, None, None), Err(Fallback), "{args:?}");
        }
    }
}
