//! COMMAND DOCS: each command's documentation as Redis 7.0 replies it
//! (summary, since, group, complexity, doc flags, history, the argument
//! tree), from Redis's own command files (in the generated catalog). This
//! is what redis-cli reads to show argument hints while typing and HELP.

use super::{registry, Command};
use crate::resp::Reply;

/// One command's documentation.
#[derive(Debug)]
pub struct CommandDoc {
    /// One line, in Redis 7.0's words.
    pub summary: &'static str,
    /// The version that introduced it.
    pub since: &'static str,
    /// Its group (`string`, `sorted-set`, ...).
    pub group: &'static str,
    /// Its time complexity.
    pub complexity: Option<&'static str>,
    /// `deprecated`, `syscmd`.
    pub doc_flags: &'static [&'static str],
    /// When it was deprecated.
    pub deprecated_since: Option<&'static str>,
    /// What replaces it.
    pub replaced_by: Option<&'static str>,
    /// (version, change) pairs.
    pub history: &'static [(&'static str, &'static str)],
    /// Its arguments.
    pub arguments: &'static [DocArg],
    /// COMMAND INFO's tips (`nondeterministic_output`, ...).
    pub tips: &'static [&'static str],
    /// COMMAND INFO's key specs.
    pub key_specs: &'static [KeySpecDoc],
    /// The ACL categories Redis names for it (`keyspace`, `dangerous`, ...);
    /// those its flags imply (`write`, `fast`, ...) are added from the table.
    pub acl_categories: &'static [&'static str],
}

/// One key spec: where a command's keys are, and what it does to them.
#[derive(Debug)]
pub struct KeySpecDoc {
    /// Redis's note on it.
    pub notes: Option<&'static str>,
    /// `RW`, `access`, ... in Redis's order.
    pub flags: &'static [&'static str],
    /// Where the search for keys starts.
    pub begin_search: BeginSearch,
    /// How keys are found from there.
    pub find_keys: FindKeys,
}

/// Where a key spec's search starts.
#[derive(Debug)]
pub enum BeginSearch {
    /// Not known statically.
    Unknown,
    /// At this argument.
    Index(i64),
    /// After this keyword, searching from this argument.
    Keyword(&'static str, i64),
}

/// How a key spec finds keys.
#[derive(Debug)]
pub enum FindKeys {
    /// Not known statically.
    Unknown,
    /// A range: the last key (relative), the step, the limit.
    Range {
        /// Last key's index relative to the first (-1: the last argument).
        lastkey: i64,
        /// Distance between keys.
        keystep: i64,
        /// How much of the remaining arguments may be keys.
        limit: i64,
    },
    /// A count argument then the keys.
    Keynum {
        /// Where the count is, relative to the first argument.
        keynumidx: i64,
        /// Where the first key is, relative.
        firstkey: i64,
        /// Distance between keys.
        keystep: i64,
    },
}

/// COMMAND INFO's tips for a command.
pub fn tips(command: &Command) -> Reply {
    Reply::Set(command.doc.tips.iter().map(|t| bulk(t)).collect())
}

/// COMMAND INFO's key specs for a command, in Redis's shape.
pub fn key_specs(command: &Command) -> Reply {
    let specs = command.doc.key_specs;
    let map = |pairs: Vec<(&str, Reply)>| {
        Reply::Map(pairs.into_iter().map(|(k, v)| (bulk(k), v)).collect())
    };
    Reply::Set(
        specs
            .iter()
            .map(|spec| {
                let mut fields = Vec::new();
                if let Some(notes) = spec.notes {
                    fields.push(("notes", bulk(notes)));
                }
                fields.push((
                    "flags",
                    Reply::Set(spec.flags.iter().map(|f| Reply::status(f)).collect()),
                ));
                let begin = match spec.begin_search {
                    BeginSearch::Unknown => {
                        map(vec![("type", bulk("unknown")), ("spec", map(vec![]))])
                    }
                    BeginSearch::Index(pos) => map(vec![
                        ("type", bulk("index")),
                        ("spec", map(vec![("index", Reply::Int(pos))])),
                    ]),
                    BeginSearch::Keyword(keyword, startfrom) => map(vec![
                        ("type", bulk("keyword")),
                        (
                            "spec",
                            map(vec![
                                ("keyword", bulk(keyword)),
                                ("startfrom", Reply::Int(startfrom)),
                            ]),
                        ),
                    ]),
                };
                fields.push(("begin_search", begin));
                let find = match spec.find_keys {
                    FindKeys::Unknown => {
                        map(vec![("type", bulk("unknown")), ("spec", map(vec![]))])
                    }
                    FindKeys::Range {
                        lastkey,
                        keystep,
                        limit,
                    } => map(vec![
                        ("type", bulk("range")),
                        (
                            "spec",
                            map(vec![
                                ("lastkey", Reply::Int(lastkey)),
                                ("keystep", Reply::Int(keystep)),
                                ("limit", Reply::Int(limit)),
                            ]),
                        ),
                    ]),
                    FindKeys::Keynum {
                        keynumidx,
                        firstkey,
                        keystep,
                    } => map(vec![
                        ("type", bulk("keynum")),
                        (
                            "spec",
                            map(vec![
                                ("keynumidx", Reply::Int(keynumidx)),
                                ("firstkey", Reply::Int(firstkey)),
                                ("keystep", Reply::Int(keystep)),
                            ]),
                        ),
                    ]),
                };
                fields.push(("find_keys", find));
                map(fields)
            })
            .collect(),
    )
}

/// One argument (or block of arguments) of a command.
#[derive(Debug)]
pub struct DocArg {
    /// Its name.
    pub name: &'static str,
    /// `key`, `string`, `integer`, `double`, `pattern`, `unix-time`,
    /// `pure-token`, `oneof` or `block`.
    pub kind: &'static str,
    /// The key spec it is a key of (-1: none).
    pub key_spec_index: i32,
    /// The keyword that introduces it.
    pub token: Option<&'static str>,
    /// A description.
    pub summary: Option<&'static str>,
    /// The version that added it.
    pub since: Option<&'static str>,
    /// When it was deprecated.
    pub deprecated_since: Option<&'static str>,
    /// `optional`, `multiple`, `multiple_token`.
    pub flags: &'static [&'static str],
    /// The members of a `oneof` or `block`.
    pub arguments: &'static [DocArg],
}

fn bulk(text: &str) -> Reply {
    Reply::Bulk(text.as_bytes().to_vec())
}

/// A command's COMMAND DOCS entry, its subcommands' included.
pub fn reply(command: &'static Command) -> Reply {
    let mut map = Vec::new();
    let doc = command.doc;
    // Empty is absent, as in Redis's generated table.
    if !doc.summary.is_empty() {
        map.push((bulk("summary"), bulk(doc.summary)));
    }
    if !doc.since.is_empty() {
        map.push((bulk("since"), bulk(doc.since)));
    }
    map.push((bulk("group"), bulk(doc.group)));
    if let Some(complexity) = doc.complexity {
        map.push((bulk("complexity"), bulk(complexity)));
    }
    if !doc.doc_flags.is_empty() {
        map.push((
            bulk("doc_flags"),
            Reply::Set(doc.doc_flags.iter().map(|f| Reply::status(f)).collect()),
        ));
    }
    if let Some(version) = doc.deprecated_since {
        map.push((bulk("deprecated_since"), bulk(version)));
    }
    if let Some(replacement) = doc.replaced_by {
        map.push((bulk("replaced_by"), bulk(replacement)));
    }
    if !doc.history.is_empty() {
        map.push((
            bulk("history"),
            Reply::Set(
                doc.history
                    .iter()
                    .map(|(version, change)| Reply::Array(vec![bulk(version), bulk(change)]))
                    .collect(),
            ),
        ));
    }
    if !doc.arguments.is_empty() {
        map.push((bulk("arguments"), arguments(doc.arguments)));
    }
    if !command.subcommands.is_empty() {
        map.push((
            bulk("subcommands"),
            Reply::Map(
                command
                    .subcommands
                    .iter()
                    .map(|sub| (bulk(sub.name), reply(sub)))
                    .collect(),
            ),
        ));
    }
    Reply::Map(map)
}

fn arguments(args: &[DocArg]) -> Reply {
    Reply::Array(
        args.iter()
            .map(|arg| {
                let mut map = vec![
                    (bulk("name"), bulk(arg.name)),
                    (bulk("type"), bulk(arg.kind)),
                ];
                if arg.key_spec_index >= 0 {
                    map.push((
                        bulk("key_spec_index"),
                        Reply::Int(arg.key_spec_index as i64),
                    ));
                }
                if let Some(token) = arg.token {
                    map.push((bulk("token"), bulk(token)));
                }
                if let Some(summary) = arg.summary {
                    map.push((bulk("summary"), bulk(summary)));
                }
                if let Some(since) = arg.since {
                    map.push((bulk("since"), bulk(since)));
                }
                if let Some(version) = arg.deprecated_since {
                    map.push((bulk("deprecated_since"), bulk(version)));
                }
                if !arg.flags.is_empty() {
                    map.push((
                        bulk("flags"),
                        Reply::Set(arg.flags.iter().map(|f| Reply::status(f)).collect()),
                    ));
                }
                if !arg.arguments.is_empty() {
                    map.push((bulk("arguments"), arguments(arg.arguments)));
                }
                Reply::Map(map)
            })
            .collect(),
    )
}

/// Every command's docs entry: the top-level ones, each with its
/// subcommands, as COMMAND DOCS without names lists them.
pub fn all() -> Vec<(Reply, Reply)> {
    registry()
        .top_level()
        .map(|command| (bulk(command.name), reply(command)))
        .collect()
}
