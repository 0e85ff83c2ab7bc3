//! Shard locks held across several commands (a script's whole run).
//!
//! Command handlers never lock a shard directly: they ask their `Ctx`, which
//! either locks the shard for the one command (plain clients) or hands out the
//! shard an enclosing script already holds. A script holds the shards of its
//! declared keys from start to end, which makes it atomic without stopping
//! commands on other shards.
//!
//! A script may still touch a key it did not declare. Its shard is then taken
//! with `try_lock`: waiting for it could deadlock, since the script already
//! holds other shards out of the global ascending order. If `try_lock` fails
//! the access is recorded as a *conflict*, the handler is given an empty
//! scratch shard so it can finish harmlessly, and the script engine undoes the
//! script's writes and runs it again with every shard held.

use std::cell::{Cell, OnceCell, RefCell, RefMut};
use std::ops::{Deref, DerefMut};

use parking_lot::MutexGuard;

use super::{KeyRef, ShardData, Store};

/// A locked shard, either locked for one command or lent by a [`HeldShards`].
pub enum ShardGuard<'a> {
    /// Locked for this command only.
    Owned(MutexGuard<'a, ShardData>),
    /// Held by the enclosing script.
    Held(RefMut<'a, ShardData>),
    /// An empty stand-in after a conflict; whatever is done to it is thrown away.
    Scratch(Box<ShardData>),
}

impl Deref for ShardGuard<'_> {
    type Target = ShardData;
    fn deref(&self) -> &ShardData {
        match self {
            ShardGuard::Owned(guard) => guard,
            ShardGuard::Held(guard) => guard,
            ShardGuard::Scratch(shard) => shard,
        }
    }
}

impl DerefMut for ShardGuard<'_> {
    fn deref_mut(&mut self) -> &mut ShardData {
        match self {
            ShardGuard::Owned(guard) => guard,
            ShardGuard::Held(guard) => guard,
            ShardGuard::Scratch(shard) => shard,
        }
    }
}

/// Something that lends locked shards to the commands a script runs. A trait
/// object so that `Ctx` needs no lifetime for the locks themselves.
pub trait ShardLender {
    /// The shard `index` of database `db`.
    fn lend(&self, db: usize, index: usize) -> ShardGuard<'_>;

    /// True once a shard the borrower needed could not be taken (a
    /// declared-keys script run that must be redone holding everything).
    fn conflicted(&self) -> bool {
        false
    }

    /// Records that the borrower needs more than these shards.
    fn force_conflict(&self) {}
}

impl ShardLender for HeldShards<'_> {
    fn conflicted(&self) -> bool {
        HeldShards::conflicted(self)
    }

    fn force_conflict(&self) {
        HeldShards::force_conflict(self)
    }

    fn lend(&self, db: usize, index: usize) -> ShardGuard<'_> {
        self.shard(db, index)
    }
}

/// One shard held for one write command whose keys all live in it (the
/// usual write while changes are recorded: its change must reach the
/// feed before the shard is released). The same contract as
/// [`HeldShards::declared`] without its per-database tables.
pub struct OneShard<'s> {
    store: &'s Store,
    db: usize,
    index: usize,
    guard: RefCell<MutexGuard<'s, ShardData>>,
    conflict: Cell<bool>,
}

impl<'s> OneShard<'s> {
    /// Locks shard `index` of database `db`.
    pub fn lock(store: &'s Store, db: usize, index: usize) -> OneShard<'s> {
        OneShard {
            store,
            db,
            index,
            guard: RefCell::new(store.db(db).lock_shard(index)),
            conflict: Cell::new(false),
        }
    }
}

impl ShardLender for OneShard<'_> {
    fn lend(&self, db: usize, index: usize) -> ShardGuard<'_> {
        if (db, index) == (self.db, self.index) {
            return ShardGuard::Held(RefMut::map(self.guard.borrow_mut(), |guard| &mut **guard));
        }
        // A command reaching past its keys' shard breaks the contract
        // (the caller asserts it never does); as with a declared set, the
        // shard is taken if free, never waited for.
        match self.store.db(db).try_lock_shard(index) {
            Some(guard) => ShardGuard::Owned(guard),
            None => {
                self.conflict.set(true);
                ShardGuard::Scratch(Box::new(self.store.scratch_shard()))
            }
        }
    }

    fn conflicted(&self) -> bool {
        self.conflict.get()
    }

    fn force_conflict(&self) {
        self.conflict.set(true);
    }
}

/// The shards a script holds, indexed by (database, shard).
pub struct HeldShards<'s> {
    store: &'s Store,
    shards_per_db: usize,
    /// The first shards taken, in the order taken: a limiter script holds
    /// one to three, found here without allocating anything (a table per
    /// database cost a one-command script more to build and drop than its
    /// command).
    few: [OnceCell<Taken<'s>>; FEW],
    /// Per database, created when a run holds more shards than `few`
    /// keeps (a transaction or script holding every shard, mostly).
    slots: OnceCell<Box<[OnceCell<Table<'s>>]>>,
    conflict: Cell<bool>,
}

/// Shards held without a table.
const FEW: usize = 4;

/// One shard held, with where it is.
struct Taken<'s> {
    db: usize,
    index: usize,
    guard: RefCell<MutexGuard<'s, ShardData>>,
}

type Slot<'s> = RefCell<Option<MutexGuard<'s, ShardData>>>;

/// One database's slots, by shard index.
type Table<'s> = Box<[Slot<'s>]>;

impl<'s> HeldShards<'s> {
    /// Locks the shards of `keys` in database `db`, in ascending order.
    pub fn declared<'k>(
        store: &'s Store,
        db: usize,
        keys: impl IntoIterator<Item = KeyRef<'k>>,
    ) -> HeldShards<'s> {
        let held = HeldShards::empty(store);
        let database = store.db(db);
        // Most callers name a key or two (a limiter script's): their shards
        // are sorted on the stack, with no allocation per call.
        let mut few = [0usize; 16];
        let mut count = 0;
        let mut more = Vec::new();
        for key in keys {
            let shard = database.shard_of(key);
            if count < few.len() {
                few[count] = shard;
                count += 1;
            } else {
                more.push(shard);
            }
        }
        let wanted: &mut [usize] = if more.is_empty() {
            &mut few[..count]
        } else {
            more.extend_from_slice(&few[..count]);
            &mut more
        };
        wanted.sort_unstable();
        let mut locked = None;
        for &shard in wanted.iter() {
            if locked != Some(shard) {
                held.keep(db, shard, database.lock_shard(shard));
                locked = Some(shard);
            }
        }
        held
    }

    /// Locks every shard of every database, in ascending order.
    pub fn everything(store: &'s Store) -> HeldShards<'s> {
        let held = HeldShards::empty(store);
        for db in 0..store.databases() {
            let database = store.db(db);
            for shard in 0..held.shards_per_db {
                *held.slot(db, shard).borrow_mut() = Some(database.lock_shard(shard));
            }
        }
        held
    }

    fn empty(store: &'s Store) -> HeldShards<'s> {
        HeldShards {
            store,
            shards_per_db: store.db(0).shard_count(),
            few: Default::default(),
            slots: OnceCell::new(),
            conflict: Cell::new(false),
        }
    }

    /// The table slot of shard `index` of database `db`, its table made
    /// on first use.
    fn slot(&self, db: usize, index: usize) -> &Slot<'s> {
        let databases = self.slots.get_or_init(|| {
            (0..self.store.databases())
                .map(|_| OnceCell::new())
                .collect()
        });
        &databases[db].get_or_init(|| {
            (0..self.shards_per_db)
                .map(|_| RefCell::new(None))
                .collect()
        })[index]
    }

    /// Keeps `guard`, the lock of a shard not held yet: in `few` while
    /// there is room, else in its table slot.
    fn keep(&self, db: usize, index: usize, guard: MutexGuard<'s, ShardData>) {
        let taken = Taken {
            db,
            index,
            guard: RefCell::new(guard),
        };
        let rest = self
            .few
            .iter()
            .try_fold(taken, |taken, cell| match cell.set(taken) {
                Ok(()) => Err(()),
                Err(taken) => Ok(taken),
            });
        if let Ok(taken) = rest {
            *self.slot(db, index).borrow_mut() = Some(taken.guard.into_inner());
        }
    }

    /// The shard if this run holds it.
    fn held(&self, db: usize, index: usize) -> Option<RefMut<'_, ShardData>> {
        for cell in &self.few {
            match cell.get() {
                Some(taken) if (taken.db, taken.index) == (db, index) => {
                    return Some(RefMut::map(taken.guard.borrow_mut(), |guard| &mut **guard));
                }
                Some(_) => {}
                None => break,
            }
        }
        let table = self.slots.get()?.get(db)?.get()?;
        RefMut::filter_map(table[index].borrow_mut(), |guard| {
            guard.as_mut().map(|guard| &mut **guard)
        })
        .ok()
    }

    /// True once a shard the script needed could not be taken.
    pub fn conflicted(&self) -> bool {
        self.conflict.get()
    }

    /// Records that the script needs more than these shards (a command that
    /// acts on whole databases).
    pub fn force_conflict(&self) {
        self.conflict.set(true);
    }

    /// The shard `index` of database `db`: held, taken now with `try_lock`,
    /// or (on conflict) the scratch shard.
    pub fn shard(&self, db: usize, index: usize) -> ShardGuard<'_> {
        if let Some(guard) = self.held(db, index) {
            return ShardGuard::Held(guard);
        }
        // After a conflict every shard not yet taken stays out of reach:
        // taking one now would let a write land that the undo log never
        // saw (its snapshot was given the scratch shard), and the re-run
        // would apply it a second time.
        if self.conflict.get() {
            return ShardGuard::Scratch(Box::new(self.store.scratch_shard()));
        }
        match self.store.db(db).try_lock_shard(index) {
            Some(guard) => self.keep(db, index, guard),
            None => {
                self.conflict.set(true);
                return ShardGuard::Scratch(Box::new(self.store.scratch_shard()));
            }
        }
        #[allow(clippy::expect_used)] // kept just above
        ShardGuard::Held(self.held(db, index).expect("the shard was kept above"))
    }

    /// The shard holding `key` in database `db`.
    pub fn shard_for(&self, db: usize, key: KeyRef<'_>) -> ShardGuard<'_> {
        self.shard(db, self.store.db(db).shard_of(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_past_the_few_kept_inline_are_held_in_tables_and_all_released() {
        let store = Store::new(2, 8, std::sync::Arc::new(crate::store::NoObserver));
        {
            let held = HeldShards::empty(&store);
            let wanted: Vec<(usize, usize)> =
                (0..8).map(|i| (0, i)).chain([(1, 3), (1, 5)]).collect();
            for &(db, index) in &wanted {
                assert!(matches!(held.shard(db, index), ShardGuard::Held(_)));
            }
            // Each is held once, found again, and locked against others.
            for &(db, index) in &wanted {
                assert!(matches!(held.shard(db, index), ShardGuard::Held(_)));
                assert!(store.db(db).try_lock_shard(index).is_none());
            }
            assert!(store.db(1).try_lock_shard(4).is_some());
            assert!(!held.conflicted());
        }
        for db in 0..2 {
            for index in 0..8 {
                assert!(store.db(db).try_lock_shard(index).is_some());
            }
        }
    }

    #[test]
    fn holding_everything_finds_every_shard() {
        let store = Store::new(2, 4, std::sync::Arc::new(crate::store::NoObserver));
        let held = HeldShards::everything(&store);
        for db in 0..2 {
            for index in 0..4 {
                assert!(matches!(held.shard(db, index), ShardGuard::Held(_)));
            }
        }
        assert!(!held.conflicted());
    }

    #[test]
    fn after_a_conflict_a_shard_freed_later_is_still_not_taken() {
        let store = Store::new(1, 4, std::sync::Arc::new(crate::store::NoObserver));
        let held = HeldShards::empty(&store);
        let busy = store.db(0).lock_shard(2);
        assert!(matches!(held.shard(0, 2), ShardGuard::Scratch(_)));
        assert!(held.conflicted());
        drop(busy);
        // Free now, but the run is already doomed to roll back: a write
        // here would escape the undo log.
        assert!(matches!(held.shard(0, 2), ShardGuard::Scratch(_)));
        assert!(matches!(held.shard(0, 3), ShardGuard::Scratch(_)));
    }
}
