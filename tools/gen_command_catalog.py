#!/usr/bin/env python3
"""Generates server/src/catalog/commands.rs, tally's command catalog: every
command's metadata (arity, flags, legacy key positions, group) and its
documentation (COMMAND DOCS, COMMAND INFO's key specs and tips, ACL
categories), taken from Redis 7.0's command JSON files (src/commands/*.json)
so that replies, redis-cli's hints and cluster clients' key lookups are
Redis's own, plus tools/command_overlay.json for what tally says
differently (commands Redis 7.0 does not have).

Which commands tally has, and in which order, comes from the handler
bindings (server/src/cmd/handlers.rs): add the binding, run this tool,
commit its output.

Usage: tools/gen_command_catalog.py <redis source tree>/src/commands
  (e.g. `apt-get source redis`, then redis-7.0.15/src/commands)
"""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HANDLERS = "server/src/cmd/handlers.rs"
OVERLAY = "tools/command_overlay.json"
OUT = "server/src/catalog/commands.rs"

# Redis's command flags tally's catalog carries (catalog::flags), in the
# order rows name them.
FLAGS = [
    "WRITE", "READONLY", "DENYOOM", "ADMIN", "PUBSUB", "NOSCRIPT", "FAST",
    "NO_AUTH", "LOADING", "STALE", "NO_MULTI", "ALLOW_BUSY", "SKIP_SLOWLOG",
    "MAY_REPLICATE", "SKIP_MONITOR", "ASKING", "NO_MANDATORY_KEYS",
    "NO_ASYNC_LOADING", "BLOCKING",
]
# Redis's flags tally has no use for: Sentinel's, PROTECTED
# (enable-debug-command is not a directive here), TOUCHES_ARBITRARY_KEYS (not shown by Redis 7.0's COMMAND INFO).
IGNORED_FLAGS = {
    "SENTINEL", "ONLY_SENTINEL", "PROTECTED", "TOUCHES_ARBITRARY_KEYS",
}


def tally_commands():
    """Full names in the order of the handler bindings."""
    text = open(os.path.join(ROOT, HANDLERS)).read()
    return re.findall(r'^\s*\("([a-z_|.\-]+)",', text, re.M)


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




def legacy_keys(body):
    """first, last, step as Redis 7.0 derives them from the key specs
    (populateCommandLegacyRangeSpec); (0, 0, 0) for none."""
    specs = body.get("key_specs", [])
    if not specs:
        return (0, 0, 0)

    def plain(spec):
        return "index" in spec["begin_search"] and "range" in spec["find_keys"]

    if len(specs) == 1 and plain(specs[0]):
        pos = specs[0]["begin_search"]["index"]["pos"]
        rng = specs[0]["find_keys"]["range"]
        last = rng["lastkey"]
        return (pos, pos + last if last >= 0 else last, rng["step"])
    first, last, previous = None, 0, 0
    for spec in specs:
        if not plain(spec):
            continue
        pos = spec["begin_search"]["index"]["pos"]
        rng = spec["find_keys"]["range"]
        if rng["step"] != 1 or (previous and previous != pos - 1):
            continue
        first = pos if first is None else min(first, pos)
        absolute = rng["lastkey"] + pos if rng["lastkey"] >= 0 else rng["lastkey"]
        # Redis compares as unsigned: a negative (from the end) wins.
        if (absolute & 0xFFFFFFFF) > (last & 0xFFFFFFFF):
            last = absolute
        previous = last
    return (0, 0, 0) if first is None else (first, last, 1)


def flags(name, body):
    names = []
    for flag in body.get("command_flags", []):
        if flag in IGNORED_FLAGS:
            continue
        if flag not in FLAGS:
            sys.exit(f"{name}: Redis flag {flag} is unknown to the catalog; "
                     "add it to catalog::flags and FLAGS, or to IGNORED_FLAGS")
        names.append(flag)
    names.sort(key=FLAGS.index)
    return " | ".join(names) or "0"


def doc(body, indent):
    pad = " " * indent
    history = "".join(
        f"{pad}        ({rust_str(v)}, {rust_str(t)}),\n" for v, t in body.get("history", [])
    )
    history = f"&[\n{history}{pad}    ]" if history else "&[]"
    args = "".join(arg(a, indent + 8) for a in body.get("arguments", []))
    args = f"&[\n{args}{pad}    ]" if args else "&[]"
    doc_flags = [f.lower() for f in body.get("doc_flags", [])]
    tips = [t.lower() for t in body.get("command_tips", [])]
    acl = [c.lower() for c in body.get("acl_categories", [])]
    specs = "".join(key_spec(s) for s in body.get("key_specs", []))
    specs = f"&[\n{specs}{pad}    ]" if specs else "&[]"
    return (
        f"&CommandDoc {{\n"
        f"{pad}    summary: {rust_str(body.get('summary', ''))},\n"
        f"{pad}    since: {rust_str(body.get('since', ''))},\n"
        f"{pad}    group: {rust_str(body['group'].replace('_', '-'))},\n"
        f"{pad}    complexity: {opt(body.get('complexity'))},\n"
        f"{pad}    doc_flags: &[{', '.join(rust_str(f) for f in doc_flags)}],\n"
        f"{pad}    deprecated_since: {opt(body.get('deprecated_since'))},\n"
        f"{pad}    replaced_by: {opt(body.get('replaced_by'))},\n"
        f"{pad}    history: {history},\n"
        f"{pad}    arguments: {args},\n"
        f"{pad}    tips: &[{', '.join(rust_str(t) for t in tips)}],\n"
        f"{pad}    acl_categories: &[{', '.join(rust_str(c) for c in acl)}],\n"
        f"{pad}    key_specs: {specs},\n"
        f"{pad}}}"
    )


def row(name, body, subcommands):
    first, last, step = body.get("legacy_keys") or legacy_keys(body)
    subs = f"{subcommands}" if subcommands else "&[]"
    return (
        f"    Command::new(\n"
        f"        {rust_str(name)}, {body['arity']}, {flags(name, body)},\n"
        f"        KeySpec {{ first: {first}, last: {last}, step: {step} }},\n"
        f"        {rust_str(body['group'])}, {subs},\n"
        f"        {doc(body, 8)},\n"
        f"    ),\n"
    )


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    redis = load_redis(sys.argv[1])
    overlay = json.load(open(os.path.join(ROOT, OVERLAY)))
    redis.update(overlay["commands"])
    for name, fields in overlay["overrides"].items():
        redis[name] = {**redis[name], **{k: v for k, v in fields.items() if k != "why"}}
    names = tally_commands()
    unknown = [n for n in names if n not in redis]
    if unknown:
        sys.exit(f"not in Redis 7.0 nor in {OVERLAY}: {unknown}")
    top = [n for n in names if "|" not in n]
    subs = {}
    for n in names:
        if "|" in n:
            subs.setdefault(n.split("|")[0], []).append(n)
    arrays = ""
    rows = ""
    for name in top:
        array = None
        if name in subs:
            array = f"{name.upper().replace('-', '_')}_SUBCOMMANDS"
            body = "".join(row(s, redis[s], None) for s in subs[name])
            arrays += f"\n#[rustfmt::skip]\nstatic {array}: &[Command] = &[\n{body}];\n"
        rows += row(name, redis[name], array)
    text = (
        "//! Every command tally has: Redis 7.0's metadata and documentation for\n"
        "//! it. GENERATED by tools/gen_command_catalog.py from Redis's command\n"
        "//! JSON files and tools/command_overlay.json: do not edit by hand.\n\n"
        "use super::docs::{BeginSearch, CommandDoc, DocArg, FindKeys, KeySpecDoc};\n"
        "use super::flags::*;\n"
        "use super::{Command, KeySpec};\n\n"
        "/// Every top-level command, in the order of the handler bindings.\n"
        "#[rustfmt::skip]\n"
        f"pub static COMMANDS: &[Command] = &[\n{rows}];\n{arrays}"
    )
    os.makedirs(os.path.dirname(os.path.join(ROOT, OUT)), exist_ok=True)
    with open(os.path.join(ROOT, OUT), "w") as f:
        f.write(text)
    print(f"{OUT}: {len(top)} commands, {len(names) - len(top)} subcommands")


if __name__ == "__main__":
    main()
