//! Rules: which limits apply to a request.
//!
//! A rule set gives, per tier, a global limit for each identity (all
//! endpoints together) and per-endpoint limits. It comes from a TOML file
//! (deployments without a rule store) or from the server: one key holds the
//! rule document as JSON and updates are announced on a channel (see
//! [`crate::Limiter`]). Updates are idempotent (a document with the version
//! already installed is a no-op) and a changed limit applies from the next
//! window start: the current window keeps the limit it started with.
//!
//! ```toml
//! version = 3
//!
//! [tiers.free]
//! global = { limit = 1000, window_seconds = 60 }
//! endpoints."GET /search" = { limit = 100, window_seconds = 60, burst_factor = 1.5 }
//!
//! [tiers.paid]
//! global = { limit = 10000, window_seconds = 60 }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// One limit: `limit` requests per `window_seconds`, counted by `algorithm`.
///
/// In a rules file, `algorithm = "gcra"` with `burst = N` or
/// `algorithm = "fixed_window"` beside `limit` and `window_seconds`;
/// without `algorithm` the limit is a sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "LimitSpec", into = "LimitSpec")]
pub struct Limit {
    /// Requests per window.
    pub limit: u64,
    /// Window length in seconds.
    pub window_seconds: u64,
    /// Multiplies `limit` into the ceiling actually enforced (a sliding
    /// window's stand-in for a token bucket's burst): 1.5 lets 1000/min
    /// reach 1500. The sliding window's alone: GCRA has its own burst.
    pub burst_factor: f64,
    /// How requests are counted against it.
    pub algorithm: Algorithm,
}

/// How a limit counts requests; docs/client.md says when to choose which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Algorithm {
    /// Two fixed-window counters weighted by the current window's overlap
    /// (the multi-limit script): smooth at window edges, two keys per
    /// identity and limit.
    #[default]
    SlidingWindow,
    /// The generic cell rate algorithm (the server's CL.THROTTLE): `limit`
    /// per `window_seconds` as a steady rate, with `burst` requests more
    /// allowed at once. One key per identity and limit.
    Gcra {
        /// Requests allowed beyond the steady rate at once (CL.THROTTLE's
        /// max_burst).
        burst: u64,
    },
    /// One counter per window (the server's INCREX with UBOUND): cheapest,
    /// but up to twice the limit can pass around a window's edge.
    FixedWindow,
}

/// A limit as written in a rules file.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LimitSpec {
    limit: u64,
    window_seconds: u64,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    burst_factor: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    algorithm: Option<AlgorithmName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    burst: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum AlgorithmName {
    SlidingWindow,
    Gcra,
    FixedWindow,
}

fn one() -> f64 {
    1.0
}

fn is_one(value: &f64) -> bool {
    *value == 1.0
}

impl TryFrom<LimitSpec> for Limit {
    type Error = String;

    fn try_from(spec: LimitSpec) -> Result<Limit, String> {
        let name = spec.algorithm.unwrap_or(AlgorithmName::SlidingWindow);
        let algorithm = match (name, spec.burst) {
            (AlgorithmName::Gcra, burst) => Algorithm::Gcra {
                burst: burst.unwrap_or(0),
            },
            (_, Some(_)) => return Err("`burst` is GCRA's: set algorithm = \"gcra\"".into()),
            (AlgorithmName::SlidingWindow, None) => Algorithm::SlidingWindow,
            (AlgorithmName::FixedWindow, None) => Algorithm::FixedWindow,
        };
        if algorithm != Algorithm::SlidingWindow && spec.burst_factor != 1.0 {
            return Err("`burst_factor` is the sliding window's (GCRA takes `burst`)".into());
        }
        Ok(Limit {
            limit: spec.limit,
            window_seconds: spec.window_seconds,
            burst_factor: spec.burst_factor,
            algorithm,
        })
    }
}

impl From<Limit> for LimitSpec {
    fn from(limit: Limit) -> LimitSpec {
        let (algorithm, burst) = match limit.algorithm {
            Algorithm::SlidingWindow => (None, None),
            Algorithm::Gcra { burst } => (Some(AlgorithmName::Gcra), Some(burst)),
            Algorithm::FixedWindow => (Some(AlgorithmName::FixedWindow), None),
        };
        LimitSpec {
            limit: limit.limit,
            window_seconds: limit.window_seconds,
            burst_factor: limit.burst_factor,
            algorithm,
            burst,
        }
    }
}

impl Limit {
    /// A sliding-window limit of `limit` per `window_seconds`.
    pub fn sliding_window(limit: u64, window_seconds: u64) -> Limit {
        Limit {
            limit,
            window_seconds,
            burst_factor: 1.0,
            algorithm: Algorithm::SlidingWindow,
        }
    }

    /// The ceiling enforced per window: `limit × burst_factor × tightening`,
    /// at least 1 (for GCRA, the steady rate's count per window).
    pub fn ceiling(&self, tightening: f64) -> u64 {
        ((self.limit as f64 * self.burst_factor * tightening).floor() as u64).max(1)
    }
}

/// The limits of one tier.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TierRules {
    /// Per identity across all endpoints.
    #[serde(default)]
    pub global: Option<Limit>,
    /// Per identity and endpoint, by endpoint (`"GET /search"`).
    #[serde(default)]
    pub endpoints: BTreeMap<String, Limit>,
}

/// A whole rule document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RuleSet {
    /// Bumped by whoever edits the rules; equal versions are the same rules.
    #[serde(default)]
    pub version: u64,
    /// By tier name.
    #[serde(default)]
    pub tiers: BTreeMap<String, TierRules>,
}

/// Why rules could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulesError(pub String);

impl std::fmt::Display for RulesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RulesError {}

impl RuleSet {
    /// Parses a TOML rules file.
    pub fn from_toml(text: &str) -> Result<RuleSet, RulesError> {
        let rules: RuleSet = toml::from_str(text).map_err(|e| RulesError(e.to_string()))?;
        rules.validate()
    }

    /// Parses the JSON rule document kept on the server.
    pub fn from_json(text: &[u8]) -> Result<RuleSet, RulesError> {
        let rules: RuleSet = serde_json::from_slice(text).map_err(|e| RulesError(e.to_string()))?;
        rules.validate()
    }

    /// The JSON document to store on the server.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("rules serialize")
    }

    fn validate(self) -> Result<RuleSet, RulesError> {
        for (tier, rules) in &self.tiers {
            let limits = rules.global.iter().chain(rules.endpoints.values());
            for limit in limits {
                if limit.window_seconds == 0 || limit.limit == 0 {
                    return Err(RulesError(format!(
                        "tier '{tier}': limit and window_seconds must be positive"
                    )));
                }
                if !(limit.burst_factor.is_finite() && limit.burst_factor >= 1.0) {
                    return Err(RulesError(format!(
                        "tier '{tier}': burst_factor must be a number >= 1"
                    )));
                }
            }
        }
        Ok(self)
    }
}

/// Which limit of a request a status is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LimitName {
    /// The identity's global limit.
    Global,
    /// The limit of one endpoint. The name is interned (see [`intern`]):
    /// every decision copies it, and a copy of an `Arc` would be a count
    /// every thread deciding on the endpoint writes.
    Endpoint(&'static str),
}

/// The one copy of endpoint name `name`, kept for the process's life.
/// Only names the rules give limits to are interned (never a request's
/// endpoint as such), so what is kept is bounded by the rule documents
/// installed: a few bytes per distinct endpoint ever configured.
pub fn intern(name: &str) -> &'static str {
    static NAMES: std::sync::OnceLock<parking_lot::Mutex<hashbrown::HashSet<&'static str>>> =
        std::sync::OnceLock::new();
    let mut names = NAMES.get_or_init(Default::default).lock();
    if let Some(&interned) = names.get(name) {
        return interned;
    }
    let interned: &'static str = Box::leak(name.into());
    names.insert(interned);
    interned
}

impl LimitName {
    /// The policy name used in the `RateLimit-Policy` header.
    pub fn policy_name(&self) -> &str {
        match self {
            LimitName::Global => "global",
            LimitName::Endpoint(_) => "endpoint",
        }
    }
}

/// One limit that applies to a request.
#[derive(Debug, Clone, PartialEq)]
pub struct AppliedLimit {
    /// Global or endpoint.
    pub name: LimitName,
    /// The rule.
    pub limit: Limit,
}

/// The installed rules and, for one update's transition, the previous ones.
#[derive(Debug, Clone, Default)]
pub struct RuleState {
    current: Arc<RuleSet>,
    /// The rules before the last update and when (unix seconds) it arrived:
    /// a window that started before then keeps its old limit.
    previous: Option<(Arc<RuleSet>, u64)>,
}

impl RuleState {
    /// Starts with `rules`.
    pub fn new(rules: RuleSet) -> RuleState {
        RuleState {
            current: Arc::new(rules),
            previous: None,
        }
    }

    /// The installed rule set.
    pub fn current(&self) -> &RuleSet {
        &self.current
    }

    /// Installs `rules` received at `now_secs`; false (and nothing changes)
    /// when this version is installed already.
    pub fn update(&mut self, rules: RuleSet, now_secs: u64) -> bool {
        if rules.version == self.current.version && *self.current == rules {
            return false;
        }
        let old = std::mem::replace(&mut self.current, Arc::new(rules));
        self.previous = Some((old, now_secs));
        true
    }

    /// The limits for `tier` and `endpoint` at `now_secs`: the global limit
    /// first, then the endpoint's. A limit changed by an update made during
    /// its current window keeps its old value until that window ends.
    pub fn limits(&self, tier: &str, endpoint: &str, now_secs: u64) -> Vec<AppliedLimit> {
        let has_own = self
            .current
            .tiers
            .get(tier)
            .is_some_and(|t| t.endpoints.contains_key(endpoint));
        let own = has_own.then(|| LimitName::Endpoint(intern(endpoint)));
        std::iter::once(LimitName::Global)
            .chain(own)
            .filter_map(|name| {
                let limit = self.limit(tier, &name, now_secs)?;
                Some(AppliedLimit { name, limit })
            })
            .collect()
    }

    /// The limit `name` of `tier` at `now_secs`, `None` when the installed
    /// rules have none (a limit an update removed goes at once; one it
    /// changed keeps its old value until the window it arrived in ends).
    pub fn limit(&self, tier: &str, name: &LimitName, now_secs: u64) -> Option<Limit> {
        let lookup = |rules: &RuleSet| -> Option<Limit> {
            let tier = rules.tiers.get(tier)?;
            match name {
                LimitName::Global => tier.global,
                LimitName::Endpoint(e) => tier.endpoints.get(*e).copied(),
            }
        };
        let limit = lookup(&self.current)?;
        if let Some((old_rules, updated_at)) = &self.previous {
            let window = limit.window_seconds;
            if now_secs / window * window < *updated_at {
                return Some(lookup(old_rules).unwrap_or(limit));
            }
        }
        Some(limit)
    }

    /// Which limits `tier` has under the installed rules, in the form a
    /// cached check looks them up in.
    pub fn tier_plan(&self, tier: &str) -> TierPlan {
        let Some(rules) = self.current.tiers.get(tier) else {
            return TierPlan::default();
        };
        TierPlan {
            global: rules.global.is_some(),

            endpoints: rules
                .endpoints
                .keys()
                .map(|endpoint| {
                    let planned = PlannedEndpoint {
                        name: LimitName::Endpoint(intern(endpoint)),
                        key_hash: crate::keys::endpoint_key_hash(endpoint),
                    };
                    (endpoint.as_str().into(), planned)
                })
                .collect(),
        }
    }
}

/// Which limits one tier has: whether it has a global limit, and the
/// endpoints with limits of their own. Built once per tier and rules
/// change, and shared by every cached identity of the tier, so that a check
/// finds its limits with one lookup of its endpoint.
#[derive(Debug, Default)]
pub struct TierPlan {
    /// The tier has a global limit.
    pub global: bool,

    /// Endpoints with a limit of their own.
    pub endpoints: hashbrown::HashMap<Box<str>, PlannedEndpoint>,
}

/// An endpoint with a limit of its own.
#[derive(Debug, Clone)]
pub struct PlannedEndpoint {
    /// The name its states and statuses carry (one allocation shared by
    /// all of them).
    pub name: LimitName,
    /// The endpoint's part of its keys (see [`crate::keys::endpoint_hash`]).
    pub key_hash: [u8; 6],
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
        version = 1
        [tiers.free]
        global = { limit = 1000, window_seconds = 60 }
        endpoints."GET /search" = { limit = 100, window_seconds = 60, burst_factor = 1.5 }
        [tiers.paid]
        global = { limit = 10000, window_seconds = 60 }
    "#;

    #[test]
    fn a_toml_file_gives_global_then_endpoint_limits() {
        let state = RuleState::new(RuleSet::from_toml(FILE).unwrap());
        let limits = state.limits("free", "GET /search", 1_720_000_000);
        assert_eq!(limits.len(), 2);
        assert_eq!(limits[0].name, LimitName::Global);
        assert_eq!(limits[1].limit.ceiling(1.0), 150);
        assert_eq!(state.limits("paid", "GET /search", 0).len(), 1);
        assert!(state.limits("nosuch", "GET /", 0).is_empty());
    }

    #[test]
    fn endpoint_names_are_interned_once_and_only_for_limited_endpoints() {
        let owned = String::from("GET /interned");
        assert!(std::ptr::eq(intern(&owned), intern("GET /interned")));
        let state = RuleState::new(RuleSet::from_toml(FILE).unwrap());
        let limits = state.limits("free", "GET /search", 0);
        assert_eq!(limits[1].name, LimitName::Endpoint("GET /search"));
        // A request's endpoint without a limit of its own names nothing.
        assert_eq!(state.limits("free", "GET /no-rule", 0).len(), 1);
    }

    #[test]
    fn limits_name_their_algorithm_and_round_trip_through_json() {
        let text = r#"
            [tiers.t]
            global = { limit = 10, window_seconds = 1, algorithm = "gcra", burst = 5 }
            endpoints."GET /a" = { limit = 3, window_seconds = 60, algorithm = "fixed_window" }
            endpoints."GET /b" = { limit = 3, window_seconds = 60, algorithm = "sliding_window" }
            endpoints."GET /c" = { limit = 3, window_seconds = 60, burst_factor = 2.0 }
        "#;
        let rules = RuleSet::from_toml(text).unwrap();
        let tier = &rules.tiers["t"];
        assert_eq!(tier.global.unwrap().algorithm, Algorithm::Gcra { burst: 5 });
        assert_eq!(tier.endpoints["GET /a"].algorithm, Algorithm::FixedWindow);
        assert_eq!(tier.endpoints["GET /b"].algorithm, Algorithm::SlidingWindow);
        assert_eq!(tier.endpoints["GET /c"].algorithm, Algorithm::SlidingWindow);
        assert_eq!(tier.endpoints["GET /c"].ceiling(1.0), 6);
        assert_eq!(
            RuleSet::from_json(rules.to_json().as_bytes()).unwrap(),
            rules
        );
        // A GCRA limit without a burst has none beyond its rate.
        let bare = "[tiers.t]\nglobal = { limit = 5, window_seconds = 1, algorithm = \"gcra\" }";
        assert_eq!(
            RuleSet::from_toml(bare).unwrap().tiers["t"]
                .global
                .unwrap()
                .algorithm,
            Algorithm::Gcra { burst: 0 }
        );
    }

    #[test]
    fn bad_rules_are_refused() {
        let zero = "[tiers.t]\nglobal = { limit = 0, window_seconds = 60 }";
        assert!(RuleSet::from_toml(zero).is_err());
        let burst = "[tiers.t]\nglobal = { limit = 5, window_seconds = 60, burst_factor = 0.5 }";
        assert!(RuleSet::from_toml(burst).is_err());
        for wrong in [
            // `burst` is GCRA's, `burst_factor` the sliding window's.
            "global = { limit = 5, window_seconds = 60, burst = 3 }",
            "global = { limit = 5, window_seconds = 60, algorithm = \"fixed_window\", burst = 3 }",
            "global = { limit = 5, window_seconds = 60, algorithm = \"gcra\", burst_factor = 2.0 }",
            "global = { limit = 5, window_seconds = 60, algorithm = \"token_bucket\" }",
        ] {
            let text = format!("[tiers.t]\n{wrong}");
            assert!(RuleSet::from_toml(&text).is_err(), "{wrong}");
        }
    }

    #[test]
    fn a_changed_limit_applies_from_the_next_window_and_repeats_are_no_ops() {
        let mut state = RuleState::new(RuleSet::from_toml(FILE).unwrap());
        let mut upgraded = state.current().clone();
        upgraded.version = 2;
        upgraded.tiers.get_mut("free").unwrap().global = Some(Limit::sliding_window(2000, 60));
        // Arrives 30 s into the window starting at 1720000020.
        assert!(state.update(upgraded.clone(), 1_720_000_050));
        assert!(!state.update(upgraded, 1_720_000_055), "same version again");
        let during = state.limits("free", "GET /", 1_720_000_070);
        assert_eq!(
            during[0].limit.limit, 1000,
            "current window keeps its limit"
        );
        let next = state.limits("free", "GET /", 1_720_000_080);
        assert_eq!(
            next[0].limit.limit, 2000,
            "the next window gets the new one"
        );
    }
}
