//! The sliding-window estimate all the limiter scripts share, computed in
//! `f64` step by step as Lua 5.1 computes it.

use crate::{plain_number, Fallback, EXACT_INTEGER};

/// A stored counter as the scripts read it: `tonumber(GET key) or 0`.
/// `None` is a missing key; only integers Lua holds exactly are handled.
pub fn stored_count(value: Option<i64>) -> Result<f64, Fallback> {
    match value {
        None => Ok(0.0),
        Some(n) if n.abs() <= EXACT_INTEGER => Ok(n as f64),
        Some(_) => Err(Fallback),
    }
}

/// A window length the twins take: a whole number of seconds, at least 1.
/// Zero divides by zero and a fraction makes EXPIRE's argument a float; Lua
/// handles those.
pub fn window_seconds(arg: &[u8]) -> Result<f64, Fallback> {
    let window = plain_number(arg)?;
    if window < 1.0 || window.fract() != 0.0 || window > 1e9 {
        return Err(Fallback);
    }
    Ok(window)
}

/// One limit's view of the window at `now`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// `math.floor(now / window) * window`.
    pub window_start: f64,
    /// `now - window_start`.
    pub elapsed: f64,
    /// `math.floor(prev_count * weight) + curr_count`.
    pub estimated: f64,
}

/// The script lines from `window_start` to `estimated`.
pub fn estimate(window: f64, now: f64, previous: f64, current: f64) -> Result<Estimate, Fallback> {
    let window_start = (now / window).floor() * window;
    let elapsed = now - window_start;
    let weight = (window - elapsed) / window;
    let estimated = (previous * weight).floor() + current;
    if !estimated.is_finite() || estimated.abs() > EXACT_INTEGER as f64 {
        return Err(Fallback);
    }
    Ok(Estimate {
        window_start,
        elapsed,
        estimated,
    })
}

/// `tonumber(time[1]) + tonumber(time[2]) / 1000000` for TIME at `now_us`.
pub fn time_seconds(now_us: u64) -> f64 {
    (now_us / 1_000_000) as f64 + (now_us % 1_000_000) as f64 / 1_000_000.0
}
