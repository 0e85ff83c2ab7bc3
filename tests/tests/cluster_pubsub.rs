//! Pub/sub in a cluster of two tally nodes and one redis-server 7.0 node,
//! created with `redis-cli --cluster create`: a PUBLISH on any node reaches
//! the subscribers of every node over the cluster bus (Redis's PUBLISH
//! message, both ways); shard channels are routed by their slot like keys
//! (MOVED and CROSSSLOT answered alike by every node), SPUBLISH reaches the
//! owner's shard subscribers, and when a channel's slot leaves a node its
//! subscribers are told with `sunsubscribe`, by tally as by Redis; CLUSTER
//! INFO counts the bus messages by type alike.

use tally_tests::cluster::{address, create, myid, node_on_free_ports, wait_until};
use tally_tests::{scratch_dir, RawConn, RedisServer};

fn slot(channel: &str) -> u16 {
    tally_cluster::slot::key_slot(channel.as_bytes())
}

/// A channel name whose slot is in `range`.
fn channel_in(range: std::ops::Range<u16>, prefix: &str) -> String {
    (0..)
        .map(|i| format!("{prefix}:{i}"))
        .find(|c| range.contains(&slot(c)))
        .expect("some channel")
}

async fn connect(address: &str) -> RawConn {
    RawConn::connect(address.parse().expect("an address")).await
}

async fn line(conn: &mut RawConn, command: &str) -> String {
    conn.line(command).await
}

/// The next pushed frame, as text.
async fn pushed(conn: &mut RawConn) -> String {
    String::from_utf8_lossy(&conn.reply().await).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_and_shard_channels_across_a_mixed_cluster() {
    let redis_dir = scratch_dir();
    let Some(redis) = RedisServer::start_with(&["--cluster-enabled", "yes", "--dir", &redis_dir])
    else {
        return;
    };
    let tally = [node_on_free_ports().await, node_on_free_ports().await];
    // redis-cli gives the first node slots 0-5460, the second 5461-10922,
    // the third (the redis-server node) 10923-16383.
    let addresses = vec![
        address(&tally[0]),
        address(&tally[1]),
        format!("127.0.0.1:{}", redis.addr.port()),
    ];
    create(&addresses).await;
    // Every node must know every other before a PUBLISH can reach all.
    wait_until(&addresses, "CLUSTER INFO", "cluster_known_nodes:3").await;

    // PUBLISH from each node reaches a subscriber on each node, once; the
    // reply counts the publishing node's own subscribers only.
    let mut subscribers = Vec::new();
    for address in &addresses {
        let mut conn = connect(address).await;
        assert_eq!(
            line(&mut conn, "SUBSCRIBE news").await,
            "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n"
        );
        subscribers.push(conn);
    }
    for (from, address) in addresses.iter().enumerate() {
        let mut publisher = connect(address).await;
        let payload = format!("from-{from}");
        assert_eq!(
            line(&mut publisher, &format!("PUBLISH news {payload}")).await,
            ":1\r\n",
            "{address}"
        );
        for (at, subscriber) in subscribers.iter_mut().enumerate() {
            assert_eq!(
                pushed(subscriber).await,
                format!("*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$6\r\n{payload}\r\n"),
                "published on node {from}, received on node {at}"
            );
        }
    }
    // Nothing was delivered twice: a PING is the next frame everywhere.
    for subscriber in &mut subscribers {
        assert_eq!(
            line(subscriber, "PING").await,
            "*2\r\n$4\r\npong\r\n$0\r\n\r\n"
        );
    }
    // Every node, tally or Redis, counts one PUBLISH sent to each other
    // node and one received from each (CLUSTER INFO's bus statistics).
    for address in &addresses {
        let mut conn = connect(address).await;
        let info = line(&mut conn, "CLUSTER INFO").await;
        for expected in [
            "cluster_stats_messages_publish_sent:2\r\n",
            "cluster_stats_messages_publish_received:2\r\n",
            "cluster_stats_messages_ping_sent:",
        ] {
            assert!(info.contains(expected), "{address}: {info}");
        }
    }

    // Shard channels route like keys: the same MOVED from every node that
    // does not serve the slot, the same CROSSSLOT from all.
    let on_tally = channel_in(0..5461, "orders");
    let on_redis = channel_in(10923..16384, "orders");
    let other_tally = channel_in(5461..10923, "orders");
    let owner_of = |channel: &str| match slot(channel) {
        0..=5460 => 0,
        5461..=10922 => 1,
        _ => 2,
    };
    for channel in [&on_tally, &on_redis] {
        let owner = owner_of(channel);
        for (i, address) in addresses.iter().enumerate() {
            if i == owner {
                continue;
            }
            let mut conn = connect(address).await;
            let moved = format!("-MOVED {} {}\r\n", slot(channel), addresses[owner]);
            assert_eq!(
                line(&mut conn, &format!("SSUBSCRIBE {channel}")).await,
                moved,
                "{address}"
            );
            assert_eq!(
                line(&mut conn, &format!("SPUBLISH {channel} x")).await,
                moved,
                "{address}"
            );
        }
    }
    for address in &addresses {
        let mut conn = connect(address).await;
        assert_eq!(
            line(&mut conn, &format!("SSUBSCRIBE {on_tally} {other_tally}")).await,
            "-CROSSSLOT Keys in request don't hash to the same slot\r\n",
            "{address}"
        );
    }

    // On its owner: subscribed, and SPUBLISH reaches it (not PUBLISH).
    let mut tally_subscriber = connect(&addresses[0]).await;
    let mut redis_subscriber = connect(&addresses[2]).await;
    for (conn, channel) in [
        (&mut tally_subscriber, &on_tally),
        (&mut redis_subscriber, &on_redis),
    ] {
        assert_eq!(
            line(conn, &format!("SSUBSCRIBE {channel}")).await,
            format!(
                "*3\r\n$10\r\nssubscribe\r\n${}\r\n{channel}\r\n:1\r\n",
                channel.len()
            )
        );
    }
    for (address, channel, subscriber) in [
        (&addresses[0], &on_tally, &mut tally_subscriber),
        (&addresses[2], &on_redis, &mut redis_subscriber),
    ] {
        let mut publisher = connect(address).await;
        assert_eq!(
            line(&mut publisher, &format!("PUBLISH {channel} plain")).await,
            ":0\r\n"
        );
        assert_eq!(
            line(&mut publisher, &format!("SPUBLISH {channel} sharded")).await,
            ":1\r\n"
        );
        assert_eq!(
            pushed(subscriber).await,
            format!(
                "*3\r\n$8\r\nsmessage\r\n${}\r\n{channel}\r\n$7\r\nsharded\r\n",
                channel.len()
            )
        );
        assert_eq!(
            line(&mut publisher, &format!("PUBSUB SHARDNUMSUB {channel}")).await,
            format!("*2\r\n${}\r\n{channel}\r\n:1\r\n", channel.len())
        );
    }

    // Each channel's slot moves by hand to the other kind of node: the
    // subscriber on the node losing it is told, the same way by both.
    let ids = [
        myid(&addresses[0]).await,
        myid(&addresses[1]).await,
        myid(&addresses[2]).await,
    ];
    for (from, to, channel, subscriber) in [
        (0usize, 2usize, &on_tally, &mut tally_subscriber),
        (2, 0, &on_redis, &mut redis_subscriber),
    ] {
        let s = slot(channel);
        let mut source = connect(&addresses[from]).await;
        let mut target = connect(&addresses[to]).await;
        for (on_target, command) in [
            (true, format!("CLUSTER SETSLOT {s} IMPORTING {}", ids[from])),
            (false, format!("CLUSTER SETSLOT {s} MIGRATING {}", ids[to])),
            (true, format!("CLUSTER SETSLOT {s} NODE {}", ids[to])),
            (false, format!("CLUSTER SETSLOT {s} NODE {}", ids[to])),
        ] {
            let conn = if on_target { &mut target } else { &mut source };
            assert_eq!(line(conn, &command).await, "+OK\r\n", "{command}");
        }
        assert_eq!(
            pushed(subscriber).await,
            format!(
                "*3\r\n$12\r\nsunsubscribe\r\n${}\r\n{channel}\r\n:0\r\n",
                channel.len()
            ),
            "node {from} lost slot {s}"
        );
        // Out of subscribed mode: an ordinary command is served (MOVED, as
        // the slot is elsewhere now).
        assert_eq!(
            line(subscriber, &format!("GET {channel}")).await,
            format!("-MOVED {s} {}\r\n", addresses[to])
        );
        assert_eq!(
            line(&mut source, "PUBSUB SHARDCHANNELS").await,
            "*0\r\n",
            "{}",
            addresses[from]
        );
    }
    for handle in tally {
        handle.shutdown().await;
    }
}
