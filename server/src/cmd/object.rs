//! Per-key introspection: OBJECT's subcommands and DEBUG OBJECT. They look
//! at a key without using it, so none of them stamps its access time (as
//! Redis's LOOKUP_NOTOUCH), and IDLETIME reads that time.

use super::Ctx;
use crate::persistence::{self, snapshot};
use crate::resp::Reply;
use crate::store::{access_clock, Entry, ValueRef};

/// OBJECT ENCODING key
pub fn object_encoding(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let _untouched = access_clock::untouched();
    let key = ctx.key(argv[2]);
    let mut shard = ctx.lock(key);
    match shard.lookup_read(key, ctx.now_ms) {
        Some(entry) => Reply::bulk(encoding(entry).as_bytes()),
        None => Reply::Nil,
    }
}

/// The encoding Redis 7.0 would hold the value in.
fn encoding(entry: &Entry) -> &'static str {
    match entry.value() {
        ValueRef::Int(_) => "int",
        // Redis keeps strings of up to 44 bytes in one allocation with their
        // object header ("embstr"); longer ones are "raw".
        ValueRef::Str(bytes) if bytes.len() <= 44 => "embstr",
        ValueRef::Str(_) => "raw",
        ValueRef::Obj(object) => object.encoding(),
    }
}

/// Redis's reference count of a shared object (OBJ_SHARED_REFCOUNT).
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
/// Redis shares the integer values 0..OBJ_SHARED_INTEGERS between keys.
const SHARED_INTEGERS: i64 = 10_000;

/// Redis's reference count for the value: shared for an integer value
/// Redis keeps shared (0 to 9999; Redis shares them under every policy
/// but LRU and LFU ones, and tally runs noeviction only), else 1.
fn refcount(entry: &Entry) -> i64 {
    match entry.value() {
        ValueRef::Int(n) if (0..SHARED_INTEGERS).contains(&n) => SHARED_REFCOUNT,
        _ => 1,
    }
}

/// OBJECT REFCOUNT key
pub fn object_refcount(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let _untouched = access_clock::untouched();
    let key = ctx.key(argv[2]);
    let mut shard = ctx.lock(key);
    match shard.lookup_read(key, ctx.now_ms) {
        Some(entry) => Reply::Int(refcount(entry)),
        None => Reply::Nil,
    }
}

/// OBJECT IDLETIME key: seconds since the key was last used, from its
/// access clock (`crate::store::access_clock`).
pub fn object_idletime(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let _untouched = access_clock::untouched();
    let key = ctx.key(argv[2]);
    let mut shard = ctx.lock(key);
    match shard.lookup_read(key, ctx.now_ms) {
        Some(entry) => {
            Reply::Int((access_clock::idle_ms(entry.access_clock(), ctx.now_ms) / 1000) as i64)
        }
        None => Reply::Nil,
    }
}

/// OBJECT FREQ key: tally runs noeviction only, so no access frequency is
/// kept, and Redis answers this error under any policy but an LFU one.
pub fn object_freq(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let _untouched = access_clock::untouched();
    let key = ctx.key(argv[2]);
    let mut shard = ctx.lock(key);
    if shard.lookup_read(key, ctx.now_ms).is_none() {
        return Reply::Nil;
    }
    Reply::error(
        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. \
         Please note that when switching between policies at runtime LRU and LFU data \
         will take some time to adjust.",
    )
}

/// OBJECT HELP
pub fn object_help(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    super::server::help_reply(
        "OBJECT",
        &[
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
        ],
    )
}

/// DEBUG OBJECT key: Redis's line about the value as the table holds it,
/// past its deadline too (Redis reads its dict directly, and tests use
/// that to see a key that has logically expired but is not deleted yet).
/// `Value at:` is the entry's block, which an in-place change (INCR of an
/// integer) keeps; `serializedlength` is the value's RDB encoding, as
/// DUMP writes it; a list adds Redis 7.0's quicklist fields for the nodes
/// it is written as.
pub fn debug_object(ctx: &mut Ctx<'_>, key: &[u8]) -> Reply {
    let key = ctx.key(key);
    let shard = ctx.lock(key);
    let Some(entry) = shard.peek(key) else {
        return Reply::error("ERR no such key");
    };
    let value = persistence::to_rdb(entry.value());
    let encodings = snapshot::encodings(ctx.shared);
    // The type byte before it and the version and checksum after it are
    // DUMP's; Redis counts the object alone.
    let serialized = tally_rdb::dump(&value, &encodings).len() - 1 - 10;
    let clock = entry.access_clock();
    let mut line = format!(
        "Value at:{:p} refcount:{} encoding:{} serializedlength:{} lru:{} lru_seconds_idle:{}",
        entry.block_address(),
        refcount(entry),
        encoding(entry),
        serialized,
        clock,
        access_clock::idle_ms(clock, ctx.now_ms) / 1000,
    );
    drop(shard);
    if let tally_rdb::Value::List(items) = &value {
        let nodes = tally_rdb::list_node_sizes(items, &encodings);
        let config = ctx.shared.config.read();
        line.push_str(&format!(
            " ql_nodes:{} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:{} ql_uncompressed_size:{}",
            nodes.len(),
            items.len() as f64 / nodes.len() as f64,
            config.list_max_listpack_size,
            u8::from(config.list_compress_depth != 0),
            nodes.iter().sum::<usize>(),
        ));
    }
    Reply::Status(line.into())
}
