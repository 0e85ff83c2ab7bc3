//! The keys and channels a command names, with the permission each key
//! needs, found from Redis 7.0's key specs as getKeysUsingKeySpecs finds
//! them: a key the command reads (`access`) needs read permission, one it
//! inserts, deletes or updates needs write permission.

use crate::catalog::docs::{self, BeginSearch, FindKeys};
use crate::catalog::{key_flags, Command};

use super::selector::Selector;
use super::user::{READ, WRITE};

/// The docs (key specs) of the command at catalog `index`.
fn doc_of(index: usize) -> Option<&'static docs::CommandDoc> {
    let registry = crate::catalog::registry();
    (index < registry.len()).then(|| registry.command(index).doc)
}

/// The keys of one key spec in one call: arguments `first..=last`, every
/// `step`, each needing `needed` (empty when `last < first`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stride {
    first: usize,
    last: usize,
    step: usize,
    needed: u8,
}

impl Stride {
    /// A stride naming no argument.
    const EMPTY: Stride = Stride {
        first: 1,
        last: 0,
        step: 1,
        needed: 0,
    };

    /// (argument index, permissions needed) of each key.
    fn keys(self) -> impl Iterator<Item = (usize, u8)> {
        (self.first..=self.last)
            .step_by(self.step)
            .map(move |at| (at, self.needed))
    }
}

/// How the keys of a command's calls are found, decided once per command
/// from its key specs, so that the usual command (one spec, from a fixed
/// argument) costs a few additions per check instead of the general walk.
#[derive(Clone, Copy, Debug)]
enum Plan {
    /// No spec names keys.
    NoKeys,
    /// The one spec naming keys starts at a fixed argument (`first`) and
    /// finds its keys so, with these flags.
    OneSpec {
        first: i64,
        find: &'static FindKeys,
        resolved: ResolvedFlags,
    },
    /// Several specs, a keyword search, an `incomplete` spec, or no Redis
    /// key specs at all: every spec walked into a list.
    Walk,
}

/// The keys a call names, as an ACL check reads them.
pub enum CallKeys<'a> {
    /// Found at once (every command but the few below).
    Stride(Stride),
    /// Walked on first use (a selector with `allkeys` never asks) and kept
    /// for the next selector: the commands of [`Plan::Walk`].
    Walk {
        /// The command called.
        command: &'a Command,
        /// Its registry index.
        index: usize,
        /// The keys, once walked.
        listed: Option<Vec<(usize, u8)>>,
    },
}

impl<'a> CallKeys<'a> {
    /// The keys of `argv`, a call of the command at registry `index`.
    #[inline]
    pub fn new(command: &'a Command, index: usize, argv: &[&[u8]]) -> CallKeys<'a> {
        match plan(index) {
            Plan::NoKeys => CallKeys::Stride(Stride::EMPTY),
            Plan::OneSpec {
                first,
                find,
                resolved,
            } => CallKeys::Stride(match keys_from(first, find, resolved, argv) {
                SpecKeys::Found(stride) => stride,
                SpecKeys::Invalid => Stride::EMPTY,
            }),
            Plan::Walk => CallKeys::Walk {
                command,
                index,
                listed: None,
            },
        }
    }

    /// The first key (argument index) of `argv` that `selector` does not
    /// grant, if any. The stride's loop is inlined into the check; the
    /// walk is not.
    #[inline(always)]
    pub fn first_refused(&mut self, argv: &[&[u8]], selector: &Selector) -> Option<usize> {
        match self {
            CallKeys::Stride(stride) => {
                let mut at = stride.first;
                while at <= stride.last {
                    if !selector.grants_key(argv[at], stride.needed) {
                        return Some(at);
                    }
                    at += stride.step;
                }
                None
            }
            CallKeys::Walk {
                command,
                index,
                listed,
            } => first_walked_refused(command, *index, listed, argv, selector),
        }
    }
}

/// [`CallKeys::first_refused`] of a walked call: the keys listed on first
/// use.
#[inline(never)]
fn first_walked_refused(
    command: &Command,
    index: usize,
    listed: &mut Option<Vec<(usize, u8)>>,
    argv: &[&[u8]],
    selector: &Selector,
) -> Option<usize> {
    listed
        .get_or_insert_with(|| {
            let mut keys = Vec::new();
            keys_with_permissions(command, index, argv, &mut keys);
            keys
        })
        .iter()
        .find(|&&(at, needed)| !selector.grants_key(argv[at], needed))
        .map(|&(at, _)| at)
}

/// The plan of the command at registry `index` (see [`Plan`]).
#[inline]
fn plan(index: usize) -> Plan {
    static PLANS: std::sync::OnceLock<Vec<Plan>> = std::sync::OnceLock::new();
    PLANS
        .get_or_init(|| (0..crate::catalog::registry().len()).map(plan_of).collect())
        .get(index)
        .copied()
        .unwrap_or(Plan::Walk)
}

fn plan_of(index: usize) -> Plan {
    let Some(doc) = doc_of(index) else {
        return Plan::Walk;
    };
    let mut naming = doc
        .key_specs
        .iter()
        .zip(resolved_flags(index).iter().copied())
        .filter(|(_, resolved)| !resolved.not_key);
    match (naming.next(), naming.next()) {
        (None, _) => Plan::NoKeys,
        (Some((spec, resolved)), None) if !resolved.incomplete => match spec.begin_search {
            BeginSearch::Index(first) => Plan::OneSpec {
                first,
                find: &spec.find_keys,
                resolved,
            },
            _ => Plan::Walk,
        },
        _ => Plan::Walk,
    }
}

/// (argument index, permissions needed) of every key in the call of the
/// command at registry `index`. A syntax error in the key arguments yields
/// no keys, as in Redis (the command then reports the error itself).
pub fn keys_with_permissions(
    command: &Command,
    index: usize,
    argv: &[&[u8]],
    keys: &mut Vec<(usize, u8)>,
) {
    keys.clear();
    if !find_keys(command, index, argv, keys) {
        keys.clear();
    }
}

/// Fills `keys`; false on a syntax error in the key arguments.
fn find_keys(command: &Command, index: usize, argv: &[&[u8]], keys: &mut Vec<(usize, u8)>) -> bool {
    // Every key both ways, found by the command table: for commands
    // without Redis key specs (tally's own), and in place of a spec marked
    // `incomplete` that found keys, where Redis asks the command's own
    // key finder (MIGRATE's KEYS form: migrateGetKeys, read and write).
    let from_table = |keys: &mut Vec<(usize, u8)>| {
        keys.clear();
        keys.extend(
            command
                .key_positions(argv)
                .into_iter()
                .map(|at| (at, READ | WRITE)),
        );
        true
    };
    if command.name == "sort" {
        // SORT's STORE key is found by its own finder (its spec is
        // `incomplete`), read-only for the key sorted and written for the
        // destination, as sortGetKeys flags them.
        keys.extend(
            crate::catalog::sort_key_positions(argv)
                .into_iter()
                .map(|at| (at, if at == 1 { READ } else { WRITE })),
        );
        return true;
    }
    let Some(doc) = doc_of(index) else {
        return from_table(keys);
    };
    for (spec, &resolved) in doc.key_specs.iter().zip(resolved_flags(index)) {
        if resolved.not_key {
            continue;
        }
        match spec_keys(spec, resolved, argv) {
            SpecKeys::Found(stride) if resolved.incomplete && stride.first <= stride.last => {
                return from_table(keys);
            }
            SpecKeys::Found(stride) => keys.extend(stride.keys()),
            SpecKeys::Invalid => return false,
        }
    }
    true
}

/// What one key spec finds in a call.
enum SpecKeys {
    /// These keys (none when the spec's keyword is absent or its count 0).
    Found(Stride),
    /// A syntax error in the key arguments: the call names no keys.
    Invalid,
}

/// The keys one key spec names in a call, as getKeysUsingKeySpecs finds them.
fn spec_keys(spec: &docs::KeySpecDoc, resolved: ResolvedFlags, argv: &[&[u8]]) -> SpecKeys {
    let argc = argv.len() as i64;
    let first = match spec.begin_search {
        BeginSearch::Index(pos) => pos,
        BeginSearch::Keyword(keyword, startfrom) => {
            let (start, end) = if startfrom > 0 {
                (startfrom, argc - 1)
            } else {
                (argc + startfrom, 1)
            };
            let mut found = 0;
            let mut i = start;
            loop {
                if i >= argc || i < 1 {
                    break;
                }
                if argv[i as usize].eq_ignore_ascii_case(keyword.as_bytes()) {
                    found = i + 1;
                    break;
                }
                if i == end {
                    break;
                }
                i += if start <= end { 1 } else { -1 };
            }
            if found == 0 {
                return SpecKeys::Found(Stride::EMPTY);
            }
            found
        }
        BeginSearch::Unknown => return SpecKeys::Invalid,
    };
    keys_from(first, &spec.find_keys, resolved, argv)
}

/// The keys a key spec finds from argument `first` on (inlined: for the
/// usual command it is the whole of finding the keys).
#[inline(always)]
fn keys_from(first: i64, find: &FindKeys, resolved: ResolvedFlags, argv: &[&[u8]]) -> SpecKeys {
    let argc = argv.len() as i64;
    let Some((first, last, step)) = key_flags::key_range(first, find, argv) else {
        return SpecKeys::Invalid;
    };
    if numkeys_empty(first, last) {
        return SpecKeys::Found(Stride::EMPTY);
    }
    if last >= argc || last < first || first >= argc {
        return SpecKeys::Invalid;
    }
    let needed = if resolved.get_option {
        set_permissions(argv)
    } else {
        resolved.needed
    };
    SpecKeys::Found(Stride {
        first: first as usize,
        last: last as usize,
        step: step.max(1) as usize,
        needed,
    })
}

/// A keynum spec with zero keys names none (Redis's count of 0).
fn numkeys_empty(first: i64, last: i64) -> bool {
    last == first - 1
}

/// SET's key: written only, unless GET reads the old value too (its
/// spec's `variable_flags`, setGetKeys).
fn set_permissions(argv: &[&[u8]]) -> u8 {
    let get = argv.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get"));
    if get {
        READ | WRITE
    } else {
        WRITE
    }
}

/// What one key spec's flags demand.
fn permissions(flags: &[&str]) -> u8 {
    let mut needed = 0;
    if flags.contains(&"access") {
        needed |= READ;
    }
    if flags
        .iter()
        .any(|f| matches!(*f, "insert" | "delete" | "update"))
    {
        needed |= WRITE;
    }
    needed
}

/// A key spec's flags as a check uses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ResolvedFlags {
    /// `not_key`: the argument is not a key (skipped).
    not_key: bool,
    /// The permissions its keys need.
    needed: u8,
    /// SET's: a GET option adds read permission (see [`set_permissions`]).
    get_option: bool,
    /// `incomplete`: the keys it finds may not be all (see [`find_keys`]).
    incomplete: bool,
}

/// The resolved flags of each key spec of the command at registry
/// `index`, computed once: comparing the docs' flag strings on every
/// check was a fifth of the check's cost.
fn resolved_flags(index: usize) -> &'static [ResolvedFlags] {
    static RESOLVED: std::sync::OnceLock<Vec<Vec<ResolvedFlags>>> = std::sync::OnceLock::new();
    RESOLVED
        .get_or_init(|| {
            (0..crate::catalog::registry().len())
                .map(|i| {
                    let is_set = crate::catalog::registry().command(i).name == "set";
                    doc_of(i)
                        .map(|doc| {
                            doc.key_specs
                                .iter()
                                .map(|spec| ResolvedFlags {
                                    not_key: spec.flags.contains(&"not_key"),
                                    incomplete: spec.flags.contains(&"incomplete"),
                                    needed: permissions(spec.flags),
                                    get_option: is_set,
                                })
                                .collect()
                        })
                        .unwrap_or_default()
                })
                .collect()
        })
        .get(index)
        .map_or(&[], Vec::as_slice)
}

/// (argument index, is a pattern) of every channel the call publishes or
/// subscribes to (getChannelsFromCommand; unsubscribing is not checked).
pub fn channels(command: &Command, argv: &[&[u8]]) -> Vec<(usize, bool)> {
    if command.flags & crate::catalog::flags::PUBSUB == 0 {
        // Every command below is a pub/sub one: the rest leave after one
        // flag test instead of five name comparisons.
        return Vec::new();
    }
    match command.name {
        "publish" | "spublish" => (argv.len() > 1).then_some((1, false)).into_iter().collect(),
        "subscribe" | "ssubscribe" => (1..argv.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..argv.len()).map(|i| (i, true)).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::registry;

    fn plan_named(name: &str) -> Plan {
        plan(registry().index_of(name.as_bytes()).expect("a command"))
    }

    #[test]
    fn commands_are_planned_by_their_key_specs() {
        for name in ["get", "set", "evalsha", "eval", "mset", "del", "expire"] {
            assert!(
                matches!(plan_named(name), Plan::OneSpec { .. }),
                "{name}: {:?}",
                plan_named(name)
            );
        }
        for name in ["flushall", "ping", "time", "script|load"] {
            assert!(matches!(plan_named(name), Plan::NoKeys), "{name}");
        }
        // Several specs, or an incomplete one (MIGRATE's KEYS).
        for name in ["lmove", "rename", "sinterstore", "migrate"] {
            assert!(matches!(plan_named(name), Plan::Walk), "{name}");
        }
    }

    #[test]
    fn a_planned_call_names_the_keys_the_walk_names() {
        let calls: &[&[&[u8]]] = &[
            &[b"get", b"k"],
            &[b"set", b"k", b"v", b"GET"],
            &[b"evalsha", b"abc", b"2", b"a", b"b", b"1"],
            &[b"evalsha", b"abc", b"0"],
            &[b"evalsha", b"abc", b"x", b"a"],
            &[b"evalsha", b"abc", b"3", b"a"],
            &[b"mset", b"a", b"1", b"b", b"2"],
            &[b"del", b"a", b"b", b"c"],
        ];
        for argv in calls {
            let index = registry().index_of(argv[0]).expect("a command");
            let command = registry().command(index);
            let mut walked = Vec::new();
            keys_with_permissions(command, index, argv, &mut walked);
            let planned: Vec<(usize, u8)> = match CallKeys::new(command, index, argv) {
                CallKeys::Stride(stride) => stride.keys().collect(),
                CallKeys::Walk { .. } => panic!("{argv:?} is planned"),
            };
            assert_eq!(planned, walked, "{argv:?}");
        }
    }
}
