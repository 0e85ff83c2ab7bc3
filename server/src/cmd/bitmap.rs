//! Bitmaps: strings addressed by the bit (SETBIT, GETBIT, BITCOUNT, BITPOS,
//! BITOP), as Redis 7.0's bitops.c answers them, edge cases and error texts
//! included; the bit field commands, which share the writer here, are in
//! `bitfield.rs`.
//!
//! Bit 0 is the most significant bit of the first byte. A string that a
//! write must reach past its end grows with zero bytes first, and a key
//! that does not exist is an endless run of zero bits to a reader.
//!
//! Short strings (up to an i64's text) are rebuilt whole and stored through
//! the string writer, which keeps an integer's text as the integer; longer
//! ones are patched where they lie, so a bit set in a 512 MB string copies
//! one byte, not the string.

use super::args::{int_arg, is, parse_i64};
use super::error;
use super::string::{string_of, value_bytes, write_string, Deadline, I64_TEXT_MAX};
use super::Ctx;
use crate::event_classes::class;
use crate::resp::Reply;
use crate::store::{KeyRef, ShardData, ValueRef};

/// Runs `read` on a string value's bytes (an integer's as its text).
pub(super) fn with_bytes<R>(value: ValueRef<'_>, read: impl FnOnce(&[u8]) -> R) -> R {
    match value {
        ValueRef::Int(n) => read(itoa::Buffer::new().format(n).as_bytes()),
        ValueRef::Str(bytes) => read(bytes),
        ValueRef::Obj(_) => read(&[]),
    }
}

/// A bit offset argument (Redis's getBitOffsetFromArgument): a
/// non-negative integer addressing a bit inside `proto-max-bulk-len`
/// bytes; with `field_bits`, `#n` means the n-th field of that width. The
/// master's stream is obeyed past the limit, as Redis obeys it.
pub(super) fn bit_offset(ctx: &Ctx<'_>, arg: &[u8], field_bits: Option<u32>) -> Result<u64, Reply> {
    let (digits, width) = match (arg.first(), field_bits) {
        (Some(b'#'), Some(bits)) => (&arg[1..], bits as i64),
        _ => (arg, 1),
    };
    let offset = parse_i64(digits)
        .map(|n| n.wrapping_mul(width))
        .ok_or_else(|| Reply::error(error::BIT_OFFSET))?;
    let limit = ctx.shared.config.read().proto_max_bulk_len;
    if offset < 0 || (!ctx.client.master && (offset as u64 >> 3) >= limit) {
        return Err(Reply::error(error::BIT_OFFSET));
    }
    Ok(offset as u64)
}

/// The string at `key` opened for a write that reaches byte `last_byte`:
/// created, or grown with zero bytes, as Redis's lookupStringForBitCommand.
/// Writes go to a copy for a short string (stored back by [`Self::finish`])
/// and into the stored value for a long one.
pub(super) struct BitWriter {
    /// The whole value, for a string short enough to be rebuilt.
    short: Option<Vec<u8>>,
    /// Created, grown or changed: the key is written (and watchers told).
    changed: bool,
}

impl BitWriter {
    pub(super) fn open(
        shard: &mut ShardData,
        key: KeyRef<'_>,
        now: u64,
        last_byte: usize,
    ) -> Result<BitWriter, Reply> {
        let current = match shard.get(key, now) {
            Some(entry) => Some(value_bytes(string_of(entry)?).len()),
            None => None,
        };
        let len = current.unwrap_or(0).max(last_byte + 1);
        let changed = current != Some(len);
        if len <= I64_TEXT_MAX {
            let mut value = shard
                .get(key, now)
                .map(|e| value_bytes(e.value()))
                .unwrap_or_default();
            value.resize(len, 0);
            return Ok(BitWriter {
                short: Some(value),
                changed,
            });
        }
        if current.is_none() {
            shard.set(key, ValueRef::Str(b""), 0, now);
        }
        if let Some(mut entry) = shard.get_mut(key, now) {
            if let ValueRef::Int(n) = entry.value() {
                entry.set_value(ValueRef::Str(itoa::Buffer::new().format(n).as_bytes()));
            }
            if changed {
                // The new bytes are zero: writing a zero at the last one
                // grows the value with zero bytes up to it.
                entry.patch_str(len - 1, &[0]);
            } else {
                entry.leave_unmodified();
            }
        }
        Ok(BitWriter {
            short: None,
            changed,
        })
    }

    /// Up to nine bytes from `byte` on (zero past the end): any field of
    /// up to 64 bits, however aligned, lies within them.
    pub(super) fn window(
        &self,
        shard: &mut ShardData,
        key: KeyRef<'_>,
        now: u64,
        byte: usize,
    ) -> [u8; 9] {
        let mut window = [0u8; 9];
        let copy = |bytes: &[u8], window: &mut [u8; 9]| {
            if byte < bytes.len() {
                let n = (bytes.len() - byte).min(9);
                window[..n].copy_from_slice(&bytes[byte..byte + n]);
            }
        };
        match &self.short {
            Some(value) => copy(value, &mut window),
            None => {
                if let Some(entry) = shard.get(key, now) {
                    with_bytes(entry.value(), |bytes| copy(bytes, &mut window));
                }
            }
        }
        window
    }

    /// Stores `bytes` at `byte` when they differ from what is there.
    pub(super) fn write(
        &mut self,
        shard: &mut ShardData,
        key: KeyRef<'_>,
        now: u64,
        byte: usize,
        bytes: &[u8],
    ) {
        if self.window(shard, key, now, byte)[..bytes.len()] == *bytes {
            return;
        }
        self.changed = true;
        match &mut self.short {
            Some(value) => value[byte..byte + bytes.len()].copy_from_slice(bytes),
            None => {
                if let Some(mut entry) = shard.get_mut(key, now) {
                    entry.patch_str(byte, bytes);
                }
            }
        }
    }

    /// Stores a rebuilt short string, if anything changed; true when the
    /// key was created, grown or changed.
    pub(super) fn finish(self, shard: &mut ShardData, key: KeyRef<'_>, now: u64) -> bool {
        if let (Some(value), true) = (&self.short, self.changed) {
            write_string(shard, key, value, Deadline::Keep, now);
        }
        self.changed
    }
}

/// SETBIT key offset value
pub fn setbit(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let offset = match bit_offset(ctx, argv[2], None) {
        Ok(offset) => offset,
        Err(reply) => return reply,
    };
    let on = match parse_i64(argv[3]) {
        Some(on @ (0 | 1)) => on as u8,
        _ => return Reply::error(error::BIT_VALUE),
    };
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let byte = (offset >> 3) as usize;
    let mut writer = match BitWriter::open(&mut shard, key, now, byte) {
        Ok(writer) => writer,
        Err(reply) => return reply,
    };
    let old = writer.window(&mut shard, key, now, byte)[0];
    let mask = 1u8 << (7 - (offset & 7));
    let new = (old & !mask) | (on * mask);
    writer.write(&mut shard, key, now, byte, &[new]);
    if writer.finish(&mut shard, key, now) {
        ctx.notify(class::STRING, "setbit", argv[1]);
    }
    Reply::Int(i64::from(old & mask != 0))
}

/// GETBIT key offset
pub fn getbit(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let offset = match bit_offset(ctx, argv[2], None) {
        Ok(offset) => offset,
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let Some(entry) = shard.lookup_read(key, ctx.now_ms) else {
        return Reply::Int(0);
    };
    let value = match string_of(entry) {
        Ok(value) => value,
        Err(reply) => return reply,
    };
    let byte = (offset >> 3) as usize;
    let bit = with_bytes(value, |bytes| {
        bytes
            .get(byte)
            .is_some_and(|b| b & (1 << (7 - (offset & 7))) != 0)
    });
    Reply::Int(i64::from(bit))
}

/// A BITCOUNT / BITPOS range resolved to bytes: the first and last byte,
/// and the bits of each edge byte that lie outside a BIT range.
struct ByteRange {
    start: i64,
    end: i64,
    first_outside: u8,
    last_outside: u8,
}

impl ByteRange {
    /// Every byte of a string of `len` bytes.
    fn whole(len: i64) -> ByteRange {
        ByteRange {
            start: 0,
            end: len - 1,
            first_outside: 0,
            last_outside: 0,
        }
    }
}

/// Redis's conversion of a range given in bytes or bits over a string of
/// `len` bytes: negative ends count from the end, both are clamped, and a
/// BIT range keeps masks of the edge bits outside it.
fn resolve_range(len: i64, mut start: i64, mut end: i64, in_bits: bool) -> ByteRange {
    let total = if in_bits { len << 3 } else { len };
    if start < 0 {
        start += total;
    }
    if end < 0 {
        end += total;
    }
    start = start.max(0);
    end = end.max(0).min(total - 1);
    let (mut first_outside, mut last_outside) = (0, 0);
    if in_bits && start <= end {
        first_outside = !((1u16 << (8 - (start & 7))) - 1) as u8;
        last_outside = ((1u16 << (7 - (end & 7))) - 1) as u8;
        start >>= 3;
        end >>= 3;
    }
    ByteRange {
        start,
        end,
        first_outside,
        last_outside,
    }
}

/// BIT or BYTE, or a syntax error.
fn unit(arg: &[u8]) -> Result<bool, Reply> {
    if is(arg, "bit") {
        Ok(true)
    } else if is(arg, "byte") {
        Ok(false)
    } else {
        Err(Reply::error(error::SYNTAX))
    }
}

/// BITCOUNT key [start end [BYTE | BIT]]
pub fn bitcount(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let Some(entry) = shard.lookup_read(key, ctx.now_ms) else {
        return Reply::Int(0);
    };
    let value = match string_of(entry) {
        Ok(value) => value,
        Err(reply) => return reply,
    };
    with_bytes(value, |bytes| match bitcount_of(bytes, argv) {
        Ok(count) => Reply::Int(count),
        Err(reply) => reply,
    })
}

fn bitcount_of(bytes: &[u8], argv: &[&[u8]]) -> Result<i64, Reply> {
    let len = bytes.len() as i64;
    let range = match argv.len() {
        2 => ByteRange::whole(len),
        4 | 5 => {
            let start = int_arg(argv[2])?;
            let end = int_arg(argv[3])?;
            if start < 0 && end < 0 && start > end {
                return Ok(0);
            }
            let in_bits = match argv.get(4) {
                Some(arg) => unit(arg)?,
                None => false,
            };
            resolve_range(len, start, end, in_bits)
        }
        _ => return Err(Reply::error(error::SYNTAX)),
    };
    if range.start > range.end {
        return Ok(0);
    }
    let (start, end) = (range.start as usize, range.end as usize);
    let mut count: i64 = bytes[start..=end]
        .iter()
        .map(|b| i64::from(b.count_ones()))
        .sum();
    count -= i64::from((bytes[start] & range.first_outside).count_ones());
    count -= i64::from((bytes[end] & range.last_outside).count_ones());
    Ok(count)
}

/// The position of the first bit equal to `bit` (Redis's redisBitpos):
/// for a 1 that is not there, -1; for a 0 that is not there, the bit just
/// past the bytes.
fn first_bit(bytes: &[u8], bit: bool) -> i64 {
    for (i, &b) in bytes.iter().enumerate() {
        let wanted = if bit { b } else { !b };
        if wanted != 0 {
            return i as i64 * 8 + i64::from(wanted.leading_zeros());
        }
    }
    if bit {
        -1
    } else {
        bytes.len() as i64 * 8
    }
}

/// BITPOS key bit [start [end [BYTE | BIT]]]
pub fn bitpos(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let bit = match int_arg(argv[2]) {
        Ok(bit @ (0 | 1)) => bit == 1,
        Ok(_) => return Reply::error(error::BITPOS_BIT),
        Err(reply) => return reply,
    };
    let key = ctx.key(argv[1]);
    let mut shard = ctx.lock(key);
    let Some(entry) = shard.lookup_read(key, ctx.now_ms) else {
        // A missing key is zero bits without end.
        return Reply::Int(if bit { -1 } else { 0 });
    };
    let value = match string_of(entry) {
        Ok(value) => value,
        Err(reply) => return reply,
    };
    with_bytes(value, |bytes| match bitpos_of(bytes, bit, argv) {
        Ok(pos) => Reply::Int(pos),
        Err(reply) => reply,
    })
}

fn bitpos_of(bytes: &[u8], bit: bool, argv: &[&[u8]]) -> Result<i64, Reply> {
    let len = bytes.len() as i64;
    let mut end_given = false;
    let range = match argv.len() {
        3 => ByteRange::whole(len),
        4..=6 => {
            let start = int_arg(argv[3])?;
            let in_bits = match argv.get(5) {
                Some(arg) => unit(arg)?,
                None => false,
            };
            let end = match argv.get(4) {
                Some(arg) => {
                    end_given = true;
                    int_arg(arg)?
                }
                // As Redis 7.0 computes it; clamped to the last bit below.
                None if in_bits => (len << 3) + 7,
                None => len - 1,
            };
            resolve_range(len, start, end, in_bits)
        }
        _ => return Err(Reply::error(error::SYNTAX)),
    };
    if range.start > range.end {
        return Ok(-1);
    }
    let (start, end) = (range.start as usize, range.end as usize);
    // The edge bytes outside a BIT range read as the bit not looked for.
    let outside = |b: u8, mask: u8| if bit { b & !mask } else { b | mask };
    let mut scanned = bytes[start..=end].to_vec();
    let last = scanned.len() - 1;
    scanned[0] = outside(scanned[0], range.first_outside);
    scanned[last] = outside(scanned[last], range.last_outside);
    let pos = first_bit(&scanned, bit);
    // A 0 looked for in an explicit range is not found past its end.
    if end_given && !bit && pos == scanned.len() as i64 * 8 {
        return Ok(-1);
    }
    Ok(if pos == -1 {
        -1
    } else {
        pos + (start as i64) * 8
    })
}

/// BITOP AND | OR | XOR | NOT destkey key [key ...]
pub fn bitop(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    #[derive(Clone, Copy, PartialEq)]
    enum Op {
        And,
        Or,
        Xor,
        Not,
    }
    let op = match argv[1] {
        name if is(name, "and") => Op::And,
        name if is(name, "or") => Op::Or,
        name if is(name, "xor") => Op::Xor,
        name if is(name, "not") => Op::Not,
        _ => return Reply::error(error::SYNTAX),
    };
    if op == Op::Not && argv.len() != 4 {
        return Reply::error(error::BITOP_NOT_ONE_KEY);
    }
    let dst = ctx.key(argv[2]);
    let sources: Vec<KeyRef<'_>> = argv[3..].iter().map(|k| ctx.key(k)).collect();
    let mut all = sources.clone();
    all.push(dst);
    let now = ctx.now_ms;
    let mut locked = ctx.lock_keys(&all);
    let mut values: Vec<Vec<u8>> = Vec::with_capacity(sources.len());
    for source in &sources {
        match locked.shard(*source).lookup_read(*source, now) {
            Some(entry) => match string_of(entry) {
                Ok(value) => values.push(value_bytes(value)),
                Err(reply) => return reply,
            },
            // A missing key is an empty string.
            None => values.push(Vec::new()),
        }
    }
    let len = values.iter().map(Vec::len).max().unwrap_or(0);
    let byte = |value: &Vec<u8>, i: usize| value.get(i).copied().unwrap_or(0);
    let result: Vec<u8> = (0..len)
        .map(|i| {
            let mut sources = values.iter();
            let first = sources.next().map_or(0, |v| byte(v, i));
            match op {
                Op::Not => !first,
                Op::And => sources.fold(first, |acc, v| acc & byte(v, i)),
                Op::Or => sources.fold(first, |acc, v| acc | byte(v, i)),
                Op::Xor => sources.fold(first, |acc, v| acc ^ byte(v, i)),
            }
        })
        .collect();
    let shard = locked.shard(dst);
    if result.is_empty() {
        if shard.remove(dst, now) {
            ctx.notify(class::GENERIC, "del", argv[2]);
        }
    } else {
        // Replaced in place (a destination that existed is not `new`).
        shard.set(dst, ValueRef::string(&result), 0, now);
        ctx.notify(class::STRING, "set", argv[2]);
    }
    Reply::Int(len as i64)
}
