//! tally-server as a process of its own, for the faults an in-process
//! server cannot suffer: `kill -9` (no shutdown, no final save) and
//! SIGSTOP (alive, holding its sockets, answering nothing).

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{free_local_port, scratch_dir};

/// The tally-server binary `cargo test` built beside this test binary
/// (target/<profile>/tally-server; the test binary is in deps/ below it).
pub fn tally_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    let binary = profile_dir.join("tally-server");
    assert!(
        binary.exists(),
        "{} is missing: build it with `cargo build -p tally-server` \
         (`cargo test --workspace` builds it)",
        binary.display()
    );
    binary
}

/// A tally-server process with its own port and directory; the directory
/// outlives restarts (nodes.conf, snapshots).
pub struct TallyProcess {
    child: Option<Child>,
    /// Its client port.
    pub port: u16,
    /// Its `dir`.
    pub dir: String,
    args: Vec<String>,
}

impl TallyProcess {
    /// Starts tally-server with `args` (besides --port and --dir) on a free
    /// port, once it answers PING. A cluster node gets a free bus port too
    /// (the default, the port + 10000, can pass 65535 for a port picked by
    /// the system).
    pub fn start(args: &[&str]) -> TallyProcess {
        let dir = scratch_dir();
        let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        if args.iter().any(|a| a == "--cluster-enabled") {
            args.extend(["--cluster-port".to_string(), free_local_port().to_string()]);
        }
        for _ in 0..20 {
            let mut process = TallyProcess {
                child: None,
                port: free_local_port(),
                dir: dir.clone(),
                args: args.clone(),
            };
            if process.spawn() {
                return process;
            }
        }
        panic!("tally-server did not start on any of 20 free ports");
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        format!("127.0.0.1:{}", self.port)
            .parse()
            .expect("an address")
    }

    /// `127.0.0.1:<port>` as text.
    pub fn address(&self) -> String {
        self.addr().to_string()
    }

    /// Spawns the process and waits until it answers; false when it exited
    /// first (its port was taken).
    fn spawn(&mut self) -> bool {
        let log = std::fs::File::create(format!("{}/tally.log", self.dir)).expect("a log file");
        let child = Command::new(tally_binary())
            .args(["--port", &self.port.to_string(), "--dir", &self.dir])
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn tally-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    self.child = None;
                    return false;
                }
            }
            if pong(self.addr()) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("tally-server on port {} did not answer", self.port);
    }

    /// Starts it again after [`Self::kill`], on the same port and files.
    pub fn restart(&mut self) {
        assert!(self.spawn(), "tally-server restarts on port {}", self.port);
    }

    /// SIGKILL, and waits for the process to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP (true) or SIGCONT (false).
    pub fn pause(&self, stop: bool) {
        let pid = self.child.as_ref().expect("running").id();
        let signal = if stop { "-STOP" } else { "-CONT" };
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} {pid}");
    }
}

impl Drop for TallyProcess {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_ref() {
            // A stopped process ignores SIGKILL's delivery until resumed
            // on some kernels' accounting; resume it first.
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
        }
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The server at `addr` answers PING.
fn pong(addr: SocketAddr) -> bool {
    let Ok(client) = redis::Client::open(format!("redis://{addr}/")) else {
        return false;
    };
    let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_secs(1)) else {
        return false;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    redis::cmd("PING").query::<String>(&mut conn).is_ok()
}
