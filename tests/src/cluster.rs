//! Helpers for cluster tests: tally nodes on free ports, `redis-cli
//! --cluster` run off the async runtime, waiting for a cluster to settle.

use std::time::{Duration, Instant};

use tally_server::{Config, Server, ServerHandle};

use crate::{free_local_port, scratch_dir, RawConn};

/// A cluster node's configuration with its files in `dir`.
pub fn node_config(dir: &str) -> Config {
    Config {
        port: 0,
        dir: dir.to_string(),
        save_points: Vec::new(),
        cluster_enabled: true,
        ..Config::default()
    }
}

/// Starts a cluster node with `config(bus_port)` on a free bus port and
/// returns it with that port. A port found free can be taken by another
/// test before the node binds it (tests run side by side): then another
/// port is tried.
pub async fn start_on_free_bus_port(config: impl Fn(u16) -> Config) -> (ServerHandle, u16) {
    for _ in 0..20 {
        let bus_port = free_local_port();
        match Server::new(config(bus_port)).start().await {
            Ok(handle) => return (handle, bus_port),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
            Err(e) => panic!("a cluster node starts: {e}"),
        }
    }
    panic!("no free bus port in 20 tries");
}

/// Starts a tally cluster node on free ports (client and bus), with a
/// 2 s node timeout.
pub async fn node_on_free_ports() -> ServerHandle {
    let (handle, _) = start_on_free_bus_port(|bus_port| Config {
        cluster_port: bus_port,
        cluster_node_timeout: 2000,
        ..node_config(&scratch_dir())
    })
    .await;
    handle
}

/// `127.0.0.1:<port>` of a node.
pub fn address(handle: &ServerHandle) -> String {
    format!("127.0.0.1:{}", handle.local_addr().port())
}

/// The port part of `ip:port`.
pub fn port_of(address: &str) -> String {
    address.rsplit(':').next().unwrap_or_default().to_string()
}

/// Runs `program` with `args` off the async runtime: whether it exited
/// with success, and its stdout and stderr.
pub async fn run_program(program: &'static str, args: Vec<String>) -> (bool, String) {
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(program)
            .args(&args)
            .output()
            .unwrap_or_else(|e| panic!("{program} runs: {e}"));
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    })
    .await
    .expect("joined")
}

/// Runs `redis-cli` with `args` off the async runtime; stdout and stderr.
pub async fn redis_cli(args: Vec<String>) -> String {
    run_program("redis-cli", args).await.1
}

/// One command to the node at `address` through `redis-cli`.
pub async fn cli_at(address: &str, args: &[&str]) -> String {
    let mut all = vec!["-p".to_string(), port_of(address)];
    all.extend(args.iter().map(|a| a.to_string()));
    redis_cli(all).await
}

/// `redis-cli --cluster create` over `addresses` (asserting every slot is
/// covered), then waits until every node reports `cluster_state:ok`.
pub async fn create(addresses: &[String]) {
    create_with(addresses, &[]).await;
}

/// [`create`] with more `redis-cli --cluster create` options (such as
/// `--cluster-replicas 1`); returns what redis-cli printed.
pub async fn create_with(addresses: &[String], options: &[&str]) -> String {
    let mut args = vec!["--cluster".to_string(), "create".to_string()];
    args.extend(addresses.iter().cloned());
    args.extend(options.iter().map(|o| o.to_string()));
    args.push("--cluster-yes".to_string());
    let created = redis_cli(args).await;
    assert!(
        created.contains("[OK] All 16384 slots covered."),
        "{created}"
    );
    wait_until(addresses, "CLUSTER INFO", "cluster_state:ok").await;
    created
}

/// Waits (up to 30 s) until `command`'s reply on every node contains `text`.
pub async fn wait_until(addresses: &[String], command: &str, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let words: Vec<&str> = command.split(' ').collect();
    for address in addresses {
        let mut conn = RawConn::connect(address.parse().expect("an address")).await;
        loop {
            let reply = String::from_utf8_lossy(&conn.cmd(&words).await).into_owned();
            if reply.contains(text) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{address}: {command} never showed {text}: {reply}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// `redis-cli --cluster check` from every node: all slots covered, all
/// nodes agreeing, no open slots, no error.
pub async fn check_clean(addresses: &[String]) {
    for address in addresses {
        let checked = redis_cli(vec!["--cluster".into(), "check".into(), address.clone()]).await;
        assert!(
            checked.contains("[OK] All 16384 slots covered."),
            "{address}: {checked}"
        );
        assert!(
            checked.contains("[OK] All nodes agree about slots configuration."),
            "{address}: {checked}"
        );
        assert!(!checked.contains("[ERR]"), "{address}: {checked}");
        assert!(!checked.contains("[WARNING]"), "{address}: {checked}");
    }
}

/// A node's id.
pub async fn myid(address: &str) -> String {
    cli_at(address, &["CLUSTER", "MYID"])
        .await
        .trim()
        .to_string()
}

/// CLUSTER LINKS of the node at `address`, through `redis-cli`: each
/// link's fields (name, value), in the order the node gave them.
pub async fn links(address: &str) -> Vec<Vec<(String, String)>> {
    let text = cli_at(address, &["CLUSTER", "LINKS"]).await;
    let lines: Vec<&str> = text.lines().collect();
    lines
        .chunks(12)
        .map(|link| {
            link.chunks(2)
                .map(|field| {
                    let value = field.get(1).copied().unwrap_or_default();
                    (field[0].to_string(), value.to_string())
                })
                .collect()
        })
        .collect()
}

/// Waits (up to 30 s) until CLUSTER LINKS on every node at `addresses`
/// lists one link to and one link from each other node and nothing else,
/// each with Redis 7.0's fields in Redis's order, made after `since_ms`
/// (unix ms) and idle (`r`, nothing queued). Redis ties a link a peer
/// opened to that peer only once a message from it arrives, hence the wait.
pub async fn assert_links_to_every_peer(addresses: &[String], since_ms: u64) {
    const FIELDS: [&str; 6] = [
        "direction",
        "node",
        "create-time",
        "events",
        "send-buffer-allocated",
        "send-buffer-used",
    ];
    let mut ids = Vec::new();
    for address in addresses {
        ids.push(myid(address).await);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for (i, address) in addresses.iter().enumerate() {
        let mut expected: Vec<(String, String)> = ids
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .flat_map(|(_, id)| {
                [
                    ("to".to_string(), id.clone()),
                    ("from".to_string(), id.clone()),
                ]
            })
            .collect();
        expected.sort();
        loop {
            let links = links(address).await;
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970")
                .as_millis() as u64;
            let mut seen: Vec<(String, String)> = Vec::new();
            let mut settled = true;
            for link in &links {
                let names: Vec<&str> = link.iter().map(|(name, _)| name.as_str()).collect();
                assert_eq!(names, FIELDS, "{address}: {links:?}");
                seen.push((link[0].1.clone(), link[1].1.clone()));
                let created: u64 = link[2].1.parse().expect("create-time is a number");
                assert!(
                    (since_ms..=now_ms).contains(&created),
                    "{address}: made at {created}, not in {since_ms}..={now_ms}: {links:?}"
                );
                // Idle, unless a PING happens to be on its way right now.
                settled &= link[3].1 == "r" && link[4].1 == "0" && link[5].1 == "0";
            }
            seen.sort();
            if seen == expected && settled {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{address}: links never settled to {expected:?}: {links:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
