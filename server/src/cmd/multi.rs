//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! Between MULTI and EXEC a client's commands are checked (existence, arity,
//! authentication, maxmemory) and queued; a command refused there fails the
//! whole transaction (`EXECABORT`), as in Redis. EXEC runs the queue holding
//! every shard its commands' keys live in (or every shard, when a queued
//! command's keys are not known from the table), through the same lender a
//! script uses, so the transaction is atomic across shards.
//!
//! WATCH registers the client's flag with the shard of each watched key;
//! every write to the key (and its expiry, and a FLUSH or SWAPDB that finds
//! it) raises the flag under that shard's lock. EXEC first looks each
//! watched key up (an expired one is then deleted, which raises the flag),
//! then takes its shards, then reads the flag: a write that happened before
//! EXEC took its shards is always seen. A write command that targets a
//! watched key raises the flag even when it changes nothing (DEL of a
//! missing key, SET NX on an existing one), where Redis would not
//! (docs/compatibility.md): such a transaction aborts and is retried.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::{dispatch, ClientState, Ctx};
use crate::catalog::{flags, Command};
use crate::resp::Reply;
use crate::state::Shared;
use crate::store::HeldShards;

/// A client's WATCHed keys.
#[derive(Default)]
pub struct Watches {
    /// (database, key) pairs, each registered with its shard.
    keys: Vec<(usize, Vec<u8>)>,
    /// Raised by a shard when a watched key is written.
    dirty: Arc<AtomicBool>,
}

/// The commands queued since MULTI, each with the table row it resolved to.
#[derive(Default)]
pub struct Transaction {
    queued: Vec<(&'static Command, Vec<Vec<u8>>)>,
    /// Bytes of the queued arguments, kept as they are queued.
    queued_bytes: usize,
    failed: bool,
}

impl Transaction {
    /// The queued commands and their arguments.
    pub fn queued(&self) -> impl Iterator<Item = (&'static Command, &[Vec<u8>])> + '_ {
        self.queued.iter().map(|(c, a)| (*c, a.as_slice()))
    }
}

/// Commands that act on the transaction itself rather than being queued.
const CONTROL: &[&str] = &["exec", "discard", "multi", "watch", "quit", "reset"];

/// True when `command` must be queued rather than run.
pub fn queues(ctx: &Ctx<'_>, command: &Command) -> bool {
    ctx.held.is_none()
        && ctx.client.transaction.is_some()
        && !CONTROL.contains(&command.name.split('|').next().unwrap_or(""))
}

/// Queues a command that passed the checks.
pub fn queue(ctx: &mut Ctx<'_>, command: &'static Command, argv: &[&[u8]]) -> Reply {
    if let Some(transaction) = ctx.client.transaction.as_mut() {
        let owned = argv.iter().map(|a| a.to_vec()).collect();
        transaction.queued_bytes += argv.iter().map(|a| a.len()).sum::<usize>();
        transaction.queued.push((command, owned));
    }
    Reply::status("QUEUED")
}

/// Commands queued since MULTI and the bytes of their arguments; (-1, 0)
/// outside a transaction (CLIENT LIST's `multi` and `multi-mem`).
pub fn queued_size(client: &ClientState) -> (i64, usize) {
    match &client.transaction {
        None => (-1, 0),
        Some(transaction) => (transaction.queued.len() as i64, transaction.queued_bytes),
    }
}

/// True when the open transaction holds a command that may write or be
/// replicated (CLIENT PAUSE WRITE holds its EXEC).
pub fn may_write(client: &ClientState) -> bool {
    client.transaction.as_ref().is_some_and(|t| {
        t.queued
            .iter()
            .any(|(command, _)| command.flags & (flags::WRITE | flags::MAY_REPLICATE) != 0)
    })
}

/// Marks the open transaction, if any, as failed (a command was refused).
pub fn flag_failed(ctx: &mut Ctx<'_>) {
    if ctx.held.is_none() {
        if let Some(transaction) = ctx.client.transaction.as_mut() {
            transaction.failed = true;
        }
    }
}

/// MULTI
pub fn multi(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    if ctx.client.transaction.is_some() {
        return Reply::error("ERR MULTI calls can not be nested");
    }
    ctx.client.transaction = Some(Transaction::default());
    Reply::Ok
}

/// DISCARD
pub fn discard(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    match ctx.client.transaction.take() {
        Some(_) => {
            unwatch_all(ctx);
            Reply::Ok
        }
        None => Reply::error("ERR DISCARD without MULTI"),
    }
}

/// WATCH key [key ...]
pub fn watch(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if ctx.client.transaction.is_some() {
        return Reply::error("ERR WATCH inside MULTI is not allowed");
    }
    let db = ctx.client.db;
    for key in &argv[1..] {
        let already = ctx
            .client
            .watches
            .keys
            .iter()
            .any(|(d, k)| *d == db && k == key);
        if already {
            continue;
        }
        let hashed = ctx.key(key);
        let mut shard = ctx.lock(hashed);
        // Look the key up first: one already expired is deleted now rather
        // than counted as a change later (Redis notes it as expired).
        shard.get(hashed, ctx.now_ms);
        shard.watch(key, &ctx.client.watches.dirty);
        drop(shard);
        ctx.client.watches.keys.push((db, key.to_vec()));
    }
    Reply::Ok
}

/// UNWATCH
pub fn unwatch(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    unwatch_all(ctx);
    Reply::Ok
}

/// Drops every WATCH of the client and lowers its flag.
pub fn unwatch_all(ctx: &mut Ctx<'_>) {
    let watched = std::mem::take(&mut ctx.client.watches.keys);
    for (db, key) in &watched {
        let hashed = ctx.key(key);
        ctx.lock_in(*db, hashed)
            .unwatch(key, &ctx.client.watches.dirty);
    }
    ctx.client.watches.dirty.store(false, Ordering::Release);
}

/// Drops a closing connection's WATCHes and subscriptions.
pub fn forget_client(shared: &Shared, client: &mut ClientState) {
    let mut ctx = Ctx {
        shared,
        client,
        now_ms: 0,
        held: None,
    };
    if !ctx.client.watches.keys.is_empty() {
        unwatch_all(&mut ctx);
    }
    super::pubsub::unsubscribe_all(&mut ctx);
    super::server::stop_monitor(&mut ctx);
    ctx.shared.tracking.forget(ctx.client.info.id);
}

/// Whether the shards a queued command touches are known from its keys.
pub(crate) fn keys_known(command: &Command) -> bool {
    command.keys.first > 0
        && !["move", "copy"].contains(&command.name)
        && !crate::catalog::SCRIPT_RUNS.contains(&command.name)
}

/// EXEC refused before it ran (subscribe mode, BUSY, OOM, ...): as Redis's
/// `execCommandAbort`, the transaction is discarded and the refusal becomes
/// `EXECABORT Transaction discarded because of: <why>` (Redis's formatted
/// refusals carry no `ERR` code).
pub fn exec_abort(ctx: &mut Ctx<'_>, refusal: Reply) -> Reply {
    ctx.client.transaction = None;
    unwatch_all(ctx);
    let Reply::Error(text) = refusal else {
        return refusal;
    };
    let why = text.strip_prefix(b"ERR ").unwrap_or(&text);
    let mut message = b"EXECABORT Transaction discarded because of: ".to_vec();
    message.extend_from_slice(why);
    Reply::error_bytes(message)
}

/// EXEC
pub fn exec(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let Some(transaction) = ctx.client.transaction.take() else {
        return Reply::error("ERR EXEC without MULTI");
    };
    if transaction.failed {
        unwatch_all(ctx);
        return Reply::error("EXECABORT Transaction discarded because of previous errors.");
    }
    // Deletes watched keys that have expired since WATCH, which raises the
    // flag; the queued commands run at the same `now_ms`, so a key found
    // live here is live for them too.
    for (db, key) in &ctx.client.watches.keys {
        let hashed = ctx.shared.store.key(key);
        ctx.lock_in(*db, hashed).get(hashed, ctx.now_ms);
    }
    let queued: Vec<(&'static Command, Vec<&[u8]>)> = transaction
        .queued
        .iter()
        .map(|(command, argv)| (*command, argv.iter().map(Vec::as_slice).collect()))
        .collect();
    let store = &ctx.shared.store;
    let held = if queued.iter().all(|(c, _)| keys_known(c)) {
        let keys: Vec<_> = queued
            .iter()
            .flat_map(|(c, argv)| {
                c.keys
                    .positions(argv.len())
                    .into_iter()
                    .map(|i| store.key(argv[i]))
            })
            .collect();
        HeldShards::declared(store, ctx.client.db, keys.iter().copied())
    } else {
        HeldShards::everything(store)
    };
    if ctx.client.watches.dirty.load(Ordering::Acquire) {
        drop(held);
        unwatch_all(ctx);
        return Reply::NilArray;
    }
    let mut replies = Vec::with_capacity(queued.len());
    for (_, argv) in &queued {
        let mut inner = Ctx {
            shared: ctx.shared,
            client: &mut *ctx.client,
            now_ms: ctx.now_ms,
            held: Some(&held),
        };
        replies.push(dispatch(&mut inner, argv));
    }
    // The transaction's changes reach the feed while its shards are held.
    super::propagate::append_pending(ctx);
    drop(held);
    unwatch_all(ctx);
    Reply::Array(replies)
}
