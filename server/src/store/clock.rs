//! The server's source of time.
//!
//! Everything that depends on time (TTLs, TIME, server-time scripts) reads it
//! from a [`Clock`], never from the caller and never from `SystemTime` directly,
//! so tests can drive expiry with a [`ManualClock`] instead of sleeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of unix time.
pub trait Clock: Send + Sync + 'static {
    /// Microseconds since the unix epoch.
    fn now_us(&self) -> u64;

    /// Milliseconds since the unix epoch.
    fn now_ms(&self) -> u64 {
        self.now_us() / 1000
    }
}

/// The operating system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to; for tests and simulations.
#[derive(Debug)]
pub struct ManualClock {
    now_us: AtomicU64,
}

impl ManualClock {
    /// A clock reading `now_ms` milliseconds since the epoch.
    pub fn new(now_ms: u64) -> ManualClock {
        ManualClock {
            now_us: AtomicU64::new(now_ms * 1000),
        }
    }

    /// Moves the clock forward by `ms` milliseconds.
    pub fn advance_ms(&self, ms: u64) {
        self.now_us.fetch_add(ms * 1000, Ordering::SeqCst);
    }

    /// Sets the clock to `now_ms` milliseconds since the epoch.
    pub fn set_ms(&self, now_ms: u64) {
        self.now_us.store(now_ms * 1000, Ordering::SeqCst);
    }

    /// Sets the clock to `now_us` microseconds since the epoch.
    pub fn set_us(&self, now_us: u64) {
        self.now_us.store(now_us, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> u64 {
        self.now_us.load(Ordering::SeqCst)
    }
}
