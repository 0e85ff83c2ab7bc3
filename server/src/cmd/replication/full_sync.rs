//! The master's side of a replica's first step: SYNC and PSYNC, answered
//! with `+CONTINUE` and the backlog's bytes, or with a full
//! resynchronization (the snapshot of one moment written in the
//! background, after the one in progress when another is), then the
//! replication stream.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::become_master;
use crate::cmd::args::{is, parse_i64};
use crate::cmd::{After, Ctx, Snapshot};
use crate::master_link::LinkState;
use crate::persistence::{replica_snapshot, snapshot};
use crate::resp::Reply;
use crate::state::Shared;

/// SYNC: the old form of the first step. The snapshot of this moment as
/// `$<len>\r\n` and the file, then the stream, as Redis serves a
/// pre-PSYNC replica (`redis-cli --replica` is one); after `REPLCONF
/// rdb-only 1` (`redis-cli --rdb`) the snapshot only, and the connection
/// closes.
pub fn sync(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if !ctx.client.info.replica.rdb_only.load(Ordering::Relaxed) {
        return stream_to(ctx, None, argv);
    }
    // A full sync for Redis too (INFO's sync_full), though no stream
    // follows.
    ctx.shared.stats.sync_full.fetch_add(1, Ordering::Relaxed);
    let turn = QueuedSync {
        sink: None,
        psync: false,
    };
    if let Some((bytes, _)) = start_full_sync(ctx.shared, &turn) {
        ctx.client.then(After::SendSnapshot {
            snapshot: Snapshot::Started(bytes),
            close: true,
        });
        return Reply::Nothing;
    }
    if ctx.shared.itself.get().is_some() {
        // Another snapshot is being written: this one waits for it.
        ctx.client.then(After::SendSnapshot {
            snapshot: Snapshot::Queued(turn),
            close: true,
        });
        return Reply::Nothing;
    }
    match snapshot::snapshot_bytes(ctx.shared) {
        Ok(file) => {
            let mut out = format!("${}\r\n", file.len()).into_bytes();
            out.extend_from_slice(&file);
            ctx.client.then(After::Close);
            Reply::Raw(out)
        }
        Err(e) => Reply::error_bytes(format!("ERR {e}").into_bytes()),
    }
}

/// The snapshot of this moment written in the background
/// (`replica_snapshot`), with `at_the_moment` run at the moment; None when
/// the shards' one snapshot is taken (a BGSAVE, a rewrite, another
/// replica's sync), or the server is not started (a test's bare state).
fn snapshot_in_background<T>(
    shared: &Shared,
    at_the_moment: impl FnOnce() -> T,
) -> Option<(replica_snapshot::SnapshotBytes, T)> {
    let shared = shared.itself.get().and_then(std::sync::Weak::upgrade)?;
    replica_snapshot::in_background(&shared, at_the_moment)
}

/// PSYNC replicationid offset: a replica asks for the replication stream.
/// One that was streaming from this server (its replication id) and lacks
/// only what the backlog still holds continues: `+CONTINUE <replid>`,
/// then those bytes and the stream. Any other gets a full
/// resynchronization: `+FULLRESYNC <replid> <offset>`, then the snapshot
/// of that moment (the stream that follows starts exactly after it),
/// written in the background as BGSAVE writes its file (after the one in
/// progress, when another is), then the stream.
/// The stream is written as the connection's output like a monitor's
/// lines, cut at `client-output-buffer-limit replica`; the replica's
/// REPLCONF ACKs are read and get no reply.
pub fn psync(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    stream_to(ctx, Some((argv[1], argv[2])), argv)
}

/// A replica's request for the stream: PSYNC's (`asked`: the history and
/// offset it has, `?` for none), or the old SYNC's (`None`), which gets
/// the snapshot without the `+FULLRESYNC` line before it, as Redis's
/// pre-PSYNC replicas do (`redis-cli --replica` is one).
fn stream_to(ctx: &mut Ctx<'_>, asked: Option<(&[u8], &[u8])>, argv: &[&[u8]]) -> Reply {
    if ctx.client.monitor.is_some() {
        return Reply::error("ERR PSYNC on a connection that already streams");
    }
    let link = &ctx.shared.master_link;
    // A master handing over with FAILOVER asks its replica to take over
    // the history they share, and continues it as the replica's replica.
    if argv.len() > 3 && is(argv[3], "failover") {
        tracing::warn!(
            "Failover request received for replid {}.",
            String::from_utf8_lossy(argv[1])
        );
        if !link.is_replica() {
            return Reply::error("ERR PSYNC FAILOVER can't be sent to a master.");
        }
        let replid = ctx.shared.store.feed().history().replid;
        if !argv[1].eq_ignore_ascii_case(replid.as_bytes()) {
            return Reply::error("ERR PSYNC FAILOVER replid must match my replid.");
        }
        become_master(ctx.shared);
        tracing::info!(
            "MASTER MODE enabled (failover request from {})",
            ctx.client.info.addr
        );
    }
    if ctx.shared.failover.stage() != crate::failover::Stage::None {
        return Reply::error("NOMASTERLINK Can't SYNC while failing over");
    }
    if link.is_replica() && link.state() != LinkState::Connected {
        // Redis's replica serves no replica of its own until it has its
        // master's data.
        return Reply::error("NOMASTERLINK Can't SYNC while not connected with my master");
    }
    let mode = ctx.shared.monitors.replica_queue(ctx.client.info.clone());
    let sink: Arc<dyn crate::store::feed::StreamSink> = mode.sink.clone();
    let feed = ctx.shared.store.feed();
    let continued = asked.filter(|(replid, _)| *replid != b"?");
    if let Some((replid, offset)) = continued {
        if let Some(from) = parse_i64(offset).filter(|o| *o >= 0) {
            if let Some((replid, backlog)) = feed.continue_from(sink.clone(), replid, from as u64) {
                let mut out = format!("+CONTINUE {replid}\r\n").into_bytes();
                out.extend_from_slice(&backlog);
                become_replica(ctx, mode);
                ctx.shared
                    .stats
                    .sync_partial_ok
                    .fetch_add(1, Ordering::Relaxed);
                return Reply::Raw(out);
            }
        }
    }
    if continued.is_some() {
        ctx.shared
            .stats
            .sync_partial_err
            .fetch_add(1, Ordering::Relaxed);
    }
    // Counted when asked for, as Redis counts it, whenever it starts.
    ctx.shared.stats.sync_full.fetch_add(1, Ordering::Relaxed);
    feed.start_replicating();
    let turn = QueuedSync {
        sink: Some(sink.clone()),
        psync: asked.is_some(),
    };
    // On a replica the snapshot pauses the relay of its master's stream
    // for its moment, so no piece of it falls between the two.
    let background = match start_full_sync(ctx.shared, &turn) {
        Some((bytes, line)) => Some((Snapshot::Started(bytes), Reply::Raw(line))),
        // The shards' one snapshot is taken (another replica's sync, a
        // BGSAVE, a rewrite): the replica waits for it to end, then gets
        // one of its own, as a Redis replica that cannot attach to the
        // running child waits for the next (newlines keep its link alive
        // until `+FULLRESYNC`), rather than every client waiting for a
        // snapshot written with every shard held.
        None if ctx.shared.itself.get().is_some() => Some((Snapshot::Queued(turn), Reply::Nothing)),
        None => None,
    };
    if let Some((snapshot, reply)) = background {
        become_replica(ctx, mode);
        ctx.client
            .info
            .replica
            .awaits_snapshot
            .store(true, Ordering::Relaxed);
        ctx.client.then(After::SendSnapshot {
            snapshot,
            close: false,
        });
        return reply;
    }
    match snapshot::snapshot_bytes_with(ctx.shared, || feed.attach(sink)) {
        Ok((file, (replid, offset))) => {
            let mut out = match asked {
                Some(_) => format!("+FULLRESYNC {replid} {offset}\r\n${}\r\n", file.len()),
                None => format!("${}\r\n", file.len()),
            }
            .into_bytes();
            out.extend_from_slice(&file);
            become_replica(ctx, mode);
            Reply::Raw(out)
        }
        Err(e) => Reply::error_bytes(format!("ERR {e}").into_bytes()),
    }
}

/// A replica's full resynchronization waiting for the shards' snapshot to
/// be free: the queue its stream goes to (none for `redis-cli --rdb`,
/// which wants the snapshot alone), and whether it asked with PSYNC (then
/// `+FULLRESYNC` comes first).
pub struct QueuedSync {
    sink: Option<Arc<dyn crate::store::feed::StreamSink>>,
    psync: bool,
}

/// Starts `turn`'s full resynchronization if the shards' snapshot is
/// free: the replica's queue attached to the stream at the snapshot's
/// moment, the snapshot written in the background. Returns its bytes to
/// come and what goes before them (`+FULLRESYNC <replid> <offset>` for
/// PSYNC); None when the snapshot is taken.
pub fn start_full_sync(
    shared: &Shared,
    turn: &QueuedSync,
) -> Option<(replica_snapshot::SnapshotBytes, Vec<u8>)> {
    let feed = shared.store.feed();
    let Some(sink) = &turn.sink else {
        // The snapshot alone: nothing attached.
        return snapshot_in_background(shared, || ()).map(|(bytes, ())| (bytes, Vec::new()));
    };
    // Again for a replica that waited: the last replica gone meanwhile
    // turned recording off.
    feed.start_replicating();
    let (bytes, (replid, offset)) = snapshot_in_background(shared, || feed.attach(sink.clone()))?;
    let line = if turn.psync {
        format!("+FULLRESYNC {replid} {offset}\r\n").into_bytes()
    } else {
        Vec::new()
    };
    Some((bytes, line))
}

/// The connection streams from now on.
fn become_replica(ctx: &mut Ctx<'_>, mode: crate::monitor::MonitorMode) {
    ctx.client.monitor = Some(mode);
    ctx.client
        .info
        .replica
        .is_replica
        .store(true, Ordering::Relaxed);
}
