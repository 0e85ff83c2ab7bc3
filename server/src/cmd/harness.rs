//! A server and one client in process, for tests that reach a command
//! without a socket: `Harness::new().run(&["INCR", "k"])` goes through the
//! dispatcher exactly as a connection's command does (arity, ACL, the
//! maxmemory check, statistics, MULTI), and gives the reply. What the
//! connection loop does with the reply (writing it, CLIENT REPLY, closing)
//! is not here; the differential tests cover that over real sockets.

use std::net::SocketAddr;
use std::sync::Arc;

use super::{ClientState, Ctx};
use crate::clients::ClientInfo;
use crate::config::Config;
use crate::resp::{Protocol, Reply};
use crate::state::Shared;
use crate::store::{Clock, ManualClock};

/// One client of an in-process server.
pub struct Harness {
    /// The server.
    pub shared: Arc<Shared>,
    /// The client the commands run as.
    pub client: ClientState,
    /// The server's clock, which only moves when told.
    pub clock: Arc<ManualClock>,
}

/// The clock a harness starts at (2024-07-03, like the fuzz targets').
const START_MS: u64 = 1_720_000_000_000;

impl Harness {
    /// A server with the default configuration (no snapshots) and a
    /// manual clock.
    pub fn new() -> Harness {
        Harness::with_config(Config {
            save_points: Vec::new(),
            ..Config::default()
        })
    }

    /// A server with `config`, on a manual clock.
    pub fn with_config(mut config: Config) -> Harness {
        let clock = Arc::new(ManualClock::new(START_MS));
        config.clock = clock.clone();
        let shared = Arc::new(Shared::new(config));
        let addr = SocketAddr::from(([127, 0, 0, 1], 1));
        let info = Arc::new(ClientInfo::new(1, addr, addr, 0));
        let client = ClientState::new(info, true);
        Harness {
            shared,
            client,
            clock,
        }
    }

    /// Runs one command given as text.
    pub fn run(&mut self, argv: &[&str]) -> Reply {
        let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        self.run_bytes(&argv)
    }

    /// Runs one command given as bytes.
    pub fn run_bytes(&mut self, argv: &[&[u8]]) -> Reply {
        let mut ctx = Ctx {
            shared: &self.shared,
            client: &mut self.client,
            now_ms: self.clock.now_ms(),
            held: None,
        };
        let mut reply = super::dispatch(&mut ctx, argv);
        // No connection waits here: a command that blocks times out at
        // once, with the reply a timeout gives.
        if let super::After::Block { waiter, .. } = &self.client.after {
            self.shared.blocked.remove(waiter);
            self.client.after = super::After::Continue;
            reply = crate::blocking::Outcome::TimedOut.into_reply();
        }
        self.client.batch.flush(&self.shared, self.client.info.id);
        reply
    }

    /// Runs one command and gives its reply as the client would read it
    /// (RESP2, or RESP3 after HELLO 3).
    pub fn resp(&mut self, argv: &[&str]) -> String {
        let reply = self.run(argv);
        let mut out = bytes::BytesMut::new();
        reply.encode(self.client.proto, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Runs each command in turn and asserts its reply, byte for byte as
    /// the client reads it.
    #[track_caller]
    pub fn check(&mut self, steps: &[(&[&str], &str)]) {
        for (argv, expected) in steps {
            assert_eq!(self.resp(argv), *expected, "{argv:?}");
        }
    }

    /// Moves the server's clock forward.
    pub fn advance_ms(&self, ms: u64) {
        self.clock.advance_ms(ms);
    }

    /// The protocol the client speaks.
    pub fn protocol(&self) -> Protocol {
        self.client.proto
    }
}

impl Default for Harness {
    fn default() -> Harness {
        Harness::new()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        super::multi::forget_client(&self.shared, &mut self.client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_runs_through_the_dispatcher_with_its_checks() {
        let mut h = Harness::new();
        assert_eq!(h.resp(&["SET", "k", "1"]), "+OK\r\n");
        assert_eq!(h.resp(&["INCR", "k"]), ":2\r\n");
        // Arity and unknown commands are the dispatcher's.
        assert_eq!(
            h.resp(&["GET"]),
            "-ERR wrong number of arguments for 'get' command\r\n"
        );
        assert_eq!(
            h.resp(&["NOPE", "a"]),
            "-ERR unknown command 'NOPE', with args beginning with: 'a' \r\n"
        );
        // The statistics saw them, as Redis's do.
        let info = h.resp(&["INFO", "commandstats"]);
        assert!(info.contains("cmdstat_incr:calls=1,"), "{info}");
        let info = h.resp(&["INFO", "errorstats"]);
        assert!(info.contains("errorstat_ERR:count=2\r\n"), "{info}");
    }

    #[test]
    fn the_clock_moves_only_when_told() {
        let mut h = Harness::new();
        h.run(&["SET", "k", "v", "PX", "100"]);
        h.advance_ms(99);
        assert_eq!(h.resp(&["GET", "k"]), "$1\r\nv\r\n");
        // Through the millisecond of its deadline, as on Redis.
        h.advance_ms(1);
        assert_eq!(h.resp(&["PTTL", "k"]), ":0\r\n");
        assert_eq!(h.resp(&["GET", "k"]), "$1\r\nv\r\n");
        h.advance_ms(1);
        assert_eq!(h.resp(&["GET", "k"]), "$-1\r\n");
    }
}
