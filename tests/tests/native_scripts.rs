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
type Prior = Option<(String, Option<u64>)>;

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
    let pair = Pair::new();
    let sha = sha_of("sliding_window");
    let rounds = std::sync::atomic::AtomicUsize::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        ..ProptestConfig::default()
    });
    runner
        .run(&case(), |case| {
            let round = rounds.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
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
        })
        .unwrap();
    // The native path was actually taken, and Lua covered the rest.
    assert!(pair.native_runs("sliding_window") >= 100);
}

/// Runs `EVALSHA sha <keys> <args>` three times, then reads every key back.
async fn observe_generic(
    conn: &mut RawConn,
    sha: &str,
    keys: &[String],
    args: &[String],
    priors: &[Option<(String, Option<u64>)>],
) -> Vec<Vec<u8>> {
    for (key, prior) in keys.iter().zip(priors) {
        if let Some((value, ttl)) = prior {
            conn.cmd(&["SET", key, value]).await;
            if let Some(ms) = ttl {
                conn.cmd(&["PEXPIRE", key, &ms.to_string()]).await;
            }
        }
    }
    let mut command = vec![
        "EVALSHA".to_string(),
        sha.to_string(),
        keys.len().to_string(),
    ];
    command.extend(keys.iter().cloned());
    command.extend(args.iter().cloned());
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(conn.cmd(&command).await);
    }
    for key in keys {
        seen.push(conn.cmd(&["GET", key]).await);
        seen.push(conn.cmd(&["PTTL", key]).await);
    }
    seen
}

/// A server running the twins and one running Lua, on clocks kept equal.
struct Pair {
    runtime: tokio::runtime::Runtime,
    native: TestServer,
    lua: TestServer,
}

impl Pair {
    fn new() -> Pair {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (native, lua) = runtime.block_on(async {
            (
                TestServer::start().await,
                TestServer::start_with(|c| c.lua_native_scripts = false).await,
            )
        });
        Pair {
            runtime,
            native,
            lua,
        }
    }

    /// Both servers' observations of one case at clock offset `round`.
    fn compare(
        &self,
        round: usize,
        sha: &str,
        keys: &[String],
        args: &[String],
        priors: &[Option<(String, Option<u64>)>],
    ) -> (Vec<String>, Vec<String>) {
        // Microsecond-level clock values, the same on both sides.
        let at = T0_MS + round as u64 * 7_919;
        self.native.clock.set_ms(at);
        self.lua.clock.set_ms(at);
        let (a, b) = self.runtime.block_on(async {
            let mut x = self.native.raw().await;
            let mut y = self.lua.raw().await;
            (
                observe_generic(&mut x, sha, keys, args, priors).await,
                observe_generic(&mut y, sha, keys, args, priors).await,
            )
        });
        let show = |v: Vec<Vec<u8>>| -> Vec<String> {
            v.into_iter()
                .map(|r| String::from_utf8_lossy(&r).into_owned())
                .collect()
        };
        (show(a), show(b))
    }

    fn native_runs(&self, name: &str) -> u64 {
        let info = self.runtime.block_on(async {
            let mut conn = self.native.raw().await;
            conn.line("INFO limiter_scripts").await
        });
        info.lines()
            .find(|l| l.starts_with(&format!("script_{name}:")))
            .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("native_runs=")))
            .and_then(|n| n.parse().ok())
            .expect("INFO reports the script")
    }
}

/// `priors` kept only where a key is named first (a key named twice is
/// set once).
fn first_named(keys: &[String], priors: Vec<Prior>) -> Vec<Prior> {
    let mut seen = std::collections::HashSet::new();
    keys.iter()
        .zip(priors)
        .map(|(k, p)| if seen.insert(k.as_str()) { p } else { None })
        .collect()
}

fn sha_of(name: &str) -> String {
    let known = tally_lua::SCRIPTS
        .iter()
        .find(|s| s.name == name)
        .expect("known script");
    tally_lua::sha1_hex(known.source)
}

#[test]
fn native_server_time_sliding_window_equals_lua() {
    let pair = Pair::new();
    let sha = sha_of("sliding_window_server_time");
    let rounds = std::sync::atomic::AtomicUsize::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 200,
        ..ProptestConfig::default()
    });
    runner
        .run(
            &(argument(), window(), argument(), prior(), prior()),
            |(limit, window, cost, current, previous)| {
                let round = rounds.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
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
        )
        .unwrap();
    assert!(pair.native_runs("sliding_window_server_time") >= 100);
}

#[test]
fn native_multi_limit_equals_lua() {
    let pair = Pair::new();
    let sha = sha_of("multi_limit");
    let rounds = std::sync::atomic::AtomicUsize::new(0);
    let limit_args = (
        argument(),
        window(),
        prop_oneof![4 => (0i64..5).prop_map(|n| n.to_string()), 1 => argument()],
    );
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        ..ProptestConfig::default()
    });
    runner
        .run(
            &(
                prop::collection::vec(limit_args, 1..4),
                prop::collection::vec(prior(), 6),
                prop::collection::vec(0usize..8, 6),
            ),
            |(limits, priors, names)| {
                let round = rounds.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                // Key names drawn from a small set, so limits sometimes share keys.
                let keys: Vec<String> = names[..2 * limits.len()]
                    .iter()
                    .map(|n| format!("rl:ml:{round}:{n}"))
                    .collect();
                let args: Vec<String> =
                    limits.into_iter().flat_map(|(l, w, c)| [l, w, c]).collect();
                let priors = first_named(&keys, priors);
                let (a, b) = pair.compare(round, &sha, &keys, &args, &priors);
                prop_assert_eq!(a, b);
                Ok(())
            },
        )
        .unwrap();
    assert!(pair.native_runs("multi_limit") >= 50);
}

#[test]
fn native_lease_equals_lua() {
    let pair = Pair::new();
    let sha = sha_of("lease");
    let rounds = std::sync::atomic::AtomicUsize::new(0);
    // Mostly what the client sends (small whole numbers), sometimes what
    // only Lua handles.
    let small = || prop_oneof![8 => (0i64..30).prop_map(|n| n.to_string()), 1 => argument()];
    // limit, window, give back, want, cost
    let limit_args = (small(), window(), small(), small(), small());
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        ..ProptestConfig::default()
    });
    runner
        .run(
            &(
                prop::collection::vec(limit_args, 1..4),
                prop::collection::vec(prior(), 9),
                prop::collection::vec(0usize..6, 9),
            ),
            |(limits, priors, names)| {
                let round = rounds.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
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
        )
        .unwrap();
    let native = pair.native_runs("lease");
    assert!(native >= 100, "{native} native runs");
}

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
    let pair = Pair::new();
    let sha = sha_of(name);
    let rounds = std::sync::atomic::AtomicUsize::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 250,
        ..ProptestConfig::default()
    });
    runner
        .run(
            &(
                prop::collection::vec(library_argument(), arguments),
                library_prior(),
            ),
            |(args, prior)| {
                let round = rounds.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                let keys = vec![format!("rl:{name}:{round}")];
                let (a, b) = pair.compare(round, &sha, &keys, &args, &[prior]);
                prop_assert_eq!(a, b);
                Ok(())
            },
        )
        .unwrap();
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
    let pair = Pair::new();
    let sha = sha_of("spring_cloud_gateway");
    let rounds = std::sync::atomic::AtomicUsize::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 250,
        ..ProptestConfig::default()
    });
    // ARGV[3]: the gateway sends "" (the script reads TIME); a caller may
    // send its own clock.
    let now = prop_oneof![
        6 => Just(String::new()),
        1 => (1_719_999_990i64..1_720_000_010).prop_map(|n| n.to_string()),
        1 => (1_719_999_990i64..1_720_000_010, 0u32..1000).prop_map(|(n, f)| format!("{n}.{f}")),
        1 => argument(),
    ];
    runner
        .run(
            &(
                (bucket_number(), bucket_number(), now, bucket_number()),
                prop::option::of((bucket_number(), prop::option::of(1u64..20_000))),
                bucket_timestamp(),
            ),
            |((rate, capacity, now, requested), tokens, timestamp)| {
                let round = rounds.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                let prefix = format!("request_rate_limiter.{{route.{round}}}");
                let keys = vec![format!("{prefix}.tokens"), format!("{prefix}.timestamp")];
                let args = [rate, capacity, now, requested];
                let (a, b) = pair.compare(round, &sha, &keys, &args, &[tokens, timestamp]);
                prop_assert_eq!(a, b);
                Ok(())
            },
        )
        .unwrap();
    let native = pair.native_runs("spring_cloud_gateway");
    assert!(native >= 200, "{native} native runs");
}

#[test]
fn native_limits_sliding_window_equals_lua() {
    let pair = Pair::new();
    let sha = sha_of("limits_sliding_window");
    let rounds = std::sync::atomic::AtomicUsize::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        ..ProptestConfig::default()
    });
    let small = || prop_oneof![8 => (0i64..20).prop_map(|n| n.to_string()), 1 => argument()];
    runner
        .run(
            &(
                (small(), window(), small()),
                library_prior(),
                library_prior(),
                prop::bool::weighted(0.03),
            ),
            |((limit, window, amount), previous, current, same_key)| {
                let round = rounds.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
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
        )
        .unwrap();
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
    let pair = Pair::new();
    let sha = sha_of(name);
    let rounds = std::sync::atomic::AtomicUsize::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 250,
        ..ProptestConfig::default()
    });
    let small =
        |upto: i64| prop_oneof![8 => (0..upto).prop_map(|n| n.to_string()), 1 => argument()];
    // go-redis sends the period as Go formats a float64 of seconds.
    let period = prop_oneof![
        4 => prop::sample::select(vec!["1", "60", "3600", "0.5", "0.001"]).prop_map(String::from),
        1 => argument(),
    ];
    runner
        .run(
            &((small(20), small(100), period, small(6)), stored_tat()),
            |((burst, rate, period, cost), tat)| {
                let round = rounds.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                let keys = vec![format!("rate:{name}:{round}")];
                let (a, b) = pair.compare(round, &sha, &keys, &[burst, rate, period, cost], &[tat]);
                prop_assert_eq!(a, b);
                Ok(())
            },
        )
        .unwrap();
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
    let pair = Pair::new();
    let names = [
        "bucket4j_set_nx_px",
        "bucket4j_set_nx",
        "bucket4j_compare_and_swap_px",
        "bucket4j_compare_and_swap",
    ];
    let shas: Vec<String> = names.iter().map(|n| sha_of(n)).collect();
    let rounds = std::sync::atomic::AtomicUsize::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        ..ProptestConfig::default()
    });
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
    runner
        .run(
            &(0usize..4, state(), state(), ttl, prior),
            |(script, first, second, ttl, prior)| {
                let round = rounds.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
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
        )
        .unwrap();
    for name in names {
        let native = pair.native_runs(name);
        assert!(native >= 40, "{native} native runs of {name}");
    }
}
