//! Property tests: for random arguments, prior stored values, TTLs and clock
//! values, a known limiter script run natively and the same script run in Lua
//! (`lua-native-scripts no`) give byte-identical replies and leave identical
//! store state (values and TTLs).

use proptest::prelude::*;
use tally_tests::{RawConn, TestServer, T0_MS};

/// An argument as a gateway might send it, including forms only Lua parses.
fn argument() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (0i64..2000).prop_map(|n| n.to_string()),
        2 => (-50i64..0).prop_map(|n| n.to_string()),
        2 => (0i64..2000, 0u32..100).prop_map(|(i, f)| format!("{i}.{f}")),
        1 => Just("0".to_string()),
        1 => Just("abc".to_string()),
        1 => Just(" 7".to_string()),
        1 => Just("0x10".to_string()),
        1 => Just("1e3".to_string()),
        1 => Just(String::new()),
    ]
}

fn window() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::sample::select(vec![1i64, 2, 10, 60, 3600]).prop_map(|n| n.to_string()),
        1 => Just("0".to_string()),
        1 => Just("-60".to_string()),
        1 => Just("1.5".to_string()),
    ]
}

fn now() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (1_719_999_000i64..1_720_001_000).prop_map(|n| n.to_string()),
        2 => (1_719_999_000i64..1_720_001_000, 0u32..1000).prop_map(|(n, f)| format!("{n}.{f}")),
        1 => argument(),
    ]
}

/// A value already stored under a counter key, with an optional TTL (ms).
fn prior() -> impl Strategy<Value = Option<(String, Option<u64>)>> {
    prop::option::of((
        prop_oneof![
            6 => (0i64..3000).prop_map(|n| n.to_string()),
            1 => Just("-3".to_string()),
            1 => Just("3.5".to_string()),
            1 => Just("abc".to_string()),
            1 => Just(i64::MAX.to_string()),
        ],
        prop::option::of(1u64..500_000),
    ))
}

#[derive(Debug, Clone)]
struct Case {
    limit: String,
    window: String,
    now: String,
    cost: String,
    current: Option<(String, Option<u64>)>,
    previous: Option<(String, Option<u64>)>,
    same_key: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        argument(),
        window(),
        now(),
        argument(),
        prior(),
        prior(),
        prop::bool::weighted(0.05),
    )
        .prop_map(
            |(limit, window, now, cost, current, previous, same_key)| Case {
                limit,
                window,
                now,
                cost,
                current,
                previous,
                same_key,
            },
        )
}

/// Runs one case on one server and returns everything observable.
async fn observe(conn: &mut RawConn, sha: &str, case: &Case, round: usize) -> Vec<Vec<u8>> {
    let current = format!("rl:p:{round}:c");
    let previous = if case.same_key {
        current.clone()
    } else {
        format!("rl:p:{round}:p")
    };
    for (key, prior) in [(&previous, &case.previous), (&current, &case.current)] {
        if let Some((value, ttl)) = prior {
            conn.cmd(&["SET", key, value]).await;
            if let Some(ms) = ttl {
                conn.cmd(&["PEXPIRE", key, &ms.to_string()]).await;
            }
        }
    }
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(
            conn.cmd(&[
                "EVALSHA",
                sha,
                "2",
                &current,
                &previous,
                &case.limit,
                &case.window,
                &case.now,
                &case.cost,
            ])
            .await,
        );
    }
    for key in [&current, &previous] {
        seen.push(conn.cmd(&["GET", key]).await);
        seen.push(conn.cmd(&["PTTL", key]).await);
    }
    seen
}

#[test]
fn native_sliding_window_equals_lua() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (native, lua) = runtime.block_on(async {
        let native = TestServer::start().await;
        let lua = TestServer::start_with(|c| c.lua_native_scripts = false).await;
        (native, lua)
    });
    let sha = tally_lua::sha1_hex(tally_lua::SCRIPTS[0].source);
    let rounds = std::sync::atomic::AtomicUsize::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        ..ProptestConfig::default()
    });
    runner
        .run(&case(), |case| {
            let round = rounds.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            // The same server time on both sides, moved between cases.
            native.clock.set_ms(T0_MS + round as u64 * 7_919);
            lua.clock.set_ms(T0_MS + round as u64 * 7_919);
            let (a, b) = runtime.block_on(async {
                let mut x = native.raw().await;
                let mut y = lua.raw().await;
                (
                    observe(&mut x, &sha, &case, round).await,
                    observe(&mut y, &sha, &case, round).await,
                )
            });
            let show = |v: &Vec<Vec<u8>>| -> Vec<String> {
                v.iter()
                    .map(|r| String::from_utf8_lossy(r).into_owned())
                    .collect()
            };
            prop_assert_eq!(show(&a), show(&b));
            Ok(())
        })
        .unwrap();
    let info = runtime.block_on(async {
        let mut conn = native.raw().await;
        conn.line("INFO limiter_scripts").await
    });
    // The native path was actually taken, and Lua covered the rest.
    let line = info
        .lines()
        .find(|l| l.starts_with("script_sliding_window:"))
        .expect("INFO reports the script");
    let native_runs: u64 = line
        .split(',')
        .find_map(|f| f.strip_prefix("native_runs="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(native_runs >= 100, "{line}");
}
