//! Memory per tracked identity in the cached mode (docs/client.md).
//!
//! A limiter in cached mode whose server is unreachable (a port nobody
//! listens on; hybrid policy): once the breaker is open, every check builds
//! the identity's entry and limit states locally and nothing else, so the
//! bytes the process holds after N identities, counted by a global
//! allocator wrapper, are what tracking them costs: identities with two
//! limits (global and one endpoint's), then identities with the global
//! limit alone.
//!
//! ```text
//! cargo run --release --example memory -p tally-client
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use tally_client::{FailurePolicy, Identity, Limiter, LimiterConfig, Mode};

/// The system allocator, counting the bytes held.
struct Counting;

static HELD: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only a
// counter is updated beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        HELD.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let identities = 100_000;
    let limiter = Limiter::builder([format!("redis://127.0.0.1:{port}")])
        .rules_toml(
            r#"
            [tiers.free]
            global = { limit = 1000, window_seconds = 60 }
            endpoints."GET /search" = { limit = 100, window_seconds = 60 }
            "#,
        )
        .expect("rules")
        .config(LimiterConfig {
            mode: Mode::Cached {
                sync_interval: Duration::from_millis(100),
            },
            policy: FailurePolicy::Hybrid,
            cache_capacity: 1_000_000,
            background_tasks: false,
            ..LimiterConfig::default()
        })
        .build()
        .await
        .expect("limiter");
    // Open the breaker first (five refused connections).
    let warm = Identity::new("user", "warm", "free");
    for _ in 0..10 {
        limiter.check(&warm, "GET /search", 1).await;
    }
    // Two limits (global and the endpoint's), then the global one alone
    // (an endpoint without a limit of its own), for other identities.
    for (endpoint, limits, prefix) in [("GET /search", 2, "u"), ("GET /", 1, "v")] {
        let before = HELD.load(Ordering::Relaxed);
        for i in 0..identities {
            let user = Identity::new("user", format!("{prefix}_{i:08}"), "free");
            limiter.check(&user, endpoint, 1).await;
        }
        let held = HELD.load(Ordering::Relaxed) - before;
        let states = identities * limits;
        println!(
            "{identities} identities with {limits} limit(s), {states} limit states: {held} bytes, \
             {:.0} bytes per identity, {:.0} per limit state",
            held as f64 / identities as f64,
            held as f64 / states as f64
        );
    }
}
