//! INCREX, Redis 8.8's counter with bounds and expiry in one command: the
//! fixed-window limiter that used to need `INCR` + `EXPIRE` in a Lua
//! script. Valkey 9.2's NX | XX conditions are accepted beside Redis's
//! options, which they do not conflict with.
//!
//! `INCREX key [BYINT n | BYFLOAT f] [LBOUND l] [UBOUND u] [SATURATE]
//! [EX s | PX ms | EXAT t | PXAT t | PERSIST] [ENX] [NX | XX]` replies
//! `[value, applied increment]`: integers, or long doubles printed as
//! INCRBYFLOAT prints them with BYFLOAT. A result past a bound (or past
//! the type's range) is skipped, replying `[current value, 0]` and leaving
//! the key and its TTL alone; SATURATE clamps it to the bound instead.
//! The key's TTL is kept unless an expiry option says otherwise; ENX sets
//! the expiry only on a key without one (a window's first hit). NX or XX
//! unmet replies nil.

use super::args::{int_arg, is};
use super::error;
use super::propagate;
use super::string::{deadline_of, string_of, value_bytes, write_string, Deadline, ExpireUnit};
use super::Ctx;
use crate::float::{self, IncrexError};
use crate::resp::Reply;
use crate::store::ValueRef;

/// The increment and its bounds, as parsed: BYINT's (or the default 1)
/// with bounds read as integers, or BYFLOAT's texts for the long double
/// arithmetic (which reads them itself).
enum By<'a> {
    Int {
        by: i64,
        lower: i64,
        upper: i64,
    },
    Float {
        by: &'a [u8],
        lower: Option<&'a [u8]>,
        upper: Option<&'a [u8]>,
    },
}

/// What the key's TTL becomes when the increment applies.
#[derive(Clone, Copy)]
enum Expiry {
    /// No option: the TTL stays as it is.
    Keep,
    /// PERSIST.
    Clear,
    /// EX, PX, EXAT or PXAT, as an absolute deadline; with ENX only for a
    /// key that has no TTL.
    At { deadline: u64, only_if_none: bool },
}

/// Valkey's existence conditions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Condition {
    Always,
    /// NX: only a key that does not exist.
    Missing,
    /// XX: only a key that exists.
    Present,
}

struct Options<'a> {
    by: By<'a>,
    saturate: bool,
    expiry: Expiry,
    condition: Condition,
}

/// Redis's reply to `LBOUND` above `UBOUND`.
const BOUNDS_CROSSED: &str = "ERR LBOUND can't be greater than UBOUND";
/// Redis's reply to ENX with no EX/PX/EXAT/PXAT to apply.
const ENX_WITHOUT_EXPIRY: &str = "ERR ENX flag requires an expiration";

/// Reads the options after the key. Every token is checked before any
/// number is, so a syntax error anywhere wins over a bad number, as in
/// Redis's parsers.
fn parse<'a>(options: &[&'a [u8]], now_ms: u64) -> Result<Options<'a>, Reply> {
    let syntax = || Reply::error(error::SYNTAX);
    let mut by_int = None;
    let mut by_float = None;
    let (mut lower, mut upper) = (None, None);
    let mut saturate = false;
    let mut expire: Option<(ExpireUnit, &[u8])> = None;
    let (mut persist, mut enx) = (false, false);
    let mut condition = Condition::Always;
    let mut i = 0;
    while i < options.len() {
        let token = options[i];
        let value = options.get(i + 1).copied();
        // Each option at most once: a value option consumes its value.
        let slot: Option<&mut Option<&'a [u8]>> = if is(token, "byint") && by_float.is_none() {
            Some(&mut by_int)
        } else if is(token, "byfloat") && by_int.is_none() {
            Some(&mut by_float)
        } else if is(token, "lbound") {
            Some(&mut lower)
        } else if is(token, "ubound") {
            Some(&mut upper)
        } else {
            None
        };
        let unit = ExpireUnit::named(token);
        if let Some(slot) = slot {
            match value {
                Some(value) if slot.is_none() => *slot = Some(value),
                _ => return Err(syntax()),
            }
            i += 2;
            continue;
        }
        if let Some(unit) = unit {
            match value {
                Some(value) if expire.is_none() && !persist => expire = Some((unit, value)),
                _ => return Err(syntax()),
            }
            i += 2;
            continue;
        }
        if is(token, "saturate") && !saturate {
            saturate = true;
        } else if is(token, "persist") && !persist && expire.is_none() {
            persist = true;
        } else if is(token, "enx") && !enx {
            enx = true;
        } else if is(token, "nx") && condition == Condition::Always {
            condition = Condition::Missing;
        } else if is(token, "xx") && condition == Condition::Always {
            condition = Condition::Present;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    if persist && enx {
        return Err(syntax());
    }
    if enx && expire.is_none() {
        return Err(Reply::error(ENX_WITHOUT_EXPIRY));
    }
    let by = match by_float {
        Some(by) => {
            float::increx(None, by, lower, upper, saturate).map_err(float_error)?;
            By::Float { by, lower, upper }
        }
        None => {
            let by = by_int.map(int_arg).transpose()?.unwrap_or(1);
            let lower = lower.map(int_arg).transpose()?.unwrap_or(i64::MIN);
            let upper = upper.map(int_arg).transpose()?.unwrap_or(i64::MAX);
            if lower > upper {
                return Err(Reply::error(BOUNDS_CROSSED));
            }
            By::Int { by, lower, upper }
        }
    };
    let expiry = match expire {
        Some((unit, amount)) => Expiry::At {
            deadline: deadline_of(unit, int_arg(amount)?, now_ms, "increx")?,
            only_if_none: enx,
        },
        None if persist => Expiry::Clear,
        None => Expiry::Keep,
    };
    Ok(Options {
        by,
        saturate,
        expiry,
        condition,
    })
}

fn float_error(error: IncrexError) -> Reply {
    Reply::error(match error {
        IncrexError::NotAFloat | IncrexError::CurrentNotAFloat => error::NOT_FLOAT,
        IncrexError::BoundsCrossed => BOUNDS_CROSSED,
        IncrexError::Infinite => error::NAN_OR_INFINITY,
    })
}

/// The integer form: `(value afterwards, increment applied, skipped)`.
fn add_int(
    current: i64,
    by: i64,
    (lb, ub): (i64, i64),
    saturate: bool,
) -> Result<(i64, i64, bool), Reply> {
    let value = match current.checked_add(by) {
        Some(sum) if (lb..=ub).contains(&sum) => sum,
        _ if !saturate => return Ok((current, 0, true)),
        // Past the type's range: the bound on the side it went.
        None if by >= 0 => ub,
        None => lb,
        Some(sum) if sum > ub => ub,
        Some(_) => lb,
    };
    // A key already outside its bounds can be clamped further than i64
    // reaches (from i64::MAX down to i64::MIN).
    let applied = value
        .checked_sub(current)
        .ok_or_else(|| Reply::error(error::OVERFLOW))?;
    Ok((value, applied, false))
}

/// INCREX key [BYINT n | BYFLOAT f] [LBOUND l] [UBOUND u] [SATURATE]
/// [EX s | PX ms | EXAT t | PXAT t | PERSIST] [ENX] [NX | XX]
pub fn increx(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let now = ctx.now_ms;
    let options = match parse(&argv[2..], now) {
        Ok(options) => options,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let entry = shard.get(key, now);
    let exists = entry.is_some();
    match options.condition {
        Condition::Missing if exists => return Reply::Nil,
        Condition::Present if !exists => return Reply::Nil,
        _ => {}
    }
    let ttl = entry.map_or(0, |e| e.expire_at());
    // The value to store, the reply, and whether anything changes.
    let (stored, reply, skipped) = match options.by {
        By::Int { by, lower, upper } => {
            let current = match entry.map(string_of) {
                None => 0,
                Some(Ok(ValueRef::Int(n))) => n,
                Some(Ok(_)) => return Reply::error(error::NOT_INTEGER),
                Some(Err(reply)) => return reply,
            };
            let (value, applied, skipped) =
                match add_int(current, by, (lower, upper), options.saturate) {
                    Ok(outcome) => outcome,
                    Err(reply) => return reply,
                };
            let reply = Reply::Array(vec![Reply::Int(value), Reply::Int(applied)]);
            (value.to_string().into_bytes(), reply, skipped)
        }
        By::Float { by, lower, upper } => {
            let current = match entry.map(string_of) {
                None => b"0".to_vec(),
                Some(Ok(value)) => value_bytes(value),
                Some(Err(reply)) => return reply,
            };
            let outcome = match float::increx(Some(&current), by, lower, upper, options.saturate) {
                Ok(outcome) => outcome,
                Err(error) => return float_error(error),
            };
            let reply = Reply::Array(vec![
                Reply::HumanDouble(outcome.value.clone()),
                Reply::HumanDouble(outcome.delta),
            ]);
            (outcome.value, reply, outcome.skipped)
        }
    };
    if skipped {
        return reply;
    }
    let expire_at = match options.expiry {
        Expiry::Keep => ttl,
        Expiry::Clear => 0,
        Expiry::At {
            only_if_none: true, ..
        } if ttl != 0 => ttl,
        Expiry::At { deadline, .. } => deadline,
    };
    let deadline = match expire_at {
        0 => Deadline::Clear,
        at => Deadline::At(at),
    };
    write_string(&mut shard, key, &stored, deadline, now);
    drop(shard);
    // Logged as its effect: the value with the deadline it ended with, so a
    // replay needs neither the bounds nor the key's TTL at the time.
    let deadline = expire_at.to_string();
    let mut change: Vec<&[u8]> = vec![b"SET", argv[1], &stored];
    if expire_at != 0 {
        change.extend([&b"PXAT"[..], deadline.as_bytes()]);
    }
    propagate::effect(ctx, &change);
    reply
}
