//! Cluster routing of a client's command, before it runs: the slot gate
//! it holds from routing to the end of its run, the slots of its keys
//! (EXEC: every queued command's), and MOVED, ASK, TRYAGAIN, CROSSSLOT or
//! CLUSTERDOWN when the node may not run it (Redis's getNodeByQuery).

use super::{pubsub, ClientState, Ctx};
use crate::catalog::{flags, Command};
use crate::cluster::Access;
use crate::resp::Reply;

/// True for the errors cluster routing gives.
pub(super) fn is_cluster_redirection(reply: &Reply) -> bool {
    matches!(reply, Reply::Error(text) if [&b"CROSSSLOT "[..], b"CLUSTERDOWN ", b"MOVED ", b"ASK ", b"TRYAGAIN "]
        .iter()
        .any(|code| text.starts_with(code)))
}

/// What the slot gate learned of a command's keys, kept for routing so
/// that no key is hashed twice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GateSlots {
    /// Nothing computed (no keys, or not a client's own command).
    #[default]
    Unknown,
    /// The first key's slot; the others are in other slots, or were not
    /// looked at.
    First(u16),
    /// Every key of the command is in this slot.
    All(u16),
    /// Every key is in one slot that the gate found served here plainly
    /// (`Entered::Plain`): nothing left to route.
    Served,
}

impl GateSlots {
    fn first(self) -> Option<u16> {
        match self {
            GateSlots::Unknown | GateSlots::Served => None,
            GateSlots::First(slot) | GateSlots::All(slot) => Some(slot),
        }
    }
}

/// Cluster routing of a client's command (Redis's getNodeByQuery): every
/// key in one slot (EXEC: every queued command's), the slot served here and
/// the cluster up; in a slot being moved, which keys exist decides.
/// Commands run by EXEC or a script were routed with it.
///
/// Inlined: most commands' keys (one key, keys at fixed positions, EVAL's
/// counted keys) were hashed by the slot gate, and in a slot served here
/// plainly the gate's own bit test settled their routing: they leave here
/// after one compare. The rest go on to [`routed_in_full`].
#[inline(always)]
pub(super) fn routed(
    ctx: &mut Ctx<'_>,
    command: &'static Command,
    argv: &[&[u8]],
) -> Option<Reply> {
    if ctx.client.gate_slots == GateSlots::Served {
        return None;
    }
    let cluster = ctx.shared.cluster.get()?;
    if ctx.held.is_some() || ctx.client.in_script {
        return None;
    }
    routed_in_full(ctx, cluster, command, argv)
}

#[inline(never)]
pub(super) fn routed_in_full(
    ctx: &mut Ctx<'_>,
    cluster: &crate::cluster::Cluster,
    command: &'static Command,
    argv: &[&[u8]],
) -> Option<Reply> {
    let slot = |key: &[u8]| tally_cluster::slot::key_slot(key);
    let outcome = if command.name == "exec" {
        let transaction = ctx.client.transaction.as_ref()?;
        let access = if transaction
            .queued()
            .any(|(queued, _)| pubsub::is_shard_channel_command(queued.name))
        {
            Access::ShardChannel
        } else if transaction
            .queued()
            .all(|(queued, _)| queued.flags & flags::WRITE == 0)
        {
            Access::Read
        } else {
            Access::Write
        };
        let slots: Vec<u16> = transaction_keys(ctx.client)
            .iter()
            .map(|k| slot(k))
            .collect();
        cluster.route(slots.into_iter(), access)
    } else {
        let movable = command.flags & flags::MOVABLE_KEYS != 0;
        if command.keys.first <= 0 && !movable {
            return None;
        }
        let access = || {
            if command.flags & flags::WRITE != 0 {
                Access::Write
            } else if command.flags & flags::PUBSUB != 0
                && pubsub::is_shard_channel_command(command.name)
            {
                Access::ShardChannel
            } else {
                Access::Read
            }
        };
        // The first key's slot, if the slot gate computed it already.
        let mut known = std::mem::take(&mut ctx.client.gate_slots).first();
        if !movable {
            // Keys at fixed positions, without allocating.
            let spec = command.keys;
            let last = spec.last_position(argv.len());
            if last == spec.first {
                // One key (the stable cluster's case left in `routed`).
                let first = known.unwrap_or_else(|| slot(argv[spec.first as usize]));
                cluster.route(std::iter::once(first), access())
            } else {
                let positions = (spec.first..=last).step_by(spec.step.max(1) as usize);
                cluster.route(
                    positions.map(|i| known.take().unwrap_or_else(|| slot(argv[i as usize]))),
                    access(),
                )
            }
        } else if let Some(range) = command.counted_key_range(argv) {
            // EVAL and friends: a range.
            cluster.route(
                range.map(|i| known.take().unwrap_or_else(|| slot(argv[i]))),
                access(),
            )
        } else {
            let positions = command.key_positions(argv);
            cluster.route(positions.into_iter().map(|i| slot(argv[i])), access())
        }
    };
    let outcome = match outcome {
        crate::cluster::Route::Open(slot) => match route_open(ctx, cluster, slot, command, argv) {
            Some(route) => route,
            // Its key is on its way to another node: the command must not
            // run now (it would change, or create, the copy being dropped
            // here); the connection runs it again once the key has moved.
            None => return Some(Reply::Nothing),
        },
        other => other,
    };
    let reads_here = |redirect: &crate::cluster::Redirect| {
        // A READONLY client's reads on a replica of the slot's master
        // (getNodeByQuery's CLIENT_READONLY case).
        !redirect.ask
            && ctx.client.readonly
            && command_reads(ctx, command)
            && cluster.my_master() == Some(redirect.to)
    };
    match outcome {
        crate::cluster::Route::Redirect(redirect) if reads_here(&redirect) => None,
        crate::cluster::Route::Here | crate::cluster::Route::Open(_) => None,
        crate::cluster::Route::Refused(text) => Some(Reply::error(text)),
        crate::cluster::Route::Redirect(redirect) => Some(Reply::error(
            cluster.redirect_error(&redirect, ctx.client.info.tls),
        )),
    }
}

/// The command (or the transaction EXEC runs) writes nothing.
fn command_reads(ctx: &Ctx<'_>, command: &Command) -> bool {
    if command.name == "exec" {
        return ctx.client.transaction.as_ref().is_some_and(|t| {
            t.queued()
                .all(|(queued, _)| queued.flags & flags::WRITE == 0)
        });
    }
    command.flags & flags::WRITE == 0
}

/// Every key of a transaction's queued commands.
pub(super) fn transaction_keys(client: &ClientState) -> Vec<Vec<u8>> {
    let Some(transaction) = &client.transaction else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    for (queued, args) in transaction.queued() {
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        keys.extend(
            queued
                .key_positions(&args)
                .into_iter()
                .map(|i| args[i].to_vec()),
        );
    }
    keys
}

/// The keys a client's command names (EXEC: its transaction's).
pub(super) fn command_keys(
    client: &ClientState,
    command: &'static Command,
    argv: &[&[u8]],
) -> Vec<Vec<u8>> {
    if command.name == "exec" {
        return transaction_keys(client);
    }
    command
        .key_positions(argv)
        .into_iter()
        .map(|i| argv[i].to_vec())
        .collect()
}

/// Routing in a slot being migrated or imported: a key a MIGRATE holds
/// makes the command wait (`None`, the client told to retry); otherwise
/// the keys present here decide ([`crate::cluster::Cluster::route_open`]).
/// Runs under the slot's gate (see [`slot_gate`]).
pub(super) fn route_open(
    ctx: &mut Ctx<'_>,
    cluster: &crate::cluster::Cluster,
    slot: u16,
    command: &'static Command,
    argv: &[&[u8]],
) -> Option<crate::cluster::Route> {
    let keys = command_keys(ctx.client, command, argv);
    if command.name != "migrate" {
        let in_flight = cluster.in_flight.lock();
        if keys.iter().any(|k| in_flight.contains(k)) {
            ctx.client.then(super::After::WaitForMigration);
            return None;
        }
    }
    let mut here = crate::cluster::KeysHere::default();
    let channels = pubsub::is_shard_channel_command(command.name);
    // Routing asks whether keys are here; using them is the command's.
    let _untouched = crate::store::access_clock::untouched();
    for (i, key) in keys.iter().enumerate() {
        if i > 0 && *key != keys[0] {
            here.multiple = true;
        }
        if channels {
            // Shard channels are not keys: never missing (getNodeByQuery).
            here.existing += 1;
            continue;
        }
        let key = ctx.shared.store.key(key);
        if ctx.lock_in(0, key).contains(key, ctx.now_ms) {
            here.existing += 1;
        } else {
            here.missing += 1;
        }
    }
    let asking = ctx.client.asking || command.flags & flags::ASKING != 0;
    Some(cluster.route_open(slot, here, asking, command.name == "migrate"))
}

/// The gate of a client's keyed command's slot, shared, from routing to
/// the end of its run (see `crate::cluster::Cluster::enter`): SETSLOT and
/// MIGRATE wait for it, so no key leaves between the two.
///
/// Inlined into the command path, and the common case first: a command
/// with one key at a fixed position finds it with a load and a compare
/// (its position is in the table row; as a call, the gate's own entry and
/// exit were a fifth of what cluster mode adds to a GET).
#[inline(always)]
pub(super) fn slot_gate<'a>(
    ctx: &mut Ctx<'a>,
    command: &'static Command,
    argv: &[&[u8]],
) -> Option<crate::slot_gate::Entered<'a>> {
    let shared: &'a crate::state::Shared = ctx.shared;
    let cluster = shared.cluster.get()?;
    if ctx.held.is_some() || ctx.client.in_script {
        return None;
    }
    // Without allocating in the common cases (one key, keys at fixed
    // positions, EVAL's counted keys): every key's slot, for routing to
    // reuse.
    let only_key = command.only_key_position();
    if only_key != 0 {
        // A call without its key is refused by arity before it runs.
        let slot = tally_cluster::slot::key_slot(argv.get(only_key)?);
        let entered = cluster.enter(slot);
        ctx.client.gate_slots = match entered {
            crate::slot_gate::Entered::Plain(_) => GateSlots::Served,
            _ => GateSlots::All(slot),
        };
        return Some(entered);
    }
    let gate_slots = if command.flags & flags::MOVABLE_KEYS == 0 {
        let spec = command.keys;
        let first = spec.first as usize;
        if first == 0 || first >= argv.len() {
            return transaction_gate(ctx, cluster, command);
        }
        let last = spec.last_position(argv.len()).max(spec.first) as usize;
        if last == first {
            GateSlots::All(tally_cluster::slot::key_slot(argv[first]))
        } else {
            slots_of(argv, (first..=last).step_by(spec.step.max(1) as usize))
        }
    } else if let Some(range) = command.counted_key_range(argv) {
        if range.is_empty() {
            return None;
        }
        slots_of(argv, range)
    } else if command.name == "migrate" {
        // MIGRATE closes its slots' gates itself (cmd/migrate.rs).
        return None;
    } else {
        let first = *command.key_positions(argv).first()?;
        GateSlots::First(tally_cluster::slot::key_slot(argv[first]))
    };
    let entered = cluster.enter(gate_slots.first()?);
    ctx.client.gate_slots = match (&entered, gate_slots) {
        (crate::slot_gate::Entered::Plain(_), GateSlots::All(_)) => GateSlots::Served,
        _ => gate_slots,
    };
    Some(entered)
}

/// The slots of the keys at `positions` (at least one, all inside `argv`):
/// `All` when they share one, else the first's (routing answers CROSSSLOT
/// from there).
#[inline(always)]
fn slots_of(argv: &[&[u8]], mut positions: impl Iterator<Item = usize>) -> GateSlots {
    let Some(at) = positions.next() else {
        return GateSlots::Unknown;
    };
    let first = tally_cluster::slot::key_slot(argv[at]);
    // A loop rather than `Iterator::all` with a closure, which was not
    // inlined (a call per key on EVALSHA's path).
    for at in positions {
        if tally_cluster::slot::key_slot(argv[at]) != first {
            return GateSlots::First(first);
        }
    }
    GateSlots::All(first)
}

/// EXEC's gate: its first queued key's slot. `None` for other commands
/// without keys.
#[inline(never)]
fn transaction_gate<'a>(
    ctx: &Ctx<'a>,
    cluster: &'a crate::cluster::Cluster,
    command: &'static Command,
) -> Option<crate::slot_gate::Entered<'a>> {
    if command.name != "exec" {
        return None;
    }
    let first = transaction_keys(ctx.client).into_iter().next()?;
    Some(cluster.enter(tally_cluster::slot::key_slot(&first)))
}
