//! Redis 7 functions (FUNCTION LOAD ... FCALL) against a real redis-server,
//! reply for reply: loading and its errors, calls and theirs, the sandbox
//! of a library's load, LIST, STATS, DELETE, DUMP and RESTORE with each
//! policy, in RESP2 and RESP3; then what only tally's own process shows:
//! libraries kept across restarts (snapshot and append-only file, and a
//! snapshot redis-server wrote), in a replica's full sync and stream, and
//! FUNCTION KILL of a busy function.
//!
//! Redis lists a library's functions, and FUNCTION DUMP lists libraries,
//! in the order of a hash table seeded at random on each start; tally in
//! the order they were registered and by name. The comparisons keep to one
//! function per listed library and one library per dump.

use std::time::Duration;

use redis::AsyncCommands;
use tally_tests::keyspace::connect;
use tally_tests::process::TallyProcess;
use tally_tests::replication::{replication_field, wait_in_sync};
use tally_tests::{assert_no_mismatch, compare_streams, RedisServer, TestServer};

/// A command from words, the last one taken whole (a library's code).
fn command(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

fn load(code: &str) -> Vec<Vec<u8>> {
    command(&["FUNCTION", "LOAD", code])
}

fn load_replace(code: &str) -> Vec<Vec<u8>> {
    command(&["FUNCTION", "LOAD", "REPLACE", code])
}

fn line(text: &str) -> Vec<Vec<u8>> {
    text.split(' ').map(|w| w.as_bytes().to_vec()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loading_calling_and_listing_functions_match_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let mut commands = vec![
        line("FUNCTION FLUSH"),
        load("#!lua name=counter\nredis.register_function('bump', function(keys, args)\n  return redis.call('incrby', keys[1], args[1] or 1)\nend)"),
        line("FCALL bump 1 c"),
        line("FCALL bump 1 c 5"),
        line("GET c"),
        line("FCALL_RO bump 1 c"),
        line("FCALL nosuch 0"),
        line("FCALL bump x"),
        line("FCALL bump 2 c"),
        line("FCALL bump -1"),
        line("FUNCTION LIST"),
        line("FUNCTION LIST WITHCODE"),
        line("FUNCTION LIST LIBRARYNAME count*"),
        line("FUNCTION LIST LIBRARYNAME nope*"),
        line("FUNCTION LIST LIBRARYNAME"),
        line("FUNCTION LIST WITHCODE WITHCODE"),
        line("FUNCTION LIST bad"),
        line("FUNCTION STATS"),
        // A library of the same name, without and with REPLACE.
        load("#!lua name=counter\nredis.register_function('other', function() return 1 end)"),
        load_replace("#!lua name=counter\nredis.register_function{function_name='peek', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}, description='reads a counter'}"),
        line("FCALL bump 1 c"),
        line("FCALL_RO peek 1 c"),
        line("FUNCTION LIST"),
        // A function name another library has.
        load("#!lua name=second\nredis.register_function('peek', function() return 1 end)"),
        // Errors of the code and of its registrations.
        load("return 1"),
        load("#!lua name=x"),
        load("#!lua\nreturn 1"),
        load("#!lua name=a name=b\n"),
        load("#!lua name=a foo=bar\n"),
        load("#!lua name=a-b\n"),
        load("#!bad_engine name=x\n"),
        load("#!lua name=x\nreturn 1"),
        load("#!lua name=x\nthis is not lua"),
        load("#!lua name=x\nredis.call('ping')"),
        load("#!lua name=x\nredis.setresp(3)"),
        load("#!lua name=x\nmath.random()"),
        load("#!lua name=x\nredis.redis.call('ping')"),
        load("#!lua name=x\nnew_global = 1"),
        load("#!lua name=x\nerror('raised')"),
        load("#!lua name=x\nerror({err='-CUSTOM raised'})"),
        load("#!lua name=x\nredis.register_function()"),
        load("#!lua name=x\nredis.register_function(1, 2, 3)"),
        load("#!lua name=x\nredis.register_function('a')"),
        load("#!lua name=x\nredis.register_function(5, 'b')"),
        load("#!lua name=x\nredis.register_function({}, function() end)"),
        load("#!lua name=x\nredis.register_function('a-b', function() end)"),
        load("#!lua name=x\nredis.register_function('a', function() end)\nredis.register_function('a', function() end)"),
        load("#!lua name=x\nredis.register_function{function_name='a'}"),
        load("#!lua name=x\nredis.register_function{callback=function() end}"),
        load("#!lua name=x\nredis.register_function{function_name=1, callback=function() end, bad=1}"),
        load("#!lua name=x\nredis.register_function{function_name={}, callback=function() end}"),
        load("#!lua name=x\nredis.register_function{function_name='a', callback=1}"),
        load("#!lua name=x\nredis.register_function{function_name='a', callback=function() end, description={}}"),
        load("#!lua name=x\nredis.register_function{function_name='a', callback=function() end, flags='no-writes'}"),
        load("#!lua name=x\nredis.register_function{function_name='a', callback=function() end, flags={'bad'}}"),
        line("FUNCTION LOAD FOO x"),
        line("FUNCTION LOAD REPLACE"),
        line("FUNCTION LIST"),
        // Every flag, and what a function sees when it runs.
        load("#!lua name=flags\nredis.register_function{function_name='flagged', callback=function() return 1 end, flags={'NO-WRITES', 'allow-oom', 'allow-stale', 'no-cluster', 'allow-cross-slot-keys'}}"),
        line("FUNCTION LIST LIBRARYNAME flags"),
        line("FCALL_RO flagged 0"),
        load("#!lua name=runtime\nredis.log(redis.LOG_NOTICE, 'loading')\nlocal version = redis.REDIS_VERSION\nredis.register_function('sees', function(keys, args)\n  return {keys[1], args[1], #keys, #args, version, redis.REDIS_VERSION_NUM}\nend)"),
        line("FCALL sees 1 k a"),
        line("FCALL sees 0"),
        load("#!lua name=faults\nredis.register_function('raise', function()\n  error('boom')\nend)"),
        line("FCALL raise 0"),
        load("#!lua name=faults2\nredis.register_function('sets_global', function() x = 1 end)"),
        line("FCALL sets_global 0"),
        load("#!lua name=faults3\nredis.register_function('reads_keys', function() return KEYS end)"),
        line("FCALL reads_keys 0"),
        load("#!lua name=faults4\nredis.register_function('unknown_command', function() return redis.call('nosuch') end)"),
        line("FCALL unknown_command 0"),
        load("#!lua name=faults5\nredis.register_function('no_register', function() return redis.register_function end)"),
        line("FCALL no_register 0"),
        load("#!lua name=faults6\nlocal register = redis.register_function\nregister('late', function()\n  register('later', function() end)\nend)"),
        line("FCALL late 0"),
        load("#!lua name=faults7\nredis.register_function{function_name='ro_writes', callback=function() return redis.call('set', 'k', 'v') end, flags={'no-writes'}}"),
        line("FCALL ro_writes 0"),
        line("FCALL_RO ro_writes 0"),
        line("SET s notanumber"),
        load("#!lua name=faults8\nredis.register_function('caught', function() return redis.pcall('incr', 's') end)"),
        line("FCALL caught 0"),
        line("FUNCTION STATS"),
        // DELETE, KILL with nothing running, HELP, FLUSH's forms.
        line("FUNCTION DELETE nope"),
        line("FUNCTION DELETE faults"),
        line("FCALL raise 0"),
        line("FUNCTION KILL"),
        line("FUNCTION HELP"),
        line("FUNCTION FLUSH bad"),
        line("FUNCTION FLUSH SYNC extra"),
        line("FUNCTION FLUSH ASYNC"),
        line("FUNCTION LIST"),
        line("FUNCTION STATS"),
        // DUMP and RESTORE: one library, so the payload's order is fixed.
        load("#!lua name=dumped\nredis.register_function('from_dump', function() return 'restored' end)"),
        line("FUNCTION DUMP"),
    ];
    let mut mismatches = compare_streams(redis.addr, tally.addr(), &commands).await;
    // The payload each server dumped is restored on both, under each
    // policy, beside corrupt payloads.
    let mut conn = connect(redis.addr).await;
    let payload: Vec<u8> = redis::cmd("FUNCTION")
        .arg("DUMP")
        .query_async(&mut conn)
        .await
        .unwrap();
    let string_payload: Vec<u8> = {
        let _: () = conn.set("plain", "value").await.unwrap();
        redis::cmd("DUMP")
            .arg("plain")
            .query_async(&mut conn)
            .await
            .unwrap()
    };
    let mut corrupt = payload.clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 1;
    let restore = |payload: &[u8], policy: Option<&str>| {
        let mut c = vec![b"FUNCTION".to_vec(), b"RESTORE".to_vec(), payload.to_vec()];
        c.extend(policy.map(|p| p.as_bytes().to_vec()));
        c
    };
    commands = vec![
        restore(&payload, None),
        restore(&payload, Some("APPEND")),
        restore(&payload, Some("REPLACE")),
        line("FCALL from_dump 0"),
        restore(&payload, Some("FLUSH")),
        line("FUNCTION LIST"),
        restore(&payload, Some("BAD")),
        restore(&payload, Some("FLUSH")).into_iter().chain([b"x".to_vec()]).collect(),
        restore(&corrupt, None),
        restore(b"short", None),
        restore(&string_payload, None),
        line("FUNCTION FLUSH"),
        restore(&payload, None),
        line("FCALL from_dump 0"),
        // RESP3 shapes: maps, a set of flags, a null description.
        line("HELLO 3"),
        load("#!lua name=three\nredis.register_function{function_name='three', callback=function() return 3 end, flags={'no-writes', 'allow-oom'}}"),
        line("FUNCTION LIST LIBRARYNAME three"),
        line("FUNCTION STATS"),
        line("FCALL three 0"),
    ];
    mismatches.extend(compare_streams(redis.addr, tally.addr(), &commands).await);
    assert_no_mismatch(&mismatches);
}

async fn query<T: redis::FromRedisValue>(addr: std::net::SocketAddr, args: &[&str]) -> T {
    let mut conn = connect(addr).await;
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query_async(&mut conn).await.unwrap()
}

const COUNTER: &str = "#!lua name=kept\nredis.register_function('kept_incr', function(keys) return redis.call('incr', keys[1]) end)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn libraries_are_kept_by_the_snapshot_and_the_append_only_file() {
    let mut tally = TallyProcess::start(&["--appendonly", "yes"]);
    let name: String = query(tally.addr(), &["FUNCTION", "LOAD", COUNTER]).await;
    assert_eq!(name, "kept");
    let n: i64 = query(tally.addr(), &["FCALL", "kept_incr", "1", "c"]).await;
    assert_eq!(n, 1);
    let info: String = query(tally.addr(), &["INFO", "memory"]).await;
    for expected in [
        "number_of_functions:1\r\n".to_string(),
        "number_of_libraries:1\r\n".to_string(),
        format!(
            "used_memory_functions:{}\r\n",
            COUNTER.len() + "kept".len() + "kept_incr".len()
        ),
    ] {
        assert!(info.contains(&expected), "{expected} in {info}");
    }
    // From the append-only file's commands.
    tally.kill();
    tally.restart();
    let n: i64 = query(tally.addr(), &["FCALL", "kept_incr", "1", "c"]).await;
    assert_eq!(n, 2);
    // From a rewritten file's base, a snapshot.
    let _: String = query(tally.addr(), &["BGREWRITEAOF"]).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    tally.kill();
    tally.restart();
    let n: i64 = query(tally.addr(), &["FCALL", "kept_incr", "1", "c"]).await;
    assert_eq!(n, 3);
    let deleted: String = query(tally.addr(), &["FUNCTION", "DELETE", "kept"]).await;
    assert_eq!(deleted, "OK");
    tally.kill();
    tally.restart();
    let listed: Vec<redis::Value> = query(tally.addr(), &["FUNCTION", "LIST"]).await;
    assert!(listed.is_empty(), "a deleted library came back: {listed:?}");

    // A snapshot only (SAVE), then one redis-server wrote.
    let mut tally = TallyProcess::start(&[]);
    let _: String = query(tally.addr(), &["FUNCTION", "LOAD", COUNTER]).await;
    let _: String = query(tally.addr(), &["SAVE"]).await;
    tally.kill();
    tally.restart();
    let n: i64 = query(tally.addr(), &["FCALL", "kept_incr", "1", "c"]).await;
    assert_eq!(n, 1);
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let _: String = query(redis.addr, &["FUNCTION", "LOAD", COUNTER]).await;
    let _: String = query(redis.addr, &["SAVE"]).await;
    let redis_dir: String = {
        let reply: Vec<String> = query(redis.addr, &["CONFIG", "GET", "dir"]).await;
        reply[1].clone()
    };
    tally.kill();
    std::fs::copy(
        format!("{redis_dir}/dump.rdb"),
        format!("{}/dump.rdb", tally.dir),
    )
    .unwrap();
    tally.restart();
    let n: i64 = query(tally.addr(), &["FCALL", "kept_incr", "1", "from_redis"]).await;
    assert_eq!(n, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_replica_gets_the_libraries_in_its_sync_and_in_the_stream() {
    let tally = TestServer::start_real_clock().await;
    let master = tally.addr();
    let _: String = query(master, &["FUNCTION", "LOAD", COUNTER]).await;
    let Some(redis) =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port().to_string()])
    else {
        return;
    };
    wait_in_sync(master, redis.addr).await;
    assert_eq!(
        replication_field(redis.addr, "master_link_status")
            .await
            .as_deref(),
        Some("up")
    );
    let code: Vec<redis::Value> =
        query(redis.addr, &["FUNCTION", "LIST", "LIBRARYNAME", "kept"]).await;
    assert_eq!(code.len(), 1, "the snapshot's library: {code:?}");
    // In the stream: a library loaded, a call's effects, a delete.
    let _: String = query(
        master,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=later\nredis.register_function('later_set', function(keys) return redis.call('set', keys[1], 'v') end)",
        ],
    )
    .await;
    let _: String = query(master, &["FCALL", "later_set", "1", "written"]).await;
    let _: String = query(master, &["FUNCTION", "DELETE", "kept"]).await;
    wait_in_sync(master, redis.addr).await;
    let value: String = query(redis.addr, &["GET", "written"]).await;
    assert_eq!(value, "v");
    let listed: Vec<Vec<redis::Value>> = query(redis.addr, &["FUNCTION", "LIST"]).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0][1], redis::Value::BulkString(b"later".to_vec()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn function_kill_stops_a_busy_function_that_script_kill_may_not() {
    let tally = TestServer::start_real_clock().await;
    let addr = tally.addr();
    let _: String = query(addr, &["CONFIG", "SET", "busy-reply-threshold", "50"]).await;
    let _: String = query(
        addr,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=spin\nredis.register_function{function_name='spin', callback=function() while true do end end, flags={'no-writes'}}",
        ],
    )
    .await;
    let busy = tokio::spawn(async move {
        let mut conn = connect(addr).await;
        redis::cmd("FCALL")
            .arg("spin")
            .arg(0)
            .query_async::<redis::Value>(&mut conn)
            .await
    });
    let mut conn = connect(addr).await;
    // Other clients are told which KILL stops what runs.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let refused = loop {
        match redis::cmd("GET")
            .arg("x")
            .query_async::<redis::Value>(&mut conn)
            .await
        {
            Err(e) => break e.to_string(),
            Ok(_) => {
                assert!(std::time::Instant::now() < deadline, "never busy");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    assert!(
        refused.contains("You can only call FUNCTION KILL or SHUTDOWN NOSAVE"),
        "{refused}"
    );
    let stats: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("STATS")
        .query_async(&mut conn)
        .await
        .unwrap();
    let running = format!("{:?}", stats[1]);
    assert!(
        running.contains("spin") && running.contains("FCALL"),
        "{running}"
    );
    let script_kill = redis::cmd("SCRIPT")
        .arg("KILL")
        .query_async::<redis::Value>(&mut conn)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        script_kill.contains("You can only call FUNCTION KILL"),
        "{script_kill}"
    );
    let killed: String = redis::cmd("FUNCTION")
        .arg("KILL")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(killed, "OK");
    let outcome = busy.await.unwrap().unwrap_err().to_string();
    assert!(outcome.contains("Script killed by user"), "{outcome}");
    let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
    assert_eq!(pong, "PONG");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_and_functions_that_may_write_wait_for_enough_replicas_as_on_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let commands = vec![
        line("SET x value"),
        load("#!lua name=reads\nredis.register_function{function_name='reader', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}"),
        load("#!lua name=writes\nredis.register_function('writer', function(keys) return redis.call('get', keys[1]) end)"),
        line("CONFIG SET min-replicas-to-write 1"),
        command(&["EVAL", "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", "1", "x"]),
        command(&["EVAL", "return redis.call('get', KEYS[1])", "1", "x"]),
        command(&["EVAL", "#!lua\nreturn redis.call('get', KEYS[1])", "1", "x"]),
        command(&["EVAL", "return redis.call('set', KEYS[1], 1)", "1", "x"]),
        line("FCALL reader 1 x"),
        line("FCALL writer 1 x"),
        load("#!lua name=refused\nredis.register_function('f', function() return 1 end)"),
        line("CONFIG SET min-replicas-to-write 0"),
        line("FCALL writer 1 x"),
    ];
    let mismatches = compare_streams(redis.addr, tally.addr(), &commands).await;
    assert_no_mismatch(&mismatches);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_cluster_scripts_and_functions_are_refused_in_cluster_mode() {
    let node = TallyProcess::start(&["--cluster-enabled", "yes"]);
    let addr = node.addr();
    let _: String = query(
        addr,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=local_only\nredis.register_function{function_name='local_only', callback=function() return 1 end, flags={'no-cluster'}}\nredis.register_function('anywhere', function() return 2 end)",
        ],
    )
    .await;
    let mut conn = connect(addr).await;
    let refused = "Can not run script on cluster, 'no-cluster' flag is set.";
    for command in [
        redis::cmd("FCALL").arg("local_only").arg(0).clone(),
        redis::cmd("EVAL")
            .arg("#!lua flags=no-cluster\nreturn 1")
            .arg(0)
            .clone(),
    ] {
        let error = command
            .query_async::<redis::Value>(&mut conn)
            .await
            .unwrap_err();
        assert_eq!(error.detail(), Some(refused), "{error}");
    }
    let ran: i64 = query(addr, &["FCALL", "anywhere", "0"]).await;
    assert_eq!(ran, 2);
    let ran: i64 = query(addr, &["EVAL", "#!lua\nreturn 3", "0"]).await;
    assert_eq!(ran, 3);
}
