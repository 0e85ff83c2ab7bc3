//! Commands: the dispatcher (`dispatch.rs`, with the checks before a
//! command runs in `rejection.rs`), the handler bindings (`handlers.rs`)
//! and one file per command family. What a command *is* (arity, flags, keys, docs)
//! is the catalog's (`crate::catalog`); this module is how it runs.
//!
//! Handlers are plain synchronous functions `fn(&mut Ctx, &[&[u8]]) -> Reply`.
//! They see the arguments (argv[0] is the command name) and the shared state,
//! never a socket, so the connection loop, MULTI/EXEC and scripts can all run
//! the same code. Arity, authentication and the maxmemory check happen once,
//! in [`dispatch`], from the catalog; handlers never count their arguments
//! against the arity.

pub mod acl;
pub mod args;
pub mod bitfield;
pub mod bitmap;
pub mod blocking;
pub mod client;
mod client_state;
pub mod cluster;
pub mod collection;
pub mod command;
pub mod config;
pub mod connection;
pub mod debug;
mod dispatch;
pub mod error;
pub mod failover;
pub mod functions;
pub mod geo;
pub mod geo_search;
pub mod handlers;
#[cfg(any(test, feature = "fuzzing"))]
pub mod harness;
pub mod hash;
pub mod hash_expiry;
pub mod hyperloglog;
pub mod increx;
pub mod info;
pub mod keys;
pub mod latency;
pub mod lcs;
pub mod list;
mod lolwut;
pub mod memory;
pub mod migrate;
pub mod module;
pub mod mpop;
pub mod multi;
pub mod object;
pub mod persistence;
pub mod propagate;
pub mod pubsub;
mod rejection;
pub mod replication;
mod routing;
pub mod scripting;
pub mod server;
pub mod set;
pub mod sort;
mod stream;
mod stream_group;
mod stream_info;
mod stream_pending;
mod stream_read;
pub mod string;
pub mod string_conditions;
#[cfg(test)]
mod tests;
pub mod throttle;
pub mod zset;
pub mod zset_algebra;
pub mod zset_range;

use crate::catalog::{registry, Command};
use crate::resp::Reply;
use crate::state::Shared;
pub use crate::stats::{error_code, ErrorCounts};
use crate::store::{access_clock, Db, KeyRef, MultiLock, ShardGuard, ShardLender};
pub use client_state::{After, BatchStats, ClientState, ReplyMode, Snapshot};
pub use dispatch::{dispatch, dispatch_checked, feed_monitors, log_unblocked};
pub use handlers::Handler;

/// What a handler can reach.
pub struct Ctx<'a> {
    /// Server-wide state.
    pub shared: &'a Shared,
    /// The calling client.
    pub client: &'a mut ClientState,
    /// The time this command runs at, read once per batch from the server clock.
    pub now_ms: u64,
    /// Shards held by an enclosing script; `None` for a plain command, which
    /// locks what it needs for itself.
    pub held: Option<&'a dyn ShardLender>,
}

impl<'a> Ctx<'a> {
    /// The selected database.
    pub fn db(&self) -> &'a Db {
        self.shared.store.db(self.client.db)
    }

    /// Locks shard `index` of database `db` (or borrows it from the script
    /// holding it).
    pub fn lock_shard(&self, db: usize, index: usize) -> ShardGuard<'a> {
        match self.held {
            Some(held) => held.lend(db, index),
            None => ShardGuard::Owned(self.shared.store.db(db).lock_shard(index)),
        }
    }

    /// Locks the shard holding `key` in database `db`.
    pub fn lock_in(&self, db: usize, key: KeyRef<'_>) -> ShardGuard<'a> {
        self.lock_shard(db, self.shared.store.db(db).shard_of(key))
    }

    /// Locks the shard holding `key` in the selected database.
    #[inline]
    pub fn lock(&self, key: KeyRef<'_>) -> ShardGuard<'a> {
        self.lock_in(self.client.db, key)
    }

    /// Locks every shard the keys live in (selected database), ascending.
    ///
    /// On a keyspace past the caches, the keys' memory is asked for first:
    /// their tables' before the locks, their entries' once the locks are
    /// held. A command's several lookups then overlap their cache misses,
    /// and its locks are held that much less time (MSET of ten random keys
    /// held about half the shards through ten misses one after the other).
    pub fn lock_keys(&self, keys: &[KeyRef<'_>]) -> MultiLock<'a> {
        let db = self.db();
        let prefetch = keys.len() > 1 && self.shared.prefetching();
        if prefetch {
            db.prefetch_all_buckets(keys);
        }
        let mut wanted: Vec<usize> = keys.iter().map(|k| db.shard_of(*k)).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let guards = wanted
            .into_iter()
            .map(|i| (i, self.lock_shard(self.client.db, i)))
            .collect();
        let mut locked = MultiLock::new(db, guards);
        if prefetch {
            locked.prefetch_entries(keys);
        }
        locked
    }

    /// Locks every shard of database `db`, ascending.
    pub fn lock_all(&self, db: usize) -> MultiLock<'a> {
        let database = self.shared.store.db(db);
        let guards = (0..database.shard_count())
            .map(|i| (i, self.lock_shard(db, i)))
            .collect();
        MultiLock::new(database, guards)
    }

    /// Keys and keys with a deadline in database `db`, counted through the
    /// locks this context may take (a script or transaction may hold them).
    pub fn db_sizes(&self, db: usize) -> (usize, usize) {
        (0..self.shared.store.db(db).shard_count())
            .map(|i| {
                let shard = self.lock_shard(db, i);
                (shard.len(), shard.volatile_len())
            })
            .fold((0, 0), |(k, v), (a, b)| (k + a, v + b))
    }

    /// Hashes a key for lookup.
    #[inline]
    pub fn key<'k>(&self, bytes: &'k [u8]) -> KeyRef<'k> {
        self.shared.store.key(bytes)
    }

    /// Whether this client's commands must be applied whatever they cost
    /// (no load timeout, no work limit): the master's link, or the
    /// append-only file's replay, as Redis's mustObeyClient.
    pub fn must_obey(&self) -> bool {
        self.client.master || self.client.info.id == persistence::AOF_REPLAY_CLIENT_ID
    }

    /// Raises keyspace notification `event` (of `class`, an
    /// `event_classes::class` flag) about `key` in the selected database,
    /// at the point of the change, as Redis's notifyKeyspaceEvent: one
    /// load while notifications are off.
    #[inline]
    pub fn notify(&self, class: u32, event: &str, key: &[u8]) {
        self.notify_in(self.client.db, class, event, key);
    }

    /// [`Self::notify`] for a key in database `db` (MOVE, COPY ... DB).
    #[inline]
    pub fn notify_in(&self, db: usize, class: u32, event: &str, key: &[u8]) {
        let events = &self.shared.keyspace_events;
        if events.wants(class) {
            events.notify(class, event, key, db, self.now_ms);
        }
    }
}

/// Resolves argv to a catalog row and its index: the command, or its
/// subcommand for container commands such as CONFIG. Errors are the replies
/// Redis gives.
pub fn resolve(argv: &[&[u8]]) -> Result<&'static Command, Reply> {
    resolve_indexed(argv).map(|(_, command)| command)
}

/// [`resolve`], with the command's registry index.
pub fn resolve_indexed(argv: &[&[u8]]) -> Result<(usize, &'static Command), Reply> {
    let registry = registry();
    // One lookup; a full `container|sub` name typed as a command is unknown,
    // as in Redis.
    let Some((index, command)) = registry.lookup_indexed(argv[0]) else {
        return Err(Reply::error_bytes(error::unknown_command(argv)));
    };
    if command.subcommands.is_empty() || argv.len() < 2 {
        return Ok((index, command));
    }
    let mut full = Vec::with_capacity(command.name.len() + 1 + argv[1].len());
    full.extend_from_slice(command.name.as_bytes());
    full.push(b'|');
    full.extend_from_slice(argv[1]);
    match registry.index_of(&full) {
        Some(index) => Ok((index, registry.command(index))),
        None => Err(Reply::error_bytes(error::unknown_subcommand(
            argv[0], argv[1],
        ))),
    }
}

/// True when `argc` satisfies `arity` (negative: at least -arity).
pub fn arity_ok(arity: i32, argc: usize) -> bool {
    if arity >= 0 {
        argc == arity as usize
    } else {
        argc >= arity.unsigned_abs() as usize
    }
}
