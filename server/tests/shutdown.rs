//! What a shutdown does with the dataset, as Redis's prepareForShutdown:
//! with save points configured (Redis's default) a plain SHUTDOWN, SIGTERM
//! and SIGINT save the snapshot first, `shutdown-on-sigterm` /
//! `shutdown-on-sigint` and SHUTDOWN's arguments change that, and a save
//! that fails keeps the server running unless FORCE.

mod support;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::*;

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tally-shutdown-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts the binary in `dir` with Redis's default save points and `args`,
/// and writes one key.
fn start_with_a_key(dir: &Path, args: &[&str]) -> (Child, u16) {
    let port = free_port();
    let child = Command::new(BIN)
        .args(["--port", &port.to_string(), "--dir", &dir.to_string_lossy()])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_ping(port);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(request(&mut stream, &["SET", "kept", "yes"]), "+OK\r\n");
    (child, port)
}

fn signal(child: &Child, name: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// The key a restart in `dir` finds (a nil reply when none was saved).
fn restarted_value(dir: &Path) -> String {
    let (mut child, port) = start_quiet(dir);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let value = request(&mut stream, &["GET", "kept"]);
    assert_eq!(sigterm_nosave(&mut child).code(), Some(0));
    value
}

fn start_quiet(dir: &Path) -> (Child, u16) {
    let port = free_port();
    let child = Command::new(BIN)
        .args(["--port", &port.to_string(), "--dir", &dir.to_string_lossy()])
        .args(["--shutdown-on-sigterm", "nosave"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_ping(port);
    (child, port)
}

fn sigterm_nosave(child: &mut Child) -> std::process::ExitStatus {
    signal(child, "TERM");
    wait_for_exit(child, "SIGTERM")
}

#[test]
fn sigterm_and_sigint_save_when_save_points_are_set() {
    for name in ["TERM", "INT"] {
        let dir = scratch(&format!("sig{name}"));
        let (mut child, _) = start_with_a_key(&dir, &[]);
        signal(&child, name);
        assert_eq!(wait_for_exit(&mut child, name).code(), Some(0));
        assert!(dir.join("dump.rdb").exists(), "SIG{name} saved nothing");
        assert_eq!(restarted_value(&dir), "$3\r\nyes\r\n", "SIG{name}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_plain_shutdown_saves_and_nosave_or_no_save_points_do_not() {
    let dir = scratch("plain");
    let (mut child, port) = start_with_a_key(&dir, &[]);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    request(&mut stream, &["SHUTDOWN"]);
    assert_eq!(wait_for_exit(&mut child, "SHUTDOWN").code(), Some(0));
    assert_eq!(restarted_value(&dir), "$3\r\nyes\r\n");
    let _ = std::fs::remove_dir_all(&dir);

    for (what, args, command) in [
        ("SHUTDOWN NOSAVE", &[][..], &["SHUTDOWN", "NOSAVE"][..]),
        ("save \"\"", &["--save", ""][..], &["SHUTDOWN"][..]),
    ] {
        let dir = scratch("nosave");
        let (mut child, port) = start_with_a_key(&dir, args);
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        request(&mut stream, command);
        assert_eq!(wait_for_exit(&mut child, what).code(), Some(0));
        assert!(!dir.join("dump.rdb").exists(), "{what} saved");
        let _ = std::fs::remove_dir_all(&dir);
    }
    // SAVE without save points saves.
    let dir = scratch("save");
    let (mut child, port) = start_with_a_key(&dir, &["--save", ""]);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    request(&mut stream, &["SHUTDOWN", "SAVE"]);
    assert_eq!(wait_for_exit(&mut child, "SHUTDOWN SAVE").code(), Some(0));
    assert_eq!(restarted_value(&dir), "$3\r\nyes\r\n");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_signal_flags_decide_what_a_signal_does() {
    // nosave: nothing written.
    let dir = scratch("flag-nosave");
    let (mut child, _) = start_with_a_key(&dir, &["--shutdown-on-sigterm", "nosave"]);
    assert_eq!(sigterm_nosave(&mut child).code(), Some(0));
    assert!(!dir.join("dump.rdb").exists());
    let _ = std::fs::remove_dir_all(&dir);
    // save, set at run time, even without save points.
    let dir = scratch("flag-save");
    let (mut child, port) = start_with_a_key(&dir, &["--save", ""]);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(
        request(
            &mut stream,
            &["CONFIG", "SET", "shutdown-on-sigint", "SAVE now"]
        ),
        "+OK\r\n"
    );
    assert_eq!(
        request(&mut stream, &["CONFIG", "GET", "shutdown-on-sigint"]),
        "*2\r\n$18\r\nshutdown-on-sigint\r\n$8\r\nsave now\r\n"
    );
    signal(&child, "INT");
    assert_eq!(wait_for_exit(&mut child, "SIGINT").code(), Some(0));
    assert_eq!(restarted_value(&dir), "$3\r\nyes\r\n");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failed_save_keeps_the_server_running_unless_forced() {
    let dir = scratch("failed");
    let (mut child, port) = start_with_a_key(&dir, &[]);
    // The save's directory is gone: the snapshot cannot be written.
    std::fs::remove_dir_all(&dir).unwrap();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(
        request(&mut stream, &["SHUTDOWN"]),
        "-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
    );
    signal(&child, "TERM");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGTERM exited without its save"
    );
    assert_eq!(ping(port).as_deref(), Some("+PONG\r\n"));
    assert_eq!(
        request(
            &mut stream,
            &["CONFIG", "SET", "shutdown-on-sigterm", "force"]
        ),
        "+OK\r\n"
    );
    signal(&child, "TERM");
    assert_eq!(wait_for_exit(&mut child, "SIGTERM FORCE").code(), Some(0));
}

#[test]
fn the_signal_flags_are_read_and_refused_as_redis_reads_them() {
    let (mut child, port) = spawn(&[]);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    // Each reply as redis-server 7.0.15 gives it.
    for (command, reply) in [
        (&["CONFIG", "GET", "shutdown-on-sigterm"][..], "*2\r\n$19\r\nshutdown-on-sigterm\r\n$7\r\ndefault\r\n"),
        (&["CONFIG", "SET", "shutdown-on-sigterm", "force now nosave"], "+OK\r\n"),
        (&["CONFIG", "GET", "shutdown-on-sigterm"], "*2\r\n$19\r\nshutdown-on-sigterm\r\n$16\r\nnosave now force\r\n"),
        (&["CONFIG", "SET", "shutdown-on-sigterm", "now default"], "+OK\r\n"),
        (&["CONFIG", "GET", "shutdown-on-sigterm"], "*2\r\n$19\r\nshutdown-on-sigterm\r\n$3\r\nnow\r\n"),
        (
            &["CONFIG", "SET", "shutdown-on-sigterm", "save nosave"],
            "-ERR CONFIG SET failed (possibly related to argument 'shutdown-on-sigterm') - shutdown options SAVE and NOSAVE can't be used simultaneously\r\n",
        ),
        (
            &["CONFIG", "SET", "shutdown-on-sigterm", "bogus"],
            "-ERR CONFIG SET failed (possibly related to argument 'shutdown-on-sigterm') - argument(s) must be one of the following: default, save, nosave, now, force\r\n",
        ),
        (
            &["CONFIG", "SET", "shutdown-on-sigterm", ""],
            "-ERR CONFIG SET failed (possibly related to argument 'shutdown-on-sigterm') - argument(s) must be one of the following: default, save, nosave, now, force\r\n",
        ),
        (&["SHUTDOWN", "SAVE", "NOSAVE"], "-ERR syntax error\r\n"),
    ] {
        assert_eq!(request(&mut stream, command), reply, "{command:?}");
    }
    assert_eq!(sigterm(&mut child).code(), Some(0));
}

/// Reads whatever arrives on `stream` within `within` (empty when nothing).
fn read_within(stream: &mut TcpStream, within: Duration) -> String {
    stream.set_read_timeout(Some(within)).unwrap();
    read_some(stream)
}

/// A master with a replica that has acknowledged everything, and that
/// replica stopped (SIGSTOP) after one more write, so it lags.
fn master_with_a_stopped_replica() -> (Child, u16, Child) {
    let (master, port) = spawn(&["--shutdown-timeout", "2"]);
    let (replica, replica_port) = spawn(&["--replicaof", "127.0.0.1", &port.to_string()]);
    let mut admin = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut on_replica = TcpStream::connect(("127.0.0.1", replica_port)).unwrap();
    assert_eq!(request(&mut admin, &["SET", "first", "1"]), "+OK\r\n");
    until(
        Duration::from_secs(20),
        || "the replica never caught up".into(),
        || (request(&mut on_replica, &["GET", "first"]) == "$1\r\n1\r\n").then_some(()),
    );
    signal(&replica, "STOP");
    assert_eq!(request(&mut admin, &["SET", "second", "2"]), "+OK\r\n");
    (master, port, replica)
}

#[test]
fn a_shutdown_waits_for_a_lagging_replica_with_writes_paused_and_abort_cancels_it() {
    let (mut master, port, mut replica) = master_with_a_stopped_replica();
    let mut shutting = TcpStream::connect(("127.0.0.1", port)).unwrap();
    send(&mut shutting, &["SHUTDOWN"]);
    // No reply while it waits; the server runs, writes are held.
    assert_eq!(read_within(&mut shutting, Duration::from_millis(500)), "");
    assert!(master.try_wait().unwrap().is_none());
    let mut writer = TcpStream::connect(("127.0.0.1", port)).unwrap();
    send(&mut writer, &["SET", "held", "1"]);
    assert_eq!(read_within(&mut writer, Duration::from_millis(300)), "");
    let mut admin = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(
        request(&mut admin, &["GET", "first"]),
        "$1\r\n1\r\n",
        "reads go on"
    );
    // SHUTDOWN ABORT: writes resume, the waiting SHUTDOWN gets the error.
    assert_eq!(request(&mut admin, &["SHUTDOWN", "ABORT"]), "+OK\r\n");
    assert_eq!(
        read_within(&mut shutting, Duration::from_secs(5)),
        "-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
    );
    assert_eq!(read_within(&mut writer, Duration::from_secs(5)), "+OK\r\n");
    assert_eq!(
        request(&mut admin, &["SHUTDOWN", "ABORT"]),
        "-ERR No shutdown in progress.\r\n"
    );
    // Again, and this time the replica never answers: after the timeout
    // (2 s) the server stops anyway.
    let asked = std::time::Instant::now();
    send(&mut shutting, &["SHUTDOWN"]);
    assert_eq!(wait_for_exit(&mut master, "SHUTDOWN").code(), Some(0));
    assert!(
        asked.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        asked.elapsed()
    );
    signal(&replica, "CONT");
    assert_eq!(sigterm_nosave(&mut replica).code(), Some(0));
}

#[test]
fn a_shutdown_goes_ahead_once_the_replica_catches_up_and_now_does_not_wait() {
    let (mut master, port, mut replica) = master_with_a_stopped_replica();
    let mut shutting = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(
        request(&mut shutting, &["CONFIG", "SET", "shutdown-timeout", "60"]),
        "+OK\r\n"
    );
    send(&mut shutting, &["SHUTDOWN"]);
    assert_eq!(read_within(&mut shutting, Duration::from_millis(300)), "");
    let resumed = std::time::Instant::now();
    signal(&replica, "CONT");
    assert_eq!(wait_for_exit(&mut master, "SHUTDOWN").code(), Some(0));
    assert!(
        resumed.elapsed() < Duration::from_secs(30),
        "it waited out the timeout"
    );
    assert_eq!(sigterm_nosave(&mut replica).code(), Some(0));

    // NOW: no wait, with the replica stopped.
    let (mut master, port, mut replica) = master_with_a_stopped_replica();
    let mut admin = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(
        request(&mut admin, &["CONFIG", "SET", "shutdown-timeout", "60"]),
        "+OK\r\n"
    );
    let asked = std::time::Instant::now();
    send(&mut admin, &["SHUTDOWN", "NOW"]);
    assert_eq!(wait_for_exit(&mut master, "SHUTDOWN NOW").code(), Some(0));
    assert!(asked.elapsed() < Duration::from_secs(30));
    signal(&replica, "CONT");
    assert_eq!(sigterm_nosave(&mut replica).code(), Some(0));
}
