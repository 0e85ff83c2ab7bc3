//! A full resynchronization's snapshot, taken as BGSAVE takes its file:
//! the moment marked in every shard at once, the bytes written by a
//! thread of its own while clients keep reading and writing (see
//! `crate::store::snapshot`). Redis forks for a replica's sync; holding
//! every shard for the whole write instead stalled every keyed command
//! for the length of it (284 ms for a million counters:
//! docs/benchmarks.md, `benches/sync_stall.sh`).
//!
//! The shards keep one snapshot at a time. A replica that asks while a
//! BGSAVE, a rewrite or another replica's sync holds it waits for it to
//! end, then gets its own (`cmd::replication::start_full_sync`), as a
//! Redis replica that cannot attach to the running child waits for the
//! next. A snapshot whose replica went away stops at the writer's next
//! step.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::oneshot;

use super::snapshot::{
    cancel_snapshots, lower_priority, mark_every_shard, repl_info, write_snapshot, WriterPriority,
};
use crate::state::Shared;

/// The snapshot's bytes, once written (an error when the write failed or
/// its thread could not start).
pub type SnapshotBytes = oneshot::Receiver<std::io::Result<Vec<u8>>>;

/// Marks the moment in every shard, with `at_the_moment` run there (it
/// attaches the replica to the stream: it then misses no change and gets
/// none twice), and writes the snapshot of that moment in the background.
/// None, with nothing run, when the shards' snapshot is taken.
///
/// While it runs, INFO says `rdb_bgsave_in_progress:1` and BGSAVE and
/// SAVE are refused, as while Redis's fork child writes a replica's
/// snapshot.
pub fn in_background<T>(
    shared: &Arc<Shared>,
    at_the_moment: impl FnOnce() -> T,
) -> Option<(SnapshotBytes, T)> {
    let state = &shared.persistence;
    if state.snapshot_busy.swap(true, Ordering::SeqCst) {
        return None;
    }
    state.bgsave_in_progress.store(true, Ordering::SeqCst);
    let now_ms = shared.clock.now_ms();
    state.bgsave_started_ms.store(now_ms, Ordering::Relaxed);
    let (counts, (moment, repl)) = mark_every_shard(shared, now_ms, || {
        let moment = at_the_moment();
        (moment, repl_info(shared))
    });
    let (done, bytes) = oneshot::channel();
    let worker = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("tally-sync".into())
        .spawn(move || {
            lower_priority(WriterPriority::Niced);
            let mut file = Vec::new();
            // A replica that went away waits for nothing: the write stops,
            // as Redis kills a child whose replicas are all gone.
            let result = write_snapshot(
                &worker,
                &mut file,
                &counts,
                now_ms,
                false,
                repl.as_ref(),
                || done.is_closed(),
            );
            finish(&worker);
            let _ = done.send(result.map(|_| file));
        });
    if spawned.is_err() {
        // The sender went with the closure: the receiver reports the error.
        finish(shared);
    }
    Some((bytes, moment))
}

/// The shards stop keeping snapshot values, and the next snapshot may
/// start (a BGSAVE scheduled meanwhile does).
fn finish(shared: &Arc<Shared>) {
    cancel_snapshots(&shared.store);
    let state = &shared.persistence;
    state.bgsave_in_progress.store(false, Ordering::SeqCst);
    state.snapshot_busy.store(false, Ordering::SeqCst);
    super::start_scheduled(shared);
}
