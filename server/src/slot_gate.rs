//! Keeping a keyed command's routing and its run on one state of its slot,
//! in cluster mode, without a shared lock on the hot path.
//!
//! Redis routes and runs a command in one step of one thread. tally routes
//! a command, then runs it; in between, SETSLOT may open the slot and a
//! MIGRATE may copy its key out. So every keyed command *enters* before it
//! routes and *leaves* after it ran:
//!
//! - On a slot that is not open (the common case) entering marks the
//!   thread busy: a counter of the thread's own made odd (inside), no
//!   cache line shared with other threads.
//! - On an open slot (migrating, importing, or with a MIGRATE under way)
//!   the command takes its slot's stripe lock, shared; MIGRATE takes it
//!   exclusively while it copies keys out.
//! - Whoever opens a slot sets its bit and then waits until every thread
//!   that may have entered before (counter odd at that moment) has left
//!   ([`quiesce`]): after that, every command on the slot sees it open.
//!
//! The order that matters: a command stores its mark and then loads the
//! bit; an opener stores the bit and then loads the marks. Either the
//! command sees the bit, or the opener sees it inside and waits for it.
//! Both sides need a full barrier between their store and their load. The
//! command's side runs for every keyed command and the opener's a few times
//! per resharding, so the cost is put on the opener (an asymmetric fence,
//! as folly's `asymmetricHeavyBarrier` and liburcu's membarrier flavour):
//! where the kernel has `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`
//! (Linux 4.14+), the command marks itself with a plain store behind a
//! compiler fence, and the opener's `membarrier` call makes every running
//! thread of the process execute a full barrier before it reads the marks.
//! Elsewhere (the call refused, another OS) the command's mark is a
//! sequentially consistent read-modify-write, as the opener's fence pairs
//! with.

use std::cell::Cell;
use std::sync::atomic::{compiler_fence, fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Once;

use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// One thread's counter, alone on its cache line: odd while the thread
/// runs a keyed command on a slot not open.
#[repr(align(64))]
#[derive(Default)]
pub struct Busy(AtomicU64);

/// Every thread that ever entered: the process's, shared by every server
/// in it (waiting for another server's thread to leave costs a few
/// microseconds at most). A counter lives as long as the process (one
/// cache line per thread that ever ran a keyed command in cluster mode).
static THREADS: Mutex<Vec<&'static Busy>> = Mutex::new(Vec::new());

thread_local! {
    /// This thread's counter, once it has one. A `const` initializer and
    /// no destructor: reading it is one load, with no lazy-init check.
    static MINE: Cell<Option<&'static Busy>> = const { Cell::new(None) };
}

/// This thread's counter, made and listed on its first keyed command.
#[inline(always)]
fn mine() -> &'static Busy {
    match MINE.with(Cell::get) {
        Some(busy) => busy,
        None => register_thread(),
    }
}

#[cold]
#[inline(never)]
fn register_thread() -> &'static Busy {
    let busy: &'static Busy = Box::leak(Box::default());
    THREADS.lock().push(busy);
    MINE.with(|mine| mine.set(Some(busy)));
    busy
}

/// True once the process is registered for private expedited membarrier
/// calls: from then on commands mark themselves with plain stores. It
/// only ever turns true, before the first server with a slot gate serves
/// a command.
static ASYMMETRIC: AtomicBool = AtomicBool::new(false);

/// Registers the process for `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`
/// once (the call is refused to a process that did not register).
fn enable_asymmetric_fence() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        if membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) {
            ASYMMETRIC.store(true, Ordering::SeqCst);
        }
    });
}

// From the kernel's uapi/linux/membarrier.h.
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

#[cfg(target_os = "linux")]
fn membarrier(command: libc::c_int) -> bool {
    // SAFETY: membarrier takes two integers and a CPU id, touches no
    // memory of ours, and fails with an error code when not available.
    unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            command,
            0 as libc::c_uint,
            0 as libc::c_int,
        ) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn membarrier(_command: libc::c_int) -> bool {
    false
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
        enable_asymmetric_fence();
        SlotGates {
            stripes: (0..STRIPES).map(|_| Stripe(RwLock::new(()))).collect(),
        }
    }
}

/// Held by a keyed command from before its routing to after its run.
pub enum Entered<'a> {
    /// A slot that needs no routing beyond this (served here plainly, see
    /// `crate::cluster::Cluster::enter`): marked inside, as `Busy`.
    Plain(&'static Busy),
    /// A slot that was not open: this thread (its counter) is marked
    /// inside. The counter is kept here so that leaving needs no second
    /// thread-local lookup; the command leaves on the thread it entered
    /// on (its run does not wait).
    Busy(&'static Busy),
    /// An open slot: its stripe, shared.
    Open(RwLockReadGuard<'a, ()>),
}

impl Drop for Entered<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if let Entered::Plain(busy) | Entered::Busy(busy) = self {
            busy.leave();
        }
    }
}

impl Busy {
    /// Marks the thread inside (the counter odd), ordered before the
    /// caller's load of the slot's open bit (see the module's text).
    #[inline(always)]
    fn arrive(&self) {
        if ASYMMETRIC.load(Ordering::Relaxed) {
            let outside = self.0.load(Ordering::Relaxed);
            self.0.store(outside + 1, Ordering::Relaxed);
            // The opener's membarrier stands for the CPU fence.
            compiler_fence(Ordering::SeqCst);
        } else {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Marks the thread outside again. Only the thread itself writes its
    /// counter, so a plain store does (no locked read-modify-write on the
    /// way out).
    #[inline(always)]
    fn leave(&self) {
        let inside = self.0.load(Ordering::Relaxed);
        self.0.store(inside + 1, Ordering::Release);
    }
}

impl SlotGates {
    /// Enters `slot`; `is_plain` and then `is_open` read its bits (after
    /// this thread is marked inside). A slot reads as plain only while it
    /// is not open: an opener clears that bit too before it waits.
    #[inline(always)]
    pub fn enter(
        &self,
        slot: u16,
        is_plain: impl Fn(u16) -> bool,
        is_open: impl Fn(u16) -> bool,
    ) -> Entered<'_> {
        let busy = mine();
        busy.arrive();
        if is_plain(slot) {
            return Entered::Plain(busy);
        }
        if !is_open(slot) {
            return Entered::Busy(busy);
        }
        busy.leave();
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
    fence(Ordering::SeqCst);
    if ASYMMETRIC.load(Ordering::SeqCst) && !membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) {
        // Registered, so the kernel has the call; it cannot fail here.
        // Were it to, commands' plain stores would go unfenced: stop.
        panic!("membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after registering");
    }
    let mine = MINE.with(Cell::get).map(|busy| busy as *const Busy);
    let threads: Vec<&'static Busy> = THREADS.lock().clone();
    for busy in threads {
        if Some(busy as *const Busy) == mine {
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
    use std::sync::Arc;

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
                let inside = gates.enter(7, |_| false, |_| open.load(Ordering::SeqCst));
                assert!(matches!(inside, Entered::Busy(_)));
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
        let inside = gates.enter(7, |_| false, |_| open.load(Ordering::SeqCst));
        assert!(matches!(inside, Entered::Open(_)));
        drop(inside);
        command.join().expect("joined");
    }

    /// Commands entering and leaving on other threads while an opener
    /// opens and closes the slot again and again: once `quiesce` returns,
    /// no command that saw the slot not open is still inside, whichever
    /// fence the process uses. (A missing fence leaves a window of a few
    /// nanoseconds that this rarely hits; an opener that does not wait
    /// fails it at once.)
    #[test]
    fn after_quiesce_no_command_that_missed_the_open_bit_is_inside() {
        let gates = Arc::new(SlotGates::default());
        let open = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let inside: Arc<Vec<AtomicBool>> =
            Arc::new((0..2).map(|_| AtomicBool::new(false)).collect());
        let workers: Vec<_> = (0..2)
            .map(|me| {
                let (gates, open, stop, inside) =
                    (gates.clone(), open.clone(), stop.clone(), inside.clone());
                std::thread::spawn(move || {
                    let mut plain = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let entered = gates.enter(3, |_| false, |_| open.load(Ordering::SeqCst));
                        if let Entered::Busy(_) = entered {
                            inside[me].store(true, Ordering::SeqCst);
                            for _ in 0..50 {
                                std::hint::spin_loop();
                            }
                            inside[me].store(false, Ordering::SeqCst);
                            plain += 1;
                        }
                        drop(entered);
                    }
                    plain
                })
            })
            .collect();
        for _ in 0..5_000 {
            open.store(true, Ordering::SeqCst);
            quiesce();
            for (worker, flag) in inside.iter().enumerate() {
                assert!(
                    !flag.load(Ordering::SeqCst),
                    "worker {worker} still inside a slot it saw not open"
                );
            }
            open.store(false, Ordering::SeqCst);
            std::thread::yield_now();
        }
        stop.store(true, Ordering::Relaxed);
        let plain: u64 = workers.into_iter().map(|w| w.join().expect("joined")).sum();
        assert!(
            plain > 0,
            "no command ever entered a closed slot: the test tested nothing"
        );
    }
}
