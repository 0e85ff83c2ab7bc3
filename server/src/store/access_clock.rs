//! When each key was last used, for OBJECT IDLETIME and DEBUG OBJECT.
//!
//! Redis stamps every value it looks up with its LRU clock: the unix time
//! in seconds, kept to 24 bits, so it wraps every 194 days and an idle
//! time is read modulo that. tally keeps the same clock, with the same
//! width and wrap, so OBJECT IDLETIME, RESTORE IDLETIME and DEBUG OBJECT's
//! `lru` fields answer as Redis's do. Where the 24 bits live is the
//! entry's business (`super::entry`): the block of a counter has no room
//! to spare.
//!
//! Some lookups leave the stamp alone, as Redis's `LOOKUP_NOTOUCH` ones do:
//! TYPE, TTL, EXISTS and OBJECT look at a key without using it, and a
//! client that set CLIENT NO-TOUCH uses nothing. Those commands run inside
//! [`untouched`]; every other lookup of the thread stamps what it finds.

use std::cell::Cell;

/// The largest clock value: the clock counts seconds modulo 2^24.
pub const CLOCK_MAX: u32 = (1 << 24) - 1;

/// Redis's LRU clock at `now_ms`.
#[inline]
pub fn clock_at(now_ms: u64) -> u32 {
    ((now_ms / 1000) & CLOCK_MAX as u64) as u32
}

/// Milliseconds since a key stamped `clock` was used, as Redis's
/// estimateObjectIdleTime computes it, wrap and all: a stamp ahead of the
/// clock is taken to be from before the clock last wrapped.
pub fn idle_ms(clock: u32, now_ms: u64) -> u64 {
    let now = clock_at(now_ms) as u64;
    let clock = clock as u64;
    let seconds = if now >= clock {
        now - clock
    } else {
        now + (CLOCK_MAX as u64 - clock)
    };
    seconds * 1000
}

/// The stamp of a key that has been idle for `idle_s` seconds (RESTORE
/// IDLETIME, an RDB's idle field), as Redis's objectSetLRUOrLFU computes
/// it: an idle time reaching back past the clock's last wrap gets a stamp
/// half the clock's range away, so the key reads as long idle for months.
pub fn clock_for_idle(idle_s: u64, now_ms: u64) -> u32 {
    let now = clock_at(now_ms) as u64;
    match now.checked_sub(idle_s) {
        Some(stamp) => stamp as u32,
        None => ((now + CLOCK_MAX as u64 / 2) % CLOCK_MAX as u64) as u32,
    }
}

thread_local! {
    static LEAVING_ALONE: Cell<bool> = const { Cell::new(false) };
}

/// True when lookups on this thread stamp the keys they find.
#[inline]
pub fn stamping() -> bool {
    !LEAVING_ALONE.with(Cell::get)
}

/// While this lives, lookups on this thread leave access stamps alone.
/// Nested scopes restore what they found, so a TYPE inside a script of a
/// CLIENT NO-TOUCH client leaves the script untouched after it too.
#[must_use = "lookups stamp again as soon as the scope is dropped"]
pub struct Untouched {
    before: bool,
}

/// Starts a scope in which lookups leave access stamps alone.
pub fn untouched() -> Untouched {
    scope(true)
}

/// Starts a scope in which lookups leave access stamps alone or stamp,
/// whatever an enclosing scope said: the commands EXEC runs for a CLIENT
/// NO-TOUCH client each decide for themselves.
pub fn scope(leave_alone: bool) -> Untouched {
    let before = LEAVING_ALONE.with(|flag| flag.replace(leave_alone));
    Untouched { before }
}

impl Drop for Untouched {
    fn drop(&mut self) {
        LEAVING_ALONE.with(|flag| flag.set(self.before));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY_MS: u64 = 86_400_000;

    #[test]
    fn the_clock_is_unix_seconds_in_24_bits() {
        assert_eq!(clock_at(1_999), 1);
        assert_eq!(
            clock_at(1_780_000_000_000),
            (1_780_000_000 % (1 << 24)) as u32
        );
        assert_eq!(clock_at((CLOCK_MAX as u64 + 1) * 1000), 0);
    }

    #[test]
    fn idle_time_is_read_across_one_wrap_as_redis_reads_it() {
        let now = 1_780_000_000_000;
        assert_eq!(idle_ms(clock_at(now), now), 0);
        assert_eq!(idle_ms(clock_at(now - 5_000), now), 5_000);
        // Just after the clock wrapped, a stamp from just before it.
        let wrapped = (CLOCK_MAX as u64 + 1) * 1000 + 3_000;
        assert_eq!(clock_at(wrapped), 3);
        // Redis's formula: now + (CLOCK_MAX - stamp), one second short of
        // the true distance.
        assert_eq!(idle_ms(CLOCK_MAX - 1, wrapped), 4_000);
    }

    #[test]
    fn a_stamp_for_an_idle_time_reads_back_as_that_idle_time() {
        let now = 1_780_000_000_000;
        let stamp = clock_for_idle(1000, now);
        assert_eq!(idle_ms(stamp, now), 1_000_000);
        assert_eq!(idle_ms(clock_for_idle(0, now), now), 0);
        // Further back than the clock's value: half the range away.
        let far = clock_for_idle(400 * DAY_MS / 1000, now);
        assert_eq!(far, ((clock_at(now) + CLOCK_MAX / 2) % CLOCK_MAX));
    }

    #[test]
    fn untouched_scopes_nest() {
        assert!(stamping());
        {
            let _outer = untouched();
            assert!(!stamping());
            {
                let _inner = untouched();
                assert!(!stamping());
            }
            assert!(
                !stamping(),
                "the inner scope restores the outer one's state"
            );
            {
                let _stamping = scope(false);
                assert!(stamping());
            }
            assert!(!stamping());
        }
        assert!(stamping());
    }
}
