//! Sentinel: three real redis-sentinel processes (Debian's) watch a tally
//! master with two tally replicas and fail it over when it goes. Whatever
//! Sentinel sends works on tally: INFO and ROLE to learn the topology,
//! PUBLISH/SUBSCRIBE on `__sentinel__:hello` to find each other, then
//! `MULTI; REPLICAOF NO ONE; CONFIG REWRITE; CLIENT KILL TYPE normal;
//! EXEC` on the replica it promotes and REPLICAOF on the other, which
//! continues from the promoted one without a full sync. redis-py's and
//! ioredis's Sentinel clients find the master before and after.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use tally_tests::cluster::run_program;
use tally_tests::keyspace::connect;
use tally_tests::replication::{replication_field, stats_field, wait_for_field, wait_in_sync};
use tally_tests::{free_local_port, scratch_dir, tool_missing, TestServer};

/// One redis-sentinel process, stopped when dropped.
struct Sentinel {
    child: Child,
    addr: SocketAddr,
    _dir: String,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sentinel {
    /// A sentinel monitoring `master` as `mymaster`, quorum 2, down after
    /// a second without a reply.
    fn start(master: SocketAddr) -> Option<Sentinel> {
        if Command::new("redis-sentinel")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_err()
        {
            tool_missing("redis-sentinel (for the Sentinel tests)");
            return None;
        }
        let dir = scratch_dir();
        let port = free_local_port();
        let conf = format!("{dir}/sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                 sentinel monitor mymaster 127.0.0.1 {} 2\n\
                 sentinel down-after-milliseconds mymaster 1000\n\
                 sentinel failover-timeout mymaster 10000\n\
                 sentinel parallel-syncs mymaster 1\n",
                master.port()
            ),
        )
        .expect("sentinel.conf");
        let child = Command::new("redis-sentinel")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-sentinel");
        Some(Sentinel {
            child,
            addr: format!("127.0.0.1:{port}").parse().expect("addr"),
            _dir: dir,
        })
    }

    /// SENTINEL <args...> as the sentinel answers it, once it answers.
    async fn ask<T: redis::FromRedisValue>(&self, args: &[&str]) -> Option<T> {
        let client = redis::Client::open(format!("redis://{}/", self.addr)).ok()?;
        let mut conn = tally_tests::keyspace::patient(&client).await.ok()?;
        let mut cmd = redis::cmd("SENTINEL");
        for arg in args {
            cmd.arg(*arg);
        }
        cmd.query_async(&mut conn).await.ok()
    }
}

/// The Sentinel clients of redis-py and ioredis, each asked for the
/// master through `sentinels` and expected to reach `master_port`, where
/// each increments `sentinel:hits`. Returns how many ran (a missing one
/// fails in CI through `tool_missing`).
async fn clients_reach(sentinels: &[Sentinel], master_port: u16) -> i64 {
    let clients = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("clients");
    let ports = sentinels
        .iter()
        .map(|s| s.addr.port().to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut ran = 0;
    let python = Command::new("python3")
        .args(["-c", "import redis.sentinel"])
        .status()
        .is_ok_and(|s| s.success());
    if python {
        let script = clients.join("sentinel_redis_py.py").display().to_string();
        let (ok, output) = run_program(
            "python3",
            vec![script, ports.clone(), master_port.to_string()],
        )
        .await;
        assert!(
            ok && output.trim_end().ends_with("OK"),
            "redis-py: {output}"
        );
        ran += 1;
    } else {
        tool_missing("redis-py (for its Sentinel client)");
    }
    if clients.join("node_modules/ioredis").is_dir() {
        let script = clients.join("sentinel_ioredis.js").display().to_string();
        let (ok, output) = run_program("node", vec![script, ports, master_port.to_string()]).await;
        assert!(ok && output.trim_end().ends_with("OK"), "ioredis: {output}");
        ran += 1;
    } else {
        tool_missing("ioredis (npm ci --prefix tests/clients)");
    }
    ran
}

/// Polls `done` every 100 ms until it holds, or fails after `secs` with
/// `what`.
async fn until<F, Fut>(secs: u64, what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done().await {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_sentinels_fail_a_tally_master_over_to_a_tally_replica() {
    let master = TestServer::start_real_clock().await;
    let old = master.addr();
    let replicas = [
        TestServer::start_real_clock().await,
        TestServer::start_real_clock().await,
    ];
    for replica in &replicas {
        let mut conn = connect(replica.addr()).await;
        let _: () = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(old.port())
            .query_async(&mut conn)
            .await
            .expect("REPLICAOF");
    }
    let mut on_master = connect(old).await;
    let _: () = on_master.set("before-failover", 1).await.expect("SET");
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("return redis.call('incr', KEYS[1])")
        .query_async(&mut on_master)
        .await
        .expect("SCRIPT LOAD");
    for replica in &replicas {
        wait_in_sync(old, replica.addr()).await;
    }
    let mut sentinels = Vec::new();
    for _ in 0..3 {
        let Some(sentinel) = Sentinel::start(old) else {
            return;
        };
        sentinels.push(sentinel);
    }
    // Each sentinel finds both replicas (INFO) and the other two
    // sentinels (their hello messages, through tally's pub/sub).
    for sentinel in &sentinels {
        until(30, "a sentinel did not learn the topology", || async {
            let replicas: Vec<redis::Value> = sentinel
                .ask(&["REPLICAS", "mymaster"])
                .await
                .unwrap_or_default();
            let others: Vec<redis::Value> = sentinel
                .ask(&["SENTINELS", "mymaster"])
                .await
                .unwrap_or_default();
            replicas.len() == 2 && others.len() == 2
        })
        .await;
    }
    let mut hits = clients_reach(&sentinels, old.port()).await;
    // The master goes.
    drop(on_master);
    master.handle.shutdown().await;
    let gone = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(60);
    let promoted_port = loop {
        let named: Option<(String, u16)> = sentinels[0]
            .ask(&["GET-MASTER-ADDR-BY-NAME", "mymaster"])
            .await;
        match named {
            Some((_, port)) if port != old.port() => break port,
            _ => {}
        }
        assert!(
            Instant::now() < deadline,
            "Sentinel did not fail the master over"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "sentinel: the new master named {} ms after the old one went",
        gone.elapsed().as_millis()
    );
    let (promoted, other) = if replicas[0].addr().port() == promoted_port {
        (&replicas[0], &replicas[1])
    } else {
        (&replicas[1], &replicas[0])
    };
    assert_eq!(promoted.addr().port(), promoted_port);
    assert_eq!(
        replication_field(promoted.addr(), "role").await.as_deref(),
        Some("master")
    );
    // Sentinel points the other replica at the promoted one, which it
    // continues from.
    until(
        30,
        "the other replica did not follow the new master",
        || async {
            replication_field(other.addr(), "master_port")
                .await
                .as_deref()
                == Some(promoted_port.to_string().as_str())
        },
    )
    .await;
    wait_for_field(other.addr(), "master_link_status", "up").await;
    let mut on_promoted = connect(promoted.addr()).await;
    let before: i64 = on_promoted.get("before-failover").await.expect("GET");
    assert_eq!(before, 1);
    // The script loaded before the failover runs on the new master.
    let counted: i64 = redis::cmd("EVALSHA")
        .arg(&sha)
        .arg(1)
        .arg("after-failover")
        .query_async(&mut on_promoted)
        .await
        .expect("EVALSHA");
    assert_eq!(counted, 1);
    wait_in_sync(promoted.addr(), other.addr()).await;
    let mut on_other = connect(other.addr()).await;
    let replicated: i64 = on_other.get("after-failover").await.expect("GET");
    assert_eq!(replicated, 1);
    // The clients ask the sentinels again and reach the new master, which
    // has every increment made before the failover.
    hits += clients_reach(&sentinels, promoted_port).await;
    let counted: i64 = on_promoted.get("sentinel:hits").await.unwrap_or(0);
    assert_eq!(counted, hits);
    assert_eq!(stats_field(promoted.addr(), "sync_full").await, "0");
    assert_eq!(stats_field(promoted.addr(), "sync_partial_ok").await, "1");
}
