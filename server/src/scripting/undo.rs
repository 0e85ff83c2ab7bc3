//! The undo log of a declared-keys script run: the state of every key a
//! write command is about to change, restored if the run is abandoned.

use crate::store::{HeldShards, KeyRef, ShardGuard, Store, ValueRef};

/// The state of a key before a script's write, to restore on rollback.
struct Saved {
    db: usize,
    key: Vec<u8>,
    before: Option<(Option<i64>, Vec<u8>, u64)>,
}

/// Writes a script made in a declared-keys run, undone if the run is abandoned.
#[derive(Default)]
pub(super) struct UndoLog {
    saved: Vec<Saved>,
}

impl UndoLog {
    pub(super) fn snapshot(
        &mut self,
        held: &HeldShards<'_>,
        db: usize,
        key: KeyRef<'_>,
        now_ms: u64,
    ) {
        let mut shard = held.shard_for(db, key);
        if matches!(shard, ShardGuard::Scratch(_)) {
            return; // Not held: nothing there can have been changed.
        }
        let before = shard.get(key, now_ms).map(|entry| {
            let expire = entry.expire_at();
            match entry.value() {
                ValueRef::Int(n) => (Some(n), Vec::new(), expire),
                ValueRef::Str(bytes) => (None, bytes.to_vec(), expire),
            }
        });
        self.saved.push(Saved {
            db,
            key: key.bytes.to_vec(),
            before,
        });
    }

    pub(super) fn rollback(self, held: &HeldShards<'_>, store: &Store, now_ms: u64) {
        for saved in self.saved.into_iter().rev() {
            let key = store.key(&saved.key);
            let mut shard = held.shard_for(saved.db, key);
            match &saved.before {
                Some((Some(n), _, expire)) => {
                    shard.set(key, ValueRef::Int(*n), *expire, now_ms);
                }
                Some((None, bytes, expire)) => {
                    shard.set(key, ValueRef::Str(bytes), *expire, now_ms);
                }
                None => {
                    shard.remove(key, now_ms);
                }
            }
        }
    }
}
