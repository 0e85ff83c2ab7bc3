//! A TLS-only server: `port 0` with `tls-port`, as Redis runs it. The
//! binary and a redis-server started the same way listen on the TLS port
//! and nowhere else, and report the same ports.

mod support;

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::*;

/// A self-signed certificate for 127.0.0.1 and localhost, made by the
/// `openssl` command in `dir`: (certificate, key). None when `openssl` is
/// missing and skipping was asked for (see `support::tool_missing`).
fn self_signed_certificate(dir: &std::path::Path) -> Option<(String, String)> {
    if Command::new("openssl").arg("version").output().is_err() {
        tool_missing("openssl (for a TLS test)");
        return None;
    }
    let (cert, key) = (dir.join("server.crt"), dir.join("server.key"));
    let out = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = |path: std::path::PathBuf| path.to_string_lossy().into_owned();
    Some((text(cert), text(key)))
}

/// The TCP ports process `pid` listens on: its socket descriptors matched
/// against the kernel's table of listening sockets.
fn listening_ports(pid: u32) -> BTreeSet<u16> {
    let sockets: BTreeSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the process's descriptors")
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_string(),
            )
        })
        .collect();
    let mut ports = BTreeSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // local_address is HEXADDR:HEXPORT, state 0A is LISTEN.
            if fields.len() > 9 && fields[3] == "0A" && sockets.contains(fields[9]) {
                let port = fields[1].rsplit(':').next().unwrap_or_default();
                ports.insert(u16::from_str_radix(port, 16).expect("a hex port"));
            }
        }
    }
    ports
}

/// redis-cli over TLS to `port`, trusting `ca`: its output, trimmed.
fn tls_cli(port: u16, ca: &str, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "--tls", "--cacert", ca])
        .args(args)
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// What a client sees of a TLS-only server on `tls_port`.
#[derive(Debug, PartialEq)]
struct Seen {
    listening: BTreeSet<u16>,
    tcp_port: String,
    config_port: String,
    plaintext_ping_answered: bool,
}

fn observe(server: &Child, tls_port: u16, ca: &str) -> Seen {
    until(
        Duration::from_secs(20),
        || "the server did not answer over TLS".into(),
        || (tls_cli(tls_port, ca, &["PING"]) == "PONG").then_some(()),
    );
    let info = tls_cli(tls_port, ca, &["INFO", "server"]);
    Seen {
        listening: listening_ports(server.id()),
        tcp_port: info
            .lines()
            .find_map(|line| line.strip_prefix("tcp_port:"))
            .unwrap_or_default()
            .trim()
            .to_string(),
        config_port: tls_cli(tls_port, ca, &["CONFIG", "GET", "port"]),
        plaintext_ping_answered: ping(tls_port).is_some_and(|reply| reply.contains("PONG")),
    }
}

/// The arguments that make a server TLS-only on `tls_port`.
fn tls_only_args(tls_port: u16, cert: &str, key: &str) -> Vec<String> {
    [
        "--port",
        "0",
        "--tls-port",
        &tls_port.to_string(),
        "--tls-cert-file",
        cert,
        "--tls-key-file",
        key,
        "--tls-auth-clients",
        "no",
        "--bind",
        "127.0.0.1",
        "--save",
        "",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Kills the child when the test ends, passed or failed.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn port_zero_with_a_tls_port_listens_on_tls_only_as_redis_does() {
    let dir = std::env::temp_dir().join(format!("tally-tls-only-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let Some((cert, key)) = self_signed_certificate(&dir) else {
        return;
    };
    let tally_port = free_port();
    let tally = Killed(
        Command::new(BIN)
            .args(tls_only_args(tally_port, &cert, &key))
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let ours = observe(&tally.0, tally_port, &cert);
    assert_eq!(
        ours,
        Seen {
            listening: BTreeSet::from([tally_port]),
            tcp_port: tally_port.to_string(),
            config_port: "port\n0".into(),
            plaintext_ping_answered: false,
        }
    );

    if Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        tool_missing("redis-server (for the comparison)");
        return;
    }
    let redis_port = free_port();
    let redis = Killed(
        Command::new("redis-server")
            .args(tls_only_args(redis_port, &cert, &key))
            .args(["--appendonly", "no", "--daemonize", "no"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let theirs = observe(&redis.0, redis_port, &cert);
    // The same, but for the port number each was given.
    let on_port = |seen: Seen, port: u16| Seen {
        listening: seen.listening.into_iter().map(|p| p ^ port).collect(),
        tcp_port: seen.tcp_port.replace(&port.to_string(), "P"),
        ..seen
    };
    assert_eq!(on_port(ours, tally_port), on_port(theirs, redis_port));
    let _ = std::fs::remove_dir_all(&dir);
}
