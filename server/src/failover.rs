//! A coordinated failover outside cluster mode (FAILOVER, Redis 6.2+): its
//! state as INFO's `master_failover_state` shows it, and what the command,
//! the check that drives it and the replication link read and set. The
//! steps themselves are `cmd::failover`'s; nothing here touches a socket.
//!
//! The master pauses writes and waits for a replica to acknowledge its
//! whole offset (`waiting-for-sync`); then it becomes that replica's
//! replica, and its link sends `PSYNC <replid> <offset> FAILOVER`, which
//! makes the target a master that continues the same history
//! (`failover-in-progress`); the target's answer to that PSYNC ends it.

use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::master_link::Target;

/// Where a failover is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// None under way.
    None,
    /// Writes are paused; waiting for a replica to have everything.
    WaitingForSync,
    /// This server follows the target and asks it to take over.
    InProgress,
}

impl Stage {
    /// INFO's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::None => "no-failover",
            Stage::WaitingForSync => "waiting-for-sync",
            Stage::InProgress => "failover-in-progress",
        }
    }
}

/// A failover asked for.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The replica to hand over to; `None` until one has caught up when
    /// FAILOVER named none.
    pub target: Option<Target>,
    /// When waiting ends (TIMEOUT; `None`: it waits until FAILOVER ABORT).
    pub deadline: Option<Instant>,
    /// FORCE: at the deadline, hand over to the target even if it is
    /// behind.
    pub force: bool,
}

/// The server's failover, if one is under way.
#[derive(Default)]
pub struct Failover {
    state: Mutex<Option<(Stage, Plan)>>,
    /// Woken when a failover begins (the check runs while one is under
    /// way).
    pub begun: Notify,
}

impl Failover {
    /// The stage now.
    pub fn stage(&self) -> Stage {
        self.state
            .lock()
            .as_ref()
            .map_or(Stage::None, |(stage, _)| *stage)
    }

    /// The stage and the plan, when one is under way.
    pub fn current(&self) -> Option<(Stage, Plan)> {
        self.state.lock().clone()
    }

    /// Starts waiting for a replica to catch up; false if a failover is
    /// already under way.
    pub fn begin(&self, plan: Plan) -> bool {
        let mut state = self.state.lock();
        if state.is_some() {
            return false;
        }
        *state = Some((Stage::WaitingForSync, plan));
        drop(state);
        self.begun.notify_one();
        true
    }

    /// Moves from waiting to handing over to `target`; false if the
    /// failover ended meanwhile (FAILOVER ABORT).
    pub fn hand_over(&self, target: Target) -> bool {
        let mut state = self.state.lock();
        match state.as_mut() {
            Some((stage @ Stage::WaitingForSync, plan)) => {
                *stage = Stage::InProgress;
                plan.target = Some(target);
                true
            }
            _ => false,
        }
    }

    /// Ends the failover; returns the stage it was at.
    pub fn end(&self) -> Stage {
        self.state
            .lock()
            .take()
            .map_or(Stage::None, |(stage, _)| stage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            target: None,
            deadline: None,
            force: false,
        }
    }

    #[test]
    fn one_failover_at_a_time_through_its_stages() {
        let failover = Failover::default();
        assert_eq!(failover.stage(), Stage::None);
        assert!(failover.begin(plan()));
        assert!(!failover.begin(plan()), "a second one is refused");
        assert_eq!(failover.stage().name(), "waiting-for-sync");
        let target = Target {
            host: "127.0.0.1".into(),
            port: 6380,
        };
        assert!(failover.hand_over(target.clone()));
        assert!(!failover.hand_over(target.clone()), "only from waiting");
        assert_eq!(failover.stage().name(), "failover-in-progress");
        assert_eq!(failover.current().and_then(|(_, p)| p.target), Some(target));
        assert_eq!(failover.end(), Stage::InProgress);
        assert_eq!(failover.stage().name(), "no-failover");
        assert_eq!(failover.end(), Stage::None);
    }
}
