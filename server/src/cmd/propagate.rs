//! What a write command puts in the change feed (which the append-only
//! file, and a replica's stream, are written from): the command itself, or
//! the command Redis 7.0 propagates in its place, so that a replay is
//! exact whenever it runs. Relative times become absolute (`SET ... PXAT`,
//! `PEXPIREAT`, `RESTORE ... ABSTTL`), a deadline already past becomes
//! `DEL`, a random or floating result becomes the value it produced
//! (`SPOP` → `SREM`, `INCRBYFLOAT` → `SET ... KEEPTTL`), and a command
//! that changed nothing is left out where its rewrite would not be a
//! no-op. Everything else is deterministic and goes as it came.

use super::Ctx;
use crate::catalog::Command;
use crate::resp::Reply;
use crate::store::feed::Argv;

/// Appends what the commands just run propagated (the client's pending
/// list) to the change feed as one change. Called with the shard locks of
/// those commands still held; the position is remembered so the replies
/// wait for the file.
pub fn append_pending(ctx: &mut Ctx<'_>) {
    if ctx.client.propagated.is_empty() {
        return;
    }
    let feed = ctx.shared.store.feed();
    if feed.active() {
        ctx.client.aof_offset = feed.append(&ctx.client.propagated);
    }
    ctx.client.propagated.clear();
}

/// Keeps `change` as what the command running now propagates, in place of
/// itself (for commands whose effect only their handler knows: CL.THROTTLE's
/// stored time, INCREX's value and deadline). The dispatch that holds the
/// command's shards appends it while they are still held, as it does the
/// changes `propagated` finds.
pub fn effect(ctx: &mut Ctx<'_>, change: &[&[u8]]) {
    if ctx.shared.store.feed().active() {
        let db = ctx.client.db;
        ctx.client.propagated.push(db, change);
    }
}

/// [`effect`] for a change built as owned arguments.
pub fn effect_owned(ctx: &mut Ctx<'_>, change: Vec<Vec<u8>>) {
    if ctx.shared.store.feed().active() {
        let db = ctx.client.db;
        ctx.client.propagated.push(db, &change);
    }
}

/// A script a client loaded (SCRIPT LOAD, or EVAL of a body new to the
/// cache) goes to the change feed as `SCRIPT LOAD <source>`, so that a
/// replay of the append-only file has it again (`lua-persist-scripts`;
/// Redis 7 logs nothing, and replays such a line as the command it is).
/// The known limiter scripts are always loaded and are not logged.
pub fn script_loaded(ctx: &mut Ctx<'_>, script: &crate::scripting::Script) {
    if script.native.is_none() {
        persist_script_change(
            ctx,
            vec![b"SCRIPT".to_vec(), b"LOAD".to_vec(), script.source.clone()],
        );
    }
}

/// SCRIPT FLUSH goes to the change feed too, when scripts are kept.
pub fn scripts_flushed(ctx: &mut Ctx<'_>) {
    persist_script_change(ctx, vec![b"SCRIPT".to_vec(), b"FLUSH".to_vec()]);
}

fn persist_script_change(ctx: &mut Ctx<'_>, argv: crate::store::feed::Argv) {
    if !ctx.shared.store.feed().active() || !ctx.shared.config.read().lua_persist_scripts {
        return;
    }
    let db = ctx.client.db;
    ctx.client.propagated.push(db, &argv);
    if !inside_run(ctx) {
        append_pending(ctx);
    }
}

/// True when a command's changes go to the feed from an enclosing run
/// (EXEC, a script) rather than by itself.
pub fn inside_run(ctx: &Ctx<'_>) -> bool {
    ctx.held.is_some() || ctx.client.in_script
}

/// What a write that succeeded puts in the change feed.
pub enum Propagation {
    /// The command itself, as it came (most commands).
    AsItCame,
    /// These commands instead (none: it changed nothing worth logging).
    Instead(Vec<Argv>),
}

/// What stands for `argv`, whose reply was `reply` (not an error), run at
/// `now_ms`.
pub fn propagated(command: &Command, argv: &[&[u8]], reply: &Reply, now_ms: u64) -> Propagation {
    match rewritten(command, argv, reply, now_ms) {
        Some(commands) => Propagation::Instead(commands),
        None => Propagation::AsItCame,
    }
}

/// The commands that stand for `argv` when they are not `argv` itself
/// (`None`: it goes as it came).
fn rewritten(command: &Command, argv: &[&[u8]], reply: &Reply, now_ms: u64) -> Option<Vec<Argv>> {
    let key = argv.get(1).copied().unwrap_or_default();
    let del = || vec![vec![b"DEL".to_vec(), key.to_vec()]];
    let number = |n: i64| n.to_string().into_bytes();
    Some(match command.name {
        // A plain SET that set goes as it came (the common case, spared
        // the rebuilding of its arguments).
        "set" if argv.len() == 3 && matches!(reply, Reply::Ok) => return None,
        "set" => set(argv, reply, now_ms),
        "setex" | "psetex" => {
            let amount = int(argv[2]);
            let unit = if command.name == "setex" { 1000 } else { 1 };
            let at = (now_ms as i64).saturating_add(amount.saturating_mul(unit));
            vec![vec![
                b"SET".to_vec(),
                key.to_vec(),
                argv[3].to_vec(),
                b"PXAT".to_vec(),
                number(at),
            ]]
        }
        "getset" => vec![vec![b"SET".to_vec(), key.to_vec(), argv[2].to_vec()]],
        "getdel" if is_nil(reply) => Vec::new(),
        // SORT is a write command for its STORE, whose reply is a count;
        // without STORE it changed nothing.
        "sort" if !matches!(reply, Reply::Int(_)) => Vec::new(),
        "getdel" => del(),
        // DELEX goes as the DEL it was, when it deleted.
        "delex" if matches!(reply, Reply::Int(1)) => del(),
        "delex" => Vec::new(),
        // DELIFEQ (Valkey 9.0) likewise.
        "delifeq" if matches!(reply, Reply::Int(1)) => del(),
        "delifeq" => Vec::new(),
        "msetex" => msetex(argv, reply, now_ms),
        "getex" => getex(argv, reply, now_ms),
        "incrbyfloat" => match bulk(reply) {
            Some(value) => vec![vec![
                b"SET".to_vec(),
                key.to_vec(),
                value,
                b"KEEPTTL".to_vec(),
            ]],
            None => Vec::new(),
        },
        // Its handler keeps `HSET key field <value>`, and the field's
        // deadline after it when it has one (HSET alone would drop it).
        "hincrbyfloat" => Vec::new(),
        "expire" | "pexpire" | "expireat" | "pexpireat" => {
            if !matches!(reply, Reply::Int(1) | Reply::Bool(true)) {
                return Some(Vec::new());
            }
            let amount = int(argv[2]);
            let at = match command.name {
                "expire" => (now_ms as i64).saturating_add(amount.saturating_mul(1000)),
                "pexpire" => (now_ms as i64).saturating_add(amount),
                "expireat" => amount.saturating_mul(1000),
                _ => amount,
            };
            if at <= now_ms as i64 {
                return Some(del());
            }
            let mut out = vec![b"PEXPIREAT".to_vec(), key.to_vec(), number(at)];
            out.extend(argv[3..].iter().map(|a| a.to_vec()));
            vec![out]
        }
        "spop" => {
            let members = bulks(reply);
            if members.is_empty() {
                return Some(Vec::new());
            }
            let mut out = vec![b"SREM".to_vec(), key.to_vec()];
            out.extend(members);
            vec![out]
        }
        // A pop from several keys, or a blocking one, goes as the plain
        // pop it was from the key it took from, as Redis 7.0 rewrites it.
        "blpop" | "brpop" | "bzpopmin" | "bzpopmax" => match reply {
            Reply::Array(items) => match items.first().and_then(bulk) {
                Some(popped_from) => vec![vec![plain_pop(command.name, argv), popped_from]],
                None => Vec::new(),
            },
            _ => Vec::new(),
        },
        "lmpop" | "zmpop" | "blmpop" | "bzmpop" => match reply {
            Reply::Array(items) => match (items.first().and_then(bulk), items.get(1)) {
                (Some(popped_from), Some(Reply::Array(elements))) => {
                    vec![vec![
                        plain_pop(command.name, argv),
                        popped_from,
                        number(elements.len() as i64),
                    ]]
                }
                _ => Vec::new(),
            },
            _ => Vec::new(),
        },
        "blmove" | "brpoplpush" if bulk(reply).is_none() => Vec::new(),
        "blmove" => vec![[b"LMOVE".as_slice(), argv[1], argv[2], argv[3], argv[4]]
            .iter()
            .map(|a| a.to_vec())
            .collect()],
        "brpoplpush" => vec![vec![
            b"RPOPLPUSH".to_vec(),
            argv[1].to_vec(),
            argv[2].to_vec(),
        ]],
        // HGETDEL goes as the HDEL Redis 8 rewrites it to, when it took
        // any field.
        "hgetdel" => match reply {
            Reply::Array(values) if values.iter().any(|v| !matches!(v, Reply::Nil)) => {
                let mut out = vec![b"HDEL".to_vec(), key.to_vec()];
                out.extend(argv[4..].iter().map(|f| f.to_vec()));
                vec![out]
            }
            _ => Vec::new(),
        },
        // A sketch no register of which rose is unchanged.
        "pfadd" if matches!(reply, Reply::Int(0)) => Vec::new(),
        // Only GETREG and a TODENSE that converted change the value (the
        // sparse form turned dense); a replay of GETREG does the same.
        "pfdebug" => {
            let subcommand = argv.get(1).map(|s| s.to_ascii_lowercase());
            match (subcommand.as_deref(), reply) {
                (Some(b"getreg"), _) | (Some(b"todense"), Reply::Int(1)) => return None,
                _ => Vec::new(),
            }
        }
        "restore" | "restore-asking" => restore(argv, now_ms),
        // The keys it moved out are logged as DELs when the target took them.
        "migrate" => Vec::new(),
        // Their handlers keep their effect (`effect`: SET ... PXAT).
        "cl.throttle" | "increx" => Vec::new(),
        // Its handler keeps the ZADD it ran, as Redis rewrites GEOADD.
        "geoadd" => Vec::new(),
        // Their handlers keep them with the ID the entry got and an
        // approximate trim made exact, when they changed the stream.
        "xadd" | "xtrim" => Vec::new(),
        "xdel" if matches!(reply, Reply::Int(0)) => Vec::new(),
        // Consumer groups, as Redis propagates them: a delivery or a claim
        // as the XCLAIM that sets its pending entry, a NOACK read as XGROUP
        // SETID, a consumer it made as XGROUP CREATECONSUMER (the handlers
        // keep them); DELCONSUMER only when there was such a consumer.
        "xreadgroup" | "xclaim" | "xautoclaim" | "xgroup|delconsumer" => Vec::new(),
        "xack" | "xgroup|destroy" | "xgroup|createconsumer" if matches!(reply, Reply::Int(0)) => {
            Vec::new()
        }
        // Write commands for their STORE, whose reply is a count; without
        // it they changed nothing.
        "georadius" | "georadiusbymember" if !matches!(reply, Reply::Int(_)) => Vec::new(),
        // Hash field expiry: the handlers keep what they did, made absolute
        // (`HPEXPIREAT`, `HSETEX ... PXAT`) or the `HDEL` it amounted to.
        "hexpire" | "hpexpire" | "hexpireat" | "hpexpireat" | "hpersist" | "hgetex" | "hsetex" => {
            Vec::new()
        }
        _ => return None,
    })
}

/// SET: left out when NX/XX or a value condition (IFEQ, IFNE, IFDEQ,
/// IFDNE) kept it from setting; with a relative or absolute deadline,
/// `SET key value PXAT <ms>`; GET and the conditions dropped otherwise (a
/// replay sets what the call set).
fn set(argv: &[&[u8]], reply: &Reply, now_ms: u64) -> Vec<Argv> {
    let mut nx = false;
    let mut xx = false;
    let mut get = false;
    let mut condition = None;
    let mut at: Option<i64> = None;
    let mut kept: Vec<&[u8]> = argv[..3].to_vec();
    let mut i = 3;
    while i < argv.len() {
        let word = argv[i].to_ascii_uppercase();
        let next = argv.get(i + 1).copied();
        match (word.as_slice(), next) {
            (b"NX", _) => {
                nx = true;
                kept.push(argv[i]);
            }
            (b"XX", _) => {
                xx = true;
                kept.push(argv[i]);
            }
            (b"GET", _) => get = true,
            (b"IFEQ" | b"IFNE" | b"IFDEQ" | b"IFDNE", Some(argument)) => {
                condition = super::string_conditions::ValueCondition::named(argv[i], argument);
                i += 1;
            }
            (b"EX" | b"PX" | b"EXAT" | b"PXAT", Some(amount)) => {
                let amount = int(amount);
                at = Some(match word.as_slice() {
                    b"EX" => (now_ms as i64).saturating_add(amount.saturating_mul(1000)),
                    b"PX" => (now_ms as i64).saturating_add(amount),
                    b"EXAT" => amount.saturating_mul(1000),
                    _ => amount,
                });
                kept.extend([argv[i], argv[i + 1]]);
                i += 1;
            }
            _ => kept.push(argv[i]),
        }
        i += 1;
    }
    let applied = if get {
        // The reply is the old value: NX set only where there was none,
        // XX only where there was one, a condition where it held for it.
        let old = bulk(reply);
        let condition_held = condition.is_none_or(|c| c.holds(old.as_deref()).unwrap_or(false));
        let exists_ok = if nx {
            old.is_none()
        } else if xx {
            old.is_some()
        } else {
            true
        };
        exists_ok && condition_held
    } else {
        matches!(reply, Reply::Ok)
    };
    if !applied {
        return Vec::new();
    }
    match at {
        Some(at) => vec![vec![
            b"SET".to_vec(),
            argv[1].to_vec(),
            argv[2].to_vec(),
            b"PXAT".to_vec(),
            at.to_string().into_bytes(),
        ]],
        None => vec![kept.iter().map(|a| a.to_vec()).collect()],
    }
}

/// MSETEX: when it set its keys, as `MSET` (no expiry option: deadlines
/// cleared, as MSET clears them), or `MSETEX` with the deadline made
/// absolute (`PXAT`) or `KEEPTTL`, conditions dropped.
fn msetex(argv: &[&[u8]], reply: &Reply, now_ms: u64) -> Vec<Argv> {
    if !matches!(reply, Reply::Int(1)) {
        return Vec::new();
    }
    let count = int(argv[1]).max(0) as usize;
    let pairs = &argv[2..2 + 2 * count];
    let mut expiry: Option<Vec<Vec<u8>>> = None;
    let mut i = 2 + 2 * count;
    while i < argv.len() {
        let word = argv[i].to_ascii_uppercase();
        match word.as_slice() {
            b"KEEPTTL" => expiry = Some(vec![b"KEEPTTL".to_vec()]),
            b"EX" | b"PX" | b"EXAT" | b"PXAT" if i + 1 < argv.len() => {
                let amount = int(argv[i + 1]);
                let at = match word.as_slice() {
                    b"EX" => (now_ms as i64).saturating_add(amount.saturating_mul(1000)),
                    b"PX" => (now_ms as i64).saturating_add(amount),
                    b"EXAT" => amount.saturating_mul(1000),
                    _ => amount,
                };
                expiry = Some(vec![b"PXAT".to_vec(), at.to_string().into_bytes()]);
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    let values = pairs.iter().map(|a| a.to_vec());
    match expiry {
        None => vec![std::iter::once(b"MSET".to_vec()).chain(values).collect()],
        Some(expiry) => vec![[b"MSETEX".to_vec(), argv[1].to_vec()]
            .into_iter()
            .chain(values)
            .chain(expiry)
            .collect()],
    }
}

/// GETEX: a new deadline as `PEXPIREAT` (`DEL` when already past),
/// PERSIST as `PERSIST`; nothing without an option or a key.
fn getex(argv: &[&[u8]], reply: &Reply, now_ms: u64) -> Vec<Argv> {
    if is_nil(reply) || argv.len() < 3 {
        return Vec::new();
    }
    let key = argv[1].to_vec();
    let word = argv[2].to_ascii_uppercase();
    if word == b"PERSIST" {
        return vec![vec![b"PERSIST".to_vec(), key]];
    }
    let Some(amount) = argv.get(3).map(|a| int(a)) else {
        return Vec::new();
    };
    let at = match word.as_slice() {
        b"EX" => (now_ms as i64).saturating_add(amount.saturating_mul(1000)),
        b"PX" => (now_ms as i64).saturating_add(amount),
        b"EXAT" => amount.saturating_mul(1000),
        b"PXAT" => amount,
        _ => return Vec::new(),
    };
    if at <= now_ms as i64 {
        return vec![vec![b"DEL".to_vec(), key]];
    }
    vec![vec![
        b"PEXPIREAT".to_vec(),
        key,
        at.to_string().into_bytes(),
    ]]
}

/// RESTORE: a relative TTL made absolute (`ABSTTL` added, as Redis's
/// restoreCommand rewrites it); a deadline already past is the key's
/// deletion, which is what the RESTORE left behind.
fn restore(argv: &[&[u8]], now_ms: u64) -> Vec<Argv> {
    let ttl = int(argv[2]);
    let absolute = argv[4..].iter().any(|a| a.eq_ignore_ascii_case(b"ABSTTL"));
    let mut out: Argv = argv.iter().map(|a| a.to_vec()).collect();
    if ttl == 0 {
        return vec![out];
    }
    let at = if absolute {
        ttl
    } else {
        (now_ms as i64).saturating_add(ttl)
    };
    if at <= now_ms as i64 {
        return vec![vec![b"DEL".to_vec(), argv[1].to_vec()]];
    }
    if !absolute {
        out[2] = at.to_string().into_bytes();
        out.push(b"ABSTTL".to_vec());
    }
    vec![out]
}

/// An argument the handler already accepted as an integer.
/// The plain pop standing for a pop from several keys or a blocking one:
/// LPOP/RPOP or ZPOPMIN/ZPOPMAX, by the side the command names.
fn plain_pop(name: &str, argv: &[&[u8]]) -> Vec<u8> {
    let side = match name {
        "blpop" | "bzpopmin" => true,
        "brpop" | "bzpopmax" => false,
        // [B]LMPOP / [B]ZMPOP: the side word follows the keys.
        _ => {
            let numkeys_at = if name.starts_with('b') { 2 } else { 1 };
            let numkeys = int(argv[numkeys_at]).max(0) as usize;
            argv.get(numkeys_at + 1 + numkeys).is_some_and(|word| {
                word.eq_ignore_ascii_case(b"left") || word.eq_ignore_ascii_case(b"min")
            })
        }
    };
    let zset = name.contains('z');
    match (zset, side) {
        (false, true) => b"LPOP".to_vec(),
        (false, false) => b"RPOP".to_vec(),
        (true, true) => b"ZPOPMIN".to_vec(),
        (true, false) => b"ZPOPMAX".to_vec(),
    }
}

fn int(arg: &[u8]) -> i64 {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn is_nil(reply: &Reply) -> bool {
    matches!(reply, Reply::Nil | Reply::NilArray)
}

/// A bulk reply's bytes.
fn bulk(reply: &Reply) -> Option<Vec<u8>> {
    match reply {
        Reply::Bulk(bytes) | Reply::Verbatim(bytes) => Some(bytes.clone()),
        Reply::BulkInt(n) => Some(n.to_string().into_bytes()),
        Reply::BulkStatic(bytes) => Some(bytes.to_vec()),
        _ => None,
    }
}

/// The bulk strings of a reply: one, or an array's or set's.
fn bulks(reply: &Reply) -> Vec<Vec<u8>> {
    match reply {
        Reply::Array(items) | Reply::Set(items) => items.iter().filter_map(bulk).collect(),
        other => bulk(other).into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::registry;

    fn run(args: &[&str], reply: Reply) -> Vec<Vec<String>> {
        let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let command = registry().lookup(argv[0]).expect("known command");
        let commands = match propagated(command, &argv, &reply, 1_000_000) {
            Propagation::AsItCame => vec![argv.iter().map(|a| a.to_vec()).collect()],
            Propagation::Instead(commands) => commands,
        };
        commands
            .into_iter()
            .map(|c| {
                c.into_iter()
                    .map(|a| String::from_utf8(a).expect("utf-8"))
                    .collect()
            })
            .collect()
    }

    fn bulk(text: &str) -> Reply {
        Reply::Bulk(text.as_bytes().to_vec())
    }

    #[test]
    fn value_conditions_delex_and_msetex_go_as_what_they_did() {
        let ok = || Reply::Ok;
        assert_eq!(
            run(&["set", "k", "v", "IFEQ", "old"], ok()),
            [["set", "k", "v"]]
        );
        assert!(run(&["set", "k", "v", "IFEQ", "old"], Reply::Nil).is_empty());
        // With GET the reply is the old value: the condition is decided
        // from it, as the call decided.
        assert_eq!(
            run(&["set", "k", "v", "IFEQ", "old", "GET"], bulk("old")),
            [["set", "k", "v"]]
        );
        assert!(run(&["set", "k", "v", "IFEQ", "old", "GET"], bulk("other")).is_empty());
        assert_eq!(
            run(&["set", "k", "v", "IFNE", "x", "GET"], Reply::Nil),
            [["set", "k", "v"]]
        );
        assert!(run(
            &["set", "k", "v", "IFDEQ", "9555e8555c62dcfd", "GET"],
            bulk("hellx")
        )
        .is_empty());
        assert_eq!(
            run(
                &[
                    "set",
                    "k",
                    "v",
                    "IFDEQ",
                    "9555E8555C62DCFD",
                    "GET",
                    "EX",
                    "10"
                ],
                bulk("hello")
            ),
            [["SET", "k", "v", "PXAT", "1010000"]]
        );
        assert_eq!(
            run(&["delex", "k", "IFEQ", "v"], Reply::Int(1)),
            [["DEL", "k"]]
        );
        assert!(run(&["delex", "k", "IFEQ", "v"], Reply::Int(0)).is_empty());
        assert_eq!(
            run(
                &["msetex", "2", "a", "1", "b", "2", "NX", "PX", "500"],
                Reply::Int(1)
            ),
            [["MSETEX", "2", "a", "1", "b", "2", "PXAT", "1000500"]]
        );
        assert_eq!(
            run(&["msetex", "1", "a", "1", "KEEPTTL", "XX"], Reply::Int(1)),
            [["MSETEX", "1", "a", "1", "KEEPTTL"]]
        );
        assert_eq!(
            run(&["msetex", "1", "a", "1"], Reply::Int(1)),
            [["MSET", "a", "1"]]
        );
        assert!(run(&["msetex", "1", "a", "1", "NX"], Reply::Int(0)).is_empty());
    }

    #[test]
    fn pops_from_several_keys_and_blocking_pops_go_as_the_plain_pop() {
        let pair = |key: &str, value: &str| Reply::Array(vec![bulk(key), bulk(value)]);
        assert_eq!(
            run(&["blpop", "a", "b", "0"], pair("b", "x")),
            [["LPOP", "b"]]
        );
        assert_eq!(run(&["brpop", "a", "0"], pair("a", "x")), [["RPOP", "a"]]);
        assert!(run(&["blpop", "a", "0"], Reply::NilArray).is_empty());
        assert!(run(&["blpop", "a", "0"], Reply::Nothing).is_empty());
        let scored = Reply::Array(vec![bulk("z"), bulk("m"), Reply::Double(1.0)]);
        assert_eq!(
            run(&["bzpopmax", "y", "z", "0"], scored),
            [["ZPOPMAX", "z"]]
        );
        let popped =
            |key: &str, n: usize| Reply::Array(vec![bulk(key), Reply::Array(vec![bulk("e"); n])]);
        assert_eq!(
            run(
                &["lmpop", "2", "a", "b", "RIGHT", "COUNT", "10"],
                popped("b", 3)
            ),
            [["RPOP", "b", "3"]]
        );
        assert_eq!(
            run(&["blmpop", "0", "2", "a", "b", "left"], popped("a", 1)),
            [["LPOP", "a", "1"]]
        );
        assert_eq!(
            run(&["zmpop", "1", "z", "MAX"], popped("z", 1)),
            [["ZPOPMAX", "z", "1"]]
        );
        assert_eq!(
            run(
                &["bzmpop", "1", "1", "z", "MIN", "COUNT", "2"],
                popped("z", 2)
            ),
            [["ZPOPMIN", "z", "2"]]
        );
        assert!(run(&["lmpop", "1", "a", "LEFT"], Reply::NilArray).is_empty());
        assert_eq!(
            run(&["blmove", "s", "d", "LEFT", "RIGHT", "0"], bulk("x")),
            [["LMOVE", "s", "d", "LEFT", "RIGHT"]]
        );
        assert_eq!(
            run(&["brpoplpush", "s", "d", "0"], bulk("x")),
            [["RPOPLPUSH", "s", "d"]]
        );
        assert!(run(&["brpoplpush", "s", "d", "0"], Reply::Nil).is_empty());
    }

    #[test]
    fn relative_deadlines_become_absolute() {
        assert_eq!(
            run(&["set", "k", "v", "EX", "10"], Reply::Ok),
            [["SET", "k", "v", "PXAT", "1010000"]]
        );
        assert_eq!(
            run(&["setex", "k", "10", "v"], Reply::Ok),
            [["SET", "k", "v", "PXAT", "1010000"]]
        );
        assert_eq!(
            run(&["expire", "k", "5", "NX"], Reply::Int(1)),
            [["PEXPIREAT", "k", "1005000", "NX"]]
        );
        assert_eq!(
            run(&["getex", "k", "PX", "50"], Reply::Bulk(b"v".to_vec())),
            [["PEXPIREAT", "k", "1000050"]]
        );
        assert_eq!(
            run(&["restore", "k", "100", "payload"], Reply::Ok),
            [["restore", "k", "1000100", "payload", "ABSTTL"]]
        );
    }

    #[test]
    fn past_deadlines_and_removals_become_del() {
        assert_eq!(run(&["expireat", "k", "1"], Reply::Int(1)), [["DEL", "k"]]);
        assert_eq!(
            run(&["getex", "k", "PXAT", "5"], Reply::Bulk(b"v".to_vec())),
            [["DEL", "k"]]
        );
        assert_eq!(
            run(&["getdel", "k"], Reply::Bulk(b"v".to_vec())),
            [["DEL", "k"]]
        );
        assert!(run(&["getdel", "k"], Reply::Nil).is_empty());
    }

    #[test]
    fn commands_that_did_nothing_are_left_out() {
        assert!(run(&["set", "k", "v", "NX", "EX", "5"], Reply::Nil).is_empty());
        assert!(run(
            &["set", "k", "v", "NX", "GET"],
            Reply::Bulk(b"old".to_vec())
        )
        .is_empty());
        assert!(run(&["expire", "k", "5"], Reply::Int(0)).is_empty());
        assert!(run(&["spop", "s"], Reply::Nil).is_empty());
    }

    #[test]
    fn results_replace_randomness_and_floats() {
        assert_eq!(
            run(
                &["spop", "s", "2"],
                Reply::Set(vec![Reply::Bulk(b"a".to_vec()), Reply::Bulk(b"b".to_vec())])
            ),
            [["SREM", "s", "a", "b"]]
        );
        assert_eq!(
            run(&["incrbyfloat", "k", "0.1"], Reply::Bulk(b"1.1".to_vec())),
            [["SET", "k", "1.1", "KEEPTTL"]]
        );
        // HINCRBYFLOAT's handler keeps its own (tests/tests/hash_field_expiry.rs).
        assert!(run(&["hincrbyfloat", "h", "f", "2"], Reply::Bulk(b"3".to_vec())).is_empty());
        assert_eq!(
            run(&["set", "k", "v", "GET", "KEEPTTL"], Reply::Nil),
            [["set", "k", "v", "KEEPTTL"]]
        );
        assert_eq!(run(&["incr", "k"], Reply::Int(1)), [["incr", "k"]]);
    }

    #[test]
    fn hgetdel_goes_as_hdel_of_its_fields_when_it_took_any() {
        let none: Vec<Vec<String>> = Vec::new();
        let argv = ["hgetdel", "h", "FIELDS", "2", "a", "b"];
        assert_eq!(
            run(&argv, Reply::Array(vec![bulk("1"), Reply::Nil])),
            [["HDEL", "h", "a", "b"]]
        );
        assert_eq!(run(&argv, Reply::Array(vec![Reply::Nil, Reply::Nil])), none);
    }

    #[test]
    fn sketch_commands_go_only_when_they_changed_the_value() {
        let none: Vec<Vec<String>> = Vec::new();
        assert_eq!(run(&["pfadd", "h", "a"], Reply::Int(0)), none);
        assert_eq!(
            run(&["pfadd", "h", "a"], Reply::Int(1)),
            [["pfadd", "h", "a"]]
        );
        assert_eq!(
            run(&["pfdebug", "todense", "h"], Reply::Int(1)),
            [["pfdebug", "todense", "h"]]
        );
        assert_eq!(run(&["pfdebug", "TODENSE", "h"], Reply::Int(0)), none);
        assert_eq!(
            run(&["pfdebug", "GETREG", "h"], Reply::Array(Vec::new())),
            [["pfdebug", "GETREG", "h"]]
        );
        assert_eq!(
            run(&["pfdebug", "encoding", "h"], Reply::Status("dense".into())),
            none
        );
        assert_eq!(run(&["pfdebug", "decode", "h"], bulk("Z:16384")), none);
    }
}
