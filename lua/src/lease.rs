//! Native twin of `scripts/lease.lua`, tally-client's cached-mode sync: give
//! back what a node did not use, then check every limit on server time and
//! reserve each a lease of local budget, all or nothing.
//!
//! Unlike the check scripts, this one writes before it reads (the give-back
//! DECRBYs come first) and a key may be named by several limits (the
//! reserved-on key is often the current window's key). So the twin keeps
//! its own view of every key's value as the script's calls change it, keyed
//! by name, and reports the writes in the script's order.

use crate::window::{estimate, stored_count, time_seconds, window_seconds};
use crate::{lua_number_to_integer, plain_number, Fallback};

/// The script, as tally-client sends it.
pub const SOURCE: &str = include_str!("../scripts/lease.lua");

/// The script's reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// 1 when every limit admitted its cost.
    pub allowed: i64,
    /// Remaining budget per limit, after this call's cost and lease.
    pub remaining: Vec<i64>,
    /// Epoch second each limit's window ends.
    pub resets: Vec<i64>,
    /// Seconds to the end of the longest exceeded limit's window.
    pub retry_after: i64,
    /// Tokens leased per limit.
    pub granted: Vec<i64>,
    /// The server clock in ms.
    pub server_time_ms: i64,
    /// When the estimate will admit the cost again, in ms.
    pub free_in_ms: i64,
}

/// One write of the script, in the order it calls them. `key` is an index
/// into KEYS (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// `DECRBY key by` (the key exists and holds at least `by`).
    DecrBy {
        /// Index into KEYS.
        key: usize,
        /// Tokens given back.
        by: i64,
    },
    /// `INCRBY key by` then `EXPIRE key seconds`.
    IncrByAndExpire {
        /// Index into KEYS.
        key: usize,
        /// Cost plus lease.
        by: i64,
        /// Twice the window.
        seconds: i64,
    },
}

/// The reply and the writes that produce it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What the script returns.
    pub reply: Reply,
    /// What it changes, in order.
    pub writes: Vec<Write>,
}

/// One limit's arguments.
struct Limit {
    limit: f64,
    window: f64,
    back: f64,
    want: f64,
    cost: f64,
}

/// The largest limit, cost, lease or give-back the twin takes (2^50): sums
/// of a few of them and a stored value (≤ 2^53) stay exact in an `f64`, and
/// a thousand increments of one key cannot overflow an `i64`.
const MAX_ARGUMENT: f64 = (1u64 << 50) as f64;

/// An argument that must reach Redis as an integer (DECRBY's and INCRBY's
/// operands are formatted with `%.17g`): a whole number in range.
fn whole_number(arg: &[u8]) -> Result<f64, Fallback> {
    let n = plain_number(arg)?;
    if n.fract() != 0.0 || n.abs() > MAX_ARGUMENT {
        return Err(Fallback);
    }
    Ok(n)
}

/// Lua 5.1's `math.min(a, b)`: `b` only when strictly smaller.
fn lua_min(a: f64, b: f64) -> f64 {
    if b < a {
        b
    } else {
        a
    }
}

/// Lua 5.1's `math.max(a, b)`: `b` only when strictly larger.
fn lua_max(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}

/// For each key, the first index in `keys` naming the same key. A client
/// sends a few keys (a scan is cheapest); a request may send 3,000, which
/// a scan per key would make millions of comparisons.
fn first_naming(keys: &[&[u8]]) -> Vec<usize> {
    if keys.len() <= 32 {
        return (0..keys.len())
            .map(|i| (0..i).find(|&j| keys[j] == keys[i]).unwrap_or(i))
            .collect();
    }
    let mut first = std::collections::HashMap::with_capacity(keys.len());
    keys.iter()
        .enumerate()
        .map(|(i, key)| *first.entry(*key).or_insert(i))
        .collect()
}

/// Runs the script for KEYS = `keys` (current, previous and reserved-on key
/// per limit) and ARGV = `args` (limit, window, give back, want, cost per
/// limit), the clock at `now_us`, with `stored[i]` the value of `keys[i]`.
pub fn run(
    keys: &[&[u8]],
    args: &[&[u8]],
    now_us: u64,
    stored: &[Option<i64>],
) -> Result<Outcome, Fallback> {
    if keys.is_empty() || keys.len() % 3 != 0 || keys.len() > 3000 || stored.len() != keys.len() {
        return Err(Fallback);
    }
    let count = keys.len() / 3;
    if args.len() < 5 * count {
        return Err(Fallback);
    }
    let limits = (0..count)
        .map(|i| {
            let arg = |j: usize| args[5 * i + j];
            Ok(Limit {
                limit: whole_number(arg(0))?,
                window: window_seconds(arg(1))?,
                back: whole_number(arg(2))?,
                want: whole_number(arg(3))?,
                cost: whole_number(arg(4))?,
            })
        })
        .collect::<Result<Vec<_>, Fallback>>()?;

    // Every key's value as the script would read it now: a key named twice
    // shares one slot (the first index naming it).
    let slot = first_naming(keys);
    let mut values: Vec<f64> = stored
        .iter()
        .map(|v| stored_count(*v))
        .collect::<Result<_, _>>()?;
    let mut writes = Vec::new();

    for (i, l) in limits.iter().enumerate() {
        if l.back > 0.0 {
            let reserved = slot[3 * i + 2];
            let held = values[reserved];
            let give = lua_min(l.back, held);
            if give > 0.0 {
                values[reserved] -= give;
                writes.push(Write::DecrBy {
                    key: 3 * i + 2,
                    by: give as i64,
                });
            }
        }
    }

    let now = time_seconds(now_us);
    let mut estimated = Vec::with_capacity(count);
    let mut window_starts = Vec::with_capacity(count);
    let mut allowed = true;
    let (mut retry_after, mut free_in) = (0.0f64, 0.0f64);
    for (i, l) in limits.iter().enumerate() {
        let previous = values[slot[3 * i + 1]];
        let current = values[slot[3 * i]];
        let e = estimate(l.window, now, previous, current)?;
        if e.estimated + l.cost > l.limit {
            allowed = false;
            let wait = (l.window - e.elapsed).ceil();
            if wait > retry_after {
                retry_after = wait;
            }
            let mut free = l.window - e.elapsed;
            if previous > 0.0 && current + l.cost <= l.limit {
                let over = e.estimated + l.cost - l.limit;
                free = lua_min(free, over * l.window / previous);
            }
            if free > free_in {
                free_in = free;
            }
        }
        estimated.push(e.estimated);
        window_starts.push(e.window_start);
    }

    let mut remaining = Vec::with_capacity(count);
    let mut resets = Vec::with_capacity(count);
    let mut granted = Vec::with_capacity(count);
    for (i, l) in limits.iter().enumerate() {
        let mut grant = 0.0;
        if allowed {
            grant = lua_max(0.0, lua_min(l.want, l.limit - estimated[i] - l.cost));
            if l.cost + grant > 0.0 {
                writes.push(Write::IncrByAndExpire {
                    key: 3 * i,
                    by: (l.cost + grant) as i64,
                    seconds: (l.window * 2.0) as i64,
                });
            }
            estimated[i] += l.cost + grant;
        }
        remaining.push(lua_number_to_integer(lua_max(0.0, l.limit - estimated[i])));
        resets.push(lua_number_to_integer(window_starts[i] + l.window));
        granted.push(lua_number_to_integer(grant));
    }
    let (seconds, micros) = ((now_us / 1_000_000) as f64, (now_us % 1_000_000) as f64);
    Ok(Outcome {
        reply: Reply {
            allowed: allowed as i64,
            remaining,
            resets,
            retry_after: lua_number_to_integer(retry_after),
            granted,
            server_time_ms: lua_number_to_integer(seconds * 1000.0 + (micros / 1000.0).floor()),
            free_in_ms: lua_number_to_integer((free_in * 1000.0).ceil()),
        },
        writes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_US: u64 = 1_720_000_050_250_000; // 30.25 s into a 60 s window

    #[test]
    fn a_top_up_reserves_the_lease_with_the_cost() {
        let keys: Vec<&[u8]> = vec![b"c", b"p", b"c"];
        let args: Vec<&[u8]> = vec![b"100", b"60", b"0", b"10", b"1"];
        let out = run(&keys, &args, NOW_US, &[Some(20), None, Some(20)]).unwrap();
        assert_eq!(out.reply.allowed, 1);
        assert_eq!(out.reply.granted, vec![10]);
        assert_eq!(out.reply.remaining, vec![69]);
        assert_eq!(out.reply.resets, vec![1_720_000_080]);
        assert_eq!(out.reply.server_time_ms, 1_720_000_050_250);
        assert_eq!(
            out.writes,
            vec![Write::IncrByAndExpire {
                key: 0,
                by: 11,
                seconds: 120
            }]
        );
    }

    #[test]
    fn a_give_back_on_the_current_key_is_read_by_the_check() {
        // Give back 15 of the 20 held on the current window's key: the
        // estimate sees 5, and the lease fits the limit again.
        let keys: Vec<&[u8]> = vec![b"c", b"p", b"c"];
        let args: Vec<&[u8]> = vec![b"10", b"60", b"15", b"3", b"0"];
        let out = run(&keys, &args, NOW_US, &[Some(20), None, Some(20)]).unwrap();
        assert_eq!(
            out.writes,
            vec![
                Write::DecrBy { key: 2, by: 15 },
                Write::IncrByAndExpire {
                    key: 0,
                    by: 3,
                    seconds: 120
                }
            ]
        );
        assert_eq!(out.reply.remaining, vec![2]);
    }

    #[test]
    fn a_give_back_never_takes_more_than_is_held() {
        let keys: Vec<&[u8]> = vec![b"c", b"p", b"old"];
        let args: Vec<&[u8]> = vec![b"10", b"60", b"9", b"0", b"0"];
        let out = run(&keys, &args, NOW_US, &[None, None, Some(4)]).unwrap();
        assert_eq!(out.writes, vec![Write::DecrBy { key: 2, by: 4 }]);
    }

    #[test]
    fn a_denial_reports_when_the_previous_window_frees_the_cost() {
        // prev 12 weighs 12 * 29.75/60 = 5.95 -> 5; curr 5; limit 10, cost 1:
        // over by 1, which the previous window sheds in 1 * 60 / 12 = 5 s.
        let keys: Vec<&[u8]> = vec![b"c", b"p", b"c"];
        let args: Vec<&[u8]> = vec![b"10", b"60", b"0", b"5", b"1"];
        let out = run(&keys, &args, NOW_US, &[Some(5), Some(12), Some(5)]).unwrap();
        assert_eq!(out.reply.allowed, 0);
        assert_eq!(out.reply.retry_after, 30);
        assert_eq!(out.reply.free_in_ms, 5000);
        assert_eq!(out.reply.granted, vec![0]);
        assert!(out.writes.is_empty());
    }

    #[test]
    fn keys_named_twice_share_the_first_index_at_any_count() {
        let few: Vec<&[u8]> = vec![b"a", b"b", b"a", b"c", b"b"];
        assert_eq!(first_naming(&few), vec![0, 1, 0, 3, 1]);
        let names: Vec<Vec<u8>> = (0..90)
            .map(|i| format!("k{}", i % 30).into_bytes())
            .collect();
        let many: Vec<&[u8]> = names.iter().map(|n| n.as_slice()).collect();
        let expected: Vec<usize> = (0..90).map(|i| i % 30).collect();
        assert_eq!(first_naming(&many), expected);
    }

    #[test]
    fn fractions_and_uneven_key_lists_go_to_lua() {
        let keys: Vec<&[u8]> = vec![b"c", b"p", b"c"];
        let fraction: Vec<&[u8]> = vec![b"10", b"60", b"0", b"1.5", b"1"];
        assert_eq!(run(&keys, &fraction, NOW_US, &[None; 3]), Err(Fallback));
        let args: Vec<&[u8]> = vec![b"10", b"60", b"0", b"1", b"1"];
        assert_eq!(run(&keys[..2], &args, NOW_US, &[None; 2]), Err(Fallback));
    }
}
