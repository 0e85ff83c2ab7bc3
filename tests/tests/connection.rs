//! Connection-level behaviour: AUTH and requirepass, HELLO/RESP3, client
//! bookkeeping (CLIENT ...), maxclients, idle timeout, QUIT, DEBUG SLEEP, and
//! a real client library against the server.

use std::time::Duration;

use redis::AsyncCommands;
use tally_tests::TestServer;

#[tokio::test]
async fn requirepass_gates_every_command_until_auth() {
    let server = TestServer::start_with(|c| c.requirepass = Some("s3cret".into())).await;
    let mut conn = server.raw().await;
    assert_eq!(
        conn.line("GET k").await,
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(
        conn.line("FOO").await,
        "-ERR unknown command 'FOO', with args beginning with: \r\n"
    );
    assert_eq!(
        conn.line("AUTH wrong").await,
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(
        conn.line("AUTH someone s3cret").await,
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(conn.line("AUTH s3cret").await, "+OK\r\n");
    assert_eq!(conn.line("SET k v").await, "+OK\r\n");
    assert_eq!(conn.line("RESET").await, "+RESET\r\n");
    assert_eq!(
        conn.line("GET k").await,
        "-NOAUTH Authentication required.\r\n"
    );
    let hello = conn.line("HELLO 3 AUTH default s3cret").await;
    assert!(
        hello.starts_with("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"),
        "{hello}"
    );
    assert_eq!(conn.line("GET k").await, "$1\r\nv\r\n");
    assert_eq!(conn.line("GET missing").await, "_\r\n");
}

#[tokio::test]
async fn auth_without_a_password_configured_says_so() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    assert_eq!(
        conn.line("AUTH x").await,
        "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"
    );
    assert_eq!(conn.line("AUTH default anything").await, "+OK\r\n");
}

#[tokio::test]
async fn hello_switches_protocol_and_reports_the_client_id() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    let id = conn.line("CLIENT ID").await;
    let id = id.trim_start_matches(':').trim_end().to_string();
    let hello = conn.line("HELLO 3 SETNAME gateway-1").await;
    assert_eq!(
        hello,
        format!(
            "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:{id}\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"
        )
    );
    assert_eq!(conn.line("CLIENT GETNAME").await, "$9\r\ngateway-1\r\n");
    assert!(conn.line("CONFIG GET port").await.starts_with("%1\r\n"));
    let info = conn.line("CLIENT INFO").await;
    assert!(info.starts_with('='), "RESP3 verbatim string: {info}");
    assert!(info.contains(&format!("id={id} ")), "{info}");
    assert!(info.contains("name=gateway-1 "), "{info}");
    assert!(info.contains("resp=3"), "{info}");
    assert!(info.contains("cmd=client|info"), "{info}");
}

#[tokio::test]
async fn client_list_and_kill_by_id() {
    let server = TestServer::start().await;
    let mut victim = server.raw().await;
    let mut killer = server.raw().await;
    victim.line("CLIENT SETNAME victim").await;
    let victim_id = victim.line("CLIENT ID").await;
    let victim_id = victim_id.trim_start_matches(':').trim_end().to_string();
    let list = killer.line("CLIENT LIST").await;
    assert!(list.contains(&format!("id={victim_id} ")), "{list}");
    assert!(list.contains("name=victim "), "{list}");
    assert_eq!(
        killer.line(&format!("CLIENT KILL ID {victim_id}")).await,
        ":1\r\n"
    );
    assert_eq!(victim.read_until_closed().await, b"");
    assert_eq!(
        killer.line(&format!("CLIENT KILL ID {victim_id}")).await,
        ":0\r\n"
    );
    assert_eq!(killer.line("PING").await, "+PONG\r\n");
}

#[tokio::test]
async fn maxclients_refuses_the_extra_connection_with_redis_error() {
    let server = TestServer::start_with(|c| c.maxclients = 2).await;
    let mut first = server.raw().await;
    let mut second = server.raw().await;
    assert_eq!(first.line("PING").await, "+PONG\r\n");
    assert_eq!(second.line("PING").await, "+PONG\r\n");
    let mut third = server.raw().await;
    assert_eq!(
        third.read_until_closed().await,
        b"-ERR max number of clients reached\r\n"
    );
    drop(first);
    // The slot frees once the server notices the first client left.
    let mut admitted = false;
    for _ in 0..100 {
        let mut retry = server.raw().await;
        retry.send(b"PING\r\n").await;
        let got = retry.read_until_closed_or_reply().await;
        if got == b"+PONG\r\n" {
            admitted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(admitted, "a freed slot is given to a new client");
    let info = second.line("INFO stats").await;
    assert!(!info.contains("rejected_connections:0\r\n"), "{info}");
}

#[tokio::test]
async fn idle_clients_are_closed_after_timeout() {
    let server = TestServer::start_with(|c| c.timeout_secs = 1).await;
    let mut idle = server.raw().await;
    assert_eq!(idle.line("PING").await, "+PONG\r\n");
    let started = std::time::Instant::now();
    assert_eq!(idle.read_until_closed().await, b"");
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn quit_replies_ok_and_closes() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    conn.send(b"*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n").await;
    assert_eq!(conn.read_until_closed().await, b"+OK\r\n");
}

#[tokio::test]
async fn debug_sleep_pauses_this_client_then_runs_the_rest_of_its_batch() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    let mut batch = tally_tests::encode_command(&["DEBUG", "SLEEP", "0.2"]);
    batch.extend(tally_tests::encode_command(&["SET", "after", "1"]));
    conn.send(&batch).await;
    assert_eq!(conn.reply().await, b"+OK\r\n");
    assert_eq!(conn.reply().await, b"+OK\r\n");
    assert_eq!(conn.line("GET after").await, "$1\r\n1\r\n");
}

#[tokio::test]
async fn the_redis_crate_works_unmodified() {
    let server = TestServer::start().await;
    let client = server.client();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = con.set_ex("rl:a", 5, 60).await.unwrap();
    let n: i64 = con.incr("rl:a", 3).await.unwrap();
    assert_eq!(n, 8);
    let ttl: i64 = con.ttl("rl:a").await.unwrap();
    assert_eq!(ttl, 60);
    let (a, b): (i64, Option<String>) = redis::pipe()
        .incr("rl:b", 1)
        .get("missing")
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!((a, b), (1, None));
    let err = redis::cmd("NOSUCH")
        .query_async::<()>(&mut con)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown command"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_increments_from_many_connections_all_count() {
    let server = TestServer::start().await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let addr = server.addr();
        tasks.push(tokio::spawn(async move {
            let mut conn = tally_tests::RawConn::connect(addr).await;
            let mut batch = Vec::new();
            for _ in 0..1000 {
                batch.extend(tally_tests::encode_command(&["INCR", "shared"]));
            }
            conn.send(&batch).await;
            for _ in 0..1000 {
                conn.reply().await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut conn = server.raw().await;
    assert_eq!(conn.line("GET shared").await, "$4\r\n8000\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mset_is_atomic_across_shards() {
    let server = TestServer::start_with(|c| c.shards = 16).await;
    let keys: Vec<String> = (0..16).map(|i| format!("k{i}")).collect();
    let addr = server.addr();
    let writer_keys = keys.clone();
    let writer = tokio::spawn(async move {
        let mut conn = tally_tests::RawConn::connect(addr).await;
        for round in 0..300 {
            let mut args = vec!["MSET".to_string()];
            for k in &writer_keys {
                args.push(k.clone());
                args.push(round.to_string());
            }
            conn.cmd(&args).await;
        }
    });
    let mut reader = server.raw().await;
    // Every key exists from the start, so each MGET reply has 16 values.
    let mut first = vec!["MSET".to_string()];
    for k in &keys {
        first.push(k.clone());
        first.push("start".to_string());
    }
    reader.cmd(&first).await;
    let mut args = vec!["MGET".to_string()];
    args.extend(keys.iter().cloned());
    for _ in 0..300 {
        let reply = String::from_utf8(reader.cmd(&args).await).unwrap();
        // "*16", then "$len" and the value for each key.
        let values: Vec<&str> = reply.split("\r\n").skip(2).step_by(2).collect();
        assert_eq!(values.len(), 16, "{reply}");
        let first = values[0];
        assert!(
            values.iter().all(|v| *v == first),
            "torn MSET seen: {reply}"
        );
    }
    writer.await.unwrap();
}

#[tokio::test]
async fn client_setinfo_is_shown_in_client_list() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    assert_eq!(
        conn.line("CLIENT SETINFO LIB-NAME redis-rs").await,
        "+OK\r\n"
    );
    assert_eq!(conn.line("CLIENT SETINFO LIB-VER 1.0").await, "+OK\r\n");
    assert_eq!(
        conn.line("CLIENT SETINFO LIB-COLOR red").await,
        "-ERR Unrecognized option 'LIB-COLOR'\r\n"
    );
    let info = conn.line("CLIENT INFO").await;
    assert!(info.contains("lib-name=redis-rs lib-ver=1.0"), "{info}");
}

#[tokio::test]
async fn client_kill_by_address_and_skipme() {
    let server = TestServer::start().await;
    let mut victim = server.raw().await;
    let mut killer = server.raw().await;
    let info = victim.line("CLIENT INFO").await;
    let addr = info
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string();
    assert_eq!(killer.line(&format!("CLIENT KILL {addr}")).await, "+OK\r\n");
    assert_eq!(victim.read_until_closed().await, b"");
    assert_eq!(
        killer.line(&format!("CLIENT KILL {addr}")).await,
        "-ERR No such client\r\n"
    );
    // SKIPME yes (the default) spares the caller even when it matches.
    assert_eq!(killer.line("CLIENT KILL TYPE normal").await, ":0\r\n");
    assert_eq!(killer.line("PING").await, "+PONG\r\n");
    assert_eq!(
        killer.line("CLIENT KILL TYPE normal SKIPME no").await,
        ":1\r\n"
    );
    assert_eq!(killer.read_until_closed().await, b"");
}

#[tokio::test]
async fn lastsave_is_the_start_time_because_nothing_is_saved() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    assert_eq!(
        conn.line("LASTSAVE").await,
        format!(":{}\r\n", tally_tests::T0_MS / 1000)
    );
    assert_eq!(conn.line("WAIT 1 100").await, ":0\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_is_atomic_across_shards() {
    let server = TestServer::start_with(|c| c.shards = 16).await;
    let keys: Vec<String> = (0..16).map(|i| format!("t{i}")).collect();
    let mut setup = server.raw().await;
    for k in &keys {
        setup.cmd(&["SET", k, "0"]).await;
    }
    let addr = server.addr();
    let writer_keys = keys.clone();
    let writer = tokio::spawn(async move {
        let mut conn = tally_tests::RawConn::connect(addr).await;
        for _ in 0..200 {
            let mut batch = tally_tests::encode_command(&["MULTI"]);
            for k in &writer_keys {
                batch.extend(tally_tests::encode_command(&["INCR", k]));
            }
            batch.extend(tally_tests::encode_command(&["EXEC"]));
            conn.send(&batch).await;
            for _ in 0..writer_keys.len() + 2 {
                conn.reply().await;
            }
        }
    });
    let mut reader = server.raw().await;
    let mut args = vec!["MGET".to_string()];
    args.extend(keys.iter().cloned());
    for _ in 0..200 {
        let reply = String::from_utf8(reader.cmd(&args).await).unwrap();
        let values: Vec<&str> = reply.split("\r\n").skip(2).step_by(2).collect();
        assert_eq!(values.len(), 16, "{reply}");
        assert!(
            values.iter().all(|v| *v == values[0]),
            "torn transaction seen: {reply}"
        );
    }
    writer.await.unwrap();
    assert_eq!(reader.line("GET t15").await, "$3\r\n200\r\n");
}

#[tokio::test]
async fn eval_inside_multi_runs_on_the_transactions_shards() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    assert_eq!(conn.line("MULTI").await, "+OK\r\n");
    assert_eq!(conn.line("SET a 1").await, "+QUEUED\r\n");
    // KEYS[1] and an undeclared key: inside EXEC every shard is held, so
    // both are reachable without a conflict.
    let script = "return redis.call('INCR', KEYS[1]) + redis.call('INCR', 'b')";
    assert_eq!(conn.cmd(&["EVAL", script, "1", "a"]).await, b"+QUEUED\r\n");
    assert_eq!(conn.line("EXEC").await, "*2\r\n+OK\r\n:3\r\n");
    assert_eq!(conn.line("MGET a b").await, "*2\r\n$1\r\n2\r\n$1\r\n1\r\n");
}

/// With one connection worker, every client shares it: a script that
/// runs on and on must still let the others in (BUSY, SCRIPT KILL), as the
/// worker's other connections move to another thread while it runs.
#[test]
fn a_busy_script_does_not_hold_up_the_clients_that_share_its_worker() {
    use tally_tests::process::TallyProcess;
    let server = TallyProcess::start(&["--io-threads", "1", "--busy-reply-threshold", "50"]);
    let url = format!("redis://{}/", server.address());
    let client = redis::Client::open(url).expect("client");
    let mut scripted = client.get_connection().expect("connect");
    let mut other = client.get_connection().expect("connect");
    // A worker held by the script would leave this client unanswered: fail
    // rather than wait for ever.
    other
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let looping = std::thread::spawn(move || {
        redis::cmd("EVAL")
            .arg("while true do end")
            .arg(0)
            .query::<redis::Value>(&mut scripted)
            .expect_err("the script is killed")
            .to_string()
    });
    let mut answers = Vec::new();
    for _ in 0..500 {
        match redis::cmd("SCRIPT").arg("KILL").query::<String>(&mut other) {
            Ok(ok) => {
                answers.push(ok);
                break;
            }
            Err(e) => answers.push(e.to_string()),
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        answers.last().map(String::as_str),
        Some("OK"),
        "{answers:?}"
    );
    assert!(
        answers[..answers.len() - 1]
            .iter()
            .all(|a| a.contains("No scripts in execution right now.")),
        "{answers:?}"
    );
    let killed = looping.join().expect("the script's client");
    assert!(
        killed.contains("Script killed by user with SCRIPT KILL"),
        "{killed}"
    );
    assert_eq!(
        redis::cmd("PING")
            .query::<String>(&mut other)
            .expect("PING"),
        "PONG"
    );
}
