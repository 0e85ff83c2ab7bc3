//! `unixsocket` and `unixsocketperm`: clients on a Unix socket beside the
//! TCP port, as redis-server 7.0.15 serves them (its replies checked by
//! hand: `addr=<path>:0 laddr=<path>:0 ... flags=U`, the file's mode, the
//! file removed at shutdown, the settings immutable at run time).

mod support;

use std::io::Read;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::*;

/// Sends one command on the Unix socket and reads its reply.
fn unix_request(stream: &mut UnixStream, command: &[&str]) -> String {
    send(stream, command);
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    read_some(stream)
}

fn connect(path: &Path) -> UnixStream {
    until(
        Duration::from_secs(20),
        || "the unix socket never accepted".into(),
        || UnixStream::connect(path).ok(),
    )
}

#[test]
fn clients_are_served_on_the_unix_socket_as_redis_serves_them() {
    let dir = std::env::temp_dir().join(format!("tally-unix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tally.sock");
    // A file left by an earlier run is replaced.
    std::fs::write(&path, b"stale").unwrap();
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["--port", &port.to_string(), "--save", ""])
        .args([
            "--unixsocket",
            &path.to_string_lossy(),
            "--unixsocketperm",
            "700",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_ping(port);
    let mut stream = connect(&path);
    assert_eq!(unix_request(&mut stream, &["PING"]), "+PONG\r\n");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let info = unix_request(&mut stream, &["CLIENT", "INFO"]);
    let shown = format!("{}:0", path.display());
    assert!(
        info.contains(&format!(" addr={shown} laddr={shown} ")),
        "{info}"
    );
    assert!(info.contains(" flags=U "), "{info}");
    // The same client in CLIENT LIST, and a TCP client beside it.
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let list = request(&mut tcp, &["CLIENT", "LIST"]);
    assert_eq!(list.matches(" flags=U ").count(), 1, "{list}");
    // MONITOR names a Unix socket client `unix:<path>`, as Redis does.
    let mut monitor = connect(&path);
    assert_eq!(unix_request(&mut monitor, &["MONITOR"]), "+OK\r\n");
    // Writes on one are seen on the other.
    assert_eq!(unix_request(&mut stream, &["SET", "k", "v"]), "+OK\r\n");
    let mut seen = vec![0u8; 4096];
    let n = monitor.read(&mut seen).unwrap();
    let line = String::from_utf8_lossy(&seen[..n]);
    assert!(
        line.contains(&format!("[0 unix:{}] \"SET\" \"k\" \"v\"", path.display())),
        "{line}"
    );
    assert_eq!(request(&mut tcp, &["GET", "k"]), "$1\r\nv\r\n");
    for (command, reply) in [
        (
            &["CONFIG", "GET", "unixsocket*"][..],
            format!(
                "*4\r\n$10\r\nunixsocket\r\n${}\r\n{}\r\n$14\r\nunixsocketperm\r\n$3\r\n700\r\n",
                path.to_string_lossy().len(),
                path.display()
            ),
        ),
        (
            &["CONFIG", "SET", "unixsocketperm", "777"],
            "-ERR CONFIG SET failed (possibly related to argument 'unixsocketperm') - can't set immutable config\r\n".to_string(),
        ),
    ] {
        assert_eq!(unix_request(&mut stream, command), reply, "{command:?}");
    }
    assert_eq!(sigterm(&mut child).code(), Some(0));
    assert!(!path.exists(), "the socket file outlived the server");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Permissions are read as Redis reads them: octal, 0 to 777.
#[test]
fn bad_socket_permissions_stop_the_start_with_redis_s_errors() {
    for (perm, error) in [
        ("999", "argument couldn't be parsed as an octal number"),
        ("abc", "argument couldn't be parsed as an octal number"),
        ("1000", "argument must be between 0 and 777 inclusive"),
    ] {
        let out = Command::new(BIN)
            .args(["--port", &free_port().to_string()])
            .args(["--unixsocket", "/tmp/never.sock", "--unixsocketperm", perm])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{perm}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(error), "{perm}: {err}");
    }
}
