//! Redis 8.4's compare-and-set on strings: SET's IFEQ / IFNE / IFDEQ /
//! IFDNE, DELEX, DIGEST, and MSETEX (several keys, one expiry); and
//! Valkey 9.0's DELIFEQ.
//!
//! A limiter that keeps a token or a state blob in a string can update it
//! only if nobody else did since it read it, without a script: read the
//! value (or its DIGEST, an XXH3 hash as 16 hex digits), then SET ... IFEQ
//! the value read, or IFDEQ the digest. Behaviour, errors and their order
//! are Redis 8.6.3's (Debian experimental's, run by `tools/redis8.sh`).

use super::args::{int_arg, is, parse_i64};
use super::error;
use super::string::{deadline_of, string_of, value_bytes, write_string, Deadline, ExpireUnit};
use super::Ctx;
use crate::event_classes::class;
use crate::resp::Reply;
use crate::store::ValueRef;

/// Redis's error for a digest argument that is not 16 characters long
/// (any 16 characters are taken: a non-hex one just never matches).
const BAD_DIGEST: &str = "ERR must be exactly 16 hexadecimal characters";

/// A condition on a string's current value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueCondition<'a> {
    /// The value equals this.
    IfEq(&'a [u8]),
    /// The value differs from this (or there is none).
    IfNe(&'a [u8]),
    /// The value's digest is this (compared ignoring case).
    IfDeq(&'a [u8]),
    /// The value's digest is not this (or there is no value).
    IfDne(&'a [u8]),
}

impl<'a> ValueCondition<'a> {
    /// The condition an option word names, with its argument.
    pub fn named(word: &[u8], argument: &'a [u8]) -> Option<ValueCondition<'a>> {
        Some(if is(word, "ifeq") {
            ValueCondition::IfEq(argument)
        } else if is(word, "ifne") {
            ValueCondition::IfNe(argument)
        } else if is(word, "ifdeq") {
            ValueCondition::IfDeq(argument)
        } else if is(word, "ifdne") {
            ValueCondition::IfDne(argument)
        } else {
            return None;
        })
    }

    /// True when `other` is the same kind of condition (SET lets a
    /// condition repeat, the last one counting, but not mix with another).
    pub fn same_kind(&self, other: &ValueCondition<'_>) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }

    /// Refuses a digest argument of the wrong length.
    pub fn check_digest(&self) -> Result<(), Reply> {
        match self {
            ValueCondition::IfDeq(d) | ValueCondition::IfDne(d) if d.len() != 16 => {
                Err(Reply::error(BAD_DIGEST))
            }
            _ => Ok(()),
        }
    }

    /// Whether the condition holds for `current` (None: no key). A digest
    /// argument is checked only when there is a value to compare, as in
    /// Redis's SET.
    pub fn holds(&self, current: Option<&[u8]>) -> Result<bool, Reply> {
        let Some(current) = current else {
            return Ok(matches!(
                self,
                ValueCondition::IfNe(_) | ValueCondition::IfDne(_)
            ));
        };
        self.check_digest()?;
        Ok(match self {
            ValueCondition::IfEq(v) => current == *v,
            ValueCondition::IfNe(v) => current != *v,
            ValueCondition::IfDeq(d) => digest(current).eq_ignore_ascii_case(d),
            ValueCondition::IfDne(d) => !digest(current).eq_ignore_ascii_case(d),
        })
    }
}

/// A string's digest as DIGEST shows it: XXH3-64 (seed 0) in 16 lower-case
/// hex digits.
pub fn digest(value: &[u8]) -> [u8; 16] {
    let hash = xxhash_rust::xxh3::xxh3_64(value);
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        let nibble = (hash >> (60 - 4 * i)) & 0xF;
        *byte = b"0123456789abcdef"[nibble as usize];
    }
    out
}

/// DIGEST key: the value's digest, nil for a missing key.
pub fn digest_command(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    match shard.lookup_read(key, ctx.now_ms) {
        None => Reply::Nil,
        Some(entry) => match string_of(entry) {
            Ok(value) => Reply::bulk(&digest(&value_bytes(value))),
            Err(reply) => reply,
        },
    }
}

/// DELEX key [IFEQ value | IFNE value | IFDEQ digest | IFDNE digest]: 1
/// when the key was deleted. Without a condition it is DEL of one key, of
/// any type; with one, the key must hold a string.
pub fn delex(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if argv.len() != 2 && argv.len() != 4 {
        return Reply::error(error::wrong_arity("delex"));
    }
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    // Redis looks the key up first: a missing key is 0 whatever the
    // condition says, then a condition needs a string, then a known
    // condition, then a digest of the right length.
    if argv.len() == 4 {
        let holds = match shard.get(key, ctx.now_ms) {
            None => return Reply::Int(0),
            Some(entry) => match entry.value() {
                ValueRef::Obj(_) => {
                    return Reply::error(
                        "ERR Key should be of string type if conditions are specified",
                    )
                }
                value => match ValueCondition::named(argv[2], argv[3]) {
                    Some(condition) => condition.holds(Some(&value_bytes(value))),
                    None => Err(Reply::error(
                        "ERR Invalid condition. Use IFEQ, IFNE, IFDEQ, or IFDNE",
                    )),
                },
            },
        };
        match holds {
            Ok(true) => {}
            Ok(false) => return Reply::Int(0),
            Err(reply) => return reply,
        }
    }
    if !shard.remove(key, ctx.now_ms) {
        return Reply::Int(0);
    }
    ctx.notify(class::GENERIC, "del", argv[1]);
    Reply::Int(1)
}

/// DELIFEQ key value (Valkey 9.0): deletes the key when it holds exactly
/// `value`; 1 when it did, 0 for a missing key or another value,
/// WRONGTYPE for a collection. DELEX key IFEQ value in Redis 8.4's words.
pub fn delifeq(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let matches = match shard.get(key, ctx.now_ms) {
        None => return Reply::Int(0),
        Some(entry) => match string_of(entry) {
            Ok(value) => value_bytes(value) == argv[2],
            Err(reply) => return reply,
        },
    };
    if !matches || !shard.remove(key, ctx.now_ms) {
        return Reply::Int(0);
    }
    ctx.notify(class::GENERIC, "del", argv[1]);
    Reply::Int(1)
}

/// MSETEX's parsed options.
struct MsetEx<'a, 'b> {
    pairs: &'b [&'a [u8]],
    nx: bool,
    xx: bool,
    deadline: Deadline,
}

fn parse_msetex<'a, 'b>(argv: &'b [&'a [u8]], now_ms: u64) -> Result<MsetEx<'a, 'b>, Reply> {
    let count = parse_i64(argv[1])
        .filter(|&n| n >= 1)
        .ok_or_else(|| Reply::error("ERR invalid numkeys value"))?;
    let end = (count as u64)
        .checked_mul(2)
        .and_then(|n| n.checked_add(2))
        .filter(|&end| end <= argv.len() as u64)
        .ok_or_else(|| Reply::error("ERR wrong number of key-value pairs"))? as usize;
    let (mut nx, mut xx, mut keepttl) = (false, false, false);
    let mut amount: Option<(ExpireUnit, &[u8])> = None;
    let mut i = end;
    while i < argv.len() {
        let word = argv[i];
        let unit = ExpireUnit::named(word);
        if is(word, "nx") && !xx {
            nx = true;
        } else if is(word, "xx") && !nx {
            xx = true;
        } else if is(word, "keepttl") && amount.is_none() {
            keepttl = true;
        } else if let (Some(unit), Some(value), false) = (unit, argv.get(i + 1), keepttl) {
            if amount.is_some_and(|(u, _)| u != unit) {
                return Err(Reply::error(error::SYNTAX));
            }
            amount = Some((unit, value));
            i += 1;
        } else {
            return Err(Reply::error(error::SYNTAX));
        }
        i += 1;
    }
    let deadline = match amount {
        Some((unit, value)) => Deadline::At(deadline_of(unit, int_arg(value)?, now_ms, "msetex")?),
        None if keepttl => Deadline::Keep,
        None => Deadline::Clear,
    };
    Ok(MsetEx {
        pairs: &argv[2..end],
        nx,
        xx,
        deadline,
    })
}

/// MSETEX numkeys key value [key value ...] [NX | XX] [EX s | PX ms |
/// EXAT unix-s | PXAT unix-ms | KEEPTTL]: sets every key (whatever it
/// held) with the one expiry, or none of them (0) when NX finds a key
/// there or XX finds one missing; 1 otherwise.
pub fn msetex(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let MsetEx {
        pairs,
        nx,
        xx,
        deadline,
    } = match parse_msetex(argv, ctx.now_ms) {
        Ok(parsed) => parsed,
        Err(reply) => return reply,
    };
    let keyed: Vec<_> = pairs
        .chunks_exact(2)
        .map(|pair| (ctx.key(pair[0]), pair[1]))
        .collect();
    let keys: Vec<_> = keyed.iter().map(|(key, _)| *key).collect();
    let mut locked = ctx.lock_keys(&keys);
    if nx || xx {
        let now = ctx.now_ms;
        let existing = keys
            .iter()
            .filter(|key| locked.shard(**key).contains(**key, now))
            .count();
        if (nx && existing > 0) || (xx && existing < keys.len()) {
            return Reply::Int(0);
        }
    }
    for (key, value) in keyed {
        write_string(locked.shard(key), key, value, deadline, ctx.now_ms);
        ctx.notify(class::STRING, "set", key.bytes);
        if matches!(deadline, Deadline::At(_)) {
            ctx.notify(class::GENERIC, "expire", key.bytes);
        }
    }
    Reply::Int(1)
}
