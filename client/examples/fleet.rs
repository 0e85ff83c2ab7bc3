//! The cached mode at fleet scale (docs/client.md, "At fleet scale"): up to
//! 1,000 gateway nodes and 100,000 identities with Zipf-distributed traffic
//! against one in-process tally on a simulated clock, a synchronized burst
//! and a newcomer on every node (see tests/support/fleet.rs). For each
//! setting and mode it prints store round trips and commands per request,
//! the share of the limit over-limit identities were admitted (lowest and
//! highest in any window), false denials of identities within 99% of their
//! limit, the burst and the newcomer, client CPU per request and the limit
//! states the nodes hold.
//!
//! ```text
//! cargo run --release --example fleet -p tally-client            # all rows
//! cargo run --release --example fleet -p tally-client -- 100     # one fleet size
//! cargo run --release --example fleet -p tally-client -- 100 20  # and one mode
//! ```

#[path = "../tests/support/fleet.rs"]
mod fleet;

use std::time::Instant;

use fleet::{run, Fleet, WINDOWS};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let only: Option<usize> = std::env::args().nth(1).and_then(|a| a.parse().ok());
    // `exact`, or a sync interval in ms: that mode only.
    let only_mode = std::env::args().nth(2);
    let limit = 1000;
    let window_seconds = 10;
    println!(
        "limit {limit} per {window_seconds} s for every identity; Zipf (s = 1) rates, each identity evenly spaced from random nodes; {WINDOWS} windows"
    );
    println!();
    println!("| nodes | identities | fleet req/s | mode | round trips per request | commands per request | over-limit identities: admitted, % of limit (min-max per window) | false denials (light identities) | burst admitted of sent | newcomer admitted, % of limit | client CPU per request, user + kernel | limit states held | run time |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    // (nodes, identities, requests per second over the fleet)
    let settings: &[(usize, usize, f64)] = &[
        (20, 2_000, 2_000.0),
        (100, 10_000, 20_000.0),
        (1_000, 100_000, 20_000.0),
    ];
    for &(nodes, identities, total_rate) in settings {
        if only.is_some_and(|n| n != nodes) {
            continue;
        }
        for sync_ms in [None, Some(100), Some(20)] {
            let name = sync_ms.map_or("exact".to_string(), |ms| ms.to_string());
            if only_mode.as_ref().is_some_and(|m| *m != name) {
                continue;
            }
            let started = Instant::now();
            let r = run(Fleet {
                nodes,
                identities,
                total_rate,
                limit,
                window_seconds,
                sync_ms,
                seed: 7,
            })
            .await;
            let mode = match sync_ms {
                None => "exact".to_string(),
                Some(ms) => format!("cached, {ms} ms"),
            };
            println!(
                "| {nodes} | {identities} | {total_rate} | {mode} | {:.3} | {:.3} | {}: {:.1}–{:.1} (lowest: rank {}, window {}) | {} of {} ({} identities) | {} of {} | {:.1} | {:.1} + {:.1} µs | {} | {:.0} s |",
                r.round_trips as f64 / r.requests as f64,
                r.commands as f64 / r.requests as f64,
                r.over_limit_identities,
                r.over_admitted.0 * 100.0,
                r.over_admitted.1 * 100.0,
                r.least_admitted_at.0,
                r.least_admitted_at.1 + 1,
                r.light_denied,
                r.light_requests,
                r.light_identities,
                r.burst.1,
                r.burst.0,
                r.newcomer_admitted * 100.0,
                r.cpu_ns_per_request.0 / 1000.0,
                r.cpu_ns_per_request.1 / 1000.0,
                r.tracked_limits,
                started.elapsed().as_secs_f64()
            );
        }
    }
}
