//! Each worker thread's own index of the scripts it has run, by EVAL's
//! body and by EVALSHA's SHA1, so that the common call finds its script
//! without the shared cache.
//!
//! The shared cache is a lock and each script an `Arc`: taking the lock
//! and a reference on every call moves their cache lines between the
//! cores of two workers running the same script, and EVAL also hashes its
//! body with SHA1 to find it. On two workers that was a tenth of a
//! one-command EVAL's CPU. A hit here hashes the body with the table's
//! fast hasher and compares it, which is as exact (equal bodies are the
//! same script), and lends the script without touching its count.
//!
//! The index follows the shared cache: it is emptied when SCRIPT FLUSH
//! moves the cache's generation on, and it only ever holds scripts the
//! shared cache held when they were found there.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use hashbrown::HashMap;

use super::{Script, Scripts};

/// How a call names its script.
#[derive(Clone, Copy)]
pub enum Named<'a> {
    /// EVAL: the script's text.
    Body(&'a [u8]),
    /// EVALSHA: its SHA1, as the client wrote it.
    Sha(&'a [u8]),
}

/// Entries per index past which it is emptied: a client that sends a new
/// body on every call (an anti-pattern Redis 7.4 started evicting for)
/// must not grow a copy of each in every thread.
const MAX_ENTRIES: usize = 1024;

/// Scripts by how calls name them.
type Index = HashMap<Box<[u8]>, Arc<Script>>;

#[derive(Default)]
struct ThreadScripts {
    /// The shared cache's generation these entries belong to.
    generation: u64,
    by_body: Index,
    by_sha: Index,
}

impl ThreadScripts {
    fn index<'n>(&mut self, named: Named<'n>) -> (&mut Index, &'n [u8]) {
        match named {
            Named::Body(body) => (&mut self.by_body, body),
            Named::Sha(sha) => (&mut self.by_sha, sha),
        }
    }
}

thread_local! {
    static THREAD_SCRIPTS: RefCell<ThreadScripts> = RefCell::new(ThreadScripts::default());
}

impl Scripts {
    /// The shared cache's generation, read before a lookup in it whose
    /// result is then given to [`Scripts::remember_here`].
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Runs `f` with the script `named`, lent from this thread's index, or
    /// with `None` when this thread has not found it since the last SCRIPT
    /// FLUSH. `f` must not run EVAL or SCRIPT (nothing inside a script can).
    pub fn with_found_here<R>(&self, named: Named<'_>, f: impl FnOnce(Option<&Script>) -> R) -> R {
        let generation = self.generation();
        THREAD_SCRIPTS.with(|cell| {
            if cell.borrow().generation != generation {
                let mut stale = cell.borrow_mut();
                stale.by_body.clear();
                stale.by_sha.clear();
                stale.generation = generation;
            }
            let here = cell.borrow();
            let found = match named {
                Named::Body(body) => here.by_body.get(body),
                Named::Sha(sha) => here.by_sha.get(sha),
            };
            f(found.map(|script| &**script))
        })
    }

    /// Records that `named` is `script`, found in the shared cache after
    /// reading `generation`. Nothing is recorded if a SCRIPT FLUSH came in
    /// between: the script may be gone from the cache.
    pub fn remember_here(&self, generation: u64, named: Named<'_>, script: &Arc<Script>) {
        THREAD_SCRIPTS.with(|cell| {
            let mut here = cell.borrow_mut();
            if here.generation != generation || self.generation() != generation {
                return;
            }
            let (index, key) = here.index(named);
            if index.len() >= MAX_ENTRIES {
                index.clear();
            }
            index.insert(key.into(), script.clone());
        })
    }
}
