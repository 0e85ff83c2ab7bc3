//! The most used limiter libraries, unmodified, against tally and against
//! redis-server: Python's `limits` (fixed window, sliding-window counter,
//! moving window), rate-limiter-flexible's
//! RateLimiterRedis and rate-limit-redis's RedisStore, each driven through
//! its own client (tests/clients/). Each decides as it does on Redis, and
//! tally runs each library's script natively (recognised by the SHA1 the
//! library sends), with no call left to Lua. tests/run.sh installs the
//! libraries; a missing one fails the test (`tally_tests::tool_missing`).

use std::path::{Path, PathBuf};
use std::process::Command;

use tally_tests::cluster::run_program;
use tally_tests::{RedisServer, TestServer};

fn clients() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients")
}

/// Runs both client programs against the server on `port`: their output.
async fn decisions(port: u16) -> String {
    let node = clients().join("limiter_libraries.js");
    let (ok, from_node) =
        run_program("node", vec![node.display().to_string(), port.to_string()]).await;
    assert!(
        ok && from_node.trim_end().ends_with("OK"),
        "node: {from_node}"
    );
    let python = clients().join("limiter_limits.py");
    let (ok, from_python) = run_program(
        "python3",
        vec![python.display().to_string(), port.to_string()],
    )
    .await;
    assert!(
        ok && from_python.trim_end().ends_with("OK"),
        "python: {from_python}"
    );
    from_node + &from_python
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_libraries_decide_as_on_redis_and_run_natively() {
    let node_ready = Command::new("node").arg("--version").output().is_ok()
        && clients()
            .join("node_modules/rate-limiter-flexible")
            .is_dir()
        && clients().join("node_modules/rate-limit-redis").is_dir();
    let python_ready = Command::new("python3")
        .args(["-c", "import limits, redis"])
        .status()
        .is_ok_and(|s| s.success());
    if !node_ready || !python_ready {
        tally_tests::tool_missing(
            "the limiter libraries (npm ci --prefix tests/clients; pip install limits redis)",
        );
        return;
    }
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let on_redis = decisions(redis.addr.port()).await;
    let on_tally = decisions(tally.addr().port()).await;
    assert_eq!(on_tally, on_redis);

    let mut conn = tally.raw().await;
    let info = conn.line("INFO limiter_scripts").await;
    for (name, calls) in [
        ("limits_fixed_window", 6),
        ("limits_sliding_window", 5),
        ("limits_moving_window", 5),
        ("rate_limiter_flexible", 8),
        ("rate_limit_redis", 4),
    ] {
        let line = info
            .lines()
            .find(|l| l.starts_with(&format!("script_{name}:")))
            .unwrap_or_else(|| panic!("{name} in {info}"));
        assert!(
            line.ends_with(&format!("native_runs={calls},lua_runs=0")),
            "{line}"
        );
    }
}

/// rate-limiter-flexible's RateLimiterValkeyGlide loads its limiter as a
/// function library, through Valkey's `server` table (so redis-server 7.0
/// refuses it: `server` is Valkey's name), and consumes with FCALL. Against
/// tally it decides as the library means to: five points, then refusals,
/// then a block of blockDuration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limiter_flexible_over_valkey_glide_loads_its_functions_and_decides() {
    let ready = Command::new("node").arg("--version").output().is_ok()
        && clients().join("node_modules/@valkey/valkey-glide").is_dir();
    if !ready {
        tally_tests::tool_missing("@valkey/valkey-glide (npm ci --prefix tests/clients)");
        return;
    }
    let tally = TestServer::start_real_clock().await;
    let program = clients().join("limiter_glide.js");
    let (ok, output) = run_program(
        "node",
        vec![
            program.display().to_string(),
            tally.addr().port().to_string(),
        ],
    )
    .await;
    assert!(ok, "node: {output}");
    assert_eq!(
        output.lines().collect::<Vec<_>>(),
        [
            "glide allowed consumed=1 remaining=4 ttl_ok=true",
            "glide allowed consumed=2 remaining=3 ttl_ok=true",
            "glide allowed consumed=3 remaining=2 ttl_ok=true",
            "glide allowed consumed=4 remaining=1 ttl_ok=true",
            "glide allowed consumed=5 remaining=0 ttl_ok=true",
            "glide refused consumed=6 remaining=0",
            "glide refused consumed=7 remaining=0",
            "glide get consumed=7",
            "glide blocked ms_ok=true",
            "OK",
        ]
    );
    let mut conn = tally.raw().await;
    let libraries = conn.line("FUNCTION LIST").await;
    assert!(
        libraries.contains("ratelimiterflexible") && libraries.contains("consume"),
        "{libraries}"
    );
    // Its consume function is a known limiter script: every call but the
    // refused ones' ran natively (a block is decided by the client).
    let info = conn.line("INFO limiter_scripts").await;
    let line = info
        .lines()
        .find(|l| l.starts_with("script_rate_limiter_flexible_valkey_glide:"))
        .unwrap_or_else(|| panic!("{info}"));
    assert!(line.ends_with("native_runs=9,lua_runs=0"), "{line}");
}
