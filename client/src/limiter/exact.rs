//! Exact mode: every check is one round trip to the node that serves the
//! identity's slot. Sliding-window limits are checked and counted together
//! by the multi-limit script (all or none); a GCRA limit is a CL.THROTTLE
//! call and a fixed window an INCREX, pipelined with it. Those count on
//! their own: a request one limit refuses still spends on another that
//! allowed it, as separate CL.THROTTLE calls do (docs/client.md).

use super::{FailurePolicy, Limiter, Throttled};
use crate::decision::{Decision, LimitStatus, Source};
use crate::keys::{fixed_window_key, gcra_key, limit_prefix, window_key, window_start, Identity};
use crate::rules::{Algorithm, AppliedLimit, LimitName};
use crate::topology::key_slot;

/// One limit's outcome from the server.
struct Counted {
    allowed: bool,
    status: LimitStatus,
    /// Seconds until it would allow the request (when it did not).
    retry_after: u64,
}

impl Limiter {
    pub(super) async fn check_exact(
        &self,
        identity: &Identity,
        endpoint: &str,
        cost: u64,
    ) -> Decision {
        let now_ms = self.now_ms();
        let now_secs = now_ms / 1000;
        let limits = self.applied_limits(identity, endpoint, now_secs);
        if limits.is_empty() {
            return Decision::unlimited(Source::Server, now_secs);
        }
        let tightening = self.tightening();
        if limits
            .iter()
            .any(|l| l.limit.algorithm != Algorithm::SlidingWindow)
        {
            return self
                .check_mixed(identity, endpoint, cost, &limits, now_ms)
                .await;
        }
        let mut invocation = self.inner.multi_limit.prepare_invoke();
        let mut slot = None;
        for applied in &limits {
            let endpoint = match &applied.name {
                LimitName::Global => None,
                LimitName::Endpoint(e) => Some(*e),
            };
            let prefix = limit_prefix(identity, endpoint);
            // Every key of one identity hashes to one slot ({scope:id}).
            slot.get_or_insert_with(|| key_slot(&prefix));
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
        let reply = self
            .run_script::<Reply>(
                slot.unwrap_or(0),
                self.inner.config.call_timeout,
                &invocation,
            )
            .await;
        let Some((allowed, remaining, resets, retry_after)) = reply else {
            return self.unreachable(identity, endpoint, cost).await;
        };
        let statuses = limits
            .iter()
            .enumerate()
            .map(|(i, applied)| LimitStatus {
                name: applied.name.clone(),
                limit: applied.limit.ceiling(tightening),
                remaining: remaining.get(i).copied().unwrap_or(0).max(0) as u64,
                reset: resets.get(i).copied().unwrap_or(0).max(0) as u64,
                window_seconds: applied.limit.window_seconds,
            })
            .collect();
        let retry_after = if allowed == 1 {
            0
        } else {
            retry_after.max(0) as u64
        };
        self.server_decision(
            identity,
            endpoint,
            allowed == 1,
            statuses,
            retry_after,
            now_ms,
        )
    }

    /// The decision the server's replies give: counted, its deciding limit
    /// chosen, and remembered for the hybrid policy.
    fn server_decision(
        &self,
        identity: &Identity,
        endpoint: &str,
        allowed: bool,
        limits: Vec<LimitStatus>,
        retry_after: u64,
        now_ms: u64,
    ) -> Decision {
        self.inner.metrics.server_check();
        let mut decision = Decision {
            allowed,
            limits,
            retry_after,
            deciding: None,
            source: Source::Server,
            now_secs: now_ms / 1000,
        };
        decision.choose_deciding();
        if self.inner.config.policy == FailurePolicy::Hybrid {
            self.remember(identity, endpoint, &decision, now_ms);
        }
        decision
    }

    /// A check with GCRA or fixed-window limits: one pipeline of the
    /// multi-limit script (over the sliding-window limits, if any) and a
    /// command per other limit.
    async fn check_mixed(
        &self,
        identity: &Identity,
        endpoint: &str,
        cost: u64,
        limits: &[AppliedLimit],
        now_ms: u64,
    ) -> Decision {
        let now_secs = now_ms / 1000;
        let tightening = self.tightening();
        let prefixes: Vec<String> = limits
            .iter()
            .map(|applied| match &applied.name {
                LimitName::Global => limit_prefix(identity, None),
                LimitName::Endpoint(e) => limit_prefix(identity, Some(e)),
            })
            .collect();
        // Every key of one identity hashes to one slot ({scope:id}).
        let slot = key_slot(&prefixes[0]);
        let sliding: Vec<usize> = (0..limits.len())
            .filter(|&i| limits[i].limit.algorithm == Algorithm::SlidingWindow)
            .collect();
        let mut invocation = self.inner.multi_limit.prepare_invoke();
        for &i in &sliding {
            let window = limits[i].limit.window_seconds;
            let start = window_start(now_secs, window);
            invocation.key(window_key(&prefixes[i], start));
            invocation.key(window_key(&prefixes[i], start.saturating_sub(window)));
        }
        for &i in &sliding {
            let limit = &limits[i].limit;
            invocation
                .arg(limit.ceiling(tightening))
                .arg(limit.window_seconds)
                .arg(cost);
        }
        let mut commands = redis::pipe();
        for (applied, prefix) in limits.iter().zip(&prefixes) {
            let limit = &applied.limit;
            let window = limit.window_seconds;
            match limit.algorithm {
                Algorithm::SlidingWindow => {}
                Algorithm::Gcra { burst } => {
                    commands
                        .cmd("CL.THROTTLE")
                        .arg(gcra_key(prefix))
                        .arg(burst)
                        .arg(limit.ceiling(tightening))
                        .arg(window)
                        .arg(cost);
                }
                Algorithm::FixedWindow => {
                    let start = window_start(now_secs, window);
                    commands
                        .cmd("INCREX")
                        .arg(fixed_window_key(prefix, start))
                        .arg("BYINT")
                        .arg(cost)
                        .arg("UBOUND")
                        .arg(limit.ceiling(tightening))
                        .arg("EXAT")
                        .arg(start + window);
                }
            }
        }
        let script = (!sliding.is_empty()).then_some(&invocation);
        let timeout = self.inner.config.call_timeout;
        let Some(replies) = self.run_pipeline(slot, timeout, script, &commands).await else {
            return self.unreachable(identity, endpoint, cost).await;
        };
        let Some(counted) = counted(limits, &sliding, &replies, cost, now_secs, tightening) else {
            tracing::warn!("unexpected reply to a rate-limit check");
            return self.unreachable(identity, endpoint, cost).await;
        };
        let allowed = counted.iter().all(|c| c.allowed);
        let retry_after = counted
            .iter()
            .filter(|c| !c.allowed)
            .map(|c| c.retry_after)
            .max()
            .unwrap_or(0);
        let statuses = counted.into_iter().map(|c| c.status).collect();
        self.server_decision(identity, endpoint, allowed, statuses, retry_after, now_ms)
    }

    /// Keeps an exact check's outcome as the last known budget of its
    /// limits, for the hybrid policy to judge by while the server is away.
    fn remember(&self, identity: &Identity, endpoint: &str, decision: &Decision, now_ms: u64) {
        self.with_ready_entry(identity, endpoint, now_ms, |entry, picked, _, _| {
            for (i, status) in picked.indices().zip(&decision.limits) {
                let state = &mut entry.limits[i];
                state.remaining = status.remaining;
                state.used_since_sync = 0;
                if !decision.allowed && status.remaining == 0 {
                    state.denied_until_ms = now_ms + decision.retry_after * 1000;
                }
            }
            entry.touch(now_ms);
        });
    }
}

/// Each limit's outcome from the pipeline's replies (the script's first,
/// when there are sliding-window limits, then one per other limit in
/// order); `None` for a reply of another shape.
fn counted(
    limits: &[AppliedLimit],
    sliding: &[usize],
    replies: &[redis::Value],
    cost: u64,
    now_secs: u64,
    tightening: f64,
) -> Option<Vec<Counted>> {
    use redis::from_redis_value_ref as parse;
    let mut replies = replies.iter();
    let script: Option<(i64, Vec<i64>, Vec<i64>, i64)> = if sliding.is_empty() {
        None
    } else {
        Some(parse(replies.next()?).ok()?)
    };
    let positive = |n: i64| n.max(0) as u64;
    let mut out = Vec::with_capacity(limits.len());
    for (i, applied) in limits.iter().enumerate() {
        let limit = &applied.limit;
        let window = limit.window_seconds;
        let name = applied.name.clone();
        out.push(match limit.algorithm {
            Algorithm::SlidingWindow => {
                let (allowed, remaining, resets, retry_after) = script.as_ref()?;
                let k = sliding.iter().position(|&s| s == i)?;
                Counted {
                    allowed: *allowed == 1,
                    status: LimitStatus {
                        name,
                        limit: limit.ceiling(tightening),
                        remaining: positive(*remaining.get(k)?),
                        reset: positive(*resets.get(k)?),
                        window_seconds: window,
                    },
                    retry_after: positive(*retry_after),
                }
            }
            Algorithm::Gcra { .. } => {
                let reply = Throttled::read(replies.next()?, window)?;
                Counted {
                    allowed: reply.allowed,
                    status: LimitStatus {
                        name,
                        limit: reply.limit,
                        remaining: if reply.allowed { reply.remaining } else { 0 },
                        reset: now_secs + reply.reset_after,
                        window_seconds: window,
                    },
                    retry_after: reply.retry_after,
                }
            }
            Algorithm::FixedWindow => {
                // [value, applied]: skipped past UBOUND when applied is 0.
                let (value, applied): (i64, i64) = parse(replies.next()?).ok()?;
                let ceiling = limit.ceiling(tightening);
                let end = window_start(now_secs, window) + window;
                let allowed = applied == cost as i64;
                Counted {
                    allowed,
                    status: LimitStatus {
                        name,
                        limit: ceiling,
                        remaining: if allowed {
                            ceiling.saturating_sub(positive(value))
                        } else {
                            0
                        },
                        reset: end,
                        window_seconds: window,
                    },
                    retry_after: end - now_secs,
                }
            }
        });
    }
    Some(out)
}
