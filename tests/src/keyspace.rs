//! Helpers for tests that compare whole keyspaces across servers and
//! restarts: connections, a key's contents in an order-free form, INFO
//! persistence polling, the append-only log's newest increment, and a fill
//! of every type and encoding.

use std::net::SocketAddr;

use redis::AsyncCommands;

/// Commands that build one key of every type in every encoding tally and
/// Redis 7.0 choose alike, plus the large forms (hashtable, skiplist).
pub fn fill_commands() -> Vec<Vec<Vec<u8>>> {
    let mut commands: Vec<Vec<Vec<u8>>> = [
        "SET str hello",
        "SET int 12345",
        "SET neg -7",
        "SET wide 9223372036854775807",
        "SET vol v PX 900000",
        "RPUSH list a b 1 2 -300 70000 -9223372036854775808",
        "SADD ints 1 2 3 -5 100000",
        "HSET hash f1 v1 f2 2 f3 -3",
        "ZADD zset 1 a 2.5 b -3 c 0.1 d 1e20 e",
        "SADD words alpha beta gamma",
    ]
    .iter()
    .map(|line| crate::words(line))
    .collect();
    let long = "x".repeat(100);
    commands.push(crate::words(&format!("SET long {long}")));
    commands.push(crate::words(&format!("HSET widehash f {long}")));
    let mut big_list = vec![b"RPUSH".to_vec(), b"biglist".to_vec()];
    let mut big_set = vec![b"SADD".to_vec(), b"bigset".to_vec()];
    let mut big_hash = vec![b"HSET".to_vec(), b"bighash".to_vec()];
    let mut big_zset = vec![b"ZADD".to_vec(), b"bigzset".to_vec()];
    for i in 0..3000 {
        big_list.push(format!("element-{i}").into_bytes());
        big_set.push(format!("member-{i}").into_bytes());
        big_hash.push(format!("field-{i}").into_bytes());
        big_hash.push(format!("{i}").into_bytes());
        big_zset.push(format!("{}", i as f64 / 7.0).into_bytes());
        big_zset.push(format!("m{i}").into_bytes());
    }
    commands.extend([big_list, big_set, big_hash, big_zset]);
    commands
}

pub async fn connect(addr: SocketAddr) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(format!("redis://{addr}/")).expect("client");
    patient(&client).await.expect("connection")
}

/// A multiplexed connection that waits for its replies as long as a test
/// may take. The redis crate gives up on a reply after 500 ms by default,
/// which a debug build under CI load (a 1,000-key MSET during a background
/// save, on a box running other test binaries) can exceed: a test's verdict
/// must not depend on the box's speed. The minute bounds a real hang.
pub async fn patient(
    client: &redis::Client,
) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(std::time::Duration::from_secs(60)))
        .set_response_timeout(Some(std::time::Duration::from_secs(60)));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

pub async fn run(conn: &mut redis::aio::MultiplexedConnection, args: &[Vec<u8>]) -> redis::Value {
    let mut cmd = redis::cmd(std::str::from_utf8(&args[0]).expect("name"));
    for arg in &args[1..] {
        cmd.arg(arg.as_slice());
    }
    cmd.query_async(conn).await.expect("command")
}

/// A key's contents in a form that does not depend on the server's order:
/// type, sorted elements, and whether it has a TTL.
pub async fn contents(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> String {
    let kind: String = redis::cmd("TYPE")
        .arg(key)
        .query_async(conn)
        .await
        .expect("TYPE");
    let ttl: i64 = conn.pttl(key).await.expect("PTTL");
    let body = match kind.as_str() {
        "string" => {
            let v: Vec<u8> = conn.get(key).await.expect("GET");
            String::from_utf8_lossy(&v).into_owned()
        }
        "list" => format!(
            "{:?}",
            conn.lrange::<_, Vec<String>>(key, 0, -1)
                .await
                .expect("LRANGE")
        ),
        "set" => {
            let mut members: Vec<String> = conn.smembers(key).await.expect("SMEMBERS");
            members.sort();
            format!("{members:?}")
        }
        "hash" => {
            let mut fields: Vec<(String, String)> = conn.hgetall(key).await.expect("HGETALL");
            fields.sort();
            format!("{fields:?}")
        }
        "zset" => format!(
            "{:?}",
            conn.zrange_withscores::<_, Vec<(String, String)>>(key, 0, -1)
                .await
                .expect("ZRANGE")
        ),
        other => other.to_string(),
    };
    format!("{key} {kind} ttl={} {body}", ttl > 0)
}

pub async fn all_contents(addr: SocketAddr, db: i64) -> Vec<String> {
    let mut conn = connect(addr).await;
    let _: () = redis::cmd("SELECT")
        .arg(db)
        .query_async(&mut conn)
        .await
        .expect("SELECT");
    let mut keys: Vec<String> = conn.keys("*").await.expect("KEYS");
    keys.sort();
    let mut out = Vec::new();
    for key in keys {
        out.push(contents(&mut conn, &key).await);
    }
    out
}

/// INFO persistence.
pub async fn persistence_info(conn: &mut redis::aio::MultiplexedConnection) -> String {
    redis::cmd("INFO")
        .arg("persistence")
        .query_async(conn)
        .await
        .expect("INFO")
}

/// Polls INFO persistence until `done` holds, and returns it; fails after a
/// minute with `what` (a hang detector, not a speed test).
pub async fn wait_for_persistence(
    conn: &mut redis::aio::MultiplexedConnection,
    what: &str,
    done: impl Fn(&str) -> bool,
) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let info = persistence_info(conn).await;
        if done(&info) {
            return info;
        }
        assert!(std::time::Instant::now() < deadline, "{what}: {info}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Waits until a server has loaded its snapshot (INFO answers while it
/// loads; most commands get -LOADING).
/// A server (manual clock) keeping its append-only log in `dir`, loaded
/// and ready: what a test of logging and replay starts, and starts again.
pub async fn logged_server(dir: &str) -> crate::TestServer {
    let dir = dir.to_string();
    let server = crate::TestServer::start_with(move |c| {
        c.dir = dir;
        c.appendonly = true;
    })
    .await;
    wait_loaded(server.addr()).await;
    server
}

pub async fn wait_loaded(addr: SocketAddr) {
    let mut conn = connect(addr).await;
    wait_for_persistence(&mut conn, "never loaded", |info| {
        info.contains("\r\nloading:0\r\n")
    })
    .await;
}

/// The newest increment of the append-only log a server keeps in `dir`
/// (Redis 7's layout: `appendonlydir/`, named by its manifest), as text.
pub fn aof_increment(dir: &str) -> String {
    let logs = std::path::Path::new(dir).join("appendonlydir");
    let read = |name: &str| {
        let path = logs.join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let manifest = String::from_utf8_lossy(&read("appendonly.aof.manifest")).into_owned();
    let last = manifest
        .lines()
        .rfind(|l| l.ends_with("type i"))
        .and_then(|l| l.split(' ').nth(1))
        .expect("an increment in the manifest");
    String::from_utf8_lossy(&read(last)).into_owned()
}

pub async fn fill(addr: SocketAddr) {
    let mut conn = connect(addr).await;
    for command in fill_commands() {
        run(&mut conn, &command).await;
    }
}

/// `count` string keys `<prefix><i>` = i, by MSETs of a thousand.
pub async fn set_numbered(
    conn: &mut redis::aio::MultiplexedConnection,
    prefix: &str,
    count: usize,
) {
    for start in (0..count).step_by(1000) {
        let mut mset = redis::cmd("MSET");
        for i in start..(start + 1000).min(count) {
            mset.arg(format!("{prefix}{i}")).arg(i);
        }
        let _: () = mset.query_async(conn).await.expect("MSET");
    }
}
