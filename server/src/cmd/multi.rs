//! Transactions: MULTI, EXEC, DISCARD.
//!
//! Between MULTI and EXEC a client's commands are checked (existence, arity,
//! authentication, maxmemory) and queued; a command refused there fails the
//! whole transaction (`EXECABORT`), as in Redis. EXEC runs the queue holding
//! every shard its commands' keys live in (or every shard, when a queued
//! command's keys are not known from the table), through the same lender a
//! script uses, so the transaction is atomic across shards.

use super::table::Command;
use super::{dispatch, Ctx};
use crate::resp::Reply;
use crate::store::HeldShards;

/// The commands queued since MULTI, each with the table row it resolved to.
#[derive(Default)]
pub struct Transaction {
    queued: Vec<(&'static Command, Vec<Vec<u8>>)>,
    failed: bool,
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
        transaction.queued.push((command, owned));
    }
    Reply::status("QUEUED")
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
        Some(_) => Reply::Ok,
        None => Reply::error("ERR DISCARD without MULTI"),
    }
}

/// Whether the shards a queued command touches are known from its keys.
fn keys_known(command: &Command) -> bool {
    command.keys.first > 0
        && !["move", "copy", "eval", "evalsha", "eval_ro", "evalsha_ro"].contains(&command.name)
}

/// EXEC
pub fn exec(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let Some(transaction) = ctx.client.transaction.take() else {
        return Reply::error("ERR EXEC without MULTI");
    };
    if transaction.failed {
        return Reply::error("EXECABORT Transaction discarded because of previous errors.");
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
        HeldShards::declared(store, ctx.client.db, &keys)
    } else {
        HeldShards::everything(store)
    };
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
    Reply::Array(replies)
}
