//! MONITOR: every command the server runs, as one line each, to the clients
//! that asked, in Redis's format:
//! `+1339518083.107412 [0 127.0.0.1:60866] "keys" "*"` (`[0 lua]` for a
//! script's commands).
//!
//! Commands are offered to the monitors after they ran (EVAL and EVALSHA
//! before, so that a script's own commands follow it), never administrative
//! ones, and with AUTH's and HELLO's passwords redacted, as Redis does.
//! Feeding costs one relaxed load while nobody monitors. A monitor that does
//! not read is cut at `client-output-buffer-limit replica` (Redis counts
//! monitors as replicas), so it cannot hold the server's memory or time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use tokio::sync::mpsc;

use crate::clients::ClientInfo;
use crate::config::OutputLimit;
use crate::pubsub::OutputBudget;

/// One MONITOR client's queue.
pub struct MonitorSink {
    /// What it has queued, against the replica limit.
    pub budget: OutputBudget,
    sender: mpsc::UnboundedSender<Bytes>,
    /// A replica's limit, fixed when it attached (a monitor's is read
    /// from [`Monitors`] at each line).
    limit: Option<OutputLimit>,
}

/// A replica's queue takes the replication stream.
impl crate::store::feed::StreamSink for MonitorSink {
    fn push(&self, bytes: &Bytes) -> bool {
        let limit = self.limit.unwrap_or(OutputLimit::REPLICA_DEFAULT);
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.budget.admit(bytes.len() as u64, limit, now_ms)
            && self.sender.send(bytes.clone()).is_ok()
    }

    fn alive(&self) -> bool {
        !self.sender.is_closed()
    }
}

/// A connection's own side of MONITOR: the lines to write.
pub struct MonitorMode {
    /// The shared side, registered with the server.
    pub sink: Arc<MonitorSink>,
    /// Lines waiting to be written, drained by the connection task.
    pub receiver: mpsc::UnboundedReceiver<Bytes>,
}

/// Every MONITOR client of the server.
pub struct Monitors {
    /// How many there are: read on every command.
    count: AtomicUsize,
    sinks: RwLock<Vec<Arc<MonitorSink>>>,
    limit: Mutex<OutputLimit>,
}

impl Default for Monitors {
    fn default() -> Monitors {
        Monitors {
            count: AtomicUsize::new(0),
            sinks: RwLock::new(Vec::new()),
            limit: Mutex::new(OutputLimit::REPLICA_DEFAULT),
        }
    }
}

impl Monitors {
    /// True when at least one client monitors.
    #[inline]
    pub fn any(&self) -> bool {
        self.count.load(Ordering::Relaxed) != 0
    }

    /// Makes the connection described by `info` a monitor.
    pub fn add(&self, info: Arc<ClientInfo>) -> MonitorMode {
        let (sender, receiver) = mpsc::unbounded_channel();
        let sink = Arc::new(MonitorSink {
            budget: OutputBudget::new(info, "replica"),
            sender,
            limit: None,
        });
        let mut sinks = self.sinks.write();
        sinks.push(sink.clone());
        self.count.store(sinks.len(), Ordering::Relaxed);
        MonitorMode { sink, receiver }
    }

    /// An output queue like a monitor's, not registered as one: a
    /// replica's, which the replication stream fills (see
    /// `store::feed::StreamSink`), against the same `replica` limit.
    pub fn replica_queue(&self, info: Arc<ClientInfo>) -> MonitorMode {
        let (sender, receiver) = mpsc::unbounded_channel();
        let sink = Arc::new(MonitorSink {
            budget: OutputBudget::new(info, "replica"),
            sender,
            limit: Some(self.limit()),
        });
        MonitorMode { sink, receiver }
    }

    /// Stops a monitor (RESET, or its connection closing).
    pub fn remove(&self, sink: &Arc<MonitorSink>) {
        let mut sinks = self.sinks.write();
        sinks.retain(|s| !Arc::ptr_eq(s, sink));
        self.count.store(sinks.len(), Ordering::Relaxed);
    }

    /// The output-buffer limit of monitors.
    pub fn limit(&self) -> OutputLimit {
        *self.limit.lock()
    }

    /// Installs `client-output-buffer-limit replica`.
    pub fn set_limit(&self, limit: OutputLimit) {
        *self.limit.lock() = limit;
    }

    /// Offers one command to every monitor. `now_us` is the wall clock;
    /// `source` is `ip:port`, or `lua` for a script's command.
    pub fn feed(&self, now_us: u64, db: usize, source: &str, argv: &[&[u8]]) {
        let line = Bytes::from(format_line(now_us, db, source, argv));
        let limit = self.limit();
        let now_ms = now_us / 1000;
        for sink in self.sinks.read().iter() {
            if sink.budget.admit(line.len() as u64, limit, now_ms) {
                // A send fails only when the connection is gone.
                let _ = sink.sender.send(line.clone());
            }
        }
    }
}

/// The line Redis's replicationFeedMonitors writes, as a status reply.
pub fn format_line(now_us: u64, db: usize, source: &str, argv: &[&[u8]]) -> Vec<u8> {
    let mut line = format!(
        "+{}.{:06} [{db} {source}]",
        now_us / 1_000_000,
        now_us % 1_000_000
    )
    .into_bytes();
    let redacted = redacted_arguments(argv);
    for (index, arg) in argv.iter().enumerate() {
        line.push(b' ');
        if redacted.contains(&index) {
            repr(&mut line, b"(redacted)");
        } else {
            repr(&mut line, arg);
        }
    }
    line.extend_from_slice(b"\r\n");
    line
}

/// The arguments Redis replaces with `(redacted)`: AUTH's, and the
/// username and password after HELLO's AUTH.
fn redacted_arguments(argv: &[&[u8]]) -> Vec<usize> {
    let name = argv.first().copied().unwrap_or_default();
    if name.eq_ignore_ascii_case(b"auth") {
        return (1..argv.len()).collect();
    }
    if name.eq_ignore_ascii_case(b"hello") {
        if let Some(at) = argv.iter().position(|a| a.eq_ignore_ascii_case(b"auth")) {
            return (at + 1..argv.len().min(at + 3)).collect();
        }
    }
    Vec::new()
}

/// Redis's sdscatrepr: the bytes quoted, with C escapes for `\` `"` and the
/// control characters it names, `\xHH` for any other unprintable byte.
pub fn repr(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_redis_lines() {
        let line = format_line(
            1_339_518_083_107_412,
            0,
            "127.0.0.1:60866",
            &[b"set", b"k\"\n\x01", b"v a"],
        );
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "+1339518083.107412 [0 127.0.0.1:60866] \"set\" \"k\\\"\\n\\x01\" \"v a\"\r\n"
        );
        let line = format_line(5_000_001, 3, "lua", &[b"get", b"x"]);
        assert_eq!(line, b"+5.000001 [3 lua] \"get\" \"x\"\r\n");
    }

    #[test]
    fn passwords_are_redacted() {
        let auth = format_line(0, 0, "lua", &[b"AUTH", b"user", b"secret"]);
        assert_eq!(
            auth,
            b"+0.000000 [0 lua] \"AUTH\" \"(redacted)\" \"(redacted)\"\r\n"
        );
        let hello = format_line(
            0,
            0,
            "lua",
            &[b"HELLO", b"3", b"AUTH", b"u", b"p", b"SETNAME", b"n"],
        );
        assert_eq!(
            hello,
            b"+0.000000 [0 lua] \"HELLO\" \"3\" \"AUTH\" \"(redacted)\" \"(redacted)\" \"SETNAME\" \"n\"\r\n"
        );
    }
}
