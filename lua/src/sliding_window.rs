//! Native twins of `scripts/sliding_window.lua` (the sliding-window
//! counter: the previous window's count weighted by how much of it still
//! overlaps, plus the current one's) and
//! `scripts/sliding_window_server_time.lua` (the same reading TIME).
//!
//! Follows the script line by line in `f64`, as Lua 5.1 computes, so floor,
//! ceil and the weighted estimate round exactly as the script does.

use crate::window::{estimate, stored_count, time_seconds, window_seconds, Estimate};
use crate::{lua_number_to_integer, plain_number, Fallback};

/// The script's reply and the writes it makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// `{allowed, estimated, retry_after}` as the integers Redis replies.
    pub reply: [i64; 3],
    /// When allowed: INCR KEYS[1], then EXPIRE KEYS[1] this many seconds.
    pub incr_and_expire_secs: Option<i64>,
}

/// Runs `sliding_window.lua` for ARGV = `args` (ARGV[3] is the caller's
/// clock) with the current and previous window counters as stored.
pub fn run(
    args: &[&[u8]],
    current: Option<i64>,
    previous: Option<i64>,
) -> Result<Outcome, Fallback> {
    if args.len() < 4 {
        return Err(Fallback);
    }
    let now = plain_number(args[2])?;
    decide(args[0], args[1], now, args[3], current, previous)
}

/// Runs `sliding_window_server_time.lua` (ARGV = limit, window, cost) with the
/// server clock at `now_us` microseconds, as TIME reports it.
pub fn run_server_time(
    args: &[&[u8]],
    now_us: u64,
    current: Option<i64>,
    previous: Option<i64>,
) -> Result<Outcome, Fallback> {
    if args.len() < 3 {
        return Err(Fallback);
    }
    decide(
        args[0],
        args[1],
        time_seconds(now_us),
        args[2],
        current,
        previous,
    )
}

fn decide(
    limit: &[u8],
    window: &[u8],
    now: f64,
    cost: &[u8],
    current: Option<i64>,
    previous: Option<i64>,
) -> Result<Outcome, Fallback> {
    let limit = plain_number(limit)?;
    let window = window_seconds(window)?;
    let cost = plain_number(cost)?;
    let Estimate {
        elapsed, estimated, ..
    } = estimate(window, now, stored_count(previous)?, stored_count(current)?)?;
    if !(estimated + cost).is_finite() {
        return Err(Fallback);
    }
    if estimated + cost > limit {
        let retry_after = (window - elapsed).ceil();
        return Ok(Outcome {
            reply: [
                0,
                lua_number_to_integer(estimated),
                lua_number_to_integer(retry_after),
            ],
            incr_and_expire_secs: None,
        });
    }
    if current.is_some_and(|n| n == i64::MAX) {
        return Err(Fallback);
    }
    Ok(Outcome {
        reply: [1, lua_number_to_integer(estimated + cost), 0],
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
    fn server_time_reads_the_clock_instead_of_an_argument() {
        let a: Vec<&[u8]> = vec![b"100", b"60", b"1"];
        let outcome = run_server_time(&a, 1_720_000_050_000_000, Some(10), Some(50)).unwrap();
        assert_eq!(outcome.reply, [1, 36, 0]);
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
