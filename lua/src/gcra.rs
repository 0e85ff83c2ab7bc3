//! Native twins of go-redis/redis_rate's GCRA scripts (v9.1.2 to v10.0.1,
//! `lua.go`, from rwz/redis-gcra): `scripts/redis_rate_allow_n.lua`
//! (`Limiter.AllowN`) and `scripts/redis_rate_allow_at_most.lua`
//! (`Limiter.AllowAtMost`), byte for byte as `redis.NewScript` sends them.
//!
//! KEYS = the limit's key; ARGV = burst, rate, period (seconds), cost. The
//! key holds the theoretical arrival time (TAT) as a Lua number, in seconds
//! since 2017-01-01 on the server's clock (TIME). A request is allowed when
//! moving the TAT by its cost keeps it within the burst of now; the new TAT
//! is SET with an expiry of the seconds until it (rounded up). Reply
//! `{allowed, remaining, retry_after, reset_after}`, the last two as Lua's
//! `tostring` prints them.
//!
//! The arithmetic is Lua's, in `f64`, step by step. The server formats the
//! numbers (`tostring` is `%.14g`, a number passed to SET `%.17g`), which
//! this crate has no means to do.

use crate::{plain_number, stored_number, Fallback, Stored};

/// Which of the two scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// `allowN`: all of the cost or nothing.
    AllowN,
    /// `allowAtMost`: as much of the cost as fits, at least one.
    AllowAtMost,
}

/// The script's reply and write, as Lua numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// Reply[1]: the cost allowed (0 when refused), truncated to an integer.
    pub allowed: f64,
    /// Reply[2]: what remains of the burst, truncated to an integer.
    pub remaining: f64,
    /// Reply[3], `tostring`'d: seconds until a retry can succeed, or -1.
    pub retry_after: f64,
    /// Reply[4], `tostring`'d: seconds until the limit is fully reset.
    pub reset_after: f64,
    /// The SET the script makes, if any.
    pub write: Option<Write>,
}

/// `SET key tat EX seconds`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Write {
    /// The new TAT (a Lua number: the server writes it as `%.17g`).
    pub tat: f64,
    /// `math.ceil(reset_after)`, at least 1.
    pub seconds: i64,
}

/// The scripts' epoch, 2017-01-01 00:00:00 UTC, in Unix seconds.
const JAN_1_2017: f64 = 1_483_228_800.0;

/// The longest expiry taken: SET's deadline arithmetic cannot overflow
/// below it, and Lua prints it as the integer it is.
const SECONDS_BOUND: f64 = 1e10;

/// Runs `script` for ARGV = `args` with the server clock at `now_us`
/// microseconds (what TIME replies) and the key as stored.
pub fn run(
    script: Script,
    args: &[&[u8]],
    now_us: u64,
    stored: Stored<'_>,
) -> Result<Outcome, Fallback> {
    let [burst, rate, period, cost, ..] = args else {
        return Err(Fallback);
    };
    // `period / rate` and `emission_interval * burst` coerce the strings as
    // tonumber does; only the forms where Rust parses alike are taken.
    let burst = plain_number(burst)?;
    let rate = plain_number(rate)?;
    let period = plain_number(period)?;
    let cost = plain_number(cost)?;
    let emission_interval = period / rate;
    let burst_offset = emission_interval * burst;
    // `(now[1] - jan_1_2017) + (now[2] / 1000000)` on TIME's two strings.
    let now = ((now_us / 1_000_000) as f64 - JAN_1_2017) + (now_us % 1_000_000) as f64 / 1e6;
    let stored_tat = stored_number(stored)?;
    let tat = stored_tat.unwrap_or(now);
    // Lua 5.1's math.max keeps the first argument unless the second is
    // strictly greater.
    let tat = if now > tat { now } else { tat };
    let outcome = match script {
        Script::AllowN => {
            let increment = emission_interval * cost;
            let new_tat = tat + increment;
            let allow_at = new_tat - burst_offset;
            let diff = now - allow_at;
            let remaining = diff / emission_interval;
            if remaining < 0.0 {
                // `diff * -1`: a sign flip, as `-diff`.
                refused(-diff, tat - now)
            } else {
                allowed(cost, remaining, new_tat, now)?
            }
        }
        Script::AllowAtMost => {
            let diff = now - (tat - burst_offset);
            let remaining = diff / emission_interval;
            if remaining < 1.0 {
                refused(emission_interval - diff, tat - now)
            } else {
                let (cost, remaining) = if remaining < cost {
                    (remaining, 0.0)
                } else {
                    (cost, remaining - cost)
                };
                let new_tat = tat + emission_interval * cost;
                allowed(cost, remaining, new_tat, now)?
            }
        }
    };
    let numbers = [
        outcome.allowed,
        outcome.remaining,
        outcome.retry_after,
        outcome.reset_after,
    ];
    // NaN and infinities compare and print in ways not worth promising.
    if numbers.iter().any(|n| !n.is_finite()) {
        return Err(Fallback);
    }
    Ok(outcome)
}

/// The refusal: `{0, 0, tostring(retry_after), tostring(reset_after)}`.
fn refused(retry_after: f64, reset_after: f64) -> Outcome {
    Outcome {
        allowed: 0.0,
        remaining: 0.0,
        retry_after,
        reset_after,
        write: None,
    }
}

/// The admission: the new TAT is SET when it lies ahead of now.
fn allowed(cost: f64, remaining: f64, new_tat: f64, now: f64) -> Result<Outcome, Fallback> {
    let reset_after = new_tat - now;
    let write = if reset_after > 0.0 {
        let seconds = reset_after.ceil();
        if !new_tat.is_finite() || seconds > SECONDS_BOUND {
            return Err(Fallback);
        }
        Some(Write {
            tat: new_tat,
            seconds: seconds as i64,
        })
    } else {
        None
    };
    Ok(Outcome {
        allowed: cost,
        remaining,
        retry_after: -1.0,
        reset_after,
        write,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2024-07-03 09:46:40.25 UTC.
    const NOW_US: u64 = 1_720_000_000_250_000;
    const NOW: f64 = 1_720_000_000.25 - JAN_1_2017;

    #[test]
    fn a_new_key_allows_the_burst_and_records_the_tat() {
        // 10 per second with a burst of 5: one request moves the TAT 0.1 s.
        let outcome = run(
            Script::AllowN,
            &[b"5", b"10", b"1", b"1"],
            NOW_US,
            Stored::Missing,
        );
        let outcome = outcome.unwrap();
        // The float seconds round (the reply truncates to 4).
        assert_eq!(outcome.allowed, 1.0);
        assert!(
            (outcome.remaining - 4.0).abs() < 1e-6,
            "{}",
            outcome.remaining
        );
        assert_eq!(outcome.retry_after, -1.0);
        assert_eq!(outcome.write.map(|w| w.seconds), Some(1));
        assert_eq!(outcome.write.map(|w| w.tat), Some(NOW + 0.1));
    }

    #[test]
    fn a_full_burst_refuses_with_the_time_to_wait() {
        // The TAT already 0.5 s ahead: the burst of 5 is spent.
        let tat = format!("{}", NOW + 0.5);
        let outcome = run(
            Script::AllowN,
            &[b"5", b"10", b"1", b"1"],
            NOW_US,
            Stored::Text(tat.as_bytes()),
        )
        .unwrap();
        assert_eq!((outcome.allowed, outcome.remaining), (0.0, 0.0));
        assert!(outcome.write.is_none());
        assert!((outcome.retry_after - 0.1).abs() < 1e-6);
        assert!((outcome.reset_after - 0.5).abs() < 1e-6);
    }

    #[test]
    fn allow_at_most_grants_what_fits() {
        // The TAT 0.3 s ahead: 2 of the burst of 5 remain; 4 asked, 2 given.
        let tat = format!("{}", NOW + 0.3);
        let outcome = run(
            Script::AllowAtMost,
            &[b"5", b"10", b"1", b"4"],
            NOW_US,
            Stored::Text(tat.as_bytes()),
        )
        .unwrap();
        assert_eq!(outcome.remaining, 0.0);
        assert!((outcome.allowed - 2.0).abs() < 1e-6);
        assert!(outcome.write.is_some());
    }

    #[test]
    fn what_lua_alone_can_promise_goes_to_lua() {
        for args in [
            &[&b"5"[..], b"0", b"1", b"1"][..],
            &[b"5", b"10", b"1"],
            &[b"5", b"1e1", b"1", b"1"],
            &[b"5", b"10", b"1", b"x"],
        ] {
            assert_eq!(
                run(Script::AllowN, args, NOW_US, Stored::Missing),
                Err(Fallback),
                "{args:?}"
            );
        }
        assert_eq!(
            run(
                Script::AllowN,
                &[b"5", b"10", b"1", b"1"],
                NOW_US,
                Stored::Text(b"junk")
            ),
            Err(Fallback)
        );
    }
}
