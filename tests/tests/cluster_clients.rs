//! Unmodified cluster clients of other languages against three tally nodes
//! created with `redis-cli --cluster create`: redis-py's `RedisCluster`
//! and ioredis's `Cluster` (tests/clients/), each discovering the slots,
//! routing keys to every node, running the sliding-window limiter through
//! EVALSHA and pipelining. A client that is not installed fails the test
//! (tests/run.sh installs both), unless skipping was asked for
//! (`tally_tests::tool_missing`).

use std::path::Path;
use std::process::Command;

use tally_tests::cluster::{address, create, node_on_free_ports, port_of, run_program};

/// Whether a client can run here (see `tally_tests::tool_missing`).
fn available(what: &str, ready: bool) -> bool {
    if !ready {
        tally_tests::tool_missing(what);
    }
    ready
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_and_ioredis_cluster_clients_work_unmodified() {
    let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients");
    let python = available(
        "redis-py",
        Command::new("python3")
            .args(["-c", "import redis.cluster"])
            .status()
            .is_ok_and(|s| s.success()),
    );
    let node = available(
        "node with ioredis (npm install --prefix tests/clients ioredis)",
        Command::new("node").arg("--version").output().is_ok()
            && clients.join("node_modules/ioredis").is_dir(),
    );
    if !python && !node {
        return;
    }
    let nodes = vec![
        node_on_free_ports().await,
        node_on_free_ports().await,
        node_on_free_ports().await,
    ];
    let addresses: Vec<String> = nodes.iter().map(address).collect();
    create(&addresses).await;
    let port = port_of(&addresses[0]);
    // lua/scripts/sliding_window.lua as shipped: the server runs it natively by its SHA.
    let seed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../lua/scripts/sliding_window.lua")
        .display()
        .to_string();
    if python {
        let script = clients.join("cluster_redis_py.py");
        let (ok, output) = run_program(
            "python3",
            vec![script.display().to_string(), port.clone(), seed.clone()],
        )
        .await;
        assert!(
            ok && output.trim_end().ends_with("OK"),
            "redis-py: {output}"
        );
    }
    if node {
        let script = clients.join("cluster_ioredis.js");
        let (ok, output) =
            run_program("node", vec![script.display().to_string(), port, seed]).await;
        assert!(ok && output.trim_end().ends_with("OK"), "ioredis: {output}");
    }
    for handle in nodes {
        handle.shutdown().await;
    }
}
