#!/usr/bin/env python3
"""Generates server/src/cmd/docs_data.rs: COMMAND DOCS (and COMMAND INFO's
key specs and tips) for every command tally has, taken from Redis 7.0's
command JSON files (src/commands/*.json), so that redis-cli shows its
argument hints and HELP text, and cluster clients find key specs, as on
Redis.

Usage: tools/gen_command_docs.py <redis source tree>/src/commands
  e.g. git -C <redis repo> worktree/export of tag 7.0.15, or a directory of
  the JSON files. The command names come from tally's own table
  (server/src/cmd/table.rs and subcommands.rs); commands Redis does not
  have keep the table's own summary.

Run it again after adding a command to the table; commit its output.
"""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLES = ["server/src/cmd/table.rs", "server/src/cmd/subcommands.rs"]
OUT = "server/src/cmd/docs_data.rs"


def tally_commands():
    names = set()
    for path in TABLES:
        text = open(os.path.join(ROOT, path)).read()
        names.update(re.findall(r'(?:row|container)\(\s*"([a-z_|\-]+)"', text))
    return names


def load_redis(directory):
    """(full lower-case name) -> the command's JSON body."""
    commands = {}
    for filename in sorted(os.listdir(directory)):
        if not filename.endswith(".json"):
            continue
        with open(os.path.join(directory, filename)) as f:
            for name, body in json.load(f).items():
                container = body.get("container")
                full = f"{container}|{name}" if container else name
                commands[full.lower()] = body
    return commands


def rust_str(value):
    return json.dumps(value, ensure_ascii=False)


def opt(value):
    # As Redis's generate-command-code.py: an empty string is no value.
    return f"Some({rust_str(value)})" if value else "None"


def token(node):
    # Redis's generator pastes the token between C quotes, so MIGRATE's
    # two-quote token becomes four quotes in commands.c: adjacent empty
    # literals, an empty (present but blank) token in COMMAND DOCS.
    value = (node.get("token") or "").upper()
    return f"Some({rust_str(value.replace(chr(34), ''))})" if value else "None"


def arg(node, indent):
    pad = " " * indent
    flags = [f for f in ("optional", "multiple", "multiple_token") if node.get(f)]
    children = node.get("arguments", [])
    nested = "".join(arg(child, indent + 8) for child in children)
    nested = f"&[\n{nested}{pad}    ]" if children else "&[]"
    return (
        f"{pad}DocArg {{\n"
        f"{pad}    name: {rust_str(node['name'].lower())},\n"
        f"{pad}    kind: {rust_str(node['type'])},\n"
        f"{pad}    key_spec_index: {node.get('key_spec_index', -1)},\n"
        f"{pad}    token: {token(node)},\n"
        f"{pad}    summary: {opt(node.get('summary'))},\n"
        f"{pad}    since: {opt(node.get('since'))},\n"
        f"{pad}    deprecated_since: {opt(node.get('deprecated_since'))},\n"
        f"{pad}    flags: &[{', '.join(rust_str(f) for f in flags)}],\n"
        f"{pad}    arguments: {nested},\n"
        f"{pad}}},\n"
    )


KEY_FLAGS = [
    ("RO", "RO"), ("RW", "RW"), ("OW", "OW"), ("RM", "RM"),
    ("ACCESS", "access"), ("UPDATE", "update"), ("INSERT", "insert"),
    ("DELETE", "delete"), ("NOT_KEY", "not_key"), ("INCOMPLETE", "incomplete"),
    ("VARIABLE_FLAGS", "variable_flags"),
]


def key_spec(spec):
    flags = [shown for name, shown in KEY_FLAGS if name in spec.get("flags", [])]
    bs = spec["begin_search"]
    if "index" in bs:
        begin = f"BeginSearch::Index({bs['index']['pos']})"
    elif "keyword" in bs:
        kw = bs["keyword"]
        begin = f"BeginSearch::Keyword({rust_str(kw['keyword'])}, {kw['startfrom']})"
    else:
        begin = "BeginSearch::Unknown"
    fk = spec["find_keys"]
    if "range" in fk:
        r = fk["range"]
        find = f"FindKeys::Range {{ lastkey: {r['lastkey']}, keystep: {r['step']}, limit: {r['limit']} }}"
    elif "keynum" in fk:
        k = fk["keynum"]
        find = f"FindKeys::Keynum {{ keynumidx: {k['keynumidx']}, firstkey: {k['firstkey']}, keystep: {k['step']} }}"
    else:
        find = "FindKeys::Unknown"
    return (
        f"                KeySpecDoc {{ notes: {opt(spec.get('notes'))}, "
        f"flags: &[{', '.join(rust_str(f) for f in flags)}], "
        f"begin_search: {begin}, find_keys: {find} }},\n"
    )


def doc(name, body):
    history = "".join(
        f"        ({rust_str(v)}, {rust_str(t)}),\n" for v, t in body.get("history", [])
    )
    history = f"&[\n{history}    ]" if history else "&[]"
    args = "".join(arg(a, 8) for a in body.get("arguments", []))
    args = f"&[\n{args}    ]" if args else "&[]"
    doc_flags = [f.lower() for f in body.get("doc_flags", [])]
    tips = [t.lower() for t in body.get("command_tips", [])]
    acl = [c.lower() for c in body.get("acl_categories", [])]
    specs = "".join(key_spec(s) for s in body.get("key_specs", []))
    specs = f"&[\n{specs}            ]" if specs else "&[]"
    return (
        f"    (\n        {rust_str(name)},\n        CommandDoc {{\n"
        f"            summary: {rust_str(body.get('summary', ''))},\n"
        f"            since: {rust_str(body.get('since', ''))},\n"
        f"            group: {rust_str(body['group'].replace('_', '-'))},\n"
        f"            complexity: {opt(body.get('complexity'))},\n"
        f"            doc_flags: &[{', '.join(rust_str(f) for f in doc_flags)}],\n"
        f"            deprecated_since: {opt(body.get('deprecated_since'))},\n"
        f"            replaced_by: {opt(body.get('replaced_by'))},\n"
        f"            history: {history},\n"
        f"            arguments: {args},\n"
        f"            tips: &[{', '.join(rust_str(t) for t in tips)}],\n"
        f"            acl_categories: &[{', '.join(rust_str(c) for c in acl)}],\n"
        f"            key_specs: {specs},\n"
        f"        }},\n    ),\n"
    ).replace("\n        &[", "\n        &[")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    redis = load_redis(sys.argv[1])
    names = sorted(n for n in tally_commands() if n in redis)
    missing = sorted(n for n in tally_commands() if n not in redis)
    entries = "".join(doc(n, redis[n]) for n in names)
    text = (
        "//! COMMAND DOCS data for every command tally has, from Redis 7.0's\n"
        "//! command JSON files. GENERATED by tools/gen_command_docs.py: do not\n"
        "//! edit by hand; run the tool again after adding a command.\n"
        f"//! Not in Redis 7.0 (documented from the table instead): {', '.join(missing) or 'none'}.\n\n"
        "use super::docs::{BeginSearch, CommandDoc, DocArg, FindKeys, KeySpecDoc};\n\n"
        "/// (full name, docs), sorted by name.\n"
        "#[rustfmt::skip]\n"
        f"pub static DOCS: &[(&str, CommandDoc)] = &[\n{entries}];\n"
    )
    with open(os.path.join(ROOT, OUT), "w") as f:
        f.write(text)
    print(f"{OUT}: {len(names)} commands; not in Redis 7.0: {missing}")


if __name__ == "__main__":
    main()
