//! `cluster-enabled yes` on one node against a redis-server 7.0 cluster
//! node of the same shape: CLUSTER replies and errors, routing refusals
//! (CROSSSLOT, CLUSTERDOWN), SELECT refused, and nodes.conf kept across a
//! restart. Both servers report `cluster_state:ok` only 2 s after start
//! (Redis's writable delay), so the tests wait that long first.

use std::time::Duration;

use tally_server::{Config, Server};
use tally_tests::cluster::{
    assert_links_to_every_peer, cli_at, links, myid, node_config, node_on_free_ports, redis_cli,
    start_on_free_bus_port,
};
use tally_tests::{
    assert_no_mismatch, compare_streams, free_local_port, scratch_dir, script, RawConn, RedisServer,
};

async fn tally_node(dir: &str) -> tally_server::ServerHandle {
    Server::new(node_config(dir))
        .start()
        .await
        .expect("tally starts as a cluster node")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_cluster_node_answers_as_redis() {
    let redis_dir = scratch_dir();
    let Some(redis) = RedisServer::start_with(&["--cluster-enabled", "yes", "--dir", &redis_dir])
    else {
        return;
    };
    let tally_dir = scratch_dir();
    let tally = tally_node(&tally_dir).await;
    let before = script(
        "
        SET foo bar
        CLUSTER COUNTKEYSINSLOT 99999
        CLUSTER COUNTKEYSINSLOT x
        CLUSTER GETKEYSINSLOT 1 x
        CLUSTER ADDSLOTS 99999
        CLUSTER ADDSLOTSRANGE 5 4
        CLUSTER DELSLOTS 5
        CLUSTER KEYSLOT
        CLUSTER KEYSLOT {user1000}.following
        CLUSTER ADDSLOTSRANGE 0 16383
        CLUSTER ADDSLOTS 0
        CLUSTER SET-CONFIG-EPOCH x
        CLUSTER SET-CONFIG-EPOCH -1
        CLUSTER SET-CONFIG-EPOCH 5
        CLUSTER SET-CONFIG-EPOCH 6
        CLUSTER BUMPEPOCH
        CLUSTER COUNT-FAILURE-REPORTS abc
        CLUSTER LINKS
        CLUSTER NOSUCH
        CLUSTER FAILOVER
        CLUSTER FAILOVER FORCE
        CLUSTER FAILOVER TAKEOVER
        CLUSTER FAILOVER NOW
        CLUSTER FAILOVER FORCE NOW
        CLUSTER REPLICATE abc
        CLUSTER REPLICATE
        CLUSTER REPLICAS abc
        CLUSTER SLAVES abc
        CLUSTER REPLICAS
        READONLY
        READWRITE
        ASKING
        INFO cluster
        SELECT 1
        SELECT 0
        ",
    );
    assert_no_mismatch(&compare_streams(redis.addr, tally.local_addr(), &before).await);
    // Past the writable delay, with every slot served.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let after = script(
        "
        CLUSTER INFO
        SET foo bar
        MSET a 1 b 2
        MSET {t}a 1 {t}b 2
        MGET {t}a {t}b
        MULTI
        SET {t}a 3
        GET {t}b
        EXEC
        MULTI
        SET x 1
        SET y 2
        EXEC
        CLUSTER COUNTKEYSINSLOT 12182
        CLUSTER GETKEYSINSLOT 12182 10
        EVAL return 1 0
        EVAL return(KEYS[2]) 2 {t}a {t}b
        EVAL return(KEYS[2]) 2 a b
        EVAL return(1) 1 a
        EVAL return(1) 3 {t}a {t}b c
        EVAL return(1) 5 {t}a
        MGET {t}a {t}b x
        DEL {t}x {t}y {t}z
        MSET {t}a 1 {t}b 2 {t}c 3
        MSET {t}a 1 {t}b 2 c 3
        CLUSTER DELSLOTS 12182
        GET foo
        CLUSTER INFO
        CLUSTER FLUSHSLOTS
        CLUSTER RESET SOFT
        ",
    );
    assert_no_mismatch(&compare_streams(redis.addr, tally.local_addr(), &after).await);
    tally.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_keeps_its_name_and_slots_across_a_restart() {
    let dir = scratch_dir();
    let first = tally_node(&dir).await;
    let mut conn = RawConn::connect(first.local_addr()).await;
    let id = conn.cmd(&["CLUSTER", "MYID"]).await;
    assert_eq!(
        conn.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "99"]).await,
        b"+OK\r\n"
    );
    assert_eq!(
        conn.cmd(&["CLUSTER", "SET-CONFIG-EPOCH", "3"]).await,
        b"+OK\r\n"
    );
    first.shutdown().await;
    let text = std::fs::read_to_string(format!("{dir}/nodes.conf")).expect("nodes.conf");
    let conf = tally_cluster::nodes_conf::NodesConf::parse(&text).expect("Redis's format");
    assert_eq!(conf.nodes[0].slots, vec![(0, 99)]);
    assert_eq!(conf.nodes[0].config_epoch, 3);
    let again = tally_node(&dir).await;
    let mut conn = RawConn::connect(again.local_addr()).await;
    assert_eq!(conn.cmd(&["CLUSTER", "MYID"]).await, id);
    let nodes = String::from_utf8_lossy(&conn.cmd(&["CLUSTER", "NODES"]).await).into_owned();
    assert!(
        nodes.contains(" myself,master - 0 0 3 connected 0-99\n"),
        "{nodes}"
    );
    again.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_cluster_support_cluster_commands_say_so() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = tally_tests::TestServer::start_real_clock().await;
    let commands = script(
        "
        CLUSTER INFO
        CLUSTER KEYSLOT foo
        CLUSTER NOSUCH
        CLUSTER
        READONLY
        READWRITE
        ASKING
        INFO cluster
        ",
    );
    assert_no_mismatch(&compare_streams(redis.addr, tally.addr(), &commands).await);
}

/// Three tally nodes joined by CLUSTER MEET over the real bus: each learns
/// the others (the first MEETs both; they learn each other from gossip),
/// all agree on the slots, keys of another node's slot get Redis's MOVED,
/// and redis-cli -c follows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_meet_gossip_and_redirect() {
    let mut nodes = Vec::new();
    for _ in 0..3 {
        let (handle, cport) = start_on_free_bus_port(|cport| Config {
            port: 0,
            dir: scratch_dir(),
            save_points: Vec::new(),
            cluster_enabled: true,
            cluster_port: cport,
            cluster_node_timeout: 2000,
            ..Config::default()
        })
        .await;
        nodes.push((handle, cport));
    }
    let ranges = [("0", "5460"), ("5461", "10922"), ("10923", "16383")];
    for (i, (handle, _)) in nodes.iter().enumerate() {
        let mut conn = RawConn::connect(handle.local_addr()).await;
        let epoch = (i + 1).to_string();
        assert_eq!(
            conn.cmd(&["CLUSTER", "SET-CONFIG-EPOCH", &epoch]).await,
            b"+OK\r\n"
        );
        let (start, end) = ranges[i];
        assert_eq!(
            conn.cmd(&["CLUSTER", "ADDSLOTSRANGE", start, end]).await,
            b"+OK\r\n"
        );
    }
    let mut first = RawConn::connect(nodes[0].0.local_addr()).await;
    for (handle, cport) in &nodes[1..] {
        let port = handle.local_addr().port().to_string();
        assert_eq!(
            first
                .cmd(&["CLUSTER", "MEET", "127.0.0.1", &port, &cport.to_string()])
                .await,
            b"+OK\r\n"
        );
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut joined = 0;
        for (handle, _) in &nodes {
            let mut conn = RawConn::connect(handle.local_addr()).await;
            let info = String::from_utf8_lossy(&conn.cmd(&["CLUSTER", "INFO"]).await).into_owned();
            if info.contains("cluster_known_nodes:3\r\n") && info.contains("cluster_state:ok\r\n") {
                joined += 1;
            }
        }
        if joined == 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the cluster never formed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Every node sees the same three nodes and slots.
    let mut views = Vec::new();
    for (handle, _) in &nodes {
        let mut conn = RawConn::connect(handle.local_addr()).await;
        let text = String::from_utf8_lossy(&conn.cmd(&["CLUSTER", "NODES"]).await).into_owned();
        let mut view: Vec<String> = text
            .lines()
            .filter(|l| l.contains(' '))
            .map(|l| {
                let words: Vec<&str> = l.split(' ').collect();
                format!("{} {}", words[0], words[8..].join(" "))
            })
            .collect();
        view.sort();
        views.push(view);
    }
    assert_eq!(views[0].len(), 3, "{views:?}");
    assert_eq!(views[0], views[1]);
    assert_eq!(views[1], views[2]);
    // "foo" is slot 12182: the third node's.
    let port2 = nodes[2].0.local_addr().port();
    assert_eq!(
        String::from_utf8_lossy(&first.cmd(&["SET", "foo", "bar"]).await),
        format!("-MOVED 12182 127.0.0.1:{port2}\r\n")
    );
    let port0 = nodes[0].0.local_addr().port().to_string();
    let cli = |args: &[&str]| {
        let out = std::process::Command::new("redis-cli")
            .args(["-c", "-p", &port0])
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(cli(&["SET", "foo", "bar"]), "OK");
    assert_eq!(cli(&["GET", "foo"]), "bar");
    // The third node restarts on the same ports and directory: it knows
    // the others from its nodes.conf, and the cluster is whole again.
    let (third, cport) = nodes.pop().expect("three nodes");
    let dir = third.shared().config.read().dir.clone();
    third.shutdown().await;
    // Its ports are free once the shutdown returns.
    let restarted = Server::new(Config {
        port: port2,
        dir: dir.clone(),
        save_points: Vec::new(),
        cluster_enabled: true,
        cluster_port: cport,
        cluster_node_timeout: 2000,
        ..Config::default()
    })
    .start()
    .await
    .expect("the node restarts on its ports");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut conn = RawConn::connect(restarted.local_addr()).await;
        let info = String::from_utf8_lossy(&conn.cmd(&["CLUSTER", "INFO"]).await).into_owned();
        if info.contains("cluster_known_nodes:3\r\n") && info.contains("cluster_state:ok\r\n") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{info}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // (It kept no data: no save points, no append-only file here.)
    assert_eq!(cli(&["SET", "foo", "again"]), "OK");
    assert_eq!(
        cli(&["GET", "foo"]),
        "again",
        "the restarted node serves its slot"
    );
    restarted.shutdown().await;
    for (handle, _) in nodes {
        handle.shutdown().await;
    }
}

/// `redis-cli --cluster create` over three tally nodes, then over two tally
/// nodes and a redis-server 7.0 node: every slot covered, every node
/// agreeing, `--cluster check` clean from each node, keys routed to all,
/// CLUSTER LINKS on every node (Redis's too) listing a link to and a link
/// from each other node; a forgotten node's links closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cli_creates_tally_and_mixed_clusters() {
    let redis_dir = scratch_dir();
    let Some(redis) = RedisServer::start_with(&["--cluster-enabled", "yes", "--dir", &redis_dir])
    else {
        return;
    };
    for mixed in [false, true] {
        let started_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis() as u64;
        let mut tally = vec![node_on_free_ports().await, node_on_free_ports().await];
        let mut addresses: Vec<String> = tally
            .iter()
            .map(|h| format!("127.0.0.1:{}", h.local_addr().port()))
            .collect();
        if mixed {
            addresses.push(format!("127.0.0.1:{}", redis.addr.port()));
        } else {
            tally.push(node_on_free_ports().await);
            addresses.push(format!("127.0.0.1:{}", tally[2].local_addr().port()));
        }
        let created = tally_tests::cluster::create_with(&addresses, &[]).await;
        assert!(
            created.contains("[OK] All nodes agree about slots configuration."),
            "{created}"
        );
        // Every node reports ok (Redis waits for its writable delay, and a
        // node that sat alone waits its rejoin delay, up to 5 s).
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        for address in &addresses {
            let port = address.rsplit(':').next().unwrap_or_default().to_string();
            loop {
                let info = redis_cli(vec![
                    "-p".into(),
                    port.clone(),
                    "CLUSTER".into(),
                    "INFO".into(),
                ])
                .await;
                if info.contains("cluster_state:ok") {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "{address}: {info}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        for address in &addresses {
            let checked =
                redis_cli(vec!["--cluster".into(), "check".into(), address.clone()]).await;
            assert!(
                checked.contains("[OK] All 16384 slots covered."),
                "{address}: {checked}"
            );
            assert!(!checked.contains("[ERR]"), "{address}: {checked}");
        }
        // Keys in every node's slots, through redirections.
        let port = addresses[0]
            .rsplit(':')
            .next()
            .unwrap_or_default()
            .to_string();
        for key in ["a", "b", "c", "foo", "{user}:1"] {
            let set = redis_cli(vec![
                "-c".into(),
                "-p".into(),
                port.clone(),
                "SET".into(),
                key.into(),
                "v".into(),
            ])
            .await;
            if set.trim() != "OK" {
                let mut infos = String::new();
                for address in &addresses {
                    let port = address.rsplit(':').next().unwrap_or_default().to_string();
                    infos.push_str(
                        &redis_cli(vec![
                            "-p".into(),
                            port.clone(),
                            "CLUSTER".into(),
                            "INFO".into(),
                        ])
                        .await,
                    );
                    infos.push_str(
                        &redis_cli(vec!["-p".into(), port, "CLUSTER".into(), "NODES".into()]).await,
                    );
                }
                panic!(
                    "mixed={mixed} {key}: {set}
{infos}"
                );
            }
            let got = redis_cli(vec![
                "-c".into(),
                "-p".into(),
                port.clone(),
                "GET".into(),
                key.into(),
            ])
            .await;
            assert_eq!(got.trim(), "v", "{key}");
        }
        assert_links_to_every_peer(&addresses, started_ms).await;
        if !mixed {
            // A forgotten node's links close at once, both ways.
            let forgotten = myid(&addresses[1]).await;
            assert_eq!(
                cli_at(&addresses[0], &["CLUSTER", "FORGET", &forgotten])
                    .await
                    .trim(),
                "OK"
            );
            let left = links(&addresses[0]).await;
            let kept = myid(&addresses[2]).await;
            assert_eq!(left.len(), 2, "{left:?}");
            assert!(left.iter().all(|link| link[1].1 == kept), "{left:?}");
        }
        for handle in tally {
            handle.shutdown().await;
        }
        if !mixed {
            continue;
        }
    }
}

/// The `redis` crate's cluster client, unmodified, against three tally
/// nodes joined with CLUSTER MEET: it discovers the slots (CLUSTER SLOTS)
/// and routes every key to its node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_crate_cluster_client_routes_keys() {
    let nodes = vec![
        node_on_free_ports().await,
        node_on_free_ports().await,
        node_on_free_ports().await,
    ];
    let addresses: Vec<String> = nodes
        .iter()
        .map(|h| format!("127.0.0.1:{}", h.local_addr().port()))
        .collect();
    let mut args = vec!["--cluster".to_string(), "create".to_string()];
    args.extend(addresses.iter().cloned());
    args.push("--cluster-yes".to_string());
    let created = redis_cli(args).await;
    assert!(
        created.contains("[OK] All 16384 slots covered."),
        "{created}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    for handle in &nodes {
        loop {
            let mut conn = RawConn::connect(handle.local_addr()).await;
            let info = String::from_utf8_lossy(&conn.cmd(&["CLUSTER", "INFO"]).await).into_owned();
            if info.contains("cluster_state:ok") {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{info}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let urls: Vec<String> = addresses.iter().map(|a| format!("redis://{a}/")).collect();
    let client = redis::cluster::ClusterClient::new(urls).expect("a cluster client");
    let mut conn = client
        .get_async_connection()
        .await
        .expect("the client connects to the cluster");
    for i in 0..200 {
        let key = format!("counter:{i}");
        let n: i64 = redis::cmd("INCRBY")
            .arg(&key)
            .arg(i)
            .query_async(&mut conn)
            .await
            .expect("INCRBY through the cluster client");
        assert_eq!(n, i);
    }
    // The keys are spread over all three nodes.
    for handle in &nodes {
        let mut direct = RawConn::connect(handle.local_addr()).await;
        let size = String::from_utf8_lossy(&direct.cmd(&["DBSIZE"]).await).into_owned();
        let keys: i64 = size.trim_start_matches(':').trim().parse().expect("DBSIZE");
        assert!(keys > 30, "a node holds {keys} of 200 keys");
    }
    for handle in nodes {
        handle.shutdown().await;
    }
}

/// `cluster-announce-ip/-port/-hostname` (a node behind NAT or a mapped
/// container port): a tally node and a redis-server node, each announcing a
/// client port other than its own and a hostname, see each other at the
/// announced addresses once they have met (CLUSTER NODES), the tally node
/// shows its own in its `myself` line, both give the same CLUSTER SLOTS
/// (the hostname in its metadata map, RESP2 and RESP3), and Redis
/// redirects to the announced port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announced_addresses_reach_the_other_nodes() {
    let redis_dir = scratch_dir();
    let redis_cport = tally_tests::free_local_port().to_string();
    let Some(redis) = RedisServer::start_with(&[
        "--cluster-enabled",
        "yes",
        "--dir",
        &redis_dir,
        "--cluster-port",
        &redis_cport,
        "--cluster-announce-port",
        "7778",
        "--cluster-announce-ip",
        "127.0.0.1",
        "--cluster-announce-hostname",
        "redis-b.example",
    ]) else {
        return;
    };
    let (tally, tally_cport) = start_on_free_bus_port(|cport| Config {
        cluster_port: cport,
        cluster_announce_ip: "127.0.0.1".to_string(),
        cluster_announce_port: 7777,
        cluster_announce_hostname: "tally-a.example".to_string(),
        ..node_config(&scratch_dir())
    })
    .await;
    let mut ours = RawConn::connect(tally.local_addr()).await;
    let mut theirs = RawConn::connect(redis.addr).await;
    assert_eq!(ours.line("CLUSTER ADDSLOTSRANGE 0 16383").await, "+OK\r\n");
    assert_eq!(
        ours.line(&format!(
            "CLUSTER MEET 127.0.0.1 {} {redis_cport}",
            redis.addr.port()
        ))
        .await,
        "+OK\r\n"
    );
    let tally_id = ours.line("CLUSTER MYID").await;
    let tally_id = tally_id.lines().nth(1).unwrap_or_default().to_string();
    let redis_id = theirs.line("CLUSTER MYID").await;
    let redis_id = redis_id.lines().nth(1).unwrap_or_default().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let line_of = |nodes: &str, id: &str| {
        nodes
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_default()
            .to_string()
    };
    loop {
        let at_redis = line_of(&theirs.line("CLUSTER NODES").await, &tally_id);
        let at_tally = line_of(&ours.line("CLUSTER NODES").await, &redis_id);
        let announced_tally = format!(" 127.0.0.1:7777@{tally_cport},tally-a.example ");
        let announced_redis = format!(" 127.0.0.1:7778@{redis_cport},redis-b.example ");
        if at_redis.contains(&announced_tally) && at_tally.contains(&announced_redis) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Redis sees tally as: {at_redis}\ntally sees Redis as: {at_tally}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let own = line_of(&ours.line("CLUSTER NODES").await, &tally_id);
    assert!(
        own.contains(&format!(
            " 127.0.0.1:7777@{tally_cport},tally-a.example myself,master "
        )),
        "{own}"
    );
    // Redis redirects to the announced address (once it serves at all).
    while !theirs
        .line("CLUSTER INFO")
        .await
        .contains("cluster_state:ok")
    {
        assert!(std::time::Instant::now() < deadline, "Redis never ok");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let moved = theirs.line("GET foo").await;
    assert_eq!(moved, "-MOVED 12182 127.0.0.1:7777\r\n");
    for protocol in ["2", "3"] {
        ours.line(&format!("HELLO {protocol}")).await;
        theirs.line(&format!("HELLO {protocol}")).await;
        let slots = theirs.line("CLUSTER SLOTS").await;
        assert!(slots.contains("tally-a.example"), "{slots}");
        assert_eq!(ours.line("CLUSTER SLOTS").await, slots, "RESP{protocol}");
    }

    // cluster-preferred-endpoint-type: Redis and tally name each other the
    // same way in redirects and CLUSTER SLOTS, for every value. Redis takes
    // foo's slot first, so that each node redirects to the other.
    ours.line("HELLO 2").await;
    theirs.line("HELLO 2").await;
    assert_eq!(ours.line("CLUSTER DELSLOTS 12182").await, "+OK\r\n");
    // A node's DELSLOTS is not gossiped (Redis's owners change only on a
    // claim): Redis is told too, then claims the slot.
    assert_eq!(theirs.line("CLUSTER DELSLOTS 12182").await, "+OK\r\n");
    assert_eq!(theirs.line("CLUSTER ADDSLOTS 12182").await, "+OK\r\n");
    for refused in [
        "CONFIG SET cluster-preferred-endpoint-type nowhere",
        "CONFIG SET cluster-preferred-endpoint-type",
    ] {
        assert_eq!(ours.line(refused).await, theirs.line(refused).await);
    }
    for (preferred, tally_endpoint, redis_endpoint) in [
        ("hostname", "tally-a.example", "redis-b.example"),
        ("unknown-endpoint", "", ""),
        ("IP", "127.0.0.1", "127.0.0.1"),
    ] {
        let set = format!("CONFIG SET cluster-preferred-endpoint-type {preferred}");
        assert_eq!(ours.line(&set).await, "+OK\r\n");
        assert_eq!(theirs.line(&set).await, "+OK\r\n");
        let get = "CONFIG GET cluster-preferred-endpoint-type";
        assert_eq!(ours.line(get).await, theirs.line(get).await);
        // Until each has heard of the other's slot change.
        loop {
            let at_tally = ours.line("GET foo").await;
            let at_redis = theirs.line("GET bar").await;
            if at_tally.starts_with("-MOVED") && at_redis.starts_with("-MOVED") {
                assert_eq!(at_tally, format!("-MOVED 12182 {redis_endpoint}:7778\r\n"));
                assert_eq!(at_redis, format!("-MOVED 5061 {tally_endpoint}:7777\r\n"));
                break;
            }
            assert!(
                std::time::Instant::now() < deadline + Duration::from_secs(20),
                "{at_tally} {at_redis}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for protocol in ["2", "3"] {
            ours.line(&format!("HELLO {protocol}")).await;
            theirs.line(&format!("HELLO {protocol}")).await;
            let slots = theirs.line("CLUSTER SLOTS").await;
            assert_eq!(
                ours.line("CLUSTER SLOTS").await,
                slots,
                "{preferred} RESP{protocol}"
            );
        }
        ours.line("HELLO 2").await;
        theirs.line("HELLO 2").await;
    }
    tally.shutdown().await;
}

/// `tls-cluster yes` on a tally node and a redis-server 7.0 node: the bus
/// runs TLS both ways (Redis accepts nothing else on its bus, so the nodes
/// meet only if tally speaks it), each node shows the other's plaintext
/// port to clients on the plaintext port and its TLS port to clients on
/// the TLS port (NODES, SLOTS, MOVED), CLUSTER SLOTS is the same from both,
/// a MIGRATE from tally reaches Redis over TLS, and tally replicas follow
/// the tally node over TLS (`tls-replication yes`) or its plaintext port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tally_and_redis_form_a_tls_cluster() {
    let Some(files) = tally_tests::TlsFiles::generate() else {
        return;
    };
    let (redis_tls, redis_cport) = (free_local_port(), free_local_port());
    let redis_dir = scratch_dir();
    let Some(redis) = RedisServer::start_with(&[
        "--cluster-enabled",
        "yes",
        "--dir",
        &redis_dir,
        "--cluster-port",
        &redis_cport.to_string(),
        "--tls-port",
        &redis_tls.to_string(),
        "--tls-cert-file",
        &files.server_cert,
        "--tls-key-file",
        &files.server_key,
        "--tls-ca-cert-file",
        &files.ca,
        "--tls-client-cert-file",
        &files.client_cert,
        "--tls-client-key-file",
        &files.client_key,
        "--tls-cluster",
        "yes",
    ]) else {
        return;
    };
    let (tally_plain, tally_tls) = (free_local_port(), free_local_port());
    let (tally, tally_cport) = start_on_free_bus_port(|cport| Config {
        port: tally_plain,
        cluster_port: cport,
        cluster_node_timeout: 2000,
        tls: tls_cluster_node(&files, tally_tls, false),
        ..node_config(&scratch_dir())
    })
    .await;
    let redis_plain = redis.addr.port();
    let tls_cli = |port: u16, args: &[&str]| {
        let out = std::process::Command::new("redis-cli")
            .args(["-p", &port.to_string(), "--tls", "--cacert", &files.ca])
            .args(["--cert", &files.client_cert, "--key", &files.client_key])
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let mut ours = RawConn::connect(tally.local_addr()).await;
    let mut theirs = RawConn::connect(redis.addr).await;
    assert_eq!(
        ours.line("CONFIG GET tls-cluster").await,
        "*2\r\n$11\r\ntls-cluster\r\n$3\r\nyes\r\n"
    );
    assert_eq!(ours.line("CLUSTER ADDSLOTSRANGE 0 16383").await, "+OK\r\n");
    // In a TLS cluster a node is met at its TLS port.
    let meet = format!("CLUSTER MEET 127.0.0.1 {redis_tls} {redis_cport}");
    assert_eq!(ours.line(&meet).await, "+OK\r\n");
    let tally_id = bulk_line(&ours.line("CLUSTER MYID").await);
    let redis_id = bulk_line(&theirs.line("CLUSTER MYID").await);
    let line_of = |nodes: &str, id: &str| {
        nodes
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_default()
            .to_string()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let at_tally = line_of(&ours.line("CLUSTER NODES").await, &redis_id);
        let at_redis = line_of(&theirs.line("CLUSTER NODES").await, &tally_id);
        let redis_seen = format!(" 127.0.0.1:{redis_plain}@{redis_cport} master - ");
        let tally_seen = format!(" 127.0.0.1:{tally_plain}@{tally_cport} master - ");
        if at_tally.contains(&redis_seen)
            && at_tally.ends_with(" connected")
            && at_redis.contains(&tally_seen)
            && at_redis.contains(" connected 0-16383")
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "tally sees Redis as: {at_tally}\nRedis sees tally as: {at_redis}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Clients on the TLS ports are given TLS ports.
    let at_tally = line_of(&tls_cli(tally_tls, &["CLUSTER", "NODES"]), &redis_id);
    assert!(
        at_tally.contains(&format!(" 127.0.0.1:{redis_tls}@{redis_cport} ")),
        "{at_tally}"
    );
    let at_redis = line_of(&tls_cli(redis_tls, &["CLUSTER", "NODES"]), &tally_id);
    assert!(
        at_redis.contains(&format!(" 127.0.0.1:{tally_tls}@{tally_cport} ")),
        "{at_redis}"
    );
    // Redis hands foo's slot over; each node then redirects to the other.
    assert_eq!(ours.line("CLUSTER DELSLOTS 12182").await, "+OK\r\n");
    assert_eq!(theirs.line("CLUSTER DELSLOTS 12182").await, "+OK\r\n");
    assert_eq!(theirs.line("CLUSTER ADDSLOTS 12182").await, "+OK\r\n");
    while ours.line("GET foo").await != format!("-MOVED 12182 127.0.0.1:{redis_plain}\r\n") {
        assert!(
            std::time::Instant::now() < deadline,
            "tally never redirected foo"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        tls_cli(tally_tls, &["GET", "foo"]),
        format!("MOVED 12182 127.0.0.1:{redis_tls}")
    );
    assert_eq!(
        theirs.line("GET bar").await,
        format!("-MOVED 5061 127.0.0.1:{tally_plain}\r\n")
    );
    assert_eq!(
        tls_cli(redis_tls, &["GET", "bar"]),
        format!("MOVED 5061 127.0.0.1:{tally_tls}")
    );
    assert_eq!(
        ours.line("CLUSTER SLOTS").await,
        theirs.line("CLUSTER SLOTS").await
    );
    assert_eq!(
        tls_cli(tally_tls, &["CLUSTER", "SLOTS"]),
        tls_cli(redis_tls, &["CLUSTER", "SLOTS"])
    );
    let shards = ours.line("CLUSTER SHARDS").await;
    assert!(
        shards.contains(&format!(
            "$4\r\nport\r\n:{tally_plain}\r\n$8\r\ntls-port\r\n:{tally_tls}\r\n"
        )),
        "{shards}"
    );
    // MIGRATE goes to Redis's TLS port over TLS (slot 15495 is key a's).
    assert_eq!(ours.line("SET a moved-over-tls").await, "+OK\r\n");
    let importing = format!("CLUSTER SETSLOT 15495 IMPORTING {tally_id}");
    assert_eq!(theirs.line(&importing).await, "+OK\r\n");
    let migrating = format!("CLUSTER SETSLOT 15495 MIGRATING {redis_id}");
    assert_eq!(ours.line(&migrating).await, "+OK\r\n");
    let migrate = format!("MIGRATE 127.0.0.1 {redis_tls} a 0 5000");
    assert_eq!(ours.line(&migrate).await, "+OK\r\n");
    assert_eq!(theirs.line("CLUSTER COUNTKEYSINSLOT 15495").await, ":1\r\n");
    assert_eq!(ours.line("CLUSTER COUNTKEYSINSLOT 15495").await, ":0\r\n");
    // Two replicas of the tally node: with `tls-replication yes` the link
    // goes to its TLS port over TLS, without it to its plaintext port.
    assert_eq!(ours.line("SET replicated yes").await, "+OK\r\n");
    for tls_link in [true, false] {
        let (replica, _) = start_on_free_bus_port(|cport| Config {
            port: free_local_port(),
            cluster_port: cport,
            cluster_node_timeout: 2000,
            tls: tls_cluster_node(&files, free_local_port(), tls_link),
            ..node_config(&scratch_dir())
        })
        .await;
        let mut conn = RawConn::connect(replica.local_addr()).await;
        assert_eq!(conn.line(&meet).await, "+OK\r\n");
        let replicate = format!("CLUSTER REPLICATE {tally_id}");
        while conn.line(&replicate).await != "+OK\r\n" {
            assert!(
                std::time::Instant::now() < deadline + Duration::from_secs(30),
                "the replica never learned of the tally node"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let port = if tls_link { tally_tls } else { tally_plain };
        assert_eq!(conn.line("READONLY").await, "+OK\r\n");
        // CLIENT LIST and INFO show READONLY as Redis's `r` flag.
        let info = conn.line("CLIENT INFO").await;
        assert!(info.contains(" flags=r "), "{info}");
        loop {
            let info = conn.line("INFO replication").await;
            if info.contains(&format!("master_port:{port}\r\n"))
                && info.contains("master_link_status:up")
                && conn.line("GET replicated").await == "$3\r\nyes\r\n"
            {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline + Duration::from_secs(30),
                "replica (tls-replication {tls_link}): {info}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        replica.shutdown().await;
    }
    tally.shutdown().await;
}

/// A TLS cluster node's settings: the test certificates, its TLS port,
/// and `tls-replication` as asked.
fn tls_cluster_node(
    files: &tally_tests::TlsFiles,
    port: u16,
    replication: bool,
) -> tally_server::config::TlsSettings {
    tally_server::config::TlsSettings {
        port,
        cert_file: files.server_cert.clone(),
        key_file: files.server_key.clone(),
        ca_cert_file: files.ca.clone(),
        client_cert_file: files.client_cert.clone(),
        client_key_file: files.client_key.clone(),
        cluster: true,
        replication,
        ..Default::default()
    }
}

fn bulk_line(reply: &str) -> String {
    reply.lines().nth(1).unwrap_or_default().to_string()
}
