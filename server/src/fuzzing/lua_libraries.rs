//! The Lua libraries a script can reach, called with edge values.
//!
//! Lua 5.1 and the C libraries Redis ships with it (`bit`, `struct`,
//! `cmsgpack`, `cjson`, and the base, string, table and math libraries)
//! are vendored C: where Redis found its Lua CVEs (CVE-2024-31449 in
//! `bit.tohex`, CVE-2025-46817 in `unpack`, ...). The fuzzer's bytes choose
//! a sequence of library calls and, for each argument, a value from a
//! table of edges (±2^31, 2^53, 2^63, inf, nan, huge counts and lengths,
//! malformed formats, payloads and chunks). The calls become one script,
//! each call under `pcall`, run by EVAL through the dispatcher on the
//! server's own VM: the sandbox, the memory limit and the reply
//! conversion are the ones clients get. The invariant is that nothing
//! crashes: in the fuzz build the C is compiled with AddressSanitizer
//! (vendor/lua-src/src/lib.rs), so a read past a buffer is a crash even
//! where it would not fault.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::cmd::{self, ClientState, Ctx};
use crate::config::Config;
use crate::resp::Reply;
use crate::state::{ClientInfo, Shared};

/// Library calls: the function (a library path, or a Lua function for an
/// operator) and the kind of each argument it expects: `n` a number, `p`
/// a small position, `s` a string, `t` a table, `a` anything.
const CALLS: &[(&str, &str)] = &[
    ("unpack", "tnn"),
    ("select", "na"),
    // Not the empty string a huge number of times: that is a loop of 2^31
    // empty appends inside one C call (seconds, uninterruptible, as on
    // Redis: docs/security.md), which the fuzzer would report as a hang.
    (
        "function(s, n) if s ~= '' or n < 1e6 then return string.rep(s, n) end end",
        "sn",
    ),
    ("string.format", "sa"),
    ("string.format", "san"),
    ("string.sub", "snn"),
    ("string.byte", "snn"),
    ("string.char", "nn"),
    ("string.find", "ssn"),
    ("string.gsub", "sss"),
    ("string.match", "ss"),
    ("string.upper", "s"),
    ("string.reverse", "s"),
    ("string.len", "s"),
    ("table.concat", "tsnn"),
    // Its position is a small one: stock Lua 5.1 shifts the elements one
    // by one from the end down to it, 2^31 steps for -2^31, inside one C
    // call that no hook interrupts (as on Redis: noted in docs/security.md).
    ("table.insert", "tpa"),
    ("table.remove", "tn"),
    ("table.sort", "t"),
    ("table.getn", "t"),
    ("bit.tohex", "nn"),
    ("bit.band", "nn"),
    ("bit.bor", "nnn"),
    ("bit.bxor", "nn"),
    ("bit.lshift", "nn"),
    ("bit.rshift", "nn"),
    ("bit.arshift", "nn"),
    ("bit.rol", "nn"),
    ("bit.ror", "nn"),
    ("bit.bnot", "n"),
    ("bit.bswap", "n"),
    ("bit.tobit", "n"),
    ("struct.pack", "san"),
    ("struct.unpack", "ssn"),
    ("struct.size", "s"),
    ("cmsgpack.pack", "aa"),
    ("cmsgpack.unpack", "s"),
    ("cmsgpack.unpack_one", "sn"),
    ("cmsgpack.unpack_limit", "snn"),
    ("cjson.encode", "a"),
    ("cjson.decode", "s"),
    ("tonumber", "sn"),
    ("tostring", "a"),
    ("loadstring", "ss"),
    ("math.floor", "n"),
    ("math.fmod", "nn"),
    ("math.pow", "nn"),
    ("math.ldexp", "nn"),
    ("math.frexp", "n"),
    ("math.modf", "n"),
    ("math.max", "nn"),
    ("math.random", "nn"),
    ("redis.sha1hex", "s"),
    ("redis.error_reply", "s"),
    ("redis.status_reply", "s"),
    (
        "function(c, n) local f = loadstring(c, n) if f then return f() end end",
        "ss",
    ),
    ("function(a, b) return a .. b end", "aa"),
    ("function(a, b) return a % b end", "nn"),
    ("function(a, b) return a[b] end", "ta"),
    ("function(a, b, c) a[b] = c return a end", "tna"),
    ("function(a) return #a end", "a"),
    ("function(a, b) return {a, b} end", "aa"),
];

/// Numeric arguments, as Lua expressions: the edges of int, int32,
/// double and size_t, where the C libraries convert and overflow.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "-2",
    "3",
    "7",
    "8",
    "9",
    "31",
    "32",
    "33",
    "63",
    "64",
    "255",
    "256",
    "65535",
    "65536",
    "100000",
    "1e9",
    "2147483647",
    "-2147483647",
    "-2147483648",
    "2147483648",
    "-2147483649",
    "4294967295",
    "4294967296",
    "2^53",
    "-2^53",
    "2^63",
    "-2^63",
    "2^64",
    "1e308",
    "-1e308",
    "1/0",
    "-1/0",
    "0/0",
    "0.5",
    "-0.5",
    "1e-310",
];

/// String arguments: formats, patterns, numbers as text, binary, struct
/// formats, MessagePack and JSON that claim more than they carry, Lua
/// chunks for loadstring.
const STRINGS: &[&str] = &[
    // strings: formats, patterns, numbers as text, binary
    "''",
    "'a'",
    "'abc'",
    "string.rep('x', 300)",
    "'\\0'",
    "'\\255\\254'",
    "'%'",
    "'%d'",
    "'%5.2s'",
    "'%99d'",
    "'%-99.99f'",
    "'%q'",
    "'%c'",
    "'%x'",
    "'%i'",
    "'%g'",
    "'%e'",
    "'%o'",
    "'%%'",
    "'%s%s%s'",
    "'(.-)%1'",
    "'[^'",
    "'%f[%w]'",
    "'((((((((('",
    "'1e400'",
    "'0x10'",
    "' 12 '",
    "'-0'",
    // struct formats
    "'i'",
    "'I4'",
    "'i8'",
    "'<i8'",
    "'>I3'",
    "'bBhH'",
    "'lL'",
    "'fd'",
    "'c0'",
    "'c1'",
    "'s'",
    "'x'",
    "'!'",
    "'!8i'",
    "'!3i'",
    "'i17'",
    "'c99999999'",
    "'i0'",
    "'c-1'",
    // MessagePack headers that claim more than they carry
    "'\\220\\255\\255'",
    "'\\221\\255\\255\\255\\255'",
    "'\\222\\255\\255'",
    "'\\219\\255\\255\\255\\255'",
    "'\\218\\255\\255'",
    "'\\203'",
    "'\\207\\255\\255\\255\\255\\255\\255\\255\\255'",
    "'\\211\\128\\0\\0\\0\\0\\0\\0\\0'",
    // JSON, malformed and deep
    "'['",
    "'[['",
    "string.rep('[', 2000)",
    "'{\"a\":'",
    "'\"\\\\u'",
    "'[1,2'",
    "'1e999'",
    "'-'",
    "'\"\\\\ud800\"'",
    "'{\"a\":[1,{\"b\":null}]}'",
    // Lua chunks for loadstring: long brackets, binary, unfinished
    "'return'",
    "'return [=[x]=]'",
    "'x = [==['",
    "'--[['",
    "'\\27Lua'",
    "'return ' .. string.rep('(', 300)",
    "'local a = {' .. string.rep('1,', 300) .. '}'",
    "string.rep('\\n', 1000)",
    "'return [' .. string.rep('=', 300) .. '['",
];

/// Table arguments. `T` is a fresh small array and `S` a table that
/// contains itself, both made at the top of each script.
const TABLES: &[&str] = &[
    "T",
    "S",
    "{}",
    "{1, nil, 3}",
    "{[-2147483648] = 1, [2147483647] = 2}",
    "{{{{}}}}",
    "{string.rep('x', 300), 2^53, -1/0}",
];

/// What is left for arguments of any kind.
const OTHERS: &[&str] = &["nil", "true", "false", "function() return 1 end"];

/// The argument the next bytes pick for a parameter of `kind`: mostly a
/// value of that kind (the memory errors Redis fixed so far took a number
/// at an edge in a call that got the types it expected); one byte in eight
/// picks from every value, so that wrong types are tried too.
fn argument(kind: u8, bytes: &mut impl Iterator<Item = u8>) -> &'static str {
    let byte = bytes.next().unwrap_or(0);
    let pick = |table: &[&'static str], byte: u8| table[byte as usize % table.len()];
    if kind == b'a' || (byte >= 0xe0 && kind != b'p') {
        let byte = if kind == b'a' {
            byte
        } else {
            bytes.next().unwrap_or(0)
        };
        return match byte % 4 {
            0 => pick(NUMBERS, byte / 4),
            1 => pick(STRINGS, byte / 4),
            2 => pick(TABLES, byte / 4),
            _ => pick(OTHERS, byte / 4),
        };
    }
    match kind {
        b'n' => pick(NUMBERS, byte),
        b'p' => pick(&["-1", "0", "1", "2", "3", "4", "100", "-100"], byte),
        b's' => pick(STRINGS, byte),
        _ => pick(TABLES, byte),
    }
}

/// The script the bytes describe: each call takes one byte for the
/// function and one per argument, at most 24 calls.
pub fn script_from(data: &[u8]) -> String {
    // S refers to itself once: twice would make cmsgpack's walk of it,
    // which stops at 16 levels, 2^16 paths long (slow by design, as in
    // Redis, and a timeout to the fuzzer).
    let mut script = String::from("local T = {1, 2, 3} local S = {1, 2} S[3] = S local ok = 0\n");
    let mut bytes = data.iter().copied();
    for _ in 0..24 {
        let Some(pick) = bytes.next() else {
            break;
        };
        let (function, kinds) = CALLS[pick as usize % CALLS.len()];
        let args: Vec<&str> = kinds
            .bytes()
            .map(|kind| argument(kind, &mut bytes))
            .collect();
        // The results are gathered in a table, not returned through
        // pcall: stock Lua 5.1's pcall pushes its status past the stack
        // its caller reserved when a call returns hundreds of results,
        // which the debug build's API checks abort on (the release build
        // has the slots: Lua keeps EXTRA_STACK spare).
        script.push_str(&format!(
            "if pcall(function(...) local r = {{({function})(...)}} return #r end, {}) then ok = ok + 1 end\n",
            args.join(", ")
        ));
    }
    script.push_str("return ok\n");
    script
}

thread_local! {
    /// One server per fuzzing thread: scripts leave nothing in the
    /// keyspace, and the VM is the thread's anyway.
    static SERVER: Arc<Shared> = Arc::new(Shared::new(Config {
        port: 0,
        shards: 2,
        maxmemory: 32 * 1024 * 1024,
        // Small enough that `string.rep(s, 2^31)` fails fast (a run that
        // fills a large limit costs tens of ms under AddressSanitizer).
        lua_memory_limit: 4 * 1024 * 1024,
        save_points: Vec::new(),
        ..Config::default()
    }));
}

/// Runs the script the bytes describe; the process surviving is the check,
/// and the reply is a number of successful calls or an error.
pub fn lua_libraries(data: &[u8]) {
    let script = script_from(data);
    SERVER.with(|shared| {
        let addr = SocketAddr::from(([127, 0, 0, 1], 1));
        let info = Arc::new(ClientInfo::new(1, addr, addr, 0));
        let mut client = ClientState::new(info, true);
        let mut ctx = Ctx {
            shared,
            client: &mut client,
            now_ms: 1_720_000_000_000,
            held: None,
        };
        let argv: [&[u8]; 3] = [b"EVAL", script.as_bytes(), b"0"];
        let reply = cmd::dispatch(&mut ctx, &argv);
        assert!(
            matches!(reply, Reply::Int(_) | Reply::Error(_)),
            "EVAL of a generated script answered {reply:?}\n{script}"
        );
        // Every input is a new script: without a flush the cache and the
        // VM would keep them all, and each run would get slower.
        let flush: [&[u8]; 2] = [b"SCRIPT", b"FLUSH"];
        cmd::dispatch(&mut ctx, &flush);
    });
}
