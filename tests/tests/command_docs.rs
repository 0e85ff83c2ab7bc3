//! COMMAND DOCS against redis-server (every command tally has, arguments and
//! history included), and redis-cli showing its hints from them.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use redis::Value;
use tally_tests::{RawConn, RedisServer, TestServer};

/// A docs entry with its `subcommands` map turned into name → entry, so
/// that the order Redis's dictionary gives them does not matter.
fn normalized(value: Value) -> (Value, BTreeMap<String, Value>) {
    let Value::Map(fields) = value else {
        panic!("a docs entry is a map: {value:?}");
    };
    let mut subcommands = BTreeMap::new();
    let mut kept = Vec::new();
    for (key, field) in fields {
        if key == Value::BulkString(b"subcommands".to_vec()) {
            let Value::Map(entries) = field else {
                panic!("subcommands is a map");
            };
            for (name, entry) in entries {
                let Value::BulkString(name) = name else {
                    panic!("a subcommand name");
                };
                subcommands.insert(String::from_utf8(name).expect("ascii"), entry);
            }
        } else {
            kept.push((key, field));
        }
    }
    (Value::Map(kept), subcommands)
}

/// The value of a docs map's field.
fn get<'a>(entry: &'a Value, name: &str) -> Option<&'a Value> {
    let Value::Map(fields) = entry else {
        return None;
    };
    let key = Value::BulkString(name.as_bytes().to_vec());
    fields.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
}

/// The array in a docs map's field, to change.
fn array_mut<'a>(entry: &'a mut Value, name: &str) -> &'a mut Vec<Value> {
    let Value::Map(fields) = entry else {
        panic!("a map: {entry:?}");
    };
    let key = Value::BulkString(name.as_bytes().to_vec());
    match fields.iter_mut().find(|(k, _)| *k == key) {
        Some((_, Value::Array(items) | Value::Set(items))) => items,
        other => panic!("{name} is not an array: {other:?}"),
    }
}

fn text(value: Option<&Value>) -> Option<&[u8]> {
    match value {
        Some(Value::BulkString(bytes)) => Some(bytes),
        Some(Value::SimpleString(text)) => Some(text.as_bytes()),
        _ => None,
    }
}

/// SET's docs as Redis 7.0 gives them: tally's with Redis 8.4's
/// compare-and-set conditions taken out, after checking they are there as
/// Redis 8.6.3's COMMAND DOCS SET lists them (IFEQ, IFNE, IFDEQ, IFDNE in
/// the NX/XX choice, since 8.4.0, and a history row).
fn set_docs_as_7_0(mut entry: Value) -> Value {
    let newer = |item: &Value| text(get(item, "since")) == Some(b"8.4.0");
    let condition = array_mut(&mut entry, "arguments")
        .iter_mut()
        .find(|arg| text(get(arg, "name")) == Some(b"condition"))
        .expect("SET has a condition argument");
    let choices = array_mut(condition, "arguments");
    let tokens: Vec<&[u8]> = choices
        .iter()
        .filter(|c| newer(c))
        .map(|c| text(get(c, "token")).expect("a token"))
        .collect();
    assert_eq!(tokens, [&b"IFEQ"[..], b"IFNE", b"IFDEQ", b"IFDNE"]);
    choices.retain(|c| !newer(c));
    let last = array_mut(&mut entry, "history").pop();
    assert_eq!(
        last,
        Some(Value::Array(vec![
            Value::BulkString(b"8.4.0".to_vec()),
            Value::BulkString(b"Added 'IFEQ', 'IFNE', 'IFDEQ', 'IFDNE' options.".to_vec()),
        ]))
    );
    entry
}

/// RESP3 connections to tally and to Redis, and the commands tally lists.
async fn resp3_pair(tally: &TestServer, redis: &RedisServer) -> (RawConn, RawConn, Vec<Value>) {
    let mut ours = RawConn::connect(tally.addr()).await;
    let mut theirs = RawConn::connect(redis.addr).await;
    ours.cmd(&["HELLO", "3"]).await;
    theirs.cmd(&["HELLO", "3"]).await;
    let list = ours.cmd(&["COMMAND", "LIST"]).await;
    let Value::Array(names) = redis::parse_redis_value(&list).expect("RESP3") else {
        panic!("COMMAND LIST is an array");
    };
    // Commands; their subcommands (listed too, `acl|cat`) are compared
    // through them.
    let names = names
        .into_iter()
        .filter(|name| !matches!(name, Value::BulkString(n) if n.contains(&b'|')))
        .collect();
    (ours, theirs, names)
}

async fn docs(conn: &mut RawConn, name: &str) -> Option<(Value, BTreeMap<String, Value>)> {
    let reply = conn.cmd(&["COMMAND", "DOCS", name]).await;
    let Value::Map(mut entries) = redis::parse_redis_value(&reply).expect("RESP3") else {
        panic!("COMMAND DOCS is a map: {reply:?}");
    };
    entries.pop().map(|(_, entry)| normalized(entry))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_docs_are_redis_docs_for_every_command() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let (mut ours, mut theirs, names) = resp3_pair(&tally, &redis).await;
    assert!(names.len() > 150, "{} commands", names.len());
    let mut compared = 0;
    for name in names {
        let Value::BulkString(name) = name else {
            panic!("a name");
        };
        let name = String::from_utf8(name).expect("ascii");
        let (mut entry, subcommands) = docs(&mut ours, &name).await.expect("tally documents it");
        if NOT_IN_REDIS_7_0.contains(&name.as_str()) {
            continue;
        }
        if name == "set" {
            entry = set_docs_as_7_0(entry);
        }
        let (expected, expected_subcommands) =
            docs(&mut theirs, &name).await.expect("Redis has it");
        assert_eq!(entry, expected, "COMMAND DOCS {name}");
        for (sub, doc) in subcommands {
            if NEWER_SUBCOMMANDS.contains(&sub.as_str()) {
                continue; // Redis 7.2's; not in 7.0.
            }
            assert_eq!(
                Some(&doc),
                expected_subcommands.get(&sub),
                "COMMAND DOCS {name}: {sub}"
            );
            compared += 1;
        }
        compared += 1;
    }
    assert!(compared > 200, "{compared} entries compared");
}

/// Runs redis-cli in a terminal (tmux), types `keys`, and returns the
/// screen once it shows `wanted` (or after 10 s).
fn screen_after_typing(port: u16, keys: &[&str], wanted: &str) -> Option<String> {
    let available = |tool: &str| Command::new(tool).arg("-V").output().is_ok();
    if !available("tmux") || !available("redis-cli") {
        tally_tests::tool_missing("tmux or redis-cli (for the redis-cli test)");
        return None;
    }
    let session = format!("tally-hints-{port}");
    let tmux = |args: &[&str]| Command::new("tmux").args(args).output().expect("tmux runs");
    let started = tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "220",
        "-y",
        "30",
        &format!("redis-cli -p {port}"),
    ]);
    assert!(started.status.success(), "{started:?}");
    let capture = || {
        String::from_utf8_lossy(&tmux(&["capture-pane", "-t", &session, "-p"]).stdout).into_owned()
    };
    // redis-cli reads COMMAND DOCS when it starts; wait for its prompt.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !capture().contains(&format!("127.0.0.1:{port}>")) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for key in keys {
        tmux(&["send-keys", "-t", &session, key]);
    }
    let mut screen = capture();
    while !screen.contains(wanted) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        screen = capture();
    }
    tmux(&["kill-session", "-t", &session]);
    Some(screen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cli_shows_argument_hints_and_help() {
    let tally = TestServer::start_real_clock().await;
    let port = tally.addr().port();
    // Redis 8.4's conditions beside NX and XX, as redis-cli shows them from
    // Redis 8.6.3's COMMAND DOCS SET too.
    let hint = "SET key value [NX|XX|IFEQ ifeq-value|IFNE ifne-value|IFDEQ ifdeq-digest|IFDNE ifdne-digest] [GET] [EX seconds|PX milliseconds|EXAT unix-time-seconds|PXAT unix-time-milliseconds|KEEPTTL]";
    let Some(screen) =
        tokio::task::spawn_blocking(move || screen_after_typing(port, &["SET "], hint))
            .await
            .expect("no panic")
    else {
        return;
    };
    assert!(screen.contains(hint), "no hint on screen:\n{screen}");
    let wanted = "ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]";
    let screen = tokio::task::spawn_blocking(move || {
        screen_after_typing(port, &["HELP ZADD", "Enter"], wanted)
    })
    .await
    .expect("no panic")
    .expect("tools present");
    assert!(screen.contains(wanted), "no HELP text on screen:\n{screen}");
    assert!(screen.contains("group: sorted-set"), "{screen}");
}

/// COMMAND INFO's fields `fields` of a command and of each of its
/// subcommands, by name.
async fn info_fields(
    conn: &mut RawConn,
    name: &str,
    fields: std::ops::Range<usize>,
) -> BTreeMap<String, Vec<Value>> {
    let reply = conn.cmd(&["COMMAND", "INFO", name]).await;
    let Value::Array(mut entries) = redis::parse_redis_value(&reply).expect("RESP3") else {
        panic!("COMMAND INFO is an array");
    };
    let Some(Value::Array(entry)) = entries.pop() else {
        panic!("an entry for {name}");
    };
    let mut out = BTreeMap::new();
    out.insert(name.to_string(), entry[fields.clone()].to_vec());
    if let Some(Value::Array(subcommands)) = entry.get(9) {
        for sub in subcommands {
            let Value::Array(sub) = sub else {
                panic!("a subcommand entry");
            };
            let Value::BulkString(sub_name) = &sub[0] else {
                panic!("a name");
            };
            out.insert(
                String::from_utf8(sub_name.clone()).expect("ascii"),
                sub[fields.clone()].to_vec(),
            );
        }
    }
    out
}

/// Commands tally serves that Redis 7.0 does not have: redis-cell's
/// CL.THROTTLE (a module's), Redis 8.8's INCREX, Redis 8.0's HGETDEL,
/// HGETEX and HSETEX, Redis 7.4's hash field expiry, Redis 8.4's DELEX,
/// DIGEST and MSETEX, Redis 7.2's WAITAOF, Valkey 9.0's DELIFEQ. tally documents them
/// (their COMMAND INFO checked against Redis 8.0.6 by hand), Redis 7.0 has
/// nothing to compare with.
const NOT_IN_REDIS_7_0: &[&str] = &[
    "cl.throttle",
    "increx",
    "hgetdel",
    "hexpire",
    "hpexpire",
    "hexpireat",
    "hpexpireat",
    "httl",
    "hpttl",
    "hexpiretime",
    "hpexpiretime",
    "hpersist",
    "hgetex",
    "hsetex",
    "delex",
    "digest",
    "msetex",
    "waitaof",
    "delifeq",
];

/// Subcommands of Redis 7.2 (their COMMAND INFO and DOCS checked against
/// Redis 8 by hand): no Redis 7.0 row to compare with.
const NEWER_SUBCOMMANDS: &[&str] = &["client|setinfo", "client|no-touch"];

/// COMMAND INFO's fields `fields` on tally and on Redis, (command, tally's,
/// Redis's), for every command and subcommand tally serves. CLIENT SETINFO
/// is Redis 7.2's. `None`
/// without redis-server.
async fn info_compared(
    fields: std::ops::Range<usize>,
) -> Option<Vec<(String, Vec<Value>, Option<Vec<Value>>)>> {
    let redis = RedisServer::start()?;
    let tally = TestServer::start_real_clock().await;
    let (mut ours, mut theirs, names) = resp3_pair(&tally, &redis).await;
    let mut compared = Vec::new();
    for name in names {
        let Value::BulkString(name) = name else {
            panic!("a name");
        };
        let name = String::from_utf8(name).expect("ascii");
        if NOT_IN_REDIS_7_0.contains(&name.as_str()) {
            continue;
        }
        let mut expected = info_fields(&mut theirs, &name, fields.clone()).await;
        for (command, ours) in info_fields(&mut ours, &name, fields.clone()).await {
            if !NEWER_SUBCOMMANDS.contains(&command.as_str()) {
                let theirs = expected.remove(&command);
                compared.push((command, ours, theirs));
            }
        }
    }
    Some(compared)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_info_has_redis_categories_tips_and_key_specs() {
    let Some(compared) = info_compared(6..9).await else {
        return;
    };
    for (command, tail, expected) in compared {
        assert_eq!(Some(tail), expected, "COMMAND INFO {command}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_info_has_redis_flags() {
    let Some(compared) = info_compared(2..3).await else {
        return;
    };
    let differ: Vec<String> = compared
        .into_iter()
        .filter(|(_, flags, expected)| Some(flags) != expected.as_ref())
        .map(|(command, flags, expected)| format!("{command}: tally {flags:?}, redis {expected:?}"))
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// COMMAND LIST names what Redis 7.0 names, subcommands included (`acl|cat`),
/// for every command tally has: nothing Redis would not list, besides the
/// commands newer than 7.0 and CLIENT SETINFO (7.2's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_list_names_what_redis_names() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let mut lists = Vec::new();
    for addr in [tally.addr(), redis.addr] {
        let mut conn = RawConn::connect(addr).await;
        let reply = conn.cmd(&["COMMAND", "LIST"]).await;
        let Value::Array(names) = redis::parse_redis_value(&reply).expect("RESP") else {
            panic!("COMMAND LIST is an array");
        };
        let names: std::collections::BTreeSet<String> = names
            .into_iter()
            .map(|n| match n {
                Value::BulkString(n) => String::from_utf8(n).expect("ascii"),
                other => panic!("a name: {other:?}"),
            })
            .collect();
        lists.push(names);
    }
    let (ours, theirs) = (&lists[0], &lists[1]);
    let extra: Vec<&String> = ours
        .difference(theirs)
        .filter(|n| {
            !NOT_IN_REDIS_7_0.contains(&n.as_str()) && !NEWER_SUBCOMMANDS.contains(&n.as_str())
        })
        .collect();
    assert!(extra.is_empty(), "listed by tally, not by Redis: {extra:?}");
    assert!(ours.iter().filter(|n| n.contains('|')).count() > 50);
}
