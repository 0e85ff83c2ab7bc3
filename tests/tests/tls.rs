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

/// The `redis` crate's client over rustls to `port`, trusting the test CA,
/// with the client certificate or without.
fn rustls_client(files: &TlsFiles, port: u16, client_cert: bool) -> redis::Client {
    let client_tls = client_cert.then(|| redis::ClientTlsConfig {
        client_cert: std::fs::read(&files.client_cert).expect("cert"),
        client_key: std::fs::read(&files.client_key).expect("key"),
    });
    redis::Client::build_with_tls(
        format!("rediss://localhost:{port}/"),
        redis::TlsCertificates {
            client_tls,
            root_cert: Some(std::fs::read(&files.ca).expect("ca")),
        },
    )
    .expect("a TLS client")
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
        c.tls.auth_clients = tally_server::config::ClientAuth::parse(auth).expect("auth");
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
    let client = rustls_client(&files, port, true);
    let mut conn = tally_tests::keyspace::patient(&client)
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
    let settings = |key: &str, pass: &str| tally_server::config::TlsSettings {
        cert_file: files.server_cert.clone(),
        key_file: key.to_string(),
        key_file_pass: pass.to_string(),
        auth_clients: tally_server::config::ClientAuth::parse("no").expect("auth"),
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
        c.tls.auth_clients = tally_server::config::ClientAuth::parse("no").expect("auth");
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
        let settings = tally_server::config::TlsSettings {
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
        tally_tests::tool_missing("python3 with redis-py");
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

/// A v1 server certificate is served, as redis-server (OpenSSL) serves it:
/// rustls's own loader refused it at start with "invalid peer certificate:
/// UnsupportedCertVersion". Client certificates are still verified by
/// webpki, strictly: a v1 client certificate is refused, where Redis takes
/// it (docs/security.md says so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1_server_certificate_is_served_as_redis_serves_it() {
    let Some(files) = TlsFiles::generate_v1() else {
        return;
    };
    let (_server, port) = start_tls(&files, "no").await;
    let (ok, text) = redis_cli(port, &files, false, &["PING"]);
    assert!(ok && text == "PONG", "{text}");
    let (_strict, port) = start_tls(&files, "yes").await;
    let (_, text) = redis_cli(port, &files, true, &["PING"]);
    assert_ne!(text, "PONG", "a v1 client certificate is refused");

    // redis-server with the same files: the server certificate is served.
    let redis_port = free_local_port().to_string();
    let redis_args = [
        "--tls-port",
        &redis_port,
        "--tls-cert-file",
        &files.server_cert,
        "--tls-key-file",
        &files.server_key,
        "--tls-ca-cert-file",
        &files.ca,
        "--tls-auth-clients",
        "no",
    ];
    if let Some(_redis) = tally_tests::RedisServer::start_with(&redis_args) {
        let (ok, text) = redis_cli(redis_port.parse().unwrap(), &files, false, &["PING"]);
        assert!(ok && text == "PONG", "{text}");
    }
}

/// A certificate error names the file and the reason.
#[test]
fn certificate_errors_name_the_file_and_the_reason() {
    let Some(files) = TlsFiles::generate() else {
        return;
    };
    let settings = |cert: &str, key: &str| tally_server::config::TlsSettings {
        cert_file: cert.into(),
        key_file: key.into(),
        ca_cert_file: files.ca.clone(),
        ..Default::default()
    };
    let error =
        |cert: &str, key: &str| tally_server::net::tls::build(&settings(cert, key)).unwrap_err();
    let ca_key = format!("{}/ca.key", files.dir);
    assert_eq!(
        error(&files.server_cert, &ca_key),
        format!(
            "Private key {ca_key} does not match the certificate {}",
            files.server_cert
        )
    );
    assert_eq!(
        error(&files.server_key, &files.server_key),
        format!("No certificate in {}", files.server_key)
    );
    let missing = format!("{}/missing.crt", files.dir);
    assert!(
        error(&missing, &files.server_key)
            .starts_with(&format!("Failed to load certificate {missing}: ")),
        "{}",
        error(&missing, &files.server_key)
    );
    assert!(
        error(&files.server_cert, &files.server_cert).starts_with(&format!(
            "Failed to load private key {}: ",
            files.server_cert
        )),
        "{}",
        error(&files.server_cert, &files.server_cert)
    );
}

/// CVE-2026-81934: in Redis, a command run for one TLS connection whose
/// bytes were already decrypted (CLIENT KILL, say) could free another
/// pending TLS connection while Redis's loop over pending connections held
/// a pointer to it. tally keeps no list across connections: each TLS
/// connection's buffered bytes belong to its own task, and a kill is a
/// flag that task reads. The attack's shape: clients pipelining over TLS
/// (so their bytes wait decrypted) while another kills them, over and
/// over; the server carries on and every client that was not killed is
/// answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cve_2026_81934_clients_killed_while_their_tls_data_is_pending() {
    let Some(files) = TlsFiles::generate() else {
        return;
    };
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let (server, port) = start_tls(&files, "no").await;
    let client = rustls_client(&files, port, false);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let mut victims = Vec::new();
    for i in 0..6 {
        let client = client.clone();
        victims.push(tokio::spawn(async move {
            let mut pipelines = 0u32;
            while std::time::Instant::now() < deadline {
                let Ok(mut conn) = tally_tests::keyspace::patient(&client).await else {
                    continue;
                };
                let mut pipe = redis::pipe();
                for _ in 0..500 {
                    pipe.cmd("INCR").arg(format!("victim:{i}")).ignore();
                }
                if pipe.query_async::<()>(&mut conn).await.is_ok() {
                    pipelines += 1;
                }
            }
            pipelines
        }));
    }
    let mut killer = tally_tests::keyspace::patient(&client)
        .await
        .expect("killer");
    let mut kills = 0i64;
    while std::time::Instant::now() < deadline {
        let killed: i64 = redis::cmd("CLIENT")
            .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"])
            .query_async(&mut killer)
            .await
            .expect("CLIENT KILL answers");
        kills += killed;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    for victim in victims {
        victim.await.expect("victim task");
    }
    assert!(kills > 0, "connections were killed mid-pipeline");
    let mut fresh = tally_tests::keyspace::patient(&client)
        .await
        .expect("a fresh TLS client");
    let pong: String = redis::cmd("PING")
        .query_async(&mut fresh)
        .await
        .expect("PING");
    assert_eq!(pong, "PONG");
    let mut plain = tally_tests::RawConn::connect(server.addr()).await;
    assert_eq!(plain.line("PING").await, "+PONG\r\n");
}

/// `tls-replication`: a tally replica follows a master over its TLS port,
/// showing its client certificate (the masters here require one): another tally,
/// then a redis-server; and a redis-server replica with `tls-replication
/// yes` follows a tally master over TLS. Each pair ends with the same data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_runs_over_tls_both_ways_and_with_redis() {
    use tally_tests::replication::{assert_same_data, run_lines, wait_in_sync};
    let Some(files) = TlsFiles::generate() else {
        return;
    };
    let (master, master_tls_port) = start_tls(&files, "yes").await;
    run_lines(
        master.addr(),
        &["SET before 1", "HSET h f v", "INCRBY n 41"],
    )
    .await;
    let replica = TestServer::start_with(|c| {
        c.tls.cert_file = files.server_cert.clone();
        c.tls.key_file = files.server_key.clone();
        c.tls.ca_cert_file = files.ca.clone();
        // The certificate a node shows when it connects (the server's is
        // for serverAuth only).
        c.tls.client_cert_file = files.client_cert.clone();
        c.tls.client_key_file = files.client_key.clone();
        c.tls.replication = true;
    })
    .await;
    let replicaof = format!("REPLICAOF 127.0.0.1 {master_tls_port}");
    run_lines(replica.addr(), &[&replicaof]).await;
    wait_in_sync(master.addr(), replica.addr()).await;
    run_lines(master.addr(), &["INCR n", "SET after 2"]).await;
    wait_in_sync(master.addr(), replica.addr()).await;
    assert_same_data(master.addr(), replica.addr()).await;

    // A redis-server replica over TLS of the tally master.
    let tls_args = |port: u16| -> Vec<String> {
        vec![
            "--tls-port".into(),
            port.to_string(),
            "--tls-cert-file".into(),
            files.server_cert.clone(),
            "--tls-key-file".into(),
            files.server_key.clone(),
            "--tls-ca-cert-file".into(),
            files.ca.clone(),
            "--tls-client-cert-file".into(),
            files.client_cert.clone(),
            "--tls-client-key-file".into(),
            files.client_key.clone(),
            "--tls-replication".into(),
            "yes".into(),
            "--repl-diskless-sync-delay".into(),
            "0".into(),
        ]
    };
    let redis_tls_port = free_local_port();
    let args = tls_args(redis_tls_port);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let Some(redis) = tally_tests::RedisServer::start_with(&args) else {
        return;
    };
    run_lines(redis.addr, &[&replicaof]).await;
    wait_in_sync(master.addr(), redis.addr).await;
    assert_same_data(master.addr(), redis.addr).await;

    // The redis-server promoted; the tally replica follows it over TLS.
    run_lines(redis.addr, &["REPLICAOF NO ONE", "SET on-redis 3"]).await;
    let follow_redis = format!("REPLICAOF 127.0.0.1 {redis_tls_port}");
    run_lines(replica.addr(), &[&follow_redis]).await;
    wait_in_sync(redis.addr, replica.addr()).await;
    assert_same_data(redis.addr, replica.addr()).await;
}
