//! Access control as Redis 7.0 has it: users with passwords and
//! selectors (commands, key patterns with read/write permissions, channel
//! patterns), checked before every command a client, a transaction or a
//! script runs, with Redis's NOPERM errors and ACL LOG.
//!
//! Clients hold their user's name and a copy of the user; any change to
//! the users bumps a generation counter, and a client whose copy is older
//! fetches its user again before its next command, so a permission change
//! applies at once. A client of an unrestricted user (the default user
//! without `requirepass` rules) pays one atomic load per command.

pub mod file;
pub mod keys;
pub mod selector;
pub mod user;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::catalog::{registry, Command};
pub use user::{RuleError, Selector, User};

/// Why a command was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    /// The command (ACL_DENIED_CMD).
    Command,
    /// A key, at this argument (ACL_DENIED_KEY).
    Key(usize),
    /// A channel, at this argument (ACL_DENIED_CHANNEL).
    Channel(usize),
}

impl Denied {
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (0, 0),
            Denied::Key(at) => (1, at),
            Denied::Channel(at) => (2, at),
        }
    }

    /// The reply a client gets (processCommand's).
    pub fn error(self, command: &Command) -> String {
        match self {
            Denied::Command => format!(
                "NOPERM this user has no permissions to run the '{}' command",
                command.name
            ),
            Denied::Key(_) => {
                "NOPERM this user has no permissions to access one of the keys used as arguments"
                    .to_string()
            }
            Denied::Channel(_) => "NOPERM this user has no permissions to access one of the \
                                   channels used as arguments"
                .to_string(),
        }
    }

    /// The error of a queued command EXEC finds refused (execCommand's).
    pub fn exec_error(self) -> String {
        let reason = match self {
            Denied::Command => "no permission to execute the command or subcommand",
            Denied::Key(_) => "no permission to touch the specified keys",
            Denied::Channel(_) => "no permission to access one of the channels used as arguments",
        };
        format!(
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and \
             the EXEC call. This command is no longer allowed for the following reason: {reason}"
        )
    }

    /// The end of the error a script gets (getAclErrorMessage).
    pub fn script_message(self) -> &'static str {
        match self {
            Denied::Command => "can't run this command or subcommand",
            Denied::Key(_) => {
                "can't access at least one of the keys mentioned in the command arguments"
            }
            Denied::Channel(_) => "can't publish to the channel mentioned in the command",
        }
    }
}

/// Where a refusal happened (ACL LOG `context`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// A client's own command.
    TopLevel,
    /// Inside MULTI/EXEC.
    Multi,
    /// Inside a script.
    Lua,
}

impl Context {
    /// The name ACL LOG gives the context (`toplevel`, `multi`, `lua`).
    pub fn name(self) -> &'static str {
        match self {
            Context::TopLevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One ACL LOG entry.
#[derive(Debug, Clone)]
pub struct LogEntry {
    /// Events merged into it.
    pub count: u64,
    /// `command`, `key`, `channel` or `auth`.
    pub reason: &'static str,
    /// Where.
    pub context: &'static str,
    /// The command, key, channel or `AUTH`/`HELLO`.
    pub object: Vec<u8>,
    /// The user.
    pub username: String,
    /// When (unix ms).
    pub created_ms: u64,
    /// The client, as CLIENT LIST shows it.
    pub client_info: String,
}

/// The users and the log.
pub struct Acl {
    users: RwLock<BTreeMap<String, Arc<User>>>,
    /// Bumped on every change to any user.
    generation: AtomicU64,
    log: Mutex<VecDeque<LogEntry>>,
    /// `acllog-max-len`.
    pub log_max_len: AtomicU64,
    /// `acl-pubsub-default allchannels`: users and selectors created from
    /// now on start with every channel.
    pub channels_by_default: AtomicBool,
}

impl Default for Acl {
    fn default() -> Acl {
        let mut users = BTreeMap::new();
        users.insert("default".to_string(), Arc::new(User::default_user()));
        Acl {
            users: RwLock::new(users),
            generation: AtomicU64::new(1),
            log: Mutex::new(VecDeque::new()),
            log_max_len: AtomicU64::new(128),
            channels_by_default: AtomicBool::new(false),
        }
    }
}

impl Acl {
    /// The current generation (see the module docs).
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A user by name.
    pub fn user(&self, name: &str) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    /// Every user, by name.
    pub fn users(&self) -> Vec<Arc<User>> {
        self.users.read().values().cloned().collect()
    }

    /// Creates or replaces a user.
    pub fn put(&self, user: User) {
        self.users.write().insert(user.name.clone(), Arc::new(user));
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Deletes a user; true if there was one.
    pub fn delete(&self, name: &str) -> bool {
        let removed = self.users.write().remove(name).is_some();
        if removed {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        removed
    }

    /// Replaces every user at once (ACL LOAD), keeping `default` if the
    /// new set lacks it.
    pub fn replace_all(&self, users: Vec<User>) {
        let mut table: BTreeMap<String, Arc<User>> = users
            .into_iter()
            .map(|u| (u.name.clone(), Arc::new(u)))
            .collect();
        table
            .entry("default".to_string())
            .or_insert_with(|| Arc::new(User::default_user()));
        *self.users.write() = table;
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// `requirepass`: the default user's password (`nopass` when empty),
    /// as Redis applies it.
    pub fn set_requirepass(&self, password: Option<&str>) {
        let mut user = self
            .user("default")
            .map(|u| (*u).clone())
            .unwrap_or_else(User::default_user);
        match password {
            Some(password) if !password.is_empty() => {
                user.apply(b"resetpass").ok();
                user.apply(format!(">{password}").as_bytes()).ok();
            }
            _ => {
                user.apply(b"nopass").ok();
            }
        }
        self.put(user);
    }

    /// Adds a refusal to the log, merging it into a recent entry that
    /// matches, as addACLLogEntry does.
    pub fn log(&self, mut entry: LogEntry) {
        let max = self.log_max_len.load(Ordering::Relaxed) as usize;
        let mut log = self.log.lock();
        let matching = log.iter().take(10).position(|old| {
            old.reason == entry.reason
                && old.context == entry.context
                && old.object == entry.object
                && old.username == entry.username
                && entry.created_ms.saturating_sub(old.created_ms) <= 60_000
        });
        if let Some(at) = matching {
            if let Some(mut old) = log.remove(at) {
                old.count += 1;
                old.created_ms = entry.created_ms;
                old.client_info = std::mem::take(&mut entry.client_info);
                log.push_front(old);
            }
        } else {
            log.push_front(entry);
            log.truncate(max);
        }
    }

    /// The newest `count` log entries.
    pub fn log_entries(&self, count: usize) -> Vec<LogEntry> {
        self.log.lock().iter().take(count).cloned().collect()
    }

    /// ACL LOG RESET.
    pub fn reset_log(&self) {
        self.log.lock().clear();
    }
}

/// A command's registry index, found by its row's address (no name
/// lowering or string hashing on the per-command path).
fn index_of(command: &Command) -> Option<usize> {
    static BY_ADDRESS: std::sync::OnceLock<hashbrown::HashMap<usize, usize>> =
        std::sync::OnceLock::new();
    BY_ADDRESS
        .get_or_init(|| {
            registry()
                .all()
                .enumerate()
                .map(|(i, c)| (c as *const Command as usize, i))
                .collect()
        })
        .get(&(command as *const Command as usize))
        .copied()
        .or_else(|| registry().index_of(command.name.as_bytes()))
}

/// Checks a command for a user: allowed if any selector allows the
/// command and every key and channel it names (ACLCheckAllUserCommandPerm).
pub fn check(user: &User, command: &Command, argv: &[&[u8]]) -> Result<(), Denied> {
    if user.unrestricted() {
        return Ok(());
    }
    let Some(index) = index_of(command) else {
        return Err(Denied::Command);
    };
    check_indexed(user, command, index, argv)
}

/// [`check`] of the command at registry `index`, as dispatch knows it.
pub fn check_indexed(
    user: &User,
    command: &Command,
    index: usize,
    argv: &[&[u8]],
) -> Result<(), Denied> {
    if user.unrestricted() {
        return Ok(());
    }
    debug_assert!(std::ptr::eq(registry().command(index), command));
    let mut keys = keys::CallKeys::new(command, index, argv);
    if let [selector] = &user.selectors[..] {
        return check_selector(selector, command, index, argv, &mut keys);
    }
    let mut relevant = Denied::Command;
    for selector in &user.selectors {
        match check_selector(selector, command, index, argv, &mut keys) {
            Ok(()) => return Ok(()),
            Err(denied) => {
                if denied.rank() > relevant.rank() {
                    relevant = denied;
                }
            }
        }
    }
    Err(relevant)
}

/// True when some selector of `user` allows the command and may read every
/// key (Redis's ACLUserCheckCmdWithUnrestrictedKeyAccess for read access):
/// SORT's BY and GET patterns read keys no ACL check has seen, so only such
/// a user may use them (Redis's fix for CVE-2023-41053).
pub fn reads_every_key(user: &User, command: &Command, argv: &[&[u8]]) -> bool {
    if user.unrestricted() {
        return true;
    }
    let Some(index) = index_of(command) else {
        return false;
    };
    let mut keys = keys::CallKeys::new(command, index, argv);
    user.selectors.iter().any(|selector| {
        check_selector(selector, command, index, argv, &mut keys).is_ok()
            && (selector.all_keys
                || selector
                    .patterns
                    .iter()
                    .any(|p| p.flags & selector::READ != 0 && p.pattern == b"*"))
    })
}

/// One selector's verdict. Inlined into [`check_indexed`]: the usual
/// user has one selector, and a call here was a fifth of the check.
#[inline(always)]
fn check_selector(
    selector: &Selector,
    command: &Command,
    index: usize,
    argv: &[&[u8]],
    keys: &mut keys::CallKeys<'_>,
) -> Result<(), Denied> {
    use crate::catalog::flags;
    if !selector.all_commands && command.flags & flags::NO_AUTH == 0 && !selector.allowed[index] {
        // A first argument allowed on its own (`+select|0`).
        let at = if command.name.contains('|') { 2 } else { 1 };
        let allowed = argv.len() > at
            && selector.first_args.get(&index).is_some_and(|args| {
                args.iter()
                    .any(|a| a.as_bytes().eq_ignore_ascii_case(argv[at]))
            });
        if !allowed {
            return Err(Denied::Command);
        }
    }
    if !selector.all_keys {
        if let Some(at) = keys.first_refused(argv, selector) {
            return Err(Denied::Key(at));
        }
    }
    if !selector.all_channels && command.flags & flags::PUBSUB != 0 {
        for (at, pattern) in keys::channels(command, argv) {
            let granted = selector.channels.iter().any(|c| {
                if pattern {
                    c.as_slice() == argv[at]
                } else {
                    crate::glob::glob_match(c, argv[at], false)
                }
            });
            if !granted {
                return Err(Denied::Channel(at));
            }
        }
    }
    Ok(())
}

/// The user a new connection starts as (the default user) and the
/// generation it was read at.
pub fn initial_user(acl: &Acl) -> (Arc<User>, u64) {
    let generation = acl.generation();
    let user = acl
        .user("default")
        .unwrap_or_else(|| Arc::new(User::default_user()));
    (user, generation)
}
