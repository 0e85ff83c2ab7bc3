//! The change feed: every change to the dataset, as the commands that make
//! it, in RESP, in the order the changes happened. The append-only file is
//! written from it (and replication will read it).
//!
//! Order is the whole point. A command's changes are appended while the
//! shard locks it changed things under are still held (see
//! `crate::persistence::aof`), and a key that expires is appended as `DEL`
//! by the shard that drops it, under its own lock; so two changes to one
//! key always reach the feed in the order they reached the key. Changes to
//! different shards may interleave in any order, which cannot change what
//! a replay produces. The feed's own mutex is the innermost lock of the
//! server: nothing is locked while it is held.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

/// A command as propagated: its arguments, the name first.
pub type Argv = Vec<Vec<u8>>;

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
}

impl Pending {
    fn end(&self) -> u64 {
        self.taken + self.bytes.len() as u64
    }

    /// SELECTs `db` in the stream unless it is selected already.
    fn select(&mut self, db: usize) {
        if self.selected != Some(db) {
            let number = db.to_string();
            encode(&mut self.bytes, &[b"SELECT", number.as_bytes()]);
            self.selected = Some(db);
        }
    }
}

/// The change feed (one per store).
#[derive(Default)]
pub struct Feed {
    active: AtomicBool,
    pending: Mutex<Pending>,
}

impl Feed {
    /// True while changes are recorded (`appendonly yes`).
    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Starts or stops recording. Callers switch it with every shard locked,
    /// so that the switch falls between two changes.
    pub fn set_active(&self, on: bool) {
        self.active.store(on, Ordering::Release);
    }

    /// Appends one change made of `commands` in database `db` and returns
    /// the stream position after it. Several commands are one atomic change
    /// (a transaction's, a script's effects) and are wrapped in MULTI/EXEC,
    /// as Redis 7.0 propagates them; one command is not.
    pub fn append(&self, commands: &[(usize, Argv)]) -> u64 {
        let mut pending = self.pending.lock();
        let wrap = commands.len() > 1;
        if wrap {
            // As Redis: MULTI goes to the first command's database, so its
            // SELECT comes before the MULTI.
            pending.select(commands[0].0);
            encode(&mut pending.bytes, &[b"MULTI"]);
        }
        for (db, argv) in commands {
            pending.select(*db);
            encode(&mut pending.bytes, argv);
        }
        if wrap {
            encode(&mut pending.bytes, &[b"EXEC"]);
        }
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
