//! The keys and channels a command names, with the permission each key
//! needs, found from Redis 7.0's key specs as getKeysUsingKeySpecs finds
//! them: a key the command reads (`access`) needs read permission, one it
//! inserts, deletes or updates needs write permission.

use crate::cmd::docs::{self, BeginSearch, FindKeys};
use crate::cmd::table::Command;

use super::user::{READ, WRITE};

/// Each command's Redis docs (key specs), by registry index: looked up
/// once, not per check.
fn doc_of(index: usize) -> Option<&'static docs::CommandDoc> {
    static DOCS: std::sync::OnceLock<Vec<Option<&'static docs::CommandDoc>>> =
        std::sync::OnceLock::new();
    DOCS.get_or_init(|| {
        crate::cmd::table::registry()
            .all()
            .map(|c| docs::lookup(c.name))
            .collect()
    })
    .get(index)
    .copied()
    .flatten()
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
    let Some(doc) = doc_of(index) else {
        // No Redis key specs (a tally-only command): every key both ways.
        keys.extend(
            command
                .key_positions(argv)
                .into_iter()
                .map(|at| (at, READ | WRITE)),
        );
        return true;
    };
    let argc = argv.len() as i64;
    for (spec, resolved) in doc.key_specs.iter().zip(resolved_flags(index)) {
        if resolved.not_key {
            continue;
        }
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
                    continue;
                }
                found
            }
            BeginSearch::Unknown => return false,
        };
        let (first, last, step) = match spec.find_keys {
            FindKeys::Range {
                lastkey,
                keystep,
                limit,
            } => {
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / limit + lastkey)
                };
                (first, last, keystep)
            }
            FindKeys::Keynum {
                keynumidx,
                firstkey,
                keystep,
            } => {
                if keynumidx >= argc || first + keynumidx >= argc {
                    return false;
                }
                let Some(numkeys) = parse_numkeys(argv[(first + keynumidx) as usize]) else {
                    return false;
                };
                if numkeys < 0 {
                    return false;
                }
                let first = first + firstkey;
                (first, first + numkeys - 1, keystep)
            }
            FindKeys::Unknown => return false,
        };
        if numkeys_empty(first, last) {
            continue;
        }
        if last >= argc || last < first || first >= argc {
            return false;
        }
        let needed = if command.name == "set" {
            set_permissions(argv)
        } else {
            resolved.needed
        };
        let mut i = first;
        while i <= last {
            keys.push((i as usize, needed));
            i += step.max(1);
        }
    }
    true
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
#[derive(Clone, Copy)]
struct ResolvedFlags {
    /// `not_key`: the argument is not a key (skipped).
    not_key: bool,
    /// The permissions its keys need.
    needed: u8,
}

/// The resolved flags of each key spec of the command at registry
/// `index`, computed once: comparing the docs' flag strings on every
/// check was a fifth of the check's cost.
fn resolved_flags(index: usize) -> &'static [ResolvedFlags] {
    static RESOLVED: std::sync::OnceLock<Vec<Vec<ResolvedFlags>>> = std::sync::OnceLock::new();
    RESOLVED
        .get_or_init(|| {
            (0..crate::cmd::table::registry().len())
                .map(|i| {
                    doc_of(i)
                        .map(|doc| {
                            doc.key_specs
                                .iter()
                                .map(|spec| ResolvedFlags {
                                    not_key: spec.flags.contains(&"not_key"),
                                    needed: permissions(spec.flags),
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

/// The count a keynum argument gives, as `str::parse` reads it; a single
/// digit (the usual case) without the text machinery.
fn parse_numkeys(text: &[u8]) -> Option<i64> {
    match text {
        [digit @ b'0'..=b'9'] => Some(i64::from(digit - b'0')),
        _ => std::str::from_utf8(text).ok()?.parse::<i64>().ok(),
    }
}

/// (argument index, is a pattern) of every channel the call publishes or
/// subscribes to (getChannelsFromCommand; unsubscribing is not checked).
pub fn channels(command: &Command, argv: &[&[u8]]) -> Vec<(usize, bool)> {
    if command.flags & crate::cmd::table::flags::PUBSUB == 0 {
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
