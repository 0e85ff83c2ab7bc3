//! Server-assisted client-side caching (CLIENT TRACKING), as Redis 7.0 does
//! it: a client that tracks is told when a key it read changes, so it can
//! cache values (a gateway's rule cache) without polling.
//!
//! Default mode remembers, per key, the clients that read it (read-only
//! commands' key arguments; OPTIN/OPTOUT narrow it with CLIENT CACHING) and
//! sends each one invalidation when the key is next modified, then forgets
//! it. BCAST mode sends an invalidation for every modified key under the
//! client's prefixes, remembering nothing. RESP3 clients get `invalidate`
//! pushes on their own connection; a RESP2 client redirects them to another
//! connection subscribed to `__redis__:invalidate`. Flushes invalidate
//! everything (a null key list).
//!
//! The shards call [`Tracking::modified`] for every key a write or expiry
//! touches (one relaxed load while nobody tracks), under the shard's lock,
//! so an invalidation is queued before the write's reply is.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use hashbrown::HashMap;
use parking_lot::Mutex;

use crate::config::OutputLimit;
use crate::pubsub::{Message, Subscriber};

pub use crate::pubsub::INVALIDATE_CHANNEL;

/// A client's tracking settings (CLIENT TRACKING ON ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrackingMode {
    /// Where invalidations go: 0 for the client itself.
    pub redirect: u64,
    /// BCAST: every key under `prefixes`, nothing remembered.
    pub bcast: bool,
    /// BCAST prefixes ("" for every key).
    pub prefixes: Vec<Vec<u8>>,
    /// OPTIN: only keys read right after CLIENT CACHING YES.
    pub optin: bool,
    /// OPTOUT: keys read, except right after CLIENT CACHING NO.
    pub optout: bool,
    /// NOLOOP: not for keys this client modified itself.
    pub noloop: bool,
}

#[derive(Default)]
struct Inner {
    /// Default mode: key → the ids of the clients that read it.
    keys: HashMap<Vec<u8>, Vec<u64>>,
    /// Tracking clients by id.
    clients: HashMap<u64, TrackingMode>,
    /// Where each connection that can receive invalidations gets them.
    outboxes: HashMap<u64, Arc<Subscriber>>,
    /// Redirect targets found gone, per tracking client (reported once).
    broken: HashMap<u64, bool>,
    /// BCAST keys modified since the last flush: (client, prefix) → (key,
    /// the client that modified it), sent as one message per prefix.
    bcast_pending: HashMap<(u64, Vec<u8>), Vec<ModifiedKey>>,
    /// `tracking-table-max-keys` (0: no limit).
    max_keys: usize,
}

/// A key modified under a BCAST prefix, and the client that modified it.
type ModifiedKey = (Bytes, u64);

/// The server's tracking table and tracking clients.
#[derive(Default)]
pub struct Tracking {
    /// True while at least one client tracks.
    active: AtomicBool,
    inner: Mutex<Inner>,
}

thread_local! {
    /// The client whose command is running on this thread (NOLOOP).
    static WRITER: Cell<u64> = const { Cell::new(0) };
}

/// Marks `client_id` as the one running commands on this thread until the
/// guard drops (NOLOOP tells its own writes apart).
pub struct WriterGuard(u64);

impl WriterGuard {
    /// Enters `client_id`'s command.
    pub fn enter(client_id: u64) -> WriterGuard {
        WriterGuard(WRITER.with(|w| w.replace(client_id)))
    }
}

impl Drop for WriterGuard {
    fn drop(&mut self) {
        WRITER.with(|w| w.set(self.0));
    }
}

/// Invalidations are not held to an output-buffer limit (Redis's normal
/// clients have none).
const UNLIMITED: OutputLimit = OutputLimit {
    hard: 0,
    soft: 0,
    soft_seconds: 0,
};

impl Tracking {
    /// True while at least one client tracks.
    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Makes a connection's queue reachable for invalidations (its own or
    /// redirected ones).
    pub fn register_outbox(&self, client_id: u64, outbox: Arc<Subscriber>) {
        self.inner.lock().outboxes.insert(client_id, outbox);
    }

    /// Forgets a connection that closed: its settings and its queue. The
    /// clients that redirected to it learn that their redirect broke.
    pub fn forget(&self, client_id: u64) {
        let mut inner = self.inner.lock();
        inner.outboxes.remove(&client_id);
        inner.clients.remove(&client_id);
        inner.broken.remove(&client_id);
        let orphans: Vec<u64> = inner
            .clients
            .iter()
            .filter(|(_, mode)| mode.redirect == client_id)
            .map(|(id, _)| *id)
            .collect();
        for id in orphans {
            if inner.broken.insert(id, true).is_none() {
                if let Some(own) = inner.outboxes.get(&id) {
                    own.deliver(Message::RedirectBroken(client_id), UNLIMITED, 0);
                }
            }
        }
        self.active
            .store(!inner.clients.is_empty(), Ordering::Relaxed);
    }

    /// CLIENT TRACKING ON (settings already checked).
    pub fn enable(&self, client_id: u64, mode: TrackingMode) {
        let mut inner = self.inner.lock();
        inner.clients.insert(client_id, mode);
        inner.broken.remove(&client_id);
        self.active.store(true, Ordering::Relaxed);
    }

    /// CLIENT TRACKING OFF.
    pub fn disable(&self, client_id: u64) {
        let mut inner = self.inner.lock();
        inner.clients.remove(&client_id);
        inner.broken.remove(&client_id);
        self.active
            .store(!inner.clients.is_empty(), Ordering::Relaxed);
    }

    /// The client's settings while it tracks.
    pub fn mode(&self, client_id: u64) -> Option<TrackingMode> {
        self.inner.lock().clients.get(&client_id).cloned()
    }

    /// True when the client's redirect target was found gone.
    pub fn redirect_broken(&self, client_id: u64) -> bool {
        self.inner.lock().broken.contains_key(&client_id)
    }

    /// Remembers that `client_id` read `keys` (default mode).
    pub fn remember(&self, client_id: u64, keys: &[&[u8]]) {
        let mut inner = self.inner.lock();
        for key in keys {
            let readers = inner.keys.entry(key.to_vec()).or_default();
            if !readers.contains(&client_id) {
                readers.push(client_id);
            }
        }
        limit_keys(&mut inner);
    }

    /// `tracking-table-max-keys`: a lower limit takes effect at once.
    pub fn set_max_keys(&self, max_keys: usize) {
        let mut inner = self.inner.lock();
        inner.max_keys = max_keys;
        limit_keys(&mut inner);
    }

    /// A write or an expiry changed `key`: tell whoever must know.
    pub fn modified(&self, key: &[u8]) {
        if !self.active() {
            return;
        }
        let writer = WRITER.with(|w| w.get());
        let mut inner = self.inner.lock();
        let key = Bytes::copy_from_slice(key);
        invalidate_readers(&mut inner, &key, writer);
        // BCAST: gathered and sent per prefix once the batch is done, as
        // Redis sends them before it sleeps.
        let mut gathered = Vec::new();
        for (id, mode) in inner.clients.iter() {
            if mode.bcast {
                for prefix in mode.prefixes.iter().filter(|p| key.starts_with(p)) {
                    gathered.push((*id, prefix.clone()));
                }
            }
        }
        for slot in gathered {
            inner
                .bcast_pending
                .entry(slot)
                .or_default()
                .push((key.clone(), writer));
        }
    }

    /// Sends the BCAST invalidations gathered since the last call: per
    /// client and prefix, one message with the keys in order (a NOLOOP
    /// client's own writes left out). Called after each batch of commands
    /// and each expiry sweep.
    pub fn flush_broadcasts(&self) {
        if !self.active() {
            return;
        }
        let mut inner = self.inner.lock();
        if inner.bcast_pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut inner.bcast_pending);
        let mut batches: Vec<_> = pending.into_iter().collect();
        batches.sort_by(|a, b| a.0.cmp(&b.0));
        for ((id, _prefix), mut keys) in batches {
            let noloop = inner.clients.get(&id).is_some_and(|m| m.noloop);
            keys.sort_by(|a, b| a.0.cmp(&b.0));
            keys.dedup_by(|a, b| a.0 == b.0);
            let keys: Vec<Bytes> = keys
                .into_iter()
                .filter(|(_, writer)| !(noloop && *writer == id))
                .map(|(key, _)| key)
                .collect();
            if !keys.is_empty() {
                send(&mut inner, id, Some(keys));
            }
        }
    }

    /// FLUSHDB / FLUSHALL: every tracking client is told that everything
    /// changed, and the table is emptied (of every database's keys, as
    /// Redis's trackingInvalidateKeysOnFlush).
    pub fn flushed(&self) {
        // The table is emptied even while nobody tracks: clients that
        // stopped tracking leave their keys in it, as on Redis.
        let mut inner = self.inner.lock();
        inner.keys.clear();
        inner.bcast_pending.clear();
        let ids: Vec<u64> = inner.clients.keys().copied().collect();
        for id in ids {
            send(&mut inner, id, None);
        }
    }

    /// INFO's tracking_clients, tracking_total_keys, tracking_total_items
    /// and tracking_total_prefixes.
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let inner = self.inner.lock();
        (
            inner.clients.len(),
            inner.keys.len(),
            inner.keys.values().map(Vec::len).sum(),
            inner
                .clients
                .values()
                .filter(|m| m.bcast)
                .map(|m| m.prefixes.len())
                .sum(),
        )
    }
}

/// Tells the default-mode clients that read `key` that it changed (except a
/// NOLOOP client that changed it itself, `writer`) and forgets them.
fn invalidate_readers(inner: &mut Inner, key: &Bytes, writer: u64) {
    let readers = inner.keys.remove(key.as_ref()).unwrap_or_default();
    for id in readers {
        let Some(mode) = inner.clients.get(&id) else {
            continue;
        };
        if mode.bcast || (id == writer && mode.noloop) {
            continue;
        }
        send(inner, id, Some(vec![key.clone()]));
    }
}

/// Keeps the table within `tracking-table-max-keys`, as Redis's
/// trackingLimitUsedSlots: keys past the limit are invalidated (their
/// readers told, as if the key changed) in the table's arbitrary order.
fn limit_keys(inner: &mut Inner) {
    if inner.max_keys == 0 || inner.keys.len() <= inner.max_keys {
        return;
    }
    let excess = inner.keys.len() - inner.max_keys;
    let victims: Vec<Vec<u8>> = inner.keys.keys().take(excess).cloned().collect();
    for key in victims {
        invalidate_readers(inner, &Bytes::from(key), 0);
    }
}

/// Queues one invalidation for tracking client `id`, to it or to its
/// redirect target; a redirect target that is gone is reported once to the
/// client itself (`tracking-redir-broken`).
fn send(inner: &mut Inner, id: u64, keys: Option<Vec<Bytes>>) {
    let Some(mode) = inner.clients.get(&id) else {
        return;
    };
    let target = if mode.redirect != 0 {
        mode.redirect
    } else {
        id
    };
    let redirected = mode.redirect != 0;
    // A target without a queue never subscribed to __redis__:invalidate
    // (or, for the client itself, is RESP2 with nowhere to push): nothing
    // to send, as on Redis. A target that closed was reported by `forget`.
    if let Some(outbox) = inner.outboxes.get(&target) {
        outbox.deliver(Message::Invalidate { keys, redirected }, UNLIMITED, 0);
    }
}

/// The store tells tracking of every modified key, under the key's shard
/// lock (see `store::KeyObserver`).
impl crate::store::KeyObserver for Tracking {
    #[inline]
    fn active(&self) -> bool {
        Tracking::active(self)
    }

    fn modified(&self, key: &[u8]) {
        Tracking::modified(self, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_forgotten_once_invalidated_and_counted() {
        let tracking = Tracking::default();
        tracking.enable(1, TrackingMode::default());
        tracking.remember(1, &[b"a", b"b"]);
        tracking.remember(1, &[b"a"]);
        assert_eq!(tracking.counts(), (1, 2, 2, 0));
        tracking.modified(b"a");
        assert_eq!(tracking.counts(), (1, 1, 1, 0));
        tracking.flushed();
        assert_eq!(tracking.counts(), (1, 0, 0, 0));
        tracking.forget(1);
        assert!(!tracking.active());
    }
}
