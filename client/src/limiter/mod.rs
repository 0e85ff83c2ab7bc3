//! The [`Limiter`]: rules, the two modes, the breakers and the sync worker.
//!
//! - `config`: settings, policies, errors, the clock;
//! - this file: the builder, the shared state, routing a call to the node
//!   that serves a slot (MOVED, ASK and TRYAGAIN followed behind each
//!   node's breaker) and the failure policy;
//! - `exact`: one multi-limit script call per check;
//! - `cached`: decisions from leases, the hybrid policy's local view;
//! - `lease`: the lease script's protocol and the sync round;
//! - `background`: clock calibration, slot-map refresh, rules reload.

mod background;
mod cached;
mod config;
mod exact;
mod lease;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use redis::aio::MultiplexedConnection;
use redis::{FromRedisValue, ScriptInvocation};

pub use config::{Clock, Error, FailurePolicy, LimiterConfig, Mode, RuleSource, SystemClock};
pub use lease::LEASE_SCRIPT;

use crate::breaker::BreakerState;
use crate::cache::{Cache, LimitState};
use crate::decision::{Decision, LimitStatus, Source};
use crate::keys::{limit_prefix, Identity};
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::rules::{AppliedLimit, RuleSet, RuleState, TierPlan};
use crate::topology::{key_slot, Kind, Node, Topology};

/// Redirections followed for one call (a slot mid-migration takes two: a
/// stale MOVED, then ASK).
const MAX_REDIRECTS: usize = 3;
/// Pause between tries of a call answered TRYAGAIN (its keys split by a
/// migration in progress).
const TRYAGAIN_PAUSE: Duration = Duration::from_millis(5);

/// The multi-limit script as shipped by tally-lua (tally runs it natively).
fn multi_limit_source() -> &'static str {
    tally_lua::SCRIPTS
        .iter()
        .find(|s| s.twin == tally_lua::Twin::MultiLimit)
        .map(|s| s.source)
        .expect("tally-lua ships multi_limit.lua")
}

struct Inner {
    topology: Topology,
    rules: RwLock<RuleState>,
    /// Bumped on every rules change and tightening change: cached entries
    /// built before are rebuilt.
    generation: AtomicU64,
    /// The back-pressure factor as f64 bits (1.0 = no tightening).
    tightening: AtomicU64,
    config: LimiterConfig,
    clock: Arc<dyn Clock>,
    cache: Cache,
    /// The tiers' plans for the rules generation they were built in.
    plans: parking_lot::Mutex<(u64, HashMap<String, Arc<TierPlan>>)>,
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

    /// Finds out what the URLs are (one server, or seeds of a cluster whose
    /// slot map it fetches), calibrates the clock and loads the rules.
    /// Connections are lazy: a node that is down now is retried later,
    /// behind its breaker.
    pub async fn build(self) -> Result<Limiter, Error> {
        if self.urls.is_empty() {
            return Err(Error::Config("at least one server URL is needed".into()));
        }
        if let Mode::Cached { sync_interval } = self.config.mode {
            if sync_interval.is_zero() {
                return Err(Error::Config("sync_interval must be positive".into()));
            }
        }
        #[cfg(feature = "tls")]
        if self.urls.iter().any(|u| u.starts_with("rediss://")) {
            // rustls needs a process-wide provider; ring's, unless the
            // program installed one.
            let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
        }
        let topology = Topology::new(
            &self.urls,
            self.config.breaker,
            #[cfg(feature = "tls")]
            self.tls,
        )?;
        let initial = match &self.rules {
            RuleSource::Static(rules) => rules.clone(),
            RuleSource::Server { .. } => RuleSet::default(),
        };
        let limiter = Limiter {
            inner: Arc::new(Inner {
                topology,
                rules: RwLock::new(RuleState::new(initial)),
                generation: AtomicU64::new(1),
                tightening: AtomicU64::new(1.0f64.to_bits()),
                cache: Cache::new(self.config.cache_capacity),
                plans: Default::default(),
                config: self.config,
                clock: self.clock,
                metrics: Metrics::default(),
                multi_limit: redis::Script::new(multi_limit_source()),
                lease: redis::Script::new(LEASE_SCRIPT),
            }),
        };
        match limiter.refresh_topology().await {
            Ok(Kind::Standalone) if self.urls.len() > 1 => {
                return Err(Error::Config(format!(
                    "{} URLs were given as seeds of one Redis Cluster, but {} has cluster \
                     support disabled: give a standalone server's URL alone",
                    self.urls.len(),
                    limiter.inner.topology.node(0).address
                )));
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "no seed answered yet; retrying in the background")
            }
        }
        limiter.calibrate_clock().await;
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

/// How a call to one node ended.
enum Outcome<T> {
    /// It answered.
    Done(T),
    /// `-MOVED <slot> <address>`: the slot is served elsewhere now.
    Moved(u16, String),
    /// `-ASK <slot> <address>`: this call's keys are being migrated there.
    Ask(String),
    /// `-TRYAGAIN`: the call's keys are split by a migration in progress.
    TryAgain,
    /// Refused by an open breaker, timed out, or failed.
    Failed,
}

impl Limiter {
    /// Starts building a limiter. `urls` (`redis://host:port`,
    /// `rediss://...`) are one standalone server, or seed nodes of one
    /// Redis Cluster: the limiter learns the other nodes and which serves
    /// each slot, and sends every identity's checks to its slot's node.
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
        self.inner.metrics.snapshot(self.inner.cache.decided())
    }

    /// Limit states held (the cached mode's leases and deny cache, and in
    /// either mode the last known budgets the hybrid policy decides from):
    /// what the node's memory for identities grows with, up to
    /// `cache_capacity`.
    pub fn tracked_limits(&self) -> usize {
        self.inner.cache.len()
    }

    /// The breaker state of node `index`: the seeds in the order given,
    /// then the nodes learnt from the cluster (see [`Limiter::nodes`]).
    pub fn breaker_state(&self, index: usize) -> BreakerState {
        self.inner.topology.node(index).breaker.state()
    }

    /// The nodes known, as `host:port`, in breaker-index order.
    pub fn nodes(&self) -> Vec<String> {
        (0..self.inner.topology.len())
            .map(|i| self.inner.topology.node(i).address.clone())
            .collect()
    }

    /// The node (index into [`Limiter::nodes`]) that `identity`'s counters
    /// live on, as far as this limiter knows.
    pub fn node_of(&self, identity: &Identity) -> usize {
        self.inner
            .topology
            .node_for_slot(key_slot(&limit_prefix(identity, None)))
    }

    /// The installed rules.
    pub fn rules(&self) -> RuleSet {
        self.inner.rules.read().current().clone()
    }

    /// Installs new rules (as a rules-channel message does); false when this
    /// version is installed already.
    pub fn install_rules(&self, rules: RuleSet) -> bool {
        let now_secs = self.now_ms() / 1000;
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

    /// The servers' time, in ms, by the local clock and the last offset.
    fn now_ms(&self) -> u64 {
        let local = self.inner.clock.now_ms() as i64;
        (local + self.inner.topology.offset_ms()).max(0) as u64
    }

    /// Keeps the server's clock offset from a reply that carries its time
    /// (0: one that does not, as INCREX's and CL.THROTTLE's).
    fn note_server_time(&self, server_ms: u64) {
        if server_ms == 0 {
            return;
        }
        self.inner
            .topology
            .note_server_time(server_ms, self.inner.clock.now_ms());
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
        // One counter per decision: local ones are counted by the cache.
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

    /// Runs a call on one node behind its breaker and the timeout. A
    /// redirect is an answer (the node is up): it is returned for the
    /// caller to follow.
    async fn guarded<T>(
        &self,
        node: &Node,
        timeout: Duration,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> Outcome<T> {
        let breaker = &node.breaker;
        let Some(permit) = breaker.permit(self.inner.clock.now_ms()) else {
            return Outcome::Failed;
        };
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(value)) => {
                breaker.success(permit);
                return Outcome::Done(value);
            }
            Ok(Err(error)) => {
                let redirect = redirect_of(&error);
                if !matches!(redirect, Outcome::Failed) {
                    breaker.success(permit);
                    return redirect;
                }
                tracing::debug!(%error, node = node.address, "rate-limit server call failed");
            }
            Err(_) => tracing::debug!(node = node.address, "rate-limit server call timed out"),
        }
        // A connection that failed or timed out may be stuck: start afresh.
        node.drop_connection();
        // Its slots may have moved (a failover, a replaced node).
        self.inner.topology.mark_stale();
        if breaker.failure(permit, self.inner.clock.now_ms()) {
            self.inner.metrics.breaker_opened();
            tracing::warn!(node = node.address, "circuit breaker opened");
        }
        Outcome::Failed
    }

    /// Runs `call` on the node that serves `slot`, following MOVED and ASK
    /// (`call` is told to send ASKING first) a few hops, and retrying
    /// TRYAGAIN until `timeout` has passed. `None` when the node could not
    /// be asked (the failure policy decides).
    async fn on_slot<T, F>(
        &self,
        slot: u16,
        timeout: Duration,
        call: impl Fn(MultiplexedConnection, bool) -> F,
    ) -> Option<T>
    where
        F: Future<Output = redis::RedisResult<T>>,
    {
        let topology = &self.inner.topology;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut index = topology.node_for_slot(slot);
        let mut asking = false;
        let mut redirects = 0;
        loop {
            let node = topology.node(index);
            let attempt = async {
                let connection = node.connection().await?;
                call(connection, asking).await
            };
            match self.guarded(&node, timeout, attempt).await {
                Outcome::Done(value) => return Some(value),
                Outcome::Failed => return None,
                Outcome::Moved(slot, address) => {
                    index = topology.moved(slot, &address);
                    asking = false;
                    redirects += 1;
                }
                Outcome::Ask(address) => {
                    index = topology.node_at(&address);
                    asking = true;
                    redirects += 1;
                }
                // Redis Cluster answers TRYAGAIN to a multi-key call while
                // a migration has moved some of its keys (a limiter's
                // previous-window key that never existed is enough): it
                // passes when the slot is handed over.
                Outcome::TryAgain => {
                    if tokio::time::Instant::now() + TRYAGAIN_PAUSE >= deadline {
                        return None;
                    }
                    tokio::time::sleep(TRYAGAIN_PAUSE).await;
                }
            }
            if redirects > MAX_REDIRECTS {
                tracing::warn!(slot, "too many redirections");
                return None;
            }
        }
    }

    /// Runs a script on the node serving `slot` (its keys' slot).
    async fn run_script<T: FromRedisValue>(
        &self,
        slot: u16,
        timeout: Duration,
        invocation: &ScriptInvocation<'_>,
    ) -> Option<T> {
        self.on_slot(slot, timeout, |mut connection, asking| async move {
            if asking {
                invoke_asking(&mut connection, invocation).await
            } else {
                invocation.invoke_async(&mut connection).await
            }
        })
        .await
    }

    /// Runs `script` (when given) and then `commands` in one pipeline on
    /// the node serving `slot`, loading the script when the node lacks it;
    /// their replies in order.
    async fn run_pipeline(
        &self,
        slot: u16,
        timeout: Duration,
        script: Option<&ScriptInvocation<'_>>,
        commands: &redis::Pipeline,
    ) -> Option<Vec<redis::Value>> {
        self.on_slot(slot, timeout, |mut connection, asking| async move {
            let mut pipe = redis::pipe();
            if asking {
                pipe.cmd("ASKING").ignore();
            }
            if let Some(script) = script {
                pipe.invoke_script(script);
            }
            for command in commands.cmd_iter() {
                pipe.add_command(command.clone());
            }
            match pipe.query_async::<Vec<redis::Value>>(&mut connection).await {
                Err(e)
                    if script.is_some()
                        && e.kind()
                            == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    if let Some(script) = script {
                        script.load_async(&mut connection).await?;
                    }
                    pipe.query_async(&mut connection).await
                }
                other => other,
            }
        })
        .await
    }

    /// The decision when the server could not be asked.
    async fn unreachable(&self, identity: &Identity, endpoint: &str, cost: u64) -> Decision {
        let now_ms = self.now_ms();
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
                let mut decision = self.hybrid_decision(identity, endpoint, cost, now_ms);
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
}

/// A CL.THROTTLE reply, `[limited, limit, remaining, retry_after,
/// reset_after]`, as exact checks and GCRA leases both read it.
pub(super) struct Throttled {
    pub(super) allowed: bool,
    /// The burst and the request itself.
    pub(super) limit: u64,
    pub(super) remaining: u64,
    /// Seconds until a retry can pass; 0 when allowed. CL.THROTTLE says -1
    /// for a request larger than the limit ever allows: a window is the
    /// wait advised then.
    pub(super) retry_after: u64,
    /// Seconds until the limit is full again.
    pub(super) reset_after: u64,
}

impl Throttled {
    /// Reads `reply` for a limit of `window_seconds`; `None` for another shape.
    pub(super) fn read(reply: &redis::Value, window_seconds: u64) -> Option<Throttled> {
        let (limited, limit, remaining, retry_after, reset_after): (i64, i64, i64, i64, i64) =
            redis::from_redis_value_ref(reply).ok()?;
        let allowed = limited == 0;
        let positive = |n: i64| n.max(0) as u64;
        Some(Throttled {
            allowed,
            limit: positive(limit),
            remaining: positive(remaining),
            retry_after: match retry_after {
                _ if allowed => 0,
                n if n < 0 => window_seconds,
                n => n as u64,
            },
            reset_after: positive(reset_after),
        })
    }
}

/// The redirect an error is, or `Failed`.
fn redirect_of<T>(error: &redis::RedisError) -> Outcome<T> {
    use redis::{ErrorKind, ServerErrorKind};
    match error.kind() {
        ErrorKind::Server(ServerErrorKind::Moved) => match error.redirect_node() {
            Some((address, slot)) => Outcome::Moved(slot, address.to_string()),
            None => Outcome::Failed,
        },
        ErrorKind::Server(ServerErrorKind::Ask) => match error.redirect_node() {
            Some((address, _)) => Outcome::Ask(address.to_string()),
            None => Outcome::Failed,
        },
        ErrorKind::Server(ServerErrorKind::TryAgain) => Outcome::TryAgain,
        _ => Outcome::Failed,
    }
}

/// A script call after ASKING, in one round trip (the node importing a slot
/// serves its keys only to a connection that says ASKING just before).
async fn invoke_asking<T: FromRedisValue>(
    connection: &mut MultiplexedConnection,
    invocation: &ScriptInvocation<'_>,
) -> redis::RedisResult<T> {
    let mut pipe = redis::pipe();
    pipe.cmd("ASKING").ignore().invoke_script(invocation);
    match pipe.query_async::<(T,)>(connection).await {
        Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
            invocation.load_async(connection).await?;
            pipe.query_async::<(T,)>(connection).await.map(|(t,)| t)
        }
        other => other.map(|(t,)| t),
    }
}

#[inline]
fn status_of(state: &LimitState, allowed: bool) -> LimitStatus {
    LimitStatus {
        name: state.name.clone(),
        limit: state.reported_limit(),
        remaining: if allowed {
            (state.remaining + state.lease).min(state.ceiling)
        } else {
            0
        },
        reset: state.reset(),
        window_seconds: state.window_seconds(),
    }
}
