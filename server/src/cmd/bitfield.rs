//! BITFIELD and BITFIELD_RO: integers of 1 to 64 bits at any bit offset of
//! a string, read, set and incremented with Redis 7.0's overflow rules
//! (WRAP, SAT, FAIL) and its replies, as its bitops.c computes them.

use super::args::{int_arg, is, parse_i64};
use super::bitmap::{bit_offset, BitWriter};
use super::error;
use super::string::{string_of, value_bytes};
use super::Ctx;
use crate::event_classes::class;
use crate::resp::Reply;

/// What BITFIELD does when a SET or INCRBY leaves a field's range.
#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// One BITFIELD operation, parsed.
#[derive(Clone, Copy)]
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

/// `i1`..`i64` or `u1`..`u63`.
fn field_type(arg: &[u8]) -> Result<(bool, u32), Reply> {
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(Reply::error(error::BITFIELD_TYPE)),
    };
    match parse_i64(&arg[1..]) {
        Some(bits) if bits >= 1 && bits <= if signed { 64 } else { 63 } => {
            Ok((signed, bits as u32))
        }
        _ => Err(Reply::error(error::BITFIELD_TYPE)),
    }
}

/// BITFIELD's subcommands, parsed in Redis's order of checks.
fn parse_fields(ctx: &Ctx<'_>, argv: &[&[u8]]) -> Result<Vec<Field>, Reply> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < argv.len() {
        let remaining = argv.len() - j - 1;
        let sub = argv[j];
        let op_args = if is(sub, "get") && remaining >= 2 {
            2
        } else if (is(sub, "set") || is(sub, "incrby")) && remaining >= 3 {
            3
        } else if is(sub, "overflow") && remaining >= 1 {
            let kind = argv[j + 1];
            overflow = if is(kind, "wrap") {
                Overflow::Wrap
            } else if is(kind, "sat") {
                Overflow::Sat
            } else if is(kind, "fail") {
                Overflow::Fail
            } else {
                return Err(Reply::error(error::BITFIELD_OVERFLOW));
            };
            j += 2;
            continue;
        } else {
            return Err(Reply::error(error::SYNTAX));
        };
        let (signed, bits) = field_type(argv[j + 1])?;
        let offset = bit_offset(ctx, argv[j + 2], Some(bits))?;
        let op = if op_args == 2 {
            FieldOp::Get
        } else {
            let value = int_arg(argv[j + 3])?;
            if is(sub, "set") {
                FieldOp::Set(value)
            } else {
                FieldOp::IncrBy(value)
            }
        };
        fields.push(Field {
            op,
            signed,
            bits,
            offset,
            overflow,
        });
        j += 1 + op_args;
    }
    Ok(fields)
}

/// The unsigned field of `bits` at bit `offset` of `bytes`.
fn get_unsigned(bytes: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0, |value, j| {
        let at = offset + j;
        let bit = (bytes[(at >> 3) as usize] >> (7 - (at & 7))) & 1;
        (value << 1) | u64::from(bit)
    })
}

/// The signed field: the unsigned one with its top bit extended.
fn get_signed(bytes: &[u8], offset: u64, bits: u32) -> i64 {
    let value = get_unsigned(bytes, offset, bits) as i64;
    if bits < 64 && value & (1 << (bits - 1)) != 0 {
        value | (-1i64 << bits)
    } else {
        value
    }
}

/// Writes the low `bits` of `value` at bit `offset` of `bytes`.
fn set_field(bytes: &mut [u8], offset: u64, bits: u32, value: u64) {
    for j in 0..u64::from(bits) {
        let bit = ((value >> (u64::from(bits) - 1 - j)) & 1) as u8;
        let at = offset + j;
        let byte = &mut bytes[(at >> 3) as usize];
        let shift = 7 - (at & 7);
        *byte = (*byte & !(1 << shift)) | (bit << shift);
    }
}

/// Redis's checkUnsignedBitfieldOverflow: whether `value + incr` leaves
/// the field, and the value WRAP or SAT stores instead.
fn unsigned_overflow(value: u64, incr: i64, bits: u32, overflow: Overflow) -> Option<u64> {
    let max = (1u64 << bits) - 1;
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = value.wrapping_neg() as i64;
    let wrapped = || value.wrapping_add(incr as u64) & !(u64::MAX << bits);
    if value > max || (incr > 0 && incr > max_incr) {
        Some(if overflow == Overflow::Sat {
            max
        } else {
            wrapped()
        })
    } else if incr < 0 && incr < min_incr {
        Some(if overflow == Overflow::Sat {
            0
        } else {
            wrapped()
        })
    } else {
        None
    }
}

/// Redis's checkSignedBitfieldOverflow, likewise.
fn signed_overflow(value: i64, incr: i64, bits: u32, overflow: Overflow) -> Option<i64> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrapped = || {
        let mut sum = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if sum & (1 << (bits - 1)) != 0 {
                sum |= mask;
            } else {
                sum &= !mask;
            }
        }
        sum as i64
    };
    if value > max || (bits != 64 && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr)
    {
        Some(if overflow == Overflow::Sat {
            max
        } else {
            wrapped()
        })
    } else if value < min
        || (bits != 64 && incr < min_incr)
        || (value < 0 && incr < 0 && incr < min_incr)
    {
        Some(if overflow == Overflow::Sat {
            min
        } else {
            wrapped()
        })
    } else {
        None
    }
}

/// A SET or INCRBY on the field at bit `at` of `window`: the reply (the
/// old value for SET, the new one for INCRBY; nil when OVERFLOW FAIL
/// refuses it) and the value to store, if any.
fn apply_field(field: &Field, window: &[u8; 9], at: u64) -> (Reply, Option<u64>) {
    // SET checks its value as an increment of 0 from it, as Redis does.
    let (incr, returns_new) = match field.op {
        FieldOp::IncrBy(incr) => (incr, true),
        FieldOp::Set(_) | FieldOp::Get => (0, false),
    };
    let (old, new, overflowed) = if field.signed {
        let old = get_signed(window, at, field.bits);
        let base = match field.op {
            FieldOp::Set(value) => value,
            _ => old,
        };
        let over = signed_overflow(base, incr, field.bits, field.overflow);
        let new = over.unwrap_or_else(|| base.wrapping_add(incr));
        (old, new as u64, over.is_some())
    } else {
        let old = get_unsigned(window, at, field.bits);
        let base = match field.op {
            FieldOp::Set(value) => value as u64,
            _ => old,
        };
        let over = unsigned_overflow(base, incr, field.bits, field.overflow);
        let new = over.unwrap_or_else(|| base.wrapping_add(incr as u64));
        (old as i64, new, over.is_some())
    };
    if overflowed && field.overflow == Overflow::Fail {
        return (Reply::Nil, None);
    }
    // INCRBY answers the value stored (a signed one sign-extended, as a
    // GET reads it back); SET the one it replaced.
    let shown = if returns_new { new as i64 } else { old };
    (Reply::Int(shown), Some(new))
}

/// BITFIELD key [GET type offset | [OVERFLOW WRAP | SAT | FAIL]
/// SET type offset value | INCRBY type offset increment ...]
pub fn bitfield(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    bitfield_generic(ctx, argv, false)
}

/// BITFIELD_RO key [GET type offset ...]
pub fn bitfield_ro(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    bitfield_generic(ctx, argv, true)
}

fn bitfield_generic(ctx: &mut Ctx<'_>, argv: &[&[u8]], read_only: bool) -> Reply {
    let fields = match parse_fields(ctx, argv) {
        Ok(fields) => fields,
        Err(reply) => return reply,
    };
    let last_written_bit = fields
        .iter()
        .filter(|f| f.op != FieldOp::Get)
        .map(|f| f.offset + u64::from(f.bits) - 1)
        .max();
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let Some(last_written_bit) = last_written_bit else {
        // Only GETs: a read, of zero bits where there is no key.
        let value = match shard.lookup_read(key, now) {
            Some(entry) => match string_of(entry) {
                Ok(value) => value_bytes(value),
                Err(reply) => return reply,
            },
            None => Vec::new(),
        };
        let replies = fields
            .iter()
            .map(|field| read_field(&value, field))
            .collect();
        return Reply::Array(replies);
    };
    if read_only {
        return Reply::error(error::BITFIELD_RO_WRITES);
    }
    let mut writer = match BitWriter::open(&mut shard, key, now, (last_written_bit >> 3) as usize) {
        Ok(writer) => writer,
        Err(reply) => return reply,
    };
    let mut replies = Vec::with_capacity(fields.len());
    for field in &fields {
        let byte = (field.offset >> 3) as usize;
        let mut window = writer.window(&mut shard, key, now, byte);
        let at = field.offset & 7;
        if field.op == FieldOp::Get {
            replies.push(read_field(
                &window,
                &Field {
                    offset: at,
                    ..*field
                },
            ));
            continue;
        }
        let (reply, stored) = apply_field(field, &window, at);
        if let Some(value) = stored {
            set_field(&mut window, at, field.bits, value);
            let touched = ((at + u64::from(field.bits) - 1) >> 3) as usize + 1;
            writer.write(&mut shard, key, now, byte, &window[..touched]);
        }
        replies.push(reply);
    }
    // Redis counts a change where the key was created or grown or a
    // field's value differs, as the writer does.
    if writer.finish(&mut shard, key, now) {
        ctx.notify(class::STRING, "setbit", argv[1]);
    }
    Reply::Array(replies)
}

/// A GET of `field` from `bytes` (zero past their end).
fn read_field(bytes: &[u8], field: &Field) -> Reply {
    let byte = (field.offset >> 3) as usize;
    let mut window = [0u8; 9];
    if byte < bytes.len() {
        let n = (bytes.len() - byte).min(9);
        window[..n].copy_from_slice(&bytes[byte..byte + n]);
    }
    let at = field.offset & 7;
    if field.signed {
        Reply::Int(get_signed(&window, at, field.bits))
    } else {
        Reply::Int(get_unsigned(&window, at, field.bits) as i64)
    }
}
