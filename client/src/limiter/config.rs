//! The limiter's settings and errors: modes, failure policies, where the
//! rules come from, the clock.

use std::time::Duration;

use crate::breaker::BreakerConfig;
use crate::rules::{RuleSet, RulesError};

/// How checks are decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every check is one round trip running the multi-limit script.
    Exact,
    /// Checks are served from leases reserved on the server, topped up by a
    /// sync every `sync_interval`; a check whose lease is used up asks the
    /// server at once instead of denying.
    Cached {
        /// How often leases are topped up and returned (20-100 ms).
        sync_interval: Duration,
    },
}

/// What a check decides when the server cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Allow.
    Open,
    /// Deny.
    Closed,
    /// Decide from the last known budgets: deny identities known to be over
    /// a limit (deny cache, or last server count plus local use since), allow
    /// the rest.
    Hybrid,
}

/// Where the rules come from.
#[derive(Debug, Clone)]
pub enum RuleSource {
    /// Fixed rules (a TOML file, or built in code).
    Static(RuleSet),
    /// The JSON document at `key` (on the node serving its slot, in a
    /// cluster), reloaded when a message arrives on `channel` (subscribed
    /// on any node: a cluster relays PUBLISH to every node).
    Server {
        /// The key holding the rule document.
        key: String,
        /// The channel announcing updates.
        channel: String,
    },
}

impl RuleSource {
    /// The default rule store: key and channel `tally:rules`.
    pub fn server_default() -> RuleSource {
        RuleSource::Server {
            key: "tally:rules".to_string(),
            channel: "tally:rules".to_string(),
        }
    }
}

/// A source of time (unix milliseconds); the simulation supplies its own.
pub trait Clock: Send + Sync + 'static {
    /// Now, in unix milliseconds.
    fn now_ms(&self) -> u64;
}

/// The system clock, read coarsely: on Linux `CLOCK_REALTIME_COARSE`
/// (the kernel's last tick, 1-4 ms resolution, a few nanoseconds to read
/// where the precise clock costs ~15 ns, a tenth of a cached decision).
/// Windows are whole seconds; a few milliseconds do not matter.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[cfg(target_os = "linux")]
    fn now_ms(&self) -> u64 {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable timespec for the call.
        let status = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut now) };
        if status != 0 {
            return precise_now_ms();
        }
        now.tv_sec as u64 * 1000 + now.tv_nsec as u64 / 1_000_000
    }

    #[cfg(not(target_os = "linux"))]
    fn now_ms(&self) -> u64 {
        precise_now_ms()
    }
}

fn precise_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Limiter settings.
#[derive(Debug, Clone)]
pub struct LimiterConfig {
    /// Exact or cached.
    pub mode: Mode,
    /// Longest a check waits for the server before the policy decides:
    /// a gateway's 1 ms budget for the check plus a LAN round trip.
    pub call_timeout: Duration,
    /// Longest a sync round trip may take.
    pub sync_timeout: Duration,
    /// When the breaker opens and probes.
    pub breaker: BreakerConfig,
    /// What to do when the server is unreachable.
    pub policy: FailurePolicy,
    /// Most limit states cached (cached mode).
    pub cache_capacity: usize,
    /// Spawn the sync, clock and rules tasks (tests and simulations that
    /// drive [`Limiter::sync_now`] themselves turn this off).
    pub background_tasks: bool,
}

impl Default for LimiterConfig {
    fn default() -> LimiterConfig {
        LimiterConfig {
            mode: Mode::Exact,
            call_timeout: Duration::from_millis(2),
            sync_timeout: Duration::from_millis(50),
            breaker: BreakerConfig::default(),
            policy: FailurePolicy::Hybrid,
            cache_capacity: 100_000,
            background_tasks: true,
        }
    }
}

/// Why a limiter could not be built.
#[derive(Debug)]
pub enum Error {
    /// A server URL or connection problem.
    Redis(redis::RedisError),
    /// Bad rules.
    Rules(RulesError),
    /// Bad settings.
    Config(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Redis(e) => write!(f, "server: {e}"),
            Error::Rules(e) => write!(f, "rules: {e}"),
            Error::Config(e) => write!(f, "config: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Error {
        Error::Redis(e)
    }
}
