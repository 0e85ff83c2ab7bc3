//! One limit of one identity as a node sees it in the cached mode: the
//! lease (budget reserved on the server and not yet used), the deny cache,
//! the use that sizes the next lease, and what the next sync must give
//! back.

use crate::rules::{Algorithm, LimitName};

/// Uses per sync interval below which a node does not lease: a lease is
/// reserved and (when unused) given back in sync round trips, so it pays
/// only when it serves more decisions than those round trips cost; below
/// this rate every check asks the server, as exact mode does.
pub const LEASE_MIN_RATE: f64 = 2.0;
/// How much use a lease covers: half a second (at least three sync
/// intervals), so that a busy limit is topped up a few times a second.
pub const LEASE_SPAN_MS: u64 = 500;

/// How a state's limit counts on the server: its rule's [`Algorithm`] in
/// eight bytes (a burst past four billion is clamped), since every tracked
/// limit holds one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Counting {
    /// The lease script's sliding window.
    #[default]
    SlidingWindow,
    /// An INCREX counter per window.
    FixedWindow,
    /// CL.THROTTLE, with this burst.
    Gcra {
        /// CL.THROTTLE's max_burst.
        burst: u32,
    },
}

impl From<Algorithm> for Counting {
    fn from(algorithm: Algorithm) -> Counting {
        match algorithm {
            Algorithm::SlidingWindow => Counting::SlidingWindow,
            Algorithm::FixedWindow => Counting::FixedWindow,
            Algorithm::Gcra { burst } => Counting::Gcra {
                burst: u32::try_from(burst).unwrap_or(u32::MAX),
            },
        }
    }
}

/// One limit of one identity, as this node sees it.
#[derive(Debug)]
pub struct LimitState {
    /// Global or endpoint.
    pub name: LimitName,
    /// The endpoint's part of the keys (see [`crate::keys::endpoint_hash`];
    /// unused for the global limit, whose part is `*`).
    pub key_hash: [u8; 6],
    /// The ceiling enforced.
    pub ceiling: u64,
    /// Window length (see [`LimitState::window_seconds`]): 32 bits here,
    /// as `window_start`, because every tracked limit holds them.
    window_seconds: u32,
    /// The window (start, unix s) the lease belongs to.
    window_start: u32,
    /// Tokens reserved on the server for `window_start` and not used yet.
    pub lease: u64,
    /// Unused leases of ended windows: (window start, tokens) to give back.
    pub give_back: GiveBacks,
    /// Tokens used since the last sync (see [`LimitState::note_use`]).
    pub used_since_sync: u32,
    /// Tokens used per sync interval, smoothed: sizes the next lease.
    pub rate: f32,
    /// Tokens asked of this node (admitted or denied here) since it last
    /// asked the server, and when that was (unix ms, its low 32 bits: only
    /// the time since matters): its demand while the deny cache kept it
    /// from asking.
    pub asked_since_ask: u32,
    pub last_ask_ms: u32,
    /// The server's remaining budget at the last contact (leases counted as used).
    pub remaining: u64,
    /// Denied until this time (ms): the deny cache.
    pub denied_until_ms: u64,
    /// The server's denials of this node's asks in a row (see
    /// `Limiter::deny_for`).
    pub denials_in_row: u8,
    /// The server denied this limit and has not had budget left since:
    /// the next ask takes whatever has been freed meanwhile (see
    /// [`LimitState::wanted_on_ask`]).
    pub scarce: bool,
    /// How the limit counts (resolved from the rules with the ceiling).
    pub counting: Counting,
}

impl LimitState {
    /// A state with no lease yet.
    pub fn new(
        name: LimitName,
        key_hash: [u8; 6],
        ceiling: u64,
        window_seconds: u64,
    ) -> LimitState {
        LimitState {
            name,
            key_hash,
            ceiling,
            window_seconds: clamp_secs(window_seconds).max(1),
            window_start: 0,
            lease: 0,
            give_back: GiveBacks::default(),
            used_since_sync: 0,
            asked_since_ask: 0,
            last_ask_ms: 0,
            rate: 0.0,
            remaining: ceiling,
            denied_until_ms: 0,
            denials_in_row: 0,
            scarce: false,
            counting: Counting::SlidingWindow,
        }
    }

    /// Counts `cost` tokens used since the last sync.
    #[inline]
    pub fn note_use(&mut self, cost: u64) {
        let cost = u32::try_from(cost).unwrap_or(u32::MAX);
        self.used_since_sync = self.used_since_sync.saturating_add(cost);
    }

    /// The start (unix s) of the window the lease belongs to.
    #[inline]
    pub fn window_start(&self) -> u64 {
        u64::from(self.window_start)
    }

    /// Window length in seconds.
    #[inline]
    pub fn window_seconds(&self) -> u64 {
        u64::from(self.window_seconds)
    }

    /// A new window length (the rules changed): takes effect from the next
    /// roll.
    pub fn set_window_seconds(&mut self, window_seconds: u64) {
        self.window_seconds = clamp_secs(window_seconds).max(1);
    }

    /// Moves to the window starting at `start`: an unused lease of an earlier
    /// window is queued to be given back (it was reserved on that window's key).
    pub fn roll_to(&mut self, start: u64) {
        let start = clamp_secs(start);
        if self.window_start == start {
            return;
        }
        match self.counting {
            // Reserved on the ended window's counter, which the sliding
            // estimate still weighs: given back by the next sync.
            Counting::SlidingWindow => {
                if self.lease > 0 && self.window_start > 0 {
                    self.give_back.push((self.window_start(), self.lease));
                }
                self.lease = 0;
            }
            // The ended window's counter no longer matters.
            Counting::FixedWindow => self.lease = 0,
            // GCRA tokens belong to no window: the lease stays usable.
            Counting::Gcra { .. } => {}
        }
        self.scarce = false;
        self.window_start = start;
        self.remaining = self.ceiling;
    }

    /// Moves to the window that contains `now_secs`; true when that is a
    /// new window.
    pub fn roll_at(&mut self, now_secs: u64) -> bool {
        let rolls = !self.in_window(now_secs);
        self.roll_to(crate::keys::window_start(now_secs, self.window_seconds()));
        rolls
    }

    /// The limit a response reports: the ceiling, or for GCRA what
    /// CL.THROTTLE calls the limit (the burst and the request itself).
    pub fn reported_limit(&self) -> u64 {
        match self.counting {
            Counting::Gcra { burst } => u64::from(burst) + 1,
            _ => self.ceiling,
        }
    }

    /// The end of its window (unix s).
    pub fn reset(&self) -> u64 {
        self.window_start() + self.window_seconds()
    }

    /// True while `now_secs` is in the state's window (two compares, not
    /// a division: the fast path asks this on every check).
    #[inline]
    pub fn in_window(&self, now_secs: u64) -> bool {
        let start = self.window_start();
        now_secs >= start && now_secs < start + self.window_seconds()
    }

    /// The endpoint's part of the limit's keys: its hash, or `*` for the
    /// global limit.
    pub fn key_part(&self) -> &str {
        match self.name {
            LimitName::Global => "*",
            LimitName::Endpoint(_) => std::str::from_utf8(&self.key_hash).unwrap_or("*"),
        }
    }

    /// The tokens this node can expect to use before its window ends, at
    /// `per_ms` tokens a millisecond: a lease beyond that would sit unused
    /// when the window ends, budget the identity's other nodes were denied.
    fn usable_before_window_end(&self, per_ms: f64, now_ms: u64) -> u64 {
        let end_ms = self.reset() * 1000;
        (per_ms * end_ms.saturating_sub(now_ms) as f64) as u64
    }

    /// The lease a top-up asks for at `now_ms`, when syncs come every
    /// `interval_ms`: none below [`LEASE_MIN_RATE`] (exact checks are
    /// cheaper there), else half a second of recent use and at least three
    /// intervals' worth, at most a tenth of the ceiling (so that leases
    /// held by many nodes cannot starve an identity below its limit) and
    /// at most what recent use would take before the window ends.
    pub fn lease_target(&self, interval_ms: u64, now_ms: u64) -> u64 {
        let rate = f64::from(self.rate);
        if rate < LEASE_MIN_RATE {
            return 0;
        }
        let interval_ms = interval_ms.max(1) as f64;
        let intervals = (LEASE_SPAN_MS as f64 / interval_ms).max(3.0);
        let wanted = (rate * intervals).ceil() as u64;
        wanted
            .min((self.ceiling / 10).max(1))
            .min(self.usable_before_window_end(rate / interval_ms, now_ms))
    }

    /// Below this the next sync tops the lease up: half the target, so a
    /// busy limit costs one round trip per quarter second or so whatever
    /// the sync interval, and its lease lasts until the next sync.
    pub fn lease_low(&self, interval_ms: u64, now_ms: u64) -> u64 {
        self.lease_target(interval_ms, now_ms).div_ceil(2)
    }

    /// What a check that asks the server at `now_ms` also asks to lease.
    /// Normally the top-up. For a limit the server has been denying, what
    /// this node was asked for since it last asked the server: its denials
    /// are cached for at least a sync interval, so that much covers it
    /// until it asks again, and the budget the sliding window freed
    /// meanwhile is not left unused (one token per ask would admit less
    /// than the limit when few nodes serve the identity). More would sit
    /// unused while the identity's other nodes are denied (at 100 nodes, a
    /// tenth of the limit to whichever node asked first cost 1% of the
    /// limit in some windows). The grant is what is free, no more.
    pub fn wanted_on_ask(&self, interval_ms: u64, now_ms: u64) -> u64 {
        if self.scarce {
            let elapsed_ms = (now_ms as u32).wrapping_sub(self.last_ask_ms).max(1);
            let per_ms = f64::from(self.asked_since_ask) / elapsed_ms as f64;
            u64::from(self.asked_since_ask)
                .min((self.ceiling / 10).max(1))
                .min(self.usable_before_window_end(per_ms, now_ms))
                .saturating_sub(self.lease)
        } else {
            self.lease_target(interval_ms, now_ms)
                .saturating_sub(self.lease)
        }
    }

    /// Counts a check of `cost` decided here (admitted or denied) towards
    /// the node's demand between its asks.
    #[inline]
    pub fn note_asked(&mut self, cost: u64) {
        let cost = u32::try_from(cost).unwrap_or(u32::MAX);
        self.asked_since_ask = self.asked_since_ask.saturating_add(cost);
    }

    /// The node asks the server now: its demand is counted afresh.
    pub fn note_ask(&mut self, now_ms: u64) {
        self.asked_since_ask = 0;
        self.last_ask_ms = now_ms as u32;
    }
}

/// Seconds in 32 bits (unix time until 2106; windows up to 136 years).
fn clamp_secs(secs: u64) -> u32 {
    u32::try_from(secs).unwrap_or(u32::MAX)
}

/// Unused leases of ended windows, (window start, tokens), waiting to be
/// given back: almost always none or one, so kept out of line (8 bytes in
/// every state instead of a `Vec`'s 24).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[allow(clippy::box_collection)] // the point: one pointer, not a Vec's three words
pub struct GiveBacks(Option<Box<Vec<(u64, u64)>>>);

impl GiveBacks {
    /// Queues tokens of the window starting at `window_start`.
    pub fn push(&mut self, give_back: (u64, u64)) {
        self.0.get_or_insert_with(Box::default).push(give_back);
    }

    /// Takes the last queued give-back.
    pub fn pop(&mut self) -> Option<(u64, u64)> {
        let queued = self.0.as_mut()?;
        let last = queued.pop();
        if queued.is_empty() {
            self.0 = None;
        }
        last
    }

    /// True when nothing waits to be given back.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Drops everything queued.
    pub fn clear(&mut self) {
        self.0 = None;
    }

    /// What is queued, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.0.iter().flat_map(|v| v.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rolling_to_a_new_window_queues_the_unused_lease() {
        let mut state = LimitState::new(LimitName::Global, *b"000000", 1000, 60);
        state.roll_to(60);
        state.lease = 7;
        state.roll_to(120);
        assert_eq!(state.lease, 0);
        assert_eq!(state.give_back.iter().collect::<Vec<_>>(), vec![(60, 7)]);
        assert_eq!(state.reset(), 180);
    }

    #[test]
    fn a_denied_node_asks_for_its_own_demand_and_nothing_past_the_window() {
        let mut state = LimitState::new(LimitName::Global, *b"000000", 1000, 60);
        state.roll_to(60); // the window 60..120 s
        state.scarce = true;
        state.note_ask(70_000);
        state.note_asked(1);
        state.note_asked(1);
        // Two requests in the second since its last ask: it asks for two,
        // not for a tenth of the limit (which would sit unused while the
        // identity's other nodes are denied).
        assert_eq!(state.wanted_on_ask(100, 71_000), 2);
        // Two a second leave room for none in the window's last 400 ms.
        assert_eq!(state.wanted_on_ask(100, 119_600), 0);
        // A busy node asked 500 times in 100 ms: a tenth of the limit.
        state.asked_since_ask = 500;
        assert_eq!(state.wanted_on_ask(100, 70_100), 100);
        // A top-up is cut to what recent use takes before the window ends.
        state.scarce = false;
        state.rate = 10.0; // per 100 ms interval
        assert_eq!(state.lease_target(100, 70_000), 50);
        assert_eq!(state.lease_target(100, 119_800), 20);
    }

    #[test]
    fn leases_follow_recent_use_within_bounds() {
        let mut state = LimitState::new(LimitName::Global, *b"000000", 1000, 60);
        assert_eq!(state.lease_target(100, 0), 0, "no use, no lease");
        state.rate = 1.5;
        assert_eq!(state.lease_target(100, 0), 0, "too slow to pay for a lease");
        state.rate = 2.0;
        assert_eq!(
            (state.lease_target(100, 0), state.lease_low(100, 0)),
            (10, 5)
        );
        state.rate = 10.0;
        // Half a second of use at 100 ms, three intervals at 200 ms.
        assert_eq!(
            (state.lease_target(100, 0), state.lease_low(100, 0)),
            (50, 25)
        );
        assert_eq!(state.lease_target(20, 0), 100);
        assert_eq!(state.lease_target(200, 0), 30);
        state.rate = 10_000.0;
        assert_eq!(state.lease_target(100, 0), 100);
    }
}
