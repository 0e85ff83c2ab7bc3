//! A count that every worker thread changes often and few read: one slot
//! per thread, each on its own cache line, summed by the reader.
//!
//! An atomic that two cores both add to moves its cache line between them
//! on every add; on the request path that cost more than the work it
//! counted (a script run's two adds to a shared "runs in progress" count
//! and one to the Lua memory total were a tenth of a one-command EVAL's
//! CPU on two workers). Here a thread adds to its own slot, which stays in
//! its core's cache; reading sums every slot, so it is for counts read
//! rarely (INFO, SCRIPT KILL) or approximately.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

/// Slots per count. Threads past this many share slots: still correct,
/// only no longer free of contention.
const SLOTS: usize = 64;

/// One slot, alone on its cache line (128 bytes: adjacent-line prefetch
/// pairs lines on x86).
#[repr(align(128))]
#[derive(Default)]
struct Slot(AtomicI64);

/// A signed count summed over per-thread slots.
pub struct StripedCount {
    slots: Box<[Slot]>,
}

impl Default for StripedCount {
    fn default() -> StripedCount {
        StripedCount {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
        }
    }
}

impl StripedCount {
    /// Adds `delta` in this thread's slot.
    pub fn add(&self, delta: i64) {
        self.slots[thread_slot()]
            .0
            .fetch_add(delta, Ordering::SeqCst);
    }

    /// The count: the sum of every slot. Adds made meanwhile by other
    /// threads may or may not be in it.
    pub fn sum(&self) -> i64 {
        self.slots
            .iter()
            .map(|slot| slot.0.load(Ordering::SeqCst))
            .sum()
    }
}

/// This thread's slot index, given out in turn as threads first ask.
fn thread_slot() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SLOTS;
    }
    SLOT.with(|slot| *slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sum_holds_every_threads_adds() {
        let count = std::sync::Arc::new(StripedCount::default());
        let threads: Vec<_> = (0..SLOTS + 3)
            .map(|i| {
                let count = count.clone();
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        count.add(i as i64 + 1);
                    }
                    count.add(-1);
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let n = (SLOTS + 3) as i64;
        assert_eq!(count.sum(), 100 * n * (n + 1) / 2 - n);
    }
}
