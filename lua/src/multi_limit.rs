//! Native twin of `scripts/multi_limit.lua`: every limit of a request (per
//! user, per endpoint, global) in one atomic, all-or-nothing check on
//! server time, so a request refused by one limit spends none of the others
//! and costs one round trip however many limits apply.

use crate::window::{estimate, stored_count, time_seconds, window_seconds, Estimate};
use crate::{lua_number_to_integer, plain_number, Fallback, EXACT_INTEGER};

/// The script's reply and the writes it makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// 1 when every limit allowed the request.
    pub allowed: i64,
    /// Remaining budget per limit.
    pub remaining: Vec<i64>,
    /// Epoch second each limit's window ends.
    pub resets: Vec<i64>,
    /// Largest retry-after among exceeded limits, 0 when allowed.
    pub retry_after: i64,
    /// When allowed, per limit in order: INCRBY KEYS[2i-1] by `.1`, then
    /// EXPIRE it `.2` seconds (`.0` is the key's index in KEYS, 0-based).
    pub writes: Vec<(usize, i64, i64)>,
}

/// One limit's arguments.
struct Limit {
    limit: f64,
    window: f64,
    cost: f64,
}

/// Runs the script for `keys` KEYS (current, previous pairs) and `args`
/// (limit, window, cost triples), the clock at `now_us`, and the stored value
/// of every key in KEYS order.
pub fn run(
    keys: usize,
    args: &[&[u8]],
    now_us: u64,
    stored: &[Option<i64>],
) -> Result<Outcome, Fallback> {
    // Up to 1000 limits: with values and costs bounded by 2^53 no counter
    // can overflow, so the server can apply every write without checks.
    if keys == 0 || keys % 2 != 0 || keys > 2000 || stored.len() != keys {
        return Err(Fallback);
    }
    let count = keys / 2;
    if args.len() < 3 * count {
        return Err(Fallback);
    }
    let now = time_seconds(now_us);
    let limits = (0..count)
        .map(|i| {
            let cost = plain_number(args[3 * i + 2])?;
            // INCRBY takes the cost as formatted by %.17g: integers only.
            if cost.fract() != 0.0 || cost.abs() > EXACT_INTEGER as f64 {
                return Err(Fallback);
            }
            Ok(Limit {
                limit: plain_number(args[3 * i])?,
                window: window_seconds(args[3 * i + 1])?,
                cost,
            })
        })
        .collect::<Result<Vec<_>, Fallback>>()?;
    let mut estimates = Vec::with_capacity(count);
    let mut allowed = true;
    let mut retry_after = 0.0f64;
    for (i, l) in limits.iter().enumerate() {
        let previous = stored_count(stored[2 * i + 1])?;
        let current = stored_count(stored[2 * i])?;
        let e: Estimate = estimate(l.window, now, previous, current)?;
        if e.estimated + l.cost > l.limit {
            allowed = false;
            let wait = (l.window - e.elapsed).ceil();
            if wait > retry_after {
                retry_after = wait;
            }
        }
        estimates.push(e);
    }
    let mut remaining = Vec::with_capacity(count);
    let mut resets = Vec::with_capacity(count);
    let mut writes = Vec::new();
    for (i, (l, e)) in limits.iter().zip(&estimates).enumerate() {
        let mut used = e.estimated;
        if allowed {
            writes.push((2 * i, l.cost as i64, (l.window * 2.0) as i64));
            used += l.cost;
        }
        remaining.push(lua_number_to_integer((l.limit - used).max(0.0)));
        resets.push(lua_number_to_integer(e.window_start + l.window));
    }
    Ok(Outcome {
        allowed: allowed as i64,
        remaining,
        resets,
        retry_after: lua_number_to_integer(retry_after),
        writes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_limits_pass_and_every_counter_moves() {
        let args: Vec<&[u8]> = vec![b"10", b"60", b"1", b"100", b"3600", b"1", b"5", b"1", b"2"];
        let out = run(
            6,
            &args,
            1_720_000_050_000_000,
            &[None, None, None, None, None, None],
        )
        .unwrap();
        assert_eq!(out.allowed, 1);
        assert_eq!(out.remaining, vec![9, 99, 3]);
        assert_eq!(
            out.resets,
            vec![1_720_000_080, 1_720_000_800, 1_720_000_051]
        );
        assert_eq!(out.writes, vec![(0, 1, 120), (2, 1, 7200), (4, 2, 2)]);
    }

    #[test]
    fn one_exceeded_limit_denies_all_and_moves_nothing() {
        let args: Vec<&[u8]> = vec![b"10", b"60", b"1", b"2", b"60", b"1"];
        let out = run(
            4,
            &args,
            1_720_000_050_000_000,
            &[Some(3), None, Some(2), None],
        )
        .unwrap();
        assert_eq!(out.allowed, 0);
        assert_eq!(out.remaining, vec![7, 0]);
        assert_eq!(out.retry_after, 30);
        assert!(out.writes.is_empty());
    }

    #[test]
    fn odd_key_counts_and_fractional_costs_fall_back() {
        let args: Vec<&[u8]> = vec![b"10", b"60", b"1.5"];
        assert_eq!(run(2, &args, 0, &[None, None]), Err(Fallback));
        assert_eq!(run(3, &args, 0, &[None, None, None]), Err(Fallback));
    }
}
