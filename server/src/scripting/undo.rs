//! The undo log of a declared-keys script run: the state of every key a
//! write command is about to change, restored if the run is abandoned.

use crate::store::{KeyRef, OwnedValue, ShardGuard, ShardLender, Store};

/// The state of a key before a script's write, to restore on rollback.
struct Saved {
    db: usize,
    key: Vec<u8>,
    before: Option<(OwnedValue, u64)>,
}

/// Writes a script made in a declared-keys run, undone if the run is abandoned.
#[derive(Default)]
pub(super) struct UndoLog {
    saved: Vec<Saved>,
}

impl UndoLog {
    pub(super) fn snapshot(
        &mut self,
        held: &dyn ShardLender,
        store: &Store,
        db: usize,
        key: KeyRef<'_>,
        now_ms: u64,
    ) {
        let mut shard = held.lend(db, store.db(db).shard_of(key));
        if matches!(shard, ShardGuard::Scratch(_)) {
            return; // Not held: nothing there can have been changed.
        }
        // Only a key's first snapshot in the run matters (rollback restores
        // in reverse order); copying a collection again per write would be
        // O(N) per command.
        if self
            .saved
            .iter()
            .any(|saved| saved.db == db && saved.key == key.bytes)
        {
            return;
        }
        let before = shard
            .get(key, now_ms)
            .map(|entry| (OwnedValue::of(entry.value()), entry.expire_at()));
        self.saved.push(Saved {
            db,
            key: key.bytes.to_vec(),
            before,
        });
    }

    pub(super) fn rollback(self, held: &dyn ShardLender, store: &Store, now_ms: u64) {
        for saved in self.saved.into_iter().rev() {
            let key = store.key(&saved.key);
            let mut shard = held.lend(saved.db, store.db(saved.db).shard_of(key));
            match saved.before {
                Some((value, expire)) => {
                    shard.set_owned(key, value, expire, now_ms);
                }
                None => {
                    shard.remove(key, now_ms);
                }
            }
        }
    }
}
