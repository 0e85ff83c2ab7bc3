//! A small fleet on a simulated clock (tests/support/fleet.rs): Zipf
//! traffic from random nodes, a synchronized burst and a newcomer on every
//! node. In exact mode and in the cached mode at 100 and 20 ms syncs:
//! identities over their limit get 99.5–101% of it in every window, no
//! identity within 99% of its limit is ever denied, and the cached mode
//! costs the store no more round trips per request than exact mode.
//! (`examples/fleet.rs` runs the same at up to 1,000 nodes.)

#[path = "support/fleet.rs"]
mod fleet;

use fleet::{run, Fleet};

const LIMIT: u64 = 500;

fn small(sync_ms: Option<u64>) -> Fleet {
    Fleet {
        nodes: 100,
        identities: 1_000,
        total_rate: 1_000.0,
        limit: LIMIT,
        window_seconds: 10,
        sync_ms,
        seed: 7,
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_small_fleet_admits_exactly_the_limit_in_every_mode() {
    let exact = run(small(None)).await;
    let exact_per_request = exact.round_trips as f64 / exact.requests as f64;
    for sync_ms in [None, Some(100), Some(20)] {
        let report = if sync_ms.is_none() {
            exact.clone()
        } else {
            run(small(sync_ms)).await
        };
        let label = format!("{sync_ms:?}: {report:?}");
        // Zipf ranks 1 and 2 send 2.4x and 1.2x the limit, rank 3 0.8x.
        assert_eq!(report.over_limit_identities, 2, "{label}");
        assert!(report.over_admitted.0 >= 0.995, "{label}");
        assert!(report.most_admitted <= 1.01, "{label}");
        assert!(report.light_identities > 990, "{label}");
        assert_eq!(report.light_denied, 0, "{label}");
        // The burst (3x the limit at once from every node) gets its limit.
        assert_eq!(report.burst.0, 3 * LIMIT, "{label}");
        assert!(report.burst.1 as f64 >= 0.995 * LIMIT as f64, "{label}");
        assert!(report.burst.1 as f64 <= 1.01 * LIMIT as f64, "{label}");
        // The newcomer sends twice its limit in the last half window.
        assert!(report.newcomer_admitted >= 0.995, "{label}");
        let per_request = report.round_trips as f64 / report.requests as f64;
        assert!(per_request <= exact_per_request, "{label}");
    }
    assert_eq!(
        exact.round_trips, exact.requests,
        "exact mode: one per check"
    );
}
