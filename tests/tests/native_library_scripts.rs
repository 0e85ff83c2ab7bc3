//! Property tests for the limiter libraries' scripts tally runs natively
//! (`tally_lua::SCRIPTS` past tally's own): for random arguments and stored
//! values, the native run and the Lua run (`lua-native-scripts no`) give
//! byte-identical replies and leave identical store state (values and TTLs).

use proptest::prelude::*;
use tally_tests::twins::{argument, sha_of, window, Pair, Prior};

/// An argument of the libraries' scripts: mostly what their clients send
/// (small whole numbers), sometimes what only Lua handles.
fn library_argument() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => (0i64..100).prop_map(|n| n.to_string()),
        2 => prop::sample::select(vec![1000i64, 60_000, 3_600_000]).prop_map(|n| n.to_string()),
        1 => Just("99999999999999".to_string()),
        1 => Just("100000000000000".to_string()),
        1 => Just("007".to_string()),
        2 => argument(),
    ]
}

/// A key as the libraries' scripts find it: missing, a counter with or
/// without a TTL (sometimes at its last millisecond), or what only Lua
/// handles.
fn library_prior() -> impl Strategy<Value = Prior> {
    prop::option::of((
        prop_oneof![
            6 => (0i64..200).prop_map(|n| n.to_string()),
            1 => Just("-3".to_string()),
            1 => Just("abc".to_string()),
            1 => Just("9007199254740992".to_string()),
            1 => Just(i64::MAX.to_string()),
        ],
        prop_oneof![
            2 => Just(None),
            4 => (1u64..120_000).prop_map(Some),
            1 => Just(Some(1)),
        ],
    ))
}

/// One library script against its Lua run: `arguments` ARGV from
/// [`library_argument`], one key.
fn library_script_equals_lua(name: &str, arguments: usize) {
    let pair = Pair::start();
    let sha = sha_of(name);
    pair.check(
        250,
        &(
            prop::collection::vec(library_argument(), arguments),
            library_prior(),
        ),
        |round, (args, prior)| {
            let keys = vec![format!("rl:{name}:{round}")];
            let (a, b) = pair.compare(round, &sha, &keys, &args, &[prior]);
            prop_assert_eq!(a, b);
            Ok(())
        },
    );
    let native = pair.native_runs(name);
    // Far below what the inputs give (about 350 to 550 of 750 runs), so the
    // count proves the native path ran without depending on the draw.
    assert!(native >= 150, "{native} native runs of {name}");
}

#[test]
fn native_limits_fixed_window_equals_lua() {
    library_script_equals_lua("limits_fixed_window", 2);
}

#[test]
fn native_rate_limiter_flexible_valkey_glide_equals_lua() {
    library_script_equals_lua("rate_limiter_flexible_valkey_glide", 2);
}

#[test]
fn native_rate_limit_redis_equals_lua() {
    library_script_equals_lua("rate_limit_redis", 1);
}

#[test]
fn native_rate_limiter_flexible_equals_lua() {
    // The package sends points, duration, and two more the script ignores.
    library_script_equals_lua("rate_limiter_flexible", 4);
}

/// A number Spring Cloud Gateway's script reads or is sent: whole numbers
/// as configured, fractions, and forms only Lua parses.
fn bucket_number() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (0i64..50).prop_map(|n| n.to_string()),
        2 => (0i64..50, 0u32..100).prop_map(|(i, f)| format!("{i}.{f}")),
        1 => Just("0.10000000000000001".to_string()),
        1 => argument(),
    ]
}

/// A stored timestamp near the servers' clock (T0 is 1,720,000,000 s).
fn bucket_timestamp() -> impl Strategy<Value = Prior> {
    prop::option::of((
        prop_oneof![
            4 => (1_719_999_900i64..1_720_000_100).prop_map(|n| n.to_string()),
            1 => (1_719_999_900i64..1_720_000_100, 0u32..10).prop_map(|(n, f)| format!("{n}.{f}")),
            1 => argument(),
        ],
        prop::option::of(1u64..20_000),
    ))
}

#[test]
fn native_spring_cloud_gateway_equals_lua() {
    let pair = Pair::start();
    let sha = sha_of("spring_cloud_gateway");
    // ARGV[3]: the gateway sends "" (the script reads TIME); a caller may
    // send its own clock.
    let now = prop_oneof![
        6 => Just(String::new()),
        1 => (1_719_999_990i64..1_720_000_010).prop_map(|n| n.to_string()),
        1 => (1_719_999_990i64..1_720_000_010, 0u32..1000).prop_map(|(n, f)| format!("{n}.{f}")),
        1 => argument(),
    ];
    pair.check(
        250,
        &(
            (bucket_number(), bucket_number(), now, bucket_number()),
            prop::option::of((bucket_number(), prop::option::of(1u64..20_000))),
            bucket_timestamp(),
        ),
        |round, ((rate, capacity, now, requested), tokens, timestamp)| {
            let prefix = format!("request_rate_limiter.{{route.{round}}}");
            let keys = vec![format!("{prefix}.tokens"), format!("{prefix}.timestamp")];
            let args = [rate, capacity, now, requested];
            let (a, b) = pair.compare(round, &sha, &keys, &args, &[tokens, timestamp]);
            prop_assert_eq!(a, b);
            Ok(())
        },
    );
    let native = pair.native_runs("spring_cloud_gateway");
    assert!(native >= 200, "{native} native runs");
}

#[test]
fn native_limits_sliding_window_equals_lua() {
    let pair = Pair::start();
    let sha = sha_of("limits_sliding_window");
    let small = || prop_oneof![8 => (0i64..20).prop_map(|n| n.to_string()), 1 => argument()];
    pair.check(
        300,
        &(
            (small(), window(), small()),
            library_prior(),
            library_prior(),
            prop::bool::weighted(0.03),
        ),
        |round, ((limit, window, amount), previous, current, same_key)| {
            // limits names the windows `LIMITER/<key>/<limit>/<window>/<n>`.
            let current_key = format!("LIMITS:LIMITER/{round}/10/60/1");
            let (previous_key, previous) = if same_key {
                (current_key.clone(), None)
            } else {
                (format!("LIMITS:LIMITER/{round}/10/60/0"), previous)
            };
            let (a, b) = pair.compare(
                round,
                &sha,
                &[previous_key, current_key],
                &[limit, window, amount],
                &[previous, current],
            );
            prop_assert_eq!(a, b);
            Ok(())
        },
    );
    let native = pair.native_runs("limits_sliding_window");
    assert!(native >= 200, "{native} native runs");
}

/// A TAT as redis_rate stores it: seconds since 2017 near the servers'
/// clock (T0 is 236,771,200 s after 2017-01-01), written by Lua as `%.17g`.
fn stored_tat() -> impl Strategy<Value = Prior> {
    prop::option::of((
        prop_oneof![
            4 => (-3000i64..3000).prop_map(|ms| format!("{:.17}", 236_771_200.0 + ms as f64 / 1000.0)),
            2 => (-3000i64..3000).prop_map(|ms| (236_771_200_000 + ms).to_string()[..9].to_string()),
            1 => argument(),
        ],
        prop::option::of(1u64..5_000),
    ))
}

fn redis_rate_script_equals_lua(name: &str) {
    let pair = Pair::start();
    let sha = sha_of(name);
    let small =
        |upto: i64| prop_oneof![8 => (0..upto).prop_map(|n| n.to_string()), 1 => argument()];
    // go-redis sends the period as Go formats a float64 of seconds.
    let period = prop_oneof![
        4 => prop::sample::select(vec!["1", "60", "3600", "0.5", "0.001"]).prop_map(String::from),
        1 => argument(),
    ];
    pair.check(
        250,
        &((small(20), small(100), period, small(6)), stored_tat()),
        |round, ((burst, rate, period, cost), tat)| {
            let keys = vec![format!("rate:{name}:{round}")];
            let (a, b) = pair.compare(round, &sha, &keys, &[burst, rate, period, cost], &[tat]);
            prop_assert_eq!(a, b);
            Ok(())
        },
    );
    let native = pair.native_runs(name);
    assert!(native >= 200, "{native} native runs of {name}");
}

#[test]
fn native_redis_rate_allow_n_equals_lua() {
    redis_rate_script_equals_lua("redis_rate_allow_n");
}

#[test]
fn native_redis_rate_allow_at_most_equals_lua() {
    redis_rate_script_equals_lua("redis_rate_allow_at_most");
}

#[test]
fn native_bucket4j_scripts_equal_lua() {
    let pair = Pair::start();
    let names = [
        "bucket4j_set_nx_px",
        "bucket4j_set_nx",
        "bucket4j_compare_and_swap_px",
        "bucket4j_compare_and_swap",
    ];
    let shas: Vec<String> = names.iter().map(|n| sha_of(n)).collect();
    // Serialized bucket states (a few, so that the expected one often is
    // the stored one), integers among them.
    let state = || {
        prop::sample::select(vec![
            "\u{1}\u{0}state-a",
            "state-b",
            "state-c",
            "7",
            "",
            "07",
        ])
        .prop_map(String::from)
    };
    let ttl = prop_oneof![
        6 => (1i64..100_000).prop_map(|n| n.to_string()),
        1 => argument(),
    ];
    let prior = prop::option::of((state(), prop::option::of(1u64..100_000)));
    pair.check(
        300,
        &(0usize..4, state(), state(), ttl, prior),
        |round, (script, first, second, ttl, prior)| {
            let keys = vec![format!("bucket4j:{round}")];
            let args = match script {
                0 => vec![first, ttl],
                1 => vec![first],
                2 => vec![first, second, ttl],
                _ => vec![first, second],
            };
            let (a, b) = pair.compare(round, &shas[script], &keys, &args, &[prior]);
            prop_assert_eq!(a, b);
            Ok(())
        },
    );
    for name in names {
        let native = pair.native_runs(name);
        assert!(native >= 40, "{native} native runs of {name}");
    }
}

#[test]
fn native_limits_moving_window_equals_lua() {
    let pair = Pair::start();
    let sha = sha_of("limits_moving_window");
    // The caller's clock as Python's time.time() prints it, near the
    // entries' timestamps.
    let now = prop_oneof![
        4 => (0u32..120_000).prop_map(|ms| format!("{}", 1_720_000_000.0 + f64::from(ms) / 1000.0)),
        1 => argument(),
    ];
    let small =
        |upto: i64| prop_oneof![8 => (0..upto).prop_map(|n| n.to_string()), 1 => argument()];
    // A list of hit timestamps, newest first, as earlier hits left it
    // (sometimes something else under the key).
    let entries = prop_oneof![
        6 => prop::collection::vec(0u32..120_000, 0..12).prop_map(|mut ms| {
            ms.sort_unstable_by(|a, b| b.cmp(a));
            ms.iter().map(|m| format!("{}", 1_720_000_000.0 + f64::from(*m) / 1000.0)).collect::<Vec<_>>()
        }),
        1 => Just(vec!["junk".to_string()]),
    ];
    let string_instead = prop::bool::weighted(0.05);
    pair.check(
        250,
        &(
            (now, small(12), window(), small(6)),
            entries,
            string_instead,
            prop::option::of(1u64..100_000),
        ),
        |round, ((now, limit, expiry, amount), entries, string_instead, ttl)| {
            let key = format!("LIMITS:LIMITER/{round}/10/1/minute");
            let mut commands: Vec<Vec<String>> = Vec::new();
            if string_instead {
                commands.push(vec!["SET".into(), key.clone(), "1".into()]);
            } else if !entries.is_empty() {
                let mut push = vec!["RPUSH".to_string(), key.clone()];
                push.extend(entries);
                commands.push(push);
            }
            if let Some(ms) = ttl {
                commands.push(vec!["PEXPIRE".into(), key.clone(), ms.to_string()]);
            }
            let call = vec![
                "EVALSHA".to_string(),
                sha.clone(),
                "1".into(),
                key.clone(),
                now,
                limit,
                expiry,
                amount,
            ];
            for _ in 0..3 {
                commands.push(call.clone());
            }
            commands.push(vec!["TYPE".into(), key.clone()]);
            commands.push(vec!["LRANGE".into(), key.clone(), "0".into(), "-1".into()]);
            commands.push(vec!["PTTL".into(), key]);
            let (a, b) = pair.compare_commands(round, &commands);
            prop_assert_eq!(a, b);
            Ok(())
        },
    );
    let native = pair.native_runs("limits_moving_window");
    assert!(native >= 200, "{native} native runs");
}
