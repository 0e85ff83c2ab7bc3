//! The blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP,
//! BZPOPMIN, BZPOPMAX, BZMPOP, and XREAD with BLOCK) and the serving of
//! the clients they block.
//!
//! A blocking command first does what its non-blocking form does. When
//! every key is empty, a client's own command registers a waiter
//! (`crate::blocking`) and tells its connection to wait (`After::Block`);
//! inside MULTI or a script it answers nil at once, as Redis's do.
//!
//! A write to a key some client waits for marks the key ready
//! ([`signal`]). Once the command that wrote it has run whole (an EXEC, a
//! script), and before its reply goes out, the same connection serves the
//! waiters of each ready key in arrival order ([`serve_ready`]): it runs
//! each waiter's command again, narrowed to the ready key as Redis 7.0
//! serves from the key that became ready, as that client, until one finds
//! nothing. Its change goes to the append-only file and the replicas as
//! the pop it was (`LPOP key`, `LMOVE ...`), after the write that made it
//! possible.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use super::collection::exists_as;
use super::{error, mpop, After, ClientState, Ctx};
use crate::blocking::{Outcome, Waiter};
use crate::catalog::Command;
use crate::resp::Reply;
use crate::state::Shared;
use crate::store::object::{List, Stream, ZSet};

/// The timeout argument, in milliseconds (0: none), or Redis's error.
fn timeout(arg: &[u8]) -> Result<u64, Reply> {
    match crate::float::timeout_ms(arg) {
        None => Err(Reply::error("ERR timeout is not a float or out of range")),
        Some(ms) if ms < 0 => Err(Reply::error("ERR timeout is negative")),
        Some(ms) => Ok(ms as u64),
    }
}

/// Which collection a blocking command waits for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    List,
    ZSet,
    Stream,
}

fn kind_of(name: &[u8]) -> Kind {
    if name.first().is_some_and(|c| c.eq_ignore_ascii_case(&b'x')) {
        Kind::Stream
    } else if name.len() > 1 && name[1].eq_ignore_ascii_case(&b'z') {
        Kind::ZSet
    } else {
        Kind::List
    }
}

/// Whether a key a client is about to wait for already has what it
/// waits for, looked at under the key's lock: for a pop, anything there.
pub(super) type Filled<'f> =
    &'f dyn Fn(&mut crate::store::ShardData, crate::store::KeyRef<'_>, usize, u64) -> bool;

/// A pop's [`Filled`]: the key holds something.
fn holds_anything(
    shard: &mut crate::store::ShardData,
    key: crate::store::KeyRef<'_>,
    _: usize,
    now: u64,
) -> bool {
    shard.contains(key, now)
}

/// Runs `attempt` (the command's non-blocking form); when it finds every
/// key empty, blocks the client on `keys` if it may block, else answers
/// `empty`. `filled` says whether a key has what the command waits for.
pub(super) fn or_block(
    ctx: &mut Ctx<'_>,
    argv: &[&[u8]],
    keys: &[&[u8]],
    timeout_ms: u64,
    empty: Reply,
    filled: Filled<'_>,
    mut attempt: impl FnMut(&mut Ctx<'_>) -> Reply,
) -> Reply {
    let db = ctx.client.db;
    loop {
        // A key others already wait for is theirs first: a write that
        // filled it may not have served them yet (it serves after it has
        // run whole, from its own thread), and taking its element now
        // would overtake them, which Redis's one thread never lets happen.
        // Such a client queues behind them and serves the queue itself.
        // A stream reader takes nothing from the key, and overtakes nobody.
        let queued_behind = ctx.client.may_block
            && kind_of(argv[0]) != Kind::Stream
            && ctx.shared.blocked.any()
            && keys.iter().any(|k| ctx.shared.blocked.is_waited(db, k));
        if !queued_behind {
            let reply = attempt(ctx);
            if !matches!(reply, Reply::Nil | Reply::NilArray) {
                return reply;
            }
            if !ctx.client.may_block {
                return empty;
            }
        }
        // The keys are looked at again under their locks, and the waiter
        // registered before they are released: a write to them either
        // came before (and is seen here) or comes after (and finds the
        // waiter).
        let refs: Vec<_> = keys.iter().map(|k| ctx.key(k)).collect();
        let now = ctx.now_ms;
        let mut locked = ctx.lock_keys(&refs);
        let filled: Vec<&[u8]> = keys
            .iter()
            .zip(&refs)
            .enumerate()
            .filter(|(at, (_, k))| filled(locked.shard(**k), **k, *at, now))
            .map(|(_, (key, _))| *key)
            .collect();
        if !filled.is_empty() && !queued_behind {
            // Filled between the attempt and the lock: try again.
            continue;
        }
        let client = &*ctx.client;
        let waiter = Arc::new(Waiter::new(
            client.info.clone(),
            client.user.clone(),
            client.acl_generation,
            client.proto,
            client.db,
            argv.iter().map(|a| a.to_vec()).collect(),
            keys.iter().map(|k| k.to_vec()).collect(),
            timeout_ms != 0,
        ));
        // Counted as blocked from here: CLIENT LIST shows the command
        // consumed from the query buffer by then, as Redis trims it.
        let (left, capacity) = client.input_left;
        client.info.io.input(left, capacity);
        ctx.shared.blocked.block(waiter.clone());
        drop(locked);
        // Queued behind earlier waiters on keys that hold something: this
        // connection serves them, in order, before its own reply is due.
        if !filled.is_empty() {
            READY.with(|r| {
                r.borrow_mut()
                    .extend(filled.iter().map(|key| (db, key.to_vec())))
            });
        }
        // A deadline too far to represent is no deadline (Redis's would
        // pass in some hundred million years).
        let deadline = (timeout_ms != 0)
            .then(|| std::time::Instant::now().checked_add(Duration::from_millis(timeout_ms)))
            .flatten();
        // The call's duration is filled in by the dispatch once it ends.
        ctx.client.then(After::Block {
            waiter,
            deadline,
            call_usec: 0,
        });
        return Reply::Nothing;
    }
}

/// BLPOP key [key ...] timeout
pub fn blpop(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    pop_one(ctx, argv, true)
}

/// BRPOP key [key ...] timeout
pub fn brpop(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    pop_one(ctx, argv, false)
}

/// BZPOPMIN key [key ...] timeout
pub fn bzpopmin(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    pop_one(ctx, argv, true)
}

/// BZPOPMAX key [key ...] timeout
pub fn bzpopmax(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    pop_one(ctx, argv, false)
}

/// B[LR]POP and BZPOP{MIN,MAX}: one element from the first non-empty key,
/// answered `[key, element]` (`[key, member, score]`).
fn pop_one(ctx: &mut Ctx<'_>, argv: &[&[u8]], first: bool) -> Reply {
    let (keys, last) = argv[1..].split_at(argv.len() - 2);
    let timeout_ms = match timeout(last[0]) {
        Ok(ms) => ms,
        Err(reply) => return reply,
    };
    let kind = kind_of(argv[0]);
    or_block(
        ctx,
        argv,
        keys,
        timeout_ms,
        Reply::NilArray,
        &holds_anything,
        |ctx| {
            let popped = match kind {
                Kind::ZSet => mpop::pop_zsets(ctx, keys, first, 1),
                _ => mpop::pop_lists(ctx, keys, first, 1),
            };
            // `[key, [element]]` → `[key, element]`; `[key, [[member,
            // score]]]` → `[key, member, score]`.
            match popped {
                Reply::Array(mut pair) if pair.len() == 2 => {
                    let Some(Reply::Array(mut elements)) = pair.pop() else {
                        return Reply::NilArray;
                    };
                    match elements.pop() {
                        Some(Reply::Array(member_score)) => pair.extend(member_score),
                        Some(element) => pair.push(element),
                        None => return Reply::NilArray,
                    }
                    Reply::Array(pair)
                }
                other => other,
            }
        },
    )
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]
pub fn blmpop(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    pop_many(ctx, argv)
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]
pub fn bzmpop(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    pop_many(ctx, argv)
}

/// B[LZ]MPOP: the non-blocking form's reply, or a wait. Its arguments are
/// checked before its timeout, as Redis does.
fn pop_many(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let call = match mpop::Call::parse(&argv[1..]) {
        Ok(call) => call,
        Err(reply) => return reply,
    };
    let first = match (kind_of(argv[0]), call.side) {
        (Kind::List, s) if super::args::is(s, "left") => true,
        (Kind::List, s) if super::args::is(s, "right") => false,
        (Kind::ZSet, s) if super::args::is(s, "min") => true,
        (Kind::ZSet, s) if super::args::is(s, "max") => false,
        _ => return Reply::error(error::SYNTAX),
    };
    let timeout_ms = match timeout(argv[1]) {
        Ok(ms) => ms,
        Err(reply) => return reply,
    };
    let kind = kind_of(argv[0]);
    or_block(
        ctx,
        argv,
        call.keys,
        timeout_ms,
        Reply::NilArray,
        &holds_anything,
        |ctx| match kind {
            Kind::ZSet => mpop::pop_zsets(ctx, call.keys, first, call.count),
            _ => mpop::pop_lists(ctx, call.keys, first, call.count),
        },
    )
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout
pub fn blmove(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let (Some(_), Some(_)) = (super::list::end(argv[3]), super::list::end(argv[4])) else {
        return Reply::error(error::SYNTAX);
    };
    let timeout_ms = match timeout(argv[5]) {
        Ok(ms) => ms,
        Err(reply) => return reply,
    };
    or_block(
        ctx,
        argv,
        &argv[1..2],
        timeout_ms,
        Reply::Nil,
        &holds_anything,
        |ctx| super::list::lmove(ctx, &argv[..5]),
    )
}

/// BRPOPLPUSH source destination timeout
pub fn brpoplpush(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let timeout_ms = match timeout(argv[3]) {
        Ok(ms) => ms,
        Err(reply) => return reply,
    };
    or_block(
        ctx,
        argv,
        &argv[1..2],
        timeout_ms,
        Reply::Nil,
        &holds_anything,
        |ctx| super::list::rpoplpush(ctx, &argv[..3]),
    )
}

thread_local! {
    /// Keys made ready by the command running on this thread, in the order
    /// they were written, for [`serve_ready`] once it has run whole.
    static READY: RefCell<VecDeque<(usize, Vec<u8>)>> = const { RefCell::new(VecDeque::new()) };
}

/// Marks the keys a write command touched that some client waits for.
/// Called after each write that succeeded, only while a client is blocked.
pub fn signal(ctx: &Ctx<'_>, command: &Command, argv: &[&[u8]]) {
    let blocked = &ctx.shared.blocked;
    let db = ctx.client.db;
    let mut ready = Vec::new();
    let mut mark = |db: usize, key: &[u8]| {
        if blocked.is_waited(db, key) {
            ready.push((db, key.to_vec()));
        }
    };
    match command.name {
        // The keys of both databases change at once.
        "swapdb" => {
            for arg in &argv[1..3] {
                if let Some(other) = crate::number::parse_i64(arg) {
                    let other = other as usize;
                    for key in blocked.keys_in(other) {
                        ready.push((other, key));
                    }
                }
            }
        }
        // Every key of the database (of every database) is gone: a group
        // reader waiting on one is told.
        "flushdb" => ready.extend(blocked.keys_in(db).into_iter().map(|key| (db, key))),
        "flushall" => {
            for db in 0..ctx.shared.store.databases() {
                ready.extend(blocked.keys_in(db).into_iter().map(|key| (db, key)));
            }
        }
        // The key arrives in another database.
        "move" => {
            if let Some(target) = crate::number::parse_i64(argv[2]) {
                mark(target as usize, argv[1]);
            }
        }
        "copy" => {
            // DB is an option after the two keys (a key may be named `db`).
            let target = argv
                .iter()
                .skip(3)
                .position(|a| super::args::is(a, "db"))
                .and_then(|at| argv.get(3 + at + 1))
                .and_then(|n| crate::number::parse_i64(n))
                .map_or(db, |n| n as usize);
            mark(target, argv[2]);
        }
        _ => {
            for at in command.key_positions(argv) {
                mark(db, argv[at]);
            }
        }
    }
    if !ready.is_empty() {
        READY.with(|r| r.borrow_mut().extend(ready));
    }
}

/// Serves the clients waiting for the keys this thread's last command made
/// ready, and for those their own commands make ready in turn (a BLMOVE
/// into a list another client waits for). Run after a client's command,
/// before its reply is sent.
pub fn serve_ready(shared: &Shared, now_ms: u64) {
    while let Some((db, key)) = READY.with(|r| r.borrow_mut().pop_front()) {
        if !shared.blocked.any() {
            READY.with(|r| r.borrow_mut().clear());
            return;
        }
        for waiter in shared.blocked.waiters(db, &key) {
            let kind = kind_of(&waiter.argv[0]);
            match holds(shared, db, &key, kind, now_ms) {
                // A group reader whose stream is gone (deleted, replaced by
                // another type) is answered with an error by running it
                // again, as Redis unblocks it.
                Holding::Nothing | Holding::Other if reads_group(&waiter.argv) => {}
                // Gone (deleted, expired): nobody is served from it, but a
                // group reader after a stream reader may be told so.
                Holding::Nothing if kind == Kind::Stream => continue,
                Holding::Nothing => break,
                // A waiter for the other kind of collection may be next.
                Holding::Other => continue,
                Holding::Wanted => {}
            }
            if !waiter.claim() {
                // Timed out, or served by another connection right now.
                continue;
            }
            let (reply, aof_offset) = run_again(shared, &waiter, &key, now_ms);
            if matches!(reply, Reply::Nil | Reply::NilArray) {
                waiter.release();
                // A pop that found nothing leaves nothing for the next
                // waiter; a stream reader waits past an ID of its own,
                // and the next may wait for less.
                if kind == Kind::Stream {
                    continue;
                }
                break;
            }
            shared.blocked.remove(&waiter);
            waiter.finish(Outcome::Served { reply, aof_offset });
        }
    }
}

enum Holding {
    Nothing,
    Other,
    Wanted,
}

/// What `key` holds now, for a waiter of `kind`.
fn holds(shared: &Shared, db: usize, key: &[u8], kind: Kind, now_ms: u64) -> Holding {
    let store = &shared.store;
    let hashed = store.key(key);
    let mut shard = store.db(db).lock_shard(store.db(db).shard_of(hashed));
    let found = match kind {
        Kind::List => exists_as::<List>(&mut shard, hashed, now_ms),
        Kind::ZSet => exists_as::<ZSet>(&mut shard, hashed, now_ms),
        Kind::Stream => exists_as::<Stream>(&mut shard, hashed, now_ms),
    };
    match found {
        Ok(true) => Holding::Wanted,
        Ok(false) => Holding::Nothing,
        Err(_) => Holding::Other,
    }
}

/// Runs a waiter's command again, as its client, narrowed to `key`, not
/// blocking: its reply (nil when it found nothing) and where its change
/// lies in the change feed.
fn run_again(shared: &Shared, waiter: &Waiter, key: &[u8], now_ms: u64) -> (Reply, u64) {
    let argv = narrowed(&waiter.argv, key);
    let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
    let Ok((index, command)) = super::resolve_indexed(&argv) else {
        return (Reply::Nil, 0);
    };
    let mut client = ClientState::for_waiter(waiter);
    let mut ctx = Ctx {
        shared,
        client: &mut client,
        now_ms,
        held: None,
    };
    let reply = super::dispatch::call(&mut ctx, index, command, &argv);
    // A served BLMOVE may fill a list others wait for; a reader changes
    // nothing, and neither does a waiter that found nothing (marking its
    // key again would serve it forever).
    if !reply.is_error()
        && !matches!(reply, Reply::Nil | Reply::NilArray)
        && command.flags & crate::catalog::flags::WRITE != 0
        && shared.blocked.any()
    {
        signal(&ctx, command, &argv);
    }
    // The call was counted when it blocked; an error it ends with (a
    // group reader whose group went) makes it a failed call now, as Redis
    // counts it on unblocking. The error itself is counted as it is sent.
    if reply.is_error() {
        client.batch.counts(index).failed += 1;
    }
    let id = client.info.id;
    client.batch.flush(shared, id);
    (reply, client.aof_offset)
}

/// Whether a waiter is an XREADGROUP.
fn reads_group(argv: &[Vec<u8>]) -> bool {
    argv[0].eq_ignore_ascii_case(b"xreadgroup")
}

/// The blocking command `argv` with `key` as its only key: Redis 7.0
/// serves a waiter from the key that became ready, whatever its other
/// keys hold.
fn narrowed(argv: &[Vec<u8>], key: &[u8]) -> Vec<Vec<u8>> {
    let name = argv[0].to_ascii_lowercase();
    match name.as_slice() {
        b"blpop" | b"brpop" | b"bzpopmin" | b"bzpopmax" => {
            vec![argv[0].clone(), key.to_vec(), argv[argv.len() - 1].clone()]
        }
        b"blmpop" | b"bzmpop" => {
            let numkeys = crate::number::parse_i64(&argv[2]).unwrap_or(0).max(0) as usize;
            let mut narrowed = vec![
                argv[0].clone(),
                argv[1].clone(),
                b"1".to_vec(),
                key.to_vec(),
            ];
            narrowed.extend(argv.iter().skip(3 + numkeys).cloned());
            narrowed
        }
        // Registered as `XREAD COUNT n STREAMS keys... ids...` (see
        // `stream_read`): the ready key and its own ID.
        b"xread" => {
            let keys = (argv.len() - 4) / 2;
            let at = argv[4..4 + keys]
                .iter()
                .position(|k| k == key)
                .unwrap_or_default();
            let mut narrowed = argv[..4].to_vec();
            narrowed.extend([key.to_vec(), argv[4 + keys + at].clone()]);
            narrowed
        }
        // Registered as `XREADGROUP GROUP g c COUNT n [NOACK] STREAMS
        // keys... >...`: the ready key alone.
        b"xreadgroup" => {
            let streams = if argv[6] == b"NOACK" { 7 } else { 6 };
            let mut narrowed = argv[..=streams].to_vec();
            narrowed.extend([key.to_vec(), b">".to_vec()]);
            narrowed
        }
        _ => argv.to_vec(),
    }
}

/// CLIENT UNBLOCK client-id [TIMEOUT | ERROR]
pub fn client_unblock(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if argv.len() > 4 {
        return Reply::error_bytes(error::subcommand_syntax("CLIENT", argv[1]));
    }
    let as_error = match argv.get(3) {
        None => false,
        Some(reason) if super::args::is(reason, "timeout") => false,
        Some(reason) if super::args::is(reason, "error") => true,
        Some(_) => return Reply::error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
    };
    let Some(id) = crate::number::parse_i64(argv[2]) else {
        return Reply::error(error::NOT_INTEGER);
    };
    let Some(waiter) = ctx.shared.blocked.of_client(id as u64) else {
        return Reply::Int(0);
    };
    let outcome = if as_error {
        Outcome::Unblocked
    } else {
        Outcome::UnblockedAsTimedOut
    };
    if waiter.settle(outcome) {
        ctx.shared.blocked.remove(&waiter);
        Reply::Int(1)
    } else {
        Reply::Int(0)
    }
}
