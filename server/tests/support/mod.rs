//! What the binary's tests share: the path of the built `tally-server`,
//! free ports, a blocking RESP request, and waiting without hanging.
// Each test file uses its own part of these.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_tally-server");

/// A tool a test needs is not installed. The test fails and says how to
/// get it, unless skipping was asked for (`TALLY_SKIP_MISSING_TOOLS=1`,
/// never honoured in CI): a green run must not hide tests that did not
/// run. When skipping, the caller returns after this.
pub fn tool_missing(what: &str) {
    let skip = std::env::var_os("TALLY_SKIP_MISSING_TOOLS").is_some_and(|v| v == "1")
        && std::env::var_os("CI").is_none();
    if !skip {
        panic!(
            "{what} is not installed: tests/run.sh installs what the tests need \
             (or set TALLY_SKIP_MISSING_TOOLS=1 to skip the tests that need it)"
        );
    }
    eprintln!("SKIPPED: {what} is not installed (TALLY_SKIP_MISSING_TOOLS=1)");
}

/// A port free on 127.0.0.1 a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An inline PING to 127.0.0.1:`port`: the raw reply, or None when the
/// connection fails.
pub fn ping(port: u16) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(b"PING\r\n").ok()?;
    let mut buf = [0u8; 64];
    let n = stream.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Polls `check` every 50 ms until it gives a value; fails after `limit`
/// with the message `failure` builds. A hang detector, not a speed test.
pub fn until<T>(
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

/// Waits up to 20 s for `+PONG` on `port`.
pub fn wait_for_ping(port: u16) {
    until(
        Duration::from_secs(20),
        || "server did not come up".into(),
        || (ping(port).as_deref() == Some("+PONG\r\n")).then_some(()),
    )
}

/// Sends SIGTERM and waits for the process to exit.
pub fn sigterm(child: &mut std::process::Child) -> std::process::ExitStatus {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    wait_for_exit(child, "SIGTERM")
}

pub fn wait_for_exit(child: &mut std::process::Child, after: &str) -> std::process::ExitStatus {
    until(
        Duration::from_secs(20),
        || format!("server did not exit after {after}"),
        || child.try_wait().unwrap(),
    )
}

/// A command as a RESP array of bulk strings.
pub fn encode(command: &[&str]) -> String {
    let mut out = format!("*{}\r\n", command.len());
    for word in command {
        out.push_str(&format!("${}\r\n{word}\r\n", word.len()));
    }
    out
}

/// Sends a command without reading its reply.
pub fn send(stream: &mut impl Write, command: &[&str]) {
    stream.write_all(encode(command).as_bytes()).unwrap();
}

/// What one read brings (empty when nothing does: the stream's read
/// timeout, set by the caller, passed).
pub fn read_some(stream: &mut impl Read) -> String {
    let mut buf = vec![0u8; 1 << 16];
    let n = stream.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Sends a command and reads one reply (up to what arrives within 5 s).
pub fn request(stream: &mut TcpStream, command: &[&str]) -> String {
    send(stream, command);
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    read_some(stream)
}

/// Starts the binary on a free port, without save points, with `args`,
/// once it answers PING.
pub fn spawn(args: &[&str]) -> (std::process::Child, u16) {
    let port = free_port();
    let child = Command::new(BIN)
        .args(["--port", &port.to_string(), "--save", ""])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for_ping(port);
    (child, port)
}
