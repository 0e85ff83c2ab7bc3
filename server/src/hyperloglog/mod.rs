//! HyperLogLog as Redis 7.0 keeps it (hyperloglog.c): the same bytes in a
//! string value, so a sketch moves between tally and Redis by GET/SET,
//! DUMP/RESTORE or a snapshot, and the same counts, to the last unit.
//!
//! A sketch is 16384 registers of 6 bits. An element is hashed with
//! MurmurHash64A (seed `0xadc83b19`); the low 14 bits choose the register
//! and the run of zero bits above them, plus one, is the candidate value.
//! The register keeps the largest candidate seen. The cardinality is
//! estimated from the histogram of register values with Otmar Ertl's
//! improved estimator, as Redis 5+ computes it.
//!
//! The value is a 16-byte header (`HYLL`, the encoding, three unused
//! bytes, the cached cardinality in little endian whose top bit marks it
//! stale) and then either:
//! - dense: the registers packed 6 bits each, least significant bits
//!   first (12288 bytes);
//! - sparse: run-length opcodes, for sketches with few registers set:
//!   `00xxxxxx` ZERO (1-64 zero registers), `01xxxxxx yyyyyyyy` XZERO
//!   (1-16384 zero registers), `1vvvvvxx` VAL (1-4 registers of value
//!   1-32). A register past 32, or a sparse form longer than
//!   `hll-sparse-max-bytes`, turns the sketch dense for good.
//!
//! A value can be any bytes a client SET, so every walk over the sparse
//! form checks that its runs stay within the 16384 registers, and refuses
//! the value otherwise (Redis's fix for CVE-2025-32023, where a crafted
//! run overflowed its index and wrote out of bounds).

/// Header bytes before the registers.
pub const HEADER_LEN: usize = 16;
/// Bits of the hash that choose the register.
const P: u32 = 14;
/// The remaining hash bits, whose run of zeros is counted.
const Q: usize = 64 - P as usize;
/// Registers in a sketch.
pub const REGISTERS: usize = 1 << P;
/// Bits per dense register.
const BITS: usize = 6;
/// The largest value a dense register holds.
const REGISTER_MAX: u8 = (1 << BITS) - 1;
/// A dense sketch's whole length.
pub const DENSE_LEN: usize = HEADER_LEN + (REGISTERS * BITS).div_ceil(8);
/// The encoding byte (offset 4) of a dense sketch.
const DENSE: u8 = 0;
/// The encoding byte of a sparse sketch.
const SPARSE: u8 = 1;
/// Offset of the cached cardinality.
const CARD: usize = 8;
/// The bit of the cardinality's last byte that marks it stale.
const STALE: u8 = 1 << 7;

const XZERO_BIT: u8 = 0x40;
const VAL_BIT: u8 = 0x80;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;
/// 0.5 / ln(2): the estimator's constant for an unbounded register count.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// A sparse form whose runs do not cover exactly the 16384 registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// How a sketch's registers are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Every register packed in 6 bits.
    Dense,
    /// Run-length opcodes.
    Sparse,
}

impl Encoding {
    /// PFDEBUG ENCODING's word for it.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Dense => "dense",
            Encoding::Sparse => "sparse",
        }
    }
}

/// The encoding of `value` if it is a sketch by Redis's test
/// (isHLLObjectOrReply): a header with the magic and a known encoding, and
/// for a dense one exactly the dense length. A sparse body is checked only
/// as it is walked.
pub fn encoding_of(value: &[u8]) -> Option<Encoding> {
    if value.len() < HEADER_LEN || &value[..4] != b"HYLL" {
        return None;
    }
    match value[4] {
        DENSE if value.len() == DENSE_LEN => Some(Encoding::Dense),
        SPARSE => Some(Encoding::Sparse),
        _ => None,
    }
}

/// A new, empty sketch: sparse, all registers in XZERO runs, and the
/// cached cardinality 0 (valid).
pub fn new_sparse() -> Vec<u8> {
    let mut sketch = Vec::with_capacity(HEADER_LEN + 2);
    sketch.extend_from_slice(b"HYLL");
    sketch.push(SPARSE);
    sketch.resize(HEADER_LEN, 0);
    let mut left = REGISTERS;
    while left > 0 {
        let run = left.min(XZERO_MAX_LEN);
        push_xzero(&mut sketch, run);
        left -= run;
    }
    sketch
}

/// The cached cardinality, if it is not stale.
pub fn cached_count(sketch: &[u8]) -> Option<u64> {
    let bytes: [u8; 8] = sketch[CARD..HEADER_LEN].try_into().ok()?;
    (bytes[7] & STALE == 0).then(|| u64::from_le_bytes(bytes))
}

/// The header bytes that cache `count` (written at [`CACHE_OFFSET`]).
pub fn cache_bytes(count: u64) -> [u8; 8] {
    count.to_le_bytes()
}

/// Where the cached cardinality lies in the value.
pub const CACHE_OFFSET: usize = CARD;

/// The byte (at [`STALE_OFFSET`]) that marks the cache of `sketch` stale.
pub fn stale_byte(sketch: &[u8]) -> u8 {
    sketch[HEADER_LEN - 1] | STALE
}

/// Where the stale mark lies in the value.
pub const STALE_OFFSET: usize = HEADER_LEN - 1;

/// Marks the cached cardinality stale.
fn invalidate(sketch: &mut [u8]) {
    sketch[HEADER_LEN - 1] |= STALE;
}

/// MurmurHash2, 64-bit (MurmurHash64A), reading words in little endian
/// as Redis's endian-neutral copy does.
fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut words = key.chunks_exact(8);
    for word in &mut words {
        let mut k = word
            .iter()
            .rev()
            .fold(0u64, |k, &byte| (k << 8) | byte as u64);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate() {
            h ^= (byte as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register `element` falls in and its candidate value: one more
/// than the zero bits above the index bits (at most Q + 1).
pub fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Register `index` of dense registers `regs`. The last register's bits
/// all lie in the last byte; Redis reads the string's terminating zero
/// past it, which adds nothing.
pub fn dense_get(regs: &[u8], index: usize) -> u8 {
    let (_, shift, [b0, b1]) = window(regs, index);
    ((((b0 as u32) >> shift) | ((b1 as u32) << (8 - shift))) & REGISTER_MAX as u32) as u8
}

/// The two bytes from a register's first on, `window`, with the register
/// (its bits from `shift` of the first byte) set to `value`.
fn placed(window: [u8; 2], shift: usize, value: u8) -> [u8; 2] {
    let (value, mask) = (value as u32, REGISTER_MAX as u32);
    [
        ((window[0] as u32 & !(mask << shift)) | (value << shift)) as u8,
        ((window[1] as u32 & !(mask >> (8 - shift))) | (value >> (8 - shift))) as u8,
    ]
}

/// The byte register `index` starts in, the bit it starts at, and the two
/// bytes from there (zero past the end: the last register's bits all lie
/// in the last byte).
fn window(regs: &[u8], index: usize) -> (usize, usize, [u8; 2]) {
    let byte = index * BITS / 8;
    let next = regs.get(byte + 1).copied().unwrap_or(0);
    (byte, (index * BITS) & 7, [regs[byte], next])
}

/// Sets register `index` to `value` (at most 63).
fn dense_put(regs: &mut [u8], index: usize, value: u8) {
    let (byte, shift, bytes) = window(regs, index);
    let [first, second] = placed(bytes, shift, value);
    regs[byte] = first;
    if let Some(next) = regs.get_mut(byte + 1) {
        *next = second;
    }
}

/// A change to a dense sketch stored elsewhere: `bytes[..len]` go at
/// `offset` of the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Patch {
    /// Where in the value the bytes go.
    pub offset: usize,
    /// The new bytes; only the first `len` are written.
    pub bytes: [u8; 2],
    /// 1 for the last register, whose bits all lie in the last byte.
    pub len: usize,
}

/// What raising register `index` of the dense sketch `sketch` to `count`
/// writes, if `count` is larger than the register: the one or two bytes
/// it spans, so a stored sketch is patched where it lies.
pub fn dense_raise(sketch: &[u8], index: usize, count: u8) -> Option<Patch> {
    let regs = &sketch[HEADER_LEN..];
    if count <= dense_get(regs, index) {
        return None;
    }
    let (byte, shift, bytes) = window(regs, index);
    let len = if byte + 1 < regs.len() { 2 } else { 1 };
    let window = placed(bytes, shift, count);
    Some(Patch {
        offset: HEADER_LEN + byte,
        bytes: window,
        len,
    })
}

/// Raises register `index` of a dense sketch to `count`; true when it
/// was lower.
fn dense_set(sketch: &mut [u8], index: usize, count: u8) -> bool {
    let regs = &mut sketch[HEADER_LEN..];
    if count > dense_get(regs, index) {
        dense_put(regs, index, count);
        true
    } else {
        false
    }
}

/// Adds `element` to a sketch held whole (a sparse one, typically):
/// true when a register rose.
pub fn add(sketch: &mut Vec<u8>, element: &[u8], sparse_max_bytes: usize) -> Result<bool, Corrupt> {
    let (index, count) = pattern(element);
    set_register(sketch, index, count, sparse_max_bytes)
}

/// The registers of a dense or sparse sketch as one byte each, folded into
/// `max` by maximum (PFMERGE, PFCOUNT of several keys).
pub fn merge_into(max: &mut [u8; REGISTERS], sketch: &[u8]) -> Result<(), Corrupt> {
    if sketch[4] == DENSE {
        let regs = &sketch[HEADER_LEN..];
        for (index, slot) in max.iter_mut().enumerate() {
            *slot = (*slot).max(dense_get(regs, index));
        }
        return Ok(());
    }
    walk_sparse(sketch, |first, op| {
        if let Op::Val { value, run } = op {
            for slot in &mut max[first..first + run] {
                *slot = (*slot).max(value);
            }
        }
    })
}

/// The estimated cardinality of a stored sketch.
pub fn count(sketch: &[u8]) -> Result<u64, Corrupt> {
    let mut histogram = [0u32; 64];
    if sketch[4] == DENSE {
        let regs = &sketch[HEADER_LEN..];
        // Four registers in every three bytes.
        for group in regs.chunks_exact(3) {
            let word = group[0] as u32 | (group[1] as u32) << 8 | (group[2] as u32) << 16;
            for k in 0..4 {
                histogram[((word >> (6 * k)) & 63) as usize] += 1;
            }
        }
    } else {
        walk_sparse(sketch, |_, op| match op {
            Op::Zero { run, .. } => histogram[0] += run as u32,
            Op::Val { value, run } => histogram[value as usize] += run as u32,
        })?;
    }
    Ok(estimate(&histogram))
}

/// The estimated cardinality of registers held one per byte.
pub fn count_registers(registers: &[u8; REGISTERS]) -> u64 {
    let mut histogram = [0u32; 64];
    for &value in registers.iter() {
        histogram[(value & 63) as usize] += 1;
    }
    estimate(&histogram)
}

/// Ertl's estimator over the register histogram ("New cardinality
/// estimation algorithms for HyperLogLog sketches", arXiv:1702.01284),
/// in Redis's order of floating-point operations so the result agrees to
/// the unit.
fn estimate(histogram: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - histogram[Q + 1] as f64) / m);
    for j in (1..=Q).rev() {
        z += histogram[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histogram[0] as f64 / m);
    // llroundl: halves away from zero, as f64::round.
    (ALPHA_INF * m * m / z).round() as u64
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let previous = z;
        z += x * y;
        y += y;
        if previous == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let previous = z;
        y *= 0.5;
        z -= (1.0 - x).powf(2.0) * y;
        if previous == z {
            return z / 3.0;
        }
    }
}

/// PFDEBUG GETREG: every register of a dense sketch.
pub fn registers(sketch: &[u8]) -> Vec<u8> {
    let regs = &sketch[HEADER_LEN..];
    (0..REGISTERS).map(|index| dense_get(regs, index)).collect()
}

/// PFSELFTEST: Redis's self test of the register packing and of the
/// estimate's error, with both encodings fed the same elements. `random`
/// gives the random numbers Redis takes from rand().
pub fn self_test(sparse_max_bytes: usize, mut random: impl FnMut() -> u32) -> Result<(), String> {
    let mut dense = vec![0u8; DENSE_LEN];
    dense[..4].copy_from_slice(b"HYLL");
    // Registers keep what is set, and only that.
    let mut expected = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (index, slot) in expected.iter_mut().enumerate() {
            let value = (random() & REGISTER_MAX as u32) as u8;
            *slot = value;
            dense_put(&mut dense[HEADER_LEN..], index, value);
        }
        for (index, &value) in expected.iter().enumerate() {
            let got = dense_get(&dense[HEADER_LEN..], index);
            if got != value {
                return Err(format!(
                    "TESTFAILED Register {index} should be {value} but is {got}"
                ));
            }
        }
    }
    // The estimate stays within six standard errors, sparse and dense
    // agree, and small sketches stay sparse.
    dense[HEADER_LEN..].fill(0);
    let mut sparse = new_sparse();
    let relative_error = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint: u64 = 1;
    let seed = random() as u64 | (random() as u64) << 32;
    for j in 1..=10_000_000u64 {
        let element = (j ^ seed).to_le_bytes();
        let (index, rank) = pattern(&element);
        dense_set(&mut dense, index, rank);
        set_register(&mut sparse, index, rank, sparse_max_bytes)
            .map_err(|_| "TESTFAILED sparse sketch corrupted".to_string())?;
        if j != checkpoint {
            continue;
        }
        if (j as usize) < sparse_max_bytes / 2 && sparse[4] != SPARSE {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        // A dense sketch always counts.
        let dense_count = count(&dense).unwrap_or(0);
        if count(&sparse).ok() != Some(dense_count) {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let error = (checkpoint as i64 - dense_count as i64).unsigned_abs();
        let max_error = if j == 10 {
            // Collisions make an error of more than one likely at 10.
            1
        } else {
            (relative_error * 6.0 * checkpoint as f64).ceil() as u64
        };
        if error > max_error {
            return Err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{error}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}

mod sparse;

pub use sparse::{decode_sparse, set_register, to_dense};
use sparse::{push_xzero, walk_sparse, Op};

#[cfg(test)]
mod tests;
