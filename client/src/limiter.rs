//! The [`Limiter`]: rules, the two modes, the breaker and the sync worker.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use parking_lot::RwLock;
use redis::aio::MultiplexedConnection;

use crate::breaker::{Breaker, BreakerConfig, BreakerState};
use crate::cache::{Cache, Class, ClassKey, ClassKeyRef, LimitState, SharedState};
use crate::decision::{Decision, LimitStatus, Source};
use crate::keys::{limit_prefix, window_key, window_start, Identity};
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::rules::{AppliedLimit, LimitName, RuleSet, RuleState, RulesError};

/// The lease script of the cached mode (see `scripts/lease.lua`).
pub const LEASE_SCRIPT: &str = include_str!("../scripts/lease.lua");

/// The multi-limit script as shipped by tally-lua (tally runs it natively).
fn multi_limit_source() -> &'static str {
    tally_lua::SCRIPTS
        .iter()
        .find(|s| s.twin == tally_lua::Twin::MultiLimit)
        .map(|s| s.source)
        .expect("tally-lua ships multi_limit.lua")
}

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
    /// The JSON document at `key` on the first server, reloaded when a
    /// message arrives on `channel`.
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
    /// within the seed's 1 ms budget plus a LAN round trip.
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

/// One server: its connection, breaker and clock offset.
struct Server {
    /// The multiplexed connection, made on first use and dropped after a
    /// failed call so that the next call (behind the breaker) reconnects.
    /// (redis's ConnectionManager reconnects by itself but leaves a task
    /// behind when dropped.)
    connection: parking_lot::Mutex<Option<MultiplexedConnection>>,
    client: redis::Client,
    breaker: Breaker,
    /// Server time minus local time, in ms.
    offset_ms: AtomicI64,
}

struct Inner {
    servers: Vec<Server>,
    rules: RwLock<RuleState>,
    /// Bumped on every rules change and tightening change: cached classes
    /// built before are rebuilt.
    generation: AtomicU64,
    /// The back-pressure factor as f64 bits (1.0 = no tightening).
    tightening: AtomicU64,
    config: LimiterConfig,
    clock: Arc<dyn Clock>,
    cache: Cache,
    metrics: Metrics,
    multi_limit: redis::Script,
    lease: redis::Script,
}

/// The gateway-side rate limiter. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Limiter {
    inner: Arc<Inner>,
}

/// Builds a [`Limiter`].
pub struct LimiterBuilder {
    urls: Vec<String>,
    rules: RuleSource,
    config: LimiterConfig,
    clock: Arc<dyn Clock>,
    /// For `rediss://` URLs: the CA and the client certificate.
    #[cfg(feature = "tls")]
    tls: Option<redis::TlsCertificates>,
}

impl LimiterBuilder {
    /// Rules from a TOML file's text.
    pub fn rules_toml(mut self, text: &str) -> Result<LimiterBuilder, Error> {
        self.rules = RuleSource::Static(RuleSet::from_toml(text).map_err(Error::Rules)?);
        Ok(self)
    }

    /// Where the rules come from.
    pub fn rules(mut self, source: RuleSource) -> LimiterBuilder {
        self.rules = source;
        self
    }

    /// All settings at once.
    pub fn config(mut self, config: LimiterConfig) -> LimiterBuilder {
        self.config = config;
        self
    }

    /// Exact or cached.
    pub fn mode(mut self, mode: Mode) -> LimiterBuilder {
        self.config.mode = mode;
        self
    }

    /// The failure policy.
    pub fn policy(mut self, policy: FailurePolicy) -> LimiterBuilder {
        self.config.policy = policy;
        self
    }

    /// The per-call timeout.
    pub fn call_timeout(mut self, timeout: Duration) -> LimiterBuilder {
        self.config.call_timeout = timeout;
        self
    }

    /// A clock other than the system's.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> LimiterBuilder {
        self.clock = clock;
        self
    }

    /// TLS for `rediss://` URLs: the CA the server's certificate must chain
    /// to (PEM; `None`: the system's roots) and, when the server asks for
    /// one (`tls-auth-clients yes`), this client's certificate and key.
    #[cfg(feature = "tls")]
    pub fn tls(
        mut self,
        root_cert_pem: Option<Vec<u8>>,
        client_cert_and_key_pem: Option<(Vec<u8>, Vec<u8>)>,
    ) -> LimiterBuilder {
        self.tls = Some(redis::TlsCertificates {
            client_tls: client_cert_and_key_pem.map(|(client_cert, client_key)| {
                redis::ClientTlsConfig {
                    client_cert,
                    client_key,
                }
            }),
            root_cert: root_cert_pem,
        });
        self
    }

    /// Connects (lazily: a server that is down now is retried later, behind
    /// the breaker) and loads the rules.
    pub async fn build(self) -> Result<Limiter, Error> {
        if self.urls.is_empty() {
            return Err(Error::Config("at least one server URL is needed".into()));
        }
        if let Mode::Cached { sync_interval } = self.config.mode {
            if sync_interval.is_zero() {
                return Err(Error::Config("sync_interval must be positive".into()));
            }
        }
        let mut servers = Vec::with_capacity(self.urls.len());
        #[cfg(feature = "tls")]
        if self.urls.iter().any(|u| u.starts_with("rediss://")) {
            // rustls needs a process-wide provider; ring's, unless the
            // program installed one.
            let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
        }
        for url in &self.urls {
            #[cfg(feature = "tls")]
            let client = match &self.tls {
                Some(certificates) if url.starts_with("rediss://") => {
                    redis::Client::build_with_tls(url.as_str(), certificates.clone())?
                }
                _ => redis::Client::open(url.as_str())?,
            };
            #[cfg(not(feature = "tls"))]
            let client = redis::Client::open(url.as_str())?;
            servers.push(Server {
                connection: parking_lot::Mutex::new(None),
                client,
                breaker: Breaker::new(self.config.breaker),
                offset_ms: AtomicI64::new(0),
            });
        }
        let initial = match &self.rules {
            RuleSource::Static(rules) => rules.clone(),
            RuleSource::Server { .. } => RuleSet::default(),
        };
        let limiter = Limiter {
            inner: Arc::new(Inner {
                servers,
                rules: RwLock::new(RuleState::new(initial)),
                generation: AtomicU64::new(1),
                tightening: AtomicU64::new(1.0f64.to_bits()),
                cache: Cache::new(self.config.cache_capacity),
                config: self.config,
                clock: self.clock,
                metrics: Metrics::default(),
                multi_limit: redis::Script::new(multi_limit_source()),
                lease: redis::Script::new(LEASE_SCRIPT),
            }),
        };
        limiter.calibrate_clocks().await;
        if let RuleSource::Server { key, channel } = &self.rules {
            limiter.reload_rules(key).await?;
            if limiter.inner.config.background_tasks {
                limiter.spawn_rules_listener(key.clone(), channel.clone());
            }
        }
        if limiter.inner.config.background_tasks {
            limiter.spawn_maintenance();
        }
        Ok(limiter)
    }
}

/// Tokens a lease call gives back or asks for on one limit.
struct LeaseRequest {
    prefix: Arc<str>,
    window_seconds: u64,
    ceiling: u64,
    current: u64,
    give_back: Option<(u64, u64)>,
    want: u64,
    cost: u64,
}

/// The reply of the lease script.
struct LeaseReply {
    allowed: bool,
    remaining: Vec<u64>,
    resets: Vec<u64>,
    retry_after: u64,
    granted: Vec<u64>,
    server_ms: u64,
    /// When the estimate admits the cost again (the deny cache's end).
    free_in_ms: u64,
}

type LeaseTuple = (i64, Vec<i64>, Vec<i64>, i64, Vec<i64>, i64, i64);

impl LeaseReply {
    fn from_tuple(t: LeaseTuple) -> LeaseReply {
        let positive = |v: Vec<i64>| v.into_iter().map(|n| n.max(0) as u64).collect();
        LeaseReply {
            allowed: t.0 == 1,
            remaining: positive(t.1),
            resets: positive(t.2),
            retry_after: t.3.max(0) as u64,
            granted: positive(t.4),
            server_ms: t.5.max(0) as u64,
            free_in_ms: t.6.max(0) as u64,
        }
    }
}

impl Limiter {
    /// Starts building a limiter for the given server URLs (`redis://host:port`);
    /// identities are spread over several servers by hash.
    pub fn builder<S: Into<String>>(urls: impl IntoIterator<Item = S>) -> LimiterBuilder {
        LimiterBuilder {
            urls: urls.into_iter().map(Into::into).collect(),
            rules: RuleSource::Static(RuleSet::default()),
            config: LimiterConfig::default(),
            clock: Arc::new(SystemClock),
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// The counters.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.inner.metrics.snapshot()
    }

    /// The breaker state of server `index`.
    pub fn breaker_state(&self, index: usize) -> BreakerState {
        self.inner.servers[index].breaker.state()
    }

    /// The installed rules.
    pub fn rules(&self) -> RuleSet {
        self.inner.rules.read().current().clone()
    }

    /// Installs new rules (as a rules-channel message does); false when this
    /// version is installed already.
    pub fn install_rules(&self, rules: RuleSet) -> bool {
        let now_secs = self.now_ms(0) / 1000;
        let changed = self.inner.rules.write().update(rules, now_secs);
        if changed {
            self.inner.generation.fetch_add(1, Ordering::AcqRel);
        }
        changed
    }

    /// Back-pressure: multiplies every limit by `factor` (0 < factor <= 1)
    /// while an origin sheds load; 1.0 restores the rules' limits.
    pub fn set_tightening(&self, factor: f64) {
        let factor = if factor.is_finite() {
            factor.clamp(0.001, 1.0)
        } else {
            1.0
        };
        self.inner
            .tightening
            .store(factor.to_bits(), Ordering::Release);
        self.inner.generation.fetch_add(1, Ordering::AcqRel);
    }

    fn tightening(&self) -> f64 {
        f64::from_bits(self.inner.tightening.load(Ordering::Acquire))
    }

    fn server_of(&self, identity: &Identity) -> usize {
        let servers = self.inner.servers.len();
        if servers == 1 {
            return 0;
        }
        let hash = sha1_smol::Sha1::from(format!("{}:{}", identity.scope, identity.id))
            .digest()
            .bytes();
        (u64::from_le_bytes(hash[..8].try_into().expect("8 bytes")) % servers as u64) as usize
    }

    /// Server `index`'s time, in ms, by the local clock and the last offset.
    fn now_ms(&self, server: usize) -> u64 {
        let local = self.inner.clock.now_ms() as i64;
        (local + self.inner.servers[server].offset_ms.load(Ordering::Relaxed)).max(0) as u64
    }

    /// Decides whether `identity` may make a request to `endpoint` costing
    /// `cost` (usually 1).
    pub async fn check(&self, identity: &Identity, endpoint: &str, cost: u64) -> Decision {
        if let Mode::Cached { .. } = self.inner.config.mode {
            if let Some(decision) = self.cached_fast_path(identity, endpoint, cost) {
                return decision;
            }
        }
        // Everything that may wait on the server is boxed: the future of a
        // check decided locally stays small (unboxed it was ~5 KB, built
        // and moved for every call).
        let decision = match self.inner.config.mode {
            Mode::Exact => Box::pin(self.check_exact(identity, endpoint, cost)).await,
            Mode::Cached { .. } => Box::pin(self.check_cached(identity, endpoint, cost)).await,
        };
        // One counter per decision: local ones count themselves as local
        // allowed/denied (the fast path pays one atomic add, not two).
        if decision.source != Source::Local {
            self.inner.metrics.decision(decision.allowed);
        }
        decision
    }

    fn applied_limits(
        &self,
        identity: &Identity,
        endpoint: &str,
        now_secs: u64,
    ) -> Vec<AppliedLimit> {
        self.inner
            .rules
            .read()
            .limits(&identity.tier, endpoint, now_secs)
    }

    async fn check_exact(&self, identity: &Identity, endpoint: &str, cost: u64) -> Decision {
        let server = self.server_of(identity);
        let now_ms = self.now_ms(server);
        let now_secs = now_ms / 1000;
        let limits = self.applied_limits(identity, endpoint, now_secs);
        if limits.is_empty() {
            return Decision::unlimited(Source::Server, now_secs);
        }
        let tightening = self.tightening();
        let mut invocation = self.inner.multi_limit.prepare_invoke();
        for applied in &limits {
            let endpoint = match &applied.name {
                LimitName::Global => None,
                LimitName::Endpoint(e) => Some(&**e),
            };
            let prefix = limit_prefix(identity, endpoint);
            let window = applied.limit.window_seconds;
            let start = window_start(now_secs, window);
            invocation.key(window_key(&prefix, start));
            invocation.key(window_key(&prefix, start.saturating_sub(window)));
        }
        for applied in &limits {
            invocation
                .arg(applied.limit.ceiling(tightening))
                .arg(applied.limit.window_seconds)
                .arg(cost);
        }
        type Reply = (i64, Vec<i64>, Vec<i64>, i64);
        let call = async {
            let mut connection = self.connection(server).await?;
            invocation.invoke_async::<Reply>(&mut connection).await
        };
        match self
            .guarded(server, self.inner.config.call_timeout, call)
            .await
        {
            Some((allowed, remaining, resets, retry_after)) => {
                self.inner.metrics.server_check();
                let mut decision = Decision {
                    allowed: allowed == 1,
                    limits: limits
                        .iter()
                        .enumerate()
                        .map(|(i, applied)| LimitStatus {
                            name: applied.name.clone(),
                            limit: applied.limit.ceiling(tightening),
                            remaining: remaining.get(i).copied().unwrap_or(0).max(0) as u64,
                            reset: resets.get(i).copied().unwrap_or(0).max(0) as u64,
                            window_seconds: applied.limit.window_seconds,
                        })
                        .collect(),
                    retry_after: if allowed == 1 {
                        0
                    } else {
                        retry_after.max(0) as u64
                    },
                    deciding: None,
                    source: Source::Server,
                    now_secs,
                };
                decision.choose_deciding();
                if self.inner.config.policy == FailurePolicy::Hybrid {
                    self.remember(identity, endpoint, server, &decision, now_ms);
                }
                decision
            }
            None => self.unreachable(identity, endpoint, cost, server).await,
        }
    }

    /// Keeps an exact check's outcome as the last known budget of its
    /// limits, for the hybrid policy to judge by while the server is away.
    fn remember(
        &self,
        identity: &Identity,
        endpoint: &str,
        server: usize,
        decision: &Decision,
        now_ms: u64,
    ) {
        let class = self.class(identity, endpoint, server, now_ms / 1000);
        for (state, status) in class.limits.iter().zip(&decision.limits) {
            let mut state = state.lock();
            state.roll_at(now_ms / 1000);
            state.remaining = status.remaining;
            state.reset = status.reset;
            state.used_since_sync = 0;
            state.last_used_ms = now_ms;
            if !decision.allowed && status.remaining == 0 {
                state.denied_until_ms = now_ms + decision.retry_after * 1000;
            }
        }
    }

    /// Runs a server call behind the breaker and the timeout; `None` when it
    /// was refused by an open breaker, timed out or failed.
    async fn guarded<T>(
        &self,
        server: usize,
        timeout: Duration,
        call: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Option<T> {
        let breaker = &self.inner.servers[server].breaker;
        let now = self.inner.clock.now_ms();
        let permit = breaker.permit(now)?;
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(value)) => {
                breaker.success(permit);
                Some(value)
            }
            Ok(Err(error)) => {
                tracing::debug!(%error, "rate-limit server call failed");
                self.inner.servers[server].connection.lock().take();
                if breaker.failure(permit, self.inner.clock.now_ms()) {
                    self.inner.metrics.breaker_opened();
                    tracing::warn!(server, "circuit breaker opened");
                }
                None
            }
            Err(_) => {
                // A connection that timed out may be stuck: start afresh.
                self.inner.servers[server].connection.lock().take();
                if breaker.failure(permit, self.inner.clock.now_ms()) {
                    self.inner.metrics.breaker_opened();
                    tracing::warn!(server, "circuit breaker opened");
                }
                None
            }
        }
    }

    /// The decision when the server could not be asked.
    async fn unreachable(
        &self,
        identity: &Identity,
        endpoint: &str,
        cost: u64,
        server: usize,
    ) -> Decision {
        let now_ms = self.now_ms(server);
        let now_secs = now_ms / 1000;
        match self.inner.config.policy {
            FailurePolicy::Open => {
                self.inner.metrics.fail_open();
                Decision::unlimited(Source::FailOpen, now_secs)
            }
            FailurePolicy::Closed => {
                self.inner.metrics.fail_closed();
                Decision {
                    allowed: false,
                    limits: Vec::new(),
                    retry_after: 1,
                    deciding: None,
                    source: Source::FailClosed,
                    now_secs,
                }
            }
            FailurePolicy::Hybrid => {
                let class = self.class(identity, endpoint, server, now_secs);
                let mut decision = self.hybrid_decision(&class, cost, now_ms);
                decision.source = Source::Hybrid;
                if decision.allowed {
                    self.inner.metrics.fail_open();
                } else {
                    self.inner.metrics.fail_closed();
                }
                decision
            }
        }
    }

    /// The cached class of limit states for a request, built if needed.
    fn class(
        &self,
        identity: &Identity,
        endpoint: &str,
        server: usize,
        now_secs: u64,
    ) -> Arc<Class> {
        let generation = self.inner.generation.load(Ordering::Acquire);
        let key = ClassKeyRef::of(identity, endpoint);
        let hash = self.inner.cache.class_hash(&key);
        if let Some(class) = self.inner.cache.class(&key, hash, generation) {
            return class;
        }
        let tightening = self.tightening();
        let limits = self
            .applied_limits(identity, endpoint, now_secs)
            .into_iter()
            .map(|applied| {
                let endpoint = match &applied.name {
                    LimitName::Global => None,
                    LimitName::Endpoint(e) => Some(&**e),
                };
                let prefix: Arc<str> = limit_prefix(identity, endpoint).into();
                let ceiling = applied.limit.ceiling(tightening);
                let window = applied.limit.window_seconds;
                let state = self.inner.cache.state(&prefix, || {
                    LimitState::new(
                        prefix.clone(),
                        applied.name.clone(),
                        ceiling,
                        window,
                        server,
                    )
                });
                {
                    // Rules or tightening may have changed since the state
                    // was made.
                    let mut s = state.lock();
                    s.ceiling = ceiling;
                    s.window_seconds = window;
                }
                state
            })
            .collect();
        let class = Arc::new(Class { limits, generation });
        self.inner.cache.put_class(
            ClassKey {
                scope: identity.scope.clone(),
                id: identity.id.clone(),
                tier: identity.tier.clone(),
                endpoint: endpoint.to_string(),
            },
            class.clone(),
        );
        class
    }

    /// The hybrid policy's decision from the local states alone: the deny
    /// cache, then, for a limit whose lease is used up, the last known
    /// remaining budget (lowered by every request allowed here since).
    fn hybrid_decision(&self, class: &Class, cost: u64, now_ms: u64) -> Decision {
        let now_secs = now_ms / 1000;
        let mut states: Vec<_> = class.limits.iter().map(|s| s.lock()).collect();
        let mut denied_wait = 0u64;
        for state in states.iter_mut() {
            state.roll_at(now_secs);
            state.last_used_ms = now_ms;
            if state.denied_until_ms > now_ms {
                denied_wait = denied_wait.max((state.denied_until_ms - now_ms).div_ceil(1000));
            }
        }
        // `remaining` is the last count the server gave, lowered by every
        // request allowed here since.
        let over = states.iter().any(|s| s.lease < cost && s.remaining < cost);
        let allowed = denied_wait == 0 && !over;
        if allowed {
            for state in states.iter_mut() {
                let from_lease = state.lease.min(cost);
                state.lease -= from_lease;
                state.used_since_sync += cost;
                if from_lease < cost {
                    state.remaining = state.remaining.saturating_sub(cost - from_lease);
                }
            }
        }
        let retry_after = if allowed {
            0
        } else if denied_wait > 0 {
            denied_wait
        } else {
            states
                .iter()
                .map(|s| s.reset.saturating_sub(now_secs))
                .max()
                .unwrap_or(1)
                .max(1)
        };
        let mut decision = Decision {
            allowed,
            limits: states.iter().map(|s| status_of(s, allowed)).collect(),
            retry_after,
            deciding: None,
            source: Source::Local,
            now_secs,
        };
        decision.choose_deciding();
        decision
    }

    /// The fast path: every limit has a lease covering `cost` and nobody is
    /// in the deny cache. `None` when the server must be asked.
    fn try_local(&self, class: &Class, cost: u64, now_ms: u64) -> Option<Decision> {
        // Requests have one or two limits: lock them without allocating.
        match &class.limits[..] {
            [a] => Self::local_decision(&mut [a.lock()], cost, now_ms),
            [a, b] => Self::local_decision(&mut [a.lock(), b.lock()], cost, now_ms),
            many => {
                let mut guards: Vec<_> = many.iter().map(|s| s.lock()).collect();
                Self::local_decision(&mut guards, cost, now_ms)
            }
        }
    }

    /// The fast path over locked states: every limit has a lease covering
    /// `cost` and none is in the deny cache. `None` when the server must be
    /// asked.
    fn local_decision(
        states: &mut [parking_lot::MutexGuard<'_, LimitState>],
        cost: u64,
        now_ms: u64,
    ) -> Option<Decision> {
        let now_secs = now_ms / 1000;
        let mut denied_wait = 0;
        let mut short = false;
        for state in states.iter_mut() {
            if state.window_start != window_start(now_secs, state.window_seconds) {
                state.roll_at(now_secs);
            }
            if state.denied_until_ms > now_ms {
                denied_wait = denied_wait.max((state.denied_until_ms - now_ms).div_ceil(1000));
            }
            short |= state.lease < cost;
        }
        let allowed = denied_wait == 0;
        if allowed && short {
            return None;
        }
        if allowed {
            for state in states.iter_mut() {
                state.lease -= cost;
                state.used_since_sync += cost;
                state.last_used_ms = now_ms;
            }
        }
        let mut decision = Decision {
            allowed,
            limits: states.iter().map(|s| status_of(s, allowed)).collect(),
            retry_after: denied_wait,
            deciding: None,
            source: Source::Local,
            now_secs,
        };
        decision.choose_deciding();
        Some(decision)
    }

    /// The cached mode's fast path: the class is cached and its leases
    /// cover the cost (or the deny cache answers). `None` when the class
    /// must be built or the server asked.
    fn cached_fast_path(&self, identity: &Identity, endpoint: &str, cost: u64) -> Option<Decision> {
        let server = self.server_of(identity);
        let now_ms = self.now_ms(server);
        let key = ClassKeyRef::of(identity, endpoint);
        let hash = self.inner.cache.class_hash(&key);
        let generation = self.inner.generation.load(Ordering::Acquire);
        let fast = self
            .inner
            .cache
            .with_class(&key, hash, generation, |class| {
                if class.limits.is_empty() {
                    Some(Decision::unlimited(Source::Local, now_ms / 1000))
                } else {
                    self.try_local(class, cost, now_ms)
                }
            });
        let decision = fast.flatten()?;
        self.inner.metrics.local(decision.allowed);
        Some(decision)
    }

    async fn check_cached(&self, identity: &Identity, endpoint: &str, cost: u64) -> Decision {
        let server = self.server_of(identity);
        let now_ms = self.now_ms(server);
        let class = self.class(identity, endpoint, server, now_ms / 1000);
        if class.limits.is_empty() {
            self.inner.metrics.local(true);
            return Decision::unlimited(Source::Local, now_ms / 1000);
        }
        if let Some(decision) = self.try_local(&class, cost, now_ms) {
            self.inner.metrics.local(decision.allowed);
            return decision;
        }
        // The lease is used up: ask the server now rather than deny.
        match self.acquire(&class, cost, server, now_ms).await {
            Some(decision) => {
                self.inner.metrics.server_check();
                decision
            }
            None => self.unreachable(identity, endpoint, cost, server).await,
        }
    }

    /// The slow path: admit `cost` on the server and top the leases up, in
    /// one lease-script call over the class's limits.
    async fn acquire(
        &self,
        class: &Class,
        cost: u64,
        server: usize,
        now_ms: u64,
    ) -> Option<Decision> {
        let now_secs = now_ms / 1000;
        let requests: Vec<LeaseRequest> = class
            .limits
            .iter()
            .map(|state| {
                let mut s = state.lock();
                s.roll_at(now_secs);
                LeaseRequest {
                    prefix: s.prefix.clone(),
                    window_seconds: s.window_seconds,
                    ceiling: s.ceiling,
                    current: s.window_start,
                    give_back: s.give_back.pop(),
                    want: s.lease_target().saturating_sub(s.lease),
                    cost,
                }
            })
            .collect();
        let invocation = self.lease_invocation(&requests);
        let call = async {
            let mut connection = self.connection(server).await?;
            invocation.invoke_async::<LeaseTuple>(&mut connection).await
        };
        let reply = match self
            .guarded(server, self.inner.config.call_timeout, call)
            .await
        {
            Some(reply) => LeaseReply::from_tuple(reply),
            None => {
                // Not given back this time: keep it queued.
                for (state, request) in class.limits.iter().zip(&requests) {
                    if let Some(back) = request.give_back {
                        state.lock().give_back.push(back);
                    }
                }
                return None;
            }
        };
        self.note_server_time(server, reply.server_ms);
        let mut states: Vec<_> = class.limits.iter().map(|s| s.lock()).collect();
        for (i, state) in states.iter_mut().enumerate() {
            self.apply_lease_reply(state, &requests[i], &reply, i, now_ms);
            if reply.allowed {
                state.used_since_sync += cost;
            }
            state.last_used_ms = now_ms;
        }
        let mut decision = Decision {
            allowed: reply.allowed,
            limits: states.iter().map(|s| status_of(s, reply.allowed)).collect(),
            retry_after: if reply.allowed { 0 } else { reply.retry_after },
            deciding: None,
            source: Source::Server,
            now_secs,
        };
        decision.choose_deciding();
        Some(decision)
    }

    fn lease_invocation(&self, requests: &[LeaseRequest]) -> redis::ScriptInvocation<'_> {
        let mut invocation = self.inner.lease.prepare_invoke();
        for r in requests {
            invocation.key(window_key(&r.prefix, r.current));
            invocation.key(window_key(
                &r.prefix,
                r.current.saturating_sub(r.window_seconds),
            ));
            let back_window = r.give_back.map_or(r.current, |(start, _)| start);
            invocation.key(window_key(&r.prefix, back_window));
        }
        for r in requests {
            invocation
                .arg(r.ceiling)
                .arg(r.window_seconds)
                .arg(r.give_back.map_or(0, |(_, tokens)| tokens))
                .arg(r.want)
                .arg(r.cost);
        }
        invocation
    }

    /// Applies limit `i` of a lease reply to its state.
    fn apply_lease_reply(
        &self,
        state: &mut LimitState,
        request: &LeaseRequest,
        reply: &LeaseReply,
        i: usize,
        now_ms: u64,
    ) {
        let granted = reply.granted.get(i).copied().unwrap_or(0);
        if state.window_start == request.current {
            state.lease += granted;
            state.remaining = reply.remaining.get(i).copied().unwrap_or(0);
            state.reset = reply.resets.get(i).copied().unwrap_or(state.reset);
        } else if granted > 0 {
            // The window rolled while the call was in flight: the grant was
            // reserved on the old window's key.
            state.give_back.push((request.current, granted));
        }
        if !reply.allowed {
            let exceeded = reply.remaining.get(i).copied().unwrap_or(0) < request.cost.max(1);
            if exceeded {
                // Not the window's end: a sliding window frees budget as the
                // previous window's weight falls.
                state.denied_until_ms = now_ms + reply.free_in_ms.max(1);
            }
        }
    }

    /// Server `index`'s connection, connecting if there is none.
    async fn connection(&self, index: usize) -> redis::RedisResult<MultiplexedConnection> {
        let server = &self.inner.servers[index];
        if let Some(connection) = server.connection.lock().clone() {
            return Ok(connection);
        }
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_millis(500)))
            .set_response_timeout(None);
        let connection = server
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        *server.connection.lock() = Some(connection.clone());
        Ok(connection)
    }

    fn note_server_time(&self, server: usize, server_ms: u64) {
        if server_ms > 0 {
            let local = self.inner.clock.now_ms() as i64;
            self.inner.servers[server]
                .offset_ms
                .store(server_ms as i64 - local, Ordering::Relaxed);
        }
    }

    /// One sync round: for every server, one round trip that gives back
    /// unused leases of ended windows and evicted states and tops up the
    /// leases of every active limit. The background worker calls this every
    /// `sync_interval`; simulations call it on their own clock.
    pub async fn sync_now(&self) {
        let states = self.inner.cache.all_states();
        let orphans = self.inner.cache.take_orphans();
        for server in 0..self.inner.servers.len() {
            let now_ms = self.now_ms(server);
            let now_secs = now_ms / 1000;
            let mut batch: Vec<(Option<SharedState>, LeaseRequest)> = Vec::new();
            for shared in &states {
                let mut s = shared.lock();
                if s.server != server {
                    continue;
                }
                s.roll_at(now_secs);
                // Smoothed use per interval sizes the next lease.
                s.rate = 0.5 * s.rate + 0.5 * s.used_since_sync as f64;
                s.used_since_sync = 0;
                let idle = now_ms.saturating_sub(s.last_used_ms) > s.window_seconds * 1000;
                let want = if idle || s.denied_until_ms > now_ms {
                    0
                } else {
                    s.lease_target().saturating_sub(s.lease)
                };
                let give_back = s.give_back.pop();
                if want == 0 && give_back.is_none() {
                    continue;
                }
                batch.push((
                    Some(shared.clone()),
                    LeaseRequest {
                        prefix: s.prefix.clone(),
                        window_seconds: s.window_seconds,
                        ceiling: s.ceiling,
                        current: s.window_start,
                        give_back,
                        want,
                        cost: 0,
                    },
                ));
            }
            for orphan in orphans.iter().filter(|o| o.server == server) {
                batch.push((
                    None,
                    LeaseRequest {
                        prefix: orphan.prefix.clone(),
                        window_seconds: orphan.window_seconds,
                        ceiling: orphan.ceiling,
                        current: window_start(now_secs, orphan.window_seconds),
                        give_back: Some((orphan.window_start, orphan.tokens)),
                        want: 0,
                        cost: 0,
                    },
                ));
            }
            if batch.is_empty() {
                continue;
            }
            let mut pipe = redis::pipe();
            let invocations: Vec<_> = batch
                .iter()
                .map(|(_, request)| self.lease_invocation(std::slice::from_ref(request)))
                .collect();
            for invocation in &invocations {
                pipe.invoke_script(invocation);
            }
            let started = Instant::now();
            let lease = &self.inner.lease;
            let call = async {
                let mut connection = self.connection(server).await?;
                match pipe.query_async::<Vec<LeaseTuple>>(&mut connection).await {
                    Err(e)
                        if e.kind()
                            == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                    {
                        lease.prepare_invoke().load_async(&mut connection).await?;
                        pipe.query_async::<Vec<LeaseTuple>>(&mut connection).await
                    }
                    other => other,
                }
            };
            let Some(replies) = self
                .guarded(server, self.inner.config.sync_timeout, call)
                .await
            else {
                self.inner.metrics.sync_failure();
                // Give-backs stay queued for the next round.
                for (state, request) in &batch {
                    if let (Some(state), Some(back)) = (state, request.give_back) {
                        state.lock().give_back.push(back);
                    }
                }
                continue;
            };
            self.inner
                .metrics
                .sync(started.elapsed().as_micros() as u64);
            let now_ms = self.now_ms(server);
            for ((state, request), reply) in batch.iter().zip(replies) {
                let reply = LeaseReply::from_tuple(reply);
                self.note_server_time(server, reply.server_ms);
                if let Some(state) = state {
                    let mut s = state.lock();
                    self.apply_lease_reply(&mut s, request, &reply, 0, now_ms);
                }
            }
        }
    }

    async fn calibrate_clocks(&self) {
        for server in 0..self.inner.servers.len() {
            let call = async {
                let mut connection = self.connection(server).await?;
                redis::cmd("TIME")
                    .query_async::<(u64, u64)>(&mut connection)
                    .await
            };
            let timeout = self
                .inner
                .config
                .sync_timeout
                .max(Duration::from_millis(500));
            if let Ok(Ok((secs, micros))) = tokio::time::timeout(timeout, call).await {
                self.note_server_time(server, secs * 1000 + micros / 1000);
            }
        }
    }

    async fn reload_rules(&self, key: &str) -> Result<bool, Error> {
        let mut connection = self.connection(0).await?;
        let document: Option<Vec<u8>> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut connection)
            .await?;
        let Some(document) = document else {
            return Ok(false);
        };
        let rules = RuleSet::from_json(&document).map_err(Error::Rules)?;
        Ok(self.install_rules(rules))
    }

    fn spawn_rules_listener(&self, key: String, channel: String) {
        let weak = Arc::downgrade(&self.inner);
        let client = self.inner.servers[0].client.clone();
        tokio::spawn(async move {
            loop {
                let Ok(mut pubsub) = client.get_async_pubsub().await else {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    if weak.strong_count() == 0 {
                        return;
                    }
                    continue;
                };
                if pubsub.subscribe(&channel).await.is_err() {
                    continue;
                }
                // Reload once after (re)subscribing: an update sent while we
                // were not listening is not lost.
                if let Some(inner) = weak.upgrade() {
                    let _ = Limiter { inner }.reload_rules(&key).await;
                }
                let mut messages = pubsub.on_message();
                loop {
                    // Wake up now and then to notice the limiter is gone.
                    let message = tokio::select! {
                        message = messages.next() => message,
                        _ = tokio::time::sleep(Duration::from_millis(500)) => {
                            if weak.strong_count() == 0 {
                                return;
                            }
                            continue;
                        }
                    };
                    if message.is_none() {
                        break;
                    }
                    let Some(inner) = weak.upgrade() else {
                        return;
                    };
                    if let Err(error) = (Limiter { inner }).reload_rules(&key).await {
                        tracing::warn!(%error, "rules update not applied");
                    }
                }
                if weak.strong_count() == 0 {
                    return;
                }
            }
        });
    }

    fn spawn_maintenance(&self) {
        let weak = Arc::downgrade(&self.inner);
        // Exact mode only recalibrates the clock; it still ticks every
        // 500 ms so the task ends soon after the limiter is dropped.
        let interval = match self.inner.config.mode {
            Mode::Cached { sync_interval } => sync_interval,
            Mode::Exact => Duration::from_millis(500),
        };
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut last_calibration = Instant::now();
            loop {
                ticker.tick().await;
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                let limiter = Limiter { inner };
                if matches!(limiter.inner.config.mode, Mode::Cached { .. }) {
                    limiter.sync_now().await;
                }
                if last_calibration.elapsed() >= Duration::from_secs(10) {
                    limiter.calibrate_clocks().await;
                    last_calibration = Instant::now();
                }
            }
        });
    }
}

fn status_of(state: &LimitState, allowed: bool) -> LimitStatus {
    LimitStatus {
        name: state.name.clone(),
        limit: state.ceiling,
        remaining: if allowed {
            (state.remaining + state.lease).min(state.ceiling)
        } else {
            0
        },
        reset: state.reset,
        window_seconds: state.window_seconds,
    }
}
