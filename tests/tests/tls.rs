//! TLS beside the plain port: redis-cli `--tls` (OpenSSL), redis-benchmark
//! `--tls` and the `redis` crate (rustls) talk to tally with certificates
//! this test makes;
//! `tls-auth-clients` yes / optional / no; certificates replaced with
//! CONFIG SET without a restart, and a bad one refused with Redis's error.

use std::process::Command;

use tally_tests::{free_local_port, TestServer, TlsFiles};

fn redis_cli(port: u16, files: &TlsFiles, client_cert: bool, args: &[&str]) -> (bool, String) {
    let mut command = Command::new("redis-cli");
    command.args(["-p", &port.to_string(), "--tls", "--cacert", &files.ca]);
    if client_cert {
        command.args(["--cert", &files.client_cert, "--key", &files.client_key]);
    }
    let out = command.args(args).output().expect("redis-cli runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.success() && !text.contains("Could not connect"),
        text.trim().to_string(),
    )
}

async fn start_tls(files: &TlsFiles, auth: &str) -> (TestServer, u16) {
    let port = free_local_port();
    let server = TestServer::start_with(|c| {
        // A plaintext port beside the TLS one (`port 0` would make the
        // server TLS-only).
        c.port = free_local_port();
        c.tls.port = port;
        c.tls.cert_file = files.server_cert.clone();
        c.tls.key_file = files.server_key.clone();
        c.tls.ca_cert_file = files.ca.clone();
        c.tls.auth_clients = tally_server::net::tls::ClientAuth::parse(auth).expect("auth");
    })
    .await;
    (server, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cli_speaks_tls_to_tally() {
    let Some(files) = TlsFiles::generate() else {
        return;
    };
    let (server, port) = start_tls(&files, "yes").await;
    let (ok, text) = redis_cli(port, &files, true, &["SET", "k", "over-tls"]);
    assert!(ok && text == "OK", "{text}");
    let (ok, text) = redis_cli(port, &files, true, &["GET", "k"]);
    assert!(ok && text == "over-tls", "{text}");
    // Without a client certificate the handshake is refused.
    let (_, text) = redis_cli(port, &files, false, &["PING"]);
    assert_ne!(text, "PONG", "tls-auth-clients yes needs a certificate");
    // The plain port serves beside it.
    let mut plain = tally_tests::RawConn::connect(server.addr()).await;
    assert_eq!(plain.cmd(&["GET", "k"]).await, b"$8\r\nover-tls\r\n");
    // redis-cli --user/--pass over TLS: an ACL user.
    assert_eq!(
        plain
            .cmd(&[
                "ACL",
                "SETUSER",
                "gw",
                "on",
                ">pw",
                "~rl:*",
                "-@all",
                "+acl|whoami",
                "+get"
            ])
            .await,
        b"+OK\r\n"
    );
    let (ok, text) = redis_cli(
        port,
        &files,
        true,
        &["--user", "gw", "--pass", "pw", "ACL", "WHOAMI"],
    );
    assert!(ok && text.lines().next() == Some("gw"), "{text}");
    let (_, text) = redis_cli(
        port,
        &files,
        true,
        &["--user", "gw", "--pass", "pw", "GET", "k"],
    );
    assert!(
        text.contains("NOPERM this user has no permissions to access one of the keys"),
        "{text}"
    );
    // optional: a client without a certificate is served too.
    assert_eq!(
        plain
            .cmd(&["CONFIG", "SET", "tls-auth-clients", "optional"])
            .await,
        b"+OK\r\n"
    );
    let (ok, text) = redis_cli(port, &files, false, &["PING"]);
    assert!(ok && text == "PONG", "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_crate_connects_over_rustls() {
    let Some(files) = TlsFiles::generate() else {
        return;
    };
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let (_server, port) = start_tls(&files, "yes").await;
    let client = redis::Client::build_with_tls(
        format!("rediss://localhost:{port}/"),
        redis::TlsCertificates {
            client_tls: Some(redis::ClientTlsConfig {
                client_cert: std::fs::read(&files.client_cert).expect("cert"),
                client_key: std::fs::read(&files.client_key).expect("key"),
            }),
            root_cert: Some(std::fs::read(&files.ca).expect("ca")),
        },
    )
    .expect("a TLS client");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("a TLS connection");
    let n: i64 = redis::cmd("INCR")
        .arg("counter")
        .query_async(&mut conn)
        .await
        .expect("INCR");
    assert_eq!(n, 1);
}

/// redis-benchmark `--tls` with a client certificate: 1,000 SETs, GETs
/// and INCRs from 5 connections, every one through the TLS port (the
/// counter it increments ends at exactly 1,000).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_benchmark_runs_over_tls() {
    let Some(files) = TlsFiles::generate() else {
        return;
    };
    let (server, port) = start_tls(&files, "yes").await;
    let args: Vec<String> = [
        "-p",
        &port.to_string(),
        "--tls",
        "--cacert",
        &files.ca,
        "--cert",
        &files.client_cert,
        "--key",
        &files.client_key,
        "-c",
        "5",
        "-n",
        "1000",
        "-t",
        "set,get,incr",
        "--csv",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("redis-benchmark")
            .args(&args)
            .output()
            .expect("redis-benchmark runs")
    })
    .await
    .expect("the benchmark's thread");
    let csv = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{csv}");
    let tests: Vec<&str> = csv
        .lines()
        .skip(1)
        .filter_map(|line| line.split(',').next())
        .collect();
    assert_eq!(tests, ["\"SET\"", "\"GET\"", "\"INCR\""], "{csv}");
    let mut plain = tally_tests::RawConn::connect(server.addr()).await;
    // SET's value is 3 bytes (-d's default) of redis-benchmark's own making.
    let value = plain.cmd(&["GET", "key:__rand_int__"]).await;
    assert!(
        value.starts_with(b"$3\r\n") && value.len() == 9,
        "{value:?}"
    );
    assert_eq!(
        plain.cmd(&["GET", "counter:__rand_int__"]).await,
        b"$4\r\n1000\r\n"
    );
}

/// New certificates take effect at CONFIG SET, for new connections; a
/// file that does not load is refused with Redis's error and the old
/// configuration stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_are_replaced_without_a_restart() {
    let (Some(old), Some(new)) = (TlsFiles::generate(), TlsFiles::generate()) else {
        return;
    };
    let (server, port) = start_tls(&old, "no").await;
    assert_eq!(redis_cli(port, &old, false, &["PING"]).1, "PONG");
    assert_ne!(redis_cli(port, &new, false, &["PING"]).1, "PONG");
    let mut admin = tally_tests::RawConn::connect(server.addr()).await;
    let refused = admin
        .cmd(&["CONFIG", "SET", "tls-cert-file", "/nonexistent.crt"])
        .await;
    assert_eq!(
        String::from_utf8_lossy(&refused),
        "-ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to \
         update TLS configuration. Check server logs.\r\n"
    );
    assert_eq!(redis_cli(port, &old, false, &["PING"]).1, "PONG");
    assert_eq!(
        admin
            .cmd(&[
                "CONFIG",
                "SET",
                "tls-cert-file",
                &new.server_cert,
                "tls-key-file",
                &new.server_key,
            ])
            .await,
        b"+OK\r\n"
    );
    assert_eq!(redis_cli(port, &new, false, &["PING"]).1, "PONG");
    assert_ne!(redis_cli(port, &old, false, &["PING"]).1, "PONG");
    // The same path again reloads the file (rotated in place).
    std::fs::copy(&old.server_cert, &new.server_cert).expect("rotate");
    std::fs::copy(&old.server_key, &new.server_key).expect("rotate");
    assert_eq!(
        admin
            .cmd(&[
                "CONFIG",
                "SET",
                "tls-cert-file",
                &new.server_cert,
                "tls-key-file",
                &new.server_key
            ])
            .await,
        b"+OK\r\n"
    );
    assert_eq!(redis_cli(port, &old, false, &["PING"]).1, "PONG");
    let _ = std::fs::remove_dir_all(&old.dir);
    let _ = std::fs::remove_dir_all(&new.dir);
}

/// `tls-key-file-pass`: an encrypted PKCS#8 key (as OpenSSL 3 writes it)
/// is decrypted with its password, at start and by CONFIG SET; a wrong or
/// missing password, and OpenSSL's legacy encryption, are refused with
/// the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encrypted_keys_are_read_with_their_password() {
    let Some(files) = TlsFiles::generate() else {
        return;
    };
    let encrypted = format!("{}/encrypted.key", files.dir);
    let legacy = format!("{}/legacy.key", files.dir);
    for args in [
        vec![
            "pkcs8",
            "-topk8",
            "-v2",
            "aes-256-cbc",
            "-in",
            &files.server_key,
            "-out",
            &encrypted,
        ],
        vec![
            "rsa",
            "-aes256",
            "-traditional",
            "-in",
            &files.server_key,
            "-out",
            &legacy,
        ],
    ] {
        let out = Command::new("openssl")
            .args(&args)
            .args(["-passout", "pass:s3cret"])
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let settings = |key: &str, pass: &str| tally_server::net::tls::TlsSettings {
        cert_file: files.server_cert.clone(),
        key_file: key.to_string(),
        key_file_pass: pass.to_string(),
        auth_clients: tally_server::net::tls::ClientAuth::parse("no").expect("auth"),
        ..Default::default()
    };
    let build = |key: &str, pass: &str| tally_server::net::tls::build(&settings(key, pass));
    assert!(build(&encrypted, "s3cret").is_ok());
    // A password is ignored for a key that is not encrypted, as OpenSSL does.
    assert!(build(&files.server_key, "s3cret").is_ok());
    for (key, pass, reason) in [
        (
            &encrypted,
            "wrong",
            "cannot decrypt the key with tls-key-file-pass",
        ),
        (
            &encrypted,
            "",
            "the key is encrypted and tls-key-file-pass is not set",
        ),
        (&legacy, "s3cret", "OpenSSL's legacy format"),
    ] {
        let error = build(key, pass).unwrap_err();
        assert!(error.contains(reason), "{key} {pass:?}: {error}");
    }

    let port = free_local_port();
    let server = TestServer::start_with(|c| {
        // A plaintext port beside the TLS one (`port 0` would make the
        // server TLS-only).
        c.port = free_local_port();
        c.tls.port = port;
        c.tls.cert_file = files.server_cert.clone();
        c.tls.key_file = encrypted.clone();
        c.tls.key_file_pass = "s3cret".into();
        c.tls.auth_clients = tally_server::net::tls::ClientAuth::parse("no").expect("auth");
    })
    .await;
    assert_eq!(redis_cli(port, &files, false, &["PING"]).1, "PONG");
    let mut admin = tally_tests::RawConn::connect(server.addr()).await;
    let refused = admin
        .cmd(&["CONFIG", "SET", "tls-key-file-pass", "wrong"])
        .await;
    assert_eq!(
        String::from_utf8_lossy(&refused),
        "-ERR CONFIG SET failed (possibly related to argument 'tls-key-file-pass') - Unable to \
         update TLS configuration. Check server logs.\r\n"
    );
    assert_eq!(redis_cli(port, &files, false, &["PING"]).1, "PONG");
    let _ = std::fs::remove_dir_all(&files.dir);
}

/// `tls-protocols` and cipher options that rustls cannot honour are
/// refused with the reason, not ignored.
#[test]
fn unsupported_tls_settings_are_refused() {
    let Some(files) = TlsFiles::generate() else {
        return;
    };
    for (protocols, reason) in [
        (
            "TLSv1.1",
            "tls-protocols: TLSv1.1 is not supported (only TLSv1.2 and TLSv1.3)",
        ),
        ("SSLv3", "Invalid tls-protocols specified: SSLv3"),
    ] {
        let settings = tally_server::net::tls::TlsSettings {
            cert_file: files.server_cert.clone(),
            key_file: files.server_key.clone(),
            ca_cert_file: files.ca.clone(),
            protocols: protocols.into(),
            ..Default::default()
        };
        assert_eq!(
            tally_server::net::tls::build(&settings).unwrap_err(),
            reason
        );
    }
    let _ = std::fs::remove_dir_all(&files.dir);
    let mut config = tally_server::Config::default();
    config
        .apply_text(
            "tls-protocols \"TLSv1.2 TLSv1.3\"\ntls-auth-clients optional\n",
            "test",
        )
        .expect("valid");
    assert_eq!(config.tls.protocols, "TLSv1.2 TLSv1.3");
    assert!(config
        .apply_text("tls-auth-clients sometimes\n", "test")
        .is_err());
}

/// redis-py over TLS with a client certificate and an ACL user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_speaks_tls_as_a_user() {
    let has_redis_py = Command::new("python3")
        .args(["-c", "import redis"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_redis_py {
        assert!(
            std::env::var_os("CI").is_none(),
            "redis-py is required in CI"
        );
        eprintln!("SKIPPED: python3 with redis-py is not installed");
        return;
    }
    let Some(files) = TlsFiles::generate() else {
        return;
    };
    let (server, port) = start_tls(&files, "yes").await;
    let mut admin = tally_tests::RawConn::connect(server.addr()).await;
    assert_eq!(
        admin
            .cmd(&[
                "ACL",
                "SETUSER",
                "py",
                "on",
                ">pw",
                "~rl:*",
                "-@all",
                "+set",
                "+get",
                "+acl|whoami"
            ])
            .await,
        b"+OK\r\n"
    );
    let script = format!(
        "import redis\n\
         r = redis.Redis(host='localhost', port={port}, username='py', password='pw', ssl=True,\n\
             ssl_ca_certs='{ca}', ssl_certfile='{cert}', ssl_keyfile='{key}')\n\
         r.set('rl:py', 'tls')\n\
         print(r.get('rl:py').decode(), r.acl_whoami())\n",
        ca = files.ca,
        cert = files.client_cert,
        key = files.client_key
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .args(["-c", &script])
            .output()
            .expect("python3 runs")
    })
    .await
    .expect("joined");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "tls py",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
