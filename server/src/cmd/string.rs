//! String and counter commands: GET SET and friends, the INCR family, ranges.

use super::args::{int_arg, is};
use super::error;
use super::string_conditions::ValueCondition;
use super::Ctx;
use crate::event_classes::class;
use crate::resp::Reply;
use crate::store::{Entry, ShardData, ValueRef};

/// The reply for a stored string (WRONGTYPE for a collection).
pub fn reply_value(value: ValueRef<'_>) -> Reply {
    match value {
        ValueRef::Int(n) => Reply::BulkInt(n),
        ValueRef::Str(bytes) => Reply::bulk(bytes),
        ValueRef::Obj(_) => Reply::error(error::WRONGTYPE),
    }
}

/// The string bytes of a string value, formatting integers; empty for a
/// collection, which callers have refused with [`string_of`] before.
pub fn value_bytes(value: ValueRef<'_>) -> Vec<u8> {
    match value {
        ValueRef::Int(n) => itoa::Buffer::new().format(n).as_bytes().to_vec(),
        ValueRef::Str(bytes) => bytes.to_vec(),
        ValueRef::Obj(_) => Vec::new(),
    }
}

/// Length of a string value's string form (0 for a collection, as above).
fn value_len(value: ValueRef<'_>) -> usize {
    match value {
        ValueRef::Int(n) => itoa::Buffer::new().format(n).len(),
        ValueRef::Str(bytes) => bytes.len(),
        ValueRef::Obj(_) => 0,
    }
}

/// The string value of a live entry, or WRONGTYPE for a collection.
pub fn string_of(entry: &Entry) -> Result<ValueRef<'_>, Reply> {
    match entry.value() {
        ValueRef::Obj(_) => Err(Reply::error(error::WRONGTYPE)),
        value => Ok(value),
    }
}

/// GET key
pub fn get(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    match shard.lookup_read(key, ctx.now_ms) {
        Some(entry) => match string_of(entry) {
            Ok(value) => reply_value(value),
            Err(reply) => reply,
        },
        None => Reply::Nil,
    }
}

/// When a write gives a key its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// Leave it as it is (KEEPTTL, or commands that keep TTLs).
    Keep,
    /// Remove it (a plain SET, GETEX PERSIST).
    Clear,
    /// Set this absolute unix-ms deadline.
    At(u64),
}

/// Options of SET and GETEX, parsed as Redis's parseExtendedStringArgumentsOrReply.
#[derive(Debug, Default)]
struct SetOptions<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    expire: Option<(ExpireUnit, i64)>,
    /// Redis 8.4's IFEQ / IFNE / IFDEQ / IFDNE.
    condition: Option<ValueCondition<'a>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ExpireUnit {
    Ex,
    Px,
    ExAt,
    PxAt,
}

impl ExpireUnit {
    /// The unit an option word names (EX, PX, EXAT, PXAT, any case).
    pub(super) fn named(word: &[u8]) -> Option<ExpireUnit> {
        [
            ("ex", ExpireUnit::Ex),
            ("px", ExpireUnit::Px),
            ("exat", ExpireUnit::ExAt),
            ("pxat", ExpireUnit::PxAt),
        ]
        .into_iter()
        .find(|(name, _)| is(word, name))
        .map(|(_, unit)| unit)
    }
}

/// Which command's grammar to accept.
#[derive(PartialEq, Eq)]
enum SetGrammar {
    Set,
    GetEx,
}

fn parse_set_options<'a>(
    options: &[&'a [u8]],
    grammar: SetGrammar,
) -> Result<SetOptions<'a>, Reply> {
    let mut opts = SetOptions::default();
    // The amount is read after every option is: a syntax error anywhere
    // wins over a bad number, as in Redis.
    let mut amount: Option<(ExpireUnit, &[u8])> = None;
    let mut i = 0;
    while i < options.len() {
        let opt = options[i];
        let next = options.get(i + 1);
        let unit = ExpireUnit::named(opt);
        let condition = match (&grammar, next) {
            (SetGrammar::Set, Some(argument)) => ValueCondition::named(opt, argument),
            _ => None,
        };
        if let Some(condition) = condition {
            // After NX or XX, or beside a condition of another kind, a
            // condition is a syntax error; the same kind may repeat (the
            // last counts), and NX or XX may follow it: Redis 8.4's rules.
            if opts.nx || opts.xx || opts.condition.is_some_and(|c| !c.same_kind(&condition)) {
                return Err(Reply::error(error::SYNTAX));
            }
            opts.condition = Some(condition);
            i += 1;
        } else if grammar == SetGrammar::Set && is(opt, "nx") && !opts.xx {
            opts.nx = true;
        } else if grammar == SetGrammar::Set && is(opt, "xx") && !opts.nx {
            opts.xx = true;
        } else if grammar == SetGrammar::Set && is(opt, "get") {
            opts.get = true;
        } else if grammar == SetGrammar::Set
            && is(opt, "keepttl")
            && amount.is_none()
            && !opts.persist
        {
            // KEEPTTL and PERSIST may repeat; neither goes with an expiry.
            opts.keepttl = true;
        } else if grammar == SetGrammar::GetEx
            && is(opt, "persist")
            && amount.is_none()
            && !opts.keepttl
        {
            opts.persist = true;
        } else if let (Some(unit), Some(value)) = (unit, next) {
            // The same unit may repeat (the last one wins); another unit,
            // KEEPTTL or PERSIST may not.
            if opts.keepttl || opts.persist || amount.is_some_and(|(u, _)| u != unit) {
                return Err(Reply::error(error::SYNTAX));
            }
            amount = Some((unit, value));
            i += 1;
        } else {
            return Err(Reply::error(error::SYNTAX));
        }
        i += 1;
    }
    if let Some((unit, value)) = amount {
        opts.expire = Some((unit, int_arg(value)?));
    }
    Ok(opts)
}

/// Turns an EX/PX/EXAT/PXAT amount into an absolute deadline, refusing what
/// Redis refuses with `invalid expire time in '<command>' command`.
pub(super) fn deadline_of(
    unit: ExpireUnit,
    amount: i64,
    now_ms: u64,
    command: &str,
) -> Result<u64, Reply> {
    let invalid = || Reply::error(error::invalid_expire(command));
    let seconds = matches!(unit, ExpireUnit::Ex | ExpireUnit::ExAt);
    if amount <= 0 || (seconds && amount > i64::MAX / 1000) {
        return Err(invalid());
    }
    let mut ms = if seconds { amount * 1000 } else { amount };
    if matches!(unit, ExpireUnit::Ex | ExpireUnit::Px) {
        ms = ms.checked_add(now_ms as i64).ok_or_else(invalid)?;
    }
    Ok(ms as u64)
}

/// Writes a string value: replaces the value and applies `deadline`.
pub fn write_string(
    shard: &mut ShardData,
    key: crate::store::KeyRef<'_>,
    value: &[u8],
    deadline: Deadline,
    now_ms: u64,
) {
    // A deadline already in the past is stored as is, as Redis 7.0's SET does:
    // the key is invisible at once and reclaimed by expiry.
    let expire_at = match deadline {
        Deadline::At(at) => at,
        Deadline::Clear => 0,
        Deadline::Keep => shard.get(key, now_ms).map(|e| e.expire_at()).unwrap_or(0),
    };
    if let Some(mut entry) = shard.get_mut(key, now_ms) {
        entry.set_value(ValueRef::string(value));
        entry.set_expire_at(expire_at);
        return;
    }
    shard.set(key, ValueRef::string(value), expire_at, now_ms);
}

/// SET key value [NX | XX | IFEQ v | IFNE v | IFDEQ digest | IFDNE digest]
/// [GET] [EX seconds | PX milliseconds | EXAT unix-time-seconds |
/// PXAT unix-time-milliseconds | KEEPTTL]
pub fn set(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let opts = match parse_set_options(&argv[3..], SetGrammar::Set) {
        Ok(opts) => opts,
        Err(reply) => return reply,
    };
    let deadline = match opts.expire {
        Some((unit, amount)) => match deadline_of(unit, amount, ctx.now_ms, "set") {
            Ok(at) => Deadline::At(at),
            Err(reply) => return reply,
        },
        None if opts.keepttl => Deadline::Keep,
        None => Deadline::Clear,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    // SET ... GET reads the old value as GET does (a counted lookup).
    let looked_up = if opts.get {
        shard.lookup_read(key, ctx.now_ms)
    } else {
        shard.get(key, ctx.now_ms)
    };
    // A condition compares with the value there, so it needs a string;
    // NX and XX are decided first, as in Redis.
    let (old, current) = match looked_up {
        Some(entry) => match string_of(entry) {
            Ok(value) => (
                Some(reply_value(value)),
                opts.condition.map(|_| Ok(value_bytes(value))),
            ),
            Err(reply) if opts.get => return reply,
            Err(reply) => (Some(Reply::Nil), Some(Err(reply))),
        },
        None => (None, None),
    };
    let found = old.is_some();
    let mut blocked = (opts.nx && found) || (opts.xx && !found);
    if let (false, Some(condition)) = (blocked, opts.condition) {
        let current = match current.transpose() {
            Ok(current) => current,
            Err(wrong_type) => return wrong_type,
        };
        match condition.holds(current.as_deref()) {
            Ok(holds) => blocked = !holds,
            Err(reply) => return reply,
        }
    }
    if blocked {
        return if opts.get {
            old.unwrap_or(Reply::Nil)
        } else {
            Reply::Nil
        };
    }
    write_string(&mut shard, key, argv[2], deadline, ctx.now_ms);
    ctx.notify(class::STRING, "set", argv[1]);
    if opts.expire.is_some() {
        ctx.notify(class::GENERIC, "expire", argv[1]);
    }
    if opts.get {
        old.unwrap_or(Reply::Nil)
    } else {
        Reply::Ok
    }
}

/// SETNX key value
pub fn setnx(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    if shard.contains(key, ctx.now_ms) {
        return Reply::Int(0);
    }
    shard.set(key, ValueRef::string(argv[2]), 0, ctx.now_ms);
    ctx.notify(class::STRING, "set", argv[1]);
    Reply::Int(1)
}

fn set_with_expire(ctx: &mut Ctx<'_>, argv: &[&[u8]], unit: ExpireUnit, name: &str) -> Reply {
    let amount = match int_arg(argv[2]) {
        Ok(n) => n,
        Err(reply) => return reply,
    };
    let at = match deadline_of(unit, amount, ctx.now_ms, name) {
        Ok(at) => at,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    write_string(&mut shard, key, argv[3], Deadline::At(at), ctx.now_ms);
    ctx.notify(class::STRING, "set", argv[1]);
    ctx.notify(class::GENERIC, "expire", argv[1]);
    Reply::Ok
}

/// SETEX key seconds value
pub fn setex(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    set_with_expire(ctx, argv, ExpireUnit::Ex, "setex")
}

/// PSETEX key milliseconds value
pub fn psetex(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    set_with_expire(ctx, argv, ExpireUnit::Px, "psetex")
}

/// MGET key [key ...]
pub fn mget(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let keys: Vec<_> = argv[1..].iter().map(|k| ctx.key(k)).collect();
    let mut locked = ctx.lock_keys(&keys);
    let values: Vec<Reply> = keys
        .iter()
        .map(
            |key| match locked.shard(*key).lookup_read(*key, ctx.now_ms) {
                Some(entry) => string_of(entry).map_or(Reply::Nil, reply_value),
                None => Reply::Nil,
            },
        )
        .collect();
    Reply::Array(values)
}

fn mset_generic(ctx: &mut Ctx<'_>, argv: &[&[u8]], only_if_none_exist: bool) -> Reply {
    if argv.len() % 2 == 0 {
        return Reply::error(error::wrong_arity(if only_if_none_exist {
            "msetnx"
        } else {
            "mset"
        }));
    }
    let pairs: Vec<_> = argv[1..]
        .chunks(2)
        .map(|pair| (ctx.key(pair[0]), pair[1]))
        .collect();
    let keys: Vec<_> = pairs.iter().map(|(k, _)| *k).collect();
    let mut locked = ctx.lock_keys(&keys);
    if only_if_none_exist
        && keys
            .iter()
            .any(|k| locked.shard(*k).contains(*k, ctx.now_ms))
    {
        return Reply::Int(0);
    }
    for (key, value) in pairs {
        write_string(locked.shard(key), key, value, Deadline::Clear, ctx.now_ms);
        ctx.notify(class::STRING, "set", key.bytes);
    }
    if only_if_none_exist {
        Reply::Int(1)
    } else {
        Reply::Ok
    }
}

/// MSET key value [key value ...]
pub fn mset(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    mset_generic(ctx, argv, false)
}

/// MSETNX key value [key value ...]
pub fn msetnx(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    mset_generic(ctx, argv, true)
}

/// GETSET key value
pub fn getset(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let old = match shard.lookup_read(key, ctx.now_ms) {
        Some(entry) => match string_of(entry) {
            Ok(value) => reply_value(value),
            Err(reply) => return reply,
        },
        None => Reply::Nil,
    };
    write_string(&mut shard, key, argv[2], Deadline::Clear, ctx.now_ms);
    ctx.notify(class::STRING, "set", argv[1]);
    old
}

/// GETDEL key
pub fn getdel(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let reply = match shard.lookup_read(key, ctx.now_ms) {
        Some(entry) => match string_of(entry) {
            Ok(value) => reply_value(value),
            Err(reply) => return reply,
        },
        None => return Reply::Nil,
    };
    shard.remove(key, ctx.now_ms);
    ctx.notify(class::GENERIC, "del", argv[1]);
    reply
}

/// GETEX key [EX seconds | PX milliseconds | EXAT unix-time-seconds |
/// PXAT unix-time-milliseconds | PERSIST]
pub fn getex(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let opts = match parse_set_options(&argv[2..], SetGrammar::GetEx) {
        Ok(opts) => opts,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let found = shard.get_mut(key, ctx.now_ms).is_some();
    // GETEX reads as GET does: a counted lookup, as Redis's lookupKeyRead.
    shard.count_read(found);
    let Some(mut entry) = shard.get_mut(key, ctx.now_ms) else {
        return Reply::Nil;
    };
    let reply = match string_of(&entry) {
        Ok(value) => reply_value(value),
        Err(reply) => return reply,
    };
    // Redis validates the expiry only once it knows the key exists.
    let deadline = match opts.expire {
        Some((unit, amount)) => match deadline_of(unit, amount, ctx.now_ms, "getex") {
            Ok(at) => Deadline::At(at),
            Err(reply) => return reply,
        },
        None if opts.persist => Deadline::Clear,
        None => Deadline::Keep,
    };
    match deadline {
        Deadline::Keep => {}
        Deadline::Clear => {
            if entry.expire_at() != 0 {
                entry.set_expire_at(0);
                ctx.notify(class::GENERIC, "persist", argv[1]);
            }
        }
        Deadline::At(at) if at <= ctx.now_ms => {
            drop(entry);
            shard.remove(key, ctx.now_ms);
            ctx.notify(class::GENERIC, "del", argv[1]);
        }
        Deadline::At(at) => {
            entry.set_expire_at(at);
            ctx.notify(class::GENERIC, "expire", argv[1]);
        }
    }
    reply
}

/// Adds `delta` to the integer at `key` (creating it at 0), keeping its TTL.
fn incr_by(ctx: &mut Ctx<'_>, key: &[u8], delta: i64) -> Reply {
    let key = ctx.key(key);
    let mut shard = ctx.lock(key);
    if let Some(mut entry) = shard.get_mut(key, ctx.now_ms) {
        let current = match string_of(&entry) {
            Ok(ValueRef::Int(n)) => n,
            Ok(_) => return Reply::error(error::NOT_INTEGER),
            Err(reply) => return reply,
        };
        let Some(next) = current.checked_add(delta) else {
            return Reply::error(error::OVERFLOW);
        };
        entry.set_value(ValueRef::Int(next));
        drop(entry);
        ctx.notify(class::STRING, "incrby", key.bytes);
        return Reply::Int(next);
    }
    shard.set(key, ValueRef::Int(delta), 0, ctx.now_ms);
    ctx.notify(class::STRING, "incrby", key.bytes);
    Reply::Int(delta)
}

/// INCR key
pub fn incr(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    incr_by(ctx, argv[1], 1)
}

/// DECR key
pub fn decr(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    incr_by(ctx, argv[1], -1)
}

/// INCRBY key increment
pub fn incrby(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    match int_arg(argv[2]) {
        Ok(delta) => incr_by(ctx, argv[1], delta),
        Err(reply) => reply,
    }
}

/// DECRBY key decrement
pub fn decrby(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    match int_arg(argv[2]) {
        Ok(i64::MIN) => Reply::error("ERR decrement would overflow"),
        Ok(delta) => incr_by(ctx, argv[1], -delta),
        Err(reply) => reply,
    }
}

/// INCRBYFLOAT key increment
pub fn incrbyfloat(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let current = match shard.get(key, ctx.now_ms) {
        Some(entry) => match string_of(entry) {
            Ok(value) => value_bytes(value),
            Err(reply) => return reply,
        },
        None => b"0".to_vec(),
    };
    let sum = match crate::float::add_human(&current, argv[2]) {
        Ok(text) => text,
        Err(crate::float::AddError::NotAFloat) => return Reply::error(error::NOT_FLOAT),
        Err(crate::float::AddError::NanOrInfinity) => return Reply::error(error::NAN_OR_INFINITY),
    };
    write_string(&mut shard, key, &sum, Deadline::Keep, ctx.now_ms);
    ctx.notify(class::STRING, "incrbyfloat", argv[1]);
    Reply::Bulk(sum)
}

/// APPEND key value
pub fn append(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let max = ctx.shared.config.read().proto_max_bulk_len;
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let mut value = match shard.get(key, ctx.now_ms) {
        Some(entry) => match string_of(entry) {
            Ok(value) => value_bytes(value),
            Err(reply) => return reply,
        },
        None => {
            shard.set(key, ValueRef::string(argv[2]), 0, ctx.now_ms);
            ctx.notify(class::STRING, "append", argv[1]);
            return Reply::Int(argv[2].len() as i64);
        }
    };
    if (value.len() + argv[2].len()) as u64 > max {
        return Reply::error(error::STRING_TOO_LONG);
    }
    value.extend_from_slice(argv[2]);
    write_string(&mut shard, key, &value, Deadline::Keep, ctx.now_ms);
    ctx.notify(class::STRING, "append", argv[1]);
    Reply::Int(value.len() as i64)
}

/// STRLEN key
pub fn strlen(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    match shard.lookup_read(key, ctx.now_ms) {
        Some(entry) => match string_of(entry) {
            Ok(value) => Reply::Int(value_len(value) as i64),
            Err(reply) => reply,
        },
        None => Reply::Int(0),
    }
}

/// GETRANGE key start end
pub fn getrange(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let (mut start, mut end) = match super::args::int_pair(argv[2], argv[3]) {
        Ok(pair) => pair,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let value = match shard.lookup_read(key, ctx.now_ms) {
        Some(entry) => match string_of(entry) {
            Ok(value) => value_bytes(value),
            Err(reply) => return reply,
        },
        None => return Reply::bulk(b""),
    };
    drop(shard);
    // Redis's getrangeCommand arithmetic, including its treatment of
    // negative ranges that end before they start.
    if start < 0 && end < 0 && start > end {
        return Reply::bulk(b"");
    }
    let len = value.len() as i64;
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        return Reply::bulk(b"");
    }
    Reply::bulk(&value[start as usize..=end as usize])
}

/// SETRANGE key offset value
pub fn setrange(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let offset = match int_arg(argv[2]) {
        Ok(n) => n,
        Err(reply) => return reply,
    };
    if offset < 0 {
        return Reply::error(error::OFFSET_OUT_OF_RANGE);
    }
    let max = ctx.shared.config.read().proto_max_bulk_len;
    let patch = argv[3];
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let current_len = match shard.get(key, ctx.now_ms) {
        Some(entry) => match string_of(entry) {
            Ok(value) => Some(value_len(value)),
            Err(reply) => return reply,
        },
        None => None,
    };
    if patch.is_empty() {
        return Reply::Int(current_len.unwrap_or(0) as i64);
    }
    if offset as u64 + patch.len() as u64 > max {
        return Reply::error(error::STRING_TOO_LONG);
    }
    let end = offset as usize + patch.len();
    if end <= I64_TEXT_MAX {
        // A short result may be an integer's text, which is stored as the
        // integer: it goes through the string writer, which decides.
        let mut value = shard
            .get(key, ctx.now_ms)
            .map(|entry| value_bytes(entry.value()))
            .unwrap_or_default();
        if value.len() < end {
            value.resize(end, 0);
        }
        value[offset as usize..end].copy_from_slice(patch);
        write_string(&mut shard, key, &value, Deadline::Keep, ctx.now_ms);
        ctx.notify(class::STRING, "setrange", argv[1]);
        return Reply::Int(value.len() as i64);
    }
    // A long result is patched where it lies, as Redis patches its sds: a
    // 512 MB value is not built beside the stored one and copied in.
    if current_len.is_none() {
        shard.set(key, ValueRef::Str(b""), 0, ctx.now_ms);
    }
    let Some(mut entry) = shard.get_mut(key, ctx.now_ms) else {
        return Reply::Int(0);
    };
    if let ValueRef::Int(n) = entry.value() {
        let mut digits = itoa::Buffer::new();
        entry.set_value(ValueRef::Str(digits.format(n).as_bytes()));
    }
    entry.patch_str(offset as usize, patch);
    let len = value_len(entry.value());
    drop(entry);
    ctx.notify(class::STRING, "setrange", argv[1]);
    Reply::Int(len as i64)
}

/// The longest text of an i64 (`-9223372036854775808`): a string longer
/// than this is never stored as an integer.
pub(super) const I64_TEXT_MAX: usize = 20;
