//! Cached mode: decisions from leases reserved on the server (the fast
//! path), the slow path that admits on the server and tops leases up, and
//! the hybrid policy's decision from local state alone.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::lease::{LeaseReply, LeaseRequest, LeaseTuple, Target};
use super::{status_of, Limiter};
use crate::cache::{Activity, Counting, Entry, EntryKeyRef, LimitState, Orphan, Picked};
use crate::decision::{Decision, LimitStatus, Source};
use crate::keys::{limit_prefix, Identity};
use crate::rules::{LimitName, TierPlan};
use crate::topology::key_slot;

/// What the slow path found under the entry's lock.
enum Prepared {
    /// Decided locally after all (a window rolled, the rules changed).
    Decided(Decision),
    /// The server must be asked: these lease calls, for this entry.
    Ask(Vec<LeaseRequest>, Target),
}

impl Limiter {
    /// The plan of `tier` for the current rules (built once per tier and
    /// rules generation, then shared by the tier's entries).
    fn tier_plan(&self, tier: &str, generation: u64) -> Arc<TierPlan> {
        let mut plans = self.inner.plans.lock();
        if plans.0 != generation {
            *plans = (generation, Default::default());
        }
        if let Some(plan) = plans.1.get(tier) {
            return plan.clone();
        }
        let plan = Arc::new(self.inner.rules.read().tier_plan(tier));
        plans.1.insert(tier.into(), plan.clone());
        plan
    }

    /// The slow path's access to `identity`'s entry: made when absent, its
    /// plan and ceilings resolved again when the rules changed or a window
    /// rolled, a state made for each limit of `endpoint`, those states
    /// rolled to `now_ms`. `f` runs on it, under its shard's lock, with the
    /// states the request uses.
    pub(super) fn with_ready_entry<R>(
        &self,
        identity: &Identity,
        endpoint: &str,
        now_ms: u64,
        f: impl FnOnce(&mut Entry, Picked, &mut Activity<'_>, u64) -> R,
    ) -> R {
        let key = EntryKeyRef::of(identity);
        let hash = self.inner.cache.hash(&key);
        // Every key of one identity hashes to one slot ({scope:id}).
        let slot = key_slot(&limit_prefix(identity, None));
        self.inner
            .cache
            .with_entry_or_insert(&key, hash, slot, |entry, activity| {
                let picked = self.make_ready(entry, endpoint, now_ms / 1000);
                f(entry, picked, activity, hash)
            })
    }

    /// See [`Limiter::with_ready_entry`].
    fn make_ready(&self, entry: &mut Entry, endpoint: &str, now_secs: u64) -> Picked {
        let generation = self.inner.generation.load(Ordering::Acquire);
        let stale = !entry.is_current(generation);
        if stale {
            entry.plan = self.tier_plan(entry.key().tier, generation);
        }
        let rules = self.inner.rules.read();
        let tightening = self.tightening();
        let tier = entry.key().tier.to_owned();
        // The state of a limit the rules have now, resolved at `now_secs`:
        // a limit an update changed keeps its old value until the window
        // it arrived in ends (`RuleState::limit`).
        let resolve = |state: &mut LimitState| -> bool {
            let Some(limit) = rules.limit(&tier, &state.name, now_secs) else {
                return false;
            };
            state.ceiling = limit.ceiling(tightening);
            state.set_window_seconds(limit.window_seconds);
            state.counting = limit.algorithm.into();
            true
        };
        if stale {
            // Limits the rules no longer have go, their tokens given back.
            let gone = entry.remove_unless(|s| {
                let mut probe = LimitState::new(s.name.clone(), s.key_hash, 1, 1);
                resolve(&mut probe)
            });
            self.inner.cache.orphan(gone);
            for state in entry.limits.iter_mut() {
                resolve(state);
            }
            let mut global = LimitState::new(LimitName::Global, [0; 6], 1, 1);
            if entry.find(&LimitName::Global).is_none() && resolve(&mut global) {
                entry.add(global);
            }
            entry.set_generation(generation);
        }
        if entry.pick(endpoint).is_none() {
            if let Some(planned) = entry.plan.endpoints.get(endpoint) {
                let mut state = LimitState::new(planned.name.clone(), planned.key_hash, 1, 1);
                if resolve(&mut state) {
                    entry.add(state);
                }
            }
        }
        // A plan newer than the rules read (an update in between) may name
        // a limit not made: the request goes without it this once.
        let picked = entry.pick(endpoint).unwrap_or_default();
        for i in picked.indices() {
            let state = &mut entry.limits[i];
            if !state.in_window(now_secs) {
                // Resolved again in each new window.
                resolve(state);
                state.roll_at(now_secs);
            }
        }
        picked
    }

    /// The hybrid policy's decision from the local states alone: the deny
    /// cache, then, for a limit whose lease is used up, the last known
    /// remaining budget (lowered by every request allowed here since).
    pub(super) fn hybrid_decision(
        &self,
        identity: &Identity,
        endpoint: &str,
        cost: u64,
        now_ms: u64,
    ) -> Decision {
        let now_secs = now_ms / 1000;
        self.with_ready_entry(identity, endpoint, now_ms, |entry, picked, activity, _| {
            let mut denied_wait = 0u64;
            let mut over = false;
            for i in picked.indices() {
                let state = &entry.limits[i];
                if state.denied_until_ms > now_ms {
                    denied_wait = denied_wait.max((state.denied_until_ms - now_ms).div_ceil(1000));
                }
                // `remaining` is the last count the server gave, lowered
                // by every request allowed here since.
                over |= state.lease < cost && state.remaining < cost;
            }
            entry.touch(now_ms);
            let allowed = denied_wait == 0 && !over;
            if allowed {
                for i in picked.indices() {
                    let state = &mut entry.limits[i];
                    let from_lease = state.lease.min(cost);
                    state.lease -= from_lease;
                    state.note_use(cost);
                    if from_lease < cost {
                        state.remaining = state.remaining.saturating_sub(cost - from_lease);
                    }
                }
                activity.mark(entry);
            }
            let retry_after = if allowed {
                0
            } else if denied_wait > 0 {
                denied_wait
            } else {
                picked
                    .indices()
                    .map(|i| entry.limits[i].reset().saturating_sub(now_secs))
                    .max()
                    .unwrap_or(1)
                    .max(1)
            };
            decided(entry, picked, allowed, retry_after, Source::Local, now_secs)
        })
    }

    /// The cached mode's fast path: the identity is cached, its rules and
    /// windows current, and its leases cover the cost (or the deny cache
    /// answers). `None` when the slow path must run.
    pub(super) fn cached_fast_path(
        &self,
        identity: &Identity,
        endpoint: &str,
        cost: u64,
    ) -> Option<Decision> {
        let now_ms = self.now_ms();
        let key = EntryKeyRef::of(identity);
        let hash = self.inner.cache.hash(&key);
        let generation = self.inner.generation.load(Ordering::Acquire);
        let decision = self
            .inner
            .cache
            .with_entry(&key, hash, |entry, activity| {
                if !entry.is_current(generation) {
                    return None;
                }
                let picked = entry.pick(endpoint)?;
                local_decision(entry, picked, cost, now_ms, activity)
            })
            .flatten()?;
        Some(decision)
    }

    pub(super) async fn check_cached(
        &self,
        identity: &Identity,
        endpoint: &str,
        cost: u64,
    ) -> Decision {
        let now_ms = self.now_ms();
        let interval_ms = self.sync_interval_ms();
        let prepared = self.with_ready_entry(
            identity,
            endpoint,
            now_ms,
            |entry, picked, activity, hash| {
                if picked.is_empty() {
                    activity.count_decision(true);
                    return Prepared::Decided(Decision::unlimited(Source::Local, now_ms / 1000));
                }
                if let Some(decision) = local_decision(entry, picked, cost, now_ms, activity) {
                    return Prepared::Decided(decision);
                }
                // The lease is used up: ask the server now rather than deny.
                let requests = picked
                    .indices()
                    .map(|i| {
                        let prefix = entry.prefix(&entry.limits[i]);
                        let state = &mut entry.limits[i];
                        let want = state.wanted_on_ask(interval_ms, now_ms);
                        state.note_ask(now_ms);
                        LeaseRequest {
                            prefix,
                            name: state.name.clone(),
                            window_seconds: state.window_seconds(),
                            ceiling: state.ceiling,
                            current: state.window_start(),
                            give_back: state.give_back.pop(),
                            want,
                            cost,
                            counting: state.counting,
                        }
                    })
                    .collect();
                let target = Target {
                    hash,
                    serial: entry.serial(),
                    slot: entry.slot,
                };
                Prepared::Ask(requests, target)
            },
        );
        let (requests, target) = match prepared {
            Prepared::Decided(decision) => return decision,
            Prepared::Ask(requests, target) => (requests, target),
        };
        match self.acquire(&requests, &target, cost, now_ms).await {
            Some(decision) => {
                self.inner.metrics.server_check();
                decision
            }
            None => self.unreachable(identity, endpoint, cost).await,
        }
    }

    /// The slow path's call: admit `cost` on the server and top the leases
    /// up, in one lease-script call over the request's limits.
    async fn acquire(
        &self,
        requests: &[LeaseRequest],
        target: &Target,
        cost: u64,
        now_ms: u64,
    ) -> Option<Decision> {
        let now_secs = now_ms / 1000;
        let reply = if requests
            .iter()
            .all(|r| r.counting == Counting::SlidingWindow)
        {
            let all: Vec<&LeaseRequest> = requests.iter().collect();
            let invocation = self.lease_invocation(&all);
            self.run_script::<LeaseTuple>(target.slot, self.inner.config.call_timeout, &invocation)
                .await
                .map(LeaseReply::from_tuple)
        } else {
            self.acquire_mixed(requests, target, now_ms).await
        };
        let Some(reply) = reply else {
            // Not given back this time: keep it queued.
            for request in requests {
                self.requeue(Some(target), request);
            }
            return None;
        };
        self.note_server_time(reply.server_ms);
        let applied =
            self.inner
                .cache
                .with_serial(target.hash, target.serial, |entry, activity| {
                    let mut picked = Vec::with_capacity(requests.len());
                    for (i, request) in requests.iter().enumerate() {
                        let Some(at) = entry.find(&request.name) else {
                            // Removed by a rules change meanwhile.
                            self.orphan_grant(target, request, &reply, i);
                            continue;
                        };
                        let state = &mut entry.limits[at];
                        self.apply_lease_reply(state, request, &reply, i, now_ms);
                        if reply.allowed {
                            state.note_use(cost);
                        }
                        picked.push(at);
                    }
                    entry.touch(now_ms);
                    if picked.iter().any(|&i| {
                        let state = &entry.limits[i];
                        reply.allowed || state.lease > 0 || !state.give_back.is_empty()
                    }) {
                        activity.mark(entry);
                    }
                    picked
                        .iter()
                        .map(|&i| status_of(&entry.limits[i], reply.allowed))
                        .collect::<Vec<_>>()
                });
        let limits = applied.unwrap_or_else(|| {
            // Evicted meanwhile: what was granted goes back.
            requests
                .iter()
                .enumerate()
                .map(|(i, request)| {
                    self.orphan_grant(target, request, &reply, i);
                    LimitStatus {
                        name: request.name.clone(),
                        limit: request.ceiling,
                        remaining: if reply.allowed {
                            reply.remaining.get(i).copied().unwrap_or(0)
                        } else {
                            0
                        },
                        reset: reply.resets.get(i).copied().unwrap_or(0),
                        window_seconds: request.window_seconds,
                    }
                })
                .collect()
        });
        let mut decision = Decision {
            allowed: reply.allowed,
            limits,
            retry_after: if reply.allowed { 0 } else { reply.retry_after },
            deciding: None,
            source: Source::Server,
            now_secs,
        };
        decision.choose_deciding();
        Some(decision)
    }

    /// [`Limiter::acquire`]'s call when some limits are not sliding
    /// windows: one pipeline of the lease script over the sliding-window
    /// limits and a call per other limit, their replies merged into one in
    /// the order of `requests`. Such limits count on their own (as in exact
    /// mode), so when the request is refused, the cost a limit did count
    /// joins its lease rather than being lost. A GCRA call refused for the
    /// lease it asked beside the cost is sent again for the cost alone
    /// (CL.THROTTLE grants all of a quantity or nothing).
    async fn acquire_mixed(
        &self,
        requests: &[LeaseRequest],
        target: &Target,
        now_ms: u64,
    ) -> Option<LeaseReply> {
        let timeout = self.inner.config.call_timeout;
        let sliding: Vec<&LeaseRequest> = requests
            .iter()
            .filter(|r| r.counting == Counting::SlidingWindow)
            .collect();
        let invocation = self.lease_invocation(&sliding);
        let mut commands = redis::pipe();
        let calls: Vec<_> = requests
            .iter()
            .filter(|r| r.counting != Counting::SlidingWindow)
            .map(|r| self.lease_call(r))
            .collect();
        for call in &calls {
            call.add_to(&mut commands);
        }
        let script = (!sliding.is_empty()).then_some(&invocation);
        let values = self
            .run_pipeline(target.slot, timeout, script, &commands)
            .await?;
        let mut values = values.iter();
        let script_reply = match script {
            Some(_) => Some(LeaseReply::from_tuple(
                redis::from_redis_value_ref::<LeaseTuple>(values.next()?).ok()?,
            )),
            None => None,
        };
        // Each request's own reply (index 0 of its vectors), the sliding
        // ones taken from the script's.
        let mut own: Vec<LeaseReply> = Vec::with_capacity(requests.len());
        let mut k = 0;
        for request in requests {
            if request.counting == Counting::SlidingWindow {
                let r = script_reply.as_ref()?;
                own.push(LeaseReply {
                    allowed: r.allowed,
                    remaining: vec![*r.remaining.get(k)?],
                    resets: vec![*r.resets.get(k)?],
                    retry_after: r.retry_after,
                    granted: vec![*r.granted.get(k)?],
                    server_ms: r.server_ms,
                    free_in_ms: r.free_in_ms,
                });
                k += 1;
            } else {
                own.push(self.lease_reply(request, values.next()?, now_ms)?);
            }
        }
        // GCRA refused for the lease beside the cost: the cost alone.
        let retry: Vec<usize> = (0..requests.len())
            .filter(|&i| {
                let r = &requests[i];
                matches!(r.counting, Counting::Gcra { .. })
                    && !own[i].allowed
                    && r.cost > 0
                    && r.want > 0
            })
            .collect();
        if !retry.is_empty() {
            let alone: Vec<LeaseRequest> = retry
                .iter()
                .map(|&i| LeaseRequest {
                    want: 0,
                    give_back: None,
                    prefix: requests[i].prefix.clone(),
                    name: requests[i].name.clone(),
                    ..requests[i]
                })
                .collect();
            let mut commands = redis::pipe();
            let calls: Vec<_> = alone.iter().map(|r| self.lease_call(r)).collect();
            for call in &calls {
                call.add_to(&mut commands);
            }
            let values = self
                .run_pipeline(target.slot, timeout, None, &commands)
                .await?;
            for ((&i, request), value) in retry.iter().zip(&alone).zip(&values) {
                own[i] = self.lease_reply(request, value, now_ms)?;
            }
        }
        let allowed = own.iter().all(|r| r.allowed);
        let refused = || own.iter().filter(|r| !r.allowed);
        let cost = requests.first().map_or(0, |r| r.cost);
        Some(LeaseReply {
            allowed,
            remaining: own.iter().map(|r| r.remaining[0]).collect(),
            resets: own.iter().map(|r| r.resets[0]).collect(),
            retry_after: refused().map(|r| r.retry_after).max().unwrap_or(0),
            granted: own
                .iter()
                .map(|r| {
                    // Counted but not admitted: the cost stays reserved
                    // here.
                    if !allowed && r.allowed {
                        r.granted[0] + cost
                    } else {
                        r.granted[0]
                    }
                })
                .collect(),
            server_ms: script_reply.as_ref().map_or(0, |r| r.server_ms),
            free_in_ms: refused().map(|r| r.free_in_ms).max().unwrap_or(0),
        })
    }

    /// Tokens the server granted to a state that is gone: given back by
    /// the next sync.
    pub(super) fn orphan_grant(
        &self,
        target: &Target,
        request: &LeaseRequest,
        reply: &LeaseReply,
        i: usize,
    ) {
        let granted = reply.granted.get(i).copied().unwrap_or(0);
        // GCRA tokens cannot be given back: they are spent.
        if granted > 0 && !matches!(request.counting, Counting::Gcra { .. }) {
            self.inner.cache.orphan([Orphan {
                slot: target.slot,
                prefix: request.prefix.clone(),
                window_start: request.current,
                window_seconds: request.window_seconds,
                tokens: granted,
                ceiling: request.ceiling,
                counting: request.counting,
            }]);
        }
    }

    /// Queues a give-back that was not delivered again on its state (or as
    /// an orphan when the state is gone).
    pub(super) fn requeue(&self, target: Option<&Target>, request: &LeaseRequest) {
        let Some(back) = request.give_back else {
            return;
        };
        let kept = target.and_then(|target| {
            self.inner
                .cache
                .with_serial(target.hash, target.serial, |entry, activity| {
                    let at = entry.find(&request.name)?;
                    entry.limits[at].give_back.push(back);
                    activity.mark(entry);
                    Some(())
                })
                .flatten()
        });
        if kept.is_none() {
            self.inner.cache.orphan([Orphan {
                slot: target.map_or_else(|| key_slot(&request.prefix), |t| t.slot),
                prefix: request.prefix.clone(),
                window_start: back.0,
                window_seconds: request.window_seconds,
                tokens: back.1,
                ceiling: request.ceiling,
                counting: request.counting,
            }]);
        }
    }
}

/// The fast path over an entry: every limit the request uses is in its
/// window and has a lease covering `cost`, or one is in the deny cache.
/// `None` when the server must be asked (or a window rolled: the slow path
/// resolves its ceiling again).
#[inline]
fn local_decision(
    entry: &mut Entry,
    picked: Picked,
    cost: u64,
    now_ms: u64,
    activity: &mut Activity<'_>,
) -> Option<Decision> {
    let now_secs = now_ms / 1000;
    let mut denied_wait = 0;
    let mut short = false;
    for i in picked.indices() {
        let state = &entry.limits[i];
        if !state.in_window(now_secs) {
            return None;
        }
        if state.denied_until_ms > now_ms {
            denied_wait = denied_wait.max((state.denied_until_ms - now_ms).div_ceil(1000));
        }
        short |= state.lease < cost;
    }
    if picked.is_empty() {
        activity.count_decision(true);
        return Some(Decision::unlimited(Source::Local, now_secs));
    }
    let allowed = denied_wait == 0;
    if allowed && short {
        return None;
    }
    for i in picked.indices() {
        let state = &mut entry.limits[i];
        state.note_asked(cost);
        if allowed {
            state.lease -= cost;
            state.note_use(cost);
        }
    }
    if allowed {
        entry.touch(now_ms);
        activity.mark(entry);
    }
    activity.count_decision(allowed);
    Some(decided(
        entry,
        picked,
        allowed,
        denied_wait,
        Source::Local,
        now_secs,
    ))
}

/// The decision over an entry's picked states.
#[inline]
fn decided(
    entry: &Entry,
    picked: Picked,
    allowed: bool,
    retry_after: u64,
    source: Source,
    now_secs: u64,
) -> Decision {
    // Pushed, not collected: `collect` went through a generic path not
    // inlined here.
    let mut limits = Vec::with_capacity(picked.len());
    for i in picked.indices() {
        limits.push(status_of(&entry.limits[i], allowed));
    }
    let mut decision = Decision {
        allowed,
        limits,
        retry_after,
        deciding: None,
        source,
        now_secs,
    };
    decision.choose_deciding();
    decision
}
