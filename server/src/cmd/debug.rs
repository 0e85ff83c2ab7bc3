//! DEBUG: the subcommands Redis's own tests and tools use. SLEEP, PANIC and
//! HELP answer anyone (tally's tests and benchmarks sleep; PANIC tests the
//! panic boundary); the others show or change the server's internals, so
//! they follow `enable-debug-command` as all of Redis's DEBUG does.

use std::sync::atomic::Ordering;
use std::time::Duration;

use sha1_smol::Sha1;

use super::args::{is, parse_f64, parse_i64};
use super::error;
use super::server::help_reply;
use super::Ctx;
use crate::persistence::{self, snapshot};
use crate::resp::{Protocol, Reply};
use crate::store::object::StreamId;
use crate::store::{Entry, Object, ValueRef};

/// Redis's refusal of DEBUG under `enable-debug-command no`.
const DEBUG_NOT_ALLOWED: &str = concat!(
    "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", ",
    "you can run it from a local connection, otherwise you need to set this option in the ",
    "configuration file, and then restart the server."
);

/// DEBUG subcommand [argument ...]
pub fn debug(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let sub = argv[1];
    if is(sub, "sleep") && argv.len() == 3 {
        return sleep(ctx, argv[2]);
    }
    if is(sub, "panic") && argv.len() == 2 {
        // Redis crashes the whole server here. tally's connection boundary
        // contains a panic to the one client (it gets an error and is
        // closed); this is how that boundary is tested end to end.
        panic!("DEBUG PANIC");
    }
    if is(sub, "help") {
        return help();
    }
    let local = ctx.client.info.addr.is_local();
    if !ctx.shared.config.read().enable_debug_command.allows(local) {
        return Reply::error(DEBUG_NOT_ALLOWED);
    }
    match argv.len() {
        3 if is(sub, "object") => super::object::debug_object(ctx, argv[2]),
        2 if is(sub, "digest") => Reply::Status(hex(&dataset_digest(ctx)).into()),
        _ if is(sub, "digest-value") => digest_values(ctx, &argv[2..]),
        3 if is(sub, "set-active-expire") => {
            // Redis reads it with atoi; here anything but a number is 0.
            let on = parse_i64(argv[2]).unwrap_or(0) != 0;
            ctx.shared.active_expire.store(on, Ordering::Relaxed);
            Reply::Ok
        }
        3 if is(sub, "protocol") => protocol(ctx, argv[2]),
        3 if is(sub, "set-disable-deny-scripts") => {
            let on = parse_i64(argv[2]).unwrap_or(0) != 0;
            ctx.shared
                .scripts_may_call_noscript
                .store(on, Ordering::Relaxed);
            Reply::Ok
        }
        3 if is(sub, "quicklist-packed-threshold") => packed_threshold(argv[2]),
        _ if is(sub, "reload") => reload(ctx, &argv[2..]),
        3..=5 if is(sub, "populate") => populate(ctx, &argv[2..]),
        _ => Reply::error_bytes(error::subcommand_syntax("DEBUG", sub)),
    }
}

fn help() -> Reply {
    help_reply(
        "DEBUG",
        &[
            "DIGEST",
            "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Output a hex signature of the values of all the specified keys.",
            "OBJECT <key>",
            "    Show low level info about `key` and associated value.",
            "PANIC",
            "    Panic in this command; tally contains it to this connection.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Create <count> string keys named key:<num>. If <prefix> is specified then",
            "    it is used instead of the 'key' prefix. These are not propagated to",
            "    replicas. Cluster slots are not respected so keys not belonging to the",
            "    current node can be created in cluster mode.",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Sets the threshold for elements to be inserted as plain vs packed nodes",
            "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "RELOAD [option ...]",
            "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
            "    * MERGE: conflicting keys will be loaded from RDB.",
            "    * NOFLUSH: the existing database will not be removed before load, but",
            "      conflicting keys will generate an exception and kill the server.",
            "    * NOSAVE: the database will be loaded from an existing RDB file.",
            "    Examples:",
            "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
            "      the database.",
            "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
            "      existing RDB file.",
            "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
            "      file to the database.",
            "SET-DISABLE-DENY-SCRIPTS <0|1>",
            "    Allows scripts to call commands flagged noscript (for tests).",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
        ],
    )
}

/// DEBUG SLEEP seconds: only the calling connection waits (tally has no
/// single thread to stop).
fn sleep(ctx: &mut Ctx<'_>, seconds: &[u8]) -> Reply {
    let Some(seconds) = parse_f64(seconds).filter(|s| *s >= 0.0) else {
        return Reply::error(error::NOT_FLOAT);
    };
    // Redis converts to `long long` microseconds: a value too large for
    // it (inf, 1e300) comes out negative on x86 and nanosleep returns at
    // once. Sleep the same, without Duration's panic on overflow.
    let micros = seconds * 1e6;
    if micros < i64::MAX as f64 {
        ctx.client
            .then(super::After::Sleep(Duration::from_micros(micros as u64)));
    }
    Reply::Ok
}

/// DEBUG QUICKLIST-PACKED-THRESHOLD size: Redis stores a list element
/// past this size in a node of its own ("plain"); tally's lists have no
/// such nodes, so the size is checked as Redis checks it and changes
/// nothing (a list behaves the same either way).
fn packed_threshold(size: &[u8]) -> Reply {
    let parsed = std::str::from_utf8(size)
        .ok()
        .and_then(crate::config::parse_memory);
    match parsed {
        Some(bytes) if bytes <= (1u64 << 32) - (1 << 20) => Reply::Ok,
        _ => Reply::error("ERR argument must be a memory value bigger than 1 and smaller than 4gb"),
    }
}

/// A digest as Redis prints it: 40 lower-case hex digits.
fn hex(digest: &[u8; 20]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha1(bytes: &[u8]) -> [u8; 20] {
    Sha1::from(bytes).digest().bytes()
}

/// Redis's xorDigest: the SHA1 of `bytes` xored in, so the order of
/// what is accumulated does not matter.
fn xor_digest(digest: &mut [u8; 20], bytes: &[u8]) {
    for (d, h) in digest.iter_mut().zip(sha1(bytes)) {
        *d ^= h;
    }
}

/// Redis's mixDigest: `SHA1(digest xor SHA1(bytes))`, order-dependent.
fn mix_digest(digest: &mut [u8; 20], bytes: &[u8]) {
    xor_digest(digest, bytes);
    *digest = sha1(digest);
}

/// Redis's xorObjectDigest: the value's type, its elements (in order for a
/// list, xored for the unordered types), and whether it has a deadline.
/// Integers are digested as their text, scores as `%.17g`, as Redis does.
fn value_digest(digest: &mut [u8; 20], entry: &Entry) {
    if let ValueRef::Obj(Object::Stream(stream)) = entry.value() {
        // Every entry in order: its ID as `<ms>.<seq>`, then its fields
        // and values.
        mix_digest(digest, &6u32.to_be_bytes());
        for item in stream.range(StreamId::MIN, StreamId::MAX, false, 0) {
            mix_digest(digest, format!("{}.{}", item.id.ms, item.id.seq).as_bytes());
            for (field, value) in &item.fields {
                mix_digest(digest, field);
                mix_digest(digest, value);
            }
        }
        if entry.expire_at() != 0 {
            xor_digest(digest, b"!!expire!!");
        }
        return;
    }
    let value = persistence::to_rdb(entry.value());
    let type_code: u32 = match &value {
        tally_rdb::Value::String(_) => 0,
        tally_rdb::Value::List(_) => 1,
        tally_rdb::Value::Set(_) => 2,
        tally_rdb::Value::SortedSet(_) => 3,
        tally_rdb::Value::Hash(_) | tally_rdb::Value::HashWithExpiry(_) => 4,
        tally_rdb::Value::Stream(_) => 6,
    };
    mix_digest(digest, &type_code.to_be_bytes());
    let pair = |a: &[u8], b: &[u8]| {
        let mut element = [0u8; 20];
        mix_digest(&mut element, a);
        mix_digest(&mut element, b);
        element
    };
    match &value {
        tally_rdb::Value::String(bytes) => mix_digest(digest, bytes),
        tally_rdb::Value::List(items) => items.iter().for_each(|i| mix_digest(digest, i)),
        tally_rdb::Value::Set(members) => members.iter().for_each(|m| xor_digest(digest, m)),
        tally_rdb::Value::SortedSet(members) => {
            for (member, score) in members {
                let score = crate::float::format_g17(*score);
                xor_digest(digest, &pair(member, score.as_bytes()));
            }
        }
        tally_rdb::Value::Hash(pairs) => {
            for (field, value) in pairs {
                xor_digest(digest, &pair(field, value));
            }
        }
        tally_rdb::Value::HashWithExpiry(fields) => {
            for (field, value, _) in fields {
                xor_digest(digest, &pair(field, value));
            }
        }
        // Digested from the store's form above.
        tally_rdb::Value::Stream(_) => {}
    }
    if entry.expire_at() != 0 {
        xor_digest(digest, b"!!expire!!");
    }
}

/// Redis's computeDatasetDigest: per database that has keys, its number
/// mixed in, then each key's digest (the key mixed with its value's)
/// xored in.
fn dataset_digest(ctx: &mut Ctx<'_>) -> [u8; 20] {
    let mut total = [0u8; 20];
    for db in 0..ctx.shared.store.databases() {
        let mut keys = 0;
        let mut xored = [0u8; 20];
        for shard in ctx.lock_all(db).shards() {
            for entry in shard.iter_live(ctx.now_ms) {
                let mut digest = [0u8; 20];
                mix_digest(&mut digest, entry.key());
                value_digest(&mut digest, entry);
                xor_digest(&mut xored, &digest);
                keys += 1;
            }
        }
        if keys == 0 {
            continue;
        }
        mix_digest(&mut total, &(db as u32).to_be_bytes());
        for (t, x) in total.iter_mut().zip(xored) {
            *t ^= x;
        }
    }
    total
}

/// DEBUG DIGEST-VALUE key ...: each value's digest (without its key), 40
/// zeros for a missing key; keys past their deadline not yet deleted
/// count, as Redis reads its dict directly.
fn digest_values(ctx: &mut Ctx<'_>, keys: &[&[u8]]) -> Reply {
    let replies = keys
        .iter()
        .map(|bytes| {
            let key = ctx.key(bytes);
            let shard = ctx.lock(key);
            let mut digest = [0u8; 20];
            if let Some(entry) = shard.peek(key) {
                value_digest(&mut digest, entry);
            }
            Reply::Status(hex(&digest).into())
        })
        .collect();
    Reply::Array(replies)
}

/// DEBUG PROTOCOL type: a sample reply of each RESP type, as Redis's.
fn protocol(ctx: &mut Ctx<'_>, name: &[u8]) -> Reply {
    let resp3 = ctx.client.proto == Protocol::Resp3;
    let name = String::from_utf8_lossy(name).to_ascii_lowercase();
    match name.as_str() {
        "string" => Reply::BulkStatic(b"Hello World"),
        "integer" => Reply::Int(12345),
        // Redis's sample value, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        "double" => Reply::Double(3.141),
        "bignum" if resp3 => Reply::Raw(b"(1234567999999999999999999999999999999\r\n".to_vec()),
        "bignum" => Reply::BulkStatic(b"1234567999999999999999999999999999999"),
        "null" => Reply::Nil,
        "array" => Reply::Array((0..3).map(Reply::Int).collect()),
        "set" => Reply::Set((0..3).map(Reply::Int).collect()),
        "map" => Reply::Map(
            (0..3)
                .map(|j| (Reply::Int(j), Reply::Bool(j == 1)))
                .collect(),
        ),
        "attrib" => {
            let real = Reply::BulkStatic(b"Some real reply following the attribute");
            if resp3 {
                let attribute = b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n";
                Reply::Multi(vec![Reply::Raw(attribute.to_vec()), real])
            } else {
                real
            }
        }
        "push" if !resp3 => Reply::error("ERR RESP2 is not supported by this command"),
        "push" => Reply::Multi(vec![
            Reply::Push(vec![Reply::BulkStatic(b"server-cpu-usage"), Reply::Int(42)]),
            Reply::BulkStatic(b"Some real reply following the push reply"),
        ]),
        "true" => Reply::Bool(true),
        "false" => Reply::Bool(false),
        "verbatim" => Reply::Verbatim(b"This is a verbatim\nstring".to_vec()),
        _ => Reply::error(
            "ERR Wrong protocol type name. Please use one of the following: \
             string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        ),
    }
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: the snapshot saved, the
/// dataset and function libraries emptied, the snapshot loaded back, with
/// other clients answered -LOADING meanwhile, as Redis does. NOFLUSH
/// without MERGE fails, as Redis's, when a function library of the file is
/// loaded already; a key both in memory and in the file is replaced (Redis
/// crashes on it).
fn reload(ctx: &mut Ctx<'_>, options: &[&[u8]]) -> Reply {
    let (mut flush, mut save, mut merge) = (true, true, false);
    for option in options {
        if is(option, "merge") {
            merge = true;
        } else if is(option, "noflush") {
            flush = false;
        } else if is(option, "nosave") {
            save = false;
        } else {
            return Reply::error(
                "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
            );
        }
    }
    // The reload holds this client for its length, as Redis's does; the
    // other connections of its worker move to another thread meanwhile,
    // so that they are answered (-LOADING during the load) as Redis
    // answers every client while it loads.
    crate::store::off_worker(|| reload_now(ctx, flush, save, merge))
}

/// DEBUG RELOAD's save, flush and load.
fn reload_now(ctx: &mut Ctx<'_>, flush: bool, save: bool, merge: bool) -> Reply {
    let shared = ctx.shared;
    if save && super::persistence::save_now(shared).is_err() {
        return Reply::error("ERR");
    }
    shared.persistence.loading.store(true, Ordering::SeqCst);
    if flush {
        for db in 0..shared.store.databases() {
            for shard in ctx.lock_all(db).shards() {
                shard.clear();
            }
        }
        shared.tracking.flushed();
        shared.scripts.functions.flush();
    }
    let skip_unsupported = shared.config.read().rdb_skip_unsupported;
    let loaded = snapshot::open(shared).and_then(|data| match data {
        Some(data) if !flush && !merge => match clashing_library(shared, &data) {
            Some(name) => Err(format!("Library {name} already exists")),
            None => snapshot::load(shared, &data, skip_unsupported).map(|_| ()),
        },
        Some(data) => snapshot::load(shared, &data, skip_unsupported).map(|_| ()),
        None => Err("no snapshot file".to_string()),
    });
    shared.persistence.loading.store(false, Ordering::SeqCst);
    match loaded {
        Ok(()) => {
            tracing::warn!("DB reloaded by DEBUG RELOAD");
            Reply::Ok
        }
        Err(why) => {
            tracing::warn!("DEBUG RELOAD: {why}");
            Reply::error("ERR Error trying to load the RDB dump")
        }
    }
}

/// A function library of the snapshot `data` that is loaded already:
/// without MERGE, Redis refuses to load it over the one in memory.
fn clashing_library(shared: &crate::state::Shared, data: &[u8]) -> Option<String> {
    let loaded: Vec<String> = shared
        .scripts
        .functions
        .libraries()
        .iter()
        .map(|library| library.name.to_ascii_lowercase())
        .collect();
    let mut reader = tally_rdb::Reader::new(data).ok()?;
    while let Ok(Some(item)) = reader.next_item() {
        if let tally_rdb::Item::Function(code) = item {
            let name = crate::scripting::functions::library_name(&code).ok()?;
            if loaded.contains(&name.to_ascii_lowercase()) {
                return Some(name);
            }
        }
    }
    None
}

/// DEBUG POPULATE count [prefix] [size]: `count` string keys
/// `<prefix>:<n>` (prefix `key`) holding `value:<n>`, cut or padded with
/// zero bytes to `size`; existing keys are left alone. Not propagated, as
/// in Redis.
fn populate(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    // Redis's getPositiveLongFromObjectOrReply: one error for both.
    let positive = |arg: &[u8]| {
        parse_i64(arg)
            .filter(|n| *n >= 0)
            .ok_or_else(|| Reply::error("ERR value is out of range, must be positive"))
    };
    let count = match positive(args[0]) {
        Ok(n) => n,
        Err(reply) => return reply,
    };
    let size = match args.get(2).map(|arg| positive(arg)) {
        Some(Ok(n)) => Some(n as usize),
        Some(Err(reply)) => return reply,
        None => None,
    };
    let prefix = args.get(1).copied().unwrap_or(b"key");
    for j in 0..count {
        let mut name = prefix.to_vec();
        name.extend_from_slice(format!(":{j}").as_bytes());
        let mut value = format!("value:{j}").into_bytes();
        if let Some(size) = size {
            value.resize(size, 0);
        }
        let key = ctx.key(&name);
        let mut shard = ctx.lock(key);
        if shard.get(key, ctx.now_ms).is_none() {
            shard.set(key, ValueRef::string(&value), 0, ctx.now_ms);
        }
    }
    Reply::Ok
}
