//! Which arguments of a call are keys, each with what the command does to
//! it: COMMAND GETKEYSANDFLAGS, computed as Redis 7.0's
//! getKeysFromCommandWithSpecs does.
//!
//! The key specs decide when they can: every spec that is not a `not_key`
//! one is searched (from a fixed index or after a keyword), its keys found
//! (a range, or a count argument and that many keys), and each key gets
//! the spec's flags. Where a spec cannot say (an unknown search, SORT's
//! STORE anywhere in the call, an `incomplete` one such as MIGRATE's KEYS)
//! or its flags depend on the call (`variable_flags`: SET with or without
//! GET, BITFIELD with or without a write), the command's own key finder
//! answers, with the flags Redis's getkeys procedures give.

use super::docs::{BeginSearch, FindKeys, KeySpecDoc};
use super::Command;

/// A key's position in the call and its flags, in Redis's order.
pub type KeyAndFlags = (usize, &'static [&'static str]);

const RO_ACCESS: &[&str] = &["RO", "access"];
const OW_UPDATE: &[&str] = &["OW", "update"];
const RW_ACCESS_UPDATE: &[&str] = &["RW", "access", "update"];
const RW_ACCESS_DELETE: &[&str] = &["RW", "access", "delete"];

/// The keys of the call `argv` (argv[0] is the command's name) with their
/// flags; empty when the call has none.
pub fn keys_and_flags(command: &Command, argv: &[&[u8]]) -> Vec<KeyAndFlags> {
    let specs = command.doc.key_specs;
    let has_keys = specs.iter().any(|s| !s.flags.contains(&"not_key"));
    let variable = specs.iter().any(|s| s.flags.contains(&"variable_flags"));
    if has_keys && !variable {
        if let Some(keys) = from_specs(specs, argv) {
            return keys;
        }
    }
    from_key_finder(command, argv)
}

/// getKeysUsingKeySpecs: `None` when a spec cannot find its keys in this
/// call, or is incomplete.
fn from_specs(specs: &[KeySpecDoc], argv: &[&[u8]]) -> Option<Vec<KeyAndFlags>> {
    let argc = argv.len() as i64;
    let mut keys = Vec::new();
    for spec in specs.iter().filter(|s| !s.flags.contains(&"not_key")) {
        let first = match spec.begin_search {
            BeginSearch::Index(index) => index,
            BeginSearch::Keyword(keyword, from) => match keyword_end(argv, keyword, from) {
                Some(after) => after,
                None => continue,
            },
            BeginSearch::Unknown => return None,
        };
        let (first, last, step) = key_range(first, &spec.find_keys, argv)?;
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let mut at = first;
        while at <= last {
            keys.push((at as usize, spec.flags));
            at += step.max(1);
        }
        if spec.flags.contains(&"incomplete") {
            return None;
        }
    }
    Some(keys)
}

/// The keys a spec's `find_keys` names from argument `first` on, as
/// getKeysUsingKeySpecs computes them: `(first, last, step)`, which the
/// caller checks against the call (`last` is `first - 1` for a count of
/// 0); `None` when the count argument is missing, not a number or
/// negative, or the search is unknown. The ACL's key checks share it.
#[inline]
pub fn key_range(first: i64, find: &FindKeys, argv: &[&[u8]]) -> Option<(i64, i64, i64)> {
    let argc = argv.len() as i64;
    match *find {
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
            Some((first, last, keystep))
        }
        FindKeys::Keynum {
            keynumidx,
            firstkey,
            keystep,
        } => {
            let at = usize::try_from(first + keynumidx).ok()?;
            let count = parse_count(argv.get(at)?).filter(|n| *n >= 0)?;
            let first = first + firstkey;
            Some((first, first + count - 1, keystep))
        }
        FindKeys::Unknown => None,
    }
}

/// A key count argument as `str::parse` reads it; a single digit (the
/// usual case) without the text machinery.
#[inline(always)]
fn parse_count(text: &[u8]) -> Option<i64> {
    match text {
        [digit @ b'0'..=b'9'] => Some(i64::from(digit - b'0')),
        _ => std::str::from_utf8(text).ok()?.parse::<i64>().ok(),
    }
}

/// The argument after `keyword`, searched from `from` (backwards from the
/// end when negative) as Redis's keyword search does.
fn keyword_end(argv: &[&[u8]], keyword: &str, from: i64) -> Option<i64> {
    let argc = argv.len() as i64;
    let (start, end) = if from > 0 {
        (from, argc - 1)
    } else {
        (argc + from, 1)
    };
    let mut i = start;
    while i != end {
        if i >= argc || i < 1 {
            return None;
        }
        if argv[i as usize].eq_ignore_ascii_case(keyword.as_bytes()) {
            return Some(i + 1);
        }
        i += if start <= end { 1 } else { -1 };
    }
    None
}

/// The command's own key finder (`Command::key_positions`), with the
/// flags Redis's getkeys procedure for it gives (none for most).
fn from_key_finder(command: &Command, argv: &[&[u8]]) -> Vec<KeyAndFlags> {
    let positions = command.key_positions(argv);
    let is_get = |arg: &&[u8]| arg.eq_ignore_ascii_case(b"get");
    positions
        .iter()
        .enumerate()
        .map(|(nth, &at)| {
            let flags: &'static [&'static str] = match command.name {
                "sort" if nth == 0 => RO_ACCESS,
                "sort" => OW_UPDATE,
                "sort_ro" => RO_ACCESS,
                "migrate" => RW_ACCESS_DELETE,
                "set" if argv.iter().skip(3).any(is_get) => RW_ACCESS_UPDATE,
                "set" => OW_UPDATE,
                "bitfield" if bitfield_reads_only(argv) => RO_ACCESS,
                "bitfield" => RW_ACCESS_UPDATE,
                _ => &[],
            };
            (at, flags)
        })
        .collect()
}

/// Redis's bitfieldGetKeys: only GET and OVERFLOW subcommands, well
/// formed; anything else (a write, a syntax error) counts as a write.
fn bitfield_reads_only(argv: &[&[u8]]) -> bool {
    let mut i = 2;
    while i < argv.len() {
        let remaining = argv.len() - i - 1;
        let arg = argv[i];
        if arg.eq_ignore_ascii_case(b"get") && remaining >= 2 {
            i += 3;
        } else if arg.eq_ignore_ascii_case(b"overflow") && remaining >= 1 {
            i += 2;
        } else {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::registry;

    fn flags_of(line: &str) -> Vec<(String, Vec<&'static str>)> {
        // `""` stands for an empty argument.
        let argv: Vec<&[u8]> = line
            .split(' ')
            .map(|w| if w == "\"\"" { &b""[..] } else { w.as_bytes() })
            .collect();
        let command = registry().lookup(argv[0]).expect("a command");
        keys_and_flags(command, &argv)
            .into_iter()
            .map(|(at, flags)| {
                let key = String::from_utf8_lossy(argv[at]).into_owned();
                (key, flags.to_vec())
            })
            .collect()
    }

    fn pairs(expected: &[(&str, &[&'static str])]) -> Vec<(String, Vec<&'static str>)> {
        expected
            .iter()
            .map(|(key, flags)| (key.to_string(), flags.to_vec()))
            .collect()
    }

    #[test]
    fn flags_come_from_the_specs_or_the_commands_own_rules_as_in_redis() {
        // Redis's own test (introspection-2, COMMAND GETKEYSANDFLAGS).
        assert_eq!(flags_of("set k1 v1"), pairs(&[("k1", OW_UPDATE)]));
        assert_eq!(
            flags_of("mset k1 v1 k2 v2"),
            pairs(&[("k1", OW_UPDATE), ("k2", OW_UPDATE)])
        );
        assert_eq!(
            flags_of("LMOVE k1 k2 left right"),
            pairs(&[
                ("k1", &["RW", "access", "delete"]),
                ("k2", &["RW", "insert"])
            ])
        );
        assert_eq!(
            flags_of("sort k1 store k2"),
            pairs(&[("k1", RO_ACCESS), ("k2", OW_UPDATE)])
        );
        // Flags that depend on the call.
        assert_eq!(
            flags_of("set k1 v1 get"),
            pairs(&[("k1", RW_ACCESS_UPDATE)])
        );
        assert_eq!(flags_of("bitfield k get u8 0"), pairs(&[("k", RO_ACCESS)]));
        assert_eq!(
            flags_of("bitfield k get u8 0 set u8 0 1"),
            pairs(&[("k", RW_ACCESS_UPDATE)])
        );
        // A count of keys, and a keyword search.
        assert_eq!(
            flags_of("zunionstore d 2 a b"),
            pairs(&[
                ("d", &["OW", "update"]),
                ("a", &["RO", "access"]),
                ("b", &["RO", "access"])
            ])
        );
        assert_eq!(
            flags_of("migrate h 1 \"\" 0 5 KEYS a b"),
            pairs(&[("a", RW_ACCESS_DELETE), ("b", RW_ACCESS_DELETE)])
        );
        assert!(flags_of("eval x 0").is_empty());
    }
}
