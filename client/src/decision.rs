//! A check's outcome and the HTTP response parts built from it.

use crate::rules::LimitName;

/// How a decision was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The server decided (exact mode, or a cached-mode slow path).
    Server,
    /// The node's leased budget decided, without a round trip.
    Local,
    /// The server was unreachable and the policy let the request through.
    FailOpen,
    /// The server was unreachable and the policy refused the request.
    FailClosed,
    /// The server was unreachable; the last known budgets decided (hybrid).
    Hybrid,
}

/// One limit's state after a check.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitStatus {
    /// Global or the endpoint's.
    pub name: LimitName,
    /// The ceiling enforced (limit × burst_factor × tightening).
    pub limit: u64,
    /// Requests left in the window (0 when denied).
    pub remaining: u64,
    /// Unix second the window ends (`window_start + window_seconds`).
    pub reset: u64,
    /// Window length in seconds.
    pub window_seconds: u64,
}

/// The outcome of [`crate::Limiter::check`].
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Let the request through?
    pub allowed: bool,
    /// Every limit that applied, global first.
    pub limits: Vec<LimitStatus>,
    /// Seconds to wait before retrying (0 when allowed): the largest among
    /// the exceeded limits, so every limit allows the retry.
    pub retry_after: u64,
    /// Index in `limits` of the limit that decided: the exceeded limit with
    /// the longest wait when denied, the one with the fewest requests left
    /// when allowed. `None` when no limit applies.
    pub deciding: Option<usize>,
    /// How the decision was reached.
    pub source: Source,
    /// The unix second the decision was made at (for `RateLimit` reset).
    pub now_secs: u64,
}

impl Decision {
    /// A decision with no limits (no rule applies, or the fail-open policy).
    pub fn unlimited(source: Source, now_secs: u64) -> Decision {
        Decision {
            allowed: true,
            limits: Vec::new(),
            retry_after: 0,
            deciding: None,
            source,
            now_secs,
        }
    }

    /// The deciding limit's status.
    pub fn deciding_limit(&self) -> Option<&LimitStatus> {
        self.deciding.and_then(|i| self.limits.get(i))
    }

    /// Picks the deciding limit (see [`Decision::deciding`]): when allowed,
    /// the first with the fewest requests left; when denied, the last
    /// exceeded one with the latest reset, else the first with the fewest
    /// left. Inlined, one plain loop: the cached fast path builds a
    /// decision on every check (a call here was ~10% of its samples, and
    /// `min_by_key`'s fold was left out of line).
    #[inline]
    pub(crate) fn choose_deciding(&mut self) {
        let limits = &self.limits;
        let mut fewest: Option<usize> = None;
        let mut exceeded: Option<usize> = None;
        for (i, limit) in limits.iter().enumerate() {
            if fewest.is_none_or(|f| limit.remaining < limits[f].remaining) {
                fewest = Some(i);
            }
            if limit.remaining == 0 && exceeded.is_none_or(|e| limit.reset >= limits[e].reset) {
                exceeded = Some(i);
            }
        }
        self.deciding = if self.allowed {
            fewest
        } else {
            exceeded.or(fewest)
        };
    }

    /// The HTTP status: 429 when denied, `None` (pass the request on) when
    /// allowed.
    pub fn status(&self) -> Option<u16> {
        (!self.allowed).then_some(429)
    }

    /// The response headers, in order: `X-RateLimit-Limit`,
    /// `X-RateLimit-Remaining`, `X-RateLimit-Reset` (the de facto trio), `Retry-After`
    /// when denied, and the IETF draft's `RateLimit-Policy` and `RateLimit`
    /// (draft-ietf-httpapi-ratelimit-headers-09: structured fields,
    /// `"<policy>";q=<quota>;w=<window>` and `"<policy>";r=<remaining>;t=<seconds to reset>`).
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = Vec::with_capacity(6);
        if let Some(limit) = self.deciding_limit() {
            headers.push(("X-RateLimit-Limit", limit.limit.to_string()));
            headers.push(("X-RateLimit-Remaining", limit.remaining.to_string()));
            headers.push(("X-RateLimit-Reset", limit.reset.to_string()));
        }
        if !self.allowed {
            headers.push(("Retry-After", self.retry_after.to_string()));
        }
        if !self.limits.is_empty() {
            let policies: Vec<String> = self
                .limits
                .iter()
                .map(|l| {
                    format!(
                        "\"{}\";q={};w={}",
                        l.name.policy_name(),
                        l.limit,
                        l.window_seconds
                    )
                })
                .collect();
            headers.push(("RateLimit-Policy", policies.join(", ")));
        }
        if let Some(limit) = self.deciding_limit() {
            let reset_in = limit.reset.saturating_sub(self.now_secs);
            headers.push((
                "RateLimit",
                format!(
                    "\"{}\";r={};t={}",
                    limit.name.policy_name(),
                    limit.remaining,
                    reset_in
                ),
            ));
        }
        headers
    }

    /// The 429 body (docs/client.md): `{"error":"rate_limit_exceeded","retry_after_seconds":N}`.
    pub fn body(&self) -> Option<String> {
        (!self.allowed).then(|| {
            format!(
                "{{\"error\":\"rate_limit_exceeded\",\"retry_after_seconds\":{}}}",
                self.retry_after
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The deciding limit by its definition (iterators: `min_by_key`
    /// keeps the first minimum, `max_by_key` the last maximum).
    fn deciding_by_definition(allowed: bool, limits: &[LimitStatus]) -> Option<usize> {
        let fewest = || (0..limits.len()).min_by_key(|&i| limits[i].remaining);
        if allowed {
            fewest()
        } else {
            (0..limits.len())
                .filter(|&i| limits[i].remaining == 0)
                .max_by_key(|&i| limits[i].reset)
                .or_else(fewest)
        }
    }

    #[test]
    fn the_deciding_limit_follows_its_definition_on_every_tie() {
        let mut cases = 0;
        for len in 0..=3u32 {
            // Every combination of remaining and reset in 0..3 per limit.
            for code in 0..9u32.pow(len) {
                let limits: Vec<LimitStatus> = (0..len)
                    .map(|k| {
                        let digit = (code / 9u32.pow(k)) % 9;
                        let (remaining, reset) = (u64::from(digit % 3), u64::from(digit / 3));
                        status(LimitName::Global, 10, remaining, reset)
                    })
                    .collect();
                for allowed in [true, false] {
                    let mut decision = Decision {
                        allowed,
                        limits: limits.clone(),
                        retry_after: 0,
                        deciding: Some(99),
                        source: Source::Local,
                        now_secs: 0,
                    };
                    decision.choose_deciding();
                    assert_eq!(
                        decision.deciding,
                        deciding_by_definition(allowed, &limits),
                        "{allowed} {limits:?}"
                    );
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 2 * (1 + 9 + 81 + 729));
    }

    fn status(name: LimitName, limit: u64, remaining: u64, reset: u64) -> LimitStatus {
        LimitStatus {
            name,
            limit,
            remaining,
            reset,
            window_seconds: 60,
        }
    }

    #[test]
    fn a_denial_names_the_longest_wait_and_builds_the_seed_response() {
        let mut decision = Decision {
            allowed: false,
            limits: vec![
                status(LimitName::Global, 1000, 10, 1_720_000_020),
                status(LimitName::Endpoint("GET /search"), 100, 0, 1_720_000_020),
            ],
            retry_after: 17,
            deciding: None,
            source: Source::Server,
            now_secs: 1_720_000_003,
        };
        decision.choose_deciding();
        assert_eq!(decision.deciding, Some(1));
        assert_eq!(decision.status(), Some(429));
        assert_eq!(
            decision.headers(),
            vec![
                ("X-RateLimit-Limit", "100".to_string()),
                ("X-RateLimit-Remaining", "0".to_string()),
                ("X-RateLimit-Reset", "1720000020".to_string()),
                ("Retry-After", "17".to_string()),
                (
                    "RateLimit-Policy",
                    "\"global\";q=1000;w=60, \"endpoint\";q=100;w=60".to_string()
                ),
                ("RateLimit", "\"endpoint\";r=0;t=17".to_string()),
            ]
        );
        assert_eq!(
            decision.body().unwrap(),
            r#"{"error":"rate_limit_exceeded","retry_after_seconds":17}"#
        );
    }

    #[test]
    fn an_allowed_request_reports_the_tightest_limit_and_no_retry() {
        let mut decision = Decision {
            allowed: true,
            limits: vec![
                status(LimitName::Global, 1000, 990, 1_720_000_020),
                status(LimitName::Endpoint("e"), 100, 40, 1_720_000_020),
            ],
            retry_after: 0,
            deciding: None,
            source: Source::Local,
            now_secs: 1_720_000_000,
        };
        decision.choose_deciding();
        assert_eq!(decision.deciding, Some(1));
        assert_eq!(decision.status(), None);
        assert!(decision.body().is_none());
        let headers = decision.headers();
        assert!(!headers.iter().any(|(name, _)| *name == "Retry-After"));
        assert_eq!(headers[1], ("X-RateLimit-Remaining", "40".to_string()));
    }
}
