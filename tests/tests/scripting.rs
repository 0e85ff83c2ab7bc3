//! Scripting behaviour that has no redis-server counterpart to diff against:
//! shard-level atomicity (declared keys do not stop other shards, undeclared
//! keys force a rollback and a re-run holding every shard), busy scripts,
//! SCRIPT KILL and UNKILLABLE, and OOM for scripts that may write.

use std::time::Duration;

use tally_server::Shared;
use tally_tests::{RawConn, TestServer};

/// Two key names that live in different shards of database 0.
fn keys_in_different_shards(shared: &Shared) -> (String, String) {
    let db = shared.store.db(0);
    let first = "rl:a".to_string();
    let shard = db.shard_of(shared.store.key(first.as_bytes()));
    let other = (0..1000)
        .map(|i| format!("rl:b{i}"))
        .find(|k| db.shard_of(shared.store.key(k.as_bytes())) != shard)
        .expect("some key lands in another shard");
    (first, other)
}

async fn until_busy(conn: &mut RawConn) {
    for _ in 0..500 {
        if conn.line("PING").await.starts_with("-BUSY") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the script never became busy");
}

/// Waits until `n` scripts run: a script sent on one connection may not have
/// started when a command sent later on another one arrives.
async fn until_running(server: &TestServer, n: usize) {
    let scripts = &server.handle.shared().scripts;
    for _ in 0..500 {
        if scripts.running() == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{} scripts run, not {n}", scripts.running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_script_blocks_only_its_own_shards_until_killed() {
    let server = TestServer::start_with(|c| c.busy_reply_threshold_ms = 60_000).await;
    let (held, other) = keys_in_different_shards(server.handle.shared());
    let mut scripted = server.raw().await;
    scripted
        .send(&tally_tests::encode_command(&[
            "EVAL",
            "while true do end",
            "1",
            &held,
        ]))
        .await;
    let mut client = server.raw().await;
    // The EVAL went on another connection: wait until the script runs, or
    // the SCRIPT KILL below could arrive first and find nothing to kill.
    until_running(&server, 1).await;
    // The script never ends on its own, yet a key on another shard answers.
    for _ in 0..5 {
        assert_eq!(client.line(&format!("SET {other} v")).await, "+OK\r\n");
    }
    // Before the busy threshold SCRIPT KILL waits, as on Redis (whose
    // server reads it only once the script passed the threshold) ...
    let mut killer = server.raw().await;
    killer.send(b"SCRIPT KILL\r\n").await;
    assert_eq!(
        client.line("CONFIG SET busy-reply-threshold 50").await,
        "+OK\r\n"
    );
    // ... and kills the script once it is past it.
    assert_eq!(killer.reply().await, b"+OK\r\n");
    let killed = String::from_utf8(scripted.reply().await).unwrap();
    assert!(
        killed.starts_with("-ERR Script killed by user with SCRIPT KILL..."),
        "{killed}"
    );
    assert_eq!(client.line("PING").await, "+PONG\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_that_wrote_is_unkillable() {
    let server = TestServer::start_with(|c| c.busy_reply_threshold_ms = 50).await;
    let mut scripted = server.raw().await;
    let script = "redis.call('SET', KEYS[1], 'x'); local i = 0; while i < 40000000 do i = i + 1 end; return i";
    scripted
        .send(&tally_tests::encode_command(&[
            "EVAL", script, "1", "written",
        ]))
        .await;
    let mut client = server.raw().await;
    until_busy(&mut client).await;
    assert_eq!(
        client.line("SCRIPT KILL").await,
        "-UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.\r\n"
    );
    assert_eq!(scripted.reply().await, b":40000000\r\n");
    assert_eq!(client.line("GET written").await, "$1\r\nx\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undeclared_key_on_a_busy_shard_rolls_back_and_reruns_holding_everything() {
    let server = TestServer::start_with(|c| c.busy_reply_threshold_ms = 60_000).await;
    let (declared, undeclared) = keys_in_different_shards(server.handle.shared());
    // Another script holds the undeclared key's shard.
    let mut blocker = server.raw().await;
    blocker
        .send(&tally_tests::encode_command(&[
            "EVAL",
            "while true do end",
            "1",
            &undeclared,
        ]))
        .await;
    until_running(&server, 1).await;
    // This script writes its declared key, then needs the busy shard: its
    // first run is undone and it runs again once it can hold every shard.
    let script = format!(
        "redis.call('INCR', KEYS[1]); redis.call('INCR', '{undeclared}'); return redis.call('GET', KEYS[1])"
    );
    let mut scripted = server.raw().await;
    scripted
        .send(&tally_tests::encode_command(&[
            "EVAL", &script, "1", &declared,
        ]))
        .await;
    let mut client = server.raw().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        client.line("CONFIG SET busy-reply-threshold 50").await,
        "+OK\r\n"
    );
    until_busy(&mut client).await;
    assert_eq!(client.line("SCRIPT KILL").await, "+OK\r\n");
    blocker.reply().await;
    // Rolled back once, run once: the declared counter moved exactly once.
    assert_eq!(scripted.reply().await, b"$1\r\n1\r\n");
    assert_eq!(
        client.line(&format!("GET {undeclared}")).await,
        "$1\r\n1\r\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_scripts_on_shared_and_undeclared_keys_stay_atomic() {
    let server = TestServer::start_with(|c| c.shards = 16).await;
    let mut tasks = Vec::new();
    for worker in 0..6 {
        let addr = server.addr();
        tasks.push(tokio::spawn(async move {
            let mut conn = RawConn::connect(addr).await;
            // Declared: one counter per worker plus a shared one; undeclared:
            // a total every script bumps without declaring it.
            let script = "local a = redis.call('INCR', KEYS[1]); local b = redis.call('INCR', KEYS[2]); redis.call('INCR', 'undeclared:total'); return a";
            let own = format!("own:{worker}");
            for _ in 0..200 {
                let reply = conn.cmd(&["EVAL", script, "2", &own, "shared"]).await;
                assert!(reply.starts_with(b":"), "{}", String::from_utf8_lossy(&reply));
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut conn = server.raw().await;
    assert_eq!(conn.line("GET shared").await, "$4\r\n1200\r\n");
    assert_eq!(conn.line("GET undeclared:total").await, "$4\r\n1200\r\n");
    for worker in 0..6 {
        assert_eq!(
            conn.line(&format!("GET own:{worker}")).await,
            "$3\r\n200\r\n"
        );
    }
}

#[tokio::test]
async fn shebang_scripts_that_may_write_are_refused_past_maxmemory() {
    let server = TestServer::start_with(|c| c.maxmemory = 64 * 1024).await;
    let mut conn = server.raw().await;
    let big = "x".repeat(70 * 1024);
    // A write larger than what is left is refused (its bytes count, as on
    // Redis), so the server is put past the limit by lowering it.
    assert_eq!(
        conn.cmd(&["CONFIG", "SET", "maxmemory", "1mb"]).await,
        b"+OK\r\n"
    );
    assert_eq!(conn.cmd(&["SET", "big", &big]).await, b"+OK\r\n");
    assert_eq!(
        conn.cmd(&["CONFIG", "SET", "maxmemory", "64kb"]).await,
        b"+OK\r\n"
    );
    let oom = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";
    assert_eq!(
        String::from_utf8(conn.cmd(&["EVAL", "#!lua\nreturn 1", "0"]).await).unwrap(),
        oom
    );
    assert_eq!(
        conn.cmd(&["EVAL", "#!lua flags=no-writes\nreturn 1", "0"])
            .await,
        b":1\r\n"
    );
    assert_eq!(
        conn.cmd(&["EVAL", "#!lua flags=allow-oom\nreturn 1", "0"])
            .await,
        b":1\r\n"
    );
    // A script without a shebang runs; its writes meet OOM one by one.
    let reply = String::from_utf8(
        conn.cmd(&["EVAL", "return redis.call('SET', 'k', 'v')", "0"])
            .await,
    )
    .unwrap();
    assert!(
        reply.starts_with("-OOM command not allowed when used memory > 'maxmemory'. script:"),
        "{reply}"
    );
    assert_eq!(
        conn.cmd(&["EVAL", "return redis.call('GET', 'big') ~= false", "0"])
            .await,
        b":1\r\n"
    );
}

#[tokio::test]
async fn server_is_an_alias_of_redis() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    assert_eq!(
        conn.cmd(&["EVAL", "return server.call('PING')", "0"]).await,
        b"+PONG\r\n"
    );
}

#[tokio::test]
async fn a_script_past_lua_memory_limit_fails_and_the_server_carries_on() {
    let server = TestServer::start_with(|c| c.lua_memory_limit = 16 * 1024 * 1024).await;
    let mut conn = server.raw().await;
    let hog = "local t = {} for i = 1, 100000000 do t[i] = string.rep('x', 64) .. i end return #t";
    let reply = String::from_utf8(conn.cmd(&["EVAL", hog, "0"]).await).unwrap();
    assert!(
        reply.starts_with("-ERR Error running script") && reply.contains("memory"),
        "{reply}"
    );
    assert_eq!(conn.cmd(&["EVAL", "return 1", "0"]).await, b":1\r\n");
    assert_eq!(conn.line("PING").await, "+PONG\r\n");
}

/// Each worker finds the scripts it ran in its own index, without the
/// shared cache: that index must follow the cache. After SCRIPT FLUSH a
/// script run many times before is NOSCRIPT on every worker, and a body
/// that does not compile, which leaves the cache, is never found by its
/// SHA1 however often it was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workers_own_script_index_follows_the_shared_cache() {
    let server = TestServer::start().await;
    let script = "return redis.call('INCR', KEYS[1])";
    let sha = tally_server::scripting::vm::sha1(script.as_bytes());
    let mut conns = Vec::new();
    for _ in 0..4 {
        conns.push(server.raw().await);
    }
    for conn in &mut conns {
        for _ in 0..20 {
            assert!(conn
                .cmd(&["EVAL", script, "1", "n"])
                .await
                .starts_with(b":"));
            assert!(conn
                .cmd(&["EVALSHA", &sha, "1", "n"])
                .await
                .starts_with(b":"));
        }
    }
    assert_eq!(conns[0].cmd(&["SCRIPT", "FLUSH"]).await, b"+OK\r\n");
    for conn in &mut conns {
        for _ in 0..20 {
            assert_eq!(
                conn.cmd(&["EVALSHA", &sha, "1", "n"]).await,
                b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
            );
        }
    }
    // EVAL brings it back, as a new script of the cache.
    assert_eq!(
        conns[1].cmd(&["SCRIPT", "EXISTS", &sha]).await,
        b"*1\r\n:0\r\n"
    );
    assert!(conns[1]
        .cmd(&["EVAL", script, "1", "n"])
        .await
        .starts_with(b":"));
    assert_eq!(
        conns[1].cmd(&["SCRIPT", "EXISTS", &sha]).await,
        b"*1\r\n:1\r\n"
    );

    let broken = "return +";
    let broken_sha = tally_server::scripting::vm::sha1(broken.as_bytes());
    for conn in &mut conns {
        for _ in 0..5 {
            let reply = conn.cmd(&["EVAL", broken, "0"]).await;
            assert!(
                reply.starts_with(b"-ERR Error compiling script"),
                "{reply:?}"
            );
            assert_eq!(
                conn.cmd(&["EVALSHA", &broken_sha, "0"]).await,
                b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
            );
        }
    }
    assert_eq!(
        conns[0].cmd(&["SCRIPT", "EXISTS", &broken_sha]).await,
        b"*1\r\n:0\r\n"
    );
}

/// A script's result converts by the protocol the script chose with
/// redis.setresp when it returns (not the one it started with), as in
/// Redis: false is RESP3's false after redis.setresp(3), and null before.
/// A `{double=...}` table is a double reply, in either protocol (a bulk
/// string in RESP2, `,` in RESP3). Every expected reply here is Redis
/// 7.0.15's.
#[tokio::test]
async fn the_result_converts_by_the_protocol_the_script_chose() {
    let server = TestServer::start().await;
    let mut resp2 = server.raw().await;
    let mut resp3 = server.raw().await;
    resp3.cmd(&["HELLO", "3"]).await;
    assert_eq!(
        resp3
            .cmd(&["EVAL", "redis.setresp(3); return false", "0"])
            .await,
        b"#f\r\n"
    );
    assert_eq!(resp3.cmd(&["EVAL", "return false", "0"]).await, b"_\r\n");
    for (script, in_resp2, in_resp3) in [
        (
            "return {double=0.5}",
            &b"$3\r\n0.5\r\n"[..],
            &b",0.5\r\n"[..],
        ),
        ("return {double=-1/0}", b"$4\r\n-inf\r\n", b",-inf\r\n"),
        (
            "return {{double=0.1}}",
            b"*1\r\n$19\r\n0.10000000000000001\r\n",
            b"*1\r\n,0.10000000000000001\r\n",
        ),
    ] {
        assert_eq!(
            resp2.cmd(&["EVAL", script, "0"]).await,
            in_resp2,
            "{script}"
        );
        assert_eq!(
            resp3.cmd(&["EVAL", script, "0"]).await,
            in_resp3,
            "{script}"
        );
    }
}
