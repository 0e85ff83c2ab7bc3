//! Hash field expiry (Redis 7.4 and 8.0): HEXPIRE, HPEXPIRE, HEXPIREAT,
//! HPEXPIREAT, HTTL, HPTTL, HEXPIRETIME, HPEXPIRETIME, HPERSIST, HGETEX and
//! HSETEX.
//!
//! The store keeps the deadlines and purges due fields whenever a hash is
//! looked at (see `store::field_expiry`); these handlers set, read and clear
//! them with Redis's replies, errors (in Redis's order of checks),
//! keyspace events and propagation: relative times go to the change feed as
//! absolute ones (`HPEXPIREAT`, `HSETEX ... PXAT`), a deadline already past
//! as the `HDEL` it amounted to.

use super::args::{int_arg, is, parse_i64};
use super::collection::{exists_as, modify_if, notify_changed, read, Event};
use super::string::ExpireUnit;
use super::{error, propagate, Ctx};
use crate::event_classes::class;
use crate::resp::Reply;
use crate::store::object::Hash;

/// The latest deadline the commands accept, in unix ms (Redis's
/// HFE_MAX_ABS_TIME_MSEC: a quarter of the 48 bits deadlines are kept in).
const MAX_DEADLINE_MS: i64 = ((1 << 48) - 1) >> 2;

/// HEXPIRE's replies per field.
const NO_FIELD: i64 = -2;
const CONDITION_NOT_MET: i64 = 0;
const SET: i64 = 1;
const DELETED: i64 = 2;

/// HTTL's and HPERSIST's reply for a field without a deadline.
const NO_DEADLINE: i64 = -1;

/// The deadline (unix ms) a time argument in `unit` names, with Redis's
/// checks for hash fields in Redis's order: an integer, not negative,
/// within the range field deadlines keep (narrower than a key's, so not
/// SET's `deadline_of`).
fn field_deadline(unit: ExpireUnit, arg: &[u8], now_ms: u64, command: &str) -> Result<u64, Reply> {
    let amount = int_arg(arg)?;
    if amount < 0 {
        return Err(Reply::error("ERR invalid expire time, must be >= 0"));
    }
    let unit_ms = match unit {
        ExpireUnit::Ex | ExpireUnit::ExAt => 1000,
        ExpireUnit::Px | ExpireUnit::PxAt => 1,
    };
    let base = match unit {
        ExpireUnit::Ex | ExpireUnit::Px => now_ms as i64,
        ExpireUnit::ExAt | ExpireUnit::PxAt => 0,
    };
    let out_of_range = || Reply::error(error::invalid_expire(command));
    if amount > MAX_DEADLINE_MS / unit_ms {
        return Err(out_of_range());
    }
    let ms = amount * unit_ms;
    if ms > MAX_DEADLINE_MS - base {
        return Err(out_of_range());
    }
    Ok((ms + base) as u64)
}

/// HEXPIRE's NX | XX | GT | LT.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Condition {
    Always,
    /// Only a field without a deadline.
    Nx,
    /// Only a field with one.
    Xx,
    /// Only a later deadline (none counts as infinite).
    Gt,
    /// Only an earlier one (none counts as infinite).
    Lt,
}

/// The fields after `FIELDS numfields` at `argv[at]`, checked as Redis
/// checks them; `count_error` is the command's own message for a count
/// that is not a positive integer.
fn fields_at<'a, 'b>(
    argv: &'b [&'a [u8]],
    at: usize,
    count_error: &'static str,
) -> Result<&'b [&'a [u8]], Reply> {
    if !argv.get(at).is_some_and(|word| is(word, "fields")) {
        return Err(Reply::error(error::FIELDS_MISSING));
    }
    let count = argv
        .get(at + 1)
        .and_then(|n| parse_i64(n))
        .filter(|&n| n >= 1)
        .ok_or_else(|| Reply::error(count_error))?;
    let fields = &argv[(at + 2).min(argv.len())..];
    if count as u64 != fields.len() as u64 {
        return Err(Reply::error(
            "ERR The `numfields` parameter must match the number of arguments",
        ));
    }
    Ok(fields)
}

const POSITIVE_COUNT: &str = "ERR Number of fields must be a positive integer";

/// Gives `field` the deadline `at_ms` under `condition`, or deletes it when
/// that is not after `now_ms`: HEXPIRE's reply for the field.
fn expire_field(
    hash: &mut Hash,
    field: &[u8],
    at_ms: u64,
    condition: Condition,
    now_ms: u64,
) -> i64 {
    if hash.get(field).is_none() {
        return NO_FIELD;
    }
    let allowed = match (hash.deadline(field), condition) {
        (_, Condition::Always) => true,
        (None, Condition::Nx | Condition::Lt) => true,
        (None, Condition::Xx | Condition::Gt) => false,
        (Some(_), Condition::Nx) => false,
        (Some(_), Condition::Xx) => true,
        (Some(old), Condition::Gt) => at_ms > old,
        (Some(old), Condition::Lt) => at_ms < old,
    };
    if !allowed {
        return CONDITION_NOT_MET;
    }
    if at_ms <= now_ms {
        hash.remove(field);
        return DELETED;
    }
    hash.set_deadline(field, at_ms);
    SET
}

/// `name key <fields...>` as an owned change for the feed.
fn change(name: &[u8], key: &[u8], middle: &[&[u8]], fields: &[&[u8]]) -> Vec<Vec<u8>> {
    [name, key]
        .iter()
        .chain(middle)
        .chain(fields)
        .map(|a| a.to_vec())
        .collect()
}

/// Propagates `HDEL key <deleted>` and `HPEXPIREAT key at FIELDS n <set>`
/// for what an expiry command did.
fn propagate_expiry(ctx: &mut Ctx<'_>, key: &[u8], at_ms: u64, set: &[&[u8]], deleted: &[&[u8]]) {
    if !deleted.is_empty() {
        propagate::effect_owned(ctx, change(b"HDEL", key, &[], deleted));
    }
    if !set.is_empty() {
        let at = at_ms.to_string();
        let count = set.len().to_string();
        let middle = [at.as_bytes(), b"FIELDS", count.as_bytes()];
        propagate::effect_owned(ctx, change(b"HPEXPIREAT", key, &middle, set));
    }
}

/// HEXPIRE / HPEXPIRE / HEXPIREAT / HPEXPIREAT key time [NX|XX|GT|LT]
/// FIELDS numfields field [field ...]
fn expire_generic(ctx: &mut Ctx<'_>, argv: &[&[u8]], unit: ExpireUnit, command: &str) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let exists = match exists_as::<Hash>(&mut shard, key, ctx.now_ms) {
        Ok(exists) => exists,
        Err(reply) => return reply,
    };
    let at_ms = match field_deadline(unit, argv[2], ctx.now_ms, command) {
        Ok(at) => at,
        Err(reply) => return reply,
    };
    let condition = [
        ("nx", Condition::Nx),
        ("xx", Condition::Xx),
        ("gt", Condition::Gt),
        ("lt", Condition::Lt),
    ]
    .into_iter()
    .find(|(name, _)| is(argv[3], name))
    .map(|(_, condition)| condition);
    let fields_word = if condition.is_some() { 4 } else { 3 };
    let fields = match fields_at(
        argv,
        fields_word,
        "ERR Parameter `numFields` should be greater than 0",
    ) {
        Ok(fields) => fields,
        Err(reply) => return reply,
    };
    if !exists {
        return Reply::Array(vec![Reply::Int(NO_FIELD); fields.len()]);
    }
    let condition = condition.unwrap_or(Condition::Always);
    let now = ctx.now_ms;
    let outcome = modify_if::<Hash, _>(
        &mut shard,
        key,
        now,
        false,
        |hash| {
            // Redis makes any hash HEXPIRE reaches one that keeps
            // deadlines, even when no field is set.
            hash.enable_deadlines();
            fields
                .iter()
                .map(|field| expire_field(hash, field, at_ms, condition, now))
                .collect::<Vec<_>>()
        },
        |results| results.iter().any(|&r| r == SET || r == DELETED),
    );
    let results = match outcome {
        Ok(Some(results)) => results,
        Ok(None) => vec![NO_FIELD; fields.len()],
        Err(reply) => return reply,
    };
    let pick = |wanted: i64| -> Vec<&[u8]> {
        fields
            .iter()
            .zip(&results)
            .filter(|(_, &r)| r == wanted)
            .map(|(f, _)| *f)
            .collect()
    };
    let (set, deleted) = (pick(SET), pick(DELETED));
    if !set.is_empty() || !deleted.is_empty() {
        let name = if deleted.is_empty() {
            "hexpire"
        } else {
            "hdel"
        };
        notify_changed(ctx, &mut shard, key, Event(class::HASH, name));
        propagate_expiry(ctx, argv[1], at_ms, &set, &deleted);
    }
    Reply::Array(results.into_iter().map(Reply::Int).collect())
}

/// HEXPIRE key seconds [NX|XX|GT|LT] FIELDS numfields field [field ...]
pub fn hexpire(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    expire_generic(ctx, argv, ExpireUnit::Ex, "hexpire")
}

/// HPEXPIRE key milliseconds [NX|XX|GT|LT] FIELDS numfields field ...
pub fn hpexpire(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    expire_generic(ctx, argv, ExpireUnit::Px, "hpexpire")
}

/// HEXPIREAT key unix-time-seconds [NX|XX|GT|LT] FIELDS numfields field ...
pub fn hexpireat(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    expire_generic(ctx, argv, ExpireUnit::ExAt, "hexpireat")
}

/// HPEXPIREAT key unix-time-milliseconds [NX|XX|GT|LT] FIELDS numfields ...
pub fn hpexpireat(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    expire_generic(ctx, argv, ExpireUnit::PxAt, "hpexpireat")
}

/// What HTTL and its siblings report of a deadline.
#[derive(Clone, Copy)]
enum Report {
    /// Time left, in seconds rounded up (HTTL) or milliseconds (HPTTL).
    Left { unit_ms: u64 },
    /// The unix time, in seconds rounded up (HEXPIRETIME) or ms.
    At { unit_ms: u64 },
}

/// HTTL / HPTTL / HEXPIRETIME / HPEXPIRETIME key FIELDS numfields field ...
fn ttl_generic(ctx: &mut Ctx<'_>, argv: &[&[u8]], report: Report) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let now = ctx.now_ms;
    // The key's type is checked before the arguments, as in Redis.
    let parsed = fields_at(argv, 2, POSITIVE_COUNT);
    let found = read::<Hash, _>(&mut shard, key, now, |hash| {
        parsed.as_ref().ok().map(|fields| {
            fields
                .iter()
                .map(|f| hash.get(f).map(|_| hash.deadline(f).unwrap_or(0)))
                .collect::<Vec<_>>()
        })
    });
    let found = match found {
        Ok(found) => found,
        Err(reply) => return reply,
    };
    let fields = match parsed {
        Ok(fields) => fields,
        Err(reply) => return reply,
    };
    let Some(deadlines) = found.flatten() else {
        return Reply::Array(vec![Reply::Int(NO_FIELD); fields.len()]);
    };
    Reply::Array(
        deadlines
            .into_iter()
            .map(|deadline| {
                Reply::Int(match deadline {
                    None => NO_FIELD,
                    Some(0) => NO_DEADLINE,
                    Some(at) if at < now => NO_FIELD,
                    // Seconds round up, as Redis's (ms + 999) / 1000.
                    Some(at) => match report {
                        Report::Left { unit_ms } => (at - now).div_ceil(unit_ms) as i64,
                        Report::At { unit_ms } => at.div_ceil(unit_ms) as i64,
                    },
                })
            })
            .collect(),
    )
}

/// HTTL key FIELDS numfields field [field ...]
pub fn httl(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    ttl_generic(ctx, argv, Report::Left { unit_ms: 1000 })
}

/// HPTTL key FIELDS numfields field [field ...]
pub fn hpttl(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    ttl_generic(ctx, argv, Report::Left { unit_ms: 1 })
}

/// HEXPIRETIME key FIELDS numfields field [field ...]
pub fn hexpiretime(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    ttl_generic(ctx, argv, Report::At { unit_ms: 1000 })
}

/// HPEXPIRETIME key FIELDS numfields field [field ...]
pub fn hpexpiretime(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    ttl_generic(ctx, argv, Report::At { unit_ms: 1 })
}

/// HPERSIST key FIELDS numfields field [field ...]
pub fn hpersist(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let exists = match exists_as::<Hash>(&mut shard, key, ctx.now_ms) {
        Ok(exists) => exists,
        Err(reply) => return reply,
    };
    let fields = match fields_at(argv, 2, POSITIVE_COUNT) {
        Ok(fields) => fields,
        Err(reply) => return reply,
    };
    if !exists {
        return Reply::Array(vec![Reply::Int(NO_FIELD); fields.len()]);
    }
    let outcome = modify_if::<Hash, _>(
        &mut shard,
        key,
        ctx.now_ms,
        false,
        |hash| {
            fields
                .iter()
                .map(|field| {
                    if hash.get(field).is_none() {
                        NO_FIELD
                    } else if hash.persist(field) {
                        1
                    } else {
                        NO_DEADLINE
                    }
                })
                .collect::<Vec<_>>()
        },
        |results| results.contains(&1),
    );
    let results = match outcome {
        Ok(results) => results.unwrap_or_else(|| vec![NO_FIELD; fields.len()]),
        Err(reply) => return reply,
    };
    if results.contains(&1) {
        notify_changed(ctx, &mut shard, key, Event(class::HASH, "hpersist"));
        propagate::effect(ctx, argv);
    }
    Reply::Array(results.into_iter().map(Reply::Int).collect())
}

/// HGETEX's option: a new deadline, or PERSIST.
#[derive(Clone, Copy)]
enum GetExOption {
    Keep,
    Deadline(u64),
    Persist,
}

/// HGETEX key [EX seconds | PX ms | EXAT unix-s | PXAT unix-ms | PERSIST]
/// FIELDS numfields field [field ...] (Redis 8.0): each field's value (nil
/// for a missing one), the existing fields given the deadline, deleted when
/// it is not in the future, or persisted.
pub fn hgetex(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let exists = match exists_as::<Hash>(&mut shard, key, ctx.now_ms) {
        Ok(exists) => exists,
        Err(reply) => return reply,
    };
    let (option, fields_word) = if is(argv[2], "persist") {
        (GetExOption::Persist, 3)
    } else if let Some(unit) = ExpireUnit::named(argv[2]) {
        let at = match field_deadline(unit, argv[3], ctx.now_ms, "hgetex") {
            Ok(at) => at,
            Err(reply) => return reply,
        };
        (GetExOption::Deadline(at), 4)
    } else {
        (GetExOption::Keep, 2)
    };
    let fields = match fields_at(argv, fields_word, POSITIVE_COUNT) {
        Ok(fields) => fields,
        Err(reply) => return reply,
    };
    if !exists {
        return Reply::Array(vec![Reply::Nil; fields.len()]);
    }
    let now = ctx.now_ms;
    let outcome = modify_if::<Hash, _>(
        &mut shard,
        key,
        now,
        false,
        |hash| {
            let mut changed: Vec<&[u8]> = Vec::new();
            let values: Vec<Reply> = fields
                .iter()
                .map(|field| {
                    let value = hash.get(field).map(Reply::bulk);
                    if value.is_none() {
                        return Reply::Nil;
                    }
                    let did = match option {
                        GetExOption::Keep => false,
                        GetExOption::Persist => hash.persist(field),
                        GetExOption::Deadline(at) => {
                            expire_field(hash, field, at, Condition::Always, now) != NO_FIELD
                        }
                    };
                    if did {
                        changed.push(field);
                    }
                    value.unwrap_or(Reply::Nil)
                })
                .collect();
            (values, changed)
        },
        |(_, changed)| !changed.is_empty(),
    );
    let (values, changed) = match outcome {
        Ok(Some(result)) => result,
        Ok(None) => (vec![Reply::Nil; fields.len()], Vec::new()),
        Err(reply) => return reply,
    };
    if !changed.is_empty() {
        match option {
            GetExOption::Keep => {}
            GetExOption::Persist => {
                notify_changed(ctx, &mut shard, key, Event(class::HASH, "hpersist"));
                let count = changed.len().to_string();
                propagate::effect_owned(
                    ctx,
                    change(
                        b"HPERSIST",
                        argv[1],
                        &[b"FIELDS", count.as_bytes()],
                        &changed,
                    ),
                );
            }
            GetExOption::Deadline(at) if at <= now => {
                notify_changed(ctx, &mut shard, key, Event(class::HASH, "hdel"));
                propagate_expiry(ctx, argv[1], at, &[], &changed);
            }
            GetExOption::Deadline(at) => {
                notify_changed(ctx, &mut shard, key, Event(class::HASH, "hexpire"));
                propagate_expiry(ctx, argv[1], at, &changed, &[]);
            }
        }
    }
    Reply::Array(values)
}

/// HSETEX's FNX / FXX.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SetCondition {
    Always,
    /// Only when none of the fields exists.
    Fnx,
    /// Only when all of them exist.
    Fxx,
}

/// HSETEX's expiry option.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SetExpiry {
    /// None: the fields lose any deadline, as HSET's do.
    Clear,
    KeepTtl,
    Deadline(u64),
}

/// HSETEX's options and its field-value pairs.
struct SetEx<'a, 'b> {
    condition: SetCondition,
    expiry: SetExpiry,
    pairs: &'b [&'a [u8]],
}

/// Parses HSETEX's options in any order up to FIELDS, as Redis 8 does.
fn parse_hsetex<'a, 'b>(argv: &'b [&'a [u8]], now_ms: u64) -> Result<SetEx<'a, 'b>, Reply> {
    let arity = || Reply::error(error::wrong_arity("hsetex"));
    let mut condition = None;
    let mut expiry = None;
    let mut i = 2;
    while i < argv.len() {
        let word = argv[i];
        if is(word, "fnx") || is(word, "fxx") {
            if condition.is_some() {
                return Err(Reply::error(
                    "ERR Only one of FXX or FNX arguments can be specified",
                ));
            }
            condition = Some(if is(word, "fnx") {
                SetCondition::Fnx
            } else {
                SetCondition::Fxx
            });
            i += 1;
            continue;
        }
        let time = ExpireUnit::named(word);
        if time.is_some() || is(word, "keepttl") {
            if expiry.is_some() {
                return Err(Reply::error(
                    "ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified",
                ));
            }
            expiry = Some(match time {
                Some(time) => {
                    let amount = argv.get(i + 1).ok_or_else(arity)?;
                    i += 1;
                    SetExpiry::Deadline(field_deadline(time, amount, now_ms, "hsetex")?)
                }
                None => SetExpiry::KeepTtl,
            });
            i += 1;
            continue;
        }
        if is(word, "fields") {
            let count = argv
                .get(i + 1)
                .and_then(|n| parse_i64(n))
                .filter(|&n| n >= 1)
                .ok_or_else(|| Reply::error("ERR invalid number of fields"))?;
            let pairs = &argv[(i + 2).min(argv.len())..];
            if pairs.len() as u64 != (count as u64).saturating_mul(2) {
                return Err(arity());
            }
            return Ok(SetEx {
                condition: condition.unwrap_or(SetCondition::Always),
                expiry: expiry.unwrap_or(SetExpiry::Clear),
                pairs,
            });
        }
        return Err(Reply::error_bytes(
            [&b"ERR unknown argument: "[..], word].concat(),
        ));
    }
    Err(arity())
}

/// HSETEX key [FNX|FXX] [EX seconds | PX ms | EXAT unix-s | PXAT unix-ms |
/// KEEPTTL] FIELDS numfields field value [field value ...] (Redis 8.0): 1
/// when every field was set, 0 when FNX or FXX kept all from being set.
pub fn hsetex(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let now = ctx.now_ms;
    let SetEx {
        condition,
        expiry,
        pairs,
    } = match parse_hsetex(argv, now) {
        Ok(parsed) => parsed,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let limits = ctx.shared.encodings.get();
    let mut shard = ctx.lock(key);
    let exists = match exists_as::<Hash>(&mut shard, key, now) {
        Ok(exists) => exists,
        Err(reply) => return reply,
    };
    if !exists && condition == SetCondition::Fxx {
        return Reply::Int(0);
    }
    let outcome = modify_if::<Hash, _>(
        &mut shard,
        key,
        now,
        true,
        |hash| {
            let present = pairs.chunks_exact(2).filter(|p| hash.get(p[0]).is_some());
            let allowed = match condition {
                SetCondition::Always => true,
                SetCondition::Fnx => present.count() == 0,
                SetCondition::Fxx => present.count() == pairs.len() / 2,
            };
            if !allowed {
                return false;
            }
            for pair in pairs.chunks_exact(2) {
                match expiry {
                    SetExpiry::KeepTtl => {
                        hash.insert_keeping_deadline(pair[0], pair[1], &limits);
                    }
                    SetExpiry::Clear => {
                        hash.insert(pair[0], pair[1], &limits);
                    }
                    SetExpiry::Deadline(at) => {
                        hash.insert(pair[0], pair[1], &limits);
                        expire_field(hash, pair[0], at, Condition::Always, now);
                    }
                }
            }
            true
        },
        |&set| set,
    );
    let set = match outcome {
        Ok(set) => set.unwrap_or(false),
        Err(reply) => return reply,
    };
    if !set {
        return Reply::Int(0);
    }
    ctx.notify(class::HASH, "hset", argv[1]);
    let fields: Vec<&[u8]> = pairs.chunks_exact(2).map(|p| p[0]).collect();
    let count = fields.len().to_string();
    match expiry {
        SetExpiry::Deadline(at) if at <= now => {
            notify_changed(ctx, &mut shard, key, Event(class::HASH, "hdel"));
            propagate::effect_owned(ctx, change(b"HSET", argv[1], &[], pairs));
            propagate_expiry(ctx, argv[1], at, &[], &fields);
        }
        SetExpiry::Deadline(at) => {
            ctx.notify(class::HASH, "hexpire", argv[1]);
            let at = at.to_string();
            let middle = [&b"PXAT"[..], at.as_bytes(), b"FIELDS", count.as_bytes()];
            propagate::effect_owned(ctx, change(b"HSETEX", argv[1], &middle, pairs));
        }
        SetExpiry::KeepTtl => {
            let middle = [&b"KEEPTTL"[..], b"FIELDS", count.as_bytes()];
            propagate::effect_owned(ctx, change(b"HSETEX", argv[1], &middle, pairs));
        }
        SetExpiry::Clear => {
            propagate::effect_owned(ctx, change(b"HSET", argv[1], &[], pairs));
        }
    }
    Reply::Int(1)
}
