//! Replication commands. The master's side: SYNC and PSYNC (`full_sync`:
//! a full resynchronization, then the replication stream), REPLCONF, WAIT,
//! and the replicas INFO lists. The replica's side: REPLICAOF, which the
//! link task (`net::replica`) acts on. ROLE answers for either. The stream
//! itself is the change feed's (`store::feed`); see docs/architecture.md.

mod full_sync;

pub use full_sync::{psync, start_full_sync, sync, QueuedSync};

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::args::{int_arg, is, parse_i64};
use super::{error, After, Ctx};
use crate::clients::ClientInfo;
use crate::master_link::Target;
use crate::resp::Reply;
use crate::state::Shared;

/// REPLCONF option value ...: what a replica (or `redis-cli --rdb`) says
/// of itself before PSYNC (its listening port, shown by INFO and ROLE;
/// its capabilities, which need nothing here), and, once it streams, how
/// far it got (ACK, answered with nothing, as in Redis).
pub fn replconf(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if argv.len() % 2 == 0 {
        return Reply::error(error::SYNTAX);
    }
    for pair in argv[1..].chunks(2) {
        let (option, value) = (pair[0], pair[1]);
        if is(option, "listening-port") {
            let Some(port) = parse_i64(value) else {
                return Reply::error(error::NOT_INTEGER);
            };
            let link = &ctx.client.info.replica;
            link.listening_port
                .store(port.max(0) as u64, Ordering::Relaxed);
        } else if is(option, "ip-address") {
            // NET_HOST_STR_LEN
            if value.len() >= 256 {
                return Reply::error_bytes(
                    format!(
                        "ERR REPLCONF ip-address provided by replica instance is too long: {} bytes",
                        value.len()
                    )
                    .into_bytes(),
                );
            }
            *ctx.client.info.replica.announced_ip.lock() =
                Some(String::from_utf8_lossy(value).into_owned());
        } else if is(option, "ack") {
            let link = &ctx.client.info.replica;
            if link.is_replica.load(Ordering::Relaxed) {
                if let Some(offset) = parse_i64(value).filter(|o| *o >= 0) {
                    link.ack_offset.fetch_max(offset as u64, Ordering::Relaxed);
                    link.ack_ms.store(ctx.now_ms, Ordering::Relaxed);
                    // `ACK <offset> FACK <aof offset>` (Redis 7.2).
                    let fsynced = match argv.get(3..5) {
                        Some([word, fack]) if is(word, "fack") => parse_i64(fack),
                        _ => None,
                    };
                    if let Some(fsynced) = fsynced.filter(|o| *o >= 0) {
                        link.fack_offset
                            .fetch_max(fsynced as u64, Ordering::Relaxed);
                    }
                    ctx.shared.replica_acks.notify_waiters();
                }
            }
            return Reply::Nothing;
        } else if is(option, "getack") {
            return Reply::Nothing;
        } else if is(option, "rdb-only") {
            match parse_i64(value) {
                Some(flag @ (0 | 1)) => ctx
                    .client
                    .info
                    .replica
                    .rdb_only
                    .store(flag == 1, Ordering::Relaxed),
                Some(_) => {
                    return Reply::error("ERR value is out of range, value must between 0 and 1")
                }
                None => return Reply::error(error::NOT_INTEGER),
            }
        } else if !is(option, "capa") && !is(option, "rdb-filter-only") {
            let mut message = b"ERR Unrecognized REPLCONF option: ".to_vec();
            message.extend_from_slice(option);
            return Reply::error_bytes(message);
        }
    }
    Reply::Ok
}

/// REPLICAOF host port | NO ONE (and its old name SLAVEOF): follow a
/// master, or stop following one. The link task (`net::replica`) connects
/// in the background; the reply comes at once, as Redis's.
pub fn replicaof(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if ctx.shared.cluster.get().is_some() {
        return Reply::error("ERR REPLICAOF not allowed in cluster mode.");
    }
    if ctx.shared.failover.stage() != crate::failover::Stage::None {
        return Reply::error("ERR REPLICAOF not allowed while failing over.");
    }
    let link = &ctx.shared.master_link;
    if is(argv[1], "no") && is(argv[2], "one") {
        become_master(ctx.shared);
        return Reply::Ok;
    }
    if ctx.client.info.replica.is_replica.load(Ordering::Relaxed) {
        return Reply::error("ERR Command is not valid when client is a replica.");
    }
    let port = match parse_i64(argv[2]) {
        Some(port @ 0..=65535) => port as u16,
        _ => return Reply::error("ERR Invalid master port"),
    };
    let target = Target {
        host: String::from_utf8_lossy(argv[1]).into_owned(),
        port,
    };
    if link
        .target()
        .is_some_and(|t| t.host.eq_ignore_ascii_case(&target.host) && t.port == port)
    {
        return Reply::Status("OK Already connected to specified master".into());
    }
    ctx.shared.config.write().replicaof = Some((target.host.clone(), port));
    follow(ctx.shared, target);
    Reply::Ok
}

/// This server replicates `target` from now on (REPLICAOF host port, or
/// a cluster node that became a replica).
pub fn follow(shared: &Shared, target: Target) {
    tracing::info!(host = %target.host, port = target.port, "replicating a master");
    shared.store.feed().start_following();
    shared.master_link.set_target(Some(target));
    // Its keys now change only as the master's do: clients blocked on
    // them are let go, and disconnected, as Redis's
    // disconnectAllBlockedClients does.
    for waiter in shared.blocked.all() {
        if waiter.settle(crate::blocking::Outcome::RoleChanged) {
            shared.blocked.remove(&waiter);
        }
    }
}

/// This server stops replicating and is a master (REPLICAOF NO ONE, a
/// cluster replica that won an election, CLUSTER RESET of a replica). A
/// new history begins here, recorded before any client may write; this
/// server's replicas learn its id when they reconnect, and continue.
pub fn become_master(shared: &Shared) {
    let link = &shared.master_link;
    if link.is_replica() {
        shared.store.feed().stop_following();
        link.set_target(None);
        close_replicas(shared);
        shared.config.write().replicaof = None;
        tracing::info!("MASTER MODE enabled");
    }
}

/// Closes the connections of this server's replicas (they reconnect).
fn close_replicas(shared: &Shared) {
    for replica in live_replicas(shared) {
        replica.kill();
    }
}

/// WAIT numreplicas timeout: how many replicas have everything this server
/// streamed so far (its whole offset, which covers this client's writes),
/// as soon as `numreplicas` have or `timeout` ms have passed (0: no
/// limit). The replicas are asked for their offsets at once. Inside MULTI
/// or a script it answers at once, as Redis does.
pub fn wait(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let wanted = match int_arg(argv[1]) {
        Ok(n) => n,
        Err(reply) => return reply,
    };
    let timeout = match int_arg(argv[2]) {
        Ok(t) if t < 0 => return Reply::error(error::TIMEOUT_NEGATIVE),
        Ok(t) => t as u64,
        Err(reply) => return reply,
    };
    if ctx.shared.master_link.is_replica() {
        return Reply::error("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.");
    }
    let feed = ctx.shared.store.feed();
    let offset = feed.replication_offset();
    let acked = acknowledged(ctx.shared, offset);
    if wanted <= acked as i64 || ctx.held.is_some() || ctx.client.in_script {
        return Reply::Int(acked as i64);
    }
    feed.request_acks();
    ctx.client.then(After::WaitForReplicas {
        wanted: wanted as usize,
        offset,
        timeout_ms: timeout,
    });
    Reply::Nothing
}

/// WAITAOF numlocal numreplicas timeout (Redis 7.2): waits until the
/// local append-only file (numlocal 1) and `numreplicas` replicas' files
/// have fsynced this client's writes, or the timeout; replies how many
/// of each did. Replicas are counted against the replication offset now
/// (as WAIT counts them), which covers every write of this client.
pub fn waitaof(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let local = match int_arg(argv[1]) {
        Ok(n @ (0 | 1)) => n == 1,
        Ok(_) => return Reply::error("ERR value is out of range, value must between 0 and 1"),
        Err(reply) => return reply,
    };
    let wanted = match parse_i64(argv[2]).filter(|n| *n >= 0) {
        Some(n) => n as usize,
        None => return Reply::error("ERR value is out of range, must be positive"),
    };
    let timeout = match parse_i64(argv[3]) {
        Some(t) if t < 0 => return Reply::error(error::TIMEOUT_NEGATIVE),
        Some(t) => t as u64,
        None => return Reply::error("ERR timeout is not an integer or out of range"),
    };
    if ctx.shared.master_link.is_replica() {
        return Reply::error("ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.");
    }
    let logging = ctx.shared.store.feed().logging();
    if local && !logging {
        return Reply::error(
            "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.",
        );
    }
    let aof_offset = ctx.client.aof_offset;
    let offset = ctx.shared.store.feed().replication_offset();
    let (fsynced_here, fsynced_replicas) = aof_acknowledged(ctx.shared, aof_offset, offset);
    let met = (fsynced_here || !local) && fsynced_replicas >= wanted;
    if met || ctx.held.is_some() || ctx.client.in_script {
        return aof_reply(fsynced_here, fsynced_replicas);
    }
    ctx.shared.aof.request_sync();
    ctx.shared.store.feed().request_acks();
    ctx.client.then(After::WaitForAof {
        local,
        wanted,
        aof_offset,
        offset,
        timeout_ms: timeout,
    });
    Reply::Nothing
}

/// WAITAOF's reply: `[local fsynced (0 or 1), replicas that fsynced]`.
pub fn aof_reply(fsynced_here: bool, fsynced_replicas: usize) -> Reply {
    Reply::Array(vec![
        Reply::Int(fsynced_here as i64),
        Reply::Int(fsynced_replicas as i64),
    ])
}

/// Whether this server's append-only file fsynced the feed position
/// `aof_offset` (never while it is off, as in Redis), and how many
/// replicas said theirs fsynced the replication offset `offset`.
pub fn aof_acknowledged(shared: &Shared, aof_offset: u64, offset: u64) -> (bool, usize) {
    let here = shared.store.feed().logging() && shared.aof.synced() >= aof_offset;
    let replicas = live_replicas(shared)
        .iter()
        .filter(|r| r.replica.fack_offset.load(Ordering::Relaxed) >= offset)
        .count();
    (here, replicas)
}

/// `min-replicas-to-write`: false when it is set and fewer replicas than
/// it asks for acknowledged within `min-replicas-max-lag` seconds (Redis's
/// checkGoodReplicasStatus; a replica's lag is whole seconds since its
/// last REPLCONF ACK).
pub fn enough_good_replicas(shared: &Shared, now_ms: u64) -> bool {
    let wanted = shared.min_replicas.0.load(Ordering::Relaxed);
    let max_lag = shared.min_replicas.1.load(Ordering::Relaxed);
    // Checked on masters only (a replica's writes are its master's).
    if wanted == 0 || max_lag == 0 || shared.master_link.is_replica() {
        return true;
    }
    good_replicas(shared, now_ms, max_lag) as u64 >= wanted
}

/// Replicas whose last acknowledgement is at most `max_lag` seconds old.
fn good_replicas(shared: &Shared, now_ms: u64, max_lag: u64) -> usize {
    live_replicas(shared)
        .iter()
        .filter(|r| {
            let ack_ms = r.replica.ack_ms.load(Ordering::Relaxed);
            ack_ms != 0 && now_ms.saturating_sub(ack_ms) / 1000 <= max_lag
        })
        .count()
}

/// INFO replication's `min_slaves_good_slaves`, shown while
/// `min-replicas-to-write` is on.
pub fn good_replicas_line(shared: &Shared, now_ms: u64) -> Option<String> {
    let wanted = shared.min_replicas.0.load(Ordering::Relaxed);
    let max_lag = shared.min_replicas.1.load(Ordering::Relaxed);
    (wanted != 0 && max_lag != 0).then(|| {
        format!(
            "min_slaves_good_slaves:{}",
            good_replicas(shared, now_ms, max_lag)
        )
    })
}

/// Replicas that acknowledged `offset` or more.
pub fn acknowledged(shared: &Shared, offset: u64) -> usize {
    live_replicas(shared)
        .iter()
        .filter(|r| r.replica.ack_offset.load(Ordering::Relaxed) >= offset)
        .count()
}

/// ROLE: on a master, `master`, the replication offset, and each
/// replica's address, listening port and acknowledged offset; on a
/// replica, `slave`, its master's address, the link's state and the
/// offset applied (-1 without a link), as Redis replies.
pub fn role(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let link = &ctx.shared.master_link;
    if let Some(target) = link.target() {
        return Reply::Array(vec![
            Reply::bulk(b"slave"),
            Reply::bulk(target.host.as_bytes()),
            Reply::Int(target.port as i64),
            Reply::bulk(link.state().role_name().as_bytes()),
            Reply::Int(link.applied_offset.load(Ordering::Relaxed)),
        ]);
    }
    let offset = ctx.shared.store.feed().replication_offset();
    let replicas = replicas(ctx.shared)
        .iter()
        .map(|replica| {
            let link = &replica.replica;
            Reply::Array(vec![
                Reply::bulk(replica.replica_ip().as_bytes()),
                Reply::bulk(
                    link.listening_port
                        .load(Ordering::Relaxed)
                        .to_string()
                        .as_bytes(),
                ),
                Reply::bulk(
                    link.ack_offset
                        .load(Ordering::Relaxed)
                        .to_string()
                        .as_bytes(),
                ),
            ])
        })
        .collect();
    Reply::Array(vec![
        Reply::bulk(b"master"),
        Reply::Int(offset as i64),
        Reply::Array(replicas),
    ])
}

/// The connections that are replicas, oldest first (for listing).
pub fn replicas(shared: &Shared) -> Vec<Arc<ClientInfo>> {
    let mut replicas = live_replicas(shared);
    replicas.sort_by_key(|c| c.id);
    replicas
}

/// The connections that are replicas, in no order (for counting: WAIT
/// and `min-replicas-to-write` count on every check).
fn live_replicas(shared: &Shared) -> Vec<Arc<ClientInfo>> {
    shared
        .clients
        .snapshot()
        .into_iter()
        .filter(|c| {
            c.replica.is_replica.load(Ordering::Relaxed) && !c.killed.load(Ordering::Relaxed)
        })
        .collect()
}

/// INFO replication's `slave<n>` lines, as Redis writes them.
pub fn replica_lines(shared: &Shared, now_ms: u64) -> Vec<String> {
    replicas(shared)
        .iter()
        .enumerate()
        .map(|(n, replica)| {
            let link = &replica.replica;
            let ack_ms = link.ack_ms.load(Ordering::Relaxed);
            let lag = if ack_ms == 0 {
                0
            } else {
                now_ms.saturating_sub(ack_ms) / 1000
            };
            let state = if link.awaits_snapshot.load(Ordering::Relaxed) {
                "wait_bgsave"
            } else {
                "online"
            };
            format!(
                "slave{n}:ip={},port={},state={state},offset={},lag={lag}",
                replica.replica_ip(),
                link.listening_port.load(Ordering::Relaxed),
                link.ack_offset.load(Ordering::Relaxed),
            )
        })
        .collect()
}
