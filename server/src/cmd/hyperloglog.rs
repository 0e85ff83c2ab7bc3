//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, PFDEBUG and PFSELFTEST,
//! as Redis 7.0's hyperloglog.c answers them. A sketch is a string value
//! in Redis's own layout (`crate::hyperloglog`), so GET, SET, DUMP and
//! snapshots carry it between tally and Redis unchanged.
//!
//! A dense sketch (12 KB) is patched where it lies, a byte or two per
//! register raised; a sparse one (a few hundred bytes up to
//! `hll-sparse-max-bytes`) is edited in a copy and stored back.

use super::error;
use super::propagate;
use super::string::string_of;
use super::Ctx;
use crate::event_classes::class;
use crate::hyperloglog::{self as hll, Encoding, REGISTERS};
use crate::resp::Reply;
use crate::store::{Entry, KeyRef, MultiLock, ValueRef};

/// The sketch in a live entry: its bytes and encoding, or the error
/// Redis gives for another type or a string that is not a sketch.
fn sketch_of(entry: &Entry) -> Result<(&[u8], Encoding), Reply> {
    match string_of(entry)? {
        ValueRef::Str(bytes) => match hll::encoding_of(bytes) {
            Some(encoding) => Ok((bytes, encoding)),
            None => Err(Reply::error(error::NOT_A_SKETCH)),
        },
        _ => Err(Reply::error(error::NOT_A_SKETCH)),
    }
}

fn corrupt() -> Reply {
    Reply::error(error::CORRUPT_SKETCH)
}

/// PFADD key [element ...]: 1 when the key was created or a register
/// rose, else 0.
pub fn pfadd(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let sparse_max = ctx.shared.encodings.get().hll_sparse_max_bytes;
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let elements = &argv[2..];
    let Some(mut entry) = shard.get_mut(key, now) else {
        let mut sketch = hll::new_sparse();
        for element in elements {
            // A new sketch is well formed: adding to it cannot fail.
            let _ = hll::add(&mut sketch, element, sparse_max);
        }
        sketch[hll::STALE_OFFSET] = hll::stale_byte(&sketch);
        shard.set(key, ValueRef::Str(&sketch), 0, now);
        ctx.notify(class::STRING, "pfadd", argv[1]);
        return Reply::Int(1);
    };
    let encoding = match sketch_of(&entry) {
        Ok((_, encoding)) => encoding,
        Err(reply) => return reply,
    };
    let mut raised = false;
    let mut failed = false;
    match encoding {
        Encoding::Dense => {
            for element in elements {
                let (index, count) = hll::pattern(element);
                let patch = match entry.value() {
                    ValueRef::Str(bytes) => hll::dense_raise(bytes, index, count),
                    _ => None,
                };
                if let Some(patch) = patch {
                    entry.patch_str(patch.offset, &patch.bytes[..patch.len]);
                    raised = true;
                }
            }
        }
        Encoding::Sparse => {
            let mut sketch = match entry.value() {
                ValueRef::Str(bytes) => bytes.to_vec(),
                _ => Vec::new(),
            };
            for element in elements {
                match hll::add(&mut sketch, element, sparse_max) {
                    Ok(true) => raised = true,
                    Ok(false) => {}
                    Err(hll::Corrupt) => {
                        failed = true;
                        break;
                    }
                }
            }
            // What was added before a corrupt run was met stays, as the
            // edits Redis makes in place do.
            if raised {
                entry.set_value(ValueRef::Str(&sketch));
            }
        }
    }
    if failed {
        return corrupt();
    }
    if !raised {
        entry.leave_unmodified();
        return Reply::Int(0);
    }
    let stale = match entry.value() {
        ValueRef::Str(bytes) => hll::stale_byte(bytes),
        _ => 0,
    };
    entry.patch_str(hll::STALE_OFFSET, &[stale]);
    drop(entry);
    ctx.notify(class::STRING, "pfadd", argv[1]);
    Reply::Int(1)
}

/// PFCOUNT key [key ...]: the estimated cardinality of one sketch (from
/// its cache, refreshed when stale) or of the union of several.
pub fn pfcount(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if argv.len() > 2 {
        let keys: Vec<_> = argv[1..].iter().map(|k| ctx.key(k)).collect();
        let now = ctx.now_ms;
        let mut locked = ctx.lock_keys(&keys);
        let mut registers = Box::new([0u8; REGISTERS]);
        if let Err(reply) = merge_sources(&mut locked, &keys, now, &mut registers) {
            return reply;
        }
        return Reply::Int(hll::count_registers(&registers) as i64);
    }
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let Some(entry) = shard.lookup_read(key, now) else {
        return Reply::Int(0);
    };
    let count = match sketch_of(entry) {
        Ok((sketch, _)) => match hll::cached_count(sketch) {
            Some(count) => return Reply::Int(count as i64),
            None => match hll::count(sketch) {
                Ok(count) => count,
                Err(hll::Corrupt) => return corrupt(),
            },
        },
        Err(reply) => return reply,
    };
    // The cache lives in the value, so refreshing it is a write, which
    // Redis propagates as the PFCOUNT itself (its replay computes the same
    // count from the same registers).
    if let Some(mut entry) = shard.get_mut(key, now) {
        entry.patch_str(hll::CACHE_OFFSET, &hll::cache_bytes(count));
    }
    drop(shard);
    if !ctx.shared.master_link.is_replica() {
        propagate::effect(ctx, &[b"PFCOUNT", argv[1]]);
    }
    Reply::Int(count as i64)
}

/// Folds the sketches at `keys` (missing ones are empty; their shards
/// locked in `locked`) into `registers`; true when one of them is dense.
fn merge_sources(
    locked: &mut MultiLock<'_>,
    keys: &[KeyRef<'_>],
    now: u64,
    registers: &mut [u8; REGISTERS],
) -> Result<bool, Reply> {
    let mut any_dense = false;
    for key in keys {
        let Some(entry) = locked.shard(*key).lookup_read(*key, now) else {
            continue;
        };
        let (sketch, encoding) = sketch_of(entry)?;
        any_dense |= encoding == Encoding::Dense;
        hll::merge_into(registers, sketch).map_err(|_| corrupt())?;
    }
    Ok(any_dense)
}

/// PFMERGE destkey [sourcekey ...]: the destination (a source too) gets
/// the largest of each register, dense when any input is. Every key stays
/// locked from the first read to the write.
pub fn pfmerge(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let sparse_max = ctx.shared.encodings.get().hll_sparse_max_bytes;
    let keys: Vec<_> = argv[1..].iter().map(|k| ctx.key(k)).collect();
    let dest = keys[0];
    let now = ctx.now_ms;
    let mut locked = ctx.lock_keys(&keys);
    let mut registers = Box::new([0u8; REGISTERS]);
    let any_dense = match merge_sources(&mut locked, &keys, now, &mut registers) {
        Ok(any_dense) => any_dense,
        Err(reply) => return reply,
    };
    let shard = locked.shard(dest);
    // The destination was merged as a source above: a sketch whose runs
    // add up, or missing.
    let existing = match shard.get(dest, now) {
        Some(entry) => match entry.value() {
            ValueRef::Str(bytes) => Some(bytes.to_vec()),
            _ => None,
        },
        None => None,
    };
    let existed = existing.is_some();
    let mut sketch = existing.unwrap_or_else(hll::new_sparse);
    if any_dense && hll::to_dense(&mut sketch).is_err() {
        return corrupt();
    }
    for (index, &count) in registers.iter().enumerate() {
        if count > 0 && hll::set_register(&mut sketch, index, count, sparse_max).is_err() {
            return corrupt();
        }
    }
    sketch[hll::STALE_OFFSET] = hll::stale_byte(&sketch);
    if !existed {
        shard.set(dest, ValueRef::Str(&sketch), 0, now);
    } else if let Some(mut entry) = shard.get_mut(dest, now) {
        // In place: the destination keeps its TTL, as in Redis.
        entry.set_value(ValueRef::Str(&sketch));
    }
    // A merge is a mass PFADD, to Redis's notifications too.
    ctx.notify(class::STRING, "pfadd", argv[1]);
    Reply::Ok
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key: Redis's debugging view of
/// a sketch. GETREG and TODENSE turn a sparse sketch dense for good.
pub fn pfdebug(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[2]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let Some(mut entry) = shard.get_mut(key, now) else {
        return Reply::error("ERR The specified key does not exist");
    };
    let (sketch, encoding) = match sketch_of(&entry) {
        Ok((sketch, encoding)) => (sketch.to_vec(), encoding),
        Err(reply) => return reply,
    };
    entry.leave_unmodified();
    let subcommand = argv[1].to_ascii_lowercase();
    let to_dense = |entry: &mut crate::store::EntryMut<'_>, mut sketch: Vec<u8>| {
        hll::to_dense(&mut sketch).map_err(|_| corrupt())?;
        entry.set_value(ValueRef::Str(&sketch));
        Ok::<Vec<u8>, Reply>(sketch)
    };
    match subcommand.as_slice() {
        b"getreg" => {
            let sketch = if encoding == Encoding::Sparse {
                match to_dense(&mut entry, sketch) {
                    Ok(sketch) => sketch,
                    Err(reply) => return reply,
                }
            } else {
                sketch
            };
            Reply::Array(
                hll::registers(&sketch)
                    .into_iter()
                    .map(|value| Reply::Int(value as i64))
                    .collect(),
            )
        }
        b"decode" if encoding != Encoding::Sparse => Reply::error("ERR HLL encoding is not sparse"),
        b"decode" => Reply::bulk(hll::decode_sparse(&sketch).as_bytes()),
        b"encoding" => Reply::Status(encoding.name().into()),
        b"todense" if encoding == Encoding::Sparse => match to_dense(&mut entry, sketch) {
            Ok(_) => Reply::Int(1),
            Err(reply) => reply,
        },
        b"todense" => Reply::Int(0),
        _ => Reply::error(format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(argv[1])
        )),
    }
}

/// PFSELFTEST: Redis's self test of the sketch code (register packing,
/// the estimate's error, sparse and dense agreeing).
pub fn pfselftest(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let sparse_max = ctx.shared.encodings.get().hll_sparse_max_bytes;
    let mut state = crate::util::random_u64() | 1;
    // xorshift64: any uniform source serves, as rand() does for Redis.
    let random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 32) as u32
    };
    match hll::self_test(sparse_max, random) {
        Ok(()) => Reply::Ok,
        Err(message) => Reply::error(message),
    }
}
