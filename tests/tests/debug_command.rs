//! DEBUG's subcommands that Redis's own tests use, compared with
//! redis-server: DIGEST and DIGEST-VALUE (Redis's SHA1 mixing, bit for
//! bit, over every type and encoding), PROTOCOL's sample replies in both
//! protocols, POPULATE, RELOAD, SET-ACTIVE-EXPIRE, and the gate
//! `enable-debug-command` puts on them.

use std::time::Duration;

use tally_server::config::ProtectedAction;
use tally_tests::keyspace::fill;
use tally_tests::{words, RawConn, RedisServer, TestServer};

async fn tally_with_debug() -> TestServer {
    let tally = TestServer::start_real_clock().await;
    tally.handle.shared().config.write().enable_debug_command = ProtectedAction::Yes;
    tally
}

fn redis_with_debug() -> Option<RedisServer> {
    RedisServer::start_with(&["--enable-debug-command", "yes"])
}

/// The replies to `lines` (space-separated words), one after another.
async fn replies(conn: &mut RawConn, lines: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for line in lines {
        let reply = conn.cmd(&words(line)).await;
        out.push(format!("{line} -> {}", String::from_utf8_lossy(&reply)));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digests_match_redis_for_every_type_and_encoding() {
    let Some(redis) = redis_with_debug() else {
        return;
    };
    let tally = tally_with_debug().await;
    let lines = [
        "DEBUG DIGEST",
        "DEBUG DIGEST-VALUE str int neg wide vol list ints hash zset words",
        "DEBUG DIGEST-VALUE long widehash biglist bigset bighash bigzset missing",
        "DEBUG DIGEST-VALUE",
        "SELECT 4",
        "SET in-four 4",
        "DEBUG DIGEST",
        "FLUSHALL",
        "DEBUG DIGEST",
    ];
    let mut got = Vec::new();
    for addr in [redis.addr, tally.addr()] {
        fill(addr).await;
        let mut conn = RawConn::connect(addr).await;
        got.push(replies(&mut conn, &lines).await);
    }
    assert_eq!(got[1], got[0]);
    assert!(got[0][0].ends_with(|c: char| c.is_ascii_whitespace()));
    assert_ne!(
        got[0][0], got[0][6],
        "a key in another database changes the digest"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_samples_populate_and_errors_match_redis() {
    let Some(redis) = redis_with_debug() else {
        return;
    };
    let tally = tally_with_debug().await;
    let types = [
        "string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib", "push",
        "verbatim", "true", "false", "nope",
    ];
    let mut lines: Vec<String> = Vec::new();
    for proto in ["2", "3"] {
        lines.push(format!("HELLO {proto}"));
        // RESP3's attribute and push come before the real reply, and the
        // test client does not frame big numbers: read below, as raw bytes.
        lines.extend(
            types
                .iter()
                .filter(|t| proto == "2" || !["attrib", "push", "bignum"].contains(t))
                .map(|t| format!("DEBUG PROTOCOL {t}")),
        );
    }
    lines.push("HELLO 2".into());
    for line in [
        "DEBUG POPULATE 5",
        "DEBUG POPULATE 3 pre 12",
        "DEBUG POPULATE 2 short 3",
        "DEBUG POPULATE -1",
        "DEBUG POPULATE x",
        "DEBUG DIGEST",
        "MGET key:0 key:4 pre:2 short:1 key:5",
        "DEBUG RELOAD BADOPTION",
        "DEBUG QUICKLIST-PACKED-THRESHOLD 1b",
        "DEBUG QUICKLIST-PACKED-THRESHOLD 0",
        "DEBUG QUICKLIST-PACKED-THRESHOLD 4gb",
        "DEBUG QUICKLIST-PACKED-THRESHOLD 4000mb",
        "DEBUG QUICKLIST-PACKED-THRESHOLD -1",
        "DEBUG QUICKLIST-PACKED-THRESHOLD x",
        "EVAL return(redis.call('debug','sleep','0')) 0",
        "DEBUG SET-DISABLE-DENY-SCRIPTS 1",
        "EVAL return(redis.call('debug','sleep','0')) 0",
        "DEBUG SET-DISABLE-DENY-SCRIPTS 0",
        "EVAL return(redis.call('debug','sleep','0')) 0",
        "DEBUG NOSUCHSUBCOMMAND",
    ] {
        lines.push(line.into());
    }
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let mut got = Vec::new();
    for addr in [redis.addr, tally.addr()] {
        let mut conn = RawConn::connect(addr).await;
        let mut out = Vec::new();
        for line in &lines {
            let mut reply = conn.cmd(&words(line)).await;
            if line.starts_with("HELLO") {
                reply.clear(); // the servers describe themselves differently
            }
            out.push(format!("{line} -> {}", String::from_utf8_lossy(&reply)));
        }
        got.push(out);
    }
    assert_eq!(got[1], got[0]);
    for sample in ["attrib", "push", "bignum"] {
        assert_eq!(
            resp3_bytes(tally.addr(), sample),
            resp3_bytes(redis.addr, sample),
            "{sample}"
        );
    }
}

/// Everything a RESP3 connection receives for DEBUG PROTOCOL `sample`.
fn resp3_bytes(addr: std::net::SocketAddr, sample: &str) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let command = format!("HELLO 3\r\nPING\r\nDEBUG PROTOCOL {sample}\r\n");
    stream.write_all(command.as_bytes()).expect("write");
    let mut all = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n) = stream.read(&mut chunk) {
        if n == 0 {
            break;
        }
        all.extend_from_slice(&chunk[..n]);
    }
    // What follows PING's reply.
    let pong = all
        .windows(7)
        .position(|w| w == b"+PONG\r\n")
        .expect("PONG");
    all.split_off(pong + 7)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_keeps_the_dataset_and_active_expire_can_be_stopped() {
    let tally = tally_with_debug().await;
    fill(tally.addr()).await;
    let mut conn = tally.raw().await;
    let before = conn.cmd(&["DEBUG", "DIGEST"]).await;
    assert_eq!(conn.cmd(&["DEBUG", "RELOAD"]).await, b"+OK\r\n");
    assert_eq!(conn.cmd(&["DEBUG", "DIGEST"]).await, before);
    // NOSAVE loads the file as it is: a key written since is gone.
    conn.cmd(&["SET", "after", "1"]).await;
    assert_eq!(conn.cmd(&["DEBUG", "RELOAD", "NOSAVE"]).await, b"+OK\r\n");
    assert_eq!(conn.cmd(&["DEBUG", "DIGEST"]).await, before);
    // NOFLUSH MERGE adds the file to what is there.
    conn.cmd(&["SET", "after", "1"]).await;
    assert_eq!(
        conn.cmd(&["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"])
            .await,
        b"+OK\r\n"
    );
    assert_eq!(conn.cmd(&["GET", "after"]).await, b"$1\r\n1\r\n");
    // With the active expiry stopped, a key past its deadline stays in the
    // table (DEBUG OBJECT sees it) until something looks it up.
    assert_eq!(
        conn.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).await,
        b"+OK\r\n"
    );
    conn.cmd(&["SET", "short", "v", "PX", "1"]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(conn
        .cmd(&["DEBUG", "OBJECT", "short"])
        .await
        .starts_with(b"+Value at:"));
    assert_eq!(conn.cmd(&["EXISTS", "short"]).await, b":0\r\n");
    assert_eq!(
        conn.cmd(&["DEBUG", "OBJECT", "short"]).await,
        b"-ERR no such key\r\n"
    );
    assert_eq!(
        conn.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]).await,
        b"+OK\r\n"
    );
    conn.cmd(&["SET", "short", "v", "PX", "1"]).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while conn.cmd(&["DBSIZE"]).await
        != conn
            .cmd(&["EVAL", "return #redis.call('KEYS','*')", "0"])
            .await
        || conn.cmd(&["DEBUG", "OBJECT", "short"]).await != b"-ERR no such key\r\n"
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the sweep did not take it"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_internals_follow_enable_debug_command() {
    let tally = TestServer::start().await;
    let mut conn = tally.raw().await;
    for sub in [
        &["DIGEST"][..],
        &["OBJECT", "k"],
        &["RELOAD"],
        &["POPULATE", "1"],
    ] {
        let mut argv = vec!["DEBUG"];
        argv.extend_from_slice(sub);
        let reply = conn.cmd(&argv).await;
        assert!(
            reply.starts_with(b"-ERR DEBUG command not allowed."),
            "{sub:?}"
        );
    }
    // Tests and benchmarks sleep whatever the setting says.
    assert_eq!(conn.cmd(&["DEBUG", "SLEEP", "0"]).await, b"+OK\r\n");
    let local = TestServer::start_with(|c| c.enable_debug_command = ProtectedAction::Local).await;
    let mut conn = local.raw().await;
    assert_eq!(conn.cmd(&["DEBUG", "POPULATE", "2"]).await, b"+OK\r\n");
    assert_eq!(conn.cmd(&["DBSIZE"]).await, b":2\r\n");
}

/// Under Redis's `key-load-delay` a load waits per key, so DEBUG RELOAD's
/// load of 1,000 keys at 2 ms each lasts two seconds at least, and another
/// client is answered `-LOADING` meanwhile, as Redis's tests expect of it;
/// the reload then ends with every key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_waits_per_key_under_key_load_delay() {
    let tally = tally_with_debug().await;
    let mut conn = tally.raw().await;
    let mut mset = vec!["MSET".to_string()];
    for i in 0..1000 {
        mset.push(format!("key:{i}"));
        mset.push(i.to_string());
    }
    let mset: Vec<&str> = mset.iter().map(String::as_str).collect();
    assert_eq!(conn.cmd(&mset).await, b"+OK\r\n");
    assert_eq!(
        conn.cmd(&["CONFIG", "SET", "key-load-delay", "2000"]).await,
        b"+OK\r\n"
    );
    let addr = tally.addr();
    let reload = tokio::spawn(async move {
        let mut conn = RawConn::connect(addr).await;
        conn.cmd(&["DEBUG", "RELOAD"]).await
    });
    let mut other = tally.raw().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let reply = other.cmd(&["GET", "key:1"]).await;
        if reply == b"-LOADING Redis is loading the dataset in memory\r\n" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never answered LOADING: {}",
            String::from_utf8_lossy(&reply)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(reload.await.expect("DEBUG RELOAD"), b"+OK\r\n");
    assert_eq!(other.cmd(&["DBSIZE"]).await, b":1000\r\n");
}
