//! The property tests' harness for the native twins of known scripts
//! (tests/tests/native_scripts.rs, tests/tests/native_library_scripts.rs):
//! two servers, one running the twins and one running Lua
//! (`lua-native-scripts no`), on clocks kept equal, and the arguments both
//! suites draw from.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::{RawConn, TestServer, T0_MS};

/// An argument as a gateway might send it, including forms only Lua parses.
pub fn argument() -> impl Strategy<Value = String> {
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

/// A window length in seconds as a gateway sends it, and forms only Lua
/// takes.
pub fn window() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::sample::select(vec![1i64, 2, 10, 60, 3600]).prop_map(|n| n.to_string()),
        1 => Just("0".to_string()),
        1 => Just("-60".to_string()),
        1 => Just("1.5".to_string()),
    ]
}

/// A value already stored under a counter key, with an optional TTL (ms).
pub type Prior = Option<(String, Option<u64>)>;

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
pub struct Pair {
    runtime: tokio::runtime::Runtime,
    native: TestServer,
    lua: TestServer,
}

impl Pair {
    /// Starts both servers.
    pub fn start() -> Pair {
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
    pub fn compare(
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

    /// Both servers' replies to the same `commands` at clock offset
    /// `round` (for values GET cannot show, such as lists).
    pub fn compare_commands(
        &self,
        round: usize,
        commands: &[Vec<String>],
    ) -> (Vec<String>, Vec<String>) {
        let at = T0_MS + round as u64 * 7_919;
        self.native.clock.set_ms(at);
        self.lua.clock.set_ms(at);
        self.runtime.block_on(async {
            let mut replies = Vec::new();
            for server in [&self.native, &self.lua] {
                let mut conn = server.raw().await;
                let mut seen = Vec::new();
                for command in commands {
                    seen.push(String::from_utf8_lossy(&conn.cmd(command).await).into_owned());
                }
                replies.push(seen);
            }
            let lua = replies.pop().unwrap_or_default();
            (replies.pop().unwrap_or_default(), lua)
        })
    }

    /// Runs `test` on `cases` values drawn from `strategy`, each with its
    /// round number (1, 2, ...: the clock offset and a fresh key prefix).
    pub fn check<S: Strategy>(
        &self,
        cases: u32,
        strategy: &S,
        test: impl Fn(usize, S::Value) -> Result<(), TestCaseError>,
    ) {
        let rounds = std::sync::atomic::AtomicUsize::new(0);
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases,
            ..ProptestConfig::default()
        });
        runner
            .run(strategy, |value| {
                test(
                    rounds.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1,
                    value,
                )
            })
            .unwrap();
    }

    /// INFO's count of native runs of known script `name`.
    pub fn native_runs(&self, name: &str) -> u64 {
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
pub fn first_named(keys: &[String], priors: Vec<Prior>) -> Vec<Prior> {
    let mut seen = std::collections::HashSet::new();
    keys.iter()
        .zip(priors)
        .map(|(k, p)| if seen.insert(k.as_str()) { p } else { None })
        .collect()
}

/// The SHA1 of known script `name`.
pub fn sha_of(name: &str) -> String {
    let known = tally_lua::SCRIPTS
        .iter()
        .find(|s| s.name == name)
        .expect("known script");
    tally_lua::sha1_hex(known.source)
}
