//! Which arguments of a call are keys, by the command's own rules where
//! its key specs cannot say: counted keys (EVAL's numkeys, ZUNIONSTORE's),
//! MIGRATE's KEYS form, SORT's STORE, MSETEX's pairs, GEORADIUS's STORE
//! and STOREDIST. Routing, ACL, locks and CLIENT TRACKING read keys here
//! (`Command::key_positions`); COMMAND GETKEYSANDFLAGS reads the specs
//! (`key_flags`).

use super::Command;

/// The commands that run a script or a function: their keys are counted
/// (`numkeys`), and what else they touch is known only when they run.
pub const SCRIPT_RUNS: [&str; 6] = [
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
];

/// Commands whose keys are counted by an argument (Redis's movable keys):
/// where the count is, where the keys start, and whether a call without
/// keys is an error (commands not flagged NO_MANDATORY_KEYS).
pub const fn counted_keys(name: &str) -> Option<(usize, usize, bool)> {
    let mut i = 0;
    while i < SCRIPT_RUNS.len() {
        if const_str_eq(SCRIPT_RUNS[i], name) {
            return Some((2, 3, false));
        }
        i += 1;
    }
    const COUNT_FIRST: [&str; 7] = [
        "sintercard",
        "zunion",
        "zinter",
        "zdiff",
        "zintercard",
        "lmpop",
        "zmpop",
    ];
    let mut i = 0;
    while i < COUNT_FIRST.len() {
        if const_str_eq(COUNT_FIRST[i], name) {
            return Some((1, 2, true));
        }
        i += 1;
    }
    // The STORE commands (after their destination) and the blocking
    // MPOPs (after their timeout).
    if stores_first(name) || const_str_eq(name, "blmpop") || const_str_eq(name, "bzmpop") {
        return Some((2, 3, true));
    }
    None
}

/// The sorted-set STORE commands: a destination key, then counted keys.
const fn stores_first(name: &str) -> bool {
    const_str_eq(name, "zunionstore")
        || const_str_eq(name, "zinterstore")
        || const_str_eq(name, "zdiffstore")
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

/// MSETEX's keys: `numkeys` of them from the third argument, every other
/// one (key value key value ...); none when the count is out of range.
fn msetex_key_positions(argv: &[&[u8]]) -> Vec<usize> {
    let count = argv.get(1).map_or(0, |n| crate::number::c_atoi(n));
    let available = (argv.len().saturating_sub(2) / 2) as i64;
    if count < 1 || count > available {
        return Vec::new();
    }
    (0..count as usize).map(|i| 2 + 2 * i).collect()
}

/// SORT's keys (Redis's sortGetKeys): the key sorted, and the last STORE's
/// destination. LIMIT's two arguments and GET's and BY's one are skipped,
/// so a pattern named `store` is not taken for the option; the word after
/// STORE is not, so `STORE store x` stores into `x`.
pub fn sort_key_positions(argv: &[&[u8]]) -> Vec<usize> {
    let mut store = None;
    let mut i = 2;
    while i < argv.len() {
        let word = argv[i];
        if word.eq_ignore_ascii_case(b"limit") {
            i += 2;
        } else if word.eq_ignore_ascii_case(b"get") || word.eq_ignore_ascii_case(b"by") {
            i += 1;
        } else if word.eq_ignore_ascii_case(b"store") && i + 1 < argv.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    std::iter::once(1).chain(store).collect()
}

/// GEORADIUS's and GEORADIUSBYMEMBER's keys: the source, and the argument
/// after every STORE or STOREDIST from the fifth on. Redis's handler stores
/// into the last of them (georadiusGetKeys names that one) and its key
/// specs name the first of each word; every one of them is a key here, so
/// that routing, ACL and the locks cover whichever is used.
pub fn georadius_key_positions(argv: &[&[u8]]) -> Vec<usize> {
    let mut keys = vec![1];
    let mut i = 5;
    while i < argv.len() {
        let word = argv[i];
        if (word.eq_ignore_ascii_case(b"store") || word.eq_ignore_ascii_case(b"storedist"))
            && i + 1 < argv.len()
        {
            keys.push(i + 1);
            i += 1;
        }
        i += 1;
    }
    keys
}

/// XREAD's and XREADGROUP's keys, as their key specs find them (Redis
/// prefers the specs to xreadGetKeys): after the first STREAMS from the
/// first argument (from the fourth for XREADGROUP, past GROUP's two
/// names), half of what follows it, rounded down.
pub fn xread_key_positions(argv: &[&[u8]], from: usize) -> Vec<usize> {
    let Some(keyword) = (from..argv.len()).find(|&i| argv[i].eq_ignore_ascii_case(b"streams"))
    else {
        return Vec::new();
    };
    let first = keyword + 1;
    (first..first + (argv.len() - first) / 2).collect()
}

/// The commands [`xread_key_positions`] finds keys for.
const fn xreads(name: &str) -> bool {
    const_str_eq(name, "xread") || const_str_eq(name, "xreadgroup")
}

/// The commands [`georadius_key_positions`] finds keys for.
const fn georadius_stores(name: &str) -> bool {
    const_str_eq(name, "georadius") || const_str_eq(name, "georadiusbymember")
}

impl Command {
    /// The argument indexes holding keys in this call, movable keys
    /// included (none when the count is out of range, as Redis's
    /// getKeysFromCommand).
    pub fn key_positions(&self, argv: &[&[u8]]) -> Vec<usize> {
        if self.name == "migrate" {
            return migrate_key_positions(argv);
        }
        if self.name == "sort" {
            return sort_key_positions(argv);
        }
        if self.name == "msetex" {
            return msetex_key_positions(argv);
        }
        if georadius_stores(self.name) {
            return georadius_key_positions(argv);
        }
        if xreads(self.name) {
            let from = if self.name == "xreadgroup" { 4 } else { 1 };
            return xread_key_positions(argv, from);
        }
        if stores_first(self.name) {
            // The destination, then the inputs, as their key specs list
            // them; none when the count is out of range.
            let inputs = self.counted_key_range(argv).unwrap_or(0..0);
            if inputs.is_empty() {
                return Vec::new();
            }
            return std::iter::once(1).chain(inputs).collect();
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
            text => crate::number::c_atoi(text),
        };
        let available = argv.len().saturating_sub(first) as i64;
        Some(if count < 1 || count > available {
            first..first
        } else {
            first..first + count as usize
        })
    }
}

/// Commands whose keys are not at fixed positions (Redis's `movablekeys`):
/// those `counted_keys` knows, MIGRATE, SORT, MSETEX, GEORADIUS's and
/// GEORADIUSBYMEMBER's STORE forms, XREAD and XREADGROUP.
pub(super) const fn is_movable(name: &str) -> bool {
    counted_keys(name).is_some()
        || const_str_eq(name, "migrate")
        || const_str_eq(name, "sort")
        || const_str_eq(name, "sort_ro")
        || const_str_eq(name, "msetex")
        || georadius_stores(name)
        || xreads(name)
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
