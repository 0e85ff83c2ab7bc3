//! The lease protocol of the cached mode (`lua/scripts/lease.lua`) and the
//! sync round that gives unused leases back and tops active ones up: for
//! each node, one pipelined round trip, the nodes asked concurrently.
//!
//! A limit counted by another algorithm leases through its own command:
//! a fixed window by INCREX with SATURATE (which grants what is left under
//! the ceiling; a negative increment gives back), GCRA by CL.THROTTLE with
//! a quantity (all of it or nothing; spent tokens cannot be given back, so
//! an unused GCRA lease is lost budget, never excess).

use std::collections::HashMap;
use std::time::Instant;

use super::{Limiter, Throttled};
use crate::cache::{Counting, LimitState};
use crate::keys::{fixed_window_key, gcra_key, window_key, window_start};
use crate::rules::LimitName;

/// The lease script of the cached mode (`lua/scripts/lease.lua`, run natively by tally).
pub const LEASE_SCRIPT: &str = tally_lua::lease::SOURCE;

/// Tokens a lease call gives back or asks for on one limit.
pub(super) struct LeaseRequest {
    pub(super) prefix: String,
    /// The limit whose state the reply goes to.
    pub(super) name: LimitName,
    pub(super) window_seconds: u64,
    pub(super) ceiling: u64,
    pub(super) current: u64,
    pub(super) give_back: Option<(u64, u64)>,
    pub(super) want: u64,
    pub(super) cost: u64,
    /// Which call serves it: the lease script, INCREX or CL.THROTTLE.
    pub(super) counting: Counting,
}

impl LeaseRequest {
    /// The lease a GCRA call asks for beside the cost: no more than the
    /// burst leaves room for (a quantity past `burst + 1` is never allowed).
    fn gcra_want(&self, burst: u32) -> u64 {
        self.want
            .min((u64::from(burst) + 1).saturating_sub(self.cost))
    }
}

/// The cache entry a lease call was made for (see
/// `Cache::with_serial`), and the slot of its keys.
pub(super) struct Target {
    pub(super) hash: u64,
    pub(super) serial: u32,
    pub(super) slot: u16,
}

/// The reply of the lease script.
pub(super) struct LeaseReply {
    pub(super) allowed: bool,
    pub(super) remaining: Vec<u64>,
    pub(super) resets: Vec<u64>,
    pub(super) retry_after: u64,
    pub(super) granted: Vec<u64>,
    pub(super) server_ms: u64,
    /// When the estimate admits the cost again (the deny cache's end).
    pub(super) free_in_ms: u64,
}

pub(super) type LeaseTuple = (i64, Vec<i64>, Vec<i64>, i64, Vec<i64>, i64, i64);

impl LeaseReply {
    pub(super) fn from_tuple(t: LeaseTuple) -> LeaseReply {
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

/// One lease call as sent.
pub(super) enum LeaseCall<'a> {
    /// The lease script (sliding-window limits).
    Script(redis::ScriptInvocation<'a>),
    /// INCREX or CL.THROTTLE.
    Command(redis::Cmd),
}

impl LeaseCall<'_> {
    /// Adds the call to `pipe`.
    pub(super) fn add_to(&self, pipe: &mut redis::Pipeline) {
        match self {
            LeaseCall::Script(invocation) => {
                pipe.invoke_script(invocation);
            }
            LeaseCall::Command(command) => {
                pipe.add_command(command.clone());
            }
        }
    }
}

/// The tokens a fixed-window call gives back: only those of the window it
/// counts in (an ended window's counter no longer matters).
fn fixed_window_give_back(request: &LeaseRequest) -> u64 {
    request
        .give_back
        .filter(|(start, _)| *start == request.current)
        .map_or(0, |(_, tokens)| tokens)
}

/// The reply to a lease call made by command (not the script), in the
/// lease script's terms; `None` for a reply of another shape.
pub(super) fn command_lease_reply(
    request: &LeaseRequest,
    reply: &redis::Value,
    now_ms: u64,
) -> Option<LeaseReply> {
    let now_secs = now_ms / 1000;
    match request.counting {
        Counting::SlidingWindow => None,
        Counting::FixedWindow => {
            // [value after, applied]: the applied increment was the cost
            // and the lease wanted, less what was given back, saturated
            // under the ceiling.
            let (value, applied): (i64, i64) = redis::from_redis_value_ref(reply).ok()?;
            let end = request.current + request.window_seconds;
            let got = (applied + fixed_window_give_back(request) as i64).max(0) as u64;
            let allowed = got >= request.cost;
            Some(LeaseReply {
                allowed,
                remaining: vec![request.ceiling.saturating_sub(value.max(0) as u64)],
                resets: vec![end],
                retry_after: if allowed {
                    0
                } else {
                    end.saturating_sub(now_secs)
                },
                granted: vec![if allowed { got - request.cost } else { got }],
                server_ms: 0,
                free_in_ms: (end * 1000).saturating_sub(now_ms),
            })
        }
        Counting::Gcra { burst } => {
            let Throttled {
                allowed,
                remaining,
                retry_after,
                reset_after,
                ..
            } = Throttled::read(reply, request.window_seconds)?;
            // CL.THROTTLE rounds its wait up to whole seconds; a token
            // frees every emission interval, which the deny cache should
            // not outlast (a node denying a second at 10 a second would
            // leave nine tokens unused).
            let interval_ms = (request.window_seconds * 1000 / request.ceiling.max(1)).max(1);
            Some(LeaseReply {
                allowed,
                remaining: vec![remaining],
                resets: vec![now_secs + reset_after],
                retry_after,
                granted: vec![if allowed { request.gcra_want(burst) } else { 0 }],
                server_ms: 0,
                free_in_ms: (retry_after * 1000).min(interval_ms),
            })
        }
    }
}

impl Limiter {
    /// A lease call's reply as the lease script gives it.
    pub(super) fn lease_reply(
        &self,
        request: &LeaseRequest,
        reply: &redis::Value,
        now_ms: u64,
    ) -> Option<LeaseReply> {
        match request.counting {
            Counting::SlidingWindow => redis::from_redis_value_ref::<LeaseTuple>(reply)
                .ok()
                .map(LeaseReply::from_tuple),
            _ => command_lease_reply(request, reply, now_ms),
        }
    }

    /// The call that serves one lease request.
    pub(super) fn lease_call(&self, request: &LeaseRequest) -> LeaseCall<'_> {
        match request.counting {
            Counting::SlidingWindow => LeaseCall::Script(self.lease_invocation(&[request])),
            Counting::FixedWindow => {
                let by =
                    (request.cost + request.want) as i64 - fixed_window_give_back(request) as i64;
                let mut command = redis::cmd("INCREX");
                command
                    .arg(fixed_window_key(&request.prefix, request.current))
                    .arg("BYINT")
                    .arg(by)
                    .arg("LBOUND")
                    .arg(0)
                    .arg("UBOUND")
                    .arg(request.ceiling)
                    .arg("SATURATE")
                    .arg("EXAT")
                    .arg(request.current + request.window_seconds);
                LeaseCall::Command(command)
            }
            Counting::Gcra { burst } => {
                let mut command = redis::cmd("CL.THROTTLE");
                command
                    .arg(gcra_key(&request.prefix))
                    .arg(burst)
                    .arg(request.ceiling)
                    .arg(request.window_seconds)
                    .arg(request.cost + request.gcra_want(burst));
                LeaseCall::Command(command)
            }
        }
    }

    /// The lease script over `requests` (sliding-window limits), checked
    /// and counted together.
    pub(super) fn lease_invocation(
        &self,
        requests: &[&LeaseRequest],
    ) -> redis::ScriptInvocation<'_> {
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
    pub(super) fn apply_lease_reply(
        &self,
        state: &mut LimitState,
        request: &LeaseRequest,
        reply: &LeaseReply,
        i: usize,
        now_ms: u64,
    ) {
        let granted = reply.granted.get(i).copied().unwrap_or(0);
        // GCRA tokens belong to no window.
        let gcra = matches!(state.counting, Counting::Gcra { .. });
        if state.window_start() == request.current || gcra {
            state.lease += granted;
            state.remaining = reply.remaining.get(i).copied().unwrap_or(0);
            if state.remaining > 0 {
                state.scarce = false;
            }
        } else if granted > 0 && state.counting == Counting::SlidingWindow {
            // The window rolled while the call was in flight: the grant was
            // reserved on the old window's key, which the sliding estimate
            // still weighs. (A fixed window's ended counter no longer
            // matters.)
            state.give_back.push((request.current, granted));
        }
        if reply.allowed {
            state.denials_in_row = 0;
        } else {
            let exceeded = reply.remaining.get(i).copied().unwrap_or(0) < request.cost.max(1);
            if exceeded {
                // Not the window's end: a sliding window frees budget as the
                // previous window's weight falls. But not sooner than a sync
                // interval: an identity over its limit on many nodes would
                // otherwise have every node ask again each time one token
                // frees (one admitted, the rest denied), and the budget
                // freed meanwhile is not lost (the next ask takes it, and
                // leases what is left).
                state.denials_in_row = state.denials_in_row.saturating_add(1);
                state.denied_until_ms = now_ms + self.deny_for(state, reply.free_in_ms);
                state.scarce = true;
            }
        }
    }

    /// How long a node denies a limit locally after the server denied it:
    /// until the estimate frees the cost, and at least a sync interval,
    /// doubled for each denial in a row up to a hundredth of the window
    /// (600 ms of a minute). Denied again means other nodes took what freed
    /// first: an identity over its limit on ten nodes at 100 req/s each
    /// cost a round trip per 10 requests at a fixed interval. The freed
    /// budget is not lost meanwhile (the next ask of any node takes it),
    /// and a node whose asks succeed never backs off.
    fn deny_for(&self, state: &LimitState, free_in_ms: u64) -> u64 {
        let interval = self.sync_interval_ms();
        let most = (state.window_seconds() * 1000 / 100).max(interval);
        let backed_off = interval << (state.denials_in_row.clamp(1, 8) - 1);
        free_in_ms.max(backed_off.min(most))
    }

    /// The cached mode's sync interval in ms (1 in exact mode, which leases
    /// nothing).
    pub(super) fn sync_interval_ms(&self) -> u64 {
        match self.inner.config.mode {
            super::Mode::Cached { sync_interval } => (sync_interval.as_millis() as u64).max(1),
            super::Mode::Exact => 1,
        }
    }

    /// One sync round: for every node with due work, one round trip that
    /// gives back unused leases (of ended windows, of evicted states, and
    /// of limits not used since the last round) and tops up the leases of
    /// limits used fast enough for a lease to pay. Only the states used
    /// since the last round or holding tokens are looked at: a node's sync
    /// costs follow its traffic. The background worker calls this every
    /// `sync_interval`; simulations call it on their own clock.
    pub async fn sync_now(&self) {
        let interval_ms = self.sync_interval_ms();
        let topology = &self.inner.topology;
        let now_ms = self.now_ms();
        let now_secs = now_ms / 1000;
        let mut batches: HashMap<usize, Vec<(Option<Target>, LeaseRequest)>> = HashMap::new();
        // An entry that stays is swept again next round; the others are off
        // the active list until their next use.
        self.inner.cache.sweep_active(|entry, hash| {
            let mut stays = false;
            let mut rolled = false;
            // (state index, give-back, tokens wanted) of each call.
            let mut calls = Vec::new();
            for (i, s) in entry.limits.iter_mut().enumerate() {
                rolled |= s.roll_at(now_secs);
                // Smoothed use per interval sizes the next lease.
                let used = std::mem::take(&mut s.used_since_sync);
                s.rate = 0.5 * s.rate + 0.5 * used as f32;
                let mut give_back = s.give_back.pop();
                let mut want = 0;
                if used == 0 {
                    // Not used for a whole interval: what it holds goes
                    // back, for other nodes and exact checks to use. GCRA
                    // tokens cannot go back; kept, they would let a later
                    // burst pass the limit's, so they are dropped (budget
                    // lost, never exceeded).
                    if let Counting::Gcra { .. } = s.counting {
                        s.lease = 0;
                    } else if s.lease > 0 && give_back.is_none() {
                        give_back = Some((s.window_start(), s.lease));
                        s.lease = 0;
                    }
                } else if s.denied_until_ms <= now_ms && s.lease < s.lease_low(interval_ms, now_ms)
                {
                    want = s.lease_target(interval_ms, now_ms).saturating_sub(s.lease);
                }
                if used > 0 || s.lease > 0 || !s.give_back.is_empty() || give_back.is_some() {
                    stays = true;
                } else {
                    // The rate starts again from nothing at its next use.
                    s.rate = 0.0;
                }
                if want > 0 || give_back.is_some() {
                    calls.push((i, give_back, want));
                }
            }
            if rolled {
                // Ceilings are resolved again in each new window: the next
                // check takes the slow path once.
                entry.outdate();
            }
            if calls.is_empty() {
                return stays;
            }
            let batch = batches
                .entry(topology.node_for_slot(entry.slot))
                .or_default();
            for (i, give_back, want) in calls {
                let s = &entry.limits[i];
                let request = LeaseRequest {
                    prefix: entry.prefix(s),
                    name: s.name.clone(),
                    window_seconds: s.window_seconds(),
                    ceiling: s.ceiling,
                    current: s.window_start(),
                    give_back,
                    want,
                    cost: 0,
                    counting: s.counting,
                };
                let target = Target {
                    hash,
                    serial: entry.serial(),
                    slot: entry.slot,
                };
                batch.push((Some(target), request));
            }
            stays
        });
        for orphan in self.inner.cache.take_orphans() {
            let request = LeaseRequest {
                name: LimitName::Global,
                window_seconds: orphan.window_seconds,
                ceiling: orphan.ceiling,
                current: window_start(now_secs, orphan.window_seconds),
                give_back: Some((orphan.window_start, orphan.tokens)),
                want: 0,
                cost: 0,
                counting: orphan.counting,
                prefix: orphan.prefix,
            };
            batches
                .entry(topology.node_for_slot(orphan.slot))
                .or_default()
                .push((None, request));
        }
        let rounds = batches
            .into_iter()
            .map(|(node, batch)| self.sync_node(node, batch));
        futures_util::future::join_all(rounds).await;
    }

    /// One node's part of a sync round: one pipeline of lease calls. A call
    /// that fails (the node is down, the slot moved) keeps its give-back
    /// queued for the next round.
    async fn sync_node(&self, index: usize, batch: Vec<(Option<Target>, LeaseRequest)>) {
        let node = self.inner.topology.node(index);
        let started = Instant::now();
        let mut pending: Vec<usize> = (0..batch.len()).collect();
        let mut loaded = false;
        while !pending.is_empty() {
            let calls: Vec<_> = pending
                .iter()
                .map(|&i| self.lease_call(&batch[i].1))
                .collect();
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for call in &calls {
                call.add_to(&mut pipe);
            }
            let call = async {
                let mut connection = node.connection().await?;
                pipe.query_async::<Vec<redis::RedisResult<redis::Value>>>(&mut connection)
                    .await
            };
            let super::Outcome::Done(replies) = self
                .guarded(&node, self.inner.config.sync_timeout, call)
                .await
            else {
                self.inner.metrics.sync_failure();
                break;
            };
            let now_ms = self.now_ms();
            let mut not_loaded = Vec::new();
            for (i, reply) in pending.iter().copied().zip(replies) {
                let (target, request) = &batch[i];
                let reply = reply.and_then(|value| {
                    self.lease_reply(request, &value, now_ms).ok_or_else(|| {
                        redis::RedisError::from((
                            redis::ErrorKind::Parse,
                            "a lease reply of another shape",
                        ))
                    })
                });
                match reply {
                    Ok(reply) => {
                        self.note_server_time(reply.server_ms);
                        if let Some(target) = target {
                            let applied = self.inner.cache.with_serial(
                                target.hash,
                                target.serial,
                                |entry, _| {
                                    let at = entry.find(&request.name)?;
                                    let state = &mut entry.limits[at];
                                    self.apply_lease_reply(state, request, &reply, 0, now_ms);
                                    Some(())
                                },
                            );
                            if applied.flatten().is_none() {
                                // Gone meanwhile: what was granted goes back.
                                self.orphan_grant(target, request, &reply, 0);
                            }
                        }
                        continue;
                    }
                    Err(e)
                        if !loaded
                            && e.kind()
                                == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                    {
                        not_loaded.push(i);
                        continue;
                    }
                    Err(e) => {
                        if let Some((address, slot)) = e.redirect_node() {
                            // Moved (or moving): the next round asks the
                            // node that serves it now.
                            self.inner.topology.moved(slot, address);
                        } else {
                            tracing::debug!(error = %e, "a lease call failed");
                        }
                    }
                }
                self.requeue(target.as_ref(), request);
            }
            if not_loaded.is_empty() {
                pending.clear();
                break;
            }
            // The script is not on this node yet (a restart, a new node):
            // load it and send the calls it refused again.
            let load = async {
                let mut connection = node.connection().await?;
                self.inner
                    .lease
                    .prepare_invoke()
                    .load_async(&mut connection)
                    .await
            };
            if !matches!(
                self.guarded(&node, self.inner.config.sync_timeout, load)
                    .await,
                super::Outcome::Done(_)
            ) {
                pending = not_loaded;
                break;
            }
            loaded = true;
            pending = not_loaded;
        }
        if pending.is_empty() {
            self.inner
                .metrics
                .sync(started.elapsed().as_micros() as u64, batch.len() as u64);
        } else {
            // Not sent or not answered: the give-backs stay queued.
            for &i in &pending {
                self.requeue(batch[i].0.as_ref(), &batch[i].1);
            }
        }
    }
}
