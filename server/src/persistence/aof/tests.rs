//! The connection's wait for the file before its replies, step by step.

use std::sync::Arc;

use super::manifest::Manifest;
use super::{before_replies, before_reply, open_for_append};
use crate::config::Config;
use crate::state::Shared;
use crate::store::feed::Change;

/// A fresh directory, removed when the test ends.
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server state logging to a fresh directory, and that directory's
/// increment.
fn logging() -> (Arc<Shared>, std::path::PathBuf, Scratch) {
    let dir = std::env::temp_dir().join(format!(
        "tally-aof-unit-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    let shared = Arc::new(Shared::new(Config {
        dir: dir.to_string_lossy().into_owned(),
        appendonly: true,
        ..Config::default()
    }));
    open_for_append(&shared, Manifest::default()).expect("the log opens");
    let incr = dir.join("appendonlydir").join("appendonly.aof.1.incr.aof");
    (shared, incr, Scratch(dir))
}

fn logged(incr: &std::path::Path) -> Vec<u8> {
    std::fs::read(incr).expect("the increment is there")
}

/// A connection whose change is not in the file yet writes it before it
/// answers, even while another thread holds the writer and writes nothing
/// (the connection waits for the lock, then looks again).
#[test]
fn a_change_is_in_the_file_when_the_wait_ends() {
    let (shared, incr, _dir) = logging();
    let offset = shared
        .store
        .feed()
        .append(&Change::one(0, &[&b"INCR"[..], b"counter"]));
    assert!(offset > 0);
    let other_writer = shared.aof.writer.lock();
    let waiting = std::thread::spawn({
        let shared = shared.clone();
        move || before_reply(&shared, offset)
    });
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(!logged(&incr).ends_with(b"counter\r\n"));
    drop(other_writer);
    assert!(waiting.join().expect("the wait ends"));
    assert!(
        logged(&incr).ends_with(b"*2\r\n$4\r\nINCR\r\n$7\r\ncounter\r\n"),
        "the change is in the file when the wait ends"
    );
}

/// A change already written by another connection's write ends the wait
/// at once, with nothing written again.
#[tokio::test(flavor = "current_thread")]
async fn a_change_another_write_carried_is_not_written_twice() {
    let (shared, incr, _dir) = logging();
    let offset = shared
        .store
        .feed()
        .append(&Change::one(0, &[&b"SET"[..], b"k", b"v"]));
    super::flush(&shared, false);
    let written = logged(&incr);
    assert!(written.ends_with(b"$1\r\nk\r\n$1\r\nv\r\n"));
    assert!(before_replies(&shared, offset).await);
    assert_eq!(logged(&incr), written);
}
