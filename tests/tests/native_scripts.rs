//! Property tests: for random arguments, prior stored values, TTLs and clock
//! values, a known limiter script run natively and the same script run in Lua
//! (`lua-native-scripts no`) give byte-identical replies and leave identical
//! store state (values and TTLs).

use proptest::prelude::*;
use tally_tests::twins::{argument, first_named, sha_of, window, Pair, Prior};

fn now() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (1_719_999_000i64..1_720_001_000).prop_map(|n| n.to_string()),
        2 => (1_719_999_000i64..1_720_001_000, 0u32..1000).prop_map(|(n, f)| format!("{n}.{f}")),
        1 => argument(),
    ]
}

/// A [`Prior`] as a gateway's keys might hold.
fn prior() -> impl Strategy<Value = Prior> {
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

#[test]
fn native_sliding_window_equals_lua() {
    let pair = Pair::start();
    let sha = sha_of("sliding_window");
    pair.check(300, &case(), |round, case| {
        let current = format!("rl:p:{round}:c");
        let (previous, previous_prior) = if case.same_key {
            (current.clone(), None)
        } else {
            (format!("rl:p:{round}:p"), case.previous.clone())
        };
        let args = [case.limit, case.window, case.now, case.cost];
        let (a, b) = pair.compare(
            round,
            &sha,
            &[current, previous],
            &args,
            &[case.current, previous_prior],
        );
        prop_assert_eq!(a, b);
        Ok(())
    });
    // The native path was actually taken, and Lua covered the rest.
    assert!(pair.native_runs("sliding_window") >= 100);
}

#[test]
fn native_server_time_sliding_window_equals_lua() {
    let pair = Pair::start();
    let sha = sha_of("sliding_window_server_time");
    pair.check(
        200,
        &(argument(), window(), argument(), prior(), prior()),
        |round, (limit, window, cost, current, previous)| {
            let keys = vec![format!("rl:st:{round}:c"), format!("rl:st:{round}:p")];
            let (a, b) = pair.compare(
                round,
                &sha,
                &keys,
                &[limit, window, cost],
                &[current, previous],
            );
            prop_assert_eq!(a, b);
            Ok(())
        },
    );
    assert!(pair.native_runs("sliding_window_server_time") >= 100);
}

#[test]
fn native_multi_limit_equals_lua() {
    let pair = Pair::start();
    let sha = sha_of("multi_limit");
    let limit_args = (
        argument(),
        window(),
        prop_oneof![4 => (0i64..5).prop_map(|n| n.to_string()), 1 => argument()],
    );
    pair.check(
        300,
        &(
            prop::collection::vec(limit_args, 1..4),
            prop::collection::vec(prior(), 6),
            prop::collection::vec(0usize..8, 6),
        ),
        |round, (limits, priors, names)| {
            // Key names drawn from a small set, so limits sometimes share keys.
            let keys: Vec<String> = names[..2 * limits.len()]
                .iter()
                .map(|n| format!("rl:ml:{round}:{n}"))
                .collect();
            let args: Vec<String> = limits.into_iter().flat_map(|(l, w, c)| [l, w, c]).collect();
            let priors = first_named(&keys, priors);
            let (a, b) = pair.compare(round, &sha, &keys, &args, &priors);
            prop_assert_eq!(a, b);
            Ok(())
        },
    );
    assert!(pair.native_runs("multi_limit") >= 50);
}

#[test]
fn native_lease_equals_lua() {
    let pair = Pair::start();
    let sha = sha_of("lease");
    // Mostly what the client sends (small whole numbers), sometimes what
    // only Lua handles.
    let small = || prop_oneof![8 => (0i64..30).prop_map(|n| n.to_string()), 1 => argument()];
    // limit, window, give back, want, cost
    let limit_args = (small(), window(), small(), small(), small());
    pair.check(
        300,
        &(
            prop::collection::vec(limit_args, 1..4),
            prop::collection::vec(prior(), 9),
            prop::collection::vec(0usize..6, 9),
        ),
        |round, (limits, priors, names)| {
            // Names from a small set, so the reserved-on key is often
            // another limit's (or the same limit's) window key, as the
            // client sends it.
            let keys: Vec<String> = names[..3 * limits.len()]
                .iter()
                .map(|n| format!("rl:lease:{round}:{n}"))
                .collect();
            let args: Vec<String> = limits
                .into_iter()
                .flat_map(|(l, w, back, want, cost)| [l, w, back, want, cost])
                .collect();
            let priors = first_named(&keys, priors);
            let (a, b) = pair.compare(round, &sha, &keys, &args, &priors);
            prop_assert_eq!(a, b);
            Ok(())
        },
    );
    let native = pair.native_runs("lease");
    assert!(native >= 100, "{native} native runs");
}
