//! The change feed: every change to the dataset, as the commands that make
//! it, in RESP, in the order the changes happened. The append-only file is
//! written from it, and replicas are sent it (the replication stream,
//! whose byte count is the replication offset).
//!
//! Order is the whole point. A command's changes are appended while the
//! shard locks it changed things under are still held (see
//! `crate::persistence::aof`), and a key that expires is appended as `DEL`
//! by the shard that drops it, under its own lock; so two changes to one
//! key always reach the feed in the order they reached the key. Changes to
//! different shards may interleave in any order, which cannot change what
//! a replay produces. The feed's own mutex is the innermost lock of the
//! server: nothing is locked while it is held.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::Mutex;

/// A command as propagated: its arguments, the name first.
pub type Argv = Vec<Vec<u8>>;

/// Each thread's count of changes it is making unrecorded (see
/// [`Feed::unrecorded`]): one padded slot per thread, so that marking a
/// change costs no contention between workers.
#[repr(align(64))]
#[derive(Default)]
struct Slot(AtomicUsize);

/// Every live thread's slot (a thread's goes with it).
static SLOTS: Mutex<Vec<Weak<Slot>>> = Mutex::new(Vec::new());

thread_local! {
    static SLOT: Arc<Slot> = {
        let slot = Arc::new(Slot::default());
        let mut slots = SLOTS.lock();
        slots.retain(|s| s.strong_count() > 0);
        slots.push(Arc::downgrade(&slot));
        slot
    };
}

/// Where the replication stream goes: one replica's output queue.
pub trait StreamSink: Send + Sync {
    /// Queues `bytes` for the replica; false once it is gone (its
    /// connection closed, or cut at its output-buffer limit), and it is
    /// then dropped from the stream.
    fn push(&self, bytes: &Bytes) -> bool;
    /// False once the replica is gone.
    fn alive(&self) -> bool;
}

/// The replication stream: what every attached replica is sent, and the
/// backlog of its last bytes that a replica which lost its link for a
/// moment continues from (PSYNC's `+CONTINUE`).
struct Replication {
    /// The database the stream has SELECTed (`None` right after a replica
    /// attached: it starts from a snapshot, in database 0).
    selected: Option<usize>,
    /// Bytes sent since the server started: the master replication offset.
    offset: u64,
    /// The attached replicas.
    sinks: Vec<Arc<dyn StreamSink>>,
    /// The stream's last bytes, up to `backlog_size`, once a replica has
    /// attached (`None` before, and after `repl-backlog-ttl` without one).
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
            sinks: Vec::new(),
            backlog: None,
            backlog_size: 1024 * 1024,
            alone_since_ms: 0,
        }
    }
}

/// The smallest backlog Redis keeps, whatever `repl-backlog-size` says.
const BACKLOG_MIN: usize = 16 * 1024;

impl Replication {
    /// Sends `bytes` to every replica, dropping those that are gone, and
    /// keeps them in the backlog.
    fn send(&mut self, bytes: Vec<u8>) {
        self.offset += bytes.len() as u64;
        if let Some(backlog) = &mut self.backlog {
            backlog.extend(&bytes);
        }
        self.trim_backlog();
        let bytes = Bytes::from(bytes);
        self.sinks.retain(|sink| sink.push(&bytes));
    }

    /// Sends one command that is not a change (PING, REPLCONF GETACK) to
    /// the replicas, if there are any.
    fn send_command(&mut self, argv: &[&[u8]]) {
        if !self.sinks.is_empty() {
            let mut bytes = Vec::new();
            encode(&mut bytes, argv);
            self.send(bytes);
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

/// The feed's bytes not yet taken by the writer.
#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    /// The database the stream has SELECTed (`None` at the start of a
    /// file, so its first command is preceded by SELECT).
    selected: Option<usize>,
    /// Bytes taken by the writer so far: `taken + bytes.len()` is the
    /// stream position after everything appended (the writer counts how
    /// far it has written in the same unit).
    taken: u64,
    /// The replication stream, under the same lock so that replicas see
    /// changes in the order the log does.
    replication: Replication,
}

impl Pending {
    fn end(&self) -> u64 {
        self.taken + self.bytes.len() as u64
    }
}

/// Encodes one change into a stream whose SELECTed database is `selected`.
fn encode_change(out: &mut Vec<u8>, selected: &mut Option<usize>, commands: &[(usize, Argv)]) {
    let mut select = |out: &mut Vec<u8>, db: usize| {
        if *selected != Some(db) {
            let number = db.to_string();
            encode(out, &[b"SELECT", number.as_bytes()]);
            *selected = Some(db);
        }
    };
    let wrap = commands.len() > 1;
    if wrap {
        // As Redis: MULTI goes to the first command's database, so its
        // SELECT comes before the MULTI.
        select(out, commands[0].0);
        encode(out, &[b"MULTI"]);
    }
    for (db, argv) in commands {
        select(out, *db);
        encode(out, argv);
    }
    if wrap {
        encode(out, &[b"EXEC"]);
    }
}

/// The change feed (one per store).
#[derive(Default)]
pub struct Feed {
    /// Recording for the append-only file (`appendonly yes`).
    logging: AtomicBool,
    /// Recording for replicas (one attached since the server started).
    replicating: AtomicBool,
    pending: Mutex<Pending>,
}

impl Feed {
    /// True while changes are recorded, for the log or for replicas.
    #[inline]
    pub fn active(&self) -> bool {
        self.logging.load(Ordering::Acquire) || self.replicating.load(Ordering::Acquire)
    }

    /// True while changes are recorded for the append-only file.
    pub fn logging(&self) -> bool {
        self.logging.load(Ordering::Acquire)
    }

    /// Starts or stops recording for the append-only file. Callers switch
    /// it with every shard locked, so that the switch falls between two
    /// changes.
    pub fn set_active(&self, on: bool) {
        self.logging.store(on, Ordering::Release);
    }

    /// Runs `change` (a command that locks its own shards) unrecorded when
    /// nothing records changes now; `None`, without running it, when the
    /// feed is active (the caller then records it). A change that began
    /// unrecorded has finished before [`Feed::start_replicating`] returns,
    /// so none can slip past a replica's snapshot after it was taken.
    #[inline]
    pub fn unrecorded<R>(&self, change: impl FnOnce() -> R) -> Option<R> {
        SLOT.with(|slot| {
            // SeqCst on both sides: either this thread sees the feed
            // active, or start_replicating sees this slot taken.
            slot.0.fetch_add(1, Ordering::SeqCst);
            if self.logging.load(Ordering::SeqCst) || self.replicating.load(Ordering::SeqCst) {
                slot.0.fetch_sub(1, Ordering::Release);
                return None;
            }
            let result = change();
            slot.0.fetch_sub(1, Ordering::Release);
            Some(result)
        })
    }

    /// Turns recording for replicas on, then waits until every change that
    /// began unrecorded has finished: from then on every change is
    /// recorded, so a snapshot taken after this misses none of them. Call
    /// before taking the shards for a replica's snapshot, holding none.
    pub fn start_replicating(&self) {
        self.replicating.store(true, Ordering::SeqCst);
        let slots: Vec<Arc<Slot>> = SLOTS.lock().iter().filter_map(Weak::upgrade).collect();
        for slot in slots {
            while slot.0.load(Ordering::SeqCst) != 0 {
                std::thread::yield_now();
            }
        }
    }

    /// Attaches a replica to the replication stream and returns the
    /// replication offset it starts at. The caller holds every shard, so
    /// that the snapshot it sends holds exactly the changes before that
    /// offset; the stream then SELECTs afresh, as the replica starts in
    /// database 0.
    pub fn attach(&self, sink: Arc<dyn StreamSink>) -> u64 {
        let mut pending = self.pending.lock();
        let replication = &mut pending.replication;
        replication.sinks.push(sink);
        replication.selected = None;
        replication.alone_since_ms = 0;
        if replication.backlog.is_none() {
            replication.backlog = Some(VecDeque::new());
        }
        self.replicating.store(true, Ordering::Release);
        replication.offset
    }

    /// Attaches a replica that asks to continue from stream offset `from`
    /// (the first byte it lacks): the backlog's bytes from there, which
    /// the caller sends before anything the sink gets, or `None` when the
    /// backlog no longer holds them (a full resynchronization then).
    pub fn continue_from(&self, sink: Arc<dyn StreamSink>, from: u64) -> Option<Vec<u8>> {
        let mut pending = self.pending.lock();
        let replication = &mut pending.replication;
        let first = replication.first_byte_offset();
        let backlog = replication.backlog.as_ref()?;
        if from < first || from > replication.offset + 1 {
            return None;
        }
        let bytes: Vec<u8> = backlog.range((from - first) as usize..).copied().collect();
        replication.sinks.push(sink);
        replication.alone_since_ms = 0;
        Some(bytes)
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

    /// Asks every replica for its offset (`REPLCONF GETACK *` in the
    /// stream, as Redis sends it for WAIT: part of the stream, so counted
    /// in the offset). Not a change: the log does not get it.
    pub fn request_acks(&self) {
        let mut pending = self.pending.lock();
        pending
            .replication
            .send_command(&[b"REPLCONF", b"GETACK", b"*"]);
    }

    /// Every 10 s (Redis's `repl-ping-replica-period`): a PING to the
    /// replicas, so that an idle stream does not look dead to them (not a
    /// change: the log does not get it); and, once no replica has been
    /// attached for `ttl_secs` (`repl-backlog-ttl`, 0: never), the backlog
    /// is freed and changes are no longer recorded for replicas (the next
    /// one attaches with every shard held and turns that on again).
    pub fn replication_tick(&self, now_ms: u64, ttl_secs: u64) {
        let mut pending = self.pending.lock();
        let replication = &mut pending.replication;
        replication.sinks.retain(|sink| sink.alive());
        if !replication.sinks.is_empty() {
            replication.send_command(&[b"PING"]);
            return;
        }
        if replication.backlog.is_none() {
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

    /// Appends one change made of `commands` in database `db` and returns
    /// the log's position after it (0 when the log is off: nothing to wait
    /// for). Several commands are one atomic change (a transaction's, a
    /// script's effects) and are wrapped in MULTI/EXEC, as Redis 7.0
    /// propagates them; one command is not.
    pub fn append(&self, commands: &[(usize, Argv)]) -> u64 {
        let mut pending = self.pending.lock();
        if self.replicating.load(Ordering::Acquire) {
            let replication = &mut pending.replication;
            let mut bytes = Vec::new();
            encode_change(&mut bytes, &mut replication.selected, commands);
            replication.send(bytes);
        }
        if !self.logging.load(Ordering::Acquire) {
            return 0;
        }
        let Pending {
            bytes, selected, ..
        } = &mut *pending;
        encode_change(bytes, selected, commands);
        pending.end()
    }

    /// Appends the deletion of a key that expired (Redis propagates `DEL`
    /// unless `lazyfree-lazy-expire`, which tally does not have).
    pub fn append_expired(&self, db: usize, key: &[u8]) -> u64 {
        self.append(&[(db, vec![b"DEL".to_vec(), key.to_vec()])])
    }

    /// Takes the bytes appended so far, and the stream position after them.
    pub fn take(&self) -> (Vec<u8>, u64) {
        let mut pending = self.pending.lock();
        let end = pending.end();
        let bytes = std::mem::take(&mut pending.bytes);
        pending.taken = end;
        (bytes, end)
    }

    /// Puts bytes the writer took but could not write back in front, to be
    /// written again later.
    pub fn give_back(&self, mut bytes: Vec<u8>) {
        let mut pending = self.pending.lock();
        pending.taken -= bytes.len() as u64;
        bytes.extend_from_slice(&pending.bytes);
        pending.bytes = bytes;
    }

    /// Takes the bytes appended so far (for the file being closed) and
    /// makes the stream start afresh: the next change begins with SELECT, as
    /// a new file must.
    pub fn rotate(&self) -> (Vec<u8>, u64) {
        let taken = self.take();
        self.pending.lock().selected = None;
        taken
    }

    /// The stream position after everything appended so far.
    pub fn end(&self) -> u64 {
        self.pending.lock().end()
    }

    /// Bytes appended and not yet taken (INFO `aof_buffer_length`).
    pub fn buffered(&self) -> usize {
        self.pending.lock().bytes.len()
    }
}

/// Appends one command as a RESP array of bulk strings, as Redis writes
/// commands to its AOF.
pub fn encode<A: AsRef<[u8]>>(out: &mut Vec<u8>, argv: &[A]) {
    out.push(b'*');
    out.extend_from_slice(argv.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for arg in argv {
        let arg = arg.as_ref();
        out.push(b'$');
        out.extend_from_slice(arg.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}
