//! Holding clients' commands for a while, as Redis does for CLIENT PAUSE
//! (an upgrade, a controlled move) and for a coordinated failover (FAILOVER,
//! CLUSTER FAILOVER). WRITE holds the commands that may change the keyspace
//! or be replicated (writes, EVAL, EVALSHA, PUBLISH, an EXEC holding such
//! commands); ALL holds every command. A held command is not refused: its
//! connection stops reading and runs it when the pause ends.
//!
//! Each purpose has its own pause, as Redis's pauseClients keeps one per
//! purpose: CLIENT UNPAUSE lifts the client's pause and leaves a failover's
//! in force, and a failover's end leaves a CLIENT PAUSE given meanwhile. The
//! pause in force is the strictest kind of them all until the latest end.

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

/// Who paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PausePurpose {
    /// CLIENT PAUSE.
    Client = 0,
    /// A coordinated failover (FAILOVER, CLUSTER FAILOVER): writes stop
    /// until the replica has everything.
    Failover = 1,
    /// A shutdown waiting for its replicas (`shutdown-timeout`).
    Shutdown = 2,
}

const PURPOSES: usize = 3;

/// The server's pauses, if any.
#[derive(Default)]
pub struct ClientPause {
    /// True while a pause may be in force: the per-command check reads
    /// only this when there is none.
    active: AtomicBool,
    by_purpose: Mutex<[Option<(PauseKind, Instant)>; PURPOSES]>,
    /// Woken when a pause is lifted early.
    lifted: Notify,
}

impl ClientPause {
    /// Pauses for `purpose` until `until`; a pause of that purpose already
    /// in force keeps the more restrictive kind and the later end, as
    /// Redis's pauseClients.
    pub fn pause(&self, purpose: PausePurpose, kind: PauseKind, until: Instant) {
        let mut pauses = self.by_purpose.lock();
        let slot = &mut pauses[purpose as usize];
        *slot = Some(match *slot {
            Some((k, end)) => (k.max(kind), end.max(until)),
            None => (kind, until),
        });
        self.active.store(true, Ordering::SeqCst);
    }

    /// Lifts `purpose`'s pause at once (CLIENT UNPAUSE, a failover's end);
    /// another purpose's stays.
    pub fn unpause(&self, purpose: PausePurpose) {
        let mut pauses = self.by_purpose.lock();
        pauses[purpose as usize] = None;
        if pauses.iter().all(Option::is_none) {
            self.active.store(false, Ordering::SeqCst);
        }
        drop(pauses);
        self.lifted.notify_waiters();
    }

    /// Whether `purpose` has a pause in force now.
    pub fn paused_for(&self, purpose: PausePurpose) -> bool {
        self.active.load(Ordering::Relaxed)
            && self.by_purpose.lock()[purpose as usize].is_some_and(|(_, end)| Instant::now() < end)
    }

    /// The pause in force now, if any: the strictest kind and the latest
    /// end of the purposes' pauses (those that timed out are cleared).
    pub fn current(&self) -> Option<(PauseKind, Instant)> {
        if !self.active.load(Ordering::Relaxed) {
            return None;
        }
        let now = Instant::now();
        let mut pauses = self.by_purpose.lock();
        let mut merged: Option<(PauseKind, Instant)> = None;
        for slot in pauses.iter_mut() {
            match *slot {
                Some((_, end)) if now >= end => *slot = None,
                Some((kind, end)) => {
                    merged = Some(match merged {
                        Some((k, e)) => (k.max(kind), e.max(end)),
                        None => (kind, end),
                    });
                }
                None => {}
            }
        }
        if merged.is_none() {
            self.active.store(false, Ordering::SeqCst);
        }
        merged
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

    /// Waits until the pause in force now ends (its timeout, or an
    /// unpause that leaves none in force).
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
        pause.pause(
            PausePurpose::Client,
            PauseKind::All,
            now + Duration::from_secs(5),
        );
        pause.pause(
            PausePurpose::Client,
            PauseKind::Write,
            now + Duration::from_secs(60),
        );
        let (kind, end) = pause.current().expect("paused");
        assert_eq!(kind, PauseKind::All);
        assert_eq!(end, now + Duration::from_secs(60));
        assert!(pause.holds(|| false));
        pause.unpause(PausePurpose::Client);
        assert!(pause.current().is_none());
    }

    #[test]
    fn write_pauses_hold_only_what_may_write_and_end_on_time() {
        let pause = ClientPause::default();
        pause.pause(
            PausePurpose::Client,
            PauseKind::Write,
            Instant::now() + Duration::from_secs(60),
        );
        assert!(pause.holds(|| true));
        assert!(!pause.holds(|| false));
        pause.pause(PausePurpose::Client, PauseKind::Write, Instant::now());
        pause.unpause(PausePurpose::Client);
        pause.pause(PausePurpose::Client, PauseKind::Write, Instant::now());
        assert!(
            !pause.holds(|| true),
            "a pause whose end passed holds nothing"
        );
    }

    #[test]
    fn each_purpose_lifts_only_its_own_pause() {
        let pause = ClientPause::default();
        let later = Instant::now() + Duration::from_secs(60);
        pause.pause(PausePurpose::Failover, PauseKind::Write, later);
        pause.pause(PausePurpose::Client, PauseKind::All, later);
        assert_eq!(pause.current().map(|(k, _)| k), Some(PauseKind::All));
        pause.unpause(PausePurpose::Client);
        assert_eq!(pause.current().map(|(k, _)| k), Some(PauseKind::Write));
        assert!(pause.holds(|| true));
        pause.pause(PausePurpose::Client, PauseKind::Write, later);
        pause.unpause(PausePurpose::Failover);
        assert!(pause.holds(|| true), "the client's pause stays");
        pause.unpause(PausePurpose::Client);
        assert!(pause.current().is_none());
    }

    #[tokio::test]
    async fn waiting_ends_with_unpause() {
        let pause = std::sync::Arc::new(ClientPause::default());
        pause.pause(
            PausePurpose::Client,
            PauseKind::All,
            Instant::now() + Duration::from_secs(3600),
        );
        let waiter = {
            let pause = pause.clone();
            tokio::spawn(async move { pause.wait().await })
        };
        tokio::task::yield_now().await;
        pause.unpause(PausePurpose::Client);
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("the wait ends")
            .expect("no panic");
    }
}
