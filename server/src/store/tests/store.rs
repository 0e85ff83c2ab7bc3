//! The store: keys spread over shards, databases kept apart, memory
//! summed over every shard.

use std::sync::Arc;

use super::store_with;
use crate::store::{Store, ValueRef};

const NOW: u64 = 1_000_000;

#[test]
fn shards_are_a_power_of_two_and_every_key_has_one() {
    let store = store_with(5, &Arc::default());
    assert_eq!(store.db(0).shard_count(), 8);
    let mut used = std::collections::BTreeSet::new();
    for i in 0..1000u32 {
        let key = format!("k{i}");
        let shard = store.db(0).shard_of(store.key(key.as_bytes()));
        assert!(shard < 8);
        used.insert(shard);
    }
    assert_eq!(used.len(), 8, "a thousand keys reach every shard");
}

#[test]
fn a_key_is_found_in_the_shard_lock_for_gives() {
    let store = store_with(4, &Arc::default());
    let key = store.key(b"counter");
    store.db(0).lock_for(key).set(key, ValueRef::Int(7), 0, NOW);
    let index = store.db(0).shard_of(key);
    let mut shard = store.db(0).lock_shard(index);
    assert_eq!(
        shard.get(key, NOW).map(|e| e.value()),
        Some(ValueRef::Int(7))
    );
}

#[test]
fn databases_are_apart_and_memory_is_summed_over_them() {
    let store = Store::new(2, 2, Arc::new(crate::store::NoObserver));
    let key = store.key(b"k");
    store
        .db(0)
        .lock_for(key)
        .set(key, ValueRef::Str(b"zero"), 0, NOW);
    assert!(store.db(1).lock_for(key).get(key, NOW).is_none());
    let one_db = store.used_memory();
    store
        .db(1)
        .lock_for(key)
        .set(key, ValueRef::Str(b"zero"), 0, NOW);
    assert_eq!(store.used_memory(), 2 * one_db);
    store.db(0).lock_for(key).remove(key, NOW);
    store.db(1).lock_for(key).remove(key, NOW);
    // Only the two tables' bucket arrays are left.
    let tables = store.db(0).lock_for(key).table_bytes() + store.db(1).lock_for(key).table_bytes();
    assert_eq!(store.used_memory(), tables);
}

/// HeldShards::declared sorts up to 16 shards on the stack and spills past
/// that: either way it holds exactly the shards of the keys named (each
/// once, however often its keys repeat), and the others stay free.
#[test]
fn declared_holds_exactly_the_shards_of_its_keys() {
    let store = store_with(16, &Arc::default());
    let database = store.db(0);
    assert_eq!(database.shard_count(), 16);
    let names: Vec<String> = (0..40).map(|i| format!("k{}", i % 25)).collect();
    for count in [0, 1, 2, 16, 17, 40] {
        let keys: Vec<_> = names[..count]
            .iter()
            .map(|k| store.key(k.as_bytes()))
            .collect();
        let wanted: std::collections::BTreeSet<usize> =
            keys.iter().map(|k| database.shard_of(*k)).collect();
        let held = crate::store::HeldShards::declared(&store, 0, keys.iter().copied());
        for shard in 0..database.shard_count() {
            assert_eq!(
                database.try_lock_shard(shard).is_none(),
                wanted.contains(&shard),
                "{count} keys: shard {shard}"
            );
        }
        assert!(!held.conflicted());
        drop(held);
        assert!((0..16).all(|shard| database.try_lock_shard(shard).is_some()));
    }
}
