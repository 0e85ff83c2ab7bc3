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
    /// What the connection must do after the command just run, beyond
    /// sending its reply (see [`After`]); taken by the connection loop.
    pub after: After,
    /// Whether replies are sent (CLIENT REPLY).
    pub replies: ReplyMode,
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
    /// The master this server replicates: its commands are obeyed, not
    /// checked (read-only replica, ACL, memory, pause), as Redis's
    /// mustObeyClient; nothing is sent back but REPLCONF ACK.
    pub master: bool,
    /// CLIENT NO-EVICT ON (shown in CLIENT LIST; tally never evicts clients).
    pub no_evict: bool,
    /// The slots of the command's keys, computed once by the slot gate
    /// and taken by routing.
    pub gate_slots: routing::GateSlots,
    /// ASKING was sent: the next command may use a slot being imported
    /// (kept until EXEC inside a transaction, as Redis).
    pub asking: bool,
    /// READONLY was sent: on a cluster replica, reads of its master's
    /// slots are served here instead of being sent to the master.
    pub readonly: bool,
    /// Set by a handler that counted the errors of its reply itself (a
    /// script's, whose errors from redis.call were counted when they
    /// happened); the dispatcher then does not count them again.
    pub reply_errors_counted: bool,
    /// Commands run inside the current transaction or script that go to the
    /// change feed when it ends, with their databases (only while the
    /// append-only file is on).
    pub propagated: crate::store::feed::Change,
    /// The feed position after this client's last change: its replies wait
    /// until the append-only file holds it.
    pub aof_offset: u64,
    /// The command running now was sent by the client itself, outside
    /// MULTI and scripts: a blocking command may block (elsewhere it
    /// answers at once, as Redis's do for a client that may not block).
    /// Set by the dispatcher for each command.
    pub may_block: bool,
    /// The command running is a blocked client's, run again for a key
    /// that became ready (`cmd::blocking`): XREADGROUP then answers
    /// Redis's errors for a key or group gone while it waited.
    pub serving_waiter: bool,
    /// The query buffer once the running command is consumed: its length
    /// and capacity. A command that blocks publishes them before it is
    /// counted as blocked, so CLIENT LIST shows it as Redis does (its
    /// command trimmed from the buffer: qbuf=0 when it came alone).
    pub input_left: (usize, usize),
    /// When the running command started (`crate::latency::monotonic_ns`),
    /// while the dispatcher times it (a client's own command); 0 otherwise.
    /// A script run takes it as its own start rather than reading the
    /// clock again.
    pub started_ns: u64,
    /// The user this client authenticated as, as of `acl_generation`.
    pub user: Arc<crate::acl::User>,
    /// The ACL generation `user` was read at (see `crate::acl`).
    pub acl_generation: u64,
}

impl ClientState {
    /// A client that has just connected.
    pub fn new(info: Arc<ClientInfo>, authenticated: bool) -> ClientState {
        ClientState::acting_as(
            info,
            authenticated,
            Arc::new(crate::acl::User::default_user()),
        )
    }

    /// The client a script's redis.call runs as: `caller`'s connection,
    /// database, user and ACL generation, and nothing else of its state (no
    /// transaction, reply mode or subscriptions). Made once per script run,
    /// so it shares the caller's user instead of building one.
    pub fn for_script(caller: &ClientState) -> ClientState {
        let mut client = ClientState::acting_as(caller.info.clone(), true, caller.user.clone());
        client.db = caller.db;
        client.in_script = true;
        client.acl_generation = caller.acl_generation;
        client
    }

    /// Makes this client, a script's from an earlier run, the client of a
    /// new run of `caller`'s script: the state [`ClientState::for_script`]
    /// gives, keeping the buffers its batch statistics and propagated
    /// commands grew (each run empties them into its caller's) and the
    /// shared handles it already holds. A run that built a client afresh
    /// spent more on allocating and freeing it than a one-command script
    /// spends in Lua. Every field is named, so a new one cannot be missed.
    pub fn reuse_for_script(&mut self, caller: &ClientState) {
        let ClientState {
            info,
            db,
            proto,
            authenticated,
            after,
            replies,
            batch,
            transaction,
            watches,
            pubsub,
            in_script,
            tracking,
            caching,
            script_read,
            monitor,
            master,
            no_evict,
            gate_slots,
            asking,
            readonly,
            reply_errors_counted,
            propagated,
            aof_offset,
            may_block,
            serving_waiter,
            input_left,
            started_ns,
            user,
            acl_generation,
        } = self;
        if !Arc::ptr_eq(info, &caller.info) {
            *info = caller.info.clone();
        }
        // Compared first: the default user is every connection's, and
        // taking a reference to it on each run would make the workers
        // contend for its count.
        if !Arc::ptr_eq(user, &caller.user) {
            *user = caller.user.clone();
        }
        *db = caller.db;
        *acl_generation = caller.acl_generation;
        *proto = Protocol::Resp2;
        *authenticated = true;
        *after = After::Continue;
        *replies = ReplyMode::On;
        batch.clear();
        *transaction = None;
        *watches = multi::Watches::default();
        *pubsub = None;
        *in_script = true;
        *tracking = None;
        *caching = false;
        *script_read = false;
        *monitor = None;
        *master = false;
        *no_evict = false;
        *gate_slots = routing::GateSlots::Unknown;
        *asking = false;
        *readonly = false;
        *reply_errors_counted = false;
        propagated.clear();
        *aof_offset = 0;
        *may_block = false;
        *serving_waiter = false;
        *input_left = (0, 0);
        *started_ns = 0;
    }

    /// The client a blocked client's command runs again as, on the
    /// connection that made one of its keys ready: the blocked client's
    /// connection, user, database and protocol.
    pub fn for_waiter(waiter: &crate::blocking::Waiter) -> ClientState {
        let mut client = ClientState::acting_as(waiter.info.clone(), true, waiter.user.clone());
        client.db = waiter.db;
        client.proto = waiter.proto;
        client.acl_generation = waiter.acl_generation;
        client.serving_waiter = true;
        client
    }

    fn acting_as(
        info: Arc<ClientInfo>,
        authenticated: bool,
        user: Arc<crate::acl::User>,
    ) -> ClientState {
        ClientState {
            info,
            db: 0,
            proto: Protocol::Resp2,
            authenticated,
            after: After::Continue,
            replies: ReplyMode::On,
            batch: BatchStats::default(),
            transaction: None,
            watches: multi::Watches::default(),
            pubsub: None,
            in_script: false,
            reply_errors_counted: false,
            gate_slots: routing::GateSlots::Unknown,
            asking: false,
            readonly: false,
            tracking: None,
            caching: false,
            script_read: false,
            monitor: None,
            master: false,
            no_evict: false,
            propagated: Default::default(),
            aof_offset: 0,
            may_block: false,
            serving_waiter: false,
            input_left: (0, 0),
            started_ns: 0,
            user,
            acl_generation: 0,
        }
    }
}

impl ClientState {
    /// Asks the connection to do `after` once this command's reply is
    /// produced. A close already asked for stands: nothing a later command
    /// of the same EXEC asks for undoes it.
    pub fn then(&mut self, after: After) {
        if !matches!(self.after, After::Close) {
            self.after = after;
        }
    }
}

/// What a command leaves for its connection to do, beyond sending its
/// reply: handlers never touch the socket, so a command that must close
/// the connection, pause it or wait says so here, and the connection loop
/// matches on it after the command. A new blocking command (BLPOP, WAIT, a
/// failover pause) is a new variant.
#[derive(Default)]
pub enum After {
    /// Go on with the next command.
    #[default]
    Continue,
    /// Send the reply, then close (QUIT, CLIENT KILL of itself, SYNC, a
    /// command that panicked).
    Close,
    /// Send what is owed, sleep this long, then go on (DEBUG SLEEP).
    Sleep(Duration),
    /// CLIENT PAUSE holds the command: it did not run, and runs again,
    /// framed afresh, when the pause ends.
    WaitForPause,
    /// A key of the command is in the middle of a MIGRATE: it did not run,
    /// and runs again shortly (by then the key is gone: ASK).
    WaitForMigration,
    /// MIGRATE's network half, for the connection to carry out; its reply
    /// comes from there, and the commands after it wait for it.
    Migrate(Box<super::migrate::Migration>),
    /// A blocking command found nothing and waits for one of its keys
    /// (registered in `Shared::blocked`): its reply comes through the
    /// waiter, by `deadline` at the latest (none: no limit); the commands
    /// after it wait for it.
    Block {
        /// The registered waiter.
        waiter: Arc<crate::blocking::Waiter>,
        /// When it times out.
        deadline: Option<std::time::Instant>,
        /// How long the call that blocked ran, in microseconds: the slow
        /// log's duration for the command, which is logged once it is
        /// answered, as Redis logs it.
        call_usec: u64,
    },
    /// SHUTDOWN that waits for the replicas: the connection waits for the
    /// decision, and gets the error if the shutdown does not happen.
    WaitForShutdown,
    /// WAIT: the reply is the number of replicas that acknowledged
    /// `offset`, once `wanted` have or `timeout_ms` passed (0: no limit);
    /// the commands after it wait for it.
    WaitForReplicas {
        /// Replicas asked for.
        wanted: usize,
        /// The replication offset they must reach.
        offset: u64,
        /// How long to wait at most, in real time (0: no limit).
        timeout_ms: u64,
    },
    /// WAITAOF: the reply is whether the local append-only file fsynced
    /// `aof_offset` and how many replicas' files fsynced `offset`, once
    /// both are met or `timeout_ms` passed (0: no limit).
    WaitForAof {
        /// Whether the local file must have it (numlocal 1).
        local: bool,
        /// Replicas asked for.
        wanted: usize,
        /// The client's last write, as a feed position.
        aof_offset: u64,
        /// The replication offset the replicas' files must reach.
        offset: u64,
        /// How long to wait at most, in real time (0: no limit).
        timeout_ms: u64,
    },
    /// A replica's snapshot, written in the background: the connection
    /// sends it once ready (a newline each second until then, which a
    /// waiting replica skips), before the stream its queue holds
    /// meanwhile; then closes when `close` (SYNC after `REPLCONF
    /// rdb-only 1`).
    SendSnapshot {
        /// The snapshot, started or waiting for its turn.
        snapshot: Snapshot,
        /// Close after it.
        close: bool,
    },
}

/// A replica's snapshot as the connection gets it.
pub enum Snapshot {
    /// Being written: its bytes, once written.
    Started(crate::persistence::replica_snapshot::SnapshotBytes),
    /// Waiting for the shards' snapshot to be free (another is being
    /// written); the connection starts it then.
    Queued(super::replication::QueuedSync),
}

impl After {
    /// True when the command did not run and must run again later.
    pub fn retries(&self) -> bool {
        matches!(self, After::WaitForPause | After::WaitForMigration)
    }
}

/// CLIENT REPLY: whether the connection sends replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    /// Every reply is sent.
    On,
    /// No reply is sent until CLIENT REPLY ON.
    Off,
    /// CLIENT REPLY SKIP was just run: its own reply is sent (none, as
    /// Redis), the next command's is not.
    SkipNext,
    /// This command's reply is not sent; the next one's is.
    Skipping,
}

impl ReplyMode {
    /// Whether the reply being produced is sent.
    pub fn sends(self) -> bool {
        matches!(self, ReplyMode::On | ReplyMode::SkipNext)
    }

    /// The mode for the next command, once a reply was produced.
    pub fn after_reply(self) -> ReplyMode {
        match self {
            ReplyMode::SkipNext => ReplyMode::Skipping,
            ReplyMode::Skipping => ReplyMode::On,
            mode => mode,
        }
    }
}

/// One command's counters within a batch (INFO commandstats).
#[derive(Default, Clone, Copy)]
pub struct CommandCounts {
    /// The command's catalog index.
    pub index: usize,
    /// Calls that ran.
    pub calls: u64,
    /// Microseconds they took.
    pub usec: u64,
    /// Calls whose reply was, or held, an error (failed_calls).
    pub failed: u64,
    /// Calls refused before they ran (rejected_calls).
    pub rejected: u64,
}

/// The statistics one batch of commands gathers before they reach the
/// server's shared counters.
#[derive(Default)]
pub struct BatchStats {
    /// Per command run in the batch; a short list, searched linearly.
    commands: Vec<CommandCounts>,
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
    /// The counters of the command at catalog `index` in this batch.
    pub(super) fn counts(&mut self, index: usize) -> &mut CommandCounts {
        let at = match self.commands.iter().position(|c| c.index == index) {
            Some(at) => at,
            None => {
                self.commands.push(CommandCounts {
                    index,
                    ..CommandCounts::default()
                });
                self.commands.len() - 1
            }
        };
        &mut self.commands[at]
    }

    /// Counts a call of `command` refused before it ran (rejected_calls).
    pub fn count_rejected(&mut self, command: &Command) {
        if let Some(index) = registry().index_of(command.name.as_bytes()) {
            self.counts(index).rejected += 1;
        }
    }

    /// Empties the batch, keeping its buffers.
    pub fn clear(&mut self) {
        let BatchStats {
            commands,
            errors,
            native_script_runs,
            fallback_script_runs,
            lua_script_runs,
            decisions,
            durations,
        } = self;
        commands.clear();
        if errors.total != 0 {
            *errors = ErrorCounts::default();
        }
        native_script_runs.fill(0);
        fallback_script_runs.fill(0);
        *lua_script_runs = 0;
        decisions.fill((0, 0));
        durations.clear();
    }

    /// Moves a script run's command counts (its redis.calls') into this
    /// batch, flushed with the caller's next flush, leaving `script` empty.
    /// Nothing else can be in it: a script cannot run scripts, its
    /// commands are not timed (their time is the script's), and its errors
    /// were flushed already, not moved: whether a command failed is read
    /// from this batch's error total, and a script's inner errors are not
    /// its caller's (see [`BatchStats::flush_errors`]).
    pub fn absorb_script_commands(&mut self, script: &mut BatchStats) {
        debug_assert!(
            script.errors.total == 0
                && script.lua_script_runs == 0
                && script.durations.is_empty()
                && script.native_script_runs.iter().all(|&n| n == 0)
                && script.fallback_script_runs.iter().all(|&n| n == 0)
                && script.decisions.iter().all(|&d| d == (0, 0)),
            "a script's batch held more than command counts"
        );
        for counts in script.commands.drain(..) {
            let mine = self.counts(counts.index);
            mine.calls += counts.calls;
            mine.usec += counts.usec;
            mine.failed += counts.failed;
            mine.rejected += counts.rejected;
        }
    }

    /// Adds the batch's errors to the server's counters (INFO errorstats).
    pub fn flush_errors(&mut self, shared: &Shared) {
        if self.errors.total != 0 {
            shared.stats.add_errors(&mut self.errors);
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
        for CommandCounts {
            index,
            calls,
            usec,
            failed,
            rejected,
        } in self.commands.drain(..)
        {
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
