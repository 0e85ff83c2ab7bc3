//! The slow log (SLOWLOG GET / LEN / RESET): commands that took at least
//! `slowlog-log-slower-than` microseconds, newest first, at most
//! `slowlog-max-len` of them, as Redis 7.0 records them (slowlog.c).
//!
//! Deciding costs one atomic load per command; only a command slow enough to
//! be logged takes the lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::resp::Reply;

/// Arguments kept per entry; the last one kept says how many were dropped.
const MAX_ARGC: usize = 32;
/// Bytes kept per argument; the rest is summarised.
const MAX_STRING: usize = 128;

/// One logged command.
#[derive(Debug, Clone)]
pub struct SlowEntry {
    id: u64,
    unix_secs: u64,
    duration_us: u64,
    argv: Vec<Vec<u8>>,
    peer: String,
    name: Vec<u8>,
}

/// Who ran a command, as the slow log shows it.
pub struct Caller {
    /// `ip:port`, or `?:0` for a script's commands (Redis's Lua client has no
    /// connection).
    pub peer: String,
    /// CLIENT SETNAME, or empty.
    pub name: Vec<u8>,
}

/// The server's slow log.
pub struct SlowLog {
    /// `slowlog-log-slower-than` in microseconds; negative turns logging off.
    threshold_us: AtomicI64,
    /// `slowlog-max-len`.
    max_len: AtomicUsize,
    /// The next entry's id (never reset, as Redis's).
    next_id: AtomicU64,
    entries: Mutex<VecDeque<SlowEntry>>,
}

impl SlowLog {
    /// An empty log with Redis's defaults (10000 µs, 128 entries).
    pub fn new(threshold_us: i64, max_len: usize) -> SlowLog {
        SlowLog {
            threshold_us: AtomicI64::new(threshold_us),
            max_len: AtomicUsize::new(max_len),
            next_id: AtomicU64::new(0),
            entries: Mutex::new(VecDeque::new()),
        }
    }

    /// Applies `slowlog-log-slower-than` and `slowlog-max-len`. As in Redis,
    /// a shorter length trims the log at its next entry, not at once.
    pub fn configure(&self, threshold_us: i64, max_len: usize) {
        self.threshold_us.store(threshold_us, Ordering::Relaxed);
        self.max_len.store(max_len, Ordering::Relaxed);
    }

    /// True when a command that took `duration_us` is to be logged.
    #[inline]
    pub fn wants(&self, duration_us: u64) -> bool {
        let threshold = self.threshold_us.load(Ordering::Relaxed);
        threshold >= 0 && duration_us >= threshold as u64
    }

    /// Logs a command (the caller checked [`SlowLog::wants`]).
    pub fn record(&self, argv: &[&[u8]], duration_us: u64, unix_secs: u64, caller: Caller) {
        let entry = SlowEntry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            unix_secs,
            duration_us,
            argv: logged_argv(argv),
            peer: caller.peer,
            name: caller.name,
        };
        let max_len = self.max_len.load(Ordering::Relaxed);
        let mut entries = self.entries.lock();
        entries.push_front(entry);
        entries.truncate(max_len);
    }

    /// SLOWLOG GET: the newest `count` entries.
    pub fn newest(&self, count: usize) -> Reply {
        let entries = self.entries.lock();
        Reply::Array(
            entries
                .iter()
                .take(count)
                .map(|e| {
                    Reply::Array(vec![
                        Reply::Int(e.id as i64),
                        Reply::Int(e.unix_secs as i64),
                        Reply::Int(e.duration_us as i64),
                        Reply::Array(e.argv.iter().map(|a| Reply::bulk(a)).collect()),
                        Reply::bulk(e.peer.as_bytes()),
                        Reply::bulk(&e.name),
                    ])
                })
                .collect(),
        )
    }

    /// SLOWLOG LEN.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// True when nothing is logged.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// SLOWLOG RESET.
    pub fn reset(&self) {
        self.entries.lock().clear();
    }
}

/// The arguments as an entry keeps them: secrets redacted, at most 32
/// arguments (the 32nd says how many more there were), each at most 128
/// bytes (then how many more bytes there were).
fn logged_argv(argv: &[&[u8]]) -> Vec<Vec<u8>> {
    let redacted = redacted_positions(argv);
    let kept = argv.len().min(MAX_ARGC);
    (0..kept)
        .map(|j| {
            if kept != argv.len() && j == kept - 1 {
                return format!("... ({} more arguments)", argv.len() - kept + 1).into_bytes();
            }
            if redacted.contains(&j) {
                return b"(redacted)".to_vec();
            }
            let arg = argv[j];
            if arg.len() > MAX_STRING {
                let mut shown = arg[..MAX_STRING].to_vec();
                shown.extend_from_slice(
                    format!("... ({} more bytes)", arg.len() - MAX_STRING).as_bytes(),
                );
                shown
            } else {
                arg.to_vec()
            }
        })
        .collect()
}

/// Arguments Redis replaces with `(redacted)` before logging: passwords of
/// AUTH and HELLO ... AUTH, and the value of CONFIG SET requirepass.
fn redacted_positions(argv: &[&[u8]]) -> Vec<usize> {
    use crate::util::is;
    let Some(name) = argv.first() else {
        return Vec::new();
    };
    if is(name, "auth") {
        return (1..argv.len()).collect();
    }
    if is(name, "hello") {
        return argv
            .iter()
            .enumerate()
            .skip(2)
            // AUTH needs two arguments after it.
            .find(|(j, a)| is(a, "auth") && argv.len() - j > 2)
            .map(|(j, _)| vec![j + 1, j + 2])
            .unwrap_or_default();
    }
    if is(name, "config") && argv.len() >= 4 && is(argv[1], "set") {
        return (2..argv.len() - 1)
            .step_by(2)
            .filter(|&j| is(argv[j], "requirepass"))
            .map(|j| j + 1)
            .collect();
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller() -> Caller {
        Caller {
            peer: "127.0.0.1:1".into(),
            name: Vec::new(),
        }
    }

    #[test]
    fn entries_are_newest_first_and_trimmed_at_the_next_entry() {
        let log = SlowLog::new(0, 2);
        for i in 0..3 {
            log.record(&[b"GET", format!("k{i}").as_bytes()], 5, 100, caller());
        }
        assert_eq!(log.len(), 2);
        log.configure(0, 1);
        assert_eq!(log.len(), 2, "trimmed only when the next entry comes");
        log.record(&[b"PING"], 1, 100, caller());
        assert_eq!(log.len(), 1);
        assert!(log.wants(0));
        log.configure(-1, 1);
        assert!(!log.wants(u64::MAX));
    }

    #[test]
    fn long_commands_are_summarised_and_secrets_redacted() {
        let many: Vec<Vec<u8>> = (0..40).map(|i| format!("a{i}").into_bytes()).collect();
        let argv: Vec<&[u8]> = many.iter().map(|a| a.as_slice()).collect();
        let kept = logged_argv(&argv);
        assert_eq!(kept.len(), 32);
        assert_eq!(kept[31], b"... (9 more arguments)");
        let long = vec![b'x'; 130];
        assert_eq!(
            logged_argv(&[b"SET", b"k", &long])[2],
            [vec![b'x'; 128], b"... (2 more bytes)".to_vec()].concat()
        );
        assert_eq!(
            logged_argv(&[b"AUTH", b"u", b"p"]),
            vec![
                b"AUTH".to_vec(),
                b"(redacted)".to_vec(),
                b"(redacted)".to_vec()
            ]
        );
        assert_eq!(
            logged_argv(&[b"HELLO", b"3", b"AUTH", b"u", b"p", b"SETNAME", b"n"])[3..5],
            [b"(redacted)".to_vec(), b"(redacted)".to_vec()]
        );
        assert_eq!(
            logged_argv(&[b"CONFIG", b"SET", b"timeout", b"5", b"requirepass", b"s"])[5],
            b"(redacted)"
        );
    }
}
