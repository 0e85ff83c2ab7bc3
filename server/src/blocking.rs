//! Clients blocked on keys (BLPOP, BLMOVE, BZPOPMIN and their kin): who
//! waits for which key, in arrival order, and the hand-over of a result
//! from the connection that served a waiter to the waiter's own
//! connection.
//!
//! A waiter costs no worker time: its connection task sleeps on the
//! waiter's [`Notify`] (and its timeout, the socket and CLIENT KILL). The
//! client whose write made a key ready serves the waiters of that key
//! itself, before its own reply goes out, as Redis serves them before the
//! next command runs (`cmd::blocking`); the result travels through the
//! waiter's [`Phase`].
//!
//! Lock order: a connection registers while holding the shard locks of its
//! keys (so that no write can slip between its look at the keys and its
//! registration), and a write inside EXEC or a script looks up waiters
//! while its shards are held: always shard, then this registry. Serving
//! never holds this registry's lock while it takes a shard's.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::clients::ClientInfo;
use crate::resp::{Protocol, Reply};

/// A client blocked on keys, and what it runs again when one is ready.
pub struct Waiter {
    /// The blocked connection.
    pub info: Arc<ClientInfo>,
    /// The user it runs as.
    pub user: Arc<crate::acl::User>,
    /// The ACL generation `user` was read at.
    pub acl_generation: u64,
    /// Its protocol, for the reply the serving connection builds.
    pub proto: Protocol,
    /// The database its keys are in.
    pub db: usize,
    /// The blocking command as sent: run again, not blocking, when one of
    /// its keys is ready.
    pub argv: Vec<Vec<u8>>,
    /// The keys it waits for, each once.
    pub keys: Vec<Vec<u8>>,
    /// It waits with a timeout (INFO `clients_in_timeout_table`).
    pub timed: bool,
    phase: Mutex<Phase>,
    /// Wakes the waiter's connection when its phase changes.
    pub wake: Notify,
}

/// Where a waiter stands.
enum Phase {
    /// Waiting for a key.
    Waiting,
    /// A connection is running its command again for it.
    Claimed,
    /// Settled; the waiter's connection takes the outcome.
    Done(Outcome),
    /// The outcome was taken (or the waiter gave up).
    Over,
}

/// How a wait ended.
pub enum Outcome {
    /// Its command ran.
    Served {
        /// The command's reply.
        reply: Reply,
        /// Where its change lies in the change feed (0: none): the reply
        /// waits for the append-only file to hold it.
        aof_offset: u64,
    },
    /// The timeout passed.
    TimedOut,
    /// CLIENT UNBLOCK [TIMEOUT]: answered as a timeout.
    UnblockedAsTimedOut,
    /// CLIENT UNBLOCK ... ERROR.
    Unblocked,
    /// The server became a replica: the client gets an error, and its
    /// connection closes after it.
    RoleChanged,
}

impl Outcome {
    /// The reply the blocked client gets.
    pub fn into_reply(self) -> Reply {
        match self {
            Outcome::Served { reply, .. } => reply,
            // Redis's replyToBlockedClientTimedOut: a null array for every
            // key-blocking command, BLMOVE's included.
            Outcome::TimedOut | Outcome::UnblockedAsTimedOut => Reply::NilArray,
            Outcome::Unblocked => Reply::error("UNBLOCKED client unblocked via CLIENT UNBLOCK"),
            Outcome::RoleChanged => Reply::error(
                "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
            ),
        }
    }
}

impl Outcome {
    /// Whether the command goes to the slow log (and its duration into
    /// the command statistics) now: Redis's updateStatsOnUnblock runs for a
    /// served command and for CLIENT UNBLOCK, not for a timeout.
    pub fn logged(&self) -> bool {
        matches!(
            self,
            Outcome::Served { .. } | Outcome::UnblockedAsTimedOut | Outcome::Unblocked
        )
    }
}

impl Waiter {
    /// A waiter not yet registered.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        info: Arc<ClientInfo>,
        user: Arc<crate::acl::User>,
        acl_generation: u64,
        proto: Protocol,
        db: usize,
        argv: Vec<Vec<u8>>,
        mut keys: Vec<Vec<u8>>,
        timed: bool,
    ) -> Waiter {
        let mut seen = std::collections::HashSet::new();
        keys.retain(|k| seen.insert(k.clone()));
        Waiter {
            info,
            user,
            acl_generation,
            proto,
            db,
            argv,
            keys,
            timed,
            phase: Mutex::new(Phase::Waiting),
            wake: Notify::new(),
        }
    }

    /// Takes the waiter to serve it: false when it is not waiting (another
    /// connection serves it, or it timed out).
    pub fn claim(&self) -> bool {
        let mut phase = self.phase.lock();
        if matches!(*phase, Phase::Waiting) {
            *phase = Phase::Claimed;
            true
        } else {
            false
        }
    }

    /// Gives a claimed waiter back: its command found nothing.
    pub fn release(&self) {
        let mut phase = self.phase.lock();
        if matches!(*phase, Phase::Claimed) {
            *phase = Phase::Waiting;
        }
        drop(phase);
        // Its connection may have seen its timeout pass while it was
        // claimed, and waits to be told it may give up now.
        self.wake.notify_one();
    }

    /// Settles a claimed waiter with its command's reply.
    pub fn finish(&self, outcome: Outcome) {
        *self.phase.lock() = Phase::Done(outcome);
        self.wake.notify_one();
    }

    /// Settles a waiting waiter from outside (CLIENT UNBLOCK): false when
    /// it is being served or is already settled.
    pub fn settle(&self, outcome: Outcome) -> bool {
        let mut phase = self.phase.lock();
        if !matches!(*phase, Phase::Waiting) {
            return false;
        }
        *phase = Phase::Done(outcome);
        drop(phase);
        self.wake.notify_one();
        true
    }

    /// The outcome, once settled (taken once).
    pub fn outcome(&self) -> Option<Outcome> {
        let mut phase = self.phase.lock();
        match std::mem::replace(&mut *phase, Phase::Over) {
            Phase::Done(outcome) => Some(outcome),
            other => {
                *phase = other;
                None
            }
        }
    }

    /// The waiter's connection gives up waiting (its timeout passed, or it
    /// is closing): true when it may, false while another connection is
    /// serving it (its outcome comes shortly, and it is woken for it).
    pub fn give_up(&self) -> bool {
        let mut phase = self.phase.lock();
        match *phase {
            Phase::Waiting | Phase::Over => {
                *phase = Phase::Over;
                true
            }
            Phase::Claimed | Phase::Done(_) => false,
        }
    }
}

/// The clients blocked on keys.
#[derive(Default)]
pub struct Blocked {
    /// How many: read without the lock on every write, so that a server
    /// nobody blocks on pays one atomic load for blocking.
    count: AtomicUsize,
    /// How many of them wait with a timeout.
    timed: AtomicUsize,
    waiting: Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    /// Waiters per (database, key), in arrival order.
    by_key: HashMap<(usize, Vec<u8>), VecDeque<Arc<Waiter>>>,
    /// Waiters by client id (CLIENT UNBLOCK).
    by_client: HashMap<u64, Arc<Waiter>>,
}

impl Blocked {
    /// True when any client is blocked.
    #[inline]
    pub fn any(&self) -> bool {
        self.count.load(Ordering::Relaxed) != 0
    }

    /// Clients blocked (INFO `blocked_clients`).
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Blocked clients waiting with a timeout (INFO
    /// `clients_in_timeout_table`).
    pub fn timed(&self) -> usize {
        self.timed.load(Ordering::Relaxed)
    }

    /// Registers a waiter behind the ones already waiting for its keys.
    pub fn block(&self, waiter: Arc<Waiter>) {
        let mut waiting = self.waiting.lock();
        for key in &waiter.keys {
            waiting
                .by_key
                .entry((waiter.db, key.clone()))
                .or_default()
                .push_back(waiter.clone());
        }
        waiter.info.blocked.store(true, Ordering::Relaxed);
        if waiter.timed {
            self.timed.fetch_add(1, Ordering::Relaxed);
        }
        waiting.by_client.insert(waiter.info.id, waiter);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Forgets a waiter (served, timed out, unblocked or gone); a waiter
    /// already forgotten is left alone.
    pub fn remove(&self, waiter: &Arc<Waiter>) {
        let mut waiting = self.waiting.lock();
        match waiting.by_client.get(&waiter.info.id) {
            Some(found) if Arc::ptr_eq(found, waiter) => {}
            _ => return,
        }
        waiting.by_client.remove(&waiter.info.id);
        for key in &waiter.keys {
            let slot = (waiter.db, key.clone());
            if let Some(queue) = waiting.by_key.get_mut(&slot) {
                queue.retain(|w| !Arc::ptr_eq(w, waiter));
                if queue.is_empty() {
                    waiting.by_key.remove(&slot);
                }
            }
        }
        waiter.info.blocked.store(false, Ordering::Relaxed);
        if waiter.timed {
            self.timed.fetch_sub(1, Ordering::Relaxed);
        }
        self.count.fetch_sub(1, Ordering::Relaxed);
    }

    /// True when a client waits for `key` in `db`.
    pub fn is_waited(&self, db: usize, key: &[u8]) -> bool {
        // Keys are looked up by value; the clone is paid only while
        // someone is blocked.
        self.waiting.lock().by_key.contains_key(&(db, key.to_vec()))
    }

    /// The waiters of `key` in `db`, first come first.
    pub fn waiters(&self, db: usize, key: &[u8]) -> Vec<Arc<Waiter>> {
        self.waiting
            .lock()
            .by_key
            .get(&(db, key.to_vec()))
            .map(|queue| queue.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Every key waited for in `db` (SWAPDB makes them all candidates).
    pub fn keys_in(&self, db: usize) -> Vec<Vec<u8>> {
        self.waiting
            .lock()
            .by_key
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, key)| key.clone())
            .collect()
    }

    /// The waiter of client `id`, if it is blocked.
    pub fn of_client(&self, id: u64) -> Option<Arc<Waiter>> {
        self.waiting.lock().by_client.get(&id).cloned()
    }

    /// Every waiter (a role change unblocks them all).
    pub fn all(&self) -> Vec<Arc<Waiter>> {
        self.waiting.lock().by_client.values().cloned().collect()
    }
}
