//! tally-client: the rate limiter a gateway embeds, talking to tally or to
//! Redis alike.
//!
//! - **Exact mode**: one round trip per check; every limit of the request
//!   (the identity's global limit and the endpoint's) is checked and counted
//!   atomically by the multi-limit script, which tally runs natively.
//! - **Cached mode**: each node reserves a lease of budget on the server,
//!   sized to its recent traffic, and decides locally while the lease lasts;
//!   a sync every 20-100 ms tops leases up and gives unused ones back. A node
//!   whose lease runs out asks the server instead of denying. See
//!   docs/client.md for the bound this gives.
//! - One server, or a Redis Cluster (tally's or Redis's): the URLs are
//!   seed nodes, each identity's checks go to the node serving its hash
//!   slot, and MOVED/ASK are followed as resharding moves slots.
//! - A circuit breaker per node with fail-open, fail-closed or hybrid
//!   policies; ready 429 responses with the X-RateLimit-* headers, the IETF draft's
//!   `RateLimit-Policy`/`RateLimit`, and (feature `tower`) a tower Layer.
//!
//! ```no_run
//! # async fn demo() -> Result<(), tally_client::Error> {
//! use tally_client::{Identity, Limiter};
//! let limiter = Limiter::builder(["redis://127.0.0.1:6379"])
//!     .rules_toml(r#"
//!         [tiers.free]
//!         global = { limit = 1000, window_seconds = 60 }
//!     "#)?
//!     .build()
//!     .await?;
//! let decision = limiter.check(&Identity::new("user", "u_99182", "free"), "GET /search", 1).await;
//! if !decision.allowed {
//!     println!("429, retry after {} s", decision.retry_after);
//! }
//! # Ok(()) }
//! ```

pub mod breaker;
pub mod cache;
pub mod decision;
pub mod keys;
pub mod limiter;
pub mod metrics;
pub mod rules;
mod topology;
#[cfg(feature = "tower")]
pub mod tower;

pub use breaker::{BreakerConfig, BreakerState};
pub use decision::{Decision, LimitStatus, Source};
pub use keys::Identity;
pub use limiter::{
    Clock, Error, FailurePolicy, Limiter, LimiterBuilder, LimiterConfig, Mode, RuleSource,
    SystemClock,
};
pub use metrics::MetricsSnapshot;
pub use rules::{Algorithm, Limit, LimitName, RuleSet, TierRules};
