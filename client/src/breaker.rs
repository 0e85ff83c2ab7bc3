//! A circuit breaker per server node (docs/client.md): a node that keeps
//! failing is left alone for a while, so a check does not wait on it every
//! time.
//!
//! Closed: calls go through; a timeout or error is recorded. `failures`
//! failures within `window` open the breaker. Open: calls fail at once
//! (the limiter applies its failure policy) until `probe_interval` has
//! passed; then exactly one call is let through as a probe. A successful
//! probe closes the breaker; a failed one keeps it open for another interval.

use std::collections::VecDeque;
use std::time::Duration;

use parking_lot::Mutex;

/// Breaker thresholds.
#[derive(Debug, Clone, Copy)]
pub struct BreakerConfig {
    /// Failures that open the breaker...
    pub failures: usize,
    /// ...within this long.
    pub window: Duration,
    /// How often an open breaker lets one probe through.
    pub probe_interval: Duration,
}

impl Default for BreakerConfig {
    /// 5 failures in 10 s open it; a probe every 30 s tries again.
    fn default() -> BreakerConfig {
        BreakerConfig {
            failures: 5,
            window: Duration::from_secs(10),
            probe_interval: Duration::from_secs(30),
        }
    }
}

/// Where the breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls go through.
    Closed,
    /// Calls fail fast.
    Open,
    /// One probe is in flight.
    HalfOpen,
}

#[derive(Debug)]
struct Inner {
    state: BreakerState,
    /// Times (ms) of recent failures while closed.
    failures: VecDeque<u64>,
    /// When the breaker opened or last probed (ms).
    opened_at: u64,
}

/// A circuit breaker; time is passed in (ms) so that tests and the
/// simulation control it.
#[derive(Debug)]
pub struct Breaker {
    config: BreakerConfig,
    inner: Mutex<Inner>,
}

/// Permission to make a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permit {
    /// A normal call.
    Call,
    /// The one probe of an open breaker.
    Probe,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(config: BreakerConfig) -> Breaker {
        Breaker {
            config,
            inner: Mutex::new(Inner {
                state: BreakerState::Closed,
                failures: VecDeque::new(),
                opened_at: 0,
            }),
        }
    }

    /// The current state.
    pub fn state(&self) -> BreakerState {
        self.inner.lock().state
    }

    /// May a call be made at `now_ms`? `None` means fail fast.
    pub fn permit(&self, now_ms: u64) -> Option<Permit> {
        let mut inner = self.inner.lock();
        match inner.state {
            BreakerState::Closed => Some(Permit::Call),
            BreakerState::HalfOpen => None,
            BreakerState::Open => {
                let due = inner.opened_at + self.config.probe_interval.as_millis() as u64;
                if now_ms >= due {
                    inner.state = BreakerState::HalfOpen;
                    inner.opened_at = now_ms;
                    Some(Permit::Probe)
                } else {
                    None
                }
            }
        }
    }

    /// Records a call's success.
    pub fn success(&self, permit: Permit) {
        let mut inner = self.inner.lock();
        if permit == Permit::Probe || inner.state == BreakerState::HalfOpen {
            inner.state = BreakerState::Closed;
            inner.failures.clear();
        }
    }

    /// Records a call's failure (timeout or error); true when this opened
    /// the breaker.
    pub fn failure(&self, permit: Permit, now_ms: u64) -> bool {
        let mut inner = self.inner.lock();
        if permit == Permit::Probe {
            inner.state = BreakerState::Open;
            inner.opened_at = now_ms;
            return false;
        }
        if inner.state != BreakerState::Closed {
            return false;
        }
        let window = self.config.window.as_millis() as u64;
        inner.failures.push_back(now_ms);
        while inner.failures.front().is_some_and(|&t| t + window < now_ms) {
            inner.failures.pop_front();
        }
        if inner.failures.len() >= self.config.failures {
            inner.state = BreakerState::Open;
            inner.opened_at = now_ms;
            inner.failures.clear();
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_failures_in_ten_seconds_open_it_and_one_probe_closes_it() {
        let breaker = Breaker::new(BreakerConfig::default());
        for t in 0..4 {
            assert!(!breaker.failure(Permit::Call, t * 1000));
        }
        assert_eq!(breaker.state(), BreakerState::Closed);
        assert!(breaker.failure(Permit::Call, 4000));
        assert_eq!(breaker.state(), BreakerState::Open);
        assert_eq!(breaker.permit(33_999), None, "no probe before 30 s");
        assert_eq!(breaker.permit(34_000), Some(Permit::Probe));
        assert_eq!(breaker.permit(34_001), None, "exactly one probe");
        breaker.failure(Permit::Probe, 34_010);
        assert_eq!(breaker.state(), BreakerState::Open);
        assert_eq!(breaker.permit(64_010), Some(Permit::Probe));
        breaker.success(Permit::Probe);
        assert_eq!(breaker.state(), BreakerState::Closed);
        assert_eq!(breaker.permit(64_011), Some(Permit::Call));
    }

    #[test]
    fn failures_spread_wider_than_the_window_do_not_open_it() {
        let breaker = Breaker::new(BreakerConfig::default());
        for t in 0..10 {
            breaker.failure(Permit::Call, t * 3000);
        }
        assert_eq!(breaker.state(), BreakerState::Closed);
    }
}
