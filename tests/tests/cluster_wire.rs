//! tally-cluster's wire formats against a real redis-server 7.0 cluster
//! node: CLUSTER KEYSLOT for every kind of key, the MEET message Redis
//! sends on its bus (decoded, and re-encoded to the same bytes), and the
//! nodes.conf Redis writes (parsed and rendered back byte for byte).

use std::io::Read;
use std::time::Duration;

use tally_cluster::message::{self, kind, node_flags, Body};
use tally_cluster::nodes_conf::NodesConf;
use tally_cluster::slot::key_slot;
use tally_tests::{free_local_port, scratch_dir, RawConn, RedisServer};

fn cluster_node(dir: &str) -> Option<RedisServer> {
    RedisServer::start_with(&[
        "--cluster-enabled",
        "yes",
        "--dir",
        dir,
        "--cluster-config-file",
        "nodes.conf",
    ])
}

fn bulk_text(reply: &[u8]) -> String {
    String::from_utf8_lossy(reply)
        .lines()
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_slots_are_redis_s() {
    let dir = scratch_dir();
    let Some(redis) = cluster_node(&dir) else {
        return;
    };
    let mut conn = RawConn::connect(redis.addr).await;
    let mut keys: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"{".to_vec(),
        b"{}".to_vec(),
        b"{}x".to_vec(),
        b"x{}y{z}".to_vec(),
        b"{{a}}".to_vec(),
        b"rl:{user:u_1}:a3f2:1720000000".to_vec(),
        vec![0xff, 0x00, b'{', 0x80, b'}'],
    ];
    for i in 0..300 {
        keys.push(format!("key:{i}").into_bytes());
        keys.push(format!("{{tag{}}}:{i}", i % 7).into_bytes());
    }
    for key in &keys {
        let reply = conn.cmd(&[&b"CLUSTER"[..], b"KEYSLOT", key]).await;
        let expected: u16 = String::from_utf8_lossy(&reply)
            .trim_start_matches(':')
            .trim()
            .parse()
            .expect("a slot");
        assert_eq!(key_slot(key), expected, "{key:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_s_meet_message_decodes_and_re_encodes_to_the_same_bytes() {
    let dir = scratch_dir();
    let Some(redis) = cluster_node(&dir) else {
        return;
    };
    let mut conn = RawConn::connect(redis.addr).await;
    let myid = bulk_text(&conn.cmd(&["CLUSTER", "MYID"]).await);
    assert_eq!(
        conn.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "5460"]).await,
        b"+OK\r\n"
    );
    // A bus port of our own for Redis to MEET.
    let bus_port = free_local_port();
    let listener = std::net::TcpListener::bind(("127.0.0.1", bus_port)).expect("bind");
    let reply = conn
        .cmd(&[
            "CLUSTER",
            "MEET",
            "127.0.0.1",
            &free_local_port().to_string(),
            &bus_port.to_string(),
        ])
        .await;
    assert_eq!(reply, b"+OK\r\n");
    let bytes = tokio::task::spawn_blocking(move || {
        let (mut stream, _) = listener.accept().expect("Redis connects to the bus port");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut head = [0u8; 8];
        stream.read_exact(&mut head).expect("a header");
        let total = message::frame_len(&head).expect("RCmb").expect("a length");
        let mut bytes = head.to_vec();
        bytes.resize(total, 0);
        stream.read_exact(&mut bytes[8..]).expect("the message");
        bytes
    })
    .await
    .expect("joined");
    let decoded = message::decode(&bytes).expect("Redis's MEET decodes");
    let header = &decoded.header;
    assert_eq!(header.kind, kind::MEET);
    assert_eq!(String::from_utf8_lossy(&header.sender), myid);
    assert_eq!(header.port, redis.addr.port());
    assert_eq!(header.cport, redis.addr.port() + 10000);
    assert_eq!(header.flags, node_flags::MASTER | node_flags::MYSELF);
    assert!(header.serves(0) && header.serves(5460) && !header.serves(5461));
    assert!(matches!(decoded.body, Body::Ping { .. }));
    assert_eq!(message::encode(&decoded), bytes, "re-encoded byte for byte");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_s_nodes_conf_parses_and_renders_back() {
    let dir = scratch_dir();
    let Some(redis) = cluster_node(&dir) else {
        return;
    };
    let mut conn = RawConn::connect(redis.addr).await;
    for command in [
        &["CLUSTER", "ADDSLOTSRANGE", "0", "100", "200", "300"][..],
        &["CLUSTER", "ADDSLOTS", "5000"],
        &["CLUSTER", "SAVECONFIG"],
    ] {
        assert_eq!(conn.cmd(command).await, b"+OK\r\n", "{command:?}");
    }
    let text = std::fs::read_to_string(format!("{dir}/nodes.conf")).expect("nodes.conf");
    let conf = NodesConf::parse(&text).expect("Redis's file parses");
    assert_eq!(conf.nodes.len(), 1);
    assert_eq!(
        conf.nodes[0].slots,
        vec![(0, 100), (200, 300), (5000, 5000)]
    );
    assert_eq!(conf.render(), text);
    // CLUSTER NODES is the same lines without `vars`.
    let nodes = bulk_text(&conn.cmd(&["CLUSTER", "NODES"]).await);
    assert_eq!(nodes, conf.nodes[0].render());
}
