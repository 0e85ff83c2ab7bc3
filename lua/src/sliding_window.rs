//! Native twin of `scripts/sliding_window.lua` (the seed's Refinement 2).
//!
//! Follows the script line by line in `f64`, as Lua 5.1 computes, so floor,
//! ceil and the weighted estimate round exactly as the script does.

use crate::{plain_number, Fallback, EXACT_INTEGER};

/// The script's reply and the writes it makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// `{allowed, estimated, retry_after}` as the integers Redis replies.
    pub reply: [i64; 3],
    /// When allowed: INCR KEYS[1], then EXPIRE KEYS[1] this many seconds.
    pub incr_and_expire_secs: Option<i64>,
}

/// A stored counter as the script reads it: `tonumber(GET key) or 0`.
/// `None` is a missing key; only integers Lua holds exactly are handled here.
pub fn stored_count(value: Option<i64>) -> Result<f64, Fallback> {
    match value {
        None => Ok(0.0),
        Some(n) if n.abs() <= EXACT_INTEGER => Ok(n as f64),
        Some(_) => Err(Fallback),
    }
}

/// Runs the script's logic for ARGV = `args` with the current and previous
/// window counters as stored.
pub fn run(
    args: &[&[u8]],
    current: Option<i64>,
    previous: Option<i64>,
) -> Result<Outcome, Fallback> {
    if args.len() < 4 {
        return Err(Fallback);
    }
    let limit = plain_number(args[0])?;
    let window = plain_number(args[1])?;
    let now = plain_number(args[2])?;
    let cost = plain_number(args[3])?;
    // A zero or negative window divides by zero or gives EXPIRE a value Lua
    // would format and Redis would treat differently: leave those to Lua.
    if window < 1.0 || window.fract() != 0.0 || window > 1e9 {
        return Err(Fallback);
    }
    let window_start = (now / window).floor() * window;
    let elapsed = now - window_start;
    let prev_count = stored_count(previous)?;
    let curr_count = stored_count(current)?;
    let weight = (window - elapsed) / window;
    let estimated = (prev_count * weight).floor() + curr_count;
    if !(estimated + cost).is_finite() || estimated.abs() > EXACT_INTEGER as f64 {
        return Err(Fallback);
    }
    if estimated + cost > limit {
        let retry_after = (window - elapsed).ceil();
        return Ok(Outcome {
            reply: [0, estimated as i64, retry_after as i64],
            incr_and_expire_secs: None,
        });
    }
    if current.is_some_and(|n| n == i64::MAX) {
        return Err(Fallback);
    }
    Ok(Outcome {
        reply: [1, (estimated + cost) as i64, 0],
        incr_and_expire_secs: Some((window * 2.0) as i64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(limit: &str, window: &str, now: &str, cost: &str) -> Vec<Vec<u8>> {
        [limit, window, now, cost]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect()
    }

    fn run_with(
        a: &[Vec<u8>],
        current: Option<i64>,
        previous: Option<i64>,
    ) -> Result<Outcome, Fallback> {
        let refs: Vec<&[u8]> = a.iter().map(Vec::as_slice).collect();
        run(&refs, current, previous)
    }

    #[test]
    fn allows_under_the_limit_and_counts_the_previous_window_by_weight() {
        // 30 s into a 60 s window: the previous window counts half.
        let a = args("100", "60", "1720000050", "1");
        let outcome = run_with(&a, Some(10), Some(50)).unwrap();
        assert_eq!(outcome.reply, [1, 36, 0]);
        assert_eq!(outcome.incr_and_expire_secs, Some(120));
    }

    #[test]
    fn denies_with_retry_after_the_rest_of_the_window() {
        let a = args("30", "60", "1720000050.5", "1");
        let outcome = run_with(&a, Some(10), Some(50)).unwrap();
        assert_eq!(outcome.reply, [0, 34, 30]);
        assert_eq!(outcome.incr_and_expire_secs, None);
    }

    #[test]
    fn unusual_inputs_fall_back_to_lua() {
        assert_eq!(
            run_with(&args("x", "60", "1", "1"), None, None),
            Err(Fallback)
        );
        assert_eq!(
            run_with(&args("10", "0", "1", "1"), None, None),
            Err(Fallback)
        );
        assert_eq!(
            run_with(&args(" 10", "60", "1", "1"), None, None),
            Err(Fallback)
        );
        assert_eq!(
            run_with(&args("10", "60", "1e9", "1"), None, None),
            Err(Fallback)
        );
        assert_eq!(
            run_with(&args("10", "60", "1", "1"), Some(i64::MAX), None),
            Err(Fallback)
        );
        let three: Vec<Vec<u8>> = vec![b"10".to_vec(), b"60".to_vec(), b"1".to_vec()];
        assert_eq!(run_with(&three, None, None), Err(Fallback));
    }
}
