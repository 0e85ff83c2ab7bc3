//! Commands: the dispatcher, the handler bindings (`handlers.rs`) and one
//! file per command family. What a command *is* (arity, flags, keys, docs)
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
pub mod error;
pub mod failover;
pub mod functions;
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
pub mod memory;
pub mod migrate;
pub mod mpop;
pub mod multi;
pub mod object;
pub mod persistence;
pub mod propagate;
pub mod pubsub;
pub mod replication;
mod routing;
pub mod scripting;
pub mod server;
pub mod set;
pub mod sort;
pub mod string;
pub mod string_conditions;
#[cfg(test)]
mod tests;
pub mod throttle;
pub mod zset;
pub mod zset_algebra;

use std::sync::atomic::Ordering;

use crate::catalog::{flags, registry, Command};
use crate::cluster::Access;
use crate::resp::Reply;
use crate::state::Shared;
pub use crate::stats::{error_code, ErrorCounts};
use crate::store::{access_clock, Db, KeyRef, MultiLock, ShardGuard, ShardLender};
pub use client_state::{After, BatchStats, ClientState, ReplyMode, Snapshot};
pub use handlers::Handler;
use routing::{is_cluster_redirection, routed, slot_gate};

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

/// Runs one command: table lookup, arity, authentication, the maxmemory
/// check, then the handler, with statistics.
pub fn dispatch(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if ctx.client.acl_generation != ctx.shared.acl.generation() {
        acl::refresh_user(ctx);
    }
    let (index, command) = match resolve_indexed(argv) {
        Ok(found) => found,
        Err(reply) => {
            count_errors(ctx, &reply);
            multi::flag_failed(ctx);
            forget_asking(ctx, None);
            return reply;
        }
    };
    let reply = dispatch_resolved(ctx, index, command, argv);
    forget_asking(ctx, Some(command));
    reply
}

/// [`dispatch`] for a command already looked up: a script's redis.call
/// resolves the command for its own checks first, as Redis's scriptCall
/// hands call() the command it found.
pub fn dispatch_checked(
    ctx: &mut Ctx<'_>,
    index: usize,
    command: &'static Command,
    argv: &[&[u8]],
) -> Reply {
    if ctx.client.acl_generation != ctx.shared.acl.generation() {
        acl::refresh_user(ctx);
    }
    let reply = dispatch_resolved(ctx, index, command, argv);
    forget_asking(ctx, Some(command));
    reply
}

/// ASKING holds for the next command only (a transaction's until EXEC),
/// as Redis's resetClient.
#[inline]
fn forget_asking(ctx: &mut Ctx<'_>, command: Option<&'static Command>) {
    if ctx.client.asking
        && ctx.held.is_none()
        && !ctx.client.in_script
        && ctx.client.transaction.is_none()
        && command.is_none_or(|c| c.name != "asking")
    {
        ctx.client.asking = false;
    }
}

fn dispatch_resolved(
    ctx: &mut Ctx<'_>,
    index: usize,
    command: &'static Command,
    argv: &[&[u8]],
) -> Reply {
    if held_by_pause(ctx, index, command, argv) {
        return Reply::Nothing;
    }
    if multi::queues(ctx, command) {
        return match rejection(ctx, index, command, argv) {
            Some(_) if ctx.client.after.retries() => Reply::Nothing,
            Some(reply) => {
                ctx.client.batch.counts(index).rejected += 1;
                count_errors(ctx, &reply);
                multi::flag_failed(ctx);
                reply
            }
            None => multi::queue(ctx, command, argv),
        };
    }
    let reply = check_and_call(ctx, index, command, argv);
    // A script's reply was counted by the script run, error by error.
    if !std::mem::take(&mut ctx.client.reply_errors_counted) {
        count_errors(ctx, &reply);
    }
    reply
}

/// Counts an error reply in INFO's total_error_replies and errorstats.
fn count_errors(ctx: &mut Ctx<'_>, reply: &Reply) {
    if let Reply::Error(text) = reply {
        ctx.client.batch.errors.count(text);
    }
}

/// CLIENT PAUSE: true (and the client told to wait) when the command must
/// wait for the pause to end. Checked for clients' own commands only, not
/// for those a script or EXEC runs. Redis checks after arity and
/// authentication; a command those refuse is refused at once here too.
fn held_by_pause(
    ctx: &mut Ctx<'_>,
    index: usize,
    command: &'static Command,
    argv: &[&[u8]],
) -> bool {
    if ctx.held.is_some() || ctx.client.in_script || ctx.client.master {
        return false;
    }
    let may_write = || {
        command.flags & (flags::WRITE | flags::MAY_REPLICATE) != 0
            || (command.name == "exec" && multi::may_write(ctx.client))
    };
    if !ctx.shared.pause.holds(may_write) || rejection(ctx, index, command, argv).is_some() {
        return false;
    }
    ctx.client.then(After::WaitForPause);
    true
}

/// Why a command is refused before it runs (arity, authentication, a busy
/// script, maxmemory), if it is.
/// `index`: the command's registry index.
fn rejection(
    ctx: &mut Ctx<'_>,
    index: usize,
    command: &'static Command,
    argv: &[&[u8]],
) -> Option<Reply> {
    if !arity_ok(command.arity, argv.len()) {
        Some(Reply::error(error::wrong_arity(command.name)))
    } else if ctx.client.master {
        // The master's commands are obeyed (see `ClientState::master`).
        None
    } else if !ctx.client.authenticated && command.flags & flags::NO_AUTH == 0 {
        Some(Reply::error(error::NOAUTH))
    } else if let Err(denied) = permitted(ctx, index, command, argv) {
        Some(Reply::error(denied))
    } else if let Some(refusal) = routed(ctx, command, argv) {
        Some(refusal)
    } else if ctx.held.is_none()
        && command.flags & flags::ALLOW_BUSY == 0
        && ctx.shared.scripts.busy()
    {
        Some(Reply::error(ctx.shared.scripts.busy_error()))
    } else if ctx.client.monitor.is_some()
        && command.flags & (flags::WRITE | flags::READONLY | flags::MAY_REPLICATE) != 0
    {
        // A monitor is a replica to Redis, and replicas may not touch keys.
        Some(Reply::error("ERR Replica can't interact with the keyspace"))
    } else if command.flags & flags::DENYOOM != 0
        && !ctx.client.in_script
        && over_maxmemory(ctx, argv)
    {
        // A script's commands are checked by the bridge, by Redis's rules
        // for scripts (`scripting::bridge`).
        Some(Reply::error(error::OOM))
    } else if (command.flags & flags::WRITE != 0 || command.name == "ping")
        && ctx
            .shared
            .persistence
            .writes_refused
            .load(Ordering::Relaxed)
    {
        // Redis refuses PING too, so a health check notices.
        Some(Reply::error(error::MISCONF))
    } else if (command.flags & flags::WRITE != 0 || command.name == "ping")
        && ctx.shared.aof.write_failed.load(Ordering::Relaxed)
    {
        ctx.shared
            .aof
            .write_refusal()
            .map(|text| Reply::error_bytes(text.into_bytes()))
    } else if command.flags & flags::WRITE != 0
        && !replication::enough_good_replicas(ctx.shared, ctx.now_ms)
    {
        Some(Reply::error(error::NOREPLICAS))
    } else if (command.flags & flags::WRITE != 0
        || (command.name == "exec" && multi::may_write(ctx.client)))
        && ctx.shared.master_link.refuses_writes()
    {
        Some(Reply::error(error::READONLY_REPLICA))
    } else if command.flags & flags::STALE == 0 && ctx.shared.master_link.refuses_stale_reads() {
        Some(Reply::error(error::MASTERDOWN))
    } else if command.flags & flags::LOADING == 0
        && ctx.shared.persistence.loading.load(Ordering::Relaxed)
    {
        Some(Reply::error(error::LOADING))
    } else {
        pubsub::subscribed_refusal(ctx, command.name)
    }
}

/// The ACL check of a client's command (a script's are checked by the
/// script bridge, with the script's wording): the client's user is read
/// again first if any user changed since; a refusal is logged (ACL LOG)
/// and returned as Redis's NOPERM text.
fn permitted(
    ctx: &Ctx<'_>,
    index: usize,
    command: &'static Command,
    argv: &[&[u8]],
) -> Result<(), String> {
    if ctx.client.in_script {
        return Ok(());
    }
    let user = &ctx.client.user;
    if user.unrestricted() {
        return Ok(());
    }
    crate::acl::check_indexed(user, command, index, argv).map_err(|denied| {
        let context = if ctx.held.is_some() || ctx.client.transaction.is_some() {
            crate::acl::Context::Multi
        } else {
            crate::acl::Context::TopLevel
        };
        acl::log_denial(ctx, user, command, argv, denied, context);
        if ctx.held.is_some() {
            // Run by EXEC: the rules changed since it was queued.
            denied.exec_error()
        } else {
            denied.error(command)
        }
    })
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

/// Shows a command to the MONITOR clients: as the script's (`lua`) when a
/// script runs it, else as the client's.
#[cold]
pub fn feed_monitors(ctx: &Ctx<'_>, argv: &[&[u8]]) {
    let source = match &ctx.client.info.addr {
        _ if ctx.client.in_script => "lua".to_string(),
        // Redis names a Unix socket client `unix:<path>` here.
        crate::clients::ClientAddr::Unix(path) => format!("unix:{path}"),
        addr => addr.to_string(),
    };
    ctx.shared
        .monitors
        .feed(ctx.shared.clock.now_us(), ctx.client.db, &source, argv);
}

/// CLIENT TRACKING (default mode): remembers the keys a read-only command
/// read, unless OPTIN/OPTOUT with CLIENT CACHING say otherwise; then
/// CLIENT CACHING's word is spent, as in Redis (unless inside MULTI or the
/// command was a CLIENT subcommand). A script's declared keys are
/// remembered when the script ran a read-only command (EVAL_RO included,
/// whatever its own flags), as Redis's call() does.
#[cold]
fn track_reads(ctx: &mut Ctx<'_>, command: &Command, argv: &[&[u8]]) {
    let Some(mode) = &ctx.client.tracking else {
        return;
    };
    let caching = ctx.client.caching;
    let read = if command.group == "scripting" && command.name.starts_with("eval") {
        std::mem::take(&mut ctx.client.script_read)
    } else {
        command.flags & flags::READONLY != 0
    };
    let wanted = !mode.bcast && read && !((mode.optin && !caching) || (mode.optout && caching));
    if wanted {
        let keys: Vec<&[u8]> = command
            .key_positions(argv)
            .into_iter()
            .map(|i| argv[i])
            .collect();
        if !keys.is_empty() {
            ctx.shared.tracking.remember(ctx.client.info.id, &keys);
        }
    }
    if ctx.client.transaction.is_none() && !command.name.starts_with("client|") {
        ctx.client.caching = false;
    }
}

/// Adds a command past `latency-monitor-threshold` to the latency monitor,
/// as Redis's call() does: `fast-command` for a command flagged fast,
/// `command` for any other. EXEC and script runs are measured whole.
#[cold]
fn monitor_latency(ctx: &Ctx<'_>, command: &Command, latency_ms: u64) {
    let event = if command.flags & flags::FAST != 0 {
        "fast-command"
    } else {
        "command"
    };
    ctx.shared
        .stats
        .latency_monitor
        .add(event, latency_ms, ctx.now_ms / 1000);
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

/// Runs the handler. While the append-only file is on, a write command
/// also leaves what it propagates: on its own, it runs holding the shards
/// of its keys (all of them when its keys are not known up front) and its
/// change is appended to the feed before they are released, so changes
/// reach the feed in the order they reached the keys; inside a
/// transaction or script, its change is kept for the enclosing run to
/// append.
#[inline]
fn call(ctx: &mut Ctx<'_>, index: usize, command: &'static Command, argv: &[&[u8]]) -> Reply {
    let handler = handlers::handler(index);
    // CLIENT NO-TOUCH (Redis 7.2): the client's commands leave the keys'
    // access times alone, except TOUCH, whose purpose they are.
    let _access = ctx
        .client
        .info
        .no_touch
        .load(Ordering::Relaxed)
        .then(|| access_clock::scope(command.name != "touch"));
    if command.flags & flags::WRITE == 0 {
        let reply = handler(ctx, argv);
        // A read that refreshed a cache held in the value (PFCOUNT) left
        // that change to propagate; inside a run, the run appends it.
        if !ctx.client.propagated.is_empty() && !propagate::inside_run(ctx) {
            propagate::append_pending(ctx);
        }
        return reply;
    }
    if propagate::inside_run(ctx) {
        // The enclosing run holds the shards: the feed cannot switch on
        // between this test and the change.
        let reply = handler(ctx, argv);
        if ctx.shared.store.feed().active() {
            record_change(ctx, command, argv, &reply);
        }
        return reply;
    }
    let feed = ctx.shared.store.feed();
    if let Some(reply) = feed.unrecorded(|| handler(ctx, argv)) {
        return reply;
    }
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let (one, many);
    let held: &dyn ShardLender = if multi::keys_known(command) {
        let keys: Vec<_> = command
            .key_positions(argv)
            .into_iter()
            .map(|i| store.key(argv[i]))
            .collect();
        let database = store.db(db);
        match keys.split_first() {
            // The usual write: every key in one shard.
            Some((first, rest))
                if rest
                    .iter()
                    .all(|k| database.shard_of(*k) == database.shard_of(*first)) =>
            {
                one = crate::store::OneShard::lock(store, db, database.shard_of(*first));
                &one
            }
            _ => {
                many = crate::store::HeldShards::declared(store, db, keys.iter().copied());
                &many
            }
        }
    } else {
        many = crate::store::HeldShards::everything(store);
        &many
    };
    let mut inner = Ctx {
        shared: ctx.shared,
        client: &mut *ctx.client,
        now_ms: ctx.now_ms,
        held: Some(held),
    };
    let reply = handler(&mut inner, argv);
    // The shards of a command's keys are all it touches (commands that
    // reach further take every shard above), so nothing can have gone to
    // a stand-in shard.
    debug_assert!(
        !held.conflicted(),
        "{} touched a shard it did not declare",
        command.name
    );
    // Appended while the shards are still held (they go with `one` or
    // `many` on return).
    record_change(&mut inner, command, argv, &reply);
    propagate::append_pending(&mut inner);
    reply
}

/// Keeps what a write command that succeeded propagates (see
/// `propagate.rs`).
fn record_change(ctx: &mut Ctx<'_>, command: &Command, argv: &[&[u8]], reply: &Reply) {
    if reply.is_error() {
        return;
    }
    let db = ctx.client.db;
    match propagate::propagated(command, argv, reply, ctx.now_ms) {
        propagate::Propagation::AsItCame => ctx.client.propagated.push(db, argv),
        propagate::Propagation::Instead(commands) => {
            for change in commands {
                ctx.client.propagated.push(db, &change);
            }
        }
    }
}

fn check_and_call(
    ctx: &mut Ctx<'_>,
    index: usize,
    command: &'static Command,
    argv: &[&[u8]],
) -> Reply {
    let _gate = slot_gate(ctx, command, argv);
    let rejected = rejection(ctx, index, command, argv);
    ctx.client.gate_slots = routing::GateSlots::Unknown;
    if let Some(reply) = rejected {
        if ctx.client.after.retries() {
            // Not refused: it runs again once its keys are moved.
            return Reply::Nothing;
        }
        ctx.client.batch.counts(index).rejected += 1;
        if command.name == "exec" {
            if is_cluster_redirection(&reply) {
                // Redis discards the transaction and redirects the client
                // (clusterRedirectClient), with no EXECABORT around it.
                ctx.client.transaction = None;
                multi::unwatch_all(ctx);
                return reply;
            }
            return multi::exec_abort(ctx, reply);
        }
        return reply;
    }
    ctx.client.info.last_command.store(index, Ordering::Relaxed);
    // Commands a script runs are counted but not timed: their time is the
    // script's, which EVAL's own entry measures, and two clock reads per
    // redis.call would be a fifth of a short script's cost.
    let errors_before = ctx.client.batch.errors.total;
    // CLIENT TRACKING NOLOOP tells this client's own writes apart; nothing
    // to mark while nobody tracks.
    let _writer = ctx
        .shared
        .tracking
        .active()
        .then(|| crate::tracking::WriterGuard::enter(ctx.client.info.id));
    // Only a client's own command may block; inside EXEC or a script the
    // blocking commands answer at once.
    ctx.client.may_block = ctx.held.is_none() && !ctx.client.in_script;
    let reply;
    let usec = if ctx.held.is_some() {
        reply = call(ctx, index, command, argv);
        0
    } else {
        let started = crate::latency::monotonic_ns();
        ctx.client.started_ns = started;
        reply = call(ctx, index, command, argv);
        ctx.client.started_ns = 0;
        let mut ns = crate::latency::monotonic_ns().saturating_sub(started);
        // DEBUG SLEEP's pause is taken after the handler, by its connection
        // alone; it is still the command's duration, as Redis measures it.
        if let After::Sleep(pause) = ctx.client.after {
            ns = ns.saturating_add(pause.as_nanos().min(u64::MAX as u128) as u64);
        }
        let stats = &ctx.shared.stats;
        if stats.latency_tracking.load(Ordering::Relaxed) {
            ctx.client.batch.durations.push((index, ns));
        }
        let threshold_ms = stats.latency_monitor_threshold_ms.load(Ordering::Relaxed);
        if threshold_ms != 0 && ns / 1_000_000 >= threshold_ms {
            monitor_latency(ctx, command, ns / 1_000_000);
        }
        ns / 1000
    };
    // A write to a key a client is blocked on: that client is served once
    // the command that wrote it has run whole (`blocking::serve_ready`).
    // The master's stream serves nobody: a replica's clients cannot have
    // blocked on its keys, which are read-only to them.
    if command.flags & flags::WRITE != 0
        && ctx.shared.blocked.any()
        && !ctx.client.master
        && !reply.is_error()
    {
        blocking::signal(ctx, command, argv);
    }
    if command.flags & flags::SKIP_SLOWLOG == 0 && ctx.shared.slowlog.wants(usec) {
        log_slow(ctx, argv, usec);
    }
    if ctx.shared.monitors.any() && command.flags & (flags::ADMIN | flags::SKIP_MONITOR) == 0 {
        feed_monitors(ctx, argv);
    }
    if ctx.client.tracking.is_some() {
        track_reads(ctx, command, argv);
    }
    // Failed, as Redis counts it: the reply is an error, or holds one (a
    // script's result may).
    let failed = reply.is_error() || ctx.client.batch.errors.total != errors_before;
    let counts = ctx.client.batch.counts(index);
    counts.calls += 1;
    counts.usec += usec;
    if failed {
        counts.failed += 1;
    }
    ctx.client.info.last_command.store(index, Ordering::Relaxed);
    reply
}
