//! The checks the fuzz targets run (feature `fuzzing`).
//!
//! Each function takes the fuzzer's bytes and panics when an invariant
//! breaks; a clean return is a pass. The coverage-guided targets in `fuzz/`
//! (cargo-fuzz, nightly) call them, and `server/tests/fuzz_corpus.rs`
//! replays the committed corpus and a batch of generated inputs through them
//! on stable, so CI checks every target on every run. docs/security.md.

// A failed check is a panic: that is how a fuzzer reports it.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod lua_libraries;
pub use lua_libraries::{lua_libraries, script_from as lua_libraries_script};

use bytes::BytesMut;

use crate::cmd;
use crate::config::Config;
use crate::resp::{parse_frame, Frame, FrameLimits, Protocol, Reply, Resume};

/// The reply encodes as exactly one well-formed frame in `proto`.
fn assert_encodes_whole(reply: &Reply, proto: Protocol) {
    let mut out = BytesMut::new();
    reply.encode(proto, &mut out);
    assert_eq!(
        crate::resp::reply_frame_len(&out, proto == Protocol::Resp3),
        Some(out.len()),
        "malformed {proto:?} reply {:?}",
        String::from_utf8_lossy(&out[..out.len().min(200)])
    );
}

/// The reply is one whole, well-formed RESP frame in both protocols.
fn assert_well_formed(reply: &Reply) {
    match reply {
        Reply::Nothing => {}
        Reply::Raw(_) => panic!("a raw reply outside SYNC"),
        Reply::Multi(replies) => replies.iter().for_each(assert_well_formed),
        // EXEC's array counts its commands, and a command answered with
        // several frames (UNSUBSCRIBE of two channels) puts them all in
        // its place, byte for byte as Redis's EXEC does: such an array is
        // its header, then each element well formed.
        Reply::Array(items) if items.iter().any(|item| matches!(item, Reply::Multi(_))) => {
            items.iter().for_each(assert_well_formed)
        }
        _ => {
            assert_encodes_whole(reply, Protocol::Resp2);
            assert_encodes_whole(reply, Protocol::Resp3);
        }
    }
}

/// What framing a stream produced: each command's arguments, then how it
/// ended (waiting for more, or the protocol error that closes it).
#[derive(Debug, PartialEq, Eq)]
struct Framed {
    commands: Vec<Vec<Vec<u8>>>,
    error: Option<String>,
}

/// Frames `stream` as a connection does when it arrives in pieces of the
/// given sizes: resuming after each piece, dropping consumed bytes.
fn frame_in_pieces(stream: &[u8], pieces: &[usize], limits: FrameLimits) -> Framed {
    let mut framed = Framed {
        commands: Vec::new(),
        error: None,
    };
    let mut buffer: Vec<u8> = Vec::new();
    let mut resume = Resume::Start;
    let mut fed = 0;
    let mut sizes = pieces.iter().copied().chain(std::iter::repeat(usize::MAX));
    while fed < stream.len() {
        let size = sizes.next().unwrap_or(usize::MAX).max(1);
        let end = stream.len().min(fed.saturating_add(size));
        buffer.extend_from_slice(&stream[fed..end]);
        fed = end;
        let mut pos = 0;
        loop {
            match parse_frame(&buffer[pos..], limits, &mut resume) {
                Frame::Command { args, consumed } => {
                    assert!(consumed > 0 && pos + consumed <= buffer.len());
                    let base = pos;
                    framed.commands.push(
                        args.iter()
                            .map(|r| {
                                assert!(r.end <= consumed, "argument outside its frame");
                                buffer[base + r.start..base + r.end].to_vec()
                            })
                            .collect(),
                    );
                    pos += consumed;
                }
                Frame::Inline { args, consumed } => {
                    assert!(consumed > 0 && pos + consumed <= buffer.len());
                    assert!(!args.is_empty(), "an inline frame without words");
                    framed.commands.push(args);
                    pos += consumed;
                }
                Frame::Empty { consumed } => {
                    assert!(consumed > 0 && pos + consumed <= buffer.len());
                    pos += consumed;
                }
                Frame::Incomplete => break,
                Frame::Error(text) => {
                    framed.error = Some(text);
                    return framed;
                }
            }
        }
        buffer.drain(..pos);
    }
    framed
}

/// The framer: a stream framed whole and framed in fuzzer-chosen pieces
/// gives the same commands and the same ending, and nothing panics.
pub fn frame(data: &[u8]) {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    // The first bytes after the control byte choose the piece sizes.
    let piece_count = (control & 0x0f) as usize;
    let (sizes, stream) = rest.split_at(piece_count.min(rest.len()));
    let pieces: Vec<usize> = sizes.iter().map(|&b| b as usize + 1).collect();
    let limits = FrameLimits {
        max_bulk_len: if control & 0x10 != 0 {
            16
        } else {
            512 * 1024 * 1024
        },
        unauthenticated: control & 0x20 != 0,
    };
    let whole = frame_in_pieces(stream, &[usize::MAX], limits);
    let pieced = frame_in_pieces(stream, &pieces, limits);
    assert_eq!(whole, pieced, "framing depends on how the bytes arrived");
    let bytewise = frame_in_pieces(stream, &[1; 64], limits);
    assert_eq!(whole, bytewise, "framing depends on how the bytes arrived");
}

unsafe extern "C" {
    fn redis_stringmatchlen(
        pattern: *const u8,
        pattern_len: i32,
        string: *const u8,
        string_len: i32,
        nocase: i32,
    ) -> i32;
}

/// Redis 7.0.15's own matcher (csrc/stringmatch_redis.c).
pub fn redis_glob_match(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    // The C code reads the NUL terminator past both ends: give it one.
    let pattern_c: Vec<u8> = pattern.iter().copied().chain([0]).collect();
    let text_c: Vec<u8> = text.iter().copied().chain([0]).collect();
    // SAFETY: both buffers are NUL-terminated and live for the call; the
    // lengths are their lengths without the NUL.
    unsafe {
        redis_stringmatchlen(
            pattern_c.as_ptr(),
            pattern.len() as i32,
            text_c.as_ptr(),
            text.len() as i32,
            nocase as i32,
        ) != 0
    }
}

/// The glob matcher agrees with Redis's on every pattern and text.
pub fn glob(data: &[u8]) {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let split = (control as usize >> 1).min(rest.len());
    let (pattern, text) = rest.split_at(split);
    let nocase = control & 1 != 0;
    assert_eq!(
        crate::glob::glob_match(pattern, text, nocase),
        redis_glob_match(pattern, text, nocase),
        "pattern {:?} text {:?} nocase {nocase}",
        String::from_utf8_lossy(pattern),
        String::from_utf8_lossy(text),
    );
}

/// Commands the dispatch target leaves out: scripts (their own target, and
/// a loop would hang the fuzzer), DEBUG (SLEEP pauses; PANIC panics on
/// purpose), CONFIG (could lift the limits that keep inputs small),
/// SHUTDOWN, SAVE/BGSAVE/BGREWRITEAOF (they write files; their input is
/// one word) and SYNC (a snapshot, not a RESP reply).
const NOT_FUZZED: &[&str] = &[
    "save",
    "bgsave",
    "bgrewriteaof",
    "sync",
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "script",
    "debug",
    "config",
    "shutdown",
];

/// A server for one input: small limits, so that what a request may make
/// the server allocate is bounded and quickly found.
fn fuzz_config() -> Config {
    Config {
        port: 0,
        shards: 2,
        databases: 4,
        maxmemory: 32 * 1024 * 1024,
        proto_max_bulk_len: 1024 * 1024,
        save_points: Vec::new(),
        ..Config::default()
    }
}

/// Whole dispatch: lines of space-separated arguments run as one client's
/// commands. No command panics, and every reply is well-formed RESP.
pub fn dispatch(data: &[u8]) {
    let mut harness = cmd::harness::Harness::with_config(fuzz_config());
    for line in data.split(|&b| b == b'\n').take(64) {
        let argv: Vec<&[u8]> = line
            .split(|&b| b == b' ')
            .filter(|a| !a.is_empty())
            .collect();
        let Some(name) = argv.first() else {
            continue;
        };
        if NOT_FUZZED
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
        {
            continue;
        }
        let reply = harness.run_bytes(&argv);
        assert_well_formed(&reply);
        if matches!(harness.client.after, cmd::After::Close) {
            break;
        }
    }
}

/// Config files and CONFIG SET values: any text is applied or refused with
/// a message, never a panic.
pub fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = Config::default().apply_text(&text, "fuzz");
    let mut words = text.split_whitespace();
    if let Some(name) = words.next() {
        let values: Vec<String> = words.map(str::to_string).collect();
        let _ = Config::default().apply(&name.to_ascii_lowercase(), &values);
    }
}

thread_local! {
    static LUA: mlua::Lua = mlua::Lua::new();
}

/// Lua values ↔ replies. The input is a small stack program building a Lua
/// value (strings, numbers, booleans, nested and self-referencing tables,
/// Redis's `{err=}`/`{ok=}`/`{map=}`/`{set=}`/`{double=}` forms); its
/// conversion to a reply must be well-formed in both protocols, and that
/// reply must convert back into Lua.
pub fn lua_values(data: &[u8]) {
    LUA.with(|lua| {
        let Some(value) = build_lua_value(lua, data) else {
            return;
        };
        for (resp3, proto) in [
            (false, Protocol::Resp2),
            (true, Protocol::Resp3),
            (false, Protocol::Resp3),
        ] {
            // Small limits: each input is walked three times, and a
            // self-referencing table reaches the limit every time (under
            // AddressSanitizer an 8000-level walk costs tens of ms). Lua's
            // own depth limit is checked against Redis by the differential
            // tests (tests/tests/hostile.rs) instead.
            let limits = crate::scripting::convert::ResultLimits {
                elements: 1_000,
                bytes: 64 << 10,
            };
            let reply = crate::scripting::convert::lua_to_reply_within(
                lua,
                value.clone(),
                resp3,
                proto,
                limits,
                &mut Default::default(),
            );
            assert_encodes_whole(&reply, proto);
            if !matches!(reply, Reply::Encoded(_)) {
                crate::scripting::convert::reply_to_lua(lua, &reply, resp3)
                    .expect("a reply converts to Lua");
            }
        }
    });
}

/// Runs the stack program in `data` (see [`lua_values`]).
fn build_lua_value(lua: &mlua::Lua, data: &[u8]) -> Option<mlua::Value> {
    use mlua::Value;
    let mut stack: Vec<Value> = Vec::new();
    let mut bytes = data.iter().copied();
    while let Some(op) = bytes.next() {
        match op % 12 {
            0 => {
                let len = bytes.next().unwrap_or(0) as usize % 16;
                let text: Vec<u8> = bytes.by_ref().take(len).collect();
                stack.push(Value::String(lua.create_string(&text).ok()?));
            }
            1 => {
                let raw: Vec<u8> = bytes.by_ref().take(8).collect();
                let mut eight = [0u8; 8];
                eight[..raw.len()].copy_from_slice(&raw);
                stack.push(Value::Number(f64::from_le_bytes(eight)));
            }
            2 => stack.push(Value::Boolean(op & 0x80 != 0)),
            3 => stack.push(Value::Table(lua.create_table().ok()?)),
            // t[#t+1] = v, with t below v.
            4 => {
                let value = stack.pop()?;
                if let Some(Value::Table(t)) = stack.last() {
                    t.raw_set(t.raw_len() + 1, value).ok()?;
                }
            }
            // t[k] = v, with t below k below v.
            5 => {
                let value = stack.pop()?;
                let key = stack.pop()?;
                // Lua tables hold neither a nil nor a NaN key (and mlua
                // sets unprotected while no memory limit is on, so Lua's
                // error for them would abort the process).
                let holdable = match key {
                    Value::Nil => false,
                    Value::Number(n) => !n.is_nan(),
                    _ => true,
                };
                if let (true, Some(Value::Table(t))) = (holdable, stack.last()) {
                    t.raw_set(key, value).ok()?;
                }
            }
            // A table that holds itself.
            6 => {
                if let Some(Value::Table(t)) = stack.last() {
                    t.raw_set(t.raw_len() + 1, t.clone()).ok()?;
                }
            }
            // Wrap the top as {name=top}.
            7..=11 => {
                let name = ["err", "ok", "map", "set", "double"][(op % 12 - 7) as usize];
                let value = stack.pop()?;
                let t = lua.create_table().ok()?;
                t.raw_set(name, value).ok()?;
                stack.push(Value::Table(t));
            }
            _ => unreachable!("op % 12"),
        }
        if stack.len() > 64 {
            return None;
        }
    }
    stack.pop()
}

/// RESTORE payloads and snapshot files as an attacker may send them: the
/// reader never panics nor over-allocates; a payload it accepts dumps
/// again into one that restores, and dumping is stable from then on; the
/// store accepts what the reader gives. The same bytes are also read as
/// a FUNCTION RESTORE payload (accepted libraries dump and read back the
/// same) and as the body of an RDB 10 file.
pub fn rdb(data: &[u8]) {
    if let Ok(value) = tally_rdb::restore(data) {
        let encodings = tally_rdb::Encodings::default();
        let again = tally_rdb::restore(&tally_rdb::dump(&value, &encodings))
            .expect("a dump of an accepted payload restores");
        let first = tally_rdb::dump(&again, &encodings);
        let second = tally_rdb::dump(
            &tally_rdb::restore(&first).expect("a dump restores"),
            &encodings,
        );
        assert_eq!(first, second, "dumping is not stable");
        let _ = crate::persistence::from_rdb(value, &Default::default());
    }
    // FUNCTION RESTORE's payloads: what is accepted dumps and reads back
    // to the same libraries, compressed or not.
    if let Ok(codes) = tally_rdb::restore_functions(data) {
        for compress in [false, true] {
            let again = tally_rdb::restore_functions(&tally_rdb::dump_functions(
                codes.iter().map(Vec::as_slice),
                compress,
            ))
            .expect("a dump of accepted libraries restores");
            assert_eq!(again, codes, "libraries changed through a dump");
        }
    }
    let mut file = b"REDIS0010".to_vec();
    file.extend_from_slice(data);
    if let Ok(mut reader) = tally_rdb::Reader::new(&file) {
        while let Ok(Some(_)) = reader.next_item() {}
    }
}

/// Cluster bus messages as a hostile peer may send them, and the text
/// files a node reads at start (nodes.conf, the append-only manifest) and
/// the append-only file's commands: nothing panics; a message the decoder
/// accepts encodes to bytes that decode and encode the same from then on,
/// and a node's state machine takes it on either kind of link; accepted
/// files render back to text that parses to the same.
pub fn cluster_bus(data: &[u8]) {
    use tally_cluster::message;
    if let Ok(decoded) = message::decode(data) {
        let bytes = message::encode(&decoded);
        let again = message::decode(&bytes).expect("an encoded message decodes");
        assert_eq!(message::encode(&again), bytes, "encoding is not stable");
        let mut node = tally_cluster::node::Node::new([b'a'; 40], 7000, 17000, 2000, 1);
        let _ = node.on_inbound(&decoded, b"127.0.0.1", b"127.0.0.1", 0);
        let _ = node.on_outbound(&decoded.header.sender, &decoded, 1);
        let _ = node.tick(10_000);
        let _ = node.nodes_conf().render();
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(conf) = tally_cluster::nodes_conf::NodesConf::parse(text) {
            let rendered = conf.render();
            let again = tally_cluster::nodes_conf::NodesConf::parse(&rendered)
                .expect("a rendered nodes.conf parses");
            assert_eq!(
                again.render(),
                rendered,
                "nodes.conf rendering is not stable"
            );
        }
        if let Ok(manifest) = crate::persistence::aof::manifest::Manifest::parse(text) {
            let rendered = manifest.render();
            if !rendered.is_empty() {
                let again = crate::persistence::aof::manifest::Manifest::parse(&rendered)
                    .expect("a rendered manifest parses");
                assert_eq!(again.render(), rendered, "manifest rendering is not stable");
            }
        }
    }
    let mut at = 0;
    while at < data.len() {
        match crate::persistence::aof::load::parse_command(&data[at..]) {
            Ok(crate::persistence::aof::load::Parsed::Command(_, used))
            | Ok(crate::persistence::aof::load::Parsed::Annotation(used)) => {
                assert!(
                    used > 0 && at + used <= data.len(),
                    "a command's length is wrong"
                );
                at += used;
            }
            _ => break,
        }
    }
}
