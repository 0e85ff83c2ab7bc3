//! Applying the master's stream: each command runs as the master's (the
//! master client of Redis: obeyed, not checked, never answered), then its
//! bytes are relayed to this server's own replicas and backlog, so that
//! the offset here is the master's. REPLCONF GETACK is answered with the
//! offset applied so far, and REPLCONF ACK goes to the master every
//! second, as Redis's replica sends it (WAIT and `min-replicas-to-write`
//! on the master count on it).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Buf;

use super::{send, MasterReader, MasterWriter};
use crate::catalog::flags;
use crate::clients::ClientInfo;
use crate::cmd::{self, ClientState, Ctx};
use crate::resp::{parse_frame, Frame, FrameLimits, Resume};
use crate::state::Shared;
use crate::util::is;

/// How often the replica tells the master how far it got.
const ACK_EVERY: Duration = Duration::from_secs(1);

/// Removes the master client from the client list when the link ends,
/// however it ends.
struct Registered<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.shared.clients.unregister(self.id);
    }
}

/// Applies the stream until the link fails, the master client is killed
/// (CLIENT KILL TYPE master), or the server stops.
pub(super) async fn apply(
    shared: &Arc<Shared>,
    mut reader: MasterReader,
    mut writer: MasterWriter,
    (peer, local): (SocketAddr, SocketAddr),
) -> Result<(), String> {
    let link = &shared.master_link;
    let feed = shared.store.feed();
    let info = Arc::new(ClientInfo::new(
        shared.clients.next_id(),
        peer,
        local,
        shared.clock.now_ms(),
    ));
    info.replica.is_master.store(true, Ordering::Relaxed);
    // The master is never refused for `maxclients`.
    let _ = shared.clients.register(info.clone(), usize::MAX);
    let _registered = Registered {
        shared,
        id: info.id,
    };
    let mut client = ClientState::new(info.clone(), true);
    client.master = true;
    client.db = link.stream_db.load(Ordering::Relaxed);
    let mut offset = feed.replication_offset();
    link.read_offset.store(offset as i64, Ordering::Relaxed);
    link.applied_offset.store(offset as i64, Ordering::Relaxed);
    let mut durable = DurableOffsets::default();
    send_ack(&mut writer, offset, durable.fsynced(shared)).await?;
    let mut acks = tokio::time::interval(ACK_EVERY);
    acks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut resume = Resume::default();
    // Stream bytes that came in the same reads as the snapshot's tail are
    // in the buffer already: they are applied now, not once more arrive.
    let mut unread = reader.buf.len();
    loop {
        if info.killed.load(Ordering::SeqCst) {
            return Err("the master client was killed".to_string());
        }
        if unread == 0 {
            tokio::select! {
                read = reader.read_more() => {
                    unread = read?;
                    link.last_io_ms.store(shared.clock.now_ms(), Ordering::Relaxed);
                }
                _ = acks.tick() => {
                    send_ack(&mut writer, offset, durable.fsynced(shared)).await?;
                    continue;
                }
                _ = info.kill_notify.notified() => continue,
            }
        }
        link.read_offset.fetch_add(unread as i64, Ordering::Relaxed);
        unread = 0;
        let applied = apply_buffered(shared, &mut client, &reader.buf, &mut resume, &mut offset)?;
        reader.buf.advance(applied.consumed);
        link.stream_db.store(client.db, Ordering::Relaxed);
        client.batch.flush(shared, info.id);
        durable.applied(shared, offset);
        for at in applied.acks_asked {
            send_ack(&mut writer, at, durable.fsynced(shared)).await?;
        }
    }
}

/// What one read's complete commands left.
struct Applied {
    /// Bytes of the buffer they took.
    consumed: usize,
    /// The offsets to acknowledge at once (one per REPLCONF GETACK).
    acks_asked: Vec<u64>,
}

/// Runs every complete command at the front of `buf`, relaying each one's
/// bytes after it ran, and advances `offset` past them.
fn apply_buffered(
    shared: &Shared,
    client: &mut ClientState,
    buf: &[u8],
    resume: &mut Resume,
    offset: &mut u64,
) -> Result<Applied, String> {
    let feed = shared.store.feed();
    let limits = FrameLimits {
        max_bulk_len: usize::MAX,
        unauthenticated: false,
    };
    let mut applied = Applied {
        consumed: 0,
        acks_asked: Vec::new(),
    };
    while applied.consumed < buf.len() {
        let start = applied.consumed;
        let frame = parse_frame(&buf[start..], limits, resume);
        let (argv, consumed): (Vec<&[u8]>, usize) = match &frame {
            Frame::Command { args, consumed } => (
                args.iter()
                    .map(|r| &buf[start + r.start..start + r.end])
                    .collect(),
                *consumed,
            ),
            Frame::Inline { args, consumed } => {
                (args.iter().map(|a| a.as_slice()).collect(), *consumed)
            }
            Frame::Empty { consumed } => (Vec::new(), *consumed),
            Frame::Incomplete => break,
            Frame::Error(message) => {
                return Err(format!("protocol error in the master's stream: {message}"));
            }
        };
        let end = start + consumed;
        // No replica of this server may take its snapshot between the
        // command and its relay (see `Feed::relay_order`).
        let order = feed.relay_order();
        if argv.len() >= 2 && is(argv[0], "replconf") && is(argv[1], "getack") {
            // Answered with what was applied before it, as Redis does.
            applied.acks_asked.push(*offset);
        } else if !argv.is_empty() {
            obey_despite_disk_errors(shared, &argv, shared.clock.now_ms())?;
            run_as_master(shared, client, &argv);
        }
        feed.relay(&buf[start..end]);
        drop(order);
        *offset += consumed as u64;
        shared
            .master_link
            .applied_offset
            .store(*offset as i64, Ordering::Relaxed);
        applied.consumed = end;
    }
    feed.flush_replicas();
    Ok(applied)
}

/// When the replica last logged that it applies writes it cannot persist.
static LAST_DISK_WARNING_MS: AtomicU64 = AtomicU64::new(0);

/// Redis's check before a replica obeys its master: while this server
/// cannot write to disk (a failed BGSAVE under
/// `stop-writes-on-bgsave-error`, or append-only file errors), a write
/// from the master is applied anyway under
/// `replica-ignore-disk-write-errors yes`, with a warning every 10 s.
/// Under `no`, Redis's default, the replica stops rather than hold data
/// it cannot persist: Redis panics; tally shuts down (the binary exits 1)
/// without applying the write, so what it saves on the way out is
/// the stream up to the write before.
fn obey_despite_disk_errors(shared: &Shared, argv: &[&[u8]], now_ms: u64) -> Result<(), String> {
    let unwritable = shared.persistence.writes_refused.load(Ordering::Relaxed)
        || shared.aof.write_failed.load(Ordering::Relaxed);
    if !unwritable {
        return Ok(());
    }
    let writes = cmd::resolve(argv).is_ok_and(|c| c.flags & flags::WRITE != 0);
    if !writes {
        return Ok(());
    }
    if shared.config.read().replica_ignore_disk_write_errors {
        let last = LAST_DISK_WARNING_MS.load(Ordering::Relaxed);
        if now_ms > last + 10_000
            && LAST_DISK_WARNING_MS
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                "Replica is applying a command even though it is unable to write to disk."
            );
        }
        return Ok(());
    }
    tracing::error!(
        "Replica was unable to write command to disk (replica-ignore-disk-write-errors no): shutting down."
    );
    shared.persistence.fatal.store(true, Ordering::SeqCst);
    shared.begin_shutdown();
    Err("unable to write the master's command to disk".to_string())
}

/// Runs one of the master's commands; its reply is dropped. A command
/// that panics is contained and logged, as a client's is: the stream goes
/// on (Redis would have crashed; the master's data is not at fault).
fn run_as_master(shared: &Shared, client: &mut ClientState, argv: &[&[u8]]) {
    let now_ms = shared.clock.now_ms();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::store::as_master_command(|| {
            let mut ctx = Ctx {
                shared,
                client: &mut *client,
                now_ms,
                held: None,
            };
            cmd::dispatch(&mut ctx, argv)
        })
    }));
    match outcome {
        Ok(crate::resp::Reply::Error(text)) => {
            let command = String::from_utf8_lossy(argv[0]);
            tracing::warn!(%command, "the master's command failed here: {}", String::from_utf8_lossy(&text));
        }
        Ok(_) => {}
        Err(_) => {
            let command = String::from_utf8_lossy(argv[0]);
            tracing::error!(%command, "the master's command panicked");
            shared.stats.panics.fetch_add(1, Ordering::Relaxed);
        }
    }
    client.after = cmd::After::Continue;
}

/// How far this replica's own append-only file has made the master's
/// stream durable, for REPLCONF ACK's FACK (Redis 7.2's WAITAOF). The
/// stream's commands go to this server's feed as they apply, so after
/// each read the feed's end is paired with the master offset applied; an
/// fsync past a pair's feed position makes its master offset durable.
#[derive(Default)]
struct DurableOffsets {
    /// (feed end, master offset) pairs not yet known durable, oldest first.
    pending: std::collections::VecDeque<(u64, u64)>,
    /// The latest master offset known durable.
    durable: u64,
}

/// Pairs kept at most; past this the newest replaces the last, which only
/// makes FACK later, never early.
const MAX_PENDING_PAIRS: usize = 1024;

impl DurableOffsets {
    /// Notes that the stream was applied up to `offset`.
    fn applied(&mut self, shared: &Shared, offset: u64) {
        if !shared.store.feed().logging() {
            return;
        }
        let pair = (shared.store.feed().end(), offset);
        if self.pending.len() >= MAX_PENDING_PAIRS {
            self.pending.pop_back();
        }
        self.pending.push_back(pair);
    }

    /// The master offset this replica's file has fsynced; `None` while it
    /// keeps no append-only file (no FACK then, as Redis sends none).
    fn fsynced(&mut self, shared: &Shared) -> Option<u64> {
        if !shared.store.feed().logging() {
            self.pending.clear();
            return None;
        }
        let synced = shared.aof.synced();
        while let Some(&(end, offset)) = self.pending.front() {
            if end > synced {
                break;
            }
            self.durable = offset;
            self.pending.pop_front();
        }
        Some(self.durable)
    }
}

/// REPLCONF ACK <offset> [FACK <offset its append-only file fsynced>].
async fn send_ack(
    writer: &mut MasterWriter,
    offset: u64,
    fsynced: Option<u64>,
) -> Result<(), String> {
    let offset = offset.to_string();
    match fsynced {
        Some(fsynced) => {
            let fsynced = fsynced.to_string();
            send(
                writer,
                &[
                    b"REPLCONF",
                    b"ACK",
                    offset.as_bytes(),
                    b"FACK",
                    fsynced.as_bytes(),
                ],
            )
            .await
        }
        None => send(writer, &[b"REPLCONF", b"ACK", offset.as_bytes()]).await,
    }
}
