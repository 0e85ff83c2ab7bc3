//! The feed's replication side: the stream replicas are sent, its offset,
//! the backlog a replica that lost its link continues from, and the
//! replication ids that say which history the offset counts in.
//!
//! A server that is a master writes its own changes into the stream. A
//! server that follows a master writes none of its own: it relays the
//! master's stream byte for byte ([`Feed::relay`]), so that its offset is
//! the master's and its replicas, and its backlog, hold what the master
//! sent. That is what lets a replica promoted after a failover serve the
//! other replicas a `+CONTINUE` instead of a full resynchronization.
//!
//! The ids follow Redis's PSYNC2: `replid` names the history the offset
//! counts in; after a promotion the old id stays valid as `replid2` up to
//! `second_offset`, the first byte the promoted server did not get from
//! its old master.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::{encode, Feed};

/// Where the replication stream goes: one replica's output queue.
pub trait StreamSink: Send + Sync {
    /// Queues `bytes` for the replica; false once it is gone (its
    /// connection closed, or cut at its output-buffer limit), and it is
    /// then dropped from the stream.
    fn push(&self, bytes: &Bytes) -> bool;
    /// False once the replica is gone.
    fn alive(&self) -> bool;
}

/// A replication id as Redis writes one: 40 hex characters.
pub type ReplId = String;

/// The id no history has (`master_replid2` before any promotion).
pub const NO_REPLID: &str = "0000000000000000000000000000000000000000";

/// The replication stream: what every attached replica is sent, and the
/// backlog of its last bytes that a replica which lost its link for a
/// moment continues from (PSYNC's `+CONTINUE`).
pub(super) struct Replication {
    /// The database the stream has SELECTed (`None` right after a replica
    /// attached: it starts from a snapshot, in database 0).
    pub(super) selected: Option<usize>,
    /// Bytes of the stream so far: the master replication offset.
    offset: u64,
    /// The history `offset` counts in.
    replid: ReplId,
    /// The history this server had before its last promotion, valid up to
    /// `second_offset` (Redis's replid2 and second_replid_offset; -1:
    /// none).
    replid2: ReplId,
    second_offset: i64,
    /// True while this server follows a master: the stream is the
    /// master's, relayed, and nothing of its own goes into it.
    following: bool,
    /// The attached replicas.
    sinks: Vec<Arc<dyn StreamSink>>,
    /// Stream bytes not yet handed to the replicas: they go in one piece
    /// per connection batch ([`Feed::flush_replicas`]) rather than one
    /// per change, as Redis writes to its replicas once per event-loop
    /// turn. Already counted in `offset` and in the backlog.
    unsent: Vec<u8>,
    /// The stream's last bytes, up to `backlog_size`, once a replica has
    /// attached or a master was followed (`None` before, and after
    /// `repl-backlog-ttl` without a replica).
    backlog: Option<VecDeque<u8>>,
    /// `repl-backlog-size`.
    backlog_size: usize,
    /// When the last replica went (unix ms), 0 while one is attached.
    alone_since_ms: u64,
}

impl Default for Replication {
    fn default() -> Replication {
        Replication {
            selected: None,
            offset: 0,
            replid: crate::util::random_hex_id(),
            replid2: NO_REPLID.to_string(),
            second_offset: -1,
            following: false,
            sinks: Vec::new(),
            unsent: Vec::new(),
            backlog: None,
            backlog_size: 1024 * 1024,
            alone_since_ms: 0,
        }
    }
}

/// The smallest backlog Redis keeps, whatever `repl-backlog-size` says.
const BACKLOG_MIN: usize = 16 * 1024;

impl Replication {
    /// Sends this server's own `bytes` to every replica; nothing while it
    /// follows a master, whose stream is relayed instead (Redis's
    /// replicationFeedSlaves returns at once on a replica).
    pub(super) fn send(&mut self, bytes: &[u8]) {
        if !self.following {
            self.stream(bytes);
        }
    }

    /// Adds `bytes` to the stream: the offset, the backlog, and what the
    /// replicas are sent next.
    fn stream(&mut self, bytes: &[u8]) {
        self.offset += bytes.len() as u64;
        if let Some(backlog) = &mut self.backlog {
            backlog.extend(bytes);
        }
        self.trim_backlog();
        if !self.sinks.is_empty() {
            self.unsent.extend_from_slice(bytes);
        }
    }

    /// Hands the unsent bytes to every replica, dropping those that are
    /// gone.
    fn flush_sinks(&mut self) {
        if self.unsent.is_empty() {
            return;
        }
        let bytes = Bytes::from(std::mem::take(&mut self.unsent));
        self.sinks.retain(|sink| sink.push(&bytes));
    }

    /// Drops every replica from the stream, and what they were not sent.
    fn drop_sinks(&mut self) {
        self.sinks.clear();
        self.unsent.clear();
    }

    /// Sends one command that is not a change (PING, REPLCONF GETACK) to
    /// the replicas at once, if there are any.
    fn send_command(&mut self, argv: &[&[u8]]) {
        if !self.sinks.is_empty() {
            let mut bytes = Vec::new();
            encode(&mut bytes, argv);
            self.send(&bytes);
            self.flush_sinks();
        }
    }

    /// Drops the backlog's oldest bytes past `backlog_size`.
    fn trim_backlog(&mut self) {
        if let Some(backlog) = &mut self.backlog {
            let excess = backlog.len().saturating_sub(self.backlog_size);
            backlog.drain(..excess);
        }
    }

    /// The offset of the backlog's first byte (1 for the stream's first).
    fn first_byte_offset(&self) -> u64 {
        let held = self.backlog.as_ref().map_or(0, |b| b.len()) as u64;
        self.offset + 1 - held
    }

    /// Starts a new history: the current id stays valid as the second up
    /// to the next byte (Redis's shiftReplicationId).
    fn shift_id(&mut self, new_id: ReplId) {
        self.replid2 = std::mem::replace(&mut self.replid, new_id);
        self.second_offset = self.offset as i64 + 1;
    }
}

/// What INFO replication shows of the backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BacklogInfo {
    /// `repl_backlog_active`.
    pub active: bool,
    /// `repl_backlog_size`.
    pub size: u64,
    /// `repl_backlog_first_byte_offset`.
    pub first_byte_offset: u64,
    /// `repl_backlog_histlen`.
    pub histlen: u64,
}

/// The replication ids and offset, as INFO replication shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    /// `master_replid`.
    pub replid: ReplId,
    /// `master_replid2`.
    pub replid2: ReplId,
    /// `master_repl_offset`.
    pub offset: u64,
    /// `second_repl_offset` (-1: none).
    pub second_offset: i64,
}

impl Feed {
    /// Attaches a replica to the replication stream and returns the
    /// replication id and offset it starts at. The caller holds every
    /// shard, so that the snapshot it sends holds exactly the changes
    /// before that offset; the stream then SELECTs afresh, as the replica
    /// starts in database 0.
    pub fn attach(&self, sink: Arc<dyn StreamSink>) -> (ReplId, u64) {
        let mut pending = self.pending.lock();
        let replication = &mut pending.replication;
        // What the others were not sent yet is in this one's snapshot.
        replication.flush_sinks();
        replication.sinks.push(sink);
        replication.selected = None;
        replication.alone_since_ms = 0;
        if replication.backlog.is_none() {
            replication.backlog = Some(VecDeque::new());
        }
        self.replicating.store(true, Ordering::Release);
        (replication.replid.clone(), replication.offset)
    }

    /// Attaches a replica that asks to continue history `replid` from
    /// stream offset `from` (the first byte it lacks): the current id and
    /// the backlog's bytes from there, which the caller sends before
    /// anything the sink gets; or `None` when this server cannot continue
    /// it (another history, or bytes the backlog no longer holds: a full
    /// resynchronization then). A replica of this server's old master
    /// continues across a promotion: its history is `replid2` up to
    /// `second_offset`, as Redis's masterTryPartialResynchronization.
    pub fn continue_from(
        &self,
        sink: Arc<dyn StreamSink>,
        replid: &[u8],
        from: u64,
    ) -> Option<(ReplId, Vec<u8>)> {
        let mut pending = self.pending.lock();
        let replication = &mut pending.replication;
        let same_history = replid == replication.replid.as_bytes()
            || (replid == replication.replid2.as_bytes()
                && from as i64 <= replication.second_offset);
        if !same_history {
            return None;
        }
        let first = replication.first_byte_offset();
        let backlog = replication.backlog.as_ref()?;
        if from < first || from > replication.offset + 1 {
            return None;
        }
        let bytes: Vec<u8> = backlog.range((from - first) as usize..).copied().collect();
        // What the others were not sent yet is in these bytes.
        replication.flush_sinks();
        replication.sinks.push(sink);
        replication.alone_since_ms = 0;
        self.replicating.store(true, Ordering::Release);
        Some((replication.replid.clone(), bytes))
    }

    /// `repl-backlog-size` (Redis keeps at least 16 KiB).
    pub fn set_backlog_size(&self, size: u64) {
        let mut pending = self.pending.lock();
        let replication = &mut pending.replication;
        replication.backlog_size = (size.min(usize::MAX as u64) as usize).max(BACKLOG_MIN);
        replication.trim_backlog();
    }

    /// The backlog as INFO replication shows it.
    pub fn backlog_info(&self) -> BacklogInfo {
        let pending = self.pending.lock();
        let replication = &pending.replication;
        BacklogInfo {
            active: replication.backlog.is_some(),
            size: replication.backlog_size as u64,
            first_byte_offset: match &replication.backlog {
                Some(_) => replication.first_byte_offset(),
                None => 0,
            },
            histlen: replication.backlog.as_ref().map_or(0, |b| b.len()) as u64,
        }
    }

    /// The master replication offset: bytes of the replication stream so far.
    pub fn replication_offset(&self) -> u64 {
        self.pending.lock().replication.offset
    }

    /// The replication ids and offset.
    pub fn history(&self) -> History {
        let pending = self.pending.lock();
        let replication = &pending.replication;
        History {
            replid: replication.replid.clone(),
            replid2: replication.replid2.clone(),
            offset: replication.offset,
            second_offset: replication.second_offset,
        }
    }

    /// The history and the database the stream has SELECTed (0 when it
    /// has none), to keep in a snapshot: while following a master, or as
    /// a master with a backlog; `None` otherwise (Redis's
    /// rdbPopulateSaveInfo).
    pub fn history_to_save(&self) -> Option<(History, usize)> {
        let pending = self.pending.lock();
        let replication = &pending.replication;
        if !replication.following && replication.backlog.is_none() {
            return None;
        }
        Some((
            History {
                replid: replication.replid.clone(),
                replid2: replication.replid2.clone(),
                offset: replication.offset,
                second_offset: replication.second_offset,
            },
            replication.selected.unwrap_or(0),
        ))
    }

    /// Takes up the history a snapshot kept, at start, before any client
    /// (Redis's loadDataFromDisk). A replica's history is that one: it
    /// asks its master to continue it. A master starts a new history and
    /// keeps that one as the second, with an empty backlog from its
    /// offset, so its replicas that had everything continue with
    /// `+CONTINUE`.
    pub fn restore_history(&self, replid: ReplId, offset: u64) {
        let mut pending = self.pending.lock();
        let replication = &mut pending.replication;
        replication.offset = offset;
        if replication.following {
            replication.replid = replid;
        } else {
            replication.replid2 = replid;
            replication.second_offset = offset as i64 + 1;
        }
        replication.backlog = Some(VecDeque::new());
        replication.selected = None;
        self.replicating.store(true, Ordering::Release);
    }

    /// True while this server follows a master (its stream is relayed).
    pub fn following(&self) -> bool {
        self.following.load(Ordering::Acquire)
    }

    /// Asks every replica for its offset (`REPLCONF GETACK *` in the
    /// stream, as Redis sends it for WAIT: part of the stream, so counted
    /// in the offset). Not a change: the log does not get it.
    pub fn request_acks(&self) {
        let mut pending = self.pending.lock();
        pending
            .replication
            .send_command(&[b"REPLCONF", b"GETACK", b"*"]);
    }

    /// Every `repl-ping-replica-period`: a PING to the replicas, so that
    /// an idle stream does not look dead to them (not a change: the log
    /// does not get it; a server following a master relays the master's
    /// instead); and, once no replica has been attached for `ttl_secs`
    /// (`repl-backlog-ttl`, 0: never), a master frees the backlog and no
    /// longer records changes for replicas (the next one attaches with
    /// every shard held and turns that on again). A replica keeps its
    /// backlog, as Redis's does: it is what it serves its master's other
    /// replicas from once promoted.
    pub fn replication_tick(&self, now_ms: u64, ttl_secs: u64) {
        let mut pending = self.pending.lock();
        let replication = &mut pending.replication;
        replication.sinks.retain(|sink| sink.alive());
        if !replication.sinks.is_empty() {
            replication.send_command(&[b"PING"]);
            return;
        }
        if replication.backlog.is_none() || replication.following {
            return;
        }
        if replication.alone_since_ms == 0 {
            replication.alone_since_ms = now_ms.max(1);
        } else if ttl_secs > 0
            && now_ms.saturating_sub(replication.alone_since_ms) >= ttl_secs.saturating_mul(1000)
        {
            replication.backlog = None;
            replication.alone_since_ms = 0;
            self.replicating.store(false, Ordering::Release);
        }
    }

    /// This server now holds a master's snapshot of history `replid` at
    /// `offset` (a full resynchronization) and follows its stream: the
    /// offset, ids and backlog start there, and its own replicas, whose
    /// history this ends, are dropped from the stream (the caller closes
    /// their connections; they resynchronize).
    pub fn follow_new_history(&self, replid: ReplId, offset: u64) {
        let mut pending = self.pending.lock();
        let replication = &mut pending.replication;
        replication.replid = replid;
        replication.replid2 = NO_REPLID.to_string();
        replication.second_offset = -1;
        replication.offset = offset;
        replication.drop_sinks();
        replication.backlog = Some(VecDeque::new());
        replication.selected = None;
    }

    /// This server continues its master's stream from where it is (PSYNC
    /// `+CONTINUE`). A master that names another id than ours was
    /// promoted: ours stays valid as the second id, as Redis's replica
    /// does, and true is returned: its own replicas must reconnect to
    /// learn the new id (the caller closes them).
    pub fn follow_continued(&self, replid: Option<ReplId>) -> bool {
        let mut pending = self.pending.lock();
        let replication = &mut pending.replication;
        if replication.backlog.is_none() {
            replication.backlog = Some(VecDeque::new());
        }
        match replid {
            Some(id) if id != replication.replid => {
                replication.shift_id(id);
                replication.drop_sinks();
                true
            }
            _ => false,
        }
    }

    /// Relays `bytes` of the master's stream, already applied here, to
    /// this server's replicas and backlog. The caller holds the relay
    /// order ([`Feed::relay_order`]) across applying and relaying.
    pub fn relay(&self, bytes: &[u8]) {
        self.pending.lock().replication.stream(bytes);
        self.unflushed.store(true, Ordering::Release);
    }

    /// Hands what the stream gained since the last call to the replicas,
    /// in one piece: called after each connection batch (and by the
    /// stats sampler every 100 ms, for changes made elsewhere).
    #[inline]
    pub fn flush_replicas(&self) {
        if self.unflushed.load(Ordering::Acquire) && self.unflushed.swap(false, Ordering::AcqRel) {
            self.pending.lock().replication.flush_sinks();
        }
    }

    /// Held across applying a piece of the master's stream and relaying
    /// it, and by a replica of this server taking its snapshot: so no
    /// snapshot falls between the two, which would give that replica the
    /// piece twice (in the snapshot and in the stream).
    pub fn relay_order(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.relay_order.lock()
    }

    /// This server follows a master from now on (REPLICAOF host port):
    /// nothing of its own goes into the stream any more. Its replicas stay
    /// attached: the master may continue this server's history.
    pub fn start_following(&self) {
        self.pending.lock().replication.following = true;
        self.following.store(true, Ordering::Release);
    }

    /// This server stops following a master and is one itself (REPLICAOF
    /// NO ONE): a new history begins, the old one valid up to here, so
    /// the old master's other replicas continue from this server with
    /// `+CONTINUE`. Its replicas are dropped from the stream and told the
    /// new id when they reconnect (the caller closes them), and the
    /// stream SELECTs afresh.
    pub fn stop_following(&self) {
        let keeps_backlog = {
            let mut pending = self.pending.lock();
            let replication = &mut pending.replication;
            replication.following = false;
            self.following.store(false, Ordering::Release);
            replication.shift_id(crate::util::random_hex_id());
            replication.drop_sinks();
            replication.selected = None;
            replication.alone_since_ms = 0;
            replication.backlog.is_some()
        };
        if keeps_backlog {
            // Its own changes go into the backlog from the first one on:
            // the old master's other replicas continue from it.
            self.start_replicating();
        }
    }
}
