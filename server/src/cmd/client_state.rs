//! What a connection carries between its commands: its state (database,
//! protocol, authentication, MULTI queue, ...) and the statistics a batch
//! of commands gathers before they reach the shared counters.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{multi, routing};
use crate::catalog::{registry, Command};
use crate::resp::Protocol;
use crate::state::{ClientInfo, Shared};
use crate::stats::ErrorCounts;

/// A connection's own state, owned by its connection task.
pub struct ClientState {
    /// What other connections may see of this client.
    pub info: Arc<ClientInfo>,
    /// Selected database.
    pub db: usize,
    /// Protocol version.
    pub proto: Protocol,
    /// True once AUTH succeeded, or when no password is required.
    pub authenticated: bool,
    /// QUIT: close once this reply is written.
    pub close_after_reply: bool,
    /// DEBUG SLEEP: pause this connection before reading further.
    pub sleep: Option<Duration>,
    /// Statistics gathered during one read batch, flushed once per batch so
    /// that workers do not contend on shared counters for every command.
    pub batch: BatchStats,
    /// Commands queued since MULTI.
    pub transaction: Option<multi::Transaction>,
    /// Keys WATCHed since the last EXEC, DISCARD or UNWATCH, and the flag
    /// their shards raise when one is written.
    pub watches: multi::Watches,
    /// Channel and pattern subscriptions, once the client subscribed.
    pub pubsub: Option<crate::pubsub::Subscriptions>,
    /// True for the client a script's redis.call runs as.
    pub in_script: bool,
    /// CLIENT TRACKING ON: this client's settings (the server's table has
    /// the same).
    pub tracking: Option<crate::tracking::TrackingMode>,
    /// CLIENT CACHING YES/NO given for the next command.
    pub caching: bool,
    /// The last script this client ran called a read-only command (CLIENT
    /// TRACKING remembers a script's declared keys only then).
    pub script_read: bool,
    /// MONITOR: the lines of the commands the server runs, once asked for.
    pub monitor: Option<crate::monitor::MonitorMode>,
    /// CLIENT REPLY OFF: no replies until CLIENT REPLY ON.
    pub reply_off: bool,
    /// CLIENT REPLY SKIP: the next command's reply is not sent.
    pub skip_next_reply: bool,
    /// The reply being produced is not sent (the command after a SKIP).
    pub skip_this_reply: bool,
    /// CLIENT NO-EVICT ON (shown in CLIENT LIST; tally never evicts clients).
    pub no_evict: bool,
    /// Set when CLIENT PAUSE holds the command just dispatched: it did not
    /// run, and the connection runs it again when the pause ends.
    pub postponed: bool,
    /// Set when a key of the command just dispatched is in the middle of a
    /// MIGRATE: it did not run, and runs again once the key is moved.
    pub awaits_migration: bool,
    /// The slots of the command's keys, computed once by the slot gate
    /// and taken by routing.
    pub gate_slots: routing::GateSlots,
    /// ASKING was sent: the next command may use a slot being imported
    /// (kept until EXEC inside a transaction, as Redis).
    pub asking: bool,
    /// MIGRATE's network part, left for the connection to carry out
    /// before it replies (handlers never touch sockets).
    pub migration: Option<Box<crate::net::migrate::Migration>>,
    /// Set by a handler that counted the errors of its reply itself (a
    /// script's, whose errors from redis.call were counted when they
    /// happened); the dispatcher then does not count them again.
    pub reply_errors_counted: bool,
    /// Commands run inside the current transaction or script that go to the
    /// change feed when it ends, with their databases (only while the
    /// append-only file is on).
    pub propagated: Vec<(usize, crate::store::feed::Argv)>,
    /// The feed position after this client's last change: its replies wait
    /// until the append-only file holds it.
    pub aof_offset: u64,
    /// The user this client authenticated as, as of `acl_generation`.
    pub user: Arc<crate::acl::User>,
    /// The ACL generation `user` was read at (see `crate::acl`).
    pub acl_generation: u64,
}

impl ClientState {
    /// A client that has just connected.
    pub fn new(info: Arc<ClientInfo>, authenticated: bool) -> ClientState {
        ClientState {
            info,
            db: 0,
            proto: Protocol::Resp2,
            authenticated,
            close_after_reply: false,
            sleep: None,
            batch: BatchStats::default(),
            transaction: None,
            watches: multi::Watches::default(),
            pubsub: None,
            in_script: false,
            reply_errors_counted: false,
            postponed: false,
            awaits_migration: false,
            gate_slots: routing::GateSlots::Unknown,
            asking: false,
            migration: None,
            tracking: None,
            caching: false,
            script_read: false,
            monitor: None,
            reply_off: false,
            skip_next_reply: false,
            skip_this_reply: false,
            no_evict: false,
            propagated: Vec::new(),
            aof_offset: 0,
            user: Arc::new(crate::acl::User::default_user()),
            acl_generation: 0,
        }
    }
}

/// Per-command counters of one batch: (command index, calls, usec, failed, rejected).
#[derive(Default)]
pub struct BatchStats {
    commands: Vec<(usize, u64, u64, u64, u64)>,
    /// Error replies, by error code (INFO errorstats).
    pub errors: ErrorCounts,
    /// Native runs per known limiter script (`tally_lua::SCRIPTS` order).
    pub native_script_runs: [u64; tally_lua::SCRIPTS.len()],
    /// Lua runs of known limiter scripts (fallbacks or native path off).
    pub fallback_script_runs: [u64; tally_lua::SCRIPTS.len()],
    /// Lua runs of any script.
    pub lua_script_runs: u64,
    /// Per known limiter script: (allowed, denied) decisions.
    pub decisions: [(u64, u64); tally_lua::SCRIPTS.len()],
    /// (command index, ns) of each timed call, for the latency histograms.
    pub(super) durations: Vec<(usize, u64)>,
}

impl BatchStats {
    pub(super) fn slot(&mut self, index: usize) -> &mut (usize, u64, u64, u64, u64) {
        let at = match self.commands.iter().position(|c| c.0 == index) {
            Some(at) => at,
            None => {
                self.commands.push((index, 0, 0, 0, 0));
                self.commands.len() - 1
            }
        };
        &mut self.commands[at]
    }

    /// Counts a call of `command` refused before it ran (rejected_calls).
    pub fn count_rejected(&mut self, command: &Command) {
        if let Some(index) = registry().index_of(command.name.as_bytes()) {
            self.slot(index).4 += 1;
        }
    }

    /// Adds the batch to the server's counters and starts a new batch;
    /// `client_id` picks the latency histograms' stripe.
    pub fn flush(&mut self, shared: &Shared, client_id: u64) {
        let stats = &shared.stats;
        if !self.durations.is_empty() {
            stats.latencies.record(client_id, &self.durations);
            self.durations.clear();
        }
        let mut processed = 0;
        for (index, calls, usec, failed, rejected) in self.commands.drain(..) {
            let c = &stats.commands[index];
            if calls != 0 {
                c.calls.fetch_add(calls, Ordering::Relaxed);
                c.usec.fetch_add(usec, Ordering::Relaxed);
            }
            if failed != 0 {
                c.failed_calls.fetch_add(failed, Ordering::Relaxed);
            }
            if rejected != 0 {
                c.rejected_calls.fetch_add(rejected, Ordering::Relaxed);
            }
            processed += calls;
        }
        stats
            .commands_processed
            .fetch_add(processed, Ordering::Relaxed);
        if self.errors.total != 0 {
            stats.add_errors(&mut self.errors);
        }
        let scripts = &shared.scripts;
        for (index, (native, lua)) in self
            .native_script_runs
            .iter_mut()
            .zip(self.fallback_script_runs.iter_mut())
            .enumerate()
        {
            if *native != 0 {
                scripts.known_runs[index]
                    .0
                    .fetch_add(std::mem::take(native), Ordering::Relaxed);
            }
            if *lua != 0 {
                scripts.known_runs[index]
                    .1
                    .fetch_add(std::mem::take(lua), Ordering::Relaxed);
            }
        }
        for (index, (allowed, denied)) in self.decisions.iter_mut().enumerate() {
            if *allowed != 0 {
                scripts.known_decisions[index]
                    .0
                    .fetch_add(std::mem::take(allowed), Ordering::Relaxed);
            }
            if *denied != 0 {
                scripts.known_decisions[index]
                    .1
                    .fetch_add(std::mem::take(denied), Ordering::Relaxed);
            }
        }
        if self.lua_script_runs != 0 {
            scripts
                .lua_runs
                .fetch_add(std::mem::take(&mut self.lua_script_runs), Ordering::Relaxed);
        }
    }
}
