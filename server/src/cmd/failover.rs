//! FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]: a master hands its
//! role to one of its replicas with no acknowledged write lost, as Redis
//! 6.2+ does outside cluster mode. Writes pause; once a replica (the one
//! named, or any) has acknowledged the master's whole offset, the master
//! follows it and its link asks `PSYNC <replid> <offset> FAILOVER`, which
//! makes that replica a master continuing the same history
//! (`cmd::replication::psync`); the old master continues from it as a
//! replica, and so do the other replicas. The state is `crate::failover`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::args::{is, parse_i64};
use super::{error, Ctx};
use crate::clients::ClientInfo;
use crate::failover::{Plan, Stage};
use crate::master_link::Target;
use crate::pause::{PauseKind, PausePurpose};
use crate::resp::Reply;
use crate::state::Shared;

/// How often the check runs while a failover waits (Redis runs its
/// replication cron every 100 ms during one), and how often the replicas
/// are asked for their offsets meanwhile.
const CHECK_EVERY: Duration = Duration::from_millis(100);

/// FAILOVER, with Redis's checks in Redis's order and its error texts.
pub fn failover(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let shared = ctx.shared;
    if shared.cluster.get().is_some() {
        return Reply::error(
            "ERR FAILOVER not allowed in cluster mode. Use CLUSTER FAILOVER command instead.",
        );
    }
    if argv.len() == 2 && is(argv[1], "abort") {
        if shared.failover.stage() == Stage::None {
            return Reply::error("ERR No failover in progress.");
        }
        abort(shared, "Failover manually aborted");
        return Reply::Ok;
    }
    let mut timeout_ms: i64 = 0;
    let mut force = false;
    let mut to: Option<(&[u8], i64)> = None;
    let mut j = 1;
    while j < argv.len() {
        if is(argv[j], "timeout") && j + 1 < argv.len() && timeout_ms == 0 {
            let Some(ms) = parse_i64(argv[j + 1]) else {
                return Reply::error(error::NOT_INTEGER);
            };
            if ms <= 0 {
                return Reply::error("ERR FAILOVER timeout must be greater than 0");
            }
            timeout_ms = ms;
            j += 2;
        } else if is(argv[j], "to") && j + 2 < argv.len() && to.is_none() {
            let Some(port) = parse_i64(argv[j + 2]) else {
                return Reply::error(error::NOT_INTEGER);
            };
            to = Some((argv[j + 1], port));
            j += 3;
        } else if is(argv[j], "force") && !force {
            force = true;
            j += 1;
        } else {
            return Reply::error(error::SYNTAX);
        }
    }
    if shared.failover.stage() != Stage::None {
        return Reply::error("ERR FAILOVER already in progress.");
    }
    if shared.master_link.is_replica() {
        return Reply::error("ERR FAILOVER is not valid when server is a replica.");
    }
    if super::replication::replicas(shared).is_empty() {
        return Reply::error("ERR FAILOVER requires connected replicas.");
    }
    if force && (timeout_ms == 0 || to.is_none()) {
        return Reply::error(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        );
    }
    let target = match to {
        Some((host, port)) => {
            let host = String::from_utf8_lossy(host).into_owned();
            if find_replica(shared, &host, port).is_none() {
                return Reply::error("ERR FAILOVER target HOST and PORT is not a replica.");
            }
            tracing::info!("FAILOVER requested to {host}:{port}.");
            // A replica's listening port fits a u16 (REPLCONF stores it so).
            Some(Target {
                host,
                port: port as u16,
            })
        }
        None => {
            tracing::info!("FAILOVER requested to any replica.");
            None
        }
    };
    let plan = Plan {
        target,
        deadline: (timeout_ms > 0)
            .then(|| Instant::now() + Duration::from_millis(timeout_ms as u64)),
        force,
    };
    if !shared.failover.begin(plan) {
        return Reply::error("ERR FAILOVER already in progress.");
    }
    // Writes wait until the failover ends (then the old master refuses
    // them as a replica); reads go on.
    shared.pause.pause(
        PausePurpose::Failover,
        PauseKind::Write,
        Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600),
    );
    Reply::Ok
}

/// The replica at `host` (its announced or connection address, compared
/// case-insensitively) listening on `port`, as Redis's findReplica.
fn find_replica(shared: &Shared, host: &str, port: i64) -> Option<Arc<ClientInfo>> {
    super::replication::replicas(shared).into_iter().find(|r| {
        r.replica_ip().eq_ignore_ascii_case(host)
            && r.replica.listening_port.load(Ordering::Relaxed) as i64 == port
    })
}

/// One look at a waiting failover (Redis's updateFailoverStatus): past the
/// deadline it hands over anyway (FORCE) or gives up; otherwise it hands
/// over to the target, or to the first replica, once that replica has
/// acknowledged the whole offset. Returns whether it is still waiting.
pub fn check(shared: &Shared) -> bool {
    let Some((Stage::WaitingForSync, plan)) = shared.failover.current() else {
        return false;
    };
    if plan.deadline.is_some_and(|end| Instant::now() >= end) {
        match plan.target.filter(|_| plan.force) {
            Some(target) => {
                tracing::info!(
                    "FAILOVER to {}:{} time out exceeded, failing over.",
                    target.host,
                    target.port
                );
                hand_over(shared, target);
            }
            None => abort(shared, "Replica never caught up before timeout"),
        }
        return false;
    }
    let offset = shared.store.feed().replication_offset();
    let synced = |r: &ClientInfo| r.replica.ack_offset.load(Ordering::Relaxed) == offset;
    let caught_up = match plan.target {
        Some(target) => find_replica(shared, &target.host, i64::from(target.port))
            .filter(|r| synced(r))
            .map(|_| target),
        None => super::replication::replicas(shared)
            .into_iter()
            .find(|r| synced(r))
            .map(|r| Target {
                host: r.replica_ip(),
                port: r.replica.listening_port.load(Ordering::Relaxed) as u16,
            }),
    };
    match caught_up {
        Some(target) => {
            tracing::info!(
                "Failover target {}:{} is synced, failing over.",
                target.host,
                target.port
            );
            hand_over(shared, target);
            false
        }
        None => true,
    }
}

/// This master follows `target`; its link's PSYNC carries FAILOVER.
fn hand_over(shared: &Shared, target: Target) {
    if !shared.failover.hand_over(target.clone()) {
        return;
    }
    shared.config.write().replicaof = Some((target.host.clone(), target.port));
    super::replication::follow(shared, target);
}

/// Ends the failover under way, if any (Redis's abortFailover): a server
/// that already follows the target is a master again, and writes resume.
pub fn abort(shared: &Shared, why: &str) {
    let stage = shared.failover.end();
    if stage == Stage::None {
        return;
    }
    tracing::info!("FAILOVER aborted: {why}");
    if stage == Stage::InProgress {
        super::replication::become_master(shared);
    }
    shared.pause.unpause(PausePurpose::Failover);
}

/// The target answered this server's `PSYNC ... FAILOVER`: with a
/// resynchronization of either kind the failover is done; with an error it
/// is aborted ("Failover target rejected psync request").
pub fn psync_answered(shared: &Shared, accepted: bool) {
    if shared.failover.stage() != Stage::InProgress {
        return;
    }
    if accepted {
        shared.failover.end();
        shared.pause.unpause(PausePurpose::Failover);
    } else {
        abort(shared, "Failover target rejected psync request");
    }
}

/// Drives failovers for the server's life: while one waits, the check
/// runs whenever a replica acknowledges and at least every 100 ms. Every
/// 100 ms that no replica has caught up, the replicas are asked for their
/// offsets (REPLCONF GETACK), so the handover does not wait for their
/// once-a-second acknowledgements. Not more often: each request is itself
/// part of the stream, and asking at every acknowledgement would move the
/// offset before any replica could reach it.
pub async fn run(shared: Arc<Shared>) {
    loop {
        shared.failover.begun.notified().await;
        let mut asked: Option<Instant> = None;
        loop {
            let acked = shared.replica_acks.notified();
            if !check(&shared) {
                break;
            }
            if asked.is_none_or(|at| at.elapsed() >= CHECK_EVERY) {
                shared.store.feed().request_acks();
                asked = Some(Instant::now());
            }
            tokio::select! {
                _ = acked => {}
                _ = tokio::time::sleep(CHECK_EVERY) => {}
            }
        }
    }
}
