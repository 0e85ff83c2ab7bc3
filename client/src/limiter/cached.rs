//! Cached mode: decisions from leases reserved on the server (the fast
//! path), the slow path that admits on the server and tops leases up, and
//! the hybrid policy's decision from local state alone.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::lease::{LeaseReply, LeaseRequest, LeaseTuple};
use super::{status_of, Limiter};
use crate::cache::{Class, ClassKey, ClassKeyRef, LimitState};
use crate::decision::{Decision, Source};
use crate::keys::{limit_prefix, Identity};
use crate::rules::LimitName;
use crate::topology::key_slot;

impl Limiter {
    /// The cached class of limit states for a request, built if needed.
    pub(super) fn class(&self, identity: &Identity, endpoint: &str, now_secs: u64) -> Arc<Class> {
        let generation = self.inner.generation.load(Ordering::Acquire);
        let key = ClassKeyRef::of(identity, endpoint);
        let hash = self.inner.cache.class_hash(&key);
        if let Some(class) = self.inner.cache.class(&key, hash, generation) {
            return class;
        }
        let tightening = self.tightening();
        // Every key of one identity hashes to one slot ({scope:id}).
        let slot = key_slot(&limit_prefix(identity, None));
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
                    LimitState::new(prefix.clone(), applied.name.clone(), ceiling, window, slot)
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
            .collect::<Vec<_>>()
            .into_boxed_slice();
        let class = Arc::new(Class {
            key: ClassKey::new(&key),
            limits,
            generation,
            slot,
        });
        self.inner.cache.put_class(class.clone());
        class
    }

    /// The hybrid policy's decision from the local states alone: the deny
    /// cache, then, for a limit whose lease is used up, the last known
    /// remaining budget (lowered by every request allowed here since).
    pub(super) fn hybrid_decision(&self, class: &Class, cost: u64, now_ms: u64) -> Decision {
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
            for (shared, state) in class.limits.iter().zip(states.iter_mut()) {
                let from_lease = state.lease.min(cost);
                state.lease -= from_lease;
                state.note_use(cost);
                if from_lease < cost {
                    state.remaining = state.remaining.saturating_sub(cost - from_lease);
                }
                self.inner.cache.mark_active(shared, state);
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
        let mut unmarked = false;
        match &class.limits[..] {
            [a] => {
                let mut states = [a.lock()];
                let decision = Self::local_decision(&mut states, cost, now_ms, &mut unmarked);
                if unmarked {
                    self.mark_active(&class.limits, &mut states);
                }
                decision
            }
            [a, b] => {
                let mut states = [a.lock(), b.lock()];
                let decision = Self::local_decision(&mut states, cost, now_ms, &mut unmarked);
                if unmarked {
                    self.mark_active(&class.limits, &mut states);
                }
                decision
            }
            many => {
                let mut states: Vec<_> = many.iter().map(|s| s.lock()).collect();
                let decision = Self::local_decision(&mut states, cost, now_ms, &mut unmarked);
                if unmarked {
                    self.mark_active(&class.limits, &mut states);
                }
                decision
            }
        }
    }

    /// Puts used states on the active list for the next sync (the first
    /// use after a sync; the fast path only tests a flag).
    #[cold]
    fn mark_active(
        &self,
        shared: &[crate::cache::SharedState],
        states: &mut [parking_lot::MutexGuard<'_, LimitState>],
    ) {
        for (shared, state) in shared.iter().zip(states.iter_mut()) {
            self.inner.cache.mark_active(shared, state);
        }
    }

    /// The fast path over locked states: every limit has a lease covering
    /// `cost` and none is in the deny cache. `None` when the server must be
    /// asked.
    /// `unmarked` is set when a state it used is not on the active list yet.
    fn local_decision(
        states: &mut [parking_lot::MutexGuard<'_, LimitState>],
        cost: u64,
        now_ms: u64,
        unmarked: &mut bool,
    ) -> Option<Decision> {
        let now_secs = now_ms / 1000;
        let mut denied_wait = 0;
        let mut short = false;
        for state in states.iter_mut() {
            // Still in the state's window: two compares, not a division.
            let in_window = now_secs >= state.window_start
                && now_secs < state.window_start + state.window_seconds;
            if !in_window {
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
        for state in states.iter_mut() {
            state.note_asked(cost);
        }
        if allowed {
            for state in states.iter_mut() {
                state.lease -= cost;
                state.note_use(cost);
                state.last_used_ms = now_ms;
                *unmarked |= !state.active;
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
    pub(super) fn cached_fast_path(
        &self,
        identity: &Identity,
        endpoint: &str,
        cost: u64,
    ) -> Option<Decision> {
        let now_ms = self.now_ms();
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

    pub(super) async fn check_cached(
        &self,
        identity: &Identity,
        endpoint: &str,
        cost: u64,
    ) -> Decision {
        let now_ms = self.now_ms();
        let class = self.class(identity, endpoint, now_ms / 1000);
        if class.limits.is_empty() {
            self.inner.metrics.local(true);
            return Decision::unlimited(Source::Local, now_ms / 1000);
        }
        if let Some(decision) = self.try_local(&class, cost, now_ms) {
            self.inner.metrics.local(decision.allowed);
            return decision;
        }
        // The lease is used up: ask the server now rather than deny.
        match self.acquire(&class, cost, now_ms).await {
            Some(decision) => {
                self.inner.metrics.server_check();
                decision
            }
            None => self.unreachable(identity, endpoint, cost).await,
        }
    }

    /// The slow path: admit `cost` on the server and top the leases up, in
    /// one lease-script call over the class's limits.
    async fn acquire(&self, class: &Class, cost: u64, now_ms: u64) -> Option<Decision> {
        let now_secs = now_ms / 1000;
        let requests: Vec<LeaseRequest> = class
            .limits
            .iter()
            .map(|state| {
                let mut s = state.lock();
                s.roll_at(now_secs);
                let want = s.wanted_on_ask(self.sync_interval_ms(), now_ms);
                s.note_ask(now_ms);
                LeaseRequest {
                    prefix: s.prefix.clone(),
                    window_seconds: s.window_seconds,
                    ceiling: s.ceiling,
                    current: s.window_start,
                    give_back: s.give_back.pop(),
                    want,
                    cost,
                }
            })
            .collect();
        let invocation = self.lease_invocation(&requests);
        let reply = self
            .run_script::<LeaseTuple>(class.slot, self.inner.config.call_timeout, &invocation)
            .await;
        let Some(reply) = reply.map(LeaseReply::from_tuple) else {
            // Not given back this time: keep it queued.
            for (state, request) in class.limits.iter().zip(&requests) {
                if let Some(back) = request.give_back {
                    state.lock().give_back.push(back);
                }
            }
            return None;
        };
        self.note_server_time(reply.server_ms);
        let mut states: Vec<_> = class.limits.iter().map(|s| s.lock()).collect();
        for (i, state) in states.iter_mut().enumerate() {
            self.apply_lease_reply(state, &requests[i], &reply, i, now_ms);
            if reply.allowed {
                state.note_use(cost);
            }
            state.last_used_ms = now_ms;
            if reply.allowed || state.lease > 0 || !state.give_back.is_empty() {
                self.inner.cache.mark_active(&class.limits[i], state);
            }
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
}
