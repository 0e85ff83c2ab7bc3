use super::sparse::val_byte;
use super::*;

/// Elements `prefix0`, `prefix1`, ...
fn elements(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .collect()
}

#[test]
fn a_new_sketch_is_redis_s_eighteen_bytes() {
    let sketch = new_sparse();
    assert_eq!(sketch, b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff".to_vec());
    assert_eq!(encoding_of(&sketch), Some(Encoding::Sparse));
    assert_eq!(cached_count(&sketch), Some(0));
    assert_eq!(count(&sketch), Ok(0));
    assert_eq!(decode_sparse(&sketch), "Z:16384");
}

#[test]
fn murmur_matches_redis_s_register_choice() {
    // PFADD h a b c on redis-server 7.0.15 decodes as
    // "Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603".
    let mut sketch = new_sparse();
    for element in [b"a", b"b", b"c"] {
        assert_eq!(add(&mut sketch, element, 3000), Ok(true));
    }
    assert_eq!(
        decode_sparse(&sketch),
        "Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603"
    );
    assert_eq!(count(&sketch), Ok(3));
}

#[test]
fn only_the_magic_a_known_encoding_and_the_dense_length_make_a_sketch() {
    let mut dense = new_sparse();
    to_dense(&mut dense).unwrap();
    assert_eq!(dense.len(), DENSE_LEN);
    assert_eq!(encoding_of(&dense), Some(Encoding::Dense));
    assert_eq!(encoding_of(&dense[..DENSE_LEN - 1]), None);
    assert_eq!(encoding_of(b"HYLL"), None);
    let mut other = new_sparse();
    other[4] = 2;
    assert_eq!(encoding_of(&other), None);
    other[4] = 1;
    other[0] = b'h';
    assert_eq!(encoding_of(&other), None);
}

#[test]
fn dense_registers_keep_what_is_set_and_nothing_else() {
    let mut regs = vec![0u8; DENSE_LEN - HEADER_LEN];
    for index in 0..REGISTERS {
        dense_put(&mut regs, index, (index * 7 % 64) as u8);
    }
    for index in 0..REGISTERS {
        assert_eq!(dense_get(&regs, index), (index * 7 % 64) as u8, "{index}");
    }
}

#[test]
fn a_patch_writes_what_setting_the_register_would() {
    let mut sketch = new_sparse();
    to_dense(&mut sketch).unwrap();
    for (i, index) in [0, 1, 2, 3, 4, 5, 1000, REGISTERS - 2, REGISTERS - 1]
        .into_iter()
        .enumerate()
    {
        let count = 40 + i as u8;
        let patch = dense_raise(&sketch, index, count).expect("a higher value");
        let mut expected = sketch.clone();
        assert!(dense_set(&mut expected, index, count));
        sketch[patch.offset..patch.offset + patch.len].copy_from_slice(&patch.bytes[..patch.len]);
        assert_eq!(sketch, expected, "register {index}");
        assert_eq!(dense_raise(&sketch, index, count), None);
        assert_eq!(dense_raise(&sketch, index, count - 1), None);
    }
}

#[test]
fn sparse_and_dense_count_alike_at_every_size() {
    let mut sparse = new_sparse();
    let mut dense = new_sparse();
    to_dense(&mut dense).unwrap();
    for (i, element) in elements("x", 20_000).iter().enumerate() {
        let a = add(&mut sparse, element, 3000).unwrap();
        let b = add(&mut dense, element, 3000).unwrap();
        assert_eq!(a, b, "element {i}");
        if i % 97 == 0 {
            assert_eq!(count(&sparse), count(&dense), "after {i}");
        }
    }
    // The sparse one has turned dense past 3000 bytes, into the same bytes
    // (their caches aside).
    assert_eq!(sparse[4], DENSE);
    assert_eq!(sparse[HEADER_LEN..], dense[HEADER_LEN..]);
    let estimate = count(&dense).unwrap() as f64;
    assert!((estimate - 20_000.0).abs() < 20_000.0 * 0.05, "{estimate}");
}

#[test]
fn a_value_past_thirty_two_turns_a_sparse_sketch_dense() {
    let mut sketch = new_sparse();
    add(&mut sketch, b"a", 3000).unwrap();
    assert_eq!(set_register(&mut sketch, 5, 33, 3000), Ok(true));
    assert_eq!(encoding_of(&sketch), Some(Encoding::Dense));
    assert_eq!(dense_get(&sketch[HEADER_LEN..], 5), 33);
    let (index, rank) = pattern(b"a");
    assert_eq!(dense_get(&sketch[HEADER_LEN..], index), rank);
}

#[test]
fn runs_split_and_merge_as_redis_writes_them() {
    let mut sketch = new_sparse();
    // Inside an XZERO run: ZERO/XZERO on each side.
    set_register(&mut sketch, 100, 3, 3000).unwrap();
    assert_eq!(decode_sparse(&sketch), "Z:100 v:3,1 Z:16283");
    set_register(&mut sketch, 10, 2, 3000).unwrap();
    assert_eq!(decode_sparse(&sketch), "z:10 v:2,1 Z:89 v:3,1 Z:16283");
    // Neighbours of one value merge into one VAL run (up to 4).
    set_register(&mut sketch, 101, 3, 3000).unwrap();
    set_register(&mut sketch, 102, 3, 3000).unwrap();
    set_register(&mut sketch, 99, 3, 3000).unwrap();
    assert_eq!(decode_sparse(&sketch), "z:10 v:2,1 Z:88 v:3,4 Z:16281");
    // Raising one register of a VAL run splits it.
    set_register(&mut sketch, 100, 5, 3000).unwrap();
    assert_eq!(
        decode_sparse(&sketch),
        "z:10 v:2,1 Z:88 v:3,1 v:5,1 v:3,2 Z:16281"
    );
    assert_eq!(set_register(&mut sketch, 100, 4, 3000), Ok(false));
    assert_eq!(cached_count(&sketch), None, "an edit marks the cache stale");
}

#[test]
fn a_sparse_sketch_past_its_limit_turns_dense() {
    let mut sketch = new_sparse();
    let mut limit_hit = false;
    for element in elements("y", 200) {
        add(&mut sketch, &element, 60).unwrap();
        if sketch[4] == DENSE {
            limit_hit = true;
            break;
        }
        assert!(sketch.len() <= 60);
    }
    assert!(limit_hit);
}

/// The two payloads of Redis's regression test for CVE-2025-32023: runs
/// whose lengths add up past 2^32 (an index that wrapped in C), then a
/// VAL opcode. Every walk refuses them.
#[test]
fn cve_2025_32023_runs_past_the_registers_are_refused() {
    let header = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0";
    let mut xzero = header.to_vec();
    for _ in 0..131_072 + 1000 {
        xzero.extend_from_slice(&[0x40 | (16383 >> 8) as u8, (16383 & 0xff) as u8]);
    }
    xzero.push(0xff);
    let mut zero = header.to_vec();
    zero.extend(std::iter::repeat_n(0x3f, 33_554_432 + 1000));
    zero.push(0xff);
    for payload in [xzero, zero] {
        assert_eq!(encoding_of(&payload), Some(Encoding::Sparse));
        assert_eq!(count(&payload), Err(Corrupt));
        let mut registers = [0u8; REGISTERS];
        assert_eq!(merge_into(&mut registers, &payload), Err(Corrupt));
        let mut copy = payload.clone();
        assert_eq!(to_dense(&mut copy), Err(Corrupt));
        assert_eq!(copy, payload, "nothing changed");
    }
}

#[test]
fn runs_that_fall_short_or_overrun_are_corrupt() {
    // One register short.
    let mut short = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0".to_vec();
    push_xzero(&mut short, REGISTERS - 1);
    assert_eq!(count(&short), Err(Corrupt));
    // A VAL run past the end.
    let mut over = short.clone();
    over.push(val_byte(3, 2));
    assert_eq!(count(&over), Err(Corrupt));
    let mut copy = over.clone();
    assert_eq!(to_dense(&mut copy), Err(Corrupt));
    // Exactly covered.
    let mut exact = short.clone();
    exact.push(val_byte(3, 1));
    assert!(count(&exact).is_ok());
    // A register past the runs cannot be set.
    assert_eq!(
        set_register(&mut short, REGISTERS - 1, 2, 3000),
        Err(Corrupt)
    );
    // An XZERO cut off by the end reads a zero second byte, as Redis
    // reads the terminator, and editing it does not panic.
    let mut cut = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0".to_vec();
    cut.push(0x40);
    assert_eq!(count(&cut), Err(Corrupt));
    let _ = set_register(&mut cut, 0, 3, 3000);
}

#[test]
fn the_estimate_is_within_its_error_across_sizes() {
    let mut registers = [0u8; REGISTERS];
    let mut n = 0;
    for target in [10usize, 100, 1000, 10_000, 100_000] {
        while n < target {
            let (index, rank) = pattern(format!("z{n}").as_bytes());
            registers[index] = registers[index].max(rank);
            n += 1;
        }
        let estimate = count_registers(&registers) as f64;
        let bound = (1.04 / (REGISTERS as f64).sqrt() * 6.0 * target as f64).max(1.0);
        assert!(
            (estimate - target as f64).abs() <= bound,
            "{target}: {estimate}"
        );
    }
}

#[test]
fn the_self_test_passes() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 32) as u32
    };
    assert_eq!(self_test(3000, random), Ok(()));
}
