//! Native twin of Python `limits`' moving window,
//! `scripts/limits_acquire_moving_window.lua` (limits 5.8.0,
//! `limits/resources/redis/lua_scripts/acquire_moving_window.lua`, which
//! `MovingWindowRateLimiter.hit` runs through EVALSHA).
//!
//! KEYS = the limit's list of hit timestamps, newest first; ARGV = now
//! (seconds, a float), limit, window seconds, amount. The hit is refused
//! when the amount exceeds the limit, or when the entry that would fall
//! `amount` places short of the limit is still inside the window; else the
//! amount's timestamps are LPUSHed, the list trimmed to the limit, and the
//! key given the window as its TTL. Replies true (1) or false (nil).
//!
//! The server reads the one entry the script reads ([`Plan::index`]), and
//! writes the timestamp as Redis formats a Lua number (`%.17g`).

use crate::fixed_window::canonical_integer;
use crate::{plain_number, Fallback};

/// The most timestamps one LPUSH of the script carries: a larger amount
/// is pushed in several calls, which Lua makes.
const PUSH_BOUND: i64 = 5000;

/// The arguments, read before the list is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// ARGV[1], the caller's clock.
    pub timestamp: f64,
    /// ARGV[2].
    pub limit: i64,
    /// ARGV[3], seconds.
    pub expiry: i64,
    /// ARGV[4].
    pub amount: i64,
}

impl Plan {
    /// The arguments as the script reads them; whole numbers only (the
    /// limit and amount reach LINDEX and LTRIM, the expiry EXPIRE).
    pub fn read(args: &[&[u8]]) -> Result<Plan, Fallback> {
        let [timestamp, limit, expiry, amount, ..] = args else {
            return Err(Fallback);
        };
        let plan = Plan {
            timestamp: plain_number(timestamp)?,
            limit: canonical_integer(limit)?,
            expiry: canonical_integer(expiry)?,
            amount: canonical_integer(amount)?,
        };
        // An amount of 0 or less pushes nothing and a limit of 0 trims to
        // `0 -1`: Lua's business. A zero or negative EXPIRE deletes.
        if plan.amount < 1 || plan.amount > PUSH_BOUND || plan.limit < 1 || plan.expiry < 1 {
            return Err(Fallback);
        }
        Ok(plan)
    }

    /// `amount > limit`: refused before the list is read.
    pub fn too_large(&self) -> bool {
        self.amount > self.limit
    }

    /// The index LINDEX reads: `limit - amount`, from the head.
    pub fn index(&self) -> usize {
        (self.limit - self.amount) as usize
    }

    /// Whether the hit is acquired, given the entry at [`Plan::index`]
    /// (`None`: no such entry, or no list).
    pub fn acquired(&self, entry: Option<&[u8]>) -> Result<bool, Fallback> {
        match entry {
            None => Ok(true),
            Some(bytes) => {
                let at = plain_number(bytes)?;
                Ok(at < self.timestamp - self.expiry as f64)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hit_is_refused_while_the_limit_th_entry_is_in_the_window() {
        let plan = Plan::read(&[b"1000.5", b"3", b"60", b"1"]).unwrap();
        assert_eq!(plan.index(), 2);
        assert_eq!(plan.acquired(None), Ok(true));
        assert_eq!(plan.acquired(Some(b"990")), Ok(false));
        assert_eq!(plan.acquired(Some(b"940.5")), Ok(false));
        assert_eq!(plan.acquired(Some(b"940.25")), Ok(true));
        assert_eq!(plan.acquired(Some(b"junk")), Err(Fallback));
    }

    #[test]
    fn an_amount_past_the_limit_is_refused_unread() {
        let plan = Plan::read(&[b"1000", b"3", b"60", b"4"]).unwrap();
        assert!(plan.too_large());
        for args in [
            &[&b"1000"[..], b"3", b"60", b"0"][..],
            &[b"1000", b"0", b"60", b"1"],
            &[b"1000", b"3", b"1.5", b"1"],
            &[b"x", b"3", b"60", b"1"],
            &[b"1000", b"3", b"60"],
        ] {
            assert_eq!(Plan::read(args), Err(Fallback), "{args:?}");
        }
    }
}
