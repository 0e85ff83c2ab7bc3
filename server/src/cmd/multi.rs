//! Transactions: MULTI, EXEC, DISCARD.
//!
//! Between MULTI and EXEC a client's commands are checked (existence, arity,
//! authentication, maxmemory) and queued; a command refused there fails the
//! whole transaction (`EXECABORT`), as in Redis. EXEC runs the queue holding
//! every shard its commands' keys live in (or every shard, when a queued
//! command's keys are not known from the table), through the same lender a
//! script uses, so the transaction is atomic across shards.

use super::table::{registry, Command};
use super::{dispatch, Ctx};
use crate::resp::Reply;
use crate::store::HeldShards;

/// The commands queued since MULTI.
#[derive(Debug, Default)]
pub struct Transaction {
    queued: Vec<Vec<Vec<u8>>>,
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
pub fn queue(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if let Some(transaction) = ctx.client.transaction.as_mut() {
        transaction
            .queued
            .push(argv.iter().map(|a| a.to_vec()).collect());
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
    let queued: Vec<Vec<&[u8]>> = transaction
        .queued
        .iter()
        .map(|argv| argv.iter().map(Vec::as_slice).collect())
        .collect();
    let commands: Vec<&'static Command> = queued
        .iter()
        .map(|argv| {
            registry()
                .lookup_full(&full_name(argv))
                .expect("checked when queued")
        })
        .collect();
    let store = &ctx.shared.store;
    let held = if commands.iter().all(|c| keys_known(c)) {
        let keys: Vec<_> = queued
            .iter()
            .zip(&commands)
            .flat_map(|(argv, c)| {
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
    for argv in &queued {
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

/// The table name of a queued command (`config|get` for subcommands).
fn full_name(argv: &[&[u8]]) -> Vec<u8> {
    let name = argv[0].to_ascii_lowercase();
    let is_container = registry()
        .lookup(&name)
        .is_some_and(|c| !c.subcommands.is_empty());
    if is_container && argv.len() > 1 {
        let mut full = name;
        full.push(b'|');
        full.extend(argv[1].to_ascii_lowercase());
        full
    } else {
        name
    }
}
