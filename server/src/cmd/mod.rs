//! Commands: the table, the dispatcher and one file per command family.
//!
//! Handlers are plain synchronous functions `fn(&mut Ctx, &[&[u8]]) -> Reply`.
//! They see the arguments (argv[0] is the command name) and the shared state,
//! never a socket, so the connection loop, MULTI/EXEC and scripts can all run
//! the same code. Arity, authentication and the maxmemory check happen once,
//! in [`dispatch`], from the table; handlers never count their arguments
//! against the arity.

pub mod args;
pub mod collection;
pub mod command;
pub mod config;
pub mod connection;
pub mod error;
pub mod hash;
pub mod info;
pub mod keys;
pub mod list;
pub mod multi;
pub mod pubsub;
pub mod scripting;
pub mod server;
pub mod set;
pub mod string;
pub mod table;
pub mod zset;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::resp::{Protocol, Reply};
use crate::state::{ClientInfo, Shared};
use crate::store::{Db, KeyRef, MultiLock, ShardGuard, ShardLender};
use table::{flags, registry, Command};

/// A connection's own state, owned by its connection task.
pub struct ClientState {
    /// What other connections may see of this client.
    pub info: Arc<ClientInfo>,
    /// Selected database.
    pub db: usize,
    /// Protocol version.
    pub proto: Protocol,
    /// True once AUTH succeeded, or when no password is required.
    pub authenticated: bool,
    /// QUIT: close once this reply is written.
    pub close_after_reply: bool,
    /// DEBUG SLEEP: pause this connection before reading further.
    pub sleep: Option<Duration>,
    /// Statistics gathered during one read batch, flushed once per batch so
    /// that workers do not contend on shared counters for every command.
    pub batch: BatchStats,
    /// Commands queued since MULTI.
    pub transaction: Option<multi::Transaction>,
    /// Keys WATCHed since the last EXEC, DISCARD or UNWATCH, and the flag
    /// their shards raise when one is written.
    pub watches: multi::Watches,
    /// Channel and pattern subscriptions, once the client subscribed.
    pub pubsub: Option<crate::pubsub::Subscriptions>,
    /// True for the client a script's redis.call runs as.
    pub in_script: bool,
}

impl ClientState {
    /// A client that has just connected.
    pub fn new(info: Arc<ClientInfo>, authenticated: bool) -> ClientState {
        ClientState {
            info,
            db: 0,
            proto: Protocol::Resp2,
            authenticated,
            close_after_reply: false,
            sleep: None,
            batch: BatchStats::default(),
            transaction: None,
            watches: multi::Watches::default(),
            pubsub: None,
            in_script: false,
        }
    }
}

/// Per-command counters of one batch: (command index, calls, usec, failed, rejected).
#[derive(Default)]
pub struct BatchStats {
    commands: Vec<(usize, u64, u64, u64, u64)>,
    /// Keyspace hits.
    pub hits: u64,
    /// Keyspace misses.
    pub misses: u64,
    /// Error replies.
    pub errors: u64,
    /// Native runs per known limiter script (`tally_lua::SCRIPTS` order).
    pub native_script_runs: [u64; tally_lua::SCRIPTS.len()],
    /// Lua runs of known limiter scripts (fallbacks or native path off).
    pub fallback_script_runs: [u64; tally_lua::SCRIPTS.len()],
    /// Lua runs of any script.
    pub lua_script_runs: u64,
}

impl BatchStats {
    fn slot(&mut self, index: usize) -> &mut (usize, u64, u64, u64, u64) {
        let at = match self.commands.iter().position(|c| c.0 == index) {
            Some(at) => at,
            None => {
                self.commands.push((index, 0, 0, 0, 0));
                self.commands.len() - 1
            }
        };
        &mut self.commands[at]
    }

    /// Adds the batch to the server's counters and starts a new batch.
    pub fn flush(&mut self, shared: &Shared) {
        let stats = &shared.stats;
        let mut processed = 0;
        for (index, calls, usec, failed, rejected) in self.commands.drain(..) {
            let c = &stats.commands[index];
            if calls != 0 {
                c.calls.fetch_add(calls, Ordering::Relaxed);
                c.usec.fetch_add(usec, Ordering::Relaxed);
            }
            if failed != 0 {
                c.failed_calls.fetch_add(failed, Ordering::Relaxed);
            }
            if rejected != 0 {
                c.rejected_calls.fetch_add(rejected, Ordering::Relaxed);
            }
            processed += calls;
        }
        stats
            .commands_processed
            .fetch_add(processed, Ordering::Relaxed);
        for (counter, value) in [
            (&stats.keyspace_hits, &mut self.hits),
            (&stats.keyspace_misses, &mut self.misses),
            (&stats.total_error_replies, &mut self.errors),
        ] {
            if *value != 0 {
                counter.fetch_add(*value, Ordering::Relaxed);
                *value = 0;
            }
        }
        let scripts = &shared.scripts;
        for (index, (native, lua)) in self
            .native_script_runs
            .iter_mut()
            .zip(self.fallback_script_runs.iter_mut())
            .enumerate()
        {
            if *native != 0 {
                scripts.known_runs[index]
                    .0
                    .fetch_add(std::mem::take(native), Ordering::Relaxed);
            }
            if *lua != 0 {
                scripts.known_runs[index]
                    .1
                    .fetch_add(std::mem::take(lua), Ordering::Relaxed);
            }
        }
        if self.lua_script_runs != 0 {
            scripts
                .lua_runs
                .fetch_add(std::mem::take(&mut self.lua_script_runs), Ordering::Relaxed);
        }
    }
}

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
    pub fn lock_keys(&self, keys: &[KeyRef<'_>]) -> MultiLock<'a> {
        let db = self.db();
        let mut wanted: Vec<usize> = keys.iter().map(|k| db.shard_of(*k)).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let guards = wanted
            .into_iter()
            .map(|i| (i, self.lock_shard(self.client.db, i)))
            .collect();
        MultiLock::new(db, guards)
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

    /// Counts a keyspace lookup for INFO's keyspace_hits / keyspace_misses.
    #[inline]
    pub fn count_lookup(&mut self, hit: bool) {
        if hit {
            self.client.batch.hits += 1;
        } else {
            self.client.batch.misses += 1;
        }
    }
}

/// Resolves argv to a table row and its stats index: the command, or its
/// subcommand for container commands such as CONFIG. Errors are the replies
/// Redis gives.
pub fn resolve(argv: &[&[u8]]) -> Result<&'static Command, Reply> {
    resolve_indexed(argv).map(|(_, command)| command)
}

fn resolve_indexed(argv: &[&[u8]]) -> Result<(usize, &'static Command), Reply> {
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

/// Runs one command: table lookup, arity, authentication, the maxmemory
/// check, then the handler, with statistics.
pub fn dispatch(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let (index, command) = match resolve_indexed(argv) {
        Ok(found) => found,
        Err(reply) => {
            ctx.client.batch.errors += 1;
            multi::flag_failed(ctx);
            return reply;
        }
    };
    if multi::queues(ctx, command) {
        return match rejection(ctx, command, argv) {
            Some(reply) => {
                ctx.client.batch.slot(index).4 += 1;
                ctx.client.batch.errors += 1;
                multi::flag_failed(ctx);
                reply
            }
            None => multi::queue(ctx, command, argv),
        };
    }
    let reply = check_and_call(ctx, index, command, argv);
    if reply.is_error() {
        ctx.client.batch.errors += 1;
    }
    reply
}

/// Why a command is refused before it runs (arity, authentication, a busy
/// script, maxmemory), if it is.
fn rejection(ctx: &Ctx<'_>, command: &'static Command, argv: &[&[u8]]) -> Option<Reply> {
    if !arity_ok(command.arity, argv.len()) {
        Some(Reply::error(error::wrong_arity(command.name)))
    } else if !ctx.client.authenticated && command.flags & flags::NO_AUTH == 0 {
        Some(Reply::error(error::NOAUTH))
    } else if ctx.held.is_none()
        && command.flags & flags::ALLOW_BUSY == 0
        && ctx.shared.scripts.busy()
    {
        Some(Reply::error(crate::scripting::BUSY))
    } else if command.flags & flags::DENYOOM != 0 && over_maxmemory(ctx, argv) {
        Some(Reply::error(error::OOM))
    } else {
        pubsub::subscribed_refusal(ctx, command.name)
    }
}

/// Adds a command to the slow log. A script's commands are shown as Redis
/// shows its Lua client's: address `?:0`, no name.
#[cold]
fn log_slow(ctx: &Ctx<'_>, argv: &[&[u8]], usec: u64) {
    let caller = if ctx.client.in_script {
        crate::slowlog::Caller {
            peer: "?:0".to_string(),
            name: Vec::new(),
        }
    } else {
        crate::slowlog::Caller {
            peer: ctx.client.info.addr.to_string(),
            name: ctx.client.info.name.lock().clone().unwrap_or_default(),
        }
    };
    ctx.shared
        .slowlog
        .record(argv, usec, ctx.now_ms / 1000, caller);
}

/// maxmemory's test for a command that may grow memory, counting its own
/// arguments as Redis does (they are in its used memory while it runs).
fn over_maxmemory(ctx: &Ctx<'_>, argv: &[&[u8]]) -> bool {
    let shared = ctx.shared;
    // No limit: do not even add up the arguments.
    if shared.maxmemory.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        return false;
    }
    shared.over_maxmemory_with(argv.iter().map(|a| a.len()).sum())
}

fn check_and_call(
    ctx: &mut Ctx<'_>,
    index: usize,
    command: &'static Command,
    argv: &[&[u8]],
) -> Reply {
    if let Some(reply) = rejection(ctx, command, argv) {
        ctx.client.batch.slot(index).4 += 1;
        if command.name == "exec" {
            return multi::exec_abort(ctx, reply);
        }
        return reply;
    }
    ctx.client.info.last_command.store(index, Ordering::Relaxed);
    // Commands a script runs are counted but not timed: their time is the
    // script's, which EVAL's own entry measures, and two clock reads per
    // redis.call would be a fifth of a short script's cost.
    let reply;
    let usec = if ctx.held.is_some() {
        reply = (command.handler)(ctx, argv);
        0
    } else {
        let started = Instant::now();
        reply = (command.handler)(ctx, argv);
        started.elapsed().as_micros() as u64
    };
    if command.flags & flags::SKIP_SLOWLOG == 0 && ctx.shared.slowlog.wants(usec) {
        log_slow(ctx, argv, usec);
    }
    let slot = ctx.client.batch.slot(index);
    slot.1 += 1;
    slot.2 += usec;
    if reply.is_error() {
        slot.3 += 1;
    }
    ctx.client.info.last_command.store(index, Ordering::Relaxed);
    reply
}
