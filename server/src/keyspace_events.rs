//! Keyspace notifications (`notify-keyspace-events`): Redis's pub/sub
//! messages about keys. For an event of an enabled class, a message goes
//! to `__keyspace@<db>__:<key>` carrying the event's name (with `K`) and
//! to `__keyevent@<db>__:<event>` carrying the key (with `E`), delivered
//! on this node only, as Redis 7.0 delivers them.
//!
//! Commands raise their events as they change keys (`cmd::Ctx::notify`);
//! the store raises the three only it sees happen (`expired`, `new` and
//! `keymiss`) through its key observer, which this module is: it stands
//! in front of CLIENT TRACKING, the store's other listener.

use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;

pub use crate::event_classes::{class, format, parse};
use crate::pubsub::PubSub;
use crate::store::key_events;
use crate::tracking::Tracking;

/// The server's keyspace notifier, and the store's key observer.
pub struct KeyspaceEvents {
    flags: AtomicU32,
    /// The store events ([`key_events`]) the flags ask for, read by every
    /// shard before it raises one.
    store_events: Arc<AtomicU8>,
    pubsub: Arc<PubSub>,
    tracking: Arc<Tracking>,
}

impl KeyspaceEvents {
    /// A notifier publishing on `pubsub`, in front of `tracking`.
    pub fn new(flags: u32, pubsub: Arc<PubSub>, tracking: Arc<Tracking>) -> KeyspaceEvents {
        let events = KeyspaceEvents {
            flags: AtomicU32::new(0),
            store_events: Arc::default(),
            pubsub,
            tracking,
        };
        events.set_flags(flags);
        events
    }

    /// Installs `notify-keyspace-events`.
    pub fn set_flags(&self, flags: u32) {
        self.flags.store(flags, Ordering::Relaxed);
        let mut store = 0;
        if self.wanted(flags, class::EXPIRED) {
            store |= key_events::EXPIRED;
        }
        if self.wanted(flags, class::NEW) {
            store |= key_events::NEW;
        }
        if self.wanted(flags, class::KEY_MISS) {
            store |= key_events::MISSED;
        }
        if self.wanted(flags, class::HASH) {
            store |= key_events::FIELDS_EXPIRED;
        }
        if self.wanted(flags, class::GENERIC) {
            store |= key_events::EMPTIED_BY_FIELD_EXPIRY;
        }
        self.store_events.store(store, Ordering::Relaxed);
    }

    fn wanted(&self, flags: u32, class: u32) -> bool {
        flags & class != 0 && flags & (class::KEYSPACE | class::KEYEVENT) != 0
    }

    /// True when some class of event is published at all.
    #[inline]
    pub fn enabled(&self) -> bool {
        let flags = self.flags.load(Ordering::Relaxed);
        self.wanted(flags, !(class::KEYSPACE | class::KEYEVENT))
    }

    /// True when an event of `class` would be published: one load, so a
    /// command's call costs nothing while notifications are off.
    #[inline]
    pub fn wants(&self, class: u32) -> bool {
        self.wanted(self.flags.load(Ordering::Relaxed), class)
    }

    /// Publishes `event` about `key` in database `db`, if its class is on.
    pub fn notify(&self, class: u32, event: &str, key: &[u8], db: usize, now_ms: u64) {
        let flags = self.flags.load(Ordering::Relaxed);
        if !self.wanted(flags, class) {
            return;
        }
        let mut db_text = itoa::Buffer::new();
        let db_text = db_text.format(db).as_bytes();
        if flags & class::KEYSPACE != 0 {
            let mut channel = Vec::with_capacity(16 + db_text.len() + key.len());
            channel.extend_from_slice(b"__keyspace@");
            channel.extend_from_slice(db_text);
            channel.extend_from_slice(b"__:");
            channel.extend_from_slice(key);
            self.pubsub.publish(&channel, event.as_bytes(), now_ms);
        }
        if flags & class::KEYEVENT != 0 {
            let mut channel = Vec::with_capacity(16 + db_text.len() + event.len());
            channel.extend_from_slice(b"__keyevent@");
            channel.extend_from_slice(db_text);
            channel.extend_from_slice(b"__:");
            channel.extend_from_slice(event.as_bytes());
            self.pubsub.publish(&channel, key, now_ms);
        }
    }
}

/// The store's observer: modified keys go to CLIENT TRACKING, the store's
/// own events to subscribers.
impl crate::store::KeyObserver for KeyspaceEvents {
    #[inline]
    fn active(&self) -> bool {
        self.tracking.active()
    }

    fn modified(&self, key: &[u8]) {
        self.tracking.modified(key)
    }

    fn key_events(&self) -> Arc<AtomicU8> {
        self.store_events.clone()
    }

    fn key_event(&self, event: u8, db: usize, key: &[u8], now_ms: u64) {
        let (class, name) = match event {
            key_events::EXPIRED => (class::EXPIRED, "expired"),
            key_events::NEW => (class::NEW, "new"),
            key_events::FIELDS_EXPIRED => (class::HASH, "hexpired"),
            key_events::EMPTIED_BY_FIELD_EXPIRY => (class::GENERIC, "del"),
            _ => (class::KEY_MISS, "keymiss"),
        };
        self.notify(class, name, key, db, now_ms);
    }
}
