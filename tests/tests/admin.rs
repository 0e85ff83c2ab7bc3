//! Server commands: INFO, CONFIG, COMMAND, SCAN over many keys, SWAPDB,
//! SHUTDOWN and graceful shutdown of an embedded server.

use std::collections::HashSet;

use tally_tests::{encode_command, TestServer};

fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(str::trim)
}

#[tokio::test]
async fn info_carries_the_fields_clients_and_exporters_read() {
    let server = TestServer::start_with(|c| c.maxmemory = 100 * 1024 * 1024).await;
    let mut conn = server.raw().await;
    conn.line("SET a 1").await;
    conn.line("SET b 2 EX 100").await;
    conn.line("GET a").await;
    conn.line("GET missing").await;
    let info = conn.line("INFO").await;
    assert_eq!(field(&info, "redis_version"), Some("7.0.15"));
    assert_eq!(field(&info, "redis_mode"), Some("standalone"));
    assert_eq!(
        field(&info, "tcp_port"),
        Some(server.addr().port().to_string().as_str())
    );
    assert_eq!(field(&info, "connected_clients"), Some("1"));
    assert_eq!(field(&info, "maxmemory"), Some("104857600"));
    assert_eq!(field(&info, "maxmemory_policy"), Some("noeviction"));
    assert!(field(&info, "used_memory").unwrap().parse::<u64>().unwrap() > 0);
    assert!(
        field(&info, "used_memory_rss")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );
    assert_eq!(field(&info, "role"), Some("master"));
    assert_eq!(field(&info, "aof_enabled"), Some("0"));
    assert_eq!(field(&info, "keyspace_hits"), Some("1"));
    assert_eq!(field(&info, "keyspace_misses"), Some("1"));
    assert_eq!(field(&info, "db0"), Some("keys=2,expires=1,avg_ttl=0"));
    for section in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Persistence",
        "# Stats",
        "# Replication",
        "# CPU",
        "# Keyspace",
    ] {
        assert!(info.contains(section), "missing {section}");
    }
    assert!(!info.contains("# Commandstats"));
    let stats = conn.line("INFO commandstats").await;
    assert!(stats.contains("cmdstat_set:calls=2,"), "{stats}");
    assert!(stats.contains("cmdstat_get:calls=2,"), "{stats}");
    let all = conn.line("INFO all").await;
    assert!(all.contains("# Commandstats") && all.contains("# Keyspace"));
}

/// `dir` and `dbfilename` decide where files are written: CONFIG SET
/// refuses them unless `enable-protected-configs` allows (Redis 7's
/// default refuses; `local` allows loopback clients, which a test's are),
/// and CONFIG GET dir shows the absolute path, as Redis's getcwd() does.
#[tokio::test]
async fn protected_configs_are_refused_by_default_and_dir_is_absolute() {
    // A scratch directory named relative to the working directory (the
    // server removes its directory when dropped: never the tests' own).
    let scratch = tally_tests::scratch_dir();
    let up = std::env::current_dir().unwrap().components().count() - 1;
    let relative = format!("{}{}", "../".repeat(up), scratch.trim_start_matches('/'));
    let shown = std::fs::canonicalize(&scratch).unwrap();
    let shown = shown.to_string_lossy().into_owned();
    let server = TestServer::start_with(|c| c.dir = relative.clone()).await;
    let mut conn = server.raw().await;
    assert_eq!(
        conn.line("CONFIG GET dir").await,
        format!("*2\r\n$3\r\ndir\r\n${}\r\n{shown}\r\n", shown.len())
    );
    for name in ["dir", "dbfilename"] {
        assert_eq!(
            conn.line(&format!("CONFIG SET {name} elsewhere")).await,
            format!("-ERR CONFIG SET failed (possibly related to argument '{name}') - can't set protected config\r\n")
        );
    }
    assert_eq!(
        conn.line("CONFIG GET enable-protected-configs").await,
        "*2\r\n$24\r\nenable-protected-configs\r\n$2\r\nno\r\n"
    );
    assert_eq!(
        conn.line("CONFIG SET enable-protected-configs yes").await,
        "-ERR CONFIG SET failed (possibly related to argument 'enable-protected-configs') - can't set immutable config\r\n"
    );
    let local = TestServer::start_with(|c| {
        c.enable_protected_configs = tally_server::config::ProtectedAction::Local;
    })
    .await;
    let mut conn = local.raw().await;
    assert_eq!(
        conn.line("CONFIG SET dbfilename other.rdb").await,
        "+OK\r\n"
    );
    assert_eq!(
        conn.line("CONFIG GET dbfilename").await,
        "*2\r\n$10\r\ndbfilename\r\n$9\r\nother.rdb\r\n"
    );
}

#[tokio::test]
async fn config_get_set_and_refusals() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    assert_eq!(
        conn.line("CONFIG GET maxmemory-policy").await,
        "*2\r\n$16\r\nmaxmemory-policy\r\n$10\r\nnoeviction\r\n"
    );
    assert_eq!(
        conn.line("CONFIG SET maxmemory-policy noeviction").await,
        "+OK\r\n"
    );
    let refused = conn.line("CONFIG SET maxmemory-policy allkeys-lru").await;
    assert!(
        refused.starts_with("-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - maxmemory-policy 'allkeys-lru' is not supported"),
        "{refused}"
    );
    assert_eq!(
        conn.line("CONFIG SET tls-port 1234").await,
        "-ERR CONFIG SET failed (possibly related to argument 'tls-port') - can't set immutable config\r\n"
    );
    assert_eq!(
        conn.line("CONFIG SET timeout 30 maxclients 50").await,
        "+OK\r\n"
    );
    assert_eq!(
        conn.line("CONFIG GET timeout").await,
        "*2\r\n$7\r\ntimeout\r\n$2\r\n30\r\n"
    );
    // maxmemory, maxmemory-policy, maxclients, maxmemory-samples,
    // maxmemory-eviction-tenacity and maxmemory-clients.
    let many = conn.line("CONFIG GET max*").await;
    assert!(many.starts_with("*12\r\n"), "{many}");
    assert!(conn
        .line("CONFIG SET maxmemory 12x")
        .await
        .starts_with("-ERR CONFIG SET failed"));
    // A failed multi-set changes nothing.
    assert!(conn
        .line("CONFIG SET timeout 5 maxmemory bogus")
        .await
        .starts_with("-ERR"));
    assert_eq!(
        conn.line("CONFIG GET timeout").await,
        "*2\r\n$7\r\ntimeout\r\n$2\r\n30\r\n"
    );
    assert_eq!(conn.line("CONFIG RESETSTAT").await, "+OK\r\n");
    // Started without a file, as Redis answers.
    assert_eq!(
        conn.line("CONFIG REWRITE").await,
        "-ERR The server is running without a config file\r\n"
    );
}

/// CONFIG REWRITE brings the file the server started with up to date:
/// its lines stay, changed directives are rewritten where they were, new
/// ones are appended; a server started from the result has the same
/// configuration.
#[tokio::test]
async fn config_rewrite_keeps_the_file_and_writes_what_changed() {
    let dir = tally_tests::scratch_dir();
    let file = format!("{dir}/tally.conf");
    let original = "# the gateway's counters\nhz 10\ntimeout 30\n";
    std::fs::write(&file, original).expect("tally.conf");
    let path = std::path::PathBuf::from(&file);
    let server = TestServer::start_with(|c| {
        c.apply_text(original, "tally.conf")
            .expect("the file applies");
        c.config_file = Some(path);
    })
    .await;
    let mut conn = server.raw().await;
    for command in [
        &["CONFIG", "SET", "timeout", "45"][..],
        &["CONFIG", "SET", "replica-priority", "7"],
        &["CONFIG", "SET", "masterauth", "two words"],
        &["CONFIG", "REWRITE"],
    ] {
        assert_eq!(conn.cmd(command).await, b"+OK\r\n", "{command:?}");
    }
    let text = std::fs::read_to_string(&file).expect("rewritten");
    assert!(
        text.starts_with(
            "# the gateway's counters\nhz 10\ntimeout 45\n# Generated by CONFIG REWRITE\n"
        ),
        "{text}"
    );
    assert!(text.contains("\nreplica-priority 7\n"), "{text}");
    assert!(text.contains("\nmasterauth \"two words\"\n"), "{text}");
    let mut again = tally_server::Config::default();
    again
        .apply_text(&text, "rewritten")
        .expect("the rewritten file applies");
    assert_eq!(again.timeout_secs, 45);
    assert_eq!(again.replica_priority, 7);
    assert_eq!(again.masterauth, "two words");
}

#[tokio::test]
async fn command_introspection_is_consistent() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    let count = conn.line("COMMAND COUNT").await;
    let count: usize = count.trim_start_matches(':').trim_end().parse().unwrap();
    // COMMAND COUNT counts commands; COMMAND LIST lists their
    // subcommands too, by full name, as Redis 7.0 does.
    let list = conn.line("COMMAND LIST").await;
    let subcommands = list.matches('|').count();
    assert!(subcommands > 50, "{subcommands} subcommands");
    assert!(
        list.starts_with(&format!("*{}\r\n", count + subcommands)),
        "{list}"
    );
    assert!(list.contains("$6\r\nincrby\r\n"));
    assert!(list.contains("$7\r\nacl|cat\r\n"));
    let acl = conn.line("COMMAND LIST FILTERBY PATTERN acl*").await;
    assert!(
        acl.contains("$3\r\nacl\r\n") && acl.contains("$10\r\nacl|whoami\r\n"),
        "{acl}"
    );
    // A subcommand by its own categories: CONFIG GET is @admin, not @read.
    let admin = conn.line("COMMAND LIST FILTERBY ACLCAT admin").await;
    assert!(admin.contains("$10\r\nconfig|get\r\n"), "{admin}");
    let keyspace = conn.line("COMMAND LIST FILTERBY ACLCAT keyspace").await;
    assert!(!keyspace.contains("config|"), "{keyspace}");
    let info = conn.line("COMMAND INFO get").await;
    assert!(
        info.starts_with(
            "*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n"
        ),
        "{info}"
    );
    assert_eq!(conn.line("COMMAND INFO nosuch").await, "*1\r\n*-1\r\n");
    let docs = conn.line("COMMAND DOCS incr").await;
    assert!(docs.contains("$7\r\nsummary\r\n"), "{docs}");
    assert!(docs.contains("$6\r\nstring\r\n"), "{docs}");
    assert_eq!(
        conn.line("COMMAND GETKEYS MSET a 1 b 2").await,
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    let all = conn.line("COMMAND").await;
    assert!(all.starts_with(&format!("*{count}\r\n")));
}

#[tokio::test]
async fn a_full_scan_returns_every_key_even_while_tables_grow() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    let mut batch = Vec::new();
    for i in 0..3000 {
        batch.extend(encode_command(&[
            "SET".to_string(),
            format!("key:{i}"),
            "v".to_string(),
        ]));
    }
    conn.send(&batch).await;
    for _ in 0..3000 {
        conn.reply().await;
    }
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut added = 0;
    loop {
        let reply = conn.cmd(&["SCAN", &cursor, "COUNT", "100"]).await;
        let text = String::from_utf8(reply).unwrap();
        let parts: Vec<&str> = text.split("\r\n").collect();
        cursor = parts[2].to_string();
        for key in parts[4..].iter().skip(1).step_by(2) {
            if !key.is_empty() {
                seen.insert(key.to_string());
            }
        }
        // Keep growing the tables mid-iteration.
        if added < 3000 {
            let mut grow = Vec::new();
            for i in 0..300 {
                grow.extend(encode_command(&[
                    "SET".to_string(),
                    format!("new:{}", added + i),
                    "v".to_string(),
                ]));
            }
            conn.send(&grow).await;
            for _ in 0..300 {
                conn.reply().await;
            }
            added += 300;
        }
        if cursor == "0" {
            break;
        }
    }
    for i in 0..3000 {
        assert!(seen.contains(&format!("key:{i}")), "SCAN missed key:{i}");
    }
    let matched = conn.line("SCAN 0 MATCH key:1?? COUNT 100000").await;
    assert!(
        matched.starts_with("*2\r\n$1\r\n0\r\n*100\r\n"),
        "{}",
        &matched[..40]
    );
}

#[tokio::test]
async fn swapdb_and_flushall_cover_every_database() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    conn.line("SET in0 a").await;
    conn.line("SELECT 5").await;
    conn.line("SET in5 b").await;
    assert_eq!(conn.line("SWAPDB 0 5").await, "+OK\r\n");
    assert_eq!(conn.line("GET in0").await, "$1\r\na\r\n");
    conn.line("SELECT 0").await;
    assert_eq!(conn.line("GET in5").await, "$1\r\nb\r\n");
    assert_eq!(conn.line("FLUSHALL").await, "+OK\r\n");
    assert_eq!(conn.line("DBSIZE").await, ":0\r\n");
    conn.line("SELECT 5").await;
    assert_eq!(conn.line("DBSIZE").await, ":0\r\n");
}

#[tokio::test]
async fn shutdown_finishes_owed_replies_and_stops_the_server() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    let mut other = server.raw().await;
    assert_eq!(other.line("PING").await, "+PONG\r\n");
    let mut batch = encode_command(&["SET", "a", "1"]);
    batch.extend(encode_command(&["SHUTDOWN"]));
    conn.send(&batch).await;
    assert_eq!(conn.read_until_closed().await, b"+OK\r\n");
    assert_eq!(other.read_until_closed().await, b"");
    assert!(server.handle.is_shutting_down());
    tokio::time::timeout(std::time::Duration::from_secs(10), server.handle.wait())
        .await
        .expect("the server stops");
}

#[tokio::test]
async fn an_embedded_server_shuts_down_gracefully_from_its_handle() {
    let server = TestServer::start().await;
    let addr = server.addr();
    let mut conn = server.raw().await;
    assert_eq!(conn.line("SET a 1").await, "+OK\r\n");
    tokio::time::timeout(std::time::Duration::from_secs(10), server.handle.shutdown())
        .await
        .expect("shutdown completes");
    assert_eq!(conn.read_until_closed().await, b"");
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

/// Every port an embedded server listened on (client, TLS, cluster bus,
/// metrics) is free again once its handle's shutdown returns: a program
/// that restarts its server on the same ports must not get AddrInUse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_returns_after_every_listener_is_closed() {
    let tls = tally_tests::TlsFiles::generate();
    for round in 0..10 {
        // A port found free can be taken by another test before the server
        // binds it: then the start is tried again on other ports.
        let mut attempts = 0;
        let (server, client, tls_port, bus, metrics) = loop {
            let (client, tls_port, bus, metrics) = (
                tally_tests::free_local_port(),
                tally_tests::free_local_port(),
                tally_tests::free_local_port(),
                tally_tests::free_local_port(),
            );
            let started = TestServer::try_start_with(|c| {
                c.port = client;
                c.cluster_enabled = true;
                c.cluster_port = bus;
                c.metrics_port = metrics;
                if let Some(files) = &tls {
                    c.tls.port = tls_port;
                    c.tls.cert_file = files.server_cert.clone();
                    c.tls.key_file = files.server_key.clone();
                    c.tls.ca_cert_file = files.ca.clone();
                }
            })
            .await;
            match started {
                Ok(server) => break (server, client, tls_port, bus, metrics),
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && attempts < 20 => {
                    attempts += 1;
                }
                Err(e) => panic!("round {round}: tally-server starts: {e}"),
            }
        };
        let mut ports = vec![("client", client), ("bus", bus), ("metrics", metrics)];
        if tls.is_some() {
            ports.push(("tls", tls_port));
        }
        // Each is listening now.
        for (name, port) in &ports {
            assert!(
                std::net::TcpListener::bind(("127.0.0.1", *port)).is_err(),
                "round {round}: the {name} port {port} is not taken while the server runs"
            );
        }
        server.handle.shutdown().await;
        for (name, port) in &ports {
            if let Err(e) = std::net::TcpListener::bind(("127.0.0.1", *port)) {
                panic!("round {round}: the {name} port {port} is still taken after shutdown: {e}");
            }
        }
    }
}

#[tokio::test]
async fn help_subcommands_answer_in_redis_form_with_what_tally_has() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    for command in [
        "CONFIG HELP",
        "CLIENT HELP",
        "OBJECT HELP",
        "SCRIPT HELP",
        "PUBSUB HELP",
        "COMMAND HELP",
    ] {
        let reply = conn.line(command).await;
        let name = command.split(' ').next().unwrap();
        // Redis 7.0's first and closing lines, word for word.
        let header =
            format!("+{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n");
        assert!(
            reply
                .split_once("\r\n")
                .is_some_and(|(_, rest)| rest.starts_with(&header)),
            "{command}: {reply}"
        );
        assert!(
            reply.ends_with("+HELP\r\n+    Prints this help.\r\n"),
            "{command}: {reply}"
        );
    }
    // The entries are tally's own, Redis's words: PUBSUB lists the shard
    // channel subcommands too, now that they exist.
    let pubsub = conn.line("PUBSUB HELP").await;
    assert!(pubsub.contains("+CHANNELS [<pattern>]\r\n"));
    assert!(pubsub.contains("+SHARDCHANNELS [<pattern>]\r\n"));
    assert!(pubsub.contains("+SHARDNUMSUB [<shardchannel> ...]\r\n"));
}

/// SCAN cursors stay small enough to survive a trip through a double, as
/// clients in JavaScript and Lua scripts (`tonumber`) hold them: a full scan
/// with every cursor converted to f64 and back returns every key, and a
/// script's cursor loop ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_cursors_survive_being_held_as_doubles() {
    let server = TestServer::start_with(|c| c.shards = 32).await;
    let mut conn = server.raw().await;
    let keys = 20_000;
    let mut batch = Vec::new();
    for i in 0..keys {
        batch.extend(encode_command(&[
            "SET".to_string(),
            format!("k:{i}"),
            "v".to_string(),
        ]));
    }
    conn.send(&batch).await;
    for _ in 0..keys {
        conn.reply().await;
    }
    let mut seen = HashSet::new();
    let mut cursor = 0f64;
    let mut largest = 0u64;
    loop {
        let reply = conn
            .cmd(&["SCAN", &format!("{}", cursor as u64), "COUNT", "100"])
            .await;
        let text = String::from_utf8(reply).unwrap();
        let parts: Vec<&str> = text.split("\r\n").collect();
        let next: u64 = parts[2].parse().unwrap();
        largest = largest.max(next);
        for key in parts[4..].iter().skip(1).step_by(2) {
            if !key.is_empty() {
                seen.insert(key.to_string());
            }
        }
        cursor = next as f64; // what node-redis 4 and Lua do with it
        if next == 0 {
            break;
        }
    }
    assert_eq!(seen.len(), keys, "every key, through an f64 cursor");
    // Far below 2^53, where doubles stop being exact: cursors grow with the
    // table (here about 2 * keys * 256), as Redis's do, not with its history.
    assert!(largest < 1 << 32, "cursor {largest} for a {keys}-key table");
    // The loop scripts write: it must end, having counted every key once
    // at least.
    let script = "local cursor, n = 0, 0 \
        repeat \
          local r = redis.call('SCAN', cursor, 'COUNT', 500) \
          cursor = tonumber(r[1]) \
          n = n + #r[2] \
        until cursor == 0 \
        return n";
    let reply = String::from_utf8(conn.cmd(&["EVAL", script, "0"]).await).unwrap();
    let counted: usize = reply.trim_start_matches(':').trim_end().parse().unwrap();
    assert!(counted >= keys, "{reply}");
}

/// The Redis 7.0 parameters tally accepts without acting on them
/// (server/src/config/accepted.rs) read, check and show as redis-server's:
/// defaults, values set, errors, and the ones only a start may set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_parameters_answer_as_redis_does() {
    let mut lines = Vec::new();
    for name in [
        "active-defrag-cycle-max",
        "active-defrag-ignore-bytes",
        "active-defrag-max-scan-fields",
        "activedefrag",
        "active-expire-effort",
        "activerehashing",
        "always-show-logo",
        "aof-timestamp-enabled",
        "bgsave_cpulist",
        "bind-source-addr",
        "cluster-link-sendbuf-limit",
        "hll-sparse-max-bytes",
        "lazyfree-lazy-user-del",
        "replica-lazy-flush",
        "slave-lazy-flush",
        "lfu-log-factor",
        "maxmemory-samples",
        "sanitize-dump-payload",
        "socket-mark-id",
        "stream-node-max-entries",
        "enable-debug-command",
        "oom-score-adj",
        "tcp-keepalive",
        "tcp-backlog",
    ] {
        lines.push(format!("CONFIG GET {name}"));
    }
    lines.extend(
        [
            "CONFIG SET active-defrag-cycle-max 50",
            "CONFIG SET active-defrag-cycle-max 100",
            "CONFIG SET active-defrag-cycle-max x",
            "CONFIG SET active-defrag-ignore-bytes 2mb",
            "CONFIG SET active-defrag-ignore-bytes 0",
            "CONFIG SET active-defrag-ignore-bytes -1",
            "CONFIG SET activedefrag yes",
            "CONFIG SET activedefrag no",
            "CONFIG SET activedefrag maybe",
            "CONFIG SET activerehashing NO",
            "CONFIG SET always-show-logo yes",
            "CONFIG SET cluster-link-sendbuf-limit 1kb",
            "CONFIG SET slave-lazy-flush yes",
            "CONFIG SET sanitize-dump-payload Clients",
            "CONFIG SET sanitize-dump-payload sometimes",
            "CONFIG SET oom-score-adj relative",
            "CONFIG SET enable-debug-command yes",
            "CONFIG SET tcp-keepalive -1",
            "CONFIG SET tcp-keepalive 60",
            "CONFIG SET tcp-backlog 10",
            "CONFIG SET stream-node-max-entries 9223372036854775807",
            "CONFIG GET active-defrag-cycle-max",
            "CONFIG GET active-defrag-ignore-bytes",
            "CONFIG GET activerehashing",
            "CONFIG GET cluster-link-sendbuf-limit",
            "CONFIG GET replica-lazy-flush",
            "CONFIG GET sanitize-dump-payload",
            "CONFIG GET oom-score-adj",
            "CONFIG GET tcp-keepalive",
            "CONFIG GET stream-node-max-entries",
        ]
        .map(str::to_string),
    );
    tally_tests::assert_script_matches_redis(&lines.join("\n")).await;
}

/// CONFIG SET port and bind move the client port while the server runs,
/// as Redis's do: the new socket opens before the old one closes, open
/// connections stay, and a port that cannot be had changes nothing and
/// answers Redis's error. tally's own start-up directives take their
/// current value back (a CONFIG GET * saved and set again) and refuse any
/// other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_set_port_and_bind_listen_anew_while_the_server_runs() {
    let server = TestServer::start().await;
    let old = server.addr();
    let mut conn = server.raw().await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let taken_port = taken.local_addr().expect("address").port();
    assert_eq!(
        conn.line(&format!("CONFIG SET maxmemory 1234 port {taken_port}")).await,
        "-ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.\r\n"
    );
    assert_eq!(
        conn.line("CONFIG GET maxmemory").await,
        "*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n",
        "nothing changed"
    );
    assert!(
        tally_tests::RawConn::try_connect(old).await,
        "the old port still serves"
    );
    drop(taken);
    let free = tally_tests::free_local_port();
    assert_eq!(
        conn.line(&format!("CONFIG SET port {free}")).await,
        "+OK\r\n"
    );
    let moved: std::net::SocketAddr = format!("127.0.0.1:{free}").parse().expect("address");
    let mut fresh = tally_tests::RawConn::connect(moved).await;
    assert_eq!(fresh.line("PING").await, "+PONG\r\n");
    let info = fresh.line("INFO server").await;
    assert_eq!(field(&info, "tcp_port"), Some(free.to_string().as_str()));
    // The connection made before the move carries on; the old port is shut.
    assert_eq!(conn.line("PING").await, "+PONG\r\n");
    let mut closed = false;
    for _ in 0..100 {
        if !tally_tests::RawConn::try_connect(old).await {
            closed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(closed, "the old port still accepts");
    assert_eq!(conn.line("CONFIG SET bind 127.0.0.1").await, "+OK\r\n");
    assert_eq!(
        conn.line("CONFIG SET bind 192.0.2.1").await,
        "-ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.\r\n"
    );
    assert_eq!(
        fresh.line("CONFIG GET bind").await,
        "*2\r\n$4\r\nbind\r\n$9\r\n127.0.0.1\r\n"
    );
    let shards = fresh.line("CONFIG GET shards").await;
    let value = shards
        .trim_end()
        .rsplit("\r\n")
        .next()
        .expect("a value")
        .to_string();
    assert_eq!(
        fresh.line(&format!("CONFIG SET shards {value}")).await,
        "+OK\r\n"
    );
    assert_eq!(
        fresh.line("CONFIG SET shards 3").await,
        "-ERR CONFIG SET failed (possibly related to argument 'shards') - can't set immutable config\r\n"
    );
}
