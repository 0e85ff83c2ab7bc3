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

mod replication;

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use replication::Replication;
pub use replication::{BacklogInfo, History, ReplId, StreamSink, NO_REPLID};

/// A command as propagated: its arguments, the name first.
pub type Argv = Vec<Vec<u8>>;

/// The largest buffer a [`Change`] keeps for the next once cleared.
const CHANGE_KEPT_MAX: usize = 64 * 1024;

/// One change as the feed takes it: its commands, each encoded in RESP
/// with the database it runs in, back to back in one buffer. A client
/// keeps one and reuses it, so that recording a write allocates nothing
/// once the buffer has grown to its size.
#[derive(Default, Debug)]
pub struct Change {
    bytes: Vec<u8>,
    /// Each command's database and where its bytes end.
    commands: Vec<(usize, usize)>,
}

impl Change {
    /// A change of the one command `argv` in database `db`.
    pub fn one<A: AsRef<[u8]>>(db: usize, argv: &[A]) -> Change {
        let mut change = Change::default();
        change.push(db, argv);
        change
    }

    /// Adds the command `argv`, run in database `db`.
    pub fn push<A: AsRef<[u8]>>(&mut self, db: usize, argv: &[A]) {
        encode(&mut self.bytes, argv);
        self.commands.push((db, self.bytes.len()));
    }

    /// Moves `other`'s commands to the end of this change.
    pub fn append(&mut self, other: &mut Change) {
        let base = self.bytes.len();
        self.bytes.extend_from_slice(&other.bytes);
        self.commands
            .extend(other.commands.iter().map(|&(db, end)| (db, base + end)));
        other.clear();
    }

    /// Forgets every command, keeping the buffers unless a large change
    /// grew them past [`CHANGE_KEPT_MAX`]: a client that once wrote a
    /// 512 MB value must not hold its copy for good.
    pub fn clear(&mut self) {
        if self.bytes.capacity() > CHANGE_KEPT_MAX {
            self.bytes = Vec::new();
        } else {
            self.bytes.clear();
        }
        if self.commands.capacity() > CHANGE_KEPT_MAX / 64 {
            self.commands = Vec::new();
        } else {
            self.commands.clear();
        }
    }

    /// True when the change has no command.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// Each command's database and RESP bytes, in order.
    pub fn commands(&self) -> impl Iterator<Item = (usize, &[u8])> {
        let starts = std::iter::once(0).chain(self.commands.iter().map(|&(_, end)| end));
        self.commands
            .iter()
            .zip(starts)
            .map(|(&(db, end), start)| (db, &self.bytes[start..end]))
    }
}

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
    /// Where a change is encoded for the replication stream before it is
    /// copied to the backlog and the replicas' bytes: kept, so that a
    /// write allocates nothing for it.
    scratch: Vec<u8>,
}

impl Pending {
    fn end(&self) -> u64 {
        self.taken + self.bytes.len() as u64
    }
}

/// Encodes one change into a stream whose SELECTed database is `selected`.
fn encode_change(out: &mut Vec<u8>, selected: &mut Option<usize>, change: &Change) {
    let mut select = |out: &mut Vec<u8>, db: usize| {
        if *selected != Some(db) {
            let number = db.to_string();
            encode(out, &[b"SELECT", number.as_bytes()]);
            *selected = Some(db);
        }
    };
    let wrap = change.commands.len() > 1;
    if wrap {
        // As Redis: MULTI goes to the first command's database, so its
        // SELECT comes before the MULTI.
        select(out, change.commands[0].0);
        encode(out, &[b"MULTI"]);
    }
    for (db, command) in change.commands() {
        select(out, db);
        out.extend_from_slice(command);
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
    /// Following a master: its stream is relayed, and this server's own
    /// writes, made only where replicas may write, are not sent on.
    following: AtomicBool,
    /// See [`Feed::relay_order`].
    relay_order: Mutex<()>,
    /// The stream has bytes the replicas were not handed yet.
    unflushed: AtomicBool,
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

    /// Appends one change and returns the log's position after it (0 when
    /// the log is off: nothing to wait for). Several commands are one
    /// atomic change (a transaction's, a script's effects) and are wrapped
    /// in MULTI/EXEC, as Redis 7.0 propagates them; one command is not.
    pub fn append(&self, change: &Change) -> u64 {
        let mut pending = self.pending.lock();
        if self.replicating.load(Ordering::Acquire) {
            let Pending {
                replication,
                scratch,
                ..
            } = &mut *pending;
            scratch.clear();
            encode_change(scratch, &mut replication.selected, change);
            replication.send(scratch);
            self.unflushed.store(true, Ordering::Release);
        }
        if !self.logging.load(Ordering::Acquire) {
            return 0;
        }
        let Pending {
            bytes, selected, ..
        } = &mut *pending;
        encode_change(bytes, selected, change);
        pending.end()
    }

    /// Appends the deletion of a key that expired (Redis propagates `DEL`
    /// unless `lazyfree-lazy-expire`, which tally does not have).
    pub fn append_expired(&self, db: usize, key: &[u8]) -> u64 {
        self.append(&Change::one(db, &[b"DEL", key]))
    }

    /// Appends the purge of a hash's due fields: the `HDEL` Redis
    /// propagates for them.
    pub fn append_fields_expired(&self, db: usize, key: &[u8], fields: &[Box<[u8]>]) -> u64 {
        let mut argv: Vec<&[u8]> = Vec::with_capacity(2 + fields.len());
        argv.push(b"HDEL");
        argv.push(key);
        argv.extend(fields.iter().map(|f| &**f));
        self.append(&Change::one(db, &argv))
    }

    /// Takes the bytes appended so far, and the stream position after them.
    pub fn take(&self) -> (Vec<u8>, u64) {
        let mut empty = Vec::new();
        let end = self.swap_pending(&mut empty);
        (empty, end)
    }

    /// Exchanges the bytes appended so far for `buffer`, which must be
    /// empty (the writer's, already written: the feed then fills memory it
    /// had before), and returns the stream position after them.
    pub fn swap_pending(&self, buffer: &mut Vec<u8>) -> u64 {
        debug_assert!(buffer.is_empty());
        let mut pending = self.pending.lock();
        let end = pending.end();
        std::mem::swap(&mut pending.bytes, buffer);
        pending.taken = end;
        end
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
/// commands to its AOF. Every write is encoded here while its shard locks
/// are held, so it allocates nothing beyond `out`'s growth.
pub fn encode<A: AsRef<[u8]>>(out: &mut Vec<u8>, argv: &[A]) {
    let size: usize = argv.iter().map(|a| a.as_ref().len() + 16).sum();
    out.reserve(size + 16);
    push_header(out, b'*', argv.len());
    for arg in argv {
        let arg = arg.as_ref();
        push_header(out, b'$', arg.len());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// `<kind><n>\r\n`, the number written without a heap allocation.
fn push_header(out: &mut Vec<u8>, kind: u8, n: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.push(kind);
    out.extend_from_slice(&digits[at..]);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::{encode, Change, Feed};

    #[test]
    fn commands_encode_as_resp_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        let long = vec![b'x'; 1234];
        encode(&mut out, &[&b"SET"[..], b"", &long]);
        let mut expected = b"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$1234\r\n".to_vec();
        expected.extend_from_slice(&long);
        expected.extend_from_slice(b"\r\n");
        assert_eq!(out, expected);
        out.clear();
        let ten: Vec<&[u8]> = vec![b"a"; 10];
        encode(&mut out, &ten);
        assert!(out.starts_with(b"*10\r\n$1\r\na\r\n"));
    }

    #[test]
    fn a_change_keeps_each_command_with_its_database() {
        let mut change = Change::one(0, &[&b"SET"[..], b"k", b"v"]);
        let mut other = Change::default();
        other.push(3, &[&b"INCR"[..], b"n"]);
        other.push(1, &[&b"DEL"[..], b"k"]);
        change.append(&mut other);
        assert!(other.is_empty());
        let commands: Vec<(usize, &[u8])> = change.commands().collect();
        assert_eq!(
            commands,
            [
                (0, &b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"[..]),
                (3, &b"*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n"[..]),
                (1, &b"*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n"[..]),
            ]
        );
        change.clear();
        assert!(change.is_empty());
        assert_eq!(change.commands().count(), 0);
    }

    #[test]
    fn a_cleared_change_keeps_a_small_buffer_and_frees_a_large_one() {
        let mut change = Change::one(0, &[&b"SET"[..], b"k", b"v"]);
        change.clear();
        let kept = change.bytes.capacity();
        assert!(kept > 0, "a small buffer is kept for the next change");
        change.push(
            0,
            &[&b"SET"[..], b"k", &vec![b'x'; super::CHANGE_KEPT_MAX][..]],
        );
        change.clear();
        assert_eq!(change.bytes.capacity(), 0, "a large buffer is freed");
    }

    #[test]
    fn a_change_of_several_commands_is_one_transaction_in_the_log() {
        let feed = Feed::default();
        feed.set_active(true);
        let mut change = Change::default();
        change.push(0, &[&b"INCR"[..], b"n"]);
        change.push(2, &[&b"DEL"[..], b"k"]);
        let end = feed.append(&change);
        let (bytes, taken) = feed.take();
        assert_eq!(taken, end);
        assert_eq!(
            String::from_utf8_lossy(&bytes),
            "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*1\r\n$5\r\nMULTI\r\n\
             *2\r\n$4\r\nINCR\r\n$1\r\nn\r\n\
             *2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n\
             *1\r\n$4\r\nEXEC\r\n"
        );
    }

    #[test]
    fn a_written_buffer_is_filled_again() {
        let feed = Feed::default();
        feed.set_active(true);
        let change = Change::one(0, &[&b"SET"[..], b"k", &[b'x'; 1000][..]]);
        let first_end = feed.append(&change);
        let mut buffer = Vec::new();
        assert_eq!(feed.swap_pending(&mut buffer), first_end);
        assert!(buffer.starts_with(b"*2\r\n$6\r\nSELECT"));
        let address = buffer.as_ptr();
        buffer.clear();
        // The written buffer goes back at the next exchange and is filled
        // there, so the one after gives it out again.
        let second_end = feed.append(&change);
        assert_eq!(feed.swap_pending(&mut buffer), second_end);
        buffer.clear();
        feed.append(&change);
        feed.swap_pending(&mut buffer);
        assert_eq!(buffer.as_ptr(), address);
        assert!(buffer.starts_with(b"*3\r\n$3\r\nSET"));
    }
}
