//! [`EntryMut`]: one entry open for change, with the shard's accounting
//! kept right whatever the caller changes.

use super::*;

/// A mutable view of one entry that keeps the shard's memory and TTL
/// accounting right whatever the caller changes.
pub struct EntryMut<'a> {
    pub(super) entry: &'a mut Entry,
    pub(super) slab: &'a mut Slab,
    pub(super) volatile: &'a mut usize,
    pub(super) bytes: &'a mut usize,
    pub(super) used_memory: &'a AtomicIsize,
    pub(super) heap_before: usize,
    pub(super) had_deadline: bool,
    /// Set by every mutating method: the drop then touches watchers.
    pub(super) modified: bool,
    pub(super) observers: &'a KeyObservers,
    pub(super) field_queue: &'a mut FieldQueue,
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

    /// The collection, for a change Redis does not count as the key's (a
    /// stream's consumer groups: a read for a group, an acknowledgement):
    /// memory is accounted as for any change, WATCHers and tracking
    /// clients are not told.
    pub fn object_mut_quietly(&mut self) -> Option<&mut Object> {
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
