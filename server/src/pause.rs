//! CLIENT PAUSE: holding clients' commands for a while, as Redis does for a
//! controlled failover or an upgrade. WRITE holds the commands that may
//! change the keyspace or be replicated (writes, EVAL, EVALSHA, PUBLISH,
//! an EXEC holding such commands); ALL holds every command. A held command
//! is not refused: its connection stops reading and runs it when the pause
//! ends (CLIENT UNPAUSE or the timeout).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// What a pause holds. Ordered: ALL is more restrictive than WRITE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PauseKind {
    /// Commands that may write or be replicated.
    Write,
    /// Every command.
    All,
}

/// The server's pause, if any.
#[derive(Default)]
pub struct ClientPause {
    /// True while a pause may be in force: the per-command check reads
    /// only this when there is none.
    active: AtomicBool,
    state: Mutex<Option<(PauseKind, Instant)>>,
    /// Woken when the pause is lifted early.
    lifted: Notify,
}

impl ClientPause {
    /// Pauses until `until`; a pause already in force keeps the more
    /// restrictive kind and the later end, as Redis's pauseClients.
    pub fn pause(&self, kind: PauseKind, until: Instant) {
        let mut state = self.state.lock();
        let merged = match *state {
            Some((k, end)) => (k.max(kind), end.max(until)),
            None => (kind, until),
        };
        *state = Some(merged);
        self.active.store(true, Ordering::SeqCst);
    }

    /// CLIENT UNPAUSE: lifts the pause at once.
    pub fn unpause(&self) {
        *self.state.lock() = None;
        self.active.store(false, Ordering::SeqCst);
        self.lifted.notify_waiters();
    }

    /// The pause in force now, if any (one that timed out is cleared).
    pub fn current(&self) -> Option<(PauseKind, Instant)> {
        if !self.active.load(Ordering::Relaxed) {
            return None;
        }
        let mut state = self.state.lock();
        match *state {
            Some((_, end)) if Instant::now() >= end => {
                *state = None;
                self.active.store(false, Ordering::SeqCst);
                None
            }
            other => other,
        }
    }

    /// True when a command must wait: any command under ALL, one that may
    /// write or be replicated under WRITE.
    pub fn holds(&self, may_write: impl FnOnce() -> bool) -> bool {
        match self.current() {
            None => false,
            Some((PauseKind::All, _)) => true,
            Some((PauseKind::Write, _)) => may_write(),
        }
    }

    /// Waits until the pause in force now ends (its timeout, or UNPAUSE).
    pub async fn wait(&self) {
        loop {
            let lifted = self.lifted.notified();
            let Some((_, end)) = self.current() else {
                return;
            };
            tokio::select! {
                _ = lifted => {}
                _ = tokio::time::sleep_until(end.into()) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_second_pause_keeps_the_stricter_kind_and_the_later_end() {
        let pause = ClientPause::default();
        let now = Instant::now();
        pause.pause(PauseKind::All, now + Duration::from_secs(5));
        pause.pause(PauseKind::Write, now + Duration::from_secs(60));
        let (kind, end) = pause.current().expect("paused");
        assert_eq!(kind, PauseKind::All);
        assert_eq!(end, now + Duration::from_secs(60));
        assert!(pause.holds(|| false));
        pause.unpause();
        assert!(pause.current().is_none());
    }

    #[test]
    fn write_pauses_hold_only_what_may_write_and_end_on_time() {
        let pause = ClientPause::default();
        pause.pause(PauseKind::Write, Instant::now() + Duration::from_secs(60));
        assert!(pause.holds(|| true));
        assert!(!pause.holds(|| false));
        pause.pause(PauseKind::Write, Instant::now());
        pause.unpause();
        pause.pause(PauseKind::Write, Instant::now());
        assert!(
            !pause.holds(|| true),
            "a pause whose end passed holds nothing"
        );
    }

    #[tokio::test]
    async fn waiting_ends_with_unpause() {
        let pause = std::sync::Arc::new(ClientPause::default());
        pause.pause(PauseKind::All, Instant::now() + Duration::from_secs(3600));
        let waiter = {
            let pause = pause.clone();
            tokio::spawn(async move { pause.wait().await })
        };
        tokio::task::yield_now().await;
        pause.unpause();
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("the wait ends")
            .expect("no panic");
    }
}
