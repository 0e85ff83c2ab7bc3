//! The sparse form: run-length opcodes over the registers, read and
//! edited as Redis's hllSparseSet edits them in place, so that a sparse
//! sketch has the same bytes on both servers after the same additions.

use super::{
    dense_put, dense_set, invalidate, Corrupt, DENSE, DENSE_LEN, HEADER_LEN, REGISTERS, VAL_BIT,
    VAL_MAX_LEN, VAL_MAX_VALUE, XZERO_BIT, ZERO_MAX_LEN,
};

/// One sparse opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// A run of zero registers, and whether it is the two-byte XZERO.
    Zero { run: usize, long: bool },
    /// A run of registers holding `value`.
    Val { value: u8, run: usize },
}

impl Op {
    /// The opcode at `sketch[at]`. An XZERO cut off by the end reads a
    /// zero second byte, as Redis reads the string's terminator.
    fn at(sketch: &[u8], at: usize) -> Op {
        let byte = sketch[at];
        if byte & 0xc0 == 0 {
            Op::Zero {
                run: (byte & 0x3f) as usize + 1,
                long: false,
            }
        } else if byte & 0xc0 == XZERO_BIT {
            let low = sketch.get(at + 1).copied().unwrap_or(0) as usize;
            Op::Zero {
                run: ((((byte & 0x3f) as usize) << 8) | low) + 1,
                long: true,
            }
        } else {
            Op::Val {
                value: ((byte >> 2) & 0x1f) + 1,
                run: (byte & 0x3) as usize + 1,
            }
        }
    }

    fn width(self) -> usize {
        match self {
            Op::Zero { long: true, .. } => 2,
            _ => 1,
        }
    }

    fn run(self) -> usize {
        match self {
            Op::Zero { run, .. } | Op::Val { run, .. } => run,
        }
    }
}

pub(super) fn val_byte(value: u8, run: usize) -> u8 {
    ((value - 1) << 2 | (run as u8 - 1)) | VAL_BIT
}

pub(super) fn push_xzero(out: &mut Vec<u8>, run: usize) {
    let l = run - 1;
    out.push((l >> 8) as u8 | XZERO_BIT);
    out.push((l & 0xff) as u8);
}

/// A run of `run` zero registers as the shorter opcode that holds it.
fn push_zeros(out: &mut Vec<u8>, run: usize) {
    if run > ZERO_MAX_LEN {
        push_xzero(out, run);
    } else {
        out.push((run - 1) as u8);
    }
}

/// Walks the sparse runs of `sketch`, calling `each(first, op)` for each,
/// and checks that they cover exactly the registers (no run past the end).
pub(super) fn walk_sparse(sketch: &[u8], mut each: impl FnMut(usize, Op)) -> Result<(), Corrupt> {
    let mut at = HEADER_LEN;
    let mut index = 0usize;
    while at < sketch.len() {
        let op = Op::at(sketch, at);
        if index + op.run() > REGISTERS {
            return Err(Corrupt);
        }
        each(index, op);
        index += op.run();
        at += op.width();
    }
    if index == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// Turns a sparse sketch dense (a dense one is left as it is), keeping
/// its header (and so its cached cardinality).
pub fn to_dense(sketch: &mut Vec<u8>) -> Result<(), Corrupt> {
    if sketch[4] == DENSE {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_LEN];
    dense[..HEADER_LEN].copy_from_slice(&sketch[..HEADER_LEN]);
    dense[4] = DENSE;
    walk_sparse(sketch, |first, op| {
        if let Op::Val { value, run } = op {
            for index in first..first + run {
                dense_put(&mut dense[HEADER_LEN..], index, value);
            }
        }
    })?;
    *sketch = dense;
    Ok(())
}

/// Raises register `index` of a sketch in either encoding to `count`,
/// as Redis's hllSparseSet edits the runs in place: true when the
/// register was lower. A sparse sketch turns dense when `count` is past
/// what a VAL opcode holds or the edit would take it past
/// `sparse_max_bytes`.
pub fn set_register(
    sketch: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max_bytes: usize,
) -> Result<bool, Corrupt> {
    if sketch[4] == DENSE {
        return Ok(dense_set(sketch, index, count));
    }
    if count > VAL_MAX_VALUE {
        to_dense(sketch)?;
        return Ok(dense_set(sketch, index, count));
    }
    // Step 1: the opcode that covers the register, and the one before it.
    let mut at = HEADER_LEN;
    let mut first = 0usize;
    let mut prev = None;
    let mut op = None;
    while at < sketch.len() {
        let here = Op::at(sketch, at);
        if index < first + here.run() {
            op = Some(here);
            break;
        }
        prev = Some(at);
        at += here.width();
        first += here.run();
    }
    let Some(op) = op else {
        return Err(Corrupt);
    };
    // Step 2: the cases that rewrite one byte in place.
    let edited = match op {
        Op::Val { value, .. } if value >= count => return Ok(false),
        Op::Val { run: 1, .. }
        | Op::Zero {
            run: 1,
            long: false,
        } => {
            sketch[at] = val_byte(count, 1);
            true
        }
        _ => false,
    };
    if !edited {
        // The general case splits the opcode around the register: at
        // most XZERO VAL XZERO, five bytes.
        let last = first + op.run() - 1;
        let mut seq = Vec::with_capacity(5);
        match op {
            Op::Zero { .. } => {
                if index != first {
                    push_zeros(&mut seq, index - first);
                }
                seq.push(val_byte(count, 1));
                if index != last {
                    push_zeros(&mut seq, last - index);
                }
            }
            Op::Val { value, .. } => {
                if index != first {
                    seq.push(val_byte(value, index - first));
                }
                seq.push(val_byte(count, 1));
                if index != last {
                    seq.push(val_byte(value, last - index));
                }
            }
        }
        let old = op.width();
        if seq.len() > old && sketch.len() + seq.len() - old > sparse_max_bytes {
            to_dense(sketch)?;
            return Ok(dense_set(sketch, index, count));
        }
        let end = (at + old).min(sketch.len());
        // An XZERO cut off by the end loses its missing byte's share,
        // as Redis's length arithmetic does.
        let cut = at + old - end;
        sketch.splice(at..end, seq);
        sketch.truncate(sketch.len() - cut);
    }
    // Step 3: adjacent VAL opcodes of the same value merge, up to the
    // longest run one opcode holds, scanning a few opcodes from `prev`.
    let mut p = prev.unwrap_or(HEADER_LEN);
    let mut scan = 5;
    while p < sketch.len() && scan > 0 {
        scan -= 1;
        let here = Op::at(sketch, p);
        let Op::Val { value, run } = here else {
            p += here.width();
            continue;
        };
        if p + 1 < sketch.len() {
            if let Op::Val {
                value: next_value,
                run: next_run,
            } = Op::at(sketch, p + 1)
            {
                if next_value == value && run + next_run <= VAL_MAX_LEN {
                    sketch[p + 1] = val_byte(value, run + next_run);
                    sketch.remove(p);
                    // Try the merged opcode with the one after it too.
                    continue;
                }
            }
        }
        p += 1;
    }
    invalidate(sketch);
    Ok(true)
}

/// PFDEBUG DECODE: the sparse opcodes as Redis spells them
/// (`z:<run>`, `Z:<run>`, `v:<value>,<run>`), space separated.
pub fn decode_sparse(sketch: &[u8]) -> String {
    let mut words = Vec::new();
    let mut at = HEADER_LEN;
    while at < sketch.len() {
        let op = Op::at(sketch, at);
        words.push(match op {
            Op::Zero { run, long: false } => format!("z:{run}"),
            Op::Zero { run, long: true } => format!("Z:{run}"),
            Op::Val { value, run } => format!("v:{value},{run}"),
        });
        at += op.width();
    }
    words.join(" ")
}
