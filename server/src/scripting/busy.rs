//! Busy scripts: the instruction hook's accounting, BUSY for other clients,
//! SCRIPT KILL, UNKILLABLE, and stopping every script at shutdown.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::Scripts;
use crate::resp::Reply;

thread_local! {
    /// The FCALL this thread is running, borrowed for the run.
    static CALLING: std::cell::Cell<(*const &'static [u8], usize)> =
        const { std::cell::Cell::new((std::ptr::null(), 0)) };
}

/// The command of the function call running on this thread, lent for the
/// call's length: FUNCTION STATS shows it once the run is busy, and only
/// then is it copied (a call that never turns busy costs no copy).
pub struct CallingCommand;

impl CallingCommand {
    /// Lends `argv` until `f` returns.
    pub fn lend<R>(argv: &[&[u8]], f: impl FnOnce() -> R) -> R {
        // SAFETY of the lifetime erasure: the pointer is cleared before
        // `argv`'s borrow ends, by the guard, however `f` returns.
        let erased = argv.as_ptr().cast::<&'static [u8]>();
        CALLING.set((erased, argv.len()));
        struct Clear;
        impl Drop for Clear {
            fn drop(&mut self) {
                CALLING.set((std::ptr::null(), 0));
            }
        }
        let _clear = Clear;
        f()
    }

    /// A copy of the lent command (empty when none is lent).
    fn copy() -> Vec<Vec<u8>> {
        let (ptr, len) = CALLING.get();
        if ptr.is_null() {
            return Vec::new();
        }
        // SAFETY: set by `lend` from a live slice, cleared before it ends;
        // read on the same thread, inside `lend`'s `f`.
        let argv = unsafe { std::slice::from_raw_parts(ptr, len) };
        argv.iter().map(|a| a.to_vec()).collect()
    }
}

/// `-BUSY` text while a function runs.
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// One script run, as the busy-script machinery sees it.
pub struct RunState {
    /// When the run started (`crate::latency::monotonic_ns`).
    started_ns: u64,
    /// Set once the script has run a write command (SCRIPT KILL then refuses).
    pub(super) wrote: AtomicBool,
    /// Set once the script has run a read-only command: CLIENT TRACKING then
    /// remembers the script's declared keys, as Redis does.
    pub(super) read: AtomicBool,
    /// Set by SCRIPT KILL.
    pub(super) kill: AtomicBool,
    /// Set once the run passed the busy threshold.
    pub(super) busy: AtomicBool,
    /// The function's name when the run is an FCALL's (FUNCTION KILL and
    /// FUNCTION STATS see it; SCRIPT KILL does not kill it).
    pub(super) function: Option<Arc<str>>,
    /// The command that started it, for FUNCTION STATS: copied only when
    /// the run turns busy (see [`CallingCommand`]).
    pub(super) command: parking_lot::Mutex<Vec<Vec<u8>>>,
    /// Running time (ms) at which to hand the worker's other connections
    /// off next; see `check_current_run`.
    pub(super) next_hand_off_ms: AtomicU64,
}

impl RunState {
    /// A run starting at `started_ns` (the command's start when the
    /// dispatcher read it, so the clock is not read twice; else now),
    /// in the allocation the thread's last run left when nothing else holds
    /// it: a short script would otherwise pay an allocation per run.
    pub(super) fn start(function: Option<Arc<str>>, started_ns: Option<u64>) -> Arc<RunState> {
        let fresh = RunState {
            started_ns: started_ns.unwrap_or_else(crate::latency::monotonic_ns),
            wrote: AtomicBool::new(false),
            read: AtomicBool::new(false),
            kill: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            function,
            command: parking_lot::Mutex::new(Vec::new()),
            next_hand_off_ms: AtomicU64::new(HAND_OFF_AFTER_MS),
        };
        if let Some(mut spare) = SPARE_RUN.take() {
            if let Some(state) = Arc::get_mut(&mut spare) {
                *state = fresh;
                return spare;
            }
        }
        Arc::new(fresh)
    }

    /// Keeps an ended run's allocation for the thread's next run (see
    /// [`RunState::start`]); a FUNCTION STATS that still holds it keeps it
    /// instead, and the next run allocates.
    pub(super) fn end(mut run: Arc<RunState>) {
        if let Some(state) = Arc::get_mut(&mut run) {
            state.function = None;
            state.command.get_mut().clear();
            SPARE_RUN.set(Some(run));
        }
    }

    /// Milliseconds since the run started.
    pub(super) fn elapsed_ms(&self) -> u64 {
        crate::latency::monotonic_ns().saturating_sub(self.started_ns) / 1_000_000
    }
}

thread_local! {
    /// The allocation of this thread's last run (see [`RunState::start`]).
    static SPARE_RUN: std::cell::Cell<Option<Arc<RunState>>> = const { std::cell::Cell::new(None) };
}

impl Scripts {
    /// True while some script runs past the busy threshold.
    pub fn busy(&self) -> bool {
        self.busy.load(Ordering::Relaxed) != 0
    }

    /// How many Lua scripts are running now, busy or not.
    pub fn running(&self) -> usize {
        self.lua_running.sum().max(0) as usize
    }

    /// Stops every running script at its next hook, writes or not: the
    /// server is shutting down.
    pub fn stop_all(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// True while an EVAL script (not a function) runs past the busy
    /// threshold.
    pub fn busy_eval(&self) -> bool {
        self.busy()
            && self
                .running
                .lock()
                .iter()
                .any(|r| r.busy.load(Ordering::SeqCst) && r.function.is_none())
    }

    /// The `-BUSY` error other clients get: Redis names the KILL that
    /// stops what runs.
    pub fn busy_error(&self) -> &'static str {
        let function = self
            .running
            .lock()
            .iter()
            .any(|r| r.busy.load(Ordering::SeqCst) && r.function.is_some());
        if function {
            BUSY_FUNCTION
        } else {
            super::BUSY
        }
    }

    /// FUNCTION STATS' `running_script`: the busy function, or nil.
    pub fn running_function(&self) -> Reply {
        let running = self.running.lock();
        let Some(run) = running
            .iter()
            .find(|r| r.busy.load(Ordering::SeqCst) && r.function.is_some())
            .cloned()
        else {
            return Reply::Nil;
        };
        drop(running);
        let command: Vec<Reply> = run.command.lock().iter().map(|a| Reply::bulk(a)).collect();
        Reply::Map(vec![
            (
                Reply::bulk(b"name"),
                Reply::bulk(run.function.as_deref().unwrap_or_default().as_bytes()),
            ),
            (Reply::bulk(b"command"), Reply::Array(command)),
            (
                Reply::bulk(b"duration_ms"),
                Reply::Int(run.elapsed_ms() as i64),
            ),
        ])
    }

    /// FUNCTION KILL: as SCRIPT KILL, for a function.
    pub fn kill_function(&self) -> Reply {
        self.kill(true)
    }

    /// SCRIPT KILL (`function` false) or FUNCTION KILL: stops busy runs
    /// that have not written.
    ///
    /// On Redis a script blocks the server until it passes the busy
    /// threshold, so a SCRIPT KILL sent earlier is read only then and kills
    /// it. Here it is read at once; it waits the same way: until a running
    /// script passes the threshold, or none is running any more.
    pub fn kill(&self, function: bool) -> Reply {
        let patience = std::time::Duration::from_millis(
            self.busy_threshold_ms
                .load(Ordering::Relaxed)
                .saturating_add(1000),
        );
        let asked = std::time::Instant::now();
        while !self.busy()
            && self.lua_running.sum().max(0) as usize > 0
            && asked.elapsed() < patience
        {
            crate::store::off_worker(|| std::thread::sleep(std::time::Duration::from_millis(1)));
        }
        let running = self.running.lock();
        let busy: Vec<_> = running
            .iter()
            .filter(|r| r.busy.load(Ordering::SeqCst))
            .collect();
        if busy.is_empty() {
            return Reply::error("NOTBUSY No scripts in execution right now.");
        }
        if busy.iter().any(|r| r.wrote.load(Ordering::SeqCst)) {
            return Reply::error(
                "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.",
            );
        }
        if busy.iter().any(|r| r.function.is_some() != function) {
            return Reply::error(if function { super::BUSY } else { BUSY_FUNCTION });
        }
        for run in busy {
            run.kill.store(true, Ordering::SeqCst);
        }
        Reply::Ok
    }
}

/// The run this thread is executing, as the instruction hook needs it.
struct CurrentRun {
    run: Arc<RunState>,
    /// The server's scripts; valid for as long as the run is current (set
    /// and cleared by `eval`, which borrows them for that whole time).
    scripts: *const Scripts,
}

thread_local! {
    static CURRENT_RUN: std::cell::RefCell<Option<CurrentRun>> =
        const { std::cell::RefCell::new(None) };
}

/// SCRIPT KILL asked the running script to stop.
#[derive(Debug)]
pub struct Killed;

/// How long a script runs on its tokio worker before the worker's other
/// connections are handed to another thread.
const HAND_OFF_AFTER_MS: u64 = 2;

/// Called by the VM's instruction hook (every 100k instructions, so never for
/// a typical limiter script): marks the run busy past the threshold, stops it
/// when SCRIPT KILL asked, and once a script has run for a couple of
/// milliseconds hands the worker thread's other connections to another thread,
/// so a long script can never starve clients on other shards or SCRIPT KILL.
pub fn check_current_run() -> Result<(), Killed> {
    // Tokio gives no way to see whether the hand-off took (the new thread may
    // not have claimed the worker before the sleep ends), so it is retried at
    // 2, 4, 8, ... ms of running; once it took, a retry only costs the sleep.
    let hand_off = CURRENT_RUN.with(|current| {
        current.borrow().as_ref().is_some_and(|c| {
            let elapsed = c.run.elapsed_ms();
            let due = c.run.next_hand_off_ms.load(Ordering::Relaxed);
            if elapsed >= due {
                c.run.next_hand_off_ms.store(due * 2, Ordering::Relaxed);
                true
            } else {
                false
            }
        })
    });
    if hand_off {
        // block_in_place moves the worker core to another thread while the
        // closure runs; sleeping briefly lets that thread take it, after which
        // this thread finishes the script on its own.
        crate::store::off_worker(|| std::thread::sleep(std::time::Duration::from_millis(1)));
    }
    CURRENT_RUN.with(|current| {
        let current = current.borrow();
        let Some(CurrentRun { run, scripts }) = current.as_ref() else {
            return Ok(());
        };
        // SAFETY: `eval` sets this pointer from a live `&Scripts` and clears
        // it before that borrow ends; the hook only runs inside `eval`.
        let scripts = unsafe { &**scripts };
        if !run.busy.load(Ordering::Relaxed)
            && run.elapsed_ms() >= scripts.busy_threshold_ms.load(Ordering::Relaxed)
        {
            // Only busy runs are registered: SCRIPT KILL looks at no other,
            // and the common short script touches no shared state at all.
            run.busy.store(true, Ordering::SeqCst);
            if run.function.is_some() {
                *run.command.lock() = CallingCommand::copy();
            }
            scripts.running.lock().push(run.clone());
            scripts.busy.fetch_add(1, Ordering::SeqCst);
        }
        if run.kill.load(Ordering::SeqCst) || scripts.stopping.load(Ordering::SeqCst) {
            Err(Killed)
        } else {
            Ok(())
        }
    })
}

/// A Lua run as the busy-script machinery knows it, from start to end. On
/// drop (the run ended, or panicked and was contained) the run leaves every
/// list it is in, so a failed run can never leave the server BUSY.
pub(super) struct RunRegistration<'a> {
    scripts: &'a Scripts,
    run: Arc<RunState>,
}

impl<'a> RunRegistration<'a> {
    pub(super) fn new(scripts: &'a Scripts, run: &Arc<RunState>) -> RunRegistration<'a> {
        CURRENT_RUN.with(|current| {
            *current.borrow_mut() = Some(CurrentRun {
                run: run.clone(),
                scripts,
            })
        });
        scripts.lua_running.add(1);
        RunRegistration {
            scripts,
            run: run.clone(),
        }
    }
}

impl Drop for RunRegistration<'_> {
    fn drop(&mut self) {
        CURRENT_RUN.with(|current| *current.borrow_mut() = None);
        self.scripts.lua_running.add(-1);
        if self.run.busy.load(Ordering::SeqCst) {
            let mut running = self.scripts.running.lock();
            running.retain(|r| !Arc::ptr_eq(r, &self.run));
            self.scripts.busy.fetch_sub(1, Ordering::SeqCst);
        }
    }
}
