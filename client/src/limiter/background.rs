//! What the limiter does besides checks: the servers' clock, the cluster's
//! slot map, the rules from the server, and the task that runs them (with
//! the cached mode's sync) while the limiter lives.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use super::{Error, Limiter, Mode};
use crate::rules::RuleSet;
use crate::topology::{key_slot, Kind};

/// How often the clock offset and the slot map are fetched again when
/// nothing asks for it sooner.
const REFRESH_EVERY: Duration = Duration::from_secs(10);
/// Least time between two slot-map fetches that a redirect or a failed
/// call asks for (a node that is down fails every call).
const REFRESH_AT_MOST_EVERY: Duration = Duration::from_millis(250);

impl Limiter {
    /// The timeout for calls off the request path (start, refreshes).
    fn background_timeout(&self) -> Duration {
        self.inner
            .config
            .sync_timeout
            .max(Duration::from_millis(500))
    }

    /// Asks the cluster which node serves each slot (or learns that the
    /// server is standalone).
    pub(super) async fn refresh_topology(&self) -> redis::RedisResult<Kind> {
        self.inner.topology.refresh(self.background_timeout()).await
    }

    /// Sets the clock offset from the first node that answers TIME.
    pub(super) async fn calibrate_clock(&self) {
        let topology = &self.inner.topology;
        for index in 0..topology.len() {
            let node = topology.node(index);
            let call = async {
                let mut connection = node.connection().await?;
                redis::cmd("TIME")
                    .query_async::<(u64, u64)>(&mut connection)
                    .await
            };
            if let Ok(Ok((secs, micros))) =
                tokio::time::timeout(self.background_timeout(), call).await
            {
                self.note_server_time(secs * 1000 + micros / 1000);
                return;
            }
        }
    }

    /// Reads the rule document at `key` (from the node serving its slot)
    /// and installs it; false when absent or unchanged.
    pub(super) async fn reload_rules(&self, key: &str) -> Result<bool, Error> {
        let document = self
            .on_slot(
                key_slot(key),
                self.background_timeout(),
                |mut connection, asking| async move {
                    let mut pipe = redis::pipe();
                    if asking {
                        pipe.cmd("ASKING").ignore();
                    }
                    pipe.cmd("GET").arg(key);
                    let (document,) = pipe
                        .query_async::<(Option<Vec<u8>>,)>(&mut connection)
                        .await?;
                    Ok(document)
                },
            )
            .await
            .ok_or_else(|| {
                Error::Redis(redis::RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "no node serving the rules key answered",
                )))
            })?;
        let Some(document) = document else {
            return Ok(false);
        };
        let rules = RuleSet::from_json(&document).map_err(Error::Rules)?;
        Ok(self.install_rules(rules))
    }

    /// Listens for rule updates on `channel`. PUBLISH reaches every node of
    /// a cluster, so any node will do: the listener starts on the first
    /// and moves to the next whenever its node goes away.
    pub(super) fn spawn_rules_listener(&self, key: String, channel: String) {
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut next_node = 0usize;
            loop {
                let client = {
                    let Some(inner) = weak.upgrade() else {
                        return;
                    };
                    let node = inner.topology.node(next_node % inner.topology.len());
                    next_node += 1;
                    node.client().clone()
                };
                let Ok(mut pubsub) = client.get_async_pubsub().await else {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    if weak.strong_count() == 0 {
                        return;
                    }
                    continue;
                };
                if pubsub.subscribe(&channel).await.is_err() {
                    continue;
                }
                // Reload once after (re)subscribing: an update sent while we
                // were not listening is not lost.
                if let Some(inner) = weak.upgrade() {
                    let _ = Limiter { inner }.reload_rules(&key).await;
                }
                let mut messages = pubsub.on_message();
                loop {
                    // Wake up now and then to notice the limiter is gone.
                    let message = tokio::select! {
                        message = messages.next() => message,
                        _ = tokio::time::sleep(Duration::from_millis(500)) => {
                            if weak.strong_count() == 0 {
                                return;
                            }
                            continue;
                        }
                    };
                    if message.is_none() {
                        break;
                    }
                    let Some(inner) = weak.upgrade() else {
                        return;
                    };
                    if let Err(error) = (Limiter { inner }).reload_rules(&key).await {
                        tracing::warn!(%error, "rules update not applied");
                    }
                }
                if weak.strong_count() == 0 {
                    return;
                }
            }
        });
    }

    /// The background task: the cached mode's sync every interval, the
    /// slot map when a redirect or a failure made it stale, and every
    /// `REFRESH_EVERY` the clock and the map.
    pub(super) fn spawn_maintenance(&self) {
        let weak = Arc::downgrade(&self.inner);
        // Exact mode only refreshes; it still ticks every 500 ms so the
        // task ends soon after the limiter is dropped.
        let interval = match self.inner.config.mode {
            Mode::Cached { sync_interval } => sync_interval,
            Mode::Exact => Duration::from_millis(500),
        };
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut last_refresh = Instant::now();
            let mut last_map_fetch = Instant::now();
            loop {
                ticker.tick().await;
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                let limiter = Limiter { inner };
                let due = last_refresh.elapsed() >= REFRESH_EVERY;
                let topology = &limiter.inner.topology;
                let asked = (topology.is_stale() || topology.kind() == Kind::Unknown)
                    && last_map_fetch.elapsed() >= REFRESH_AT_MOST_EVERY;
                if asked || (due && topology.kind() == Kind::Cluster) {
                    let _ = limiter.refresh_topology().await;
                    last_map_fetch = Instant::now();
                }
                if matches!(limiter.inner.config.mode, Mode::Cached { .. }) {
                    limiter.sync_now().await;
                }
                if due {
                    limiter.calibrate_clock().await;
                    last_refresh = Instant::now();
                }
            }
        });
    }
}
