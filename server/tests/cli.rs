//! The tally-server binary: options, config files, start-up refusals, signals.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_tally-server");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

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
    std::fs::write(&path, "port 7000\n# a comment\nactiverehashing yes\n").unwrap();
    let out = Command::new(BIN).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:3: directive 'activerehashing'",
            path.display()
        )),
        "{err}"
    );
}

fn ping(port: u16) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(b"PING\r\n").ok()?;
    let mut buf = [0u8; 64];
    let n = stream.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Polls `check` every 50 ms until it gives a value; fails after `limit`
/// with the message `failure` builds. A hang detector, not a speed test.
fn until<T>(
    limit: Duration,
    failure: impl Fn() -> String,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "{}", failure());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_for_ping(port: u16) {
    until(
        Duration::from_secs(20),
        || "server did not come up".into(),
        || (ping(port).as_deref() == Some("+PONG\r\n")).then_some(()),
    )
}

/// Sends SIGTERM and waits for the process to exit.
fn sigterm(child: &mut std::process::Child) -> std::process::ExitStatus {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    wait_for_exit(child, "SIGTERM")
}

fn wait_for_exit(child: &mut std::process::Child, after: &str) -> std::process::ExitStatus {
    until(
        Duration::from_secs(20),
        || format!("server did not exit after {after}"),
        || child.try_wait().unwrap(),
    )
}

#[test]
fn flags_override_the_config_file_and_sigterm_exits_zero() {
    let dir = std::env::temp_dir().join(format!("tally-cli-term-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tally.conf");
    let file_port = free_port();
    let flag_port = free_port();
    std::fs::write(&path, format!("port {file_port}\nrequirepass fromfile\n")).unwrap();
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

/// Sends a command and reads one reply (up to what arrives within 5 s).
fn request(stream: &mut TcpStream, command: &[&str]) -> String {
    let mut out = format!("*{}\r\n", command.len());
    for word in command {
        out.push_str(&format!("${}\r\n{word}\r\n", word.len()));
    }
    stream.write_all(out.as_bytes()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let n = stream.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Starts the binary on a free port with `args`, once it answers PING.
fn spawn(args: &[&str]) -> (std::process::Child, u16) {
    let port = free_port();
    let child = Command::new(BIN)
        .args(["--port", &port.to_string(), "--save", ""])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_ping(port);
    (child, port)
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
