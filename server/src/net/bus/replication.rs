//! The cluster node's replication, as the bus driver carries it out: what
//! the node is told of this server's replication (its offset, how long its
//! master has been silent), where this server's replication points when
//! the node's role changes, and a master's pause for a replica's CLUSTER
//! FAILOVER.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tally_cluster::NodeName;

use super::carry_out;
use crate::state::Shared;

/// This node's replication offset (a master's stream; a replica's, which
/// relays its master's byte for byte) and how long a replica's master has
/// been silent or unreachable (0 for a master).
pub(super) fn replication_seen(shared: &Shared, now_ms: u64) -> (u64, u64) {
    let offset = shared.store.feed().replication_offset();
    let link = &shared.master_link;
    if !link.is_replica() {
        return (offset, 0);
    }
    let since = if link.state() == crate::master_link::LinkState::Connected {
        link.last_io_ms.load(Ordering::Relaxed)
    } else {
        link.down_since_ms.load(Ordering::Relaxed)
    };
    // Never linked: as old as can be, so it does not stand for election.
    let age = if since == 0 {
        u64::MAX / 2
    } else {
        now_ms.saturating_sub(since)
    };
    (offset, age)
}

/// Points this server's replication where the cluster says: at its
/// master's address for a replica (clusterCron's replicationSetMaster),
/// nowhere for a master that was replicating (a replica that won an
/// election or took over).
pub(super) fn follow_the_cluster(shared: &Shared) {
    let Some(cluster) = shared.cluster.get() else {
        return;
    };
    let link = &shared.master_link;
    match cluster.replicating() {
        Some((ip, port, plaintext_port)) => {
            // In a TLS cluster a node's client port is its TLS port; a
            // plaintext link goes to its plaintext port (Redis 7.2's
            // choice; 7.0 always used the first, which a plaintext link
            // cannot talk to).
            let tls_link = shared.config.read().tls.replication;
            let port = if tls_link || plaintext_port == 0 {
                port
            } else {
                plaintext_port
            };
            let target = crate::master_link::Target {
                host: String::from_utf8_lossy(&ip).into_owned(),
                port,
            };
            if link.target().as_ref() != Some(&target) {
                crate::cmd::replication::follow(shared, target);
            }
        }
        None if cluster.my_master().is_none() && link.is_replica() => {
            crate::cmd::replication::become_master(shared);
        }
        None => {}
    }
}

/// A replica asked this master for a manual failover: writes pause (so
/// the offset stops moving), and the replica is sent the offset it must
/// reach, taken after the pause (clusterProcessPacket's MFSTART).
pub(super) fn pause_for_failover(shared: &Arc<Shared>, replica: &NodeName, until_ms: u64) {
    let now = shared.clock.now_ms();
    let wait = Duration::from_millis(until_ms.saturating_sub(now));
    shared.pause.pause(
        crate::pause::PausePurpose::Failover,
        crate::pause::PauseKind::Write,
        std::time::Instant::now() + wait,
    );
    let Some(cluster) = shared.cluster.get() else {
        return;
    };
    let (offset, _) = replication_seen(shared, now);
    let outputs = cluster.with_node(|node| {
        node.observe_replication(offset, 0);
        node.ping_now(replica, now)
    });
    carry_out(shared, outputs, None);
}
