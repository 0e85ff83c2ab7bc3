//! One shard: set, read, replace, remove, lazy and active expiry, SCAN,
//! memory accounting, WATCH flags and the key observer.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::{store_with, Recorder};
use crate::store::ValueRef;

const NOW: u64 = 1_000_000;

#[test]
fn a_set_key_reads_back_and_a_replace_says_so() {
    let store = store_with(1, &Arc::default());
    let mut shard = store.db(0).lock_shard(0);
    let key = store.key(b"k");
    assert!(!shard.set(key, ValueRef::string(b"12"), 0, NOW));
    assert_eq!(
        shard.get(key, NOW).map(|e| e.value()),
        Some(ValueRef::Int(12))
    );
    assert!(shard.set(key, ValueRef::string(b"v"), 0, NOW));
    assert_eq!(
        shard.get(key, NOW).map(|e| e.value()),
        Some(ValueRef::Str(b"v"))
    );
    assert_eq!(shard.len(), 1);
    assert!(shard.remove(key, NOW));
    assert!(!shard.remove(key, NOW));
    assert!(shard.is_empty());
}

#[test]
fn an_expired_key_is_absent_and_counted_once_when_found() {
    let store = store_with(1, &Arc::default());
    let mut shard = store.db(0).lock_shard(0);
    let key = store.key(b"k");
    shard.set(key, ValueRef::Str(b"v"), NOW + 10, NOW);
    assert_eq!(shard.volatile_len(), 1);
    // Alive through its deadline's millisecond, as Redis's keys are.
    assert!(shard.contains(key, NOW + 10));
    assert!(!shard.contains(key, NOW + 11));
    assert!(shard.get(key, NOW + 11).is_none());
    assert_eq!(shard.take_expired_count(), 1);
    assert_eq!(shard.take_expired_count(), 0);
    assert_eq!((shard.len(), shard.volatile_len()), (0, 0));
}

#[test]
fn the_sweep_removes_what_expired_and_nothing_else() {
    let store = store_with(1, &Arc::default());
    let mut shard = store.db(0).lock_shard(0);
    for i in 0..100u32 {
        let name = format!("k{i}");
        let deadline = if i % 4 == 0 { NOW + 5 } else { 0 };
        shard.set(
            store.key(name.as_bytes()),
            ValueRef::Int(i as i64),
            deadline,
            NOW,
        );
    }
    let buckets = shard.num_buckets();
    // It counts the keys with a deadline it met: the 25, not the 100.
    assert_eq!(shard.sweep(NOW + 5, buckets), (25, 0));
    let (examined, removed) = shard.sweep(NOW + 6, buckets);
    assert_eq!((examined, removed), (25, 25));
    assert_eq!(shard.len(), 75);
    assert_eq!(shard.volatile_len(), 0);
    assert_eq!(shard.take_expired_count(), 25);
}

#[test]
fn a_scan_without_resizes_returns_every_live_key_once() {
    let store = store_with(1, &Arc::default());
    let mut shard = store.db(0).lock_shard(0);
    let mut expected = BTreeSet::new();
    for i in 0..500u32 {
        let name = format!("key:{i}");
        let deadline = if i % 10 == 0 { NOW - 1 } else { 0 };
        shard.set(
            store.key(name.as_bytes()),
            ValueRef::Int(1),
            deadline,
            NOW - 2,
        );
        if deadline == 0 {
            expected.insert(name.into_bytes());
        }
    }
    let (mut position, mut epoch) = (0, 0);
    let mut seen = Vec::new();
    loop {
        let (next, at) = shard.scan(position, epoch, 10, NOW, |_| true, &mut seen);
        epoch = at;
        match next {
            Some(next) => position = next,
            None => break,
        }
    }
    assert_eq!(seen.len(), expected.len(), "no key twice");
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), expected);
}

#[test]
fn a_keys_memory_is_accounted_and_given_back_the_table_stays() {
    let store = store_with(1, &Arc::default());
    let mut shard = store.db(0).lock_shard(0);
    let before = shard.bytes();
    let long = vec![b'x'; 1000];
    shard.set(store.key(b"k"), ValueRef::Str(&long), 0, NOW);
    let with_key = shard.bytes();
    assert!(with_key >= before + 1000, "{before} -> {with_key}");
    assert_eq!(store.used_memory(), with_key);
    shard.remove(store.key(b"k"), NOW);
    // What stays is the table's bucket array, which keeps its size.
    assert_eq!(shard.bytes(), shard.table_bytes());
    assert_eq!(store.used_memory(), shard.bytes());
}

#[test]
fn a_write_raises_the_watch_flag_of_its_key_only() {
    let store = store_with(1, &Arc::default());
    let mut shard = store.db(0).lock_shard(0);
    let (watched, other) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    shard.watch(b"a", &watched);
    shard.watch(b"b", &other);
    shard.set(store.key(b"a"), ValueRef::Int(1), 0, NOW);
    assert!(watched.load(Ordering::Acquire));
    assert!(!other.load(Ordering::Acquire));
    shard.unwatch(b"b", &other);
    shard.set(store.key(b"b"), ValueRef::Int(1), 0, NOW);
    assert!(!other.load(Ordering::Acquire));
}

#[test]
fn the_observer_hears_of_writes_removals_and_expiries() {
    let recorder = Arc::new(Recorder::default());
    let store = store_with(1, &recorder);
    let mut shard = store.db(0).lock_shard(0);
    shard.set(store.key(b"set"), ValueRef::Int(1), 0, NOW);
    shard.set(store.key(b"gone"), ValueRef::Int(1), 0, NOW);
    shard.remove(store.key(b"gone"), NOW);
    shard.set(store.key(b"expires"), ValueRef::Int(1), NOW + 1, NOW);
    assert!(shard.get(store.key(b"expires"), NOW + 2).is_none());
    // A read of a live key tells nothing.
    shard.get(store.key(b"set"), NOW);
    let heard: Vec<&[u8]> = vec![b"set", b"gone", b"gone", b"expires", b"expires"];
    assert_eq!(*recorder.keys.lock(), heard);
}

#[test]
fn a_taken_collection_moves_without_a_copy_and_its_bytes_go_with_it() {
    use crate::store::object::{Encodings, Object, Set};
    use crate::store::OwnedValue;
    let store = store_with(1, &Arc::default());
    let mut shard = store.db(0).lock_shard(0);
    let mut set = Set::default();
    for i in 0..1000 {
        set.insert(format!("m{i}").as_bytes(), &Encodings::default());
    }
    let object = Box::new(Object::Set(set));
    let address = &*object as *const Object;
    shard.set_object(store.key(b"src"), object, NOW + 5000, NOW);
    let with_set = shard.bytes();
    let Some((OwnedValue::Obj(taken), expire_at)) = shard.take(store.key(b"src"), NOW) else {
        panic!("the collection comes out");
    };
    assert_eq!(&*taken as *const Object, address, "moved, not copied");
    assert_eq!(expire_at, NOW + 5000);
    // What stays is the table's bucket array.
    assert_eq!(shard.bytes(), shard.table_bytes(), "its bytes left with it");
    assert!(shard.get(store.key(b"src"), NOW).is_none());
    shard.set_object(store.key(b"dst"), taken, expire_at, NOW);
    assert_eq!(shard.bytes(), with_set);
    assert_eq!(
        shard
            .get(store.key(b"dst"), NOW)
            .map(|e| e.value().is_string()),
        Some(false)
    );
    // Strings come out as copies; missing and expired keys not at all.
    shard.set(store.key(b"n"), ValueRef::Int(7), NOW + 1, NOW);
    assert!(matches!(
        shard.take(store.key(b"n"), NOW),
        Some((OwnedValue::Int(7), _))
    ));
    shard.set(store.key(b"gone"), ValueRef::Int(7), NOW + 1, NOW);
    assert!(shard.take(store.key(b"gone"), NOW + 2).is_none());
    assert!(shard.take(store.key(b"missing"), NOW).is_none());
}

/// A collection's write finds its key once: an existing key is returned as
/// it is (even past a deadline not yet reached), a missing or expired one is
/// created from `make` only when it gives an object, and nothing is stored
/// when it gives none.
#[test]
fn get_mut_or_create_makes_only_what_is_missing() {
    use crate::store::object::{Kind, Set};
    let store = store_with(1, &Arc::default());
    let mut shard = store.db(0).lock_shard(0);
    let key = store.key(b"s");
    assert!(shard.get_mut_or_create(key, NOW, || None).is_none());
    assert!(shard.is_empty());
    let made = shard.get_mut_or_create(key, NOW, || Some(Box::new(Set::empty())));
    assert!(made.is_some());
    drop(made);
    assert_eq!(shard.len(), 1);
    // Found, not made again: `make` is not called.
    assert!(shard
        .get_mut_or_create(key, NOW, || panic!("made twice"))
        .is_some());
    // A string where a set would be made is returned for the caller to
    // refuse (WRONGTYPE), not replaced.
    let other = store.key(b"str");
    shard.set(other, ValueRef::Str(b"v"), NOW + 10, NOW);
    let found = shard.get_mut_or_create(other, NOW, || Some(Box::new(Set::empty())));
    assert!(found.is_some_and(|mut e| e.object_mut().is_none()));
    // Past its deadline it is gone, and a new set takes its place.
    let mut made = shard
        .get_mut_or_create(other, NOW + 11, || Some(Box::new(Set::empty())))
        .expect("made");
    assert!(made.object_mut().and_then(Set::of_mut).is_some());
}
