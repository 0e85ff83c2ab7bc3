//! What a connection waits for after a command that does not answer at
//! once: WAIT's replica acknowledgements, a blocked command's outcome, a
//! replica's snapshot.

use std::sync::atomic::Ordering;

use bytes::BytesMut;
use tokio::io::AsyncReadExt;

use super::{ClientStream, READ_CHUNK};
use crate::cmd;
use crate::state::Shared;

/// WAIT's wait: the number of replicas that acknowledged `offset`, once
/// `wanted` have or `timeout_ms` passed (0: no limit); `None` when the
/// client was killed meanwhile. Rechecked at each acknowledgement, and
/// every second, when the replicas are asked again.
pub(super) async fn wait_for_replicas(
    shared: &Shared,
    wanted: usize,
    offset: u64,
    timeout_ms: u64,
    mut killed: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
) -> Option<usize> {
    let deadline = (timeout_ms != 0)
        .then(|| tokio::time::Instant::now() + std::time::Duration::from_millis(timeout_ms));
    loop {
        let acked = shared.replica_acks.notified();
        tokio::pin!(acked);
        acked.as_mut().enable();
        let count = cmd::replication::acknowledged(shared, offset);
        let now = tokio::time::Instant::now();
        if count >= wanted || deadline.is_some_and(|d| now >= d) {
            return Some(count);
        }
        let second = now + std::time::Duration::from_secs(1);
        let wake = deadline.map_or(second, |d| d.min(second));
        tokio::select! {
            biased;
            _ = killed.as_mut() => return None,
            _ = acked => {}
            _ = tokio::time::sleep_until(wake) => shared.store.feed().request_acks(),
        }
    }
}

/// WAITAOF's wait: until the local file (when `local`) fsynced
/// `aof_offset` and `wanted` replicas' files fsynced `offset`, or the
/// timeout; what was fsynced then. `None` when the client was killed.
pub(super) async fn wait_for_aof(
    shared: &Shared,
    (local, wanted): (bool, usize),
    (aof_offset, offset): (u64, u64),
    timeout_ms: u64,
    mut killed: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
) -> Option<(bool, usize)> {
    let deadline = (timeout_ms != 0)
        .then(|| tokio::time::Instant::now() + std::time::Duration::from_millis(timeout_ms));
    let mut synced = shared.aof.watch_synced();
    loop {
        let acked = shared.replica_acks.notified();
        tokio::pin!(acked);
        acked.as_mut().enable();
        synced.borrow_and_update();
        let (here, replicas) = cmd::replication::aof_acknowledged(shared, aof_offset, offset);
        let now = tokio::time::Instant::now();
        if ((here || !local) && replicas >= wanted) || deadline.is_some_and(|d| now >= d) {
            return Some((here, replicas));
        }
        let second = now + std::time::Duration::from_secs(1);
        let wake = deadline.map_or(second, |d| d.min(second));
        tokio::select! {
            biased;
            _ = killed.as_mut() => return None,
            _ = acked => {}
            _ = synced.changed() => {}
            _ = tokio::time::sleep_until(wake) => {
                shared.aof.request_sync();
                shared.store.feed().request_acks();
            }
        }
    }
}

/// SHUTDOWN's wait for the shutdown it started (or joined) to be decided:
/// false when the server is stopping or the client went away (the
/// connection closes), true when the shutdown did not happen.
pub(super) async fn wait_for_shutdown(
    shared: &Shared,
    mut killed: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
) -> bool {
    loop {
        let decided = shared.pending_shutdown.decided.notified();
        tokio::pin!(decided);
        decided.as_mut().enable();
        if shared
            .shutting_down
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return false;
        }
        if shared.pending_shutdown.waiting.lock().is_none() {
            return true;
        }
        tokio::select! {
            biased;
            _ = killed.as_mut() => return false,
            _ = decided => {}
        }
    }
}

/// A blocked client's wait: the outcome of its waiter (served, timed out,
/// unblocked), or `None` when the client was killed or closed its
/// connection meanwhile. What the client sends while blocked is read and
/// kept for after, as Redis keeps it; an end of stream ends the wait.
pub(super) async fn wait_blocked(
    shared: &Shared,
    waiter: &crate::blocking::Waiter,
    deadline: Option<std::time::Instant>,
    stream: &mut impl ClientStream,
    input: &mut BytesMut,
    mut killed: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
) -> Option<crate::blocking::Outcome> {
    let deadline = deadline.map(tokio::time::Instant::from_std);
    // Past the deadline while another connection was serving it: the
    // outcome comes from there (or the waiter is handed back and gives up).
    let mut expired = false;
    loop {
        let woken = waiter.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if let Some(outcome) = waiter.outcome() {
            return Some(outcome);
        }
        if expired && waiter.give_up() {
            return Some(crate::blocking::Outcome::TimedOut);
        }
        if input.capacity() - input.len() < READ_CHUNK / 4 {
            input.reserve(READ_CHUNK);
        }
        tokio::select! {
            biased;
            _ = killed.as_mut() => {
                waiter.give_up();
                return None;
            }
            _ = woken => {}
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)),
                if deadline.is_some() && !expired => {
                if waiter.give_up() {
                    return Some(crate::blocking::Outcome::TimedOut);
                }
                expired = true;
            }
            read = stream.read_buf(input) => match read {
                Ok(0) | Err(_) => {
                    waiter.give_up();
                    return None;
                }
                Ok(n) => {
                    shared.stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    shared.stats.reads_processed.fetch_add(1, Ordering::Relaxed);
                }
            },
        }
    }
}

/// Waits until the shards' snapshot is free for a replica queued behind
/// another's (`crate::cmd::replication::start_full_sync`), looking ten
/// times a second and sending a newline each second, as Redis keeps a
/// replica waiting for its BGSAVE alive; then starts the replica's and
/// sends what goes before it (`+FULLRESYNC`). None when the connection
/// is to close.
pub(super) async fn wait_for_snapshot_turn(
    shared: &Shared,
    info: &crate::state::ClientInfo,
    stream: &mut impl ClientStream,
    turn: &crate::cmd::replication::QueuedSync,
    mut killed: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
) -> Option<crate::persistence::replica_snapshot::SnapshotBytes> {
    let mut looks = 0u32;
    loop {
        if let Some((bytes, line)) = crate::cmd::replication::start_full_sync(shared, turn) {
            if !line.is_empty()
                && !super::write_out(shared, info, stream, &line, false, killed.as_mut()).await
            {
                return None;
            }
            return Some(bytes);
        }
        tokio::select! {
            biased;
            _ = killed.as_mut() => return None,
            _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
        }
        looks += 1;
        if looks % 10 == 0
            && !super::write_out(shared, info, stream, b"\n", false, killed.as_mut()).await
        {
            return None;
        }
    }
}

/// A replica's snapshot being written in the background: its bytes once
/// written. Meanwhile a newline goes to the replica each second, as Redis
/// sends them to a replica waiting for its snapshot: the replica skips
/// them, and its `repl-timeout` does not run out. `None` when the client
/// was killed or its link failed.
pub(super) async fn wait_for_snapshot(
    shared: &Shared,
    info: &crate::state::ClientInfo,
    stream: &mut impl ClientStream,
    mut bytes: crate::persistence::replica_snapshot::SnapshotBytes,
    mut killed: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
) -> Option<std::io::Result<Vec<u8>>> {
    loop {
        tokio::select! {
            biased;
            _ = killed.as_mut() => return None,
            written = &mut bytes => {
                return Some(written.unwrap_or_else(|_| {
                    Err(std::io::Error::other("the snapshot's writer did not start"))
                }));
            }
            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {
                if !super::write_out(shared, info, stream, b"\n", false, killed.as_mut()).await {
                    return None;
                }
            }
        }
    }
}
