//! One shard: a hash table of [`Entry`] behind the shard's mutex.
//!
//! Every operation takes `now_ms` so that expiry is checked lazily on access:
//! an expired key is removed the moment anything looks at it and is never
//! visible. The active sweep ([`ShardData::sweep`]) reclaims keys nobody looks at.
//!
//! The shard's data and its bookkeeping live here; its operations are
//! grouped by what they do: `lookup` (finding keys), `write` (storing and
//! removing them), `entry_mut` (an entry open for change), `walk` (passes
//! over the table: a slot's keys, the expiry sweep, SCAN) and `saving`
//! (its part in a background snapshot).

use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU8, Ordering};
use std::sync::Arc;

use hashbrown::hash_table::{Entry as TableEntry, HashTable};
use hashbrown::{DefaultHashBuilder, HashMap};
use std::hash::BuildHasher;

use tally_cluster::slot::key_slot;

use super::access_clock;
use super::entry::{Entry, ValueRef};
use super::field_expiry::{earliest_field_deadline, hint, needs_hint, FieldQueue};
use super::object::Object;
use super::slab::Slab;
use super::slot_index::SlotIndex;
use super::snapshot::{ShardSnapshot, SnapshotMemory, Step};

mod entry_mut;
mod lookup;
mod prefetch;
mod saving;
mod walk;
mod write;

pub use entry_mut::EntryMut;
pub use prefetch::{BucketHint, CACHED_KEYSPACE};

/// A key together with its precomputed hash (computed once, outside the lock).
#[derive(Clone, Copy, Debug)]
pub struct KeyRef<'a> {
    /// The key bytes.
    pub bytes: &'a [u8],
    /// `Store::hash(bytes)`.
    pub hash: u64,
}

/// The clients WATCHing keys of one shard: key → each watcher's "dirty"
/// flag. A write marks the flags under the shard lock, at the moment of the
/// write, so an EXEC that checks its flag after taking its shards can never
/// miss a write that came before it.
type Watchers = HashMap<Box<[u8]>, Vec<Arc<AtomicBool>>>;

/// Who hears of a shard's modified keys: WATCHing clients (by key) and
/// the store's observer (server-wide: CLIENT TRACKING).
pub(crate) struct KeyObservers {
    watchers: Option<Box<Watchers>>,
    observer: Arc<dyn super::KeyObserver>,
    /// The change feed, told of every key that expires here.
    feed: Arc<super::feed::Feed>,
    /// The database this shard belongs to (for the feed's SELECT).
    db: usize,
    /// Which of the store's own key events the observer hears.
    key_events: Arc<AtomicU8>,
}

impl KeyObservers {
    /// Tells the change feed and the observer that the due `fields` of the
    /// hash at `key` were purged (`emptied`: with its last field, and so
    /// the key), as Redis's hashTypeExpire propagates and notifies.
    pub(super) fn fields_expired(
        &self,
        key: &[u8],
        fields: &[Box<[u8]>],
        emptied: bool,
        now_ms: u64,
    ) {
        touch(self, key);
        if self.feed.active() {
            self.feed.append_fields_expired(self.db, key, fields);
        }
        self.key_event(super::key_events::FIELDS_EXPIRED, key, now_ms);
        if emptied {
            self.key_event(super::key_events::EMPTIED_BY_FIELD_EXPIRY, key, now_ms);
        }
    }

    /// Tells the observer of a store key event, if it hears that kind.
    #[inline]
    fn key_event(&self, event: u8, key: &[u8], now_ms: u64) {
        if self.key_events.load(Ordering::Relaxed) & event != 0 {
            self.observer.key_event(event, self.db, key, now_ms);
        }
    }
}

/// Tells the change feed that `key` expired and was dropped (Redis
/// propagates the deletion, so that a replay, which expires nothing
/// itself, drops it at the same point), and the observer (the `expired`
/// keyspace event).
#[inline]
fn feed_expired(observers: &KeyObservers, key: &[u8], now_ms: u64) {
    if observers.feed.active() {
        observers.feed.append_expired(observers.db, key);
    }
    observers.key_event(super::key_events::EXPIRED, key, now_ms);
}

/// Marks the watchers of `key`, if any, and tells the observer.
#[inline]
fn touch(observers: &KeyObservers, key: &[u8]) {
    if observers.observer.active() {
        observers.observer.modified(key);
    }
    if let Some(watchers) = &observers.watchers {
        if let Some(flags) = watchers.get(key) {
            for flag in flags {
                flag.store(true, Ordering::Release);
            }
        }
    }
}

thread_local! {
    static APPLYING_MASTER_STREAM: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `apply` as the master's command on this thread: on a replica, keys
/// whose deadline passed here are still there for it (the master has not
/// expired them yet, or its DEL is on the way), as Redis's replica serves
/// its master client.
pub fn as_master_command<R>(apply: impl FnOnce() -> R) -> R {
    /// Clears the flag however `apply` ends (a command may panic, and the
    /// panic is contained).
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            APPLYING_MASTER_STREAM.with(|flag| flag.set(false));
        }
    }
    APPLYING_MASTER_STREAM.with(|flag| flag.set(true));
    let _reset = Reset;
    apply()
}

fn applying_master_stream() -> bool {
    APPLYING_MASTER_STREAM.with(|flag| flag.get())
}

/// The part of a shard's layout epoch a SCAN cursor carries. Cursors stay
/// small (clients and Lua scripts hold them as doubles, exact only below
/// 2^53), so the epoch travels modulo 256: a cursor resumed after a multiple
/// of 256 resizes of its shard, and no other number, would resume in a
/// layout it was not issued under.
pub const SCAN_EPOCH_MASK: u32 = 0xFF;

/// The data protected by one shard's mutex.
pub struct ShardData {
    pub(super) table: HashTable<Entry>,
    /// Where every entry of `table` lives; see [`Slab`].
    slab: Slab,
    pub(super) hasher: DefaultHashBuilder,
    /// Keys that carry a deadline (INFO keyspace `expires=`).
    volatile: usize,
    /// Bytes this shard owns: entry allocations plus the table's own allocation.
    bytes: usize,
    /// The process-wide sum of every shard's `bytes` (INFO used_memory).
    used_memory: Arc<AtomicIsize>,
    /// Bumped whenever the table may move entries between buckets (growth or an
    /// in-place rehash), so a SCAN cursor issued before can tell it is stale.
    layout_epoch: u32,
    /// Next bucket the active expiry sweep will look at.
    sweep_cursor: usize,
    /// Keys found expired (lazily or by the sweep) since the sweeper last
    /// collected the count for INFO's expired_keys.
    expired_uncounted: u64,
    /// WATCHed keys of this shard (`None`, one branch per write, when
    /// none) and the store's key observer.
    pub(super) observers: KeyObservers,
    /// Read lookups that found their key / found nothing (INFO keyspace_hits
    /// and keyspace_misses), counted under the lock the lookup holds anyway.
    lookups: LookupCounts,
    /// BGSAVE in progress and not yet through this shard (see
    /// [`super::snapshot`]): every change preserves the snapshot value first.
    snapshot: Option<Box<ShardSnapshot>>,
    /// Cluster mode: the keys of each hash slot (see [`SlotIndex`]).
    slot_index: Option<Box<SlotIndex>>,
    /// Hints of when hashes have fields due (see [`super::field_expiry`]).
    pub(super) field_queue: FieldQueue,
    /// Hash fields purged since INFO's expired_subkeys last collected them.
    pub(super) expired_fields_uncounted: u64,
    /// Where the table lies, for lock-free prefetches (see `prefetch`),
    /// published again whenever the table is reallocated.
    bucket_hint: Arc<BucketHint>,
}

/// Read lookups of one shard, as Redis's lookupKeyRead counts them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LookupCounts {
    /// Lookups that found a live key.
    pub hits: u64,
    /// Lookups that found no key (or an expired one).
    pub misses: u64,
}

/// A value copied out of its entry, to be stored again elsewhere (RENAME,
/// COPY, MOVE) or later (a script's undo log).
#[derive(Debug, Clone)]
pub enum OwnedValue {
    /// An integer string.
    Int(i64),
    /// Any other string.
    Str(Vec<u8>),
    /// A collection.
    Obj(Box<Object>),
}

impl OwnedValue {
    /// Copies a value out.
    pub fn of(value: ValueRef<'_>) -> OwnedValue {
        match value {
            ValueRef::Int(n) => OwnedValue::Int(n),
            ValueRef::Str(bytes) => OwnedValue::Str(bytes.to_vec()),
            ValueRef::Obj(object) => OwnedValue::Obj(Box::new(object.clone())),
        }
    }
}

impl ShardData {
    pub(crate) fn new(
        hasher: DefaultHashBuilder,
        used_memory: Arc<AtomicIsize>,
        observer: Arc<dyn super::KeyObserver>,
        feed: Arc<super::feed::Feed>,
        db: usize,
    ) -> ShardData {
        ShardData {
            table: HashTable::new(),
            slab: Slab::new(),
            hasher,
            volatile: 0,
            bytes: 0,
            used_memory,
            layout_epoch: 0,
            sweep_cursor: 0,
            expired_uncounted: 0,
            observers: KeyObservers {
                watchers: None,
                key_events: observer.key_events(),
                observer,
                feed,
                db,
            },
            lookups: LookupCounts::default(),
            snapshot: None,
            slot_index: None,
            field_queue: FieldQueue::new(),
            expired_fields_uncounted: 0,
            bucket_hint: Arc::default(),
        }
    }

    /// Starts keeping the keys of each hash slot (cluster mode), indexing
    /// the keys already here.
    pub fn enable_slot_index(&mut self) {
        if self.slot_index.is_some() {
            return;
        }
        let mut index = Box::<SlotIndex>::default();
        for entry in self.table.iter() {
            let key = entry.key();
            index.add(key_slot(key), self.hasher.hash_one(key));
        }
        let bytes = index.bytes() as isize;
        self.slot_index = Some(index);
        self.account(bytes);
    }

    /// Registers a WATCH of `key` by the client owning `flag`.
    pub fn watch(&mut self, key: &[u8], flag: &Arc<AtomicBool>) {
        let watchers = self.observers.watchers.get_or_insert_with(Default::default);
        watchers.entry(key.into()).or_default().push(flag.clone());
    }

    /// Removes a WATCH registered with [`ShardData::watch`].
    pub fn unwatch(&mut self, key: &[u8], flag: &Arc<AtomicBool>) {
        let Some(watchers) = self.observers.watchers.as_mut() else {
            return;
        };
        if let Some(flags) = watchers.get_mut(key) {
            if let Some(at) = flags.iter().position(|f| Arc::ptr_eq(f, flag)) {
                flags.swap_remove(at);
            }
            if flags.is_empty() {
                watchers.remove(key);
            }
        }
        if watchers.is_empty() {
            self.observers.watchers = None;
        }
    }

    /// Touches the watchers of every watched key present in this shard or
    /// in `also` (FLUSHDB, FLUSHALL and SWAPDB touch the watched keys that
    /// existed, as Redis's touchAllWatchedKeysInDb does).
    fn touch_present(&self, also: Option<&HashTable<Entry>>) {
        let Some(watchers) = &self.observers.watchers else {
            return;
        };
        for (key, flags) in watchers.iter() {
            let hash = self.hasher.hash_one(&**key);
            let present =
                |table: &HashTable<Entry>| table.find(hash, |e| e.key() == &**key).is_some();
            if present(&self.table) || also.is_some_and(present) {
                for flag in flags {
                    flag.store(true, Ordering::Release);
                }
            }
        }
    }

    /// Buckets in the table (SCAN and the sweep walk them).
    pub fn num_buckets(&self) -> usize {
        self.table.num_buckets()
    }

    /// Takes the count of keys that expired since the last call.
    pub fn take_expired_count(&mut self) -> u64 {
        std::mem::take(&mut self.expired_uncounted)
    }

    /// Takes the count of hash fields that expired since the last call.
    pub fn take_expired_fields_count(&mut self) -> u64 {
        std::mem::take(&mut self.expired_fields_uncounted)
    }

    /// Number of keys, counting expired keys not yet reclaimed (as Redis's DBSIZE does).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// True when the shard holds no key.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Keys with a deadline.
    pub fn volatile_len(&self) -> usize {
        self.volatile
    }

    /// Bytes of the hash table's own allocation (its buckets).
    pub fn table_bytes(&self) -> usize {
        self.table.allocation_size()
    }

    /// Bytes accounted to this shard.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub(super) fn account(&mut self, delta: isize) {
        self.bytes = (self.bytes as isize + delta) as usize;
        self.used_memory.fetch_add(delta, Ordering::Relaxed);
    }

    /// Exchanges the contents of two shards (SWAPDB).
    pub fn swap_contents(&mut self, other: &mut ShardData) {
        // Watchers stay with their database: they watch a key of a database
        // index, whatever it holds.
        self.preserve_all();
        other.preserve_all();
        self.touch_present(Some(&other.table));
        other.touch_present(Some(&self.table));
        std::mem::swap(&mut self.table, &mut other.table);
        std::mem::swap(&mut self.slab, &mut other.slab);
        std::mem::swap(&mut self.volatile, &mut other.volatile);
        std::mem::swap(&mut self.bytes, &mut other.bytes);
        std::mem::swap(&mut self.slot_index, &mut other.slot_index);
        std::mem::swap(&mut self.field_queue, &mut other.field_queue);
        self.layout_epoch = self.layout_epoch.wrapping_add(1);
        other.layout_epoch = other.layout_epoch.wrapping_add(1);
        self.bucket_hint.publish(&self.table);
        other.bucket_hint.publish(&other.table);
        self.sweep_cursor = 0;
        other.sweep_cursor = 0;
    }
}

impl Drop for ShardData {
    fn drop(&mut self) {
        self.clear();
    }
}
