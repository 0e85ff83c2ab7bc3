//! THE command table: one row per command, with Redis 7.0's name, arity,
//! flags and key positions, the handler, and the documentation COMMAND DOCS
//! serves. Adding a command means adding its row here and its handler in the
//! file of its family.

use std::sync::OnceLock;

use hashbrown::HashMap;

use super::subcommands::*;
use super::{
    cluster, command, connection as conn, hash, info, keys, list, migrate, multi, persistence,
    pubsub, scripting, server, set, string, zset, Ctx,
};
use crate::resp::Reply;

/// A command handler.
pub type Handler = fn(&mut Ctx<'_>, &[&[u8]]) -> Reply;

/// Command flags, as COMMAND INFO names them.
pub mod flags {
    /// May modify the keyspace.
    pub const WRITE: u32 = 1 << 0;
    /// Only reads.
    pub const READONLY: u32 = 1 << 1;
    /// May grow memory: refused with OOM past maxmemory.
    pub const DENYOOM: u32 = 1 << 2;
    /// Administrative.
    pub const ADMIN: u32 = 1 << 3;
    /// Not allowed from scripts.
    pub const NOSCRIPT: u32 = 1 << 4;
    /// O(1) or O(log N).
    pub const FAST: u32 = 1 << 5;
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1 << 6;
    /// Allowed while loading.
    pub const LOADING: u32 = 1 << 7;
    /// Allowed on a stale replica.
    pub const STALE: u32 = 1 << 8;
    /// Not allowed inside MULTI.
    pub const NO_MULTI: u32 = 1 << 9;
    /// Allowed while a script is busy.
    pub const ALLOW_BUSY: u32 = 1 << 10;
    /// Never logged in the slow log (EXEC: its commands are logged one by one).
    pub const SKIP_SLOWLOG: u32 = 1 << 11;
    /// May be replicated though it is not a write (EVAL, PUBLISH): held by
    /// CLIENT PAUSE WRITE.
    pub const MAY_REPLICATE: u32 = 1 << 12;
    /// Not shown to MONITOR by the dispatcher (EVAL and EVALSHA show
    /// themselves before they run, so that their commands follow them).
    pub const SKIP_MONITOR: u32 = 1 << 13;
    /// A pub/sub command.
    pub const PUBSUB: u32 = 1 << 14;
    /// Served in a slot being imported as if ASKING had been sent
    /// (RESTORE-ASKING).
    pub const ASKING: u32 = 1 << 15;
    /// Keys not at fixed positions (counted by an argument, or MIGRATE's
    /// KEYS form). Set by the table from the name (see `is_movable`), so
    /// routing tests a bit rather than names on every command; COMMAND
    /// INFO shows it as `movablekeys`, as Redis does.
    pub const MOVABLE_KEYS: u32 = 1 << 16;
    /// May be called with no key at all (EVAL with numkeys 0).
    pub const NO_MANDATORY_KEYS: u32 = 1 << 17;
    /// Refused while a replica loads its data asynchronously (Redis's
    /// repl-diskless-load swapdb); tally only names it for COMMAND INFO.
    pub const NO_ASYNC_LOADING: u32 = 1 << 18;

    /// Flag names for COMMAND INFO, in Redis's order
    /// (`addReplyFlagsForCommand`; MAY_REPLICATE is hidden there too).
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (ASKING, "asking"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLE_KEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

use flags::*;

/// Legacy key positions: first, last (negative counts from the end) and step.
#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    /// Index of the first key, 0 when the command takes no key.
    pub first: i32,
    /// Index of the last key; -1 means the last argument.
    pub last: i32,
    /// Distance between keys.
    pub step: i32,
}

impl KeySpec {
    /// The index of the last key for a call with `argc` arguments (below
    /// `first` when the call has no key).
    #[inline]
    pub fn last_position(&self, argc: usize) -> i32 {
        if self.last < 0 {
            argc as i32 + self.last
        } else {
            self.last.min(argc as i32 - 1)
        }
    }

    /// The argument indexes holding keys for a call with `argc` arguments.
    pub fn positions(&self, argc: usize) -> Vec<usize> {
        if self.first <= 0 {
            return Vec::new();
        }
        (self.first..=self.last_position(argc))
            .step_by(self.step.max(1) as usize)
            .map(|i| i as usize)
            .collect()
    }
}

/// Commands whose keys are counted by an argument (Redis's movable keys):
/// where the count is, where the keys start, and whether a call without
/// keys is an error (commands not flagged NO_MANDATORY_KEYS).
pub const fn counted_keys(name: &str) -> Option<(usize, usize, bool)> {
    const SCRIPT_RUNS: [&str; 4] = ["eval", "evalsha", "eval_ro", "evalsha_ro"];
    let mut i = 0;
    while i < SCRIPT_RUNS.len() {
        if const_str_eq(SCRIPT_RUNS[i], name) {
            return Some((2, 3, false));
        }
        i += 1;
    }
    if const_str_eq(name, "sintercard") {
        return Some((1, 2, true));
    }
    None
}

/// MIGRATE's keys (Redis's migrateGetKeys): the key argument, or those
/// after KEYS when it is empty.
fn migrate_key_positions(argv: &[&[u8]]) -> Vec<usize> {
    let mut i = 6;
    while i < argv.len() {
        let word = argv[i];
        if word.eq_ignore_ascii_case(b"auth") {
            i += 2;
        } else if word.eq_ignore_ascii_case(b"auth2") {
            i += 3;
        } else if word.eq_ignore_ascii_case(b"keys") {
            if argv.get(3).is_some_and(|k| !k.is_empty()) {
                return Vec::new();
            }
            return (i + 1..argv.len()).collect();
        } else {
            i += 1;
        }
    }
    if argv.len() > 3 {
        vec![3]
    } else {
        Vec::new()
    }
}

impl Command {
    /// The argument indexes holding keys in this call, movable keys
    /// included (none when the count is out of range, as Redis's
    /// getKeysFromCommand).
    pub fn key_positions(&self, argv: &[&[u8]]) -> Vec<usize> {
        if self.name == "migrate" {
            return migrate_key_positions(argv);
        }
        match self.counted_key_range(argv) {
            Some(range) => range.collect(),
            None => self.keys.positions(argv.len()),
        }
    }

    /// The index of the command's only key, when it has exactly one at a
    /// fixed position; 0 otherwise.
    #[inline(always)]
    pub fn only_key_position(&self) -> usize {
        self.only_key
    }

    /// For a command whose keys are counted by an argument (EVAL's
    /// numkeys...), the argument range holding them in this call (empty
    /// when the count is out of range); `None` for other commands. No
    /// allocation: cluster routing runs it for every script call.
    #[inline]
    pub fn counted_key_range(&self, argv: &[&[u8]]) -> Option<std::ops::Range<usize>> {
        let (count_at, first, _) = self.counted?;
        let count = match argv.get(count_at).copied().unwrap_or_default() {
            [digit @ b'0'..=b'9'] => (digit - b'0') as i64,
            text => super::command::c_atoi(text),
        };
        let available = argv.len().saturating_sub(first) as i64;
        Some(if count < 1 || count > available {
            first..first
        } else {
            first..first + count as usize
        })
    }
}

pub(super) const NO_KEYS: KeySpec = KeySpec {
    first: 0,
    last: 0,
    step: 0,
};
/// MIGRATE's key argument (its KEYS form is movable: see `key_positions`).
pub(super) const MIGRATE_KEY: KeySpec = KeySpec {
    first: 3,
    last: 3,
    step: 1,
};
pub(super) const ONE_KEY: KeySpec = KeySpec {
    first: 1,
    last: 1,
    step: 1,
};
pub(super) const ALL_KEYS: KeySpec = KeySpec {
    first: 1,
    last: -1,
    step: 1,
};
pub(super) const KEY_VALUE_PAIRS: KeySpec = KeySpec {
    first: 1,
    last: -1,
    step: 2,
};
/// EVAL's keys are counted by its numkeys argument; the legacy spec has none.
const EVAL_KEYS: KeySpec = NO_KEYS;
pub(super) const TWO_KEYS: KeySpec = KeySpec {
    first: 1,
    last: 2,
    step: 1,
};

/// One row of the table.
pub struct Command {
    /// Lower-case full name; subcommands are `container|sub`.
    pub name: &'static str,
    /// Argument count including the name; negative means at least that many.
    pub arity: i32,
    /// Bitwise OR of [`flags`].
    pub flags: u32,
    /// Where the keys are.
    pub keys: KeySpec,
    /// The implementation.
    pub handler: Handler,
    /// Command group (COMMAND DOCS `group`, ACL category).
    pub group: &'static str,
    /// Redis version that introduced it.
    pub since: &'static str,
    /// One-line description.
    pub summary: &'static str,
    /// Subcommands of a container command (CONFIG, CLIENT, ...).
    pub subcommands: &'static [Command],
    /// [`counted_keys`] of its name, looked up once where the table is
    /// built (EVALSHA's keys are found on every call of a cluster node).
    counted: Option<(usize, usize, bool)>,
    /// The index of the command's only key when it has exactly one, at a
    /// fixed position (GET, SET, INCR...); 0 otherwise. Set where the
    /// table is built: a cluster node's slot gate reads it first.
    only_key: usize,
}

/// Shorthand for a table row.
#[allow(clippy::too_many_arguments)]
pub(super) const fn row(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: Handler,
    group: &'static str,
    since: &'static str,
    summary: &'static str,
) -> Command {
    Command {
        name,
        arity,
        flags: if is_movable(name) {
            flags | MOVABLE_KEYS
        } else {
            flags
        },
        keys,
        handler,
        group,
        since,
        summary,
        subcommands: &[],
        counted: counted_keys(name),
        only_key: if !is_movable(name) && keys.first > 0 && keys.first == keys.last {
            keys.first as usize
        } else {
            0
        },
    }
}

/// Commands whose keys are not at fixed positions: those `counted_keys`
/// knows, and MIGRATE.
const fn is_movable(name: &str) -> bool {
    counted_keys(name).is_some() || const_str_eq(name, "migrate")
}

/// `a == b` where the table is built: in a `const fn`.
const fn const_str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut j = 0;
    while j < a.len() {
        if a[j] != b[j] {
            return false;
        }
        j += 1;
    }
    true
}

/// A container command: dispatch goes to its subcommands.
const fn container(
    name: &'static str,
    arity: i32,
    group: &'static str,
    since: &'static str,
    summary: &'static str,
    subcommands: &'static [Command],
    handler: Handler,
) -> Command {
    Command {
        name,
        arity,
        // COMMAND alone of the containers has flags of its own in Redis 7.0.
        flags: if const_str_eq(name, "command") {
            LOADING | STALE
        } else {
            0
        },
        keys: NO_KEYS,
        handler,
        group,
        since,
        summary,
        subcommands,
        counted: None,
        only_key: 0,
    }
}

pub(super) fn container_without_subcommand(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    Reply::error(super::error::wrong_arity(
        &String::from_utf8_lossy(argv[0]).to_ascii_lowercase(),
    ))
}

/// Every top-level command.
#[rustfmt::skip]
pub static COMMANDS: &[Command] = &[
    // strings and counters
    row("get", 2, READONLY | FAST, ONE_KEY, string::get, "string", "1.0.0", "Returns the string value of a key."),
    row("set", -3, WRITE | DENYOOM, ONE_KEY, string::set, "string", "1.0.0", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist."),
    row("setnx", 3, WRITE | DENYOOM | FAST, ONE_KEY, string::setnx, "string", "1.0.0", "Set the string value of a key only when the key doesn't exist."),
    row("setex", 4, WRITE | DENYOOM, ONE_KEY, string::setex, "string", "2.0.0", "Sets the string value and expiration time of a key. Creates the key if it doesn't exist."),
    row("psetex", 4, WRITE | DENYOOM, ONE_KEY, string::psetex, "string", "2.6.0", "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist."),
    row("mget", -2, READONLY | FAST, ALL_KEYS, string::mget, "string", "1.0.0", "Atomically returns the string values of one or more keys."),
    row("mset", -3, WRITE | DENYOOM, KEY_VALUE_PAIRS, string::mset, "string", "1.0.1", "Atomically creates or modifies the string values of one or more keys."),
    row("msetnx", -3, WRITE | DENYOOM, KEY_VALUE_PAIRS, string::msetnx, "string", "1.0.1", "Atomically modifies the string values of one or more keys only when all keys don't exist."),
    row("getset", 3, WRITE | DENYOOM | FAST, ONE_KEY, string::getset, "string", "1.0.0", "Returns the previous string value of a key after setting it to a new value."),
    row("getdel", 2, WRITE | FAST, ONE_KEY, string::getdel, "string", "6.2.0", "Returns the string value of a key after deleting the key."),
    row("getex", -2, WRITE | FAST, ONE_KEY, string::getex, "string", "6.2.0", "Returns the string value of a key after setting its expiration time."),
    row("incr", 2, WRITE | DENYOOM | FAST, ONE_KEY, string::incr, "string", "1.0.0", "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."),
    row("incrby", 3, WRITE | DENYOOM | FAST, ONE_KEY, string::incrby, "string", "1.0.0", "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist."),
    row("incrbyfloat", 3, WRITE | DENYOOM | FAST, ONE_KEY, string::incrbyfloat, "string", "2.6.0", "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist."),
    row("decr", 2, WRITE | DENYOOM | FAST, ONE_KEY, string::decr, "string", "1.0.0", "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."),
    row("decrby", 3, WRITE | DENYOOM | FAST, ONE_KEY, string::decrby, "string", "1.0.0", "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist."),
    row("append", 3, WRITE | DENYOOM | FAST, ONE_KEY, string::append, "string", "2.0.0", "Appends a string to the value of a key. Creates the key if it doesn't exist."),
    row("strlen", 2, READONLY | FAST, ONE_KEY, string::strlen, "string", "2.2.0", "Returns the length of a string value."),
    row("getrange", 4, READONLY, ONE_KEY, string::getrange, "string", "2.4.0", "Returns a substring of the string stored at a key."),
    row("substr", 4, READONLY, ONE_KEY, string::getrange, "string", "1.0.0", "Returns a substring from a string value."),
    row("setrange", 4, WRITE | DENYOOM, ONE_KEY, string::setrange, "string", "2.2.0", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist."),
    // keys
    row("del", -2, WRITE, ALL_KEYS, keys::del, "generic", "1.0.0", "Deletes one or more keys."),
    row("unlink", -2, WRITE | FAST, ALL_KEYS, keys::del, "generic", "4.0.0", "Asynchronously deletes one or more keys."),
    row("exists", -2, READONLY | FAST, ALL_KEYS, keys::exists, "generic", "1.0.0", "Determines whether one or more keys exist."),
    row("touch", -2, READONLY | FAST, ALL_KEYS, keys::touch, "generic", "3.2.1", "Returns the number of existing keys out of those specified after updating the time they were last accessed."),
    row("expire", -3, WRITE | FAST, ONE_KEY, keys::expire, "generic", "1.0.0", "Sets the expiration time of a key in seconds."),
    row("pexpire", -3, WRITE | FAST, ONE_KEY, keys::pexpire, "generic", "2.6.0", "Sets the expiration time of a key in milliseconds."),
    row("expireat", -3, WRITE | FAST, ONE_KEY, keys::expireat, "generic", "1.2.0", "Sets the expiration time of a key to a Unix timestamp."),
    row("pexpireat", -3, WRITE | FAST, ONE_KEY, keys::pexpireat, "generic", "2.6.0", "Sets the expiration time of a key to a Unix milliseconds timestamp."),
    row("ttl", 2, READONLY | FAST, ONE_KEY, keys::ttl, "generic", "1.0.0", "Returns the expiration time in seconds of a key."),
    row("pttl", 2, READONLY | FAST, ONE_KEY, keys::pttl, "generic", "2.6.0", "Returns the expiration time in milliseconds of a key."),
    row("expiretime", 2, READONLY | FAST, ONE_KEY, keys::expiretime, "generic", "7.0.0", "Returns the expiration time of a key as a Unix timestamp."),
    row("pexpiretime", 2, READONLY | FAST, ONE_KEY, keys::pexpiretime, "generic", "7.0.0", "Returns the expiration time of a key as a Unix milliseconds timestamp."),
    row("persist", 2, WRITE | FAST, ONE_KEY, keys::persist, "generic", "2.2.0", "Removes the expiration time of a key."),
    row("type", 2, READONLY | FAST, ONE_KEY, keys::type_of, "generic", "1.0.0", "Determines the type of value stored at a key."),
    row("rename", 3, WRITE, TWO_KEYS, keys::rename, "generic", "1.0.0", "Renames a key and overwrites the destination."),
    row("renamenx", 3, WRITE | FAST, TWO_KEYS, keys::renamenx, "generic", "1.0.0", "Renames a key only when the target key name doesn't exist."),
    row("dump", 2, READONLY, ONE_KEY, persistence::dump, "generic", "2.6.0", "Returns a serialized representation of the value stored at a key."),
    row("restore", -4, WRITE | DENYOOM, ONE_KEY, persistence::restore, "generic", "2.6.0", "Creates a key from the serialized representation of a value."),
    row("migrate", -6, WRITE, MIGRATE_KEY, migrate::migrate, "generic", "2.6.0", "Atomically transfers a key from one Redis instance to another."),
    row("restore-asking", -4, WRITE | DENYOOM | ASKING, ONE_KEY, migrate::restore_asking, "server", "3.0.0", "An internal command for migrating keys in a cluster."),
    row("copy", -3, WRITE | DENYOOM, TWO_KEYS, keys::copy, "generic", "6.2.0", "Copies the value of a key to a new key."),
    row("move", 3, WRITE | FAST, ONE_KEY, keys::move_key, "generic", "1.0.0", "Moves a key to another database."),
    row("keys", 2, READONLY, NO_KEYS, keys::keys, "generic", "1.0.0", "Returns all key names that match a pattern."),
    row("scan", -2, READONLY, NO_KEYS, keys::scan, "generic", "2.8.0", "Iterates over the key names in the database."),
    row("randomkey", 1, READONLY, NO_KEYS, keys::randomkey, "generic", "1.0.0", "Returns a random key name from the database."),
    row("dbsize", 1, READONLY | FAST, NO_KEYS, keys::dbsize, "server", "1.0.0", "Returns the number of keys in the database."),
    row("flushdb", -1, WRITE, NO_KEYS, keys::flushdb, "server", "1.0.0", "Remove all keys from the current database."),
    row("flushall", -1, WRITE, NO_KEYS, keys::flushall, "server", "1.0.0", "Removes all keys from all databases."),
    row("select", 2, LOADING | STALE | FAST, NO_KEYS, keys::select, "connection", "1.0.0", "Changes the selected database."),
    row("swapdb", 3, WRITE | FAST, NO_KEYS, keys::swapdb, "server", "4.0.0", "Swaps two Redis databases."),
    container("object", -2, "generic", "2.2.3", "A container for object introspection commands.", OBJECT_SUBCOMMANDS, container_without_subcommand),
    // hashes
    row("hset", -4, WRITE | DENYOOM | FAST, ONE_KEY, hash::hset, "hash", "2.0.0", "Creates or modifies the value of a field in a hash."),
    row("hsetnx", 4, WRITE | DENYOOM | FAST, ONE_KEY, hash::hsetnx, "hash", "2.0.0", "Sets the value of a field in a hash only when the field doesn't exist."),
    row("hget", 3, READONLY | FAST, ONE_KEY, hash::hget, "hash", "2.0.0", "Returns the value of a field in a hash."),
    row("hmget", -3, READONLY | FAST, ONE_KEY, hash::hmget, "hash", "2.0.0", "Returns the values of all fields in a hash."),
    row("hmset", -4, WRITE | DENYOOM | FAST, ONE_KEY, hash::hmset, "hash", "2.0.0", "Sets the values of multiple fields."),
    row("hgetall", 2, READONLY, ONE_KEY, hash::hgetall, "hash", "2.0.0", "Returns all fields and values in a hash."),
    row("hdel", -3, WRITE | FAST, ONE_KEY, hash::hdel, "hash", "2.0.0", "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain."),
    row("hexists", 3, READONLY | FAST, ONE_KEY, hash::hexists, "hash", "2.0.0", "Determines whether a field exists in a hash."),
    row("hlen", 2, READONLY | FAST, ONE_KEY, hash::hlen, "hash", "2.0.0", "Returns the number of fields in a hash."),
    row("hkeys", 2, READONLY, ONE_KEY, hash::hkeys, "hash", "2.0.0", "Returns all fields in a hash."),
    row("hvals", 2, READONLY, ONE_KEY, hash::hvals, "hash", "2.0.0", "Returns all values in a hash."),
    row("hincrby", 4, WRITE | DENYOOM | FAST, ONE_KEY, hash::hincrby, "hash", "2.0.0", "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist."),
    row("hincrbyfloat", 4, WRITE | DENYOOM | FAST, ONE_KEY, hash::hincrbyfloat, "hash", "2.6.0", "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist."),
    row("hstrlen", 3, READONLY | FAST, ONE_KEY, hash::hstrlen, "hash", "3.2.0", "Returns the length of the value of a field."),
    row("hrandfield", -2, READONLY, ONE_KEY, hash::hrandfield, "hash", "6.2.0", "Returns one or more random fields from a hash."),
    row("hscan", -3, READONLY, ONE_KEY, hash::hscan, "hash", "2.8.0", "Iterates over fields and values of a hash."),
    // lists
    row("lpush", -3, WRITE | DENYOOM | FAST, ONE_KEY, list::lpush, "list", "1.0.0", "Prepends one or more elements to a list. Creates the key if it doesn't exist."),
    row("rpush", -3, WRITE | DENYOOM | FAST, ONE_KEY, list::rpush, "list", "1.0.0", "Appends one or more elements to a list. Creates the key if it doesn't exist."),
    row("lpushx", -3, WRITE | DENYOOM | FAST, ONE_KEY, list::lpushx, "list", "2.2.0", "Prepends one or more elements to a list only when the list exists."),
    row("rpushx", -3, WRITE | DENYOOM | FAST, ONE_KEY, list::rpushx, "list", "2.2.0", "Appends an element to a list only when the list exists."),
    row("lpop", -2, WRITE | FAST, ONE_KEY, list::lpop, "list", "1.0.0", "Returns the first elements in a list after removing it. Deletes the list if the last element was popped."),
    row("rpop", -2, WRITE | FAST, ONE_KEY, list::rpop, "list", "1.0.0", "Returns and removes the last elements of a list. Deletes the list if the last element was popped."),
    row("llen", 2, READONLY | FAST, ONE_KEY, list::llen, "list", "1.0.0", "Returns the length of a list."),
    row("lindex", 3, READONLY, ONE_KEY, list::lindex, "list", "1.0.0", "Returns an element from a list by its index."),
    row("lrange", 4, READONLY, ONE_KEY, list::lrange, "list", "1.0.0", "Returns a range of elements from a list."),
    row("ltrim", 4, WRITE, ONE_KEY, list::ltrim, "list", "1.0.0", "Removes elements from both ends a list. Deletes the list if all elements were trimmed."),
    row("lset", 4, WRITE | DENYOOM, ONE_KEY, list::lset, "list", "1.0.0", "Sets the value of an element in a list by its index."),
    row("lrem", 4, WRITE, ONE_KEY, list::lrem, "list", "1.0.0", "Removes elements from a list. Deletes the list if the last element was removed."),
    row("linsert", 5, WRITE | DENYOOM, ONE_KEY, list::linsert, "list", "2.2.0", "Inserts an element before or after another element in a list."),
    row("lpos", -3, READONLY, ONE_KEY, list::lpos, "list", "6.0.6", "Returns the index of matching elements in a list."),
    row("lmove", 5, WRITE | DENYOOM, TWO_KEYS, list::lmove, "list", "6.2.0", "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved."),
    row("rpoplpush", 3, WRITE | DENYOOM, TWO_KEYS, list::rpoplpush, "list", "1.2.0", "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped."),
    row("blpop", -3, WRITE | NOSCRIPT, NO_KEYS, list::blocking, "list", "2.0.0", "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped."),
    row("brpop", -3, WRITE | NOSCRIPT, NO_KEYS, list::blocking, "list", "2.0.0", "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped."),
    row("blmove", 6, WRITE | DENYOOM | NOSCRIPT, NO_KEYS, list::blocking, "list", "6.2.0", "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved."),
    row("brpoplpush", 4, WRITE | DENYOOM | NOSCRIPT, NO_KEYS, list::blocking, "list", "2.2.0", "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped."),
    row("blmpop", -5, WRITE | NOSCRIPT, NO_KEYS, list::blocking, "list", "7.0.0", "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped."),
    row("bzpopmin", -3, WRITE | NOSCRIPT | FAST, NO_KEYS, list::blocking, "sorted_set", "5.0.0", "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped."),
    row("bzpopmax", -3, WRITE | NOSCRIPT | FAST, NO_KEYS, list::blocking, "sorted_set", "5.0.0", "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.  Deletes the sorted set if the last element was popped."),
    row("bzmpop", -5, WRITE | NOSCRIPT, NO_KEYS, list::blocking, "sorted_set", "7.0.0", "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped."),
    // sets
    row("sadd", -3, WRITE | DENYOOM | FAST, ONE_KEY, set::sadd, "set", "1.0.0", "Adds one or more members to a set. Creates the key if it doesn't exist."),
    row("srem", -3, WRITE | FAST, ONE_KEY, set::srem, "set", "1.0.0", "Removes one or more members from a set. Deletes the set if the last member was removed."),
    row("smembers", 2, READONLY, ONE_KEY, set::smembers, "set", "1.0.0", "Returns all members of a set."),
    row("sismember", 3, READONLY | FAST, ONE_KEY, set::sismember, "set", "1.0.0", "Determines whether a member belongs to a set."),
    row("smismember", -3, READONLY | FAST, ONE_KEY, set::smismember, "set", "6.2.0", "Determines whether multiple members belong to a set."),
    row("scard", 2, READONLY | FAST, ONE_KEY, set::scard, "set", "1.0.0", "Returns the number of members in a set."),
    row("spop", -2, WRITE | FAST, ONE_KEY, set::spop, "set", "1.0.0", "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped."),
    row("srandmember", -2, READONLY, ONE_KEY, set::srandmember, "set", "1.0.0", "Get one or multiple random members from a set"),
    row("smove", 4, WRITE | FAST, TWO_KEYS, set::smove, "set", "1.0.0", "Moves a member from one set to another."),
    row("sinter", -2, READONLY, ALL_KEYS, set::sinter, "set", "1.0.0", "Returns the intersect of multiple sets."),
    row("sunion", -2, READONLY, ALL_KEYS, set::sunion, "set", "1.0.0", "Returns the union of multiple sets."),
    row("sdiff", -2, READONLY, ALL_KEYS, set::sdiff, "set", "1.0.0", "Returns the difference of multiple sets."),
    row("sinterstore", -3, WRITE | DENYOOM, ALL_KEYS, set::sinterstore, "set", "1.0.0", "Stores the intersect of multiple sets in a key."),
    row("sunionstore", -3, WRITE | DENYOOM, ALL_KEYS, set::sunionstore, "set", "1.0.0", "Stores the union of multiple sets in a key."),
    row("sdiffstore", -3, WRITE | DENYOOM, ALL_KEYS, set::sdiffstore, "set", "1.0.0", "Stores the difference of multiple sets in a key."),
    row("sintercard", -3, READONLY, NO_KEYS, set::sintercard, "set", "7.0.0", "Returns the number of members of the intersect of multiple sets."),
    row("sscan", -3, READONLY, ONE_KEY, set::sscan, "set", "2.8.0", "Iterates over members of a set."),
    // sorted sets
    row("zadd", -4, WRITE | DENYOOM | FAST, ONE_KEY, zset::zadd, "sorted_set", "1.2.0", "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist."),
    row("zrem", -3, WRITE | FAST, ONE_KEY, zset::zrem, "sorted_set", "1.2.0", "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed."),
    row("zcard", 2, READONLY | FAST, ONE_KEY, zset::zcard, "sorted_set", "1.2.0", "Returns the number of members in a sorted set."),
    row("zscore", 3, READONLY | FAST, ONE_KEY, zset::zscore, "sorted_set", "1.2.0", "Returns the score of a member in a sorted set."),
    row("zmscore", -3, READONLY | FAST, ONE_KEY, zset::zmscore, "sorted_set", "6.2.0", "Returns the score of one or more members in a sorted set."),
    row("zincrby", 4, WRITE | DENYOOM | FAST, ONE_KEY, zset::zincrby, "sorted_set", "1.2.0", "Increments the score of a member in a sorted set."),
    row("zcount", 4, READONLY | FAST, ONE_KEY, zset::zcount, "sorted_set", "2.0.0", "Returns the count of members in a sorted set that have scores within a range."),
    row("zlexcount", 4, READONLY | FAST, ONE_KEY, zset::zlexcount, "sorted_set", "2.8.9", "Returns the number of members in a sorted set within a lexicographical range."),
    row("zrange", -4, READONLY, ONE_KEY, zset::zrange, "sorted_set", "1.2.0", "Returns members in a sorted set within a range of indexes."),
    row("zrangestore", -5, WRITE | DENYOOM, TWO_KEYS, zset::zrangestore, "sorted_set", "6.2.0", "Stores a range of members from sorted set in a key."),
    row("zrangebyscore", -4, READONLY, ONE_KEY, zset::zrangebyscore, "sorted_set", "1.0.5", "Returns members in a sorted set within a range of scores."),
    row("zrevrange", -4, READONLY, ONE_KEY, zset::zrevrange, "sorted_set", "1.2.0", "Returns members in a sorted set within a range of indexes in reverse order."),
    row("zrevrangebyscore", -4, READONLY, ONE_KEY, zset::zrevrangebyscore, "sorted_set", "2.2.0", "Returns members in a sorted set within a range of scores in reverse order."),
    row("zrangebylex", -4, READONLY, ONE_KEY, zset::zrangebylex, "sorted_set", "2.8.9", "Returns members in a sorted set within a lexicographical range."),
    row("zrevrangebylex", -4, READONLY, ONE_KEY, zset::zrevrangebylex, "sorted_set", "2.8.9", "Returns members in a sorted set within a lexicographical range in reverse order."),
    row("zrank", 3, READONLY | FAST, ONE_KEY, zset::zrank, "sorted_set", "2.0.0", "Returns the index of a member in a sorted set ordered by ascending scores."),
    row("zrevrank", 3, READONLY | FAST, ONE_KEY, zset::zrevrank, "sorted_set", "2.0.0", "Returns the index of a member in a sorted set ordered by descending scores."),
    row("zremrangebyscore", 4, WRITE, ONE_KEY, zset::zremrangebyscore, "sorted_set", "1.2.0", "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed."),
    row("zremrangebyrank", 4, WRITE, ONE_KEY, zset::zremrangebyrank, "sorted_set", "2.0.0", "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed."),
    row("zremrangebylex", 4, WRITE, ONE_KEY, zset::zremrangebylex, "sorted_set", "2.8.9", "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed."),
    row("zpopmin", -2, WRITE | FAST, ONE_KEY, zset::zpopmin, "sorted_set", "5.0.0", "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped."),
    row("zpopmax", -2, WRITE | FAST, ONE_KEY, zset::zpopmax, "sorted_set", "5.0.0", "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped."),
    row("zrandmember", -2, READONLY, ONE_KEY, zset::zrandmember, "sorted_set", "6.2.0", "Returns one or more random members from a sorted set."),
    row("zscan", -3, READONLY, ONE_KEY, zset::zscan, "sorted_set", "2.8.0", "Iterates over members and scores of a sorted set."),
    // scripting
    row("eval", -3, NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | MAY_REPLICATE | STALE, EVAL_KEYS, scripting::eval, "scripting", "2.6.0", "Executes a server-side Lua script."),
    row("evalsha", -3, NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | MAY_REPLICATE | STALE, EVAL_KEYS, scripting::evalsha, "scripting", "2.6.0", "Executes a server-side Lua script by SHA1 digest."),
    row("eval_ro", -3, NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY, EVAL_KEYS, scripting::eval_ro, "scripting", "7.0.0", "Executes a read-only server-side Lua script."),
    row("evalsha_ro", -3, NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY, EVAL_KEYS, scripting::evalsha_ro, "scripting", "7.0.0", "Executes a read-only server-side Lua script by SHA1 digest."),
    container("script", -2, "scripting", "2.6.0", "A container for Lua scripts management commands.", SCRIPT_SUBCOMMANDS, container_without_subcommand),
    container("function", -2, "scripting", "7.0.0", "A container for function commands.", FUNCTION_SUBCOMMANDS, container_without_subcommand),
    // pub/sub
    row("subscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, NO_KEYS, pubsub::subscribe, "pubsub", "2.0.0", "Listens for messages published to channels."),
    row("unsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, NO_KEYS, pubsub::unsubscribe, "pubsub", "2.0.0", "Stops listening to messages posted to channels."),
    row("psubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, NO_KEYS, pubsub::psubscribe, "pubsub", "2.0.0", "Listens for messages published to channels that match one or more patterns."),
    row("punsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, NO_KEYS, pubsub::punsubscribe, "pubsub", "2.0.0", "Stops listening to messages published to channels that match one or more patterns."),
    row("ssubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, ALL_KEYS, pubsub::ssubscribe, "pubsub", "7.0.0", "Listens for messages published to shard channels."),
    row("sunsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, ALL_KEYS, pubsub::sunsubscribe, "pubsub", "7.0.0", "Stops listening to messages posted to shard channels."),
    row("spublish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, ONE_KEY, pubsub::spublish, "pubsub", "7.0.0", "Post a message to a shard channel"),
    row("publish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, NO_KEYS, pubsub::publish, "pubsub", "2.0.0", "Posts a message to a channel."),
    container("pubsub", -2, "pubsub", "2.8.0", "A container for Pub/Sub commands.", PUBSUB_SUBCOMMANDS, container_without_subcommand),
    // transactions
    row("multi", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, NO_KEYS, multi::multi, "transactions", "1.2.0", "Starts a transaction."),
    row("exec", 1, NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG, NO_KEYS, multi::exec, "transactions", "1.2.0", "Executes all commands in a transaction."),
    row("watch", -2, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, ALL_KEYS, multi::watch, "transactions", "2.2.0", "Monitors changes to keys to determine the execution of a transaction."),
    row("unwatch", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, NO_KEYS, multi::unwatch, "transactions", "2.2.0", "Forgets about watched keys of a transaction."),
    row("discard", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, NO_KEYS, multi::discard, "transactions", "2.0.0", "Discards a transaction."),
    // connection
    row("ping", -1, FAST, NO_KEYS, conn::ping, "connection", "1.0.0", "Returns the server's liveliness response."),
    row("echo", 2, LOADING | STALE | FAST, NO_KEYS, conn::echo, "connection", "1.0.0", "Returns the given string."),
    row("quit", -1, NOSCRIPT | NO_AUTH | ALLOW_BUSY | LOADING | STALE | FAST, NO_KEYS, conn::quit, "connection", "1.0.0", "Closes the connection."),
    row("reset", 1, NOSCRIPT | LOADING | STALE | NO_AUTH | ALLOW_BUSY | FAST, NO_KEYS, conn::reset, "connection", "6.2.0", "Resets the connection."),
    row("hello", -1, NOSCRIPT | LOADING | STALE | NO_AUTH | ALLOW_BUSY | FAST, NO_KEYS, conn::hello, "connection", "6.0.0", "Handshakes with the Redis server."),
    row("auth", -2, NOSCRIPT | LOADING | STALE | NO_AUTH | ALLOW_BUSY | FAST, NO_KEYS, conn::auth, "connection", "1.0.0", "Authenticates the connection."),
    container("client", -2, "connection", "2.4.0", "A container for client connection commands.", CLIENT_SUBCOMMANDS, container_without_subcommand),
    // server
    row("time", 1, LOADING | STALE | FAST, NO_KEYS, server::time, "server", "2.6.0", "Returns the server time."),
    row("info", -1, LOADING | STALE, NO_KEYS, info::info, "server", "1.0.0", "Returns information and statistics about the server."),
    container("cluster", -2, "cluster", "3.0.0", "A container for Redis Cluster commands.", CLUSTER_SUBCOMMANDS, cluster::cluster_container),
    row("readonly", 1, FAST | LOADING | STALE, NO_KEYS, cluster::readonly, "cluster", "3.0.0", "Enables read-only queries for a connection to a Redis Cluster replica node."),
    row("readwrite", 1, FAST | LOADING | STALE, NO_KEYS, cluster::readonly, "cluster", "3.0.0", "Enables read-write queries for a connection to a Redis Cluster replica node."),
    row("asking", 1, FAST, NO_KEYS, cluster::asking, "cluster", "3.0.0", "Signals that a cluster client is following an -ASK redirect."),
    container("acl", -2, "server", "6.0.0", "A container for Access List Control commands.", ACL_SUBCOMMANDS, container_without_subcommand),
    container("config", -2, "server", "2.0.0", "A container for server configuration commands.", CONFIG_SUBCOMMANDS, container_without_subcommand),
    container("command", -1, "server", "2.8.13", "Returns detailed information about all commands.", COMMAND_SUBCOMMANDS, command::command),
    row("shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY, NO_KEYS, server::shutdown, "server", "1.0.0", "Synchronously saves the database(s) to disk and shuts down the Redis server."),
    row("wait", 3, NOSCRIPT, NO_KEYS, server::wait, "generic", "3.0.0", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed."),
    row("lastsave", 1, LOADING | STALE | FAST, NO_KEYS, persistence::lastsave, "server", "1.0.0", "Returns the Unix timestamp of the last successful save to disk."),
    row("save", 1, ADMIN | NOSCRIPT | NO_MULTI | NO_ASYNC_LOADING, NO_KEYS, persistence::save, "server", "1.0.0", "Synchronously saves the database(s) to disk."),
    row("replconf", -1, ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY, NO_KEYS, persistence::replconf, "server", "3.0.0", "An internal command for configuring the replication stream."),
    row("sync", 1, ADMIN | NOSCRIPT | NO_MULTI | NO_ASYNC_LOADING, NO_KEYS, persistence::sync, "server", "1.0.0", "An internal command used in replication."),
    row("bgrewriteaof", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, NO_KEYS, persistence::bgrewriteaof, "server", "1.0.0", "Asynchronously rewrites the append-only file to disk."),
    row("bgsave", -1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, NO_KEYS, persistence::bgsave, "server", "1.0.0", "Asynchronously saves the database(s) to disk."),
    container("slowlog", -2, "server", "2.2.12", "A container for slow log commands.", SLOWLOG_SUBCOMMANDS, container_without_subcommand),
    container("memory", -2, "server", "4.0.0", "A container for memory diagnostics commands.", MEMORY_SUBCOMMANDS, container_without_subcommand),
    container("latency", -2, "server", "2.8.13", "A container for latency diagnostics commands.", LATENCY_SUBCOMMANDS, container_without_subcommand),
    row("monitor", 1, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, server::monitor, "server", "1.0.0", "Listens for all requests received by the server in real-time."),
    row("debug", -2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, server::debug, "server", "1.0.0", "A container for debugging commands."),
];

/// Name lookup over the table, built once.
pub struct Registry {
    by_name: HashMap<&'static [u8], usize>,
    all: Vec<&'static Command>,
    top_level: usize,
}

impl Registry {
    fn build() -> Registry {
        let mut all: Vec<&'static Command> = COMMANDS.iter().collect();
        let top_level = all.len();
        for command in COMMANDS {
            all.extend(command.subcommands.iter());
        }
        let by_name = all
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.as_bytes(), i))
            .collect();
        Registry {
            by_name,
            all,
            top_level,
        }
    }

    /// Looks up a top-level command by name, case-insensitively.
    #[inline]
    pub fn lookup(&self, name: &[u8]) -> Option<&'static Command> {
        self.lookup_indexed(name).map(|(_, command)| command)
    }

    /// Like [`Registry::lookup`], with the command's stats index.
    #[inline]
    pub fn lookup_indexed(&self, name: &[u8]) -> Option<(usize, &'static Command)> {
        self.index_of(name)
            .filter(|&i| i < self.top_level)
            .map(|i| (i, self.all[i]))
    }

    /// Looks up any command by full name (`get`, `config|get`), case-insensitively.
    pub fn lookup_full(&self, name: &[u8]) -> Option<&'static Command> {
        self.index_of(name).map(|i| self.all[i])
    }

    /// The stats index of a full name.
    #[inline]
    pub fn index_of(&self, name: &[u8]) -> Option<usize> {
        let mut lower = [0u8; 40];
        if name.len() > lower.len() {
            return None;
        }
        for (dst, src) in lower.iter_mut().zip(name) {
            *dst = src.to_ascii_lowercase();
        }
        self.by_name.get(&lower[..name.len()]).copied()
    }

    /// The command at a stats index (from [`Registry::index_of`]).
    pub fn command(&self, index: usize) -> &'static Command {
        self.all[index]
    }

    /// The full name of the command at a stats index.
    pub fn name_of(&self, index: usize) -> Option<&'static str> {
        self.all.get(index).map(|c| c.name)
    }

    /// Top-level commands.
    pub fn top_level(&self) -> impl Iterator<Item = &'static Command> + '_ {
        self.all[..self.top_level].iter().copied()
    }

    /// Every command and subcommand, in stats-index order.
    pub fn all(&self) -> impl Iterator<Item = &'static Command> + '_ {
        self.all.iter().copied()
    }

    /// Number of rows including subcommands.
    pub fn len(&self) -> usize {
        self.all.len()
    }

    /// Never true: the table is static and non-empty.
    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }
}

/// The registry, built on first use.
pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::build)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_lowercase_and_subcommands_are_prefixed() {
        let registry = registry();
        assert_eq!(registry.by_name.len(), registry.len());
        for command in registry.all() {
            assert_eq!(command.name, command.name.to_ascii_lowercase());
        }
        for command in registry.top_level() {
            for sub in command.subcommands {
                assert!(sub.name.starts_with(&format!("{}|", command.name)));
            }
        }
    }

    #[test]
    fn key_positions_follow_first_last_step() {
        assert_eq!(KEY_VALUE_PAIRS.positions(5), vec![1, 3]);
        assert_eq!(ALL_KEYS.positions(4), vec![1, 2, 3]);
        assert_eq!(TWO_KEYS.positions(3), vec![1, 2]);
        assert!(NO_KEYS.positions(3).is_empty());
    }

    #[test]
    fn the_movable_keys_flag_marks_exactly_the_commands_with_movable_keys() {
        let registry = registry();
        let mut marked: Vec<&str> = registry
            .all()
            .filter(|c| c.flags & MOVABLE_KEYS != 0)
            .map(|c| c.name)
            .collect();
        marked.sort_unstable();
        let mut movable: Vec<&str> = registry
            .all()
            .filter(|c| counted_keys(c.name).is_some() || c.name == "migrate")
            .map(|c| c.name)
            .collect();
        movable.sort_unstable();
        assert_eq!(marked, movable);
        assert_eq!(marked.len(), 6, "{marked:?}");
        let evalsha = registry.lookup(b"evalsha").unwrap();
        let argv: [&[u8]; 6] = [b"evalsha", b"sha", b"2", b"k1", b"k2", b"arg"];
        assert_eq!(evalsha.counted_key_range(&argv), Some(3..5));
        let argv: [&[u8]; 4] = [b"evalsha", b"sha", b"3", b"k1"];
        assert_eq!(evalsha.counted_key_range(&argv), Some(3..3));
        let get = registry.lookup(b"get").unwrap();
        assert_eq!(get.counted_key_range(&[b"get", b"k"]), None);
    }

    /// The only-key position agrees with the key positions of every row,
    /// for every argument count the row's arity allows (up to 8).
    #[test]
    fn the_only_key_position_is_the_one_key_a_call_has() {
        let registry = registry();
        let mut one_key = 0;
        for command in registry.all() {
            let only = command.only_key_position();
            if only == 0 {
                continue;
            }
            one_key += 1;
            assert_eq!(command.flags & MOVABLE_KEYS, 0, "{}", command.name);
            for argc in command.arity.unsigned_abs() as usize..=8 {
                assert_eq!(command.keys.positions(argc), vec![only], "{}", command.name);
            }
        }
        for (name, position) in [("get", 1), ("set", 1), ("incr", 1), ("hset", 1)] {
            assert_eq!(
                registry
                    .lookup(name.as_bytes())
                    .unwrap()
                    .only_key_position(),
                position
            );
        }
        assert_eq!(
            registry
                .lookup_full(b"object|encoding")
                .unwrap()
                .only_key_position(),
            2
        );
        for name in ["mset", "del", "mget", "eval", "evalsha", "migrate", "ping"] {
            assert_eq!(
                registry
                    .lookup(name.as_bytes())
                    .unwrap()
                    .only_key_position(),
                0,
                "{name}"
            );
        }
        // 99 rows when this was written: the test looked at many.
        assert!(one_key > 50, "{one_key}");
    }
}
