//! One shard: a hash table of [`Entry`] behind the shard's mutex.
//!
//! Every operation takes `now_ms` so that expiry is checked lazily on access:
//! an expired key is removed the moment anything looks at it and is never
//! visible. The active sweep ([`ShardData::sweep`]) reclaims keys nobody looks at.

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

/// A mutable view of one entry that keeps the shard's memory and TTL
/// accounting right whatever the caller changes.
pub struct EntryMut<'a> {
    entry: &'a mut Entry,
    slab: &'a mut Slab,
    volatile: &'a mut usize,
    bytes: &'a mut usize,
    used_memory: &'a AtomicIsize,
    heap_before: usize,
    had_deadline: bool,
    /// Set by every mutating method: the drop then touches watchers.
    modified: bool,
    observers: &'a KeyObservers,
    field_queue: &'a mut FieldQueue,
}

impl std::ops::Deref for EntryMut<'_> {
    type Target = Entry;
    fn deref(&self) -> &Entry {
        self.entry
    }
}

impl EntryMut<'_> {
    /// Replaces the value, keeping key and deadline.
    pub fn set_value(&mut self, value: ValueRef<'_>) {
        self.modified = true;
        self.entry.set_value(value, self.slab);
    }

    /// SETRANGE on a string stored as bytes: `patch` at `offset`, zero
    /// bytes up to it, without copying the value out and back.
    pub fn patch_str(&mut self, offset: usize, patch: &[u8]) {
        self.modified = true;
        self.entry.patch_str(offset, patch, self.slab);
    }

    /// Sets the deadline (0 removes it).
    pub fn set_expire_at(&mut self, expire_at_ms: u64) {
        self.modified = true;
        self.entry.set_expire_at(expire_at_ms, self.slab);
    }

    /// The collection, for changing it in place; `None` for a string. The
    /// collection keeps its own byte count, which the drop of this view
    /// carries into the shard's accounting.
    pub fn object_mut(&mut self) -> Option<&mut Object> {
        self.modified = true;
        self.entry.object_mut()
    }

    /// The caller looked through [`Self::object_mut`] and changed nothing
    /// (SADD of members already there, SREM of missing ones): WATCHers and
    /// tracking clients are not told, as Redis signals no change then.
    pub fn leave_unmodified(&mut self) {
        self.modified = false;
    }
}

impl Drop for EntryMut<'_> {
    fn drop(&mut self) {
        if self.modified {
            touch(self.observers, self.entry.key());
            // A hash given an earlier field deadline needs the sweep to
            // look at it sooner.
            if let ValueRef::Obj(Object::Hash(hash)) = self.entry.value() {
                if needs_hint(hash) {
                    let key = self.entry.key().to_vec();
                    if let Some(Object::Hash(hash)) = self.entry.object_mut() {
                        hint(self.field_queue, &key, hash);
                    }
                }
            }
        }
        let heap_after = self.entry.heap_size();
        if heap_after != self.heap_before {
            *self.bytes = *self.bytes + heap_after - self.heap_before;
            self.used_memory.fetch_add(
                heap_after as isize - self.heap_before as isize,
                Ordering::Relaxed,
            );
        }
        let has_deadline = self.entry.expire_at() != 0;
        if has_deadline != self.had_deadline {
            if has_deadline {
                *self.volatile += 1;
            } else {
                *self.volatile -= 1;
            }
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

    /// Keys in `slot` held here, expired ones not yet reclaimed included
    /// (as Redis's countKeysInSlot).
    pub fn count_in_slot(&self, slot: u16) -> usize {
        self.slot_index
            .as_ref()
            .map_or(0, |index| index.count(slot))
    }

    /// Up to `max` keys of `slot` held here, appended to `out`.
    pub fn keys_in_slot(&self, slot: u16, max: usize, out: &mut Vec<Vec<u8>>) {
        let Some(index) = &self.slot_index else {
            return;
        };
        for hash in index.hashes(slot) {
            for entry in self.table.iter_hash(hash) {
                if out.len() >= max {
                    return;
                }
                let key = entry.key();
                // The probe also meets entries of other hashes with the same tag.
                if key_slot(key) == slot && self.hasher.hash_one(key) == hash {
                    out.push(key.to_vec());
                }
            }
        }
    }

    /// Marks the snapshot's moment in this shard (BGSAVE, with every shard
    /// locked at once).
    pub fn begin_snapshot(
        &mut self,
        at_ms: u64,
        encodings: tally_rdb::Encodings,
        memory: Arc<SnapshotMemory>,
    ) {
        self.snapshot = Some(Box::new(ShardSnapshot::new(at_ms, encodings, memory)));
    }

    /// The background writer's step: the snapshot's keys in up to
    /// `max_buckets` more buckets, short strings encoded into `encoded`
    /// and the rest copied into `entries` (encoded by the caller once the
    /// lock is released); finished once the shard is done, with the
    /// writers' early entries, already encoded, appended to `encoded`.
    pub fn snapshot_step(
        &mut self,
        max_buckets: usize,
        entries: &mut Vec<tally_rdb::Entry>,
        encoded: &mut Vec<u8>,
    ) -> Step {
        let mut keys = 0;
        let Some(snapshot) = self.snapshot.as_deref_mut() else {
            return Step {
                keys,
                finished: true,
            };
        };
        if !snapshot.sealed {
            let buckets = self.table.num_buckets();
            let end = snapshot.cursor.saturating_add(max_buckets).min(buckets);
            // The blocks lie scattered through the slab: asked for all at
            // once, their cache misses overlap, and the lock is held for
            // about one of them rather than one per entry.
            for index in snapshot.cursor..end {
                if let Some(entry) = self.table.get_bucket(index) {
                    entry.prefetch();
                }
            }
            for index in snapshot.cursor..end {
                if let Some(entry) = self.table.get_bucket_mut(index) {
                    keys += snapshot.collect(entry, entries, encoded) as usize;
                }
            }
            snapshot.cursor = end;
            if end < buckets {
                return Step {
                    keys,
                    finished: false,
                };
            }
        }
        if let Some(snapshot) = self.snapshot.take() {
            encoded.extend_from_slice(&snapshot.finish());
        }
        Step {
            keys,
            finished: true,
        }
    }

    /// Entries marked handled by a snapshot: none unless one is open.
    #[cfg(test)]
    pub(crate) fn snapshot_marks(&self) -> usize {
        self.table.iter().filter(|e| e.snapshot_handled()).count()
    }

    /// Drops this shard's part of a snapshot (a BGSAVE that ended early).
    pub fn cancel_snapshot(&mut self) {
        if let Some(snapshot) = self.snapshot.take() {
            snapshot.abandon(&mut self.table);
        }
    }

    /// Before the entry in bucket `index` changes or goes: its snapshot
    /// value is preserved (one branch when no snapshot is in progress).
    #[inline]
    pub(super) fn preserve_at(&mut self, index: usize) {
        if let Some(snapshot) = self.snapshot.as_deref_mut() {
            if let Some(entry) = self.table.get_bucket_mut(index) {
                snapshot.preserve(entry, index);
            }
        }
    }

    /// Before entries move or go all at once (a resize, a flush, SWAPDB):
    /// every snapshot value the background writer has not reached is
    /// preserved, and the shard sealed: the writer has nothing more to walk.
    fn preserve_all(&mut self) {
        if let Some(snapshot) = self.snapshot.as_deref_mut() {
            snapshot.seal(&mut self.table);
        }
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

    /// Finds the bucket of a live key; an expired key is deleted on the way
    /// and reported absent.
    fn find_live(&mut self, key: KeyRef<'_>, now_ms: u64) -> Option<usize> {
        let index = self
            .table
            .find_bucket_index(key.hash, |e| e.key() == key.bytes)?;
        let expired = self
            .table
            .get_bucket(index)
            .is_some_and(|e| e.is_expired(now_ms));
        if expired {
            if self.observers.feed.following() {
                // A replica never expires a key on its own clock: its
                // master sends the DEL. Until then the key is absent to
                // clients and present to the master's commands.
                return applying_master_stream().then_some(index);
            }
            self.preserve_at(index);
            if let Ok(occupied) = self.table.get_bucket_entry(index) {
                let (removed, _) = occupied.remove();
                // A watched key that expires aborts the transaction, as
                // Redis's isWatchedKeyExpired makes EXEC do.
                touch(&self.observers, removed.key());
                feed_expired(&self.observers, removed.key(), now_ms);
                self.unindex(removed.key());
                self.forget(removed);
                self.expired_uncounted += 1;
            }
            return None;
        }
        let fields_due = self
            .table
            .get_bucket(index)
            .and_then(earliest_field_deadline)
            .is_some_and(|at| at < now_ms);
        if fields_due && !self.observers.feed.following() && !self.purge_fields(index, now_ms) {
            return None;
        }
        if access_clock::stamping() {
            if let Some(entry) = self.table.get_bucket_mut(index) {
                entry.set_access_clock(access_clock::clock_at(now_ms));
            }
        }
        Some(index)
    }

    /// Looks a key up for reading or writing; an expired key is deleted and
    /// reported absent.
    pub fn get_mut(&mut self, key: KeyRef<'_>, now_ms: u64) -> Option<EntryMut<'_>> {
        let index = self.find_live(key, now_ms)?;
        // The caller may change it: a snapshot in progress keeps its value.
        self.preserve_at(index);
        let entry = self.table.get_bucket_mut(index)?;
        let heap_before = entry.heap_size();
        let had_deadline = entry.expire_at() != 0;
        Some(EntryMut {
            entry,
            slab: &mut self.slab,
            volatile: &mut self.volatile,
            bytes: &mut self.bytes,
            used_memory: &self.used_memory,
            heap_before,
            had_deadline,
            modified: false,
            observers: &self.observers,
            field_queue: &mut self.field_queue,
        })
    }

    /// The live value of a key, if any (deleting it if expired).
    pub fn get(&mut self, key: KeyRef<'_>, now_ms: u64) -> Option<&Entry> {
        let index = self.find_live(key, now_ms)?;
        self.table.get_bucket(index)
    }

    /// The live value of a key for a command that reads it, counted in
    /// INFO's keyspace_hits / keyspace_misses as Redis's lookupKeyRead
    /// counts. Writes look keys up with [`ShardData::get`], uncounted, as
    /// Redis's lookupKeyWrite does.
    pub fn lookup_read(&mut self, key: KeyRef<'_>, now_ms: u64) -> Option<&Entry> {
        let index = self.find_live(key, now_ms);
        self.count_read(index.is_some());
        if index.is_none() {
            self.observers
                .key_event(super::key_events::MISSED, key.bytes, now_ms);
        }
        self.table.get_bucket(index?)
    }

    /// Counts one read lookup made another way (a read command that
    /// changes what it read, as GETEX does).
    pub fn count_read(&mut self, hit: bool) {
        if hit {
            self.lookups.hits += 1;
        } else {
            self.lookups.misses += 1;
        }
    }

    /// Read lookups counted so far.
    pub fn lookup_counts(&self) -> LookupCounts {
        self.lookups
    }

    /// Forgets the read lookups counted so far (CONFIG RESETSTAT).
    pub fn reset_lookup_counts(&mut self) {
        self.lookups = LookupCounts::default();
    }

    /// The key's entry as stored, even past its deadline, without
    /// deleting, stamping or counting anything: DEBUG OBJECT's view, which
    /// shows what the table holds.
    pub fn peek(&self, key: KeyRef<'_>) -> Option<&Entry> {
        self.table.find(key.hash, |e| e.key() == key.bytes)
    }

    /// Stamps a live key as used at `clock` (RESTORE IDLETIME); false when
    /// there is no such key.
    pub fn set_access_clock(&mut self, key: KeyRef<'_>, clock: u32, now_ms: u64) -> bool {
        let Some(index) = self.find_live(key, now_ms) else {
            return false;
        };
        if let Some(entry) = self.table.get_bucket_mut(index) {
            entry.set_access_clock(clock);
        }
        true
    }

    /// Stamps `clock` on every key still at clock 0: loads that run at
    /// time 0 (an append-only file's replay, a replica's load of its
    /// master's snapshot, which keep keys past their deadline) stamp what
    /// they store with it, where Redis stamps the time of the load.
    pub fn stamp_unused(&mut self, clock: u32) {
        for entry in self.table.iter_mut() {
            if entry.access_clock() == 0 {
                entry.set_access_clock(clock);
            }
        }
    }

    /// True when a live key exists.
    pub fn contains(&mut self, key: KeyRef<'_>, now_ms: u64) -> bool {
        self.get_mut(key, now_ms).is_some()
    }

    /// Stores `value` under the key, replacing whatever was there; returns
    /// true when a live key was replaced.
    pub fn set(
        &mut self,
        key: KeyRef<'_>,
        value: ValueRef<'_>,
        expire_at_ms: u64,
        now_ms: u64,
    ) -> bool {
        let entry = Entry::new(key.bytes, value, expire_at_ms, &mut self.slab);
        self.put(key, entry, now_ms)
    }

    /// Stores a collection under the key, replacing whatever was there;
    /// returns true when a live key was replaced.
    pub fn set_object(
        &mut self,
        key: KeyRef<'_>,
        object: Box<Object>,
        expire_at_ms: u64,
        now_ms: u64,
    ) -> bool {
        let entry = Entry::new_object(key.bytes, object, expire_at_ms, &mut self.slab);
        self.put(key, entry, now_ms)
    }

    /// Stores an owned value under the key, replacing whatever was there.
    pub fn set_owned(
        &mut self,
        key: KeyRef<'_>,
        value: OwnedValue,
        expire_at_ms: u64,
        now_ms: u64,
    ) -> bool {
        match value {
            OwnedValue::Int(n) => self.set(key, ValueRef::Int(n), expire_at_ms, now_ms),
            OwnedValue::Str(bytes) => self.set(key, ValueRef::Str(&bytes), expire_at_ms, now_ms),
            OwnedValue::Obj(object) => self.set_object(key, object, expire_at_ms, now_ms),
        }
    }

    fn put(&mut self, key: KeyRef<'_>, mut entry: Entry, now_ms: u64) -> bool {
        touch(&self.observers, key.bytes);
        // A value stored is a value used, even by a client that touches
        // nothing: Redis stamps every object it creates.
        entry.set_access_clock(access_clock::clock_at(now_ms));
        // A hash arriving with field deadlines (RESTORE, RENAME, a load) is
        // hinted under its new key, whatever it was hinted under before.
        if let Some(Object::Hash(hash)) = entry.object_mut() {
            if hash.has_field_deadlines() {
                hash.set_hinted_deadline(0);
                hint(&mut self.field_queue, key.bytes, hash);
            }
        }
        let mut delta = entry.heap_size() as isize;
        if entry.expire_at() != 0 {
            self.volatile += 1;
        }
        if self.table.len() == self.table.capacity() {
            // The insert below may grow or rehash the table, moving entries.
            self.layout_epoch = self.layout_epoch.wrapping_add(1);
            if self.snapshot.is_some() {
                self.preserve_all();
            }
        }
        let table_before = self.table.allocation_size();
        let hasher = &self.hasher;
        let previous = match self.table.entry(
            key.hash,
            |e| e.key() == key.bytes,
            |e| hasher.hash_one(e.key()),
        ) {
            TableEntry::Occupied(mut occupied) => {
                let index = occupied.bucket_index();
                if let Some(snapshot) = self.snapshot.as_deref_mut() {
                    snapshot.preserve(occupied.get_mut(), index);
                }
                let previous = std::mem::replace(occupied.get_mut(), entry);
                if let Some(snapshot) = self.snapshot.as_deref() {
                    snapshot.mark_put(occupied.get_mut(), index);
                }
                Some(previous)
            }
            TableEntry::Vacant(vacant) => {
                let mut occupied = vacant.insert(entry);
                if let Some(snapshot) = self.snapshot.as_deref() {
                    let index = occupied.bucket_index();
                    snapshot.mark_put(occupied.get_mut(), index);
                }
                if let Some(index) = self.slot_index.as_deref_mut() {
                    index.add(key_slot(key.bytes), key.hash);
                    delta += SlotIndex::BYTES_PER_KEY as isize;
                }
                None
            }
        };
        delta += self.table.allocation_size() as isize - table_before as isize;
        self.account(delta);
        let was_live = match previous {
            Some(old) => {
                let was_live = !old.is_expired(now_ms);
                if !was_live {
                    feed_expired(&self.observers, old.key(), now_ms);
                }
                self.forget(old);
                was_live
            }
            None => false,
        };
        if !was_live {
            self.observers
                .key_event(super::key_events::NEW, key.bytes, now_ms);
        }
        was_live
    }

    /// Removes a key; true when it was live.
    pub fn remove(&mut self, key: KeyRef<'_>, now_ms: u64) -> bool {
        let Some(index) = self
            .table
            .find_bucket_index(key.hash, |e| e.key() == key.bytes)
        else {
            return false;
        };
        self.preserve_at(index);
        let Ok(occupied) = self.table.get_bucket_entry(index) else {
            return false;
        };
        let (removed, _) = occupied.remove();
        let was_expired = removed.is_expired(now_ms);
        touch(&self.observers, removed.key());
        if was_expired {
            feed_expired(&self.observers, removed.key(), now_ms);
        }
        self.unindex(removed.key());
        self.forget(removed);
        if was_expired {
            self.expired_uncounted += 1;
        }
        !was_expired
    }

    /// Removes a live key and hands back its value and deadline, to be
    /// stored under another key (RENAME, MOVE): a collection is moved out
    /// of the entry, not copied. `None` (and nothing removed) for a key
    /// that is missing or expired.
    pub fn take(&mut self, key: KeyRef<'_>, now_ms: u64) -> Option<(OwnedValue, u64)> {
        let index = self.find_live(key, now_ms)?;
        self.preserve_at(index);
        let Ok(occupied) = self.table.get_bucket_entry(index) else {
            return None;
        };
        let (mut removed, _) = occupied.remove();
        touch(&self.observers, removed.key());
        let expire_at = removed.expire_at();
        // The collection's bytes leave this shard's count with it.
        let heap_before = removed.heap_size();
        let value = match removed.take_object() {
            Some(object) => OwnedValue::Obj(object),
            None => OwnedValue::of(removed.value()),
        };
        self.account(removed.heap_size() as isize - heap_before as isize);
        self.unindex(removed.key());
        self.forget(removed);
        Some((value, expire_at))
    }

    /// Drops a key that left the table from the slot index (cluster mode).
    #[inline]
    pub(super) fn unindex(&mut self, key: &[u8]) {
        if let Some(index) = self.slot_index.as_deref_mut() {
            index.remove(key_slot(key), self.hasher.hash_one(key));
            self.account(-(SlotIndex::BYTES_PER_KEY as isize));
        }
    }

    /// Accounting for an entry that has just left the table, and its block
    /// back to the slab.
    pub(super) fn forget(&mut self, removed: Entry) {
        if removed.expire_at() != 0 {
            self.volatile -= 1;
        }
        self.account(-(removed.heap_size() as isize));
        removed.free(&mut self.slab);
    }

    /// Drops every key and returns the slab's memory to the system.
    pub fn clear(&mut self) {
        self.preserve_all();
        self.touch_present(None);
        let bytes = self.bytes as isize;
        let table = std::mem::take(&mut self.table);
        for entry in table {
            // Small blocks go away with the slab's chunks; large ones are
            // separate allocations and must be freed one by one.
            entry.free(&mut self.slab);
        }
        self.slab.reset();
        self.volatile = 0;
        // The index's bytes are part of `bytes`, given back below.
        if let Some(index) = self.slot_index.as_deref_mut() {
            index.clear();
        }
        self.layout_epoch = self.layout_epoch.wrapping_add(1);
        self.sweep_cursor = 0;
        self.field_queue.clear();
        self.account(-bytes);
    }

    /// Iterates over live entries (expired ones not yet swept are skipped).
    pub fn iter_live(&self, now_ms: u64) -> impl Iterator<Item = &Entry> {
        self.table.iter().filter(move |e| !e.is_expired(now_ms))
    }

    /// Examines up to `max_buckets` buckets from where the last sweep stopped and
    /// removes expired entries. Returns `(examined, removed)`: the entries
    /// with a deadline it met, and those of them it removed.
    pub fn sweep(&mut self, now_ms: u64, max_buckets: usize) -> (usize, usize) {
        let buckets = self.table.num_buckets();
        if buckets == 0 || self.volatile == 0 {
            return (0, 0);
        }
        let mut examined = 0;
        let mut removed = 0;
        let mut index = self.sweep_cursor % buckets;
        for _ in 0..max_buckets.min(buckets) {
            if let Ok(mut occupied) = self.table.get_bucket_entry(index) {
                if occupied.get().expire_at() != 0 {
                    examined += 1;
                }
                if occupied.get().is_expired(now_ms) {
                    if let Some(snapshot) = self.snapshot.as_deref_mut() {
                        snapshot.preserve(occupied.get_mut(), index);
                    }
                    let (gone, _) = occupied.remove();
                    touch(&self.observers, gone.key());
                    feed_expired(&self.observers, gone.key(), now_ms);
                    self.unindex(gone.key());
                    self.forget(gone);
                    self.expired_uncounted += 1;
                    removed += 1;
                }
            }
            index = (index + 1) % buckets;
        }
        self.sweep_cursor = index;
        (examined, removed)
    }

    /// One step of SCAN over this shard. `position` is the bucket to start at;
    /// `epoch` is the layout epoch the caller's cursor was issued under. Live
    /// entries accepted by `keep` are pushed to `out` until at least `count`
    /// buckets holding entries were visited. Returns the next bucket position
    /// (`None` when the shard is finished) and the current epoch.
    ///
    /// When the table's layout changed since the cursor was issued, entries may
    /// have moved to buckets already visited, so the shard restarts from bucket 0:
    /// elements may then be returned twice (Redis allows that) but never missed.
    /// Epochs are compared modulo [`SCAN_EPOCH_MASK`] + 1, as cursors carry them.
    pub fn scan(
        &self,
        position: usize,
        epoch: u32,
        count: usize,
        now_ms: u64,
        mut keep: impl FnMut(&Entry) -> bool,
        out: &mut Vec<Vec<u8>>,
    ) -> (Option<usize>, u32) {
        let mut index = if epoch & SCAN_EPOCH_MASK == self.layout_epoch & SCAN_EPOCH_MASK {
            position
        } else {
            0
        };
        let buckets = self.table.num_buckets();
        let mut visited = 0;
        while index < buckets && visited < count {
            if let Some(entry) = self.table.get_bucket(index) {
                visited += 1;
                if !entry.is_expired(now_ms) && keep(entry) {
                    out.push(entry.key().to_vec());
                }
            }
            index += 1;
        }
        let next = if index < buckets { Some(index) } else { None };
        (next, self.layout_epoch & SCAN_EPOCH_MASK)
    }

    /// Picks a pseudo-random live entry using `seed` to choose a start bucket.
    pub fn random_entry(&self, seed: usize, now_ms: u64) -> Option<&Entry> {
        let buckets = self.table.num_buckets();
        if buckets == 0 {
            return None;
        }
        let start = seed % buckets;
        (0..buckets)
            .map(|i| (start + i) % buckets)
            .filter_map(|i| self.table.get_bucket(i))
            .find(|e| !e.is_expired(now_ms))
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
        self.sweep_cursor = 0;
        other.sweep_cursor = 0;
    }
}

impl Drop for ShardData {
    fn drop(&mut self) {
        self.clear();
    }
}
