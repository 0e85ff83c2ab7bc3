//! The entry layout's tests: round trips, in-place updates, the layouts
//! and the access clock beside every other field.

use super::*;

#[test]
fn int_entry_round_trips_and_updates_in_place() {
    let mut slab = Slab::new();
    let mut e = Entry::new(
        b"rl:user:u_1:a3f2:1720000000",
        ValueRef::Int(7),
        123,
        &mut slab,
    );
    assert_eq!(e.key(), b"rl:user:u_1:a3f2:1720000000");
    assert_eq!(e.value(), ValueRef::Int(7));
    assert_eq!(e.expire_at(), 123);
    let before = e.block();
    e.set_value(ValueRef::Int(-42), &mut slab);
    assert_eq!(e.block(), before, "int overwrite must not reallocate");
    assert_eq!(e.value(), ValueRef::Int(-42));
    e.set_expire_at(0, &mut slab);
    assert_eq!(e.expire_at(), 0);
    assert!(!e.is_expired(u64::MAX));
    e.free(&mut slab);
}

#[test]
fn str_entry_changes_kind_and_length() {
    let mut slab = Slab::new();
    let mut e = Entry::new(b"", ValueRef::Str(b"hello"), 0, &mut slab);
    assert_eq!(e.key(), b"");
    assert_eq!(e.value(), ValueRef::Str(b"hello"));
    e.set_value(ValueRef::Str(b"HELLO"), &mut slab);
    assert_eq!(e.value(), ValueRef::Str(b"HELLO"));
    e.set_value(ValueRef::Str(b"a much longer value than before"), &mut slab);
    assert_eq!(e.value(), ValueRef::Str(b"a much longer value than before"));
    e.set_value(ValueRef::Int(i64::MIN), &mut slab);
    assert_eq!(e.value(), ValueRef::Int(i64::MIN));
    e.set_value(ValueRef::Str(b""), &mut slab);
    assert_eq!(e.value(), ValueRef::Str(b""));
    assert_eq!(e.key(), b"");
    e.free(&mut slab);
}

#[test]
fn far_deadlines_and_long_keys_use_the_wide_layout() {
    let mut slab = Slab::new();
    let mut e = Entry::new(b"k", ValueRef::Str(b"v"), 1000, &mut slab);
    assert!(!e.is_wide());
    e.set_expire_at(i64::MAX as u64, &mut slab);
    assert!(e.is_wide());
    assert_eq!(e.expire_at(), i64::MAX as u64);
    assert_eq!((e.key(), e.value()), (&b"k"[..], ValueRef::Str(b"v")));
    e.set_expire_at(5, &mut slab);
    assert_eq!(e.expire_at(), 5);
    e.free(&mut slab);
    let long_key = vec![b'x'; 300];
    let e = Entry::new(&long_key, ValueRef::Int(1), COMPACT_MAX_EXPIRE, &mut slab);
    assert!(e.is_wide());
    assert_eq!(e.key(), &long_key[..]);
    assert_eq!(e.expire_at(), COMPACT_MAX_EXPIRE);
    e.free(&mut slab);
}

#[test]
fn a_key_lives_through_its_deadline_millisecond() {
    let mut slab = Slab::new();
    let e = Entry::new(b"k", ValueRef::Int(1), 1000, &mut slab);
    assert!(!e.is_expired(999));
    assert!(!e.is_expired(1000));
    assert!(e.is_expired(1001));
    e.free(&mut slab);
}

#[test]
fn the_access_clock_keeps_all_24_bits_beside_every_field() {
    let mut slab = Slab::new();
    let key = b"rl:user:u_100000:a3f2:1720000000";
    for clock in [
        0,
        1,
        0xFFFF,
        0x1_0000,
        0xAB_CDEF,
        super::super::access_clock::CLOCK_MAX,
    ] {
        let mut e = Entry::new(key, ValueRef::Int(-7), COMPACT_MAX_EXPIRE, &mut slab);
        e.set_snapshot_handled(true);
        e.set_access_clock(clock);
        assert_eq!(e.access_clock(), clock);
        assert_eq!(
            e.expire_at(),
            COMPACT_MAX_EXPIRE,
            "the deadline beside the clock nibble"
        );
        assert!(e.snapshot_handled());
        assert_eq!((e.key(), e.value()), (&key[..], ValueRef::Int(-7)));
        e.set_expire_at(12345, &mut slab);
        assert_eq!((e.expire_at(), e.access_clock()), (12345, clock));
        // A new block (a longer string), then the wide layout: the
        // clock moves along.
        e.set_value(
            ValueRef::Str(b"a string longer than the old block"),
            &mut slab,
        );
        assert_eq!(e.access_clock(), clock);
        e.set_expire_at(u64::MAX, &mut slab);
        assert!(e.is_wide());
        assert_eq!((e.expire_at(), e.access_clock()), (u64::MAX, clock));
        e.set_access_clock(clock ^ 0xF0_0001);
        assert_eq!(e.access_clock(), clock ^ 0xF0_0001);
        assert_eq!(
            e.value(),
            ValueRef::Str(b"a string longer than the old block")
        );
        assert!(e.snapshot_handled());
        e.free(&mut slab);
    }
}

#[test]
fn a_new_block_starts_at_clock_zero_whatever_the_slab_held() {
    let mut slab = Slab::new();
    // A freed block holds the free list's pointer in its first bytes,
    // and the next entry of its size reuses it.
    for _ in 0..3 {
        let mut wide = Entry::new(&[b'k'; 200], ValueRef::Int(1), u64::MAX, &mut slab);
        assert!(wide.is_wide());
        assert_eq!(wide.access_clock(), 0);
        wide.set_access_clock(super::super::access_clock::CLOCK_MAX);
        wide.free(&mut slab);
        let mut compact = Entry::new(b"k", ValueRef::Int(1), 5, &mut slab);
        assert_eq!((compact.access_clock(), compact.expire_at()), (0, 5));
        compact.set_access_clock(super::super::access_clock::CLOCK_MAX);
        compact.free(&mut slab);
    }
}

#[test]
fn a_rate_limit_counter_takes_one_48_byte_block() {
    let mut slab = Slab::new();
    let e = Entry::new(
        b"rl:user:u_100000:a3f2:1720000000",
        ValueRef::Int(7),
        1,
        &mut slab,
    );
    // 16 header + 32 key.
    assert_eq!(e.heap_size(), 48);
    e.free(&mut slab);
}
