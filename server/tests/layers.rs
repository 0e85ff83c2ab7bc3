//! The server crate's layers hold: every `crate::<module>` a module of
//! server/src names is in a layer below its own, or is one of the few
//! imports the table below allows by name with its reason.
//! docs/architecture.md draws the same table.
//!
//! Code under `#[cfg(test)] mod tests { ... }` or in a `tests/` directory
//! is not held to it (a test may build what it needs from anywhere), nor
//! are comments.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, lowest first. A module may name any module of a lower
/// layer. `(root)` is lib.rs and main.rs.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundations: no server state",
        &[
            "util",
            "number",
            "float",
            "glob",
            "allocator",
            "striped",
            "throttle",
            "hyperloglog",
            "geo",
            "event_classes",
            "syslog",
        ],
    ),
    ("the protocol", &["resp"]),
    ("the command catalog", &["catalog"]),
    (
        "the keyspace and the parts that know no server",
        &[
            "store",
            "acl",
            "clients",
            "latency",
            "slowlog",
            "pause",
            "slot_gate",
            "master_link",
            "failover",
        ],
    ),
    ("the configuration", &["config"]),
    (
        "pub/sub, clients blocked on keys and the cluster's node state",
        &["pubsub", "blocking", "cluster"],
    ),
    ("what feeds subscribers", &["tracking", "monitor"]),
    (
        "the server: its shared state and what acts on all of it",
        &[
            "state",
            "stats",
            "persistence",
            "expiry",
            "metrics",
            "keyspace_events",
        ],
    ),
    ("commands, and scripts that run them", &["cmd", "scripting"]),
    ("the network and the binary", &["net", "(root)"]),
    ("checks for the fuzz targets", &["fuzzing"]),
];

/// Imports within one layer: the server's shared state holds what acts
/// on it, a script's redis.call is a command, and a failover hands over
/// to a replica named as a master link names its master.
const SAME_LAYER: &[(&str, &str)] = &[
    ("state", "stats"),
    ("stats", "state"),
    ("state", "persistence"),
    ("state", "keyspace_events"),
    ("persistence", "state"),
    ("persistence", "stats"),
    ("expiry", "state"),
    ("metrics", "state"),
    ("cmd", "scripting"),
    ("scripting", "cmd"),
    ("failover", "master_link"),
];

/// Imports up a layer, each with the reason it stands. Fewer is better.
const UPWARD: &[(&str, &str, &str)] = &[
    (
        "state",
        "net",
        "Shared holds the TLS acceptors (rebuilt by CONFIG SET) and the bus links",
    ),
    ("state", "scripting", "Shared holds the script cache"),
    (
        "cmd",
        "net",
        "CLUSTER MEET/FORGET/RESET hand the bus the messages they produce",
    ),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

/// The module a file belongs to: its first path component under src/.
fn module_of(relative: &Path) -> String {
    let first = relative
        .components()
        .next()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = first.trim_end_matches(".rs").to_string();
    if name == "lib" || name == "main" {
        "(root)".to_string()
    } else {
        name
    }
}

/// The source without comments and without its trailing test module.
fn code_of(source: &str) -> String {
    let source = match source.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &source[..at],
        None => source,
    };
    source
        .lines()
        .map(|line| match line.find("//") {
            // A `//` inside a string literal is rare in this code base and
            // harmless: what follows it is not an import either.
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every module named as `crate::<module>` in `code`, including each
/// path of a `crate::{a, b::c}` group.
fn imports_of(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // A group: split its top-level items at commas.
            let mut depth = 0;
            let mut item = String::new();
            for ch in group.chars() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.insert(first_segment(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    item.push(ch);
                }
            }
            found.insert(first_segment(&item));
        } else {
            found.insert(first_segment(rest));
        }
    }
    found.remove("");
    found.remove("self");
    found
}

fn first_segment(path: &str) -> String {
    path.trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            // A family's unit tests (cmd/tests/) are tests too.
            if path.file_name().is_some_and(|n| n == "tests") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// (module, imported module) → the files that import it.
fn imports() -> BTreeMap<(String, String), Vec<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(&src).expect("under src");
        let module = module_of(relative);
        let code = code_of(&std::fs::read_to_string(&file).expect("read"));
        for target in imports_of(&code) {
            if target != module {
                edges
                    .entry((module.clone(), target))
                    .or_default()
                    .push(relative.display().to_string());
            }
        }
    }
    edges
}

#[test]
fn every_import_runs_down_a_layer_or_is_allowed_by_name() {
    let mut wrong = Vec::new();
    for ((from, to), files) in imports() {
        let (Some(from_layer), Some(to_layer)) = (layer_of(&from), layer_of(&to)) else {
            wrong.push(format!(
                "{from} -> {to}: a module missing from LAYERS ({files:?})"
            ));
            continue;
        };
        let allowed = to_layer < from_layer
            || (to_layer == from_layer && SAME_LAYER.contains(&(from.as_str(), to.as_str())))
            || UPWARD.iter().any(|(f, t, _)| *f == from && *t == to);
        if !allowed {
            wrong.push(format!("{from} -> {to} ({files:?})"));
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers (server/tests/layers.rs, docs/architecture.md):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_allowed_exception_is_still_needed() {
    let edges = imports();
    let used = |from: &str, to: &str| edges.contains_key(&(from.to_string(), to.to_string()));
    for (from, to) in SAME_LAYER {
        assert!(
            used(from, to),
            "{from} -> {to} is allowed but unused: remove it"
        );
    }
    for (from, to, _) in UPWARD {
        assert!(
            used(from, to),
            "{from} -> {to} is allowed but unused: remove it"
        );
    }
}

#[test]
fn the_scanner_sees_plain_paths_groups_and_skips_comments_and_tests() {
    let code = code_of(
        "use crate::store::Store;\nuse crate::{acl::User, resp::{Reply, Protocol}};\n\
         // crate::cmd in a comment\nfn f() { crate::glob::glob_match(a, b, c); }\n\
         #[cfg(test)]\nmod tests {\n    use crate::net::x;\n}\n",
    );
    let found: Vec<String> = imports_of(&code).into_iter().collect();
    assert_eq!(found, ["acl", "glob", "resp", "store"]);
}
