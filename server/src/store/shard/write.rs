//! Storing and removing keys, with the memory, deadline, snapshot,
//! slot-index and watcher bookkeeping each change needs.

use super::*;

impl ShardData {
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

    pub(super) fn put(&mut self, key: KeyRef<'_>, mut entry: Entry, now_ms: u64) -> bool {
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
        let table_after = self.table.allocation_size();
        if table_after != table_before {
            // The table was reallocated: lookups prefetch from its new place.
            self.bucket_hint.publish(&self.table);
        }
        delta += table_after as isize - table_before as isize;
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
                .key_event(crate::store::key_events::NEW, key.bytes, now_ms);
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
    pub(in crate::store) fn unindex(&mut self, key: &[u8]) {
        if let Some(index) = self.slot_index.as_deref_mut() {
            index.remove(key_slot(key), self.hasher.hash_one(key));
            self.account(-(SlotIndex::BYTES_PER_KEY as isize));
        }
    }

    /// Accounting for an entry that has just left the table, and its block
    /// back to the slab.
    pub(in crate::store) fn forget(&mut self, removed: Entry) {
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
        self.bucket_hint.publish(&self.table);
        self.sweep_cursor = 0;
        self.field_queue.clear();
        self.account(-bytes);
    }
}
