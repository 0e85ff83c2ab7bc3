//! Keeping a keyed command's routing and its run on one state of its slot,
//! in cluster mode, without a shared lock on the hot path.
//!
//! Redis routes and runs a command in one step of one thread. tally routes
//! a command, then runs it; in between, SETSLOT may open the slot and a
//! MIGRATE may copy its key out. So every keyed command *enters* before it
//! routes and *leaves* after it ran:
//!
//! - On a slot that is not open (the common case) entering marks the
//!   thread busy: one atomic add on a counter of the thread's own (odd =
//!   inside), no cache line shared with other threads.
//! - On an open slot (migrating, importing, or with a MIGRATE under way)
//!   the command takes its slot's stripe lock, shared; MIGRATE takes it
//!   exclusively while it copies keys out.
//! - Whoever opens a slot sets its bit and then waits until every thread
//!   that may have entered before (counter odd at that moment) has left
//!   ([`quiesce`]): after that, every command on the slot sees it open.
//!
//! The add and the bit's load on one side, the bit's store and the
//! counters' loads on the other, are sequentially consistent: a command
//! either sees the bit, or the opener sees it inside and waits for it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// One thread's counter, alone on its cache line.
#[repr(align(64))]
#[derive(Default)]
struct Busy(AtomicU64);

/// Every thread that ever entered: the process's, shared by every server
/// in it (waiting for another server's thread to leave costs a few
/// microseconds at most).
static THREADS: Mutex<Vec<Arc<Busy>>> = Mutex::new(Vec::new());

thread_local! {
    static MINE: Arc<Busy> = {
        let busy = Arc::new(Busy::default());
        THREADS.lock().push(busy.clone());
        busy
    };
}

/// Stripes of the open-slot locks: enough that two workers rarely share
/// one, each on its own cache line.
const STRIPES: usize = 64;

#[repr(align(64))]
struct Stripe(RwLock<()>);

/// The stripe locks of one server.
pub struct SlotGates {
    stripes: Box<[Stripe]>,
}

impl Default for SlotGates {
    fn default() -> SlotGates {
        SlotGates {
            stripes: (0..STRIPES).map(|_| Stripe(RwLock::new(()))).collect(),
        }
    }
}

/// Held by a keyed command from before its routing to after its run.
pub enum Entered<'a> {
    /// A slot that was not open: this thread is marked inside.
    Busy,
    /// An open slot: its stripe, shared.
    Open(RwLockReadGuard<'a, ()>),
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        if let Entered::Busy = self {
            MINE.with(|busy| busy.leave());
        }
    }
}

impl Busy {
    /// Marks the thread outside again. Only the thread itself writes its
    /// counter, so a plain store does (no locked read-modify-write on the
    /// way out; entering needs one, for its order with the open bit).
    #[inline(always)]
    fn leave(&self) {
        let inside = self.0.load(Ordering::Relaxed);
        self.0.store(inside + 1, Ordering::Release);
    }
}

impl SlotGates {
    /// Enters `slot`; `is_open` reads its open bit (after this thread is
    /// marked inside).
    #[inline(always)]
    pub fn enter(&self, slot: u16, is_open: impl Fn(u16) -> bool) -> Entered<'_> {
        MINE.with(|busy| busy.0.fetch_add(1, Ordering::SeqCst));
        if !is_open(slot) {
            return Entered::Busy;
        }
        MINE.with(|busy| busy.leave());
        Entered::Open(self.stripes[slot as usize % STRIPES].0.read())
    }

    /// The stripes of `slots`, exclusively, in stripe order (no command on
    /// an open slot among them is between its routing and the end of its
    /// run while they are held).
    pub fn close(&self, slots: impl IntoIterator<Item = u16>) -> Vec<RwLockWriteGuard<'_, ()>> {
        let mut stripes: Vec<usize> = slots.into_iter().map(|s| s as usize % STRIPES).collect();
        stripes.sort_unstable();
        stripes.dedup();
        stripes
            .into_iter()
            .map(|i| self.stripes[i].0.write())
            .collect()
    }
}

/// Waits until every other thread that was inside a command on a slot
/// not open (when this was called) has left it. Call after opening a slot
/// (its bit stored with `SeqCst`).
pub fn quiesce() {
    std::sync::atomic::fence(Ordering::SeqCst);
    let mine = MINE.with(Arc::as_ptr);
    let threads: Vec<Arc<Busy>> = THREADS.lock().clone();
    for busy in threads {
        if Arc::as_ptr(&busy) == mine {
            // This thread's own command (an EXEC running SETSLOT).
            continue;
        }
        let seen = busy.0.load(Ordering::SeqCst);
        if seen % 2 == 0 {
            continue;
        }
        let mut spins = 0u32;
        while busy.0.load(Ordering::Acquire) == seen {
            spins += 1;
            if spins < 100 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn an_opener_waits_for_a_command_that_entered_before() {
        let gates = Arc::new(SlotGates::default());
        let open = Arc::new(AtomicBool::new(false));
        let left = Arc::new(AtomicBool::new(false));
        let entered = Arc::new(std::sync::Barrier::new(2));
        let command = {
            let (gates, open, left, entered) =
                (gates.clone(), open.clone(), left.clone(), entered.clone());
            std::thread::spawn(move || {
                let inside = gates.enter(7, |_| open.load(Ordering::SeqCst));
                assert!(matches!(inside, Entered::Busy));
                entered.wait();
                std::thread::sleep(std::time::Duration::from_millis(50));
                left.store(true, Ordering::SeqCst);
                drop(inside);
            })
        };
        entered.wait();
        open.store(true, Ordering::SeqCst);
        quiesce();
        assert!(
            left.load(Ordering::SeqCst),
            "quiesce returned before it left"
        );
        // From now on a command on the slot takes the stripe.
        let inside = gates.enter(7, |_| open.load(Ordering::SeqCst));
        assert!(matches!(inside, Entered::Open(_)));
        drop(inside);
        command.join().expect("joined");
    }
}
