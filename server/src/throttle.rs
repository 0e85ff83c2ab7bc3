//! CL.THROTTLE's arithmetic: the generic cell rate algorithm (GCRA) as
//! redis-cell 0.5 computes it, so that a redis-cell user who switches gets
//! the same replies and the same stored values.
//!
//! A key holds its *theoretical arrival time* (TAT): the moment, in
//! nanoseconds since the epoch, at which the limit would be back to full
//! had requests arrived evenly at the permitted rate. A request of
//! `quantity` moves the TAT forward by `quantity` emission intervals
//! (period / count); it is refused when that would put the TAT further
//! ahead of now than the burst allows (the delay variation tolerance,
//! `(max_burst + 1)` intervals). The key's TTL is the time until the TAT,
//! after which the key would say nothing a missing key does not.
//!
//! redis-cell's arithmetic is kept as it is, casts and all: durations in
//! nanoseconds, the emission interval as `period_ns / count` in floating
//! point truncated to whole nanoseconds, `remaining` from whole
//! microseconds in floating point, and the two reply times rounded up to
//! whole seconds only when their millisecond part is not zero. Where
//! redis-cell would panic (a stored value that is not a number, a time
//! past what its date type holds) this returns an error instead.

/// Nanoseconds in a second.
const NS_PER_SECOND: i64 = 1_000_000_000;

/// What one CL.THROTTLE call asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Requests allowed at once beyond the steady rate (the limit is one
    /// more).
    pub max_burst: i64,
    /// Requests allowed per `period_seconds`.
    pub count: i64,
    /// The period `count` is allowed in.
    pub period_seconds: i64,
    /// 0 looks at the state without changing it.
    pub quantity: i64,
}

/// What one call decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The request was refused.
    pub limited: bool,
    /// `max_burst + 1`.
    pub limit: i64,
    /// Requests that could be made now.
    pub remaining: i64,
    /// Nanoseconds until a retry can succeed; -1 s when it is not limited,
    /// or when the request is larger than the limit could ever allow.
    pub retry_after_ns: i64,
    /// Nanoseconds until the limit is back to full.
    pub reset_after_ns: i64,
    /// The new TAT and the key's TTL in whole milliseconds (-1: none), when
    /// the request was allowed (a refused request writes nothing).
    pub store: Option<(u64, i64)>,
}

/// Why a call fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// count or period is 0 (or the interval rounds to 0 ns).
    ZeroRate,
    /// The times involved do not fit (a period or quantity so large that
    /// the TAT passes what a timestamp holds).
    OutOfRange,
    /// The allowed request would leave a TAT more than a millisecond
    /// behind now (a negative quantity): redis-cell writes it and then
    /// fails to set a negative TTL; here nothing is written.
    NegativeTtl,
}

impl Refusal {
    /// The text of the error, as redis-cell words its own (after "Cell
    /// error: ").
    pub fn message(self) -> &'static str {
        match self {
            Refusal::ZeroRate => "Zero rates are not supported",
            Refusal::OutOfRange => "Time out of range",
            Refusal::NegativeTtl => "Error while setting key expire",
        }
    }
}

/// The emission interval of `count` per `period_seconds`, in nanoseconds,
/// as redis-cell's `Rate::per_period` computes it.
fn emission_interval_ns(count: i64, period_seconds: i64) -> i64 {
    let period_ns = period_seconds as i128 * NS_PER_SECOND as i128;
    if count == 0 || period_ns == 0 {
        return 0;
    }
    ((period_ns as f64) / (count as f64)) as i64
}

/// Decides a call at `now_ns` on a key holding `stored_tat_ns` (none when
/// the key is missing).
pub fn decide(
    request: Request,
    stored_tat_ns: Option<u64>,
    now_ns: i64,
) -> Result<Decision, Refusal> {
    let interval = emission_interval_ns(request.count, request.period_seconds);
    if interval == 0 {
        return Err(Refusal::ZeroRate);
    }
    // redis-cell multiplies in i64 unchecked (built for release, an
    // overflow wraps into a meaningless time); here it is an error.
    let limit = request
        .max_burst
        .checked_add(1)
        .ok_or(Refusal::OutOfRange)?;
    let tolerance = interval.checked_mul(limit).ok_or(Refusal::OutOfRange)?;
    let increment = interval
        .checked_mul(request.quantity)
        .ok_or(Refusal::OutOfRange)?;
    let tat = match stored_tat_ns {
        Some(tat) => i64::try_from(tat).map_err(|_| Refusal::OutOfRange)?,
        None => now_ns,
    };
    let new_tat = now_ns
        .max(tat)
        .checked_add(increment)
        .ok_or(Refusal::OutOfRange)?;
    let allow_at = new_tat.checked_sub(tolerance).ok_or(Refusal::OutOfRange)?;
    let diff = now_ns.checked_sub(allow_at).ok_or(Refusal::OutOfRange)?;
    let (limited, retry_after_ns, ttl, store) = if diff < 0 {
        let retry = if increment <= tolerance {
            -diff
        } else {
            -NS_PER_SECOND
        };
        let ttl = tat.checked_sub(now_ns).ok_or(Refusal::OutOfRange)?;
        (true, retry, ttl, None)
    } else {
        let ttl = new_tat - now_ns;
        // redis-cell hands the TTL in whole milliseconds (truncated toward
        // zero) to RedisModule_SetExpire, for which -1 means "no expiry":
        // a TAT up to 2 ms behind now is stored without a TTL and the call
        // succeeds; further behind, SetExpire fails.
        let ttl_ms = ttl / 1_000_000;
        if ttl_ms < -1 {
            return Err(Refusal::NegativeTtl);
        }
        let stored = u64::try_from(new_tat).map_err(|_| Refusal::OutOfRange)?;
        (false, -NS_PER_SECOND, ttl, Some((stored, ttl_ms)))
    };
    let next = tolerance.checked_sub(ttl).ok_or(Refusal::OutOfRange)?;
    let remaining = if next > interval.checked_neg().ok_or(Refusal::OutOfRange)? {
        ((next / 1000) as f64 / (interval / 1000) as f64) as i64
    } else {
        0
    };
    Ok(Decision {
        limited,
        limit,
        remaining,
        retry_after_ns,
        reset_after_ns: ttl,
        store,
    })
}

/// A time of the reply in whole seconds, as redis-cell rounds it: the
/// seconds as a float truncated, plus one when the millisecond part is
/// above zero (a negative time is never rounded).
pub fn reply_seconds(ns: i64) -> i64 {
    let seconds = ns / NS_PER_SECOND;
    let subsec = ns % NS_PER_SECOND;
    let whole = (seconds as f64 + subsec as f64 / NS_PER_SECOND as f64) as i64;
    if subsec / 1_000_000 > 0 {
        whole + 1
    } else {
        whole
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = NS_PER_SECOND;
    const MS: i64 = 1_000_000;

    /// redis-cell's own test (`it_rate_limits`): a limit of 5 (burst 4) at
    /// one per second, driven by a clock, with its expected results case
    /// by case: (now after start, quantity, remaining, reset_after,
    /// retry_after, limited).
    #[test]
    fn redis_cells_own_cases_give_its_results() {
        let start = 1_720_000_000 * SECOND;
        let cases: [(i64, i64, i64, i64, i64, bool); 15] = [
            (0, 6, 5, 0, -SECOND, true),
            (0, 1, 4, SECOND, -SECOND, false),
            (0, 1, 3, 2 * SECOND, -SECOND, false),
            (0, 1, 2, 3 * SECOND, -SECOND, false),
            (0, 1, 1, 4 * SECOND, -SECOND, false),
            (0, 1, 0, 5 * SECOND, -SECOND, false),
            (0, 1, 0, 5 * SECOND, SECOND, true),
            (3000 * MS, 1, 2, 3000 * MS, -SECOND, false),
            (3100 * MS, 1, 1, 3900 * MS, -SECOND, false),
            (4000 * MS, 1, 1, 4000 * MS, -SECOND, false),
            (8000 * MS, 1, 4, 1000 * MS, -SECOND, false),
            (9500 * MS, 1, 4, 1000 * MS, -SECOND, false),
            (9500 * MS, 0, 4, SECOND, -SECOND, false),
            (9500 * MS, 2, 2, 3 * SECOND, -SECOND, false),
            (9500 * MS, 5, 2, 3 * SECOND, 3 * SECOND, true),
        ];
        let mut stored: Option<u64> = None;
        for (number, &(after, quantity, remaining, reset, retry, limited)) in
            cases.iter().enumerate()
        {
            let request = Request {
                max_burst: 4,
                count: 1,
                period_seconds: 1,
                quantity,
            };
            let decision = decide(request, stored, start + after).expect("a decision");
            assert_eq!(
                (
                    decision.limited,
                    decision.limit,
                    decision.remaining,
                    decision.reset_after_ns,
                    decision.retry_after_ns
                ),
                (limited, 5, remaining, reset, retry),
                "case {number}"
            );
            if let Some((tat, ttl_ms)) = decision.store {
                assert_eq!(ttl_ms, decision.reset_after_ns / MS, "case {number}");
                stored = Some(tat);
            }
        }
    }

    #[test]
    fn reply_times_round_up_only_past_a_whole_millisecond() {
        assert_eq!(reply_seconds(-SECOND), -1);
        assert_eq!(reply_seconds(0), 0);
        assert_eq!(reply_seconds(SECOND), 1);
        assert_eq!(reply_seconds(SECOND + MS), 2);
        assert_eq!(reply_seconds(SECOND + MS - 1), 1);
        assert_eq!(reply_seconds(3900 * MS), 4);
        assert_eq!(reply_seconds(-SECOND - MS), -1);
    }

    #[test]
    fn a_zero_rate_is_refused() {
        for (count, period) in [(0, 60), (10, 0)] {
            let request = Request {
                max_burst: 1,
                count,
                period_seconds: period,
                quantity: 1,
            };
            assert_eq!(decide(request, None, 0), Err(Refusal::ZeroRate));
        }
    }

    #[test]
    fn times_past_a_timestamp_are_refused_not_wrapped() {
        let request = Request {
            max_burst: 1,
            count: 1,
            period_seconds: i64::MAX / NS_PER_SECOND,
            quantity: 1_000,
        };
        assert!(decide(request, None, 1_720_000_000 * SECOND).is_err());
    }
}
