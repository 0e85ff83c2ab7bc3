//! The tally-server binary: options, config files, start-up refusals, signals.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

#[test]
fn help_names_the_redis_options() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for option in [
        "--port",
        "--bind",
        "--maxmemory",
        "--maxmemory-policy",
        "--requirepass",
        "--databases",
        "--maxclients",
        "--timeout",
        "--proto-max-bulk-len",
        "--client-query-buffer-limit",
        "--loglevel",
        "--shards",
    ] {
        assert!(text.contains(option), "--help lacks {option}:\n{text}");
    }
}

#[test]
fn an_eviction_policy_is_refused_at_start_with_the_reason() {
    let out = Command::new(BIN)
        .args(["--port", "0", "--maxmemory-policy", "allkeys-lru"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("maxmemory-policy 'allkeys-lru' is not supported"),
        "{err}"
    );
    assert!(err.contains("noeviction"), "{err}");
}

#[test]
fn an_unsupported_directive_names_file_line_and_directive() {
    let dir = std::env::temp_dir().join(format!("tally-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tally.conf");
    std::fs::write(&path, "port 7000\n# a comment\nno-such-directive x\n").unwrap();
    let out = Command::new(BIN).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:3: directive 'no-such-directive'",
            path.display()
        )),
        "{err}"
    );
}

#[test]
fn flags_override_the_config_file_and_sigterm_exits_zero() {
    let dir = std::env::temp_dir().join(format!("tally-cli-term-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tally.conf");
    let file_port = free_port();
    let flag_port = free_port();
    // SIGTERM saves (Redis's default save points): into the test's folder.
    std::fs::write(
        &path,
        format!(
            "port {file_port}\nrequirepass fromfile\ndir {}\n",
            dir.display()
        ),
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .arg(&path)
        .args(["--port", &flag_port.to_string(), "--requirepass", ""])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_ping(flag_port);
    assert_eq!(sigterm(&mut child).code(), Some(0));
}

#[test]
fn shutdown_command_exits_zero() {
    let (mut child, port) = spawn(&[]);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(b"SHUTDOWN\r\n").unwrap();
    assert_eq!(wait_for_exit(&mut child, "SHUTDOWN").code(), Some(0));
}

/// Starts the binary on a free port with `args` and a 50 ms busy threshold.
fn start(args: &[&str]) -> (std::process::Child, u16) {
    let (child, port) = spawn(args);
    let mut admin = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(
        request(&mut admin, &["CONFIG", "SET", "busy-reply-threshold", "50"]),
        "+OK\r\n"
    );
    (child, port)
}

/// Runs a never-ending script that wrote first, and waits until it is busy.
fn run_unkillable_script(port: u16) -> TcpStream {
    let mut scripted = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let script = "redis.call('SET','k','1') while true do end";
    let command = format!(
        "*3\r\n$4\r\nEVAL\r\n${}\r\n{script}\r\n$1\r\n0\r\n",
        script.len()
    );
    scripted.write_all(command.as_bytes()).unwrap();
    let mut client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    until(
        Duration::from_secs(20),
        || "script never became busy".into(),
        || {
            request(&mut client, &["SCRIPT", "KILL"])
                .starts_with("-UNKILLABLE")
                .then_some(())
        },
    );
    scripted
}

#[test]
fn shutdown_nosave_ends_the_process_while_an_unkillable_script_runs() {
    let (mut child, port) = start(&[]);
    let _scripted = run_unkillable_script(port);
    let mut admin = TcpStream::connect(("127.0.0.1", port)).unwrap();
    admin.write_all(b"SHUTDOWN NOSAVE\r\n").unwrap();
    assert_eq!(wait_for_exit(&mut child, "SHUTDOWN NOSAVE").code(), Some(0));
}

#[test]
fn sigterm_ends_the_process_while_scripts_hold_every_worker() {
    // Two workers, both running a script that wrote and never ends.
    let (mut child, port) = start(&["--io-threads", "2"]);
    let _first = run_unkillable_script(port);
    let _second = run_unkillable_script(port);
    assert_eq!(sigterm(&mut child).code(), Some(0));
}

/// Resident memory of a process, from /proc.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

#[test]
fn memory_of_a_huge_reply_and_a_failed_script_is_given_back() {
    let (mut child, port) = start(&[]);
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let baseline = rss_bytes(child.id());
    // A 64 MB value read back whole, and a script that fails on memory.
    assert_eq!(
        request(
            &mut conn,
            &[
                "EVAL",
                "redis.call('SET', 'big', string.rep('x', 64 * 1024 * 1024)) return 1",
                "0"
            ]
        ),
        ":1\r\n"
    );
    conn.write_all(b"GET big\r\n").unwrap();
    let mut received = 0usize;
    let mut buf = vec![0u8; 1 << 20];
    while received < 64 * 1024 * 1024 {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0);
        received += n;
    }
    let failed = request(
        &mut conn,
        &["EVAL", "return string.rep('x', 2^31 - 1)", "0"],
    );
    assert!(failed.starts_with("-ERR"), "{failed}");
    assert_eq!(request(&mut conn, &["DEL", "big"]), ":1\r\n");
    // jemalloc's background thread purges within about a second; allow
    // generously for a loaded machine. This is not a speed test: without
    // purging the memory never comes back at all.
    let pid = child.id();
    until(
        Duration::from_secs(30),
        || {
            format!(
                "RSS stayed at {} bytes (baseline {baseline})",
                rss_bytes(pid)
            )
        },
        || (rss_bytes(pid) < baseline + 32 * 1024 * 1024).then_some(()),
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// Fills keys `prefix:<i>` for i in `range`, 1000 per MSET.
fn fill(stream: &mut TcpStream, prefix: &str, range: std::ops::Range<usize>) {
    let mut i = range.start;
    while i < range.end {
        let end = (i + 1000).min(range.end);
        let pairs: Vec<String> = (i..end)
            .flat_map(|k| [format!("{prefix}:{k}"), k.to_string()])
            .collect();
        let mut command = vec!["MSET"];
        command.extend(pairs.iter().map(String::as_str));
        assert_eq!(request(stream, &command), "+OK\r\n");
        i = end;
    }
}

fn dbsize(port: u16) -> Option<u64> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    request(&mut stream, &["DBSIZE"])
        .strip_prefix(':')?
        .trim()
        .parse()
        .ok()
}

/// kill -9 in the middle of a BGSAVE: the snapshot file is the previous one,
/// whole, or the new one, whole (the new file is written under a temporary
/// name and renamed once complete), and a restart loads it.
#[test]
fn kill_9_during_a_background_save_leaves_a_loadable_snapshot() {
    let dir = std::env::temp_dir().join(format!("tally-cli-kill9-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let dir_arg = dir.to_string_lossy().into_owned();
    let (mut child, port) = spawn(&["--dir", &dir_arg]);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    fill(&mut stream, "before", 0..100_000);
    assert_eq!(request(&mut stream, &["SAVE"]), "+OK\r\n");
    let first = std::fs::read(dir.join("dump.rdb")).unwrap();
    fill(&mut stream, "after", 0..300_000);
    assert_eq!(
        request(&mut stream, &["BGSAVE"]),
        "+Background saving started\r\n"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let file = std::fs::read(dir.join("dump.rdb")).unwrap();
    let expected = if file == first { 100_000 } else { 400_000 };
    let (mut restarted, port) = spawn(&["--dir", &dir_arg]);
    let loaded = until(
        Duration::from_secs(60),
        || "the snapshot never loaded".into(),
        || dbsize(port),
    );
    assert_eq!(loaded, expected);
    assert_eq!(sigterm(&mut restarted).code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// kill -9 while clients INCR, under `appendfsync everysec` and `always`:
/// every increment a client saw acknowledged is in the log (each batch's
/// changes are written before its replies go out, and fsynced first under
/// `always`; everysec's fsync guards against a machine crash, not a
/// process kill), and at most the one in flight beyond it.
#[test]
fn kill_9_loses_no_acknowledged_increment() {
    for policy in ["everysec", "always"] {
        kill_9_while_incrementing(policy);
    }
}

fn kill_9_while_incrementing(policy: &str) {
    let dir = std::env::temp_dir().join(format!(
        "tally-cli-aof-kill9-{policy}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let dir_arg = dir.to_string_lossy().into_owned();
    let args = [
        "--dir",
        dir_arg.as_str(),
        "--appendonly",
        "yes",
        "--appendfsync",
        policy,
    ];
    let (mut child, port) = spawn(&args);
    let writers: Vec<_> = (0..8)
        .map(|w| {
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
                let key = format!("counter:{w}");
                let mut acknowledged = 0i64;
                loop {
                    let reply = request(&mut stream, &["INCR", &key]);
                    match reply.strip_prefix(':').and_then(|n| n.trim().parse().ok()) {
                        Some(n) => acknowledged = n,
                        None => return acknowledged,
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap();
    child.wait().unwrap();
    let acknowledged: Vec<i64> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    assert!(acknowledged.iter().all(|&n| n > 0), "{acknowledged:?}");
    let (mut restarted, port) = spawn(&args);
    until(
        Duration::from_secs(60),
        || "the log never loaded".into(),
        || dbsize(port).filter(|&n| n == 8),
    );
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    for (w, acked) in acknowledged.iter().enumerate() {
        let reply = request(&mut stream, &["GET", &format!("counter:{w}")]);
        let value: i64 = reply.lines().nth(1).unwrap().parse().unwrap();
        assert!(
            (*acked..=acked + 1).contains(&value),
            "{policy}: counter {w}: {value} in the log, {acked} acknowledged"
        );
    }
    assert_eq!(sigterm(&mut restarted).code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cluster node stopped with SIGSTOP is marked `fail` by the others and
/// the cluster answers CLUSTERDOWN (full coverage required); after SIGCONT
/// it recovers `ok`. Three processes, created with `redis-cli --cluster
/// create`, node timeout 1 s. (The times seen are printed, not asserted:
/// the deadline only stops a hang.)
#[test]
fn a_stopped_cluster_node_is_marked_failing_and_the_cluster_recovers() {
    let dir = std::env::temp_dir().join(format!("tally-cli-cluster-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut nodes = Vec::new();
    for i in 0..3 {
        let node_dir = dir.join(i.to_string());
        std::fs::create_dir_all(&node_dir).unwrap();
        let cport = free_port();
        let node_dir = node_dir.to_string_lossy().into_owned();
        let cport_arg = cport.to_string();
        let (child, port) = spawn(&[
            "--dir",
            &node_dir,
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            &cport_arg,
            "--cluster-node-timeout",
            "1000",
        ]);
        nodes.push((child, port));
    }
    let addresses: Vec<String> = nodes
        .iter()
        .map(|(_, p)| format!("127.0.0.1:{p}"))
        .collect();
    let created = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addresses)
        .arg("--cluster-yes")
        .output()
        .expect("redis-cli runs");
    let text = String::from_utf8_lossy(&created.stdout);
    assert!(text.contains("[OK] All 16384 slots covered."), "{text}");
    let state = |port: u16| {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
        let info = request(&mut stream, &["CLUSTER", "INFO"]);
        Some(info.contains("cluster_state:ok"))
    };
    until(
        Duration::from_secs(30),
        || "the cluster never came up".into(),
        || {
            nodes
                .iter()
                .all(|(_, p)| state(*p) == Some(true))
                .then_some(())
        },
    );
    let stopped = nodes[2].0.id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &stopped])
        .status()
        .unwrap()
        .success());
    let started = Instant::now();
    let first = nodes[0].1;
    until(
        Duration::from_secs(30),
        || "node 3 was never marked fail".into(),
        || {
            let mut stream = TcpStream::connect(("127.0.0.1", first)).ok()?;
            let listing = request(&mut stream, &["CLUSTER", "NODES"]);
            listing
                .lines()
                .any(|l| l.contains(&format!(":{}@", nodes[2].1)) && l.contains(" master,fail "))
                .then_some(())
        },
    );
    eprintln!(
        "marked fail after {:?} (node timeout 1 s)",
        started.elapsed()
    );
    until(
        Duration::from_secs(30),
        || "the cluster never went down".into(),
        || (state(first) == Some(false)).then_some(()),
    );
    let mut stream = TcpStream::connect(("127.0.0.1", first)).unwrap();
    // "x" hashes to slot 16287, the stopped node's; any key is refused,
    // also one in a slot the asked node serves itself ("bar": slot 5061 of
    // 0-5460, the first node's by `--cluster create`).
    assert_eq!(
        request(&mut stream, &["GET", "{x}"]),
        "-CLUSTERDOWN The cluster is down\r\n"
    );
    assert_eq!(
        request(&mut stream, &["GET", "bar"]),
        "-CLUSTERDOWN The cluster is down\r\n"
    );
    assert!(Command::new("kill")
        .args(["-CONT", &stopped])
        .status()
        .unwrap()
        .success());
    let resumed = Instant::now();
    until(
        Duration::from_secs(30),
        || "the cluster never recovered".into(),
        || {
            nodes
                .iter()
                .all(|(_, p)| state(*p) == Some(true))
                .then_some(())
        },
    );
    eprintln!("ok again {:?} after SIGCONT", resumed.elapsed());
    let mut stream = TcpStream::connect(("127.0.0.1", first)).unwrap();
    assert_eq!(request(&mut stream, &["GET", "bar"]), "$-1\r\n");
    for (mut child, _) in nodes {
        assert_eq!(sigterm(&mut child).code(), Some(0));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `pidfile` holds the process id while the server runs and is removed
/// when it exits; `logfile` receives the log instead of standard output.
#[test]
fn the_pid_file_and_the_log_file_are_written_and_the_pid_file_removed() {
    let dir = std::env::temp_dir().join(format!("tally-cli-files-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("tally.pid");
    let logfile = dir.join("tally.log");
    let (mut child, _) = spawn(&[
        "--pidfile",
        &pidfile.to_string_lossy(),
        "--logfile",
        &logfile.to_string_lossy(),
    ]);
    assert_eq!(
        std::fs::read_to_string(&pidfile).unwrap(),
        format!("{}\n", child.id())
    );
    assert_eq!(sigterm(&mut child).code(), Some(0));
    assert!(!pidfile.exists(), "the pid file outlived the server");
    let log = std::fs::read_to_string(&logfile).unwrap();
    assert!(log.contains("ready to accept connections"), "{log}");
    assert!(log.contains("Removing the pid file."), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A log file that cannot be opened stops the start, as in Redis.
#[test]
fn a_log_file_that_cannot_be_opened_stops_the_start() {
    let out = Command::new(BIN)
        .args(["--port", &free_port().to_string()])
        .args(["--logfile", "/nonexistent-dir/tally.log"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Can't open the log file"), "{err}");
}

/// `supervised systemd` (and `auto` under systemd) tells the socket in
/// NOTIFY_SOCKET that the server is ready, then that it is stopping, as
/// Debian's redis-server.service (Type=notify) expects.
#[test]
fn systemd_supervision_sends_ready_and_stopping() {
    use std::os::unix::net::UnixDatagram;
    for mode in ["systemd", "auto"] {
        let path = std::env::temp_dir().join(format!("tally-notify-{mode}-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let socket = UnixDatagram::bind(&path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let port = free_port();
        let mut child = Command::new(BIN)
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--supervised",
                mode,
            ])
            .env("NOTIFY_SOCKET", &path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut received = Vec::new();
        let mut buf = [0u8; 512];
        for _ in 0..2 {
            let n = socket.recv(&mut buf).unwrap();
            received.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        assert_eq!(
            received,
            ["STATUS=Ready to accept connections\n", "READY=1\n"],
            "{mode}"
        );
        // Under `auto` the SIGTERM goes the moment READY=1 arrived: the
        // server must already handle it (it once announced readiness
        // before its signal thread was up, and died by the signal).
        if mode == "systemd" {
            assert_eq!(ping(port).as_deref(), Some("+PONG\r\n"));
        }
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let n = socket.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1\n", "{mode}");
        assert_eq!(wait_for_exit(&mut child, "SIGTERM").code(), Some(0));
        let _ = std::fs::remove_file(&path);
    }
    let out = Command::new(BIN)
        .args(["--port", &free_port().to_string(), "--supervised", "bogus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("argument(s) must be one of the following: upstart, systemd, auto, no"),
        "{err}"
    );
}

/// `syslog-enabled`: log lines also reach the system log, under
/// `syslog-ident` and `syslog-facility`, with notices at LOG_NOTICE; the
/// three are shown by CONFIG GET and, as in Redis 7.0, refused by CONFIG
/// SET (set at start only). The system log is a datagram socket at
/// /dev/log, which the test stands in for where nothing owns that path.
#[test]
fn log_lines_go_to_the_system_log_under_its_ident_and_facility() {
    use std::os::unix::net::UnixDatagram;
    let socket = match UnixDatagram::bind("/dev/log") {
        Ok(socket) => socket,
        Err(e) => return tool_missing(&format!("a free /dev/log to listen on ({e})")),
    };
    struct Unlink;
    impl Drop for Unlink {
        fn drop(&mut self) {
            let _ = std::fs::remove_file("/dev/log");
        }
    }
    let _unlink = Unlink;
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (mut child, port) = spawn(&[
        "--syslog-enabled",
        "yes",
        "--syslog-ident",
        "limiter",
        "--syslog-facility",
        "local3",
    ]);
    let mut lines = Vec::new();
    let mut buf = [0u8; 4096];
    while !lines
        .iter()
        .any(|l: &String| l.contains("ready to accept connections"))
    {
        let n = socket.recv(&mut buf).expect("a log line on /dev/log");
        lines.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    let ready = lines.last().unwrap();
    // local3 (19 << 3) + LOG_NOTICE (5).
    assert!(ready.starts_with("<157>"), "{ready}");
    assert!(
        ready.contains(&format!("limiter[{}]: ", child.id())),
        "{ready}"
    );
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(
        request(&mut stream, &["CONFIG", "GET", "syslog*"]),
        "*6\r\n$14\r\nsyslog-enabled\r\n$3\r\nyes\r\n$12\r\nsyslog-ident\r\n$7\r\nlimiter\r\n$15\r\nsyslog-facility\r\n$6\r\nlocal3\r\n"
    );
    assert_eq!(
        request(&mut stream, &["CONFIG", "SET", "syslog-ident", "x"]),
        "-ERR CONFIG SET failed (possibly related to argument 'syslog-ident') - can't set immutable config\r\n"
    );
    assert_eq!(sigterm(&mut child).code(), Some(0));
    let out = Command::new(BIN)
        .args(["--port", &free_port().to_string()])
        .args(["--syslog-facility", "local9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("argument(s) must be one of the following: user, local0, local1, local2, local3, local4, local5, local6, local7"),
        "{err}"
    );
}

/// `reported-redis-version`: INFO, HELLO and Lua report the version named
/// (clients gate features such as hash field expiry on it); Redis 7.0.15's
/// otherwise. Set at start only; a malformed version stops the start.
#[test]
fn the_reported_redis_version_is_the_one_named() {
    let (mut child, port) = spawn(&["--reported-redis-version", "8.0.2"]);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let info = request(&mut stream, &["INFO", "server"]);
    assert!(info.contains("redis_version:8.0.2\r\n"), "{info}");
    assert_eq!(
        request(
            &mut stream,
            &[
                "EVAL",
                "return {redis.REDIS_VERSION, redis.REDIS_VERSION_NUM}",
                "0"
            ]
        ),
        "*2\r\n$5\r\n8.0.2\r\n:524290\r\n"
    );
    let hello = request(&mut stream, &["HELLO", "2"]);
    assert!(
        hello.contains("$7\r\nversion\r\n$5\r\n8.0.2\r\n"),
        "{hello}"
    );
    assert_eq!(
        request(&mut stream, &["CONFIG", "SET", "reported-redis-version", "9.0.0"]),
        "-ERR CONFIG SET failed (possibly related to argument 'reported-redis-version') - can't set immutable config\r\n"
    );
    assert_eq!(sigterm(&mut child).code(), Some(0));
    let (mut child, port) = spawn(&[]);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(
        request(&mut stream, &["CONFIG", "GET", "reported-redis-version"]),
        "*2\r\n$22\r\nreported-redis-version\r\n$6\r\n7.0.15\r\n"
    );
    assert!(request(&mut stream, &["INFO", "server"]).contains("redis_version:7.0.15\r\n"));
    assert_eq!(sigterm(&mut child).code(), Some(0));
    for bad in ["8.x", "8.0", "256.0.0", "8.0.0.1"] {
        let out = Command::new(BIN)
            .args(["--port", &free_port().to_string()])
            .args(["--reported-redis-version", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("argument must be a version like 8.0.0"),
            "{bad}: {err}"
        );
    }
}
