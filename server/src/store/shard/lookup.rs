//! Finding keys: live lookups that expire what they meet, reads counted
//! for INFO, peeks that leave access times alone.

use super::*;

impl ShardData {
    /// Finds the bucket of a live key; an expired key is deleted on the way
    /// and reported absent.
    pub(super) fn find_live(&mut self, key: KeyRef<'_>, now_ms: u64) -> Option<usize> {
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
        self.entry_mut_at(index)
    }

    /// [`Self::get_mut`], a missing key first stored as the object `make`
    /// gives, if it gives one (a collection's first element creates it).
    /// One lookup where the key exists, the usual case, where a test for
    /// the key and then [`Self::get_mut`] would look it up twice.
    pub fn get_mut_or_create(
        &mut self,
        key: KeyRef<'_>,
        now_ms: u64,
        make: impl FnOnce() -> Option<Box<Object>>,
    ) -> Option<EntryMut<'_>> {
        let index = match self.find_live(key, now_ms) {
            Some(index) => index,
            None => {
                self.set_object(key, make()?, 0, now_ms);
                self.find_live(key, now_ms)?
            }
        };
        self.entry_mut_at(index)
    }

    /// The entry in bucket `index`, for a caller that may change it.
    fn entry_mut_at(&mut self, index: usize) -> Option<EntryMut<'_>> {
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
                .key_event(crate::store::key_events::MISSED, key.bytes, now_ms);
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
}
