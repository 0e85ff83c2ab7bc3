//! A background snapshot of one shard while the shard keeps changing
//! (BGSAVE without fork, `store::snapshot`): whatever writes, deletes,
//! expiries, block moves and resizes happen between the writer's steps,
//! the file holds each key of the snapshot's moment exactly once with its
//! value of that moment, and no entry is left marked for the next one.

use std::collections::BTreeMap;
use std::sync::Arc;

use tally_rdb::{Encodings, Item, Reader, Value, Writer};

use super::store_with;
use crate::store::rdb_value::to_rdb;
use crate::store::snapshot::SnapshotMemory;
use crate::store::{ShardData, Store, ValueRef};

/// A key's value and deadline as a file holds them.
type Keyspace = BTreeMap<Vec<u8>, (Value, Option<u64>)>;

/// A seeded xorshift64*: the same run every time.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

const KEYS: u64 = 600;

fn name(i: u64) -> Vec<u8> {
    format!("key:{i}").into_bytes()
}

/// The live keys at `now`, as a snapshot taken then must hold them.
fn keyspace_at(shard: &ShardData, now: u64) -> Keyspace {
    shard
        .iter_live(now)
        .map(|e| {
            let expire = (e.expire_at() != 0).then(|| e.expire_at());
            (e.key().to_vec(), (to_rdb(e.value()), expire))
        })
        .collect()
}

/// One change of any kind the shard knows, to a random key, at `now`.
fn change(store: &Store, shard: &mut ShardData, rng: &mut Rng, now: u64) {
    let key_name = name(rng.below(KEYS));
    let key = store.key(&key_name);
    match rng.below(9) {
        // Replaces or creates (a new key may grow the table: a resize).
        0 => {
            shard.set(key, ValueRef::Int(rng.below(1000) as i64), 0, now);
        }
        1 => {
            let deadline = now + rng.below(40);
            shard.set(key, ValueRef::Str(b"a string"), deadline, now);
        }
        2 => {
            shard.remove(key, now);
        }
        // A value of another length: the entry moves to a new block.
        3 => {
            if let Some(mut entry) = shard.get_mut(key, now) {
                let long = vec![b'x'; 1 + rng.below(40) as usize];
                entry.set_value(ValueRef::Str(&long));
            }
        }
        // In place, or (past 2^48 ms) to the wide layout's new block.
        4 => {
            if let Some(mut entry) = shard.get_mut(key, now) {
                let deadline = match rng.below(3) {
                    0 => 0,
                    1 => now + 5,
                    _ => 1 << 50,
                };
                entry.set_expire_at(deadline);
            }
        }
        5 => {
            shard.sweep(now, 1 + rng.below(16) as usize);
        }
        // A read: an expired key is deleted on the way.
        6 => {
            shard.get(key, now);
        }
        // RENAME: the value leaves one key for another.
        7 => {
            if let Some((value, deadline)) = shard.take(key, now) {
                let to = store.key(&key_name[..key_name.len() - 1]);
                shard.set_owned(to, value, deadline, now);
            }
        }
        _ => {
            if let Some(mut entry) = shard.get_mut(key, now) {
                entry.set_value(ValueRef::Int(-1));
            }
        }
    }
}

/// Runs one snapshot from `moment`, changing the shard between the
/// writer's steps (and, with `cancel_after`, abandoning it after that many
/// steps); returns what the file holds, None when cancelled.
fn snapshot_while_changing(
    store: &Store,
    shard: &mut ShardData,
    rng: &mut Rng,
    moment: u64,
    cancel_after: Option<usize>,
) -> Option<Keyspace> {
    let encodings = Encodings::default();
    shard.begin_snapshot(
        moment,
        encodings.clone(),
        Arc::new(SnapshotMemory::default()),
    );
    let mut writer = Writer::new(encodings, true);
    writer.select_db(0, 0, 0);
    let mut now = moment;
    let mut steps = 0;
    loop {
        let (mut entries, mut encoded) = (Vec::new(), Vec::new());
        let step = shard.snapshot_step(1 + rng.below(6) as usize, &mut entries, &mut encoded);
        for e in &entries {
            writer.entry(&e.key, &e.value, e.expire_at_ms);
        }
        writer.encoded_entries(&encoded);
        if step.finished {
            break;
        }
        steps += 1;
        if cancel_after == Some(steps) {
            shard.cancel_snapshot();
            return None;
        }
        for _ in 0..rng.below(5) {
            now += rng.below(3);
            change(store, shard, rng, now);
        }
    }
    let file = writer.finish();
    let mut reader = Reader::new(&file).expect("a file");
    let mut saved = Keyspace::new();
    while let Some(item) = reader.next_item().expect("a readable file") {
        if let Item::Entry(e) = item {
            let key = String::from_utf8_lossy(&e.key).into_owned();
            assert!(
                saved.insert(e.key, (e.value, e.expire_at_ms)).is_none(),
                "{key} saved twice"
            );
        }
    }
    Some(saved)
}

fn fill(store: &Store, shard: &mut ShardData, rng: &mut Rng, now: u64) {
    for i in 0..KEYS / 2 {
        // Some keys are already expired at the moment, some expire during
        // the save: neither kind may appear, or appear late, in the file.
        let deadline = match rng.below(4) {
            0 => now - 1,
            1 => now + rng.below(30),
            _ => 0,
        };
        shard.set(
            store.key(&name(i)),
            ValueRef::Int(i as i64),
            deadline,
            now - 10,
        );
    }
}

#[test]
fn the_file_holds_the_moment_whatever_changes_during_the_save() {
    let store = store_with(1, &Arc::default());
    let mut rng = Rng(0x5EED);
    let mut moment = 1_000_000;
    let mut shard = store.db(0).lock_shard(0);
    fill(&store, &mut shard, &mut rng, moment);
    for round in 0..40 {
        let expected = keyspace_at(&shard, moment);
        let saved = snapshot_while_changing(&store, &mut shard, &mut rng, moment, None)
            .expect("not cancelled");
        assert_eq!(saved, expected, "round {round}");
        assert_eq!(shard.snapshot_marks(), 0, "round {round}: marks left");
        moment += 100;
    }
}

#[test]
fn a_cancelled_save_leaves_no_mark_for_the_next() {
    let store = store_with(1, &Arc::default());
    let mut rng = Rng(0xCA11);
    let mut moment = 1_000_000;
    let mut shard = store.db(0).lock_shard(0);
    fill(&store, &mut shard, &mut rng, moment);
    for round in 0..40 {
        let cancel_after = 1 + rng.below(20) as usize;
        snapshot_while_changing(&store, &mut shard, &mut rng, moment, Some(cancel_after));
        assert_eq!(shard.snapshot_marks(), 0, "round {round}: marks left");
        moment += 100;
        let expected = keyspace_at(&shard, moment);
        let saved = snapshot_while_changing(&store, &mut shard, &mut rng, moment, None)
            .expect("not cancelled");
        assert_eq!(saved, expected, "round {round}");
        moment += 100;
    }
}

#[test]
fn a_handled_entry_keeps_its_mark_when_its_block_moves() {
    let store = store_with(1, &Arc::default());
    let mut shard = store.db(0).lock_shard(0);
    let key = store.key(b"k");
    shard.set(key, ValueRef::Int(1), 0, 10);
    shard.begin_snapshot(10, Encodings::default(), Arc::default());
    // The first change preserves the value and marks the entry; the ones
    // after move it to new blocks, which must stay marked, or the writer
    // would save the key a second time with its new value.
    let mut entry = shard.get_mut(key, 10).expect("the key");
    entry.set_value(ValueRef::Str(b"longer than before"));
    entry.set_expire_at(1 << 50);
    drop(entry);
    assert_eq!(shard.snapshot_marks(), 1);
    let (mut entries, mut encoded) = (Vec::new(), Vec::new());
    let step = shard.snapshot_step(usize::MAX, &mut entries, &mut encoded);
    assert!(step.finished);
    assert_eq!(step.keys, 0, "the handled key is not the walk's");
    assert!(entries.is_empty(), "the writer skips the handled key");
    assert!(!encoded.is_empty(), "its value of the moment was preserved");
    assert_eq!(shard.snapshot_marks(), 0);
}
