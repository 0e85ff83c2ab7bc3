//! Exact mode: every check is one multi-limit script call on the node that
//! serves the identity's slot.

use super::{FailurePolicy, Limiter};
use crate::decision::{Decision, LimitStatus, Source};
use crate::keys::{limit_prefix, window_key, window_start, Identity};
use crate::rules::LimitName;
use crate::topology::key_slot;

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
            self.remember(identity, endpoint, &decision, now_ms);
        }
        decision
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
