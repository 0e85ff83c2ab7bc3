//! Replica migration: a spare replica moves to a master left without a
//! working one, as Redis 7.0's do.

use super::{Node, Output};
use crate::message::node_flags;
use crate::{NodeName, SLOTS};

/// How long a master must stay orphaned before a replica moves to it
/// (CLUSTER_SLAVE_MIGRATION_DELAY): during a failover its own replicas
/// need a moment to announce the master they follow now.
const MIGRATION_DELAY_MS: u64 = 5000;

impl Node {
    /// Working (not FAIL) replicas of `master`, this node included.
    fn working_replicas(&self, master: &NodeName) -> Vec<NodeName> {
        self.replicas_of(master)
            .into_iter()
            .filter(|r| *r == self.me || self.peers.get(r).is_some_and(|p| !p.failed()))
            .collect()
    }

    /// Replica migration (clusterCron's orphaned-master check and
    /// clusterHandleSlaveMigration): when a master serving slots that had
    /// replicas has none working, and this replica's master has the most
    /// working replicas (at least two, more than the migration barrier),
    /// the replica of those masters with the smallest name follows the
    /// orphaned master once it has been orphaned for 5 s.
    pub(super) fn migrate_if_spare(&mut self, now_ms: u64) -> Vec<Output> {
        let Some(my_master) = self.my_master else {
            return Vec::new();
        };
        let mut orphaned = 0;
        let mut max_replicas = 0;
        let mut mine = 0;
        let masters: Vec<NodeName> = self
            .peers
            .values()
            .filter(|p| {
                !p.is_replica()
                    && !p.failed()
                    && p.flags & (node_flags::NOADDR | node_flags::HANDSHAKE) == 0
            })
            .map(|p| p.name)
            .collect();
        let mut target = None;
        let mut candidate = self.me;
        for master in &masters {
            let working = self.working_replicas(master);
            let serving = self.slot_count_of(master) > 0;
            let migrate_to = self
                .peers
                .get(master)
                .is_some_and(|p| p.flags & node_flags::MIGRATE_TO != 0);
            let is_orphaned = working.is_empty() && serving && migrate_to;
            if let Some(peer) = self.peers.get_mut(master) {
                if is_orphaned {
                    if peer.orphaned_since_ms == 0 {
                        peer.orphaned_since_ms = now_ms;
                    }
                } else {
                    peer.orphaned_since_ms = 0;
                }
            }
            if is_orphaned {
                orphaned += 1;
                target.get_or_insert(*master);
            }
            max_replicas = max_replicas.max(working.len());
            if *master == my_master {
                mine = working.len();
            }
        }
        let settings = self.failover_settings;
        if orphaned == 0
            || max_replicas < 2
            || mine != max_replicas
            || !settings.allow_replica_migration
            || mine <= settings.migration_barrier
            || self.slots_ok() != SLOTS
            || self.among_minority()
        {
            return Vec::new();
        }
        for master in &masters {
            let working = self.working_replicas(master);
            if working.len() == max_replicas {
                if let Some(smallest) = working.iter().min() {
                    candidate = candidate.min(*smallest);
                }
            }
        }
        let Some(target) = target else {
            return Vec::new();
        };
        let since = self.peers.get(&target).map_or(0, |p| p.orphaned_since_ms);
        if candidate != self.me || now_ms.saturating_sub(since) <= MIGRATION_DELAY_MS {
            return Vec::new();
        }
        self.set_master(target)
    }
}
