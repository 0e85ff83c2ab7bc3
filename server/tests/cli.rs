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

fn wait_for_ping(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while ping(port).as_deref() != Some("+PONG\r\n") {
        assert!(Instant::now() < deadline, "server did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_for_exit(child: &mut std::process::Child, after: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(exit) = child.try_wait().unwrap() {
            return exit;
        }
        assert!(
            Instant::now() < deadline,
            "server did not exit after {after}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
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
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(wait_for_exit(&mut child, "SIGTERM").code(), Some(0));
}

#[test]
fn shutdown_command_exits_zero() {
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["--port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_ping(port);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(b"SHUTDOWN\r\n").unwrap();
    assert_eq!(wait_for_exit(&mut child, "SHUTDOWN").code(), Some(0));
}
