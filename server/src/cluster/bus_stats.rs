//! Bus messages counted by type, for CLUSTER INFO.

use std::sync::atomic::{AtomicU64, Ordering};

/// Redis's bus message type names, by type number (clusterGetMessageTypeString).
const MESSAGE_TYPES: [&str; 11] = [
    "ping",
    "pong",
    "meet",
    "fail",
    "publish",
    "auth-req",
    "auth-ack",
    "update",
    "mfstart",
    "module",
    "publishshard",
];

/// Bus messages sent and received by type, as CLUSTER INFO's
/// `cluster_stats_messages_*` count them.
#[derive(Default)]
pub struct BusStats {
    sent: [AtomicU64; 11],
    received: [AtomicU64; 11],
}

impl BusStats {
    /// A message of this type was queued to a link.
    pub fn sent(&self, kind: u16) {
        if let Some(count) = self.sent.get(kind as usize) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A message of this type arrived.
    pub fn received(&self, kind: u16) {
        if let Some(count) = self.received.get(kind as usize) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// CLUSTER INFO's lines: each type seen, then the total, sent then
    /// received (genClusterInfoString).
    pub fn info_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for (counts, direction) in [(&self.sent, "sent"), (&self.received, "received")] {
            let mut total = 0;
            for (name, count) in MESSAGE_TYPES.iter().zip(counts.iter()) {
                let count = count.load(Ordering::Relaxed);
                if count > 0 {
                    lines.push(format!("cluster_stats_messages_{name}_{direction}:{count}"));
                    total += count;
                }
            }
            lines.push(format!("cluster_stats_messages_{direction}:{total}"));
        }
        lines
    }
}
