//! Keyspace commands: deletion, TTLs, renaming, iteration, databases.

use super::args::{glob_match, int_arg, is};
use super::error;
use super::Ctx;
use crate::event_classes::class;
use crate::resp::Reply;
use crate::store::{access_clock, Entry, KeyRef, OwnedValue, ShardData, ShardGuard, ValueRef};

/// The name TYPE reports for an entry.
pub fn type_name(entry: &Entry) -> &'static str {
    match entry.value() {
        ValueRef::Obj(object) => object.type_name(),
        _ => "string",
    }
}

/// DEL key [key ...] (and UNLINK: memory is freed at once either way, the
/// entries are small and freeing them never blocks on I/O).
pub fn del(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let keys: Vec<_> = argv[1..].iter().map(|k| ctx.key(k)).collect();
    let mut locked = ctx.lock_keys(&keys);
    let mut removed = 0;
    for key in &keys {
        if locked.shard(*key).remove(*key, ctx.now_ms) {
            ctx.notify(class::GENERIC, "del", key.bytes);
            removed += 1;
        }
    }
    Reply::Int(removed)
}

/// EXISTS key [key ...]; a key named twice counts twice.
/// It looks without using: the keys' access times stay as they were, as
/// Redis's LOOKUP_NOTOUCH leaves them.
pub fn exists(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let _untouched = access_clock::untouched();
    count_live(ctx, argv)
}

/// TOUCH key [key ...]: EXISTS that stamps the keys as used now.
pub fn touch(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    count_live(ctx, argv)
}

fn count_live(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let keys: Vec<_> = argv[1..].iter().map(|k| ctx.key(k)).collect();
    let mut locked = ctx.lock_keys(&keys);
    let found = keys
        .iter()
        .filter(|key| locked.shard(**key).lookup_read(**key, ctx.now_ms).is_some())
        .count();
    Reply::Int(found as i64)
}

#[derive(Default)]
struct ExpireFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

fn parse_expire_flags(options: &[&[u8]]) -> Result<ExpireFlags, Reply> {
    let mut flags = ExpireFlags::default();
    for opt in options {
        if is(opt, "nx") {
            flags.nx = true;
        } else if is(opt, "xx") {
            flags.xx = true;
        } else if is(opt, "gt") {
            flags.gt = true;
        } else if is(opt, "lt") {
            flags.lt = true;
        } else {
            return Err(Reply::error(format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(opt)
            )));
        }
    }
    if flags.nx && (flags.xx || flags.gt || flags.lt) {
        return Err(Reply::error(error::NX_XX_GT_LT));
    }
    if flags.gt && flags.lt {
        return Err(Reply::error(error::GT_LT));
    }
    Ok(flags)
}

/// The four EXPIRE commands differ in unit and base time only.
fn expire_generic(ctx: &mut Ctx<'_>, argv: &[&[u8]], seconds: bool, relative: bool) -> Reply {
    let flags = match parse_expire_flags(&argv[3..]) {
        Ok(flags) => flags,
        Err(reply) => return reply,
    };
    let mut when = match int_arg(argv[2]) {
        Ok(n) => n,
        Err(reply) => return reply,
    };
    let name = String::from_utf8_lossy(argv[0]).to_ascii_lowercase();
    let invalid = || Reply::error(error::invalid_expire(&name));
    if seconds {
        if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&when) {
            return invalid();
        }
        when *= 1000;
    }
    let base = if relative { ctx.now_ms as i64 } else { 0 };
    if when > i64::MAX - base {
        return invalid();
    }
    when += base;
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let Some(mut entry) = shard.get_mut(key, ctx.now_ms) else {
        return Reply::Int(0);
    };
    let current = entry.expire_at();
    let refused = (flags.nx && current != 0)
        || (flags.xx && current == 0)
        || (flags.gt && (current == 0 || when <= current as i64))
        || (flags.lt && current != 0 && when >= current as i64);
    if refused {
        return Reply::Int(0);
    }
    if when <= ctx.now_ms as i64 {
        drop(entry);
        shard.remove(key, ctx.now_ms);
        ctx.notify(class::GENERIC, "del", argv[1]);
    } else {
        entry.set_expire_at(when as u64);
        drop(entry);
        ctx.notify(class::GENERIC, "expire", argv[1]);
    }
    Reply::Int(1)
}

/// EXPIRE key seconds [NX | XX | GT | LT]
pub fn expire(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    expire_generic(ctx, argv, true, true)
}

/// PEXPIRE key milliseconds [NX | XX | GT | LT]
pub fn pexpire(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    expire_generic(ctx, argv, false, true)
}

/// EXPIREAT key unix-time-seconds [NX | XX | GT | LT]
pub fn expireat(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    expire_generic(ctx, argv, true, false)
}

/// PEXPIREAT key unix-time-milliseconds [NX | XX | GT | LT]
pub fn pexpireat(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    expire_generic(ctx, argv, false, false)
}

/// TTL, PTTL, EXPIRETIME and PEXPIRETIME: -2 for a missing key, -1 for no
/// deadline. Asking when a key expires does not use it (its access time
/// stays, as Redis's LOOKUP_NOTOUCH leaves it).
fn ttl_generic(ctx: &mut Ctx<'_>, argv: &[&[u8]], millis: bool, absolute: bool) -> Reply {
    let _untouched = access_clock::untouched();
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let Some(entry) = shard.lookup_read(key, ctx.now_ms) else {
        return Reply::Int(-2);
    };
    let at = entry.expire_at();
    if at == 0 {
        return Reply::Int(-1);
    }
    let ms = if absolute {
        at as i64
    } else {
        (at as i64 - ctx.now_ms as i64).max(0)
    };
    Reply::Int(if millis { ms } else { (ms + 500) / 1000 })
}

/// TTL key
pub fn ttl(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    ttl_generic(ctx, argv, false, false)
}

/// PTTL key
pub fn pttl(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    ttl_generic(ctx, argv, true, false)
}

/// EXPIRETIME key
pub fn expiretime(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    ttl_generic(ctx, argv, false, true)
}

/// PEXPIRETIME key
pub fn pexpiretime(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    ttl_generic(ctx, argv, true, true)
}

/// PERSIST key
pub fn persist(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let reply = match shard.get_mut(key, ctx.now_ms) {
        Some(mut entry) if entry.expire_at() != 0 => {
            entry.set_expire_at(0);
            drop(entry);
            ctx.notify(class::GENERIC, "persist", argv[1]);
            Reply::Int(1)
        }
        _ => Reply::Int(0),
    };
    reply
}

/// TYPE key; the key's access time stays, as for TTL.
pub fn type_of(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let _untouched = access_clock::untouched();
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    match shard.lookup_read(key, ctx.now_ms) {
        Some(entry) => Reply::status(type_name(entry)),
        None => Reply::status("none"),
    }
}

/// A copy of an entry's value and deadline, to be written under another
/// key (possibly in another shard or database): COPY's, which copies a
/// collection whole as Redis's does. RENAME and MOVE take the value out
/// instead (`ShardData::take`), which moves a collection without copying.
struct Detached {
    value: OwnedValue,
    expire_at: u64,
}

impl Detached {
    fn of(entry: &Entry) -> Detached {
        Detached {
            value: OwnedValue::of(entry.value()),
            expire_at: entry.expire_at(),
        }
    }

    /// Stores the value and deadline under `key`, replacing what is there.
    fn store(self, shard: &mut ShardData, key: KeyRef<'_>, now_ms: u64) {
        shard.set_owned(key, self.value, self.expire_at, now_ms);
    }
}

fn rename_generic(ctx: &mut Ctx<'_>, argv: &[&[u8]], only_if_absent: bool) -> Reply {
    let (src, dst) = (ctx.key(argv[1]), ctx.key(argv[2]));
    let mut locked = ctx.lock_keys(&[src, dst]);
    if !locked.shard(src).contains(src, ctx.now_ms) {
        return Reply::error(error::NO_SUCH_KEY);
    }
    if argv[1] == argv[2] {
        return if only_if_absent {
            Reply::Int(0)
        } else {
            Reply::Ok
        };
    }
    let replaced = locked.shard(dst).contains(dst, ctx.now_ms);
    if only_if_absent && replaced {
        return Reply::Int(0);
    }
    let Some((value, expire_at)) = locked.shard(src).take(src, ctx.now_ms) else {
        return Reply::error(error::NO_SUCH_KEY);
    };
    locked
        .shard(dst)
        .set_owned(dst, value, expire_at, ctx.now_ms);
    // Redis deletes a destination that exists and adds the key anew, so
    // it is `new` either way (the store says so for one that did not).
    if replaced {
        ctx.notify(class::NEW, "new", argv[2]);
    }
    ctx.notify(class::GENERIC, "rename_from", argv[1]);
    ctx.notify(class::GENERIC, "rename_to", argv[2]);
    if only_if_absent {
        Reply::Int(1)
    } else {
        Reply::Ok
    }
}

/// RENAME key newkey
pub fn rename(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    rename_generic(ctx, argv, false)
}

/// RENAMENX key newkey
pub fn renamenx(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    rename_generic(ctx, argv, true)
}

fn db_index(ctx: &Ctx<'_>, arg: &[u8]) -> Result<usize, Reply> {
    let index = int_arg(arg)?;
    if index < 0 || index as usize >= ctx.shared.store.databases() {
        return Err(Reply::error(error::DB_INDEX_OUT_OF_RANGE));
    }
    Ok(index as usize)
}

/// The shards holding a source and a destination key, possibly in different
/// databases, possibly the same shard.
enum TwoShards<'a> {
    Same(ShardGuard<'a>),
    Apart {
        src: ShardGuard<'a>,
        dst: ShardGuard<'a>,
    },
}

impl TwoShards<'_> {
    fn src(&mut self) -> &mut ShardData {
        match self {
            TwoShards::Same(shard) => shard,
            TwoShards::Apart { src, .. } => src,
        }
    }

    fn dst(&mut self) -> &mut ShardData {
        match self {
            TwoShards::Same(shard) => shard,
            TwoShards::Apart { dst, .. } => dst,
        }
    }
}

/// Locks the shards of `src` in database `src_db` and `dst` in `dst_db` in the
/// global order (database, then shard).
fn lock_two<'a>(
    ctx: &Ctx<'a>,
    src_db: usize,
    src: KeyRef<'_>,
    dst_db: usize,
    dst: KeyRef<'_>,
) -> TwoShards<'a> {
    let store = &ctx.shared.store;
    let (sa, sb) = (
        store.db(src_db).shard_of(src),
        store.db(dst_db).shard_of(dst),
    );
    if (src_db, sa) == (dst_db, sb) {
        TwoShards::Same(ctx.lock_shard(src_db, sa))
    } else if (src_db, sa) < (dst_db, sb) {
        let src = ctx.lock_shard(src_db, sa);
        let dst = ctx.lock_shard(dst_db, sb);
        TwoShards::Apart { src, dst }
    } else {
        let dst = ctx.lock_shard(dst_db, sb);
        let src = ctx.lock_shard(src_db, sa);
        TwoShards::Apart { src, dst }
    }
}

/// COPY source destination [DB destination-db] [REPLACE]
pub fn copy(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let mut replace = false;
    let mut dst_db = ctx.client.db;
    let mut i = 3;
    while i < argv.len() {
        if is(argv[i], "replace") {
            replace = true;
        } else if is(argv[i], "db") && i + 1 < argv.len() {
            dst_db = match db_index(ctx, argv[i + 1]) {
                Ok(db) => db,
                Err(reply) => return reply,
            };
            i += 1;
        } else {
            return Reply::error(error::SYNTAX);
        }
        i += 1;
    }
    let src_db = ctx.client.db;
    if src_db == dst_db && argv[1] == argv[2] {
        return Reply::error(error::SAME_OBJECT);
    }
    let (src, dst) = (ctx.key(argv[1]), ctx.key(argv[2]));
    let now = ctx.now_ms;
    let mut shards = lock_two(ctx, src_db, src, dst_db, dst);
    // COPY reads its source as Redis does: a counted lookup.
    let Some(copied) = shards.src().lookup_read(src, now).map(Detached::of) else {
        return Reply::Int(0);
    };
    let replaced = shards.dst().contains(dst, now);
    if replaced && !replace {
        return Reply::Int(0);
    }
    copied.store(shards.dst(), dst, now);
    if replaced {
        ctx.notify_in(dst_db, class::NEW, "new", argv[2]);
    }
    ctx.notify_in(dst_db, class::GENERIC, "copy_to", argv[2]);
    Reply::Int(1)
}

/// MOVE key db
pub fn move_key(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let dst_db = match db_index(ctx, argv[2]) {
        Ok(db) => db,
        Err(reply) => return reply,
    };
    let src_db = ctx.client.db;
    if src_db == dst_db {
        return Reply::error(error::SAME_OBJECT);
    }
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shards = lock_two(ctx, src_db, key, dst_db, key);
    if !shards.src().contains(key, now) || shards.dst().contains(key, now) {
        return Reply::Int(0);
    }
    let Some((value, expire_at)) = shards.src().take(key, now) else {
        return Reply::Int(0);
    };
    shards.dst().set_owned(key, value, expire_at, now);
    ctx.notify_in(src_db, class::GENERIC, "move_from", argv[1]);
    ctx.notify_in(dst_db, class::GENERIC, "move_to", argv[1]);
    Reply::Int(1)
}

/// KEYS pattern
pub fn keys(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let pattern = argv[1];
    let match_all = pattern == b"*";
    let db = ctx.db();
    let mut out = Vec::new();
    let mut names: Vec<Reply> = Vec::new();
    for index in 0..db.shard_count() {
        // Only copying happens under the shard's lock; the pattern, which
        // the client chose, is matched after it is released.
        {
            let shard = ctx.lock_shard(ctx.client.db, index);
            names.extend(shard.iter_live(ctx.now_ms).map(|e| Reply::bulk(e.key())));
        }
        out.extend(names.drain(..).filter(|name| {
            match_all || matches!(name, Reply::Bulk(key) if glob_match(pattern, key, false))
        }));
    }
    Reply::Array(out)
}

/// A SCAN cursor: which shard, which bucket in it, and the shard's layout
/// epoch (modulo 256) when the cursor was issued (see `ShardData::scan`).
///
/// Packed as `(position * 256 + epoch) * shards + shard`, so a cursor grows
/// with the table, as Redis's do, and stays far below 2^53: clients that
/// hold cursors as doubles (JavaScript, Lua's `tonumber`) keep them exact.
/// With 32 shards a cursor over a million keys stays below 2^29.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ScanCursor {
    shard: usize,
    position: usize,
    epoch: u32,
}

/// Epochs a cursor can tell apart: `SCAN_EPOCH_MASK + 1`.
const EPOCHS: u64 = crate::store::SCAN_EPOCH_MASK as u64 + 1;

impl ScanCursor {
    fn decode(cursor: u64, shards: usize) -> ScanCursor {
        let shards = shards.max(1) as u64;
        let rest = cursor / shards;
        ScanCursor {
            shard: (cursor % shards) as usize,
            position: (rest / EPOCHS) as usize,
            epoch: (rest % EPOCHS) as u32,
        }
    }

    fn encode(self, shards: usize) -> u64 {
        let within = (self.position as u64)
            .saturating_mul(EPOCHS)
            .saturating_add(self.epoch as u64 % EPOCHS);
        within
            .saturating_mul(shards.max(1) as u64)
            .saturating_add(self.shard as u64)
    }
}

/// Parses a cursor as Redis's parseScanCursorOrReply does with strtoul: an
/// optional sign, then decimal digits; a negative number wraps around.
pub(super) fn parse_cursor(arg: &[u8]) -> Option<u64> {
    let (negative, digits) = match arg.first() {
        Some(b'-') => (true, &arg[1..]),
        Some(b'+') => (false, &arg[1..]),
        _ => (false, arg),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
pub fn scan(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let Some(cursor) = parse_cursor(argv[1]) else {
        return Reply::error(error::INVALID_CURSOR);
    };
    let mut count = 10usize;
    let mut pattern: Option<&[u8]> = None;
    let mut type_filter: Option<&[u8]> = None;
    let mut i = 2;
    while i < argv.len() {
        let remaining = argv.len() - i;
        if is(argv[i], "count") && remaining >= 2 {
            match int_arg(argv[i + 1]) {
                Ok(n) if n >= 1 => count = n as usize,
                Ok(_) => return Reply::error(error::SYNTAX),
                Err(reply) => return reply,
            }
        } else if is(argv[i], "match") && remaining >= 2 {
            pattern = Some(argv[i + 1]).filter(|p| *p != b"*");
        } else if is(argv[i], "type") && remaining >= 2 {
            type_filter = Some(argv[i + 1]);
        } else {
            return Reply::error(error::SYNTAX);
        }
        i += 2;
    }
    let db = ctx.db();
    let shards = db.shard_count();
    let mut at = ScanCursor::decode(cursor, shards);
    let mut keys = Vec::new();
    let keep = |entry: &Entry| {
        pattern.is_none_or(|p| glob_match(p, entry.key(), false))
            && type_filter.is_none_or(|t| t.eq_ignore_ascii_case(type_name(entry).as_bytes()))
    };
    let next = loop {
        if at.shard >= db.shard_count() {
            break 0;
        }
        let shard = ctx.lock_shard(ctx.client.db, at.shard);
        let before = keys.len();
        let budget = count.saturating_sub(before).max(1);
        let (position, epoch) =
            shard.scan(at.position, at.epoch, budget, ctx.now_ms, keep, &mut keys);
        drop(shard);
        match position {
            Some(position) => {
                break ScanCursor {
                    shard: at.shard,
                    position,
                    epoch,
                }
                .encode(shards)
            }
            None => {
                at = ScanCursor {
                    shard: at.shard + 1,
                    position: 0,
                    epoch: 0,
                };
                if keys.len() >= count {
                    break if at.shard >= db.shard_count() {
                        0
                    } else {
                        at.encode(shards)
                    };
                }
            }
        }
    };
    Reply::Array(vec![
        Reply::Bulk(next.to_string().into_bytes()),
        Reply::Array(keys.into_iter().map(Reply::Bulk).collect()),
    ])
}

/// RANDOMKEY
pub fn randomkey(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let db = ctx.db();
    let shards = db.shard_count();
    let seed = crate::util::random_u64() as usize;
    for offset in 0..shards {
        let shard = ctx.lock_shard(ctx.client.db, (seed + offset) % shards);
        if let Some(entry) = shard.random_entry(seed >> 16, ctx.now_ms) {
            return Reply::bulk(entry.key());
        }
    }
    Reply::Nil
}

/// DBSIZE
pub fn dbsize(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    Reply::Int(ctx.db_sizes(ctx.client.db).0 as i64)
}

/// FLUSHDB and FLUSHALL accept an optional SYNC or ASYNC; both free at once.
fn flush_mode_ok(argv: &[&[u8]]) -> bool {
    match argv.len() {
        1 => true,
        2 => is(argv[1], "sync") || is(argv[1], "async"),
        _ => false,
    }
}

/// FLUSHDB [ASYNC | SYNC]
pub fn flushdb(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if !flush_mode_ok(argv) {
        return Reply::error(error::SYNTAX);
    }
    for shard in ctx.lock_all(ctx.client.db).shards() {
        shard.clear();
    }
    // As Redis: every tracking client is told everything changed.
    ctx.shared.tracking.flushed();
    Reply::Ok
}

/// FLUSHALL [ASYNC | SYNC]
pub fn flushall(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if !flush_mode_ok(argv) {
        return Reply::error(error::SYNTAX);
    }
    let store = &ctx.shared.store;
    for index in 0..store.databases() {
        for shard in ctx.lock_all(index).shards() {
            shard.clear();
        }
    }
    ctx.shared.tracking.flushed();
    Reply::Ok
}

/// SELECT index
pub fn select(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    match db_index(ctx, argv[1]) {
        Ok(index) if index != 0 && ctx.shared.cluster.get().is_some() => {
            Reply::error("ERR SELECT is not allowed in cluster mode")
        }
        Ok(index) => {
            ctx.client.db = index;
            ctx.client
                .info
                .db
                .store(index, std::sync::atomic::Ordering::Relaxed);
            Reply::Ok
        }
        Err(reply) => reply,
    }
}

/// SWAPDB index1 index2
pub fn swapdb(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let databases = ctx.shared.store.databases() as i64;
    let Some(a) = super::args::parse_i64(argv[1]) else {
        return Reply::error(error::INVALID_FIRST_DB);
    };
    let Some(b) = super::args::parse_i64(argv[2]) else {
        return Reply::error(error::INVALID_SECOND_DB);
    };
    if !(0..databases).contains(&a) || !(0..databases).contains(&b) {
        return Reply::error(error::DB_INDEX_OUT_OF_RANGE);
    }
    let (low, high) = (a.min(b) as usize, a.max(b) as usize);
    if low != high {
        // Both databases locked whole, lower database first, then swapped
        // shard by shard: no command sees one swapped and the other not.
        let mut first = ctx.lock_all(low);
        let mut second = ctx.lock_all(high);
        for (x, y) in first.shards().zip(second.shards()) {
            x.swap_contents(y);
        }
    }
    Reply::Ok
}
