//! Shared helpers for tally's socket-level and differential tests.
//!
//! - [`TestServer`] starts an in-process tally-server on a free port, with a
//!   [`ManualClock`] so expiry tests move time instead of sleeping.
//! - [`RawConn`] speaks raw RESP over a socket and returns each reply's exact
//!   bytes, so tests assert the wire format, not a client library's view of it.
//! - [`RedisServer`] starts a real `redis-server` for differential tests. In CI
//!   (`CI` set in the environment) a missing redis-server fails the test; on a
//!   developer machine without it the differential tests are skipped loudly.

pub mod cluster;
pub mod keyspace;
pub mod process;
pub mod replication;
pub mod transcript;
pub mod twins;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tally_server::{Config, ManualClock, Server, ServerHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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

/// A fixed start time for manual clocks: 2024-07-03T09:46:40Z (1720000000 s),
/// the window start of the key examples in README.md and docs/client.md.
pub const T0_MS: u64 = 1_720_000_000_000;

/// An in-process tally-server.
pub struct TestServer {
    /// The running server.
    pub handle: ServerHandle,
    /// The clock the server reads; move it to expire keys.
    pub clock: Arc<ManualClock>,
    /// Its scratch `dir`, removed when the server is dropped.
    _scratch: ScratchDir,
    _stop_scripts: StopScriptsOnDrop,
}

/// Stops the server's scripts when dropped. A test that fails while a
/// script of its own runs forever would otherwise hang: the runtime's
/// shutdown waits for the thread running the script.
struct StopScriptsOnDrop(Arc<tally_server::Shared>);

impl Drop for StopScriptsOnDrop {
    fn drop(&mut self) {
        self.0.scripts.stop_all();
    }
}

/// A server's directory, removed when dropped if [`scratch_dir`] made it.
struct ScratchDir(String);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        // Only a scratch directory: a test that points a server at another
        // one (its working directory, say) must not lose it.
        let scratch = std::fs::canonicalize(std::env::temp_dir())
            .unwrap_or_else(|_| std::env::temp_dir())
            .join("tally-test-");
        let scratch = scratch.to_string_lossy().into_owned();
        let ours = std::fs::canonicalize(&self.0)
            .is_ok_and(|dir| dir.to_string_lossy().starts_with(&scratch));
        if ours {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl TestServer {
    /// Starts a server on 127.0.0.1 with a free port and a manual clock.
    pub async fn start() -> TestServer {
        TestServer::start_with(|_| {}).await
    }

    /// Starts a server after letting `adjust` change the default test config.
    pub async fn start_with(adjust: impl FnOnce(&mut Config)) -> TestServer {
        TestServer::try_start_with(adjust)
            .await
            .expect("tally-server starts")
    }

    /// [`TestServer::start_with`], returning the error when the server does
    /// not start (a test that picked its own ports retries on AddrInUse: a
    /// port found free can be taken by another test before the bind).
    pub async fn try_start_with(adjust: impl FnOnce(&mut Config)) -> std::io::Result<TestServer> {
        let clock = Arc::new(ManualClock::new(T0_MS));
        let default_dir = scratch_dir();
        let mut config = Config {
            port: 0,
            shards: 4,
            clock: clock.clone(),
            dir: default_dir.clone(),
            // As the redis-server the differential tests start (--save "").
            save_points: Vec::new(),
            ..Config::default()
        };
        adjust(&mut config);
        if config.dir != default_dir {
            // The test brought its own directory.
            let _ = std::fs::remove_dir_all(&default_dir);
        }
        let scratch = ScratchDir(config.dir.clone());
        let handle = Server::new(config).start().await?;
        Ok(TestServer {
            _stop_scripts: StopScriptsOnDrop(handle.shared().clone()),
            handle,
            clock,
            _scratch: scratch,
        })
    }

    /// Starts a server reading the real system clock (for differential tests,
    /// where Redis reads the real clock too).
    pub async fn start_real_clock() -> TestServer {
        let clock = Arc::new(ManualClock::new(T0_MS));
        let scratch = ScratchDir(scratch_dir());
        let handle = Server::new(Config {
            port: 0,
            shards: 4,
            dir: scratch.0.clone(),
            // As the redis-server the differential tests start (--save "").
            save_points: Vec::new(),
            ..Config::default()
        })
        .start()
        .await
        .expect("tally-server starts");
        TestServer {
            _stop_scripts: StopScriptsOnDrop(handle.shared().clone()),
            handle,
            clock,
            _scratch: scratch,
        }
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.handle.local_addr()
    }

    /// A raw connection to the server.
    pub async fn raw(&self) -> RawConn {
        RawConn::connect(self.addr()).await
    }

    /// A `redis` crate client for the server.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(format!("redis://{}/", self.addr())).expect("valid url")
    }
}

/// Encodes a command as a RESP multibulk request.
pub fn encode_command<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        let arg = arg.as_ref();
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Splits a command line on spaces (no quoting) into arguments.
pub fn words(line: &str) -> Vec<Vec<u8>> {
    line.split(' ')
        .filter(|w| !w.is_empty())
        .map(|w| w.as_bytes().to_vec())
        .collect()
}

/// Length of the first complete reply frame in `buf`, if one is complete.
/// Byte-level, as the server's replies may carry any bytes in error lines
/// (Redis echoes what clients sent), and iterative, as script results nest
/// thousands deep.
pub fn frame_len(buf: &[u8], resp3: bool) -> Option<usize> {
    tally_server::resp::reply_frame_len(buf, resp3)
}

/// A raw RESP connection that returns replies as exact bytes.
pub struct RawConn {
    stream: TcpStream,
    pending: Vec<u8>,
    /// Decode replies as RESP3 (after HELLO 3).
    pub resp3: bool,
}

/// How long a test waits for one reply before failing.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

impl RawConn {
    /// Connects to `addr`.
    pub async fn connect(addr: SocketAddr) -> RawConn {
        let stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        RawConn {
            stream,
            pending: Vec::new(),
            resp3: false,
        }
    }

    /// True when a connection to `addr` is accepted (something listens).
    pub async fn try_connect(addr: SocketAddr) -> bool {
        TcpStream::connect(addr).await.is_ok()
    }

    /// Connects with a small, fixed socket receive buffer (which turns off
    /// the kernel's autotuning): a client that stops reading then backs
    /// data up into the server after a few kilobytes rather than tens of
    /// megabytes, as a slow subscriber across a real network does.
    pub async fn connect_small_receive_buffer(addr: SocketAddr) -> RawConn {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(64 * 1024).expect("SO_RCVBUF");
        let stream = socket.connect(addr).await.expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        RawConn {
            stream,
            pending: Vec::new(),
            resp3: false,
        }
    }

    /// Sends raw bytes.
    pub async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    /// Reads one complete reply and returns its bytes.
    pub async fn reply(&mut self) -> Vec<u8> {
        let deadline = Instant::now() + REPLY_TIMEOUT;
        loop {
            if let Some(n) = frame_len(&self.pending, self.resp3) {
                return self.pending.drain(..n).collect();
            }
            // On the heap: a 64 KB array here would sit in every future
            // awaiting a reply, and a test awaiting dozens of them would
            // outgrow a test thread's stack in debug builds.
            let mut chunk = vec![0u8; 64 * 1024];
            let left = deadline.saturating_duration_since(Instant::now());
            let read = tokio::time::timeout(left, self.stream.read(&mut chunk))
                .await
                .expect("reply arrives in time")
                .expect("read");
            assert!(
                read > 0,
                "connection closed while waiting for a reply; have {:?}",
                String::from_utf8_lossy(&self.pending)
            );
            self.pending.extend_from_slice(&chunk[..read]);
        }
    }

    /// Sends one command and returns its reply bytes. `HELLO 3` / `HELLO 2`
    /// switch how later replies are framed (an error reply leaves it as it was).
    pub async fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        self.send(&encode_command(args)).await;
        let before = self.resp3;
        let is_hello = args
            .first()
            .is_some_and(|a| a.as_ref().eq_ignore_ascii_case(b"hello"));
        if is_hello {
            match args.get(1).map(|a| a.as_ref()) {
                Some(b"3") => self.resp3 = true,
                Some(b"2") => self.resp3 = false,
                _ => {}
            }
        }
        let reply = self.reply().await;
        if reply.starts_with(b"-") {
            self.resp3 = before;
        }
        reply
    }

    /// Waits until INFO clients shows `count` blocked clients: false when
    /// it does not within 5 s.
    pub async fn wait_blocked_clients(&mut self, count: usize) -> bool {
        let wanted = format!("blocked_clients:{count}\r");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.line("INFO clients").await.contains(&wanted) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        false
    }

    /// Sends a space-separated command line (as a multibulk) and returns the
    /// reply as a lossy string, for readable assertions.
    pub async fn line(&mut self, line: &str) -> String {
        let reply = self.cmd(&words(line)).await;
        String::from_utf8_lossy(&reply).into_owned()
    }

    /// Reads until one whole reply arrived or the server closed the
    /// connection, returning what was received.
    pub async fn read_until_closed_or_reply(&mut self) -> Vec<u8> {
        let deadline = Instant::now() + REPLY_TIMEOUT;
        loop {
            if let Some(n) = frame_len(&self.pending, self.resp3) {
                return self.pending.drain(..n).collect();
            }
            let mut chunk = [0u8; 4096];
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.stream.read(&mut chunk))
                .await
                .expect("a reply or a close arrives in time")
            {
                Ok(0) | Err(_) => return std::mem::take(&mut self.pending),
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Waits until the server closes the connection, returning what it sent
    /// before closing. Fails if it stays open past the timeout.
    pub async fn read_until_closed(&mut self) -> Vec<u8> {
        let mut all = std::mem::take(&mut self.pending);
        let deadline = Instant::now() + REPLY_TIMEOUT;
        loop {
            let mut chunk = [0u8; 4096];
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.stream.read(&mut chunk))
                .await
                .expect("server closes the connection in time")
            {
                Ok(0) | Err(_) => return all,
                Ok(n) => all.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

/// A real redis-server on a free port, stopped on drop.
pub struct RedisServer {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its own `dir` (unless the test gave one): a redis-server replica
    /// writes the snapshot its master sent there as dump.rdb, and any
    /// redis-server started later in the same directory would load it.
    _scratch: ScratchDir,
}

/// A new empty directory for one server's files (`dir`), so that no test
/// reads or writes a snapshot another left behind.
pub fn scratch_dir() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tally-test-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir.to_string_lossy().into_owned()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl RedisServer {
    /// Starts redis-server; None when it is not installed and skipping
    /// was asked for (see [`tool_missing`]).
    pub fn start() -> Option<RedisServer> {
        RedisServer::start_with(&[])
    }

    /// Like [`RedisServer::start`], with extra redis-server arguments.
    pub fn start_with(extra: &[&str]) -> Option<RedisServer> {
        let found = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok();
        if !found {
            tool_missing("redis-server (for a differential test)");
            return None;
        }
        // A free port can be taken by another test between the pick and
        // redis-server's bind; then the child exits, and a connection to the
        // port would reach someone else's server. So each attempt checks
        // that the server answering is this child (INFO's process_id), and
        // a lost race is retried on another port.
        for _ in 0..20 {
            if let Some(server) = RedisServer::try_start(free_port(), extra) {
                return Some(server);
            }
        }
        panic!("redis-server did not start on any of 20 free ports");
    }

    fn try_start(port: u16, extra: &[&str]) -> Option<RedisServer> {
        let scratch = ScratchDir(scratch_dir());
        let mut args: Vec<String> = [
            "--dir",
            &scratch.0,
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new("redis-server")
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let mut server = RedisServer {
            addr: format!("127.0.0.1:{port}").parse().expect("addr"),
            child,
            _scratch: scratch,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            assert!(Instant::now() < deadline, "redis-server did not start");
            if matches!(server.child.try_wait(), Ok(Some(_))) {
                return None; // it could not bind: the port was taken
            }
            let password = extra
                .windows(2)
                .find(|pair| pair[0] == "--requirepass")
                .map(|pair| pair[1]);
            match loaded_server_pid(server.addr, password) {
                Some(pid) if pid == server.child.id() => return Some(server),
                Some(_) => return None, // another server holds the port; drop kills ours
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

/// The process id the server at `addr` reports in INFO, once one answers
/// and has loaded its data: a server started on a copied RDB or log answers
/// INFO while it loads but most commands with -LOADING, so a test that
/// went on at the first answer would read an empty or failing keyspace.
fn loaded_server_pid(addr: SocketAddr, password: Option<&str>) -> Option<u32> {
    let url = match password {
        Some(password) => format!("redis://:{password}@{addr}/"),
        None => format!("redis://{addr}/"),
    };
    let timeout = Duration::from_secs(2);
    let mut conn = redis::Client::open(url)
        .ok()?
        .get_connection_with_timeout(timeout)
        .ok()?;
    conn.set_read_timeout(Some(timeout)).ok()?;
    let info: redis::InfoDict = redis::cmd("INFO")
        .arg("server")
        .arg("persistence")
        .query(&mut conn)
        .ok()?;
    if info.get::<u8>("loading") != Some(0) {
        return None;
    }
    info.get("process_id")
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One command whose replies differed.
#[derive(Debug)]
pub struct Mismatch {
    /// Position of the command in the stream.
    pub index: usize,
    /// The command, as text.
    pub command: String,
    /// Redis's reply.
    pub redis: String,
    /// tally's reply.
    pub tally: String,
}

/// Sends the same commands, one at a time, to Redis and to tally over fresh
/// connections and returns every command whose reply bytes differ.
pub async fn compare_streams(
    redis: SocketAddr,
    tally: SocketAddr,
    commands: &[Vec<Vec<u8>>],
) -> Vec<Mismatch> {
    compare_streams_masked(redis, tally, commands, |reply| reply).await
}

/// [`compare_streams`], each reply passed through `mask` first (to blank
/// what the clock makes differ: an idle time, a delivery time).
pub async fn compare_streams_masked(
    redis: SocketAddr,
    tally: SocketAddr,
    commands: &[Vec<Vec<u8>>],
    mask: impl Fn(Vec<u8>) -> Vec<u8>,
) -> Vec<Mismatch> {
    let mut a = RawConn::connect(redis).await;
    let mut b = RawConn::connect(tally).await;
    let mut mismatches = Vec::new();
    for (index, command) in commands.iter().enumerate() {
        let expected = a.cmd(command).await;
        let actual = b.cmd(command).await;
        // HELLO 3 switches both connections to RESP3 framing.
        let accepted = !expected.starts_with(b"-");
        if accepted
            && command
                .first()
                .is_some_and(|c| c.eq_ignore_ascii_case(b"hello"))
        {
            let resp3 = command.get(1).is_some_and(|v| v == b"3");
            let resp2 = command.get(1).is_some_and(|v| v == b"2");
            if resp3 || resp2 {
                a.resp3 = resp3;
                b.resp3 = resp3;
            }
        }
        // HELLO's reply carries the connection id, which differs between
        // the servers for reasons unrelated to compatibility: compare the
        // rest of the reply.
        let (expected, actual) = if command
            .first()
            .is_some_and(|c| c.eq_ignore_ascii_case(b"hello"))
        {
            (without_client_id(&expected), without_client_id(&actual))
        } else {
            (mask(expected), mask(actual))
        };
        if expected != actual {
            mismatches.push(Mismatch {
                index,
                command: command
                    .iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" "),
                redis: String::from_utf8_lossy(&expected).into_owned(),
                tally: String::from_utf8_lossy(&actual).into_owned(),
            });
        }
    }
    mismatches
}

/// A HELLO reply with the value after `id` blanked out.
fn without_client_id(reply: &[u8]) -> Vec<u8> {
    const ID: &[u8] = b"$2\r\nid\r\n:";
    let Some(at) = reply.windows(ID.len()).position(|w| w == ID) else {
        return reply.to_vec();
    };
    let start = at + ID.len();
    let end = start + reply[start..].iter().position(|&b| b == b'\r').unwrap_or(0);
    [&reply[..start], b"?", &reply[end..]].concat()
}

/// Parses a hand-written command stream: one command per line, words split
/// on spaces, blank lines and `#` comments skipped.
pub fn script(text: &str) -> Vec<Vec<Vec<u8>>> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(words)
        .collect()
}

/// Sends a hand-written stream ([`script`]) to a fresh redis-server and a
/// fresh tally (real clock) and fails on any reply that differs.
pub async fn assert_script_matches_redis(text: &str) {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let mismatches = compare_streams(redis.addr, tally.addr(), &script(text)).await;
    assert_no_mismatch(&mismatches);
}

/// Panics with a readable list when `mismatches` is not empty.
pub fn assert_no_mismatch(mismatches: &[Mismatch]) {
    if mismatches.is_empty() {
        return;
    }
    let mut text = format!("{} replies differ from redis-server:\n", mismatches.len());
    for m in mismatches.iter().take(30) {
        text.push_str(&format!(
            "  #{} {}\n    redis: {:?}\n    tally: {:?}\n",
            m.index, m.command, m.redis, m.tally
        ));
    }
    panic!("{text}");
}

/// Certificates for TLS tests, made by the `openssl` command: a CA, a
/// server certificate for 127.0.0.1 and localhost, and a client
/// certificate, all signed by the CA (PEM files in a scratch directory).
pub struct TlsFiles {
    /// The CA certificate.
    pub ca: String,
    /// The server's certificate.
    pub server_cert: String,
    /// The server's key.
    pub server_key: String,
    /// A client certificate the CA signed.
    pub client_cert: String,
    /// Its key.
    pub client_key: String,
    /// The directory holding them.
    pub dir: String,
}

impl TlsFiles {
    /// Makes a fresh set; None when `openssl` is missing and skipping was
    /// asked for (see [`tool_missing`]).
    pub fn generate() -> Option<TlsFiles> {
        if Command::new("openssl").arg("version").output().is_err() {
            tool_missing("openssl (for a TLS test)");
            return None;
        }
        let dir = scratch_dir();
        let path = |name: &str| format!("{dir}/{name}");
        let run = |args: &[&str]| openssl(&dir, args);
        run(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-subj",
            "/CN=tally test CA",
        ]);
        std::fs::write(
            path("server.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        )
        .expect("extensions");
        std::fs::write(path("client.ext"), "extendedKeyUsage=clientAuth\n").expect("extensions");
        for (name, cn) in [("server", "localhost"), ("client", "tally test client")] {
            run(&[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
                "-subj",
                &format!("/CN={cn}"),
            ]);
            run(&[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-out",
                &format!("{name}.crt"),
                "-extfile",
                &format!("{name}.ext"),
            ]);
        }
        Some(TlsFiles {
            ca: path("ca.crt"),
            server_cert: path("server.crt"),
            server_key: path("server.key"),
            client_cert: path("client.crt"),
            client_key: path("client.key"),
            dir,
        })
    }
}

impl TlsFiles {
    /// A set whose server and client certificates are X.509 v1, as
    /// `openssl x509 -req` makes them without `-extfile` (the common way),
    /// signed by the same CA as [`TlsFiles::generate`]'s.
    pub fn generate_v1() -> Option<TlsFiles> {
        let files = TlsFiles::generate()?;
        let run = |args: &[&str]| openssl(&files.dir, args);
        for name in ["server", "client"] {
            let (key, csr, crt) = (
                format!("{name}-v1.key"),
                format!("{name}-v1.csr"),
                format!("{name}-v1.crt"),
            );
            run(&["genrsa", "-out", &key, "2048"]);
            run(&[
                "req",
                "-new",
                "-key",
                &key,
                "-subj",
                "/CN=127.0.0.1",
                "-out",
                &csr,
            ]);
            run(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-out",
                &crt,
            ]);
        }
        let text = Command::new("openssl")
            .args(["x509", "-noout", "-text", "-in", "server-v1.crt"])
            .current_dir(&files.dir)
            .output()
            .expect("openssl runs");
        assert!(String::from_utf8_lossy(&text.stdout).contains("Version: 1 (0x0)"));
        let path = |name: &str| format!("{}/{name}", files.dir);
        Some(TlsFiles {
            server_cert: path("server-v1.crt"),
            server_key: path("server-v1.key"),
            client_cert: path("client-v1.crt"),
            client_key: path("client-v1.key"),
            ..files
        })
    }
}

/// Runs `openssl` with `args` in `dir`, failing the test if it fails.
fn openssl(dir: &str, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A free port on 127.0.0.1 (taken and released: another process may take
/// it first, which a caller then sees as a failed bind).
pub fn free_local_port() -> u16 {
    free_port()
}

/// A reply with its clock readings blanked: the idle time in XPENDING's
/// and XINFO STREAM FULL's `[id, consumer, ms, deliveries]`, the delivery
/// time in a consumer's `[id, ms, deliveries]`, XINFO's `seen-time` and
/// `idle`, and the time after `TIME` in a logged XCLAIM. Read as RESP
/// tokens; the tests' values hold no CRLF.
pub fn mask_times(reply: Vec<u8>) -> Vec<u8> {
    let text = String::from_utf8_lossy(&reply).into_owned();
    let mut tokens: Vec<String> = text.split("\r\n").map(str::to_string).collect();
    let int = |t: &str| t.starts_with(':');
    let bulk = |t: &str| t.starts_with('$');
    for i in 0..tokens.len() {
        let at = |k: usize| tokens.get(i + k).map(String::as_str).unwrap_or("");
        let masked = if at(0) == "*4" && bulk(at(1)) && bulk(at(3)) && int(at(5)) && int(at(6)) {
            Some(i + 5)
        } else if at(0) == "*3" && bulk(at(1)) && int(at(3)) && int(at(4)) {
            Some(i + 3)
        } else if (at(0) == "seen-time" || at(0) == "idle") && int(at(1)) {
            Some(i + 1)
        } else if at(0) == "TIME" && bulk(at(1)) {
            Some(i + 2)
        } else {
            None
        };
        if let Some(k) = masked {
            tokens[k] = ":?".to_string();
        }
    }
    tokens.join("\r\n").into_bytes()
}

#[cfg(test)]
mod mask_tests {
    use super::mask_times;

    #[test]
    fn clock_readings_are_masked_and_nothing_else() {
        let pending = b"*1\r\n*4\r\n$3\r\n1-0\r\n$1\r\na\r\n:17\r\n:2\r\n".to_vec();
        assert_eq!(
            mask_times(pending),
            b"*1\r\n*4\r\n$3\r\n1-0\r\n$1\r\na\r\n:?\r\n:2\r\n".to_vec()
        );
        let seen = b"$9\r\nseen-time\r\n:1700000000000\r\n$9\r\npel-count\r\n:3\r\n".to_vec();
        assert_eq!(
            mask_times(seen),
            b"$9\r\nseen-time\r\n:?\r\n$9\r\npel-count\r\n:3\r\n".to_vec()
        );
        let entry = b"*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n".to_vec();
        assert_eq!(mask_times(entry.clone()), entry);
    }
}
