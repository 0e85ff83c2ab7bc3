//! Values between the store ([`ValueRef`] / [`OwnedValue`]) and RDB
//! ([`tally_rdb::Value`]): how an entry is encoded in a snapshot, a DUMP
//! payload or an AOF base, kept beside the entries it encodes so that the
//! store's own snapshots need nothing above it.

use std::collections::{BTreeMap, BTreeSet};

use tally_rdb::{StreamConsumer, StreamGroup, StreamValue, Value};

use super::object::{
    Consumer, ConsumerGroup, Encodings, Hash, List, Listpack, PendingEntry, Set, Stream, StreamId,
    ZSet,
};
use super::{Object, OwnedValue, ValueRef};

/// A stored value as RDB holds it.
pub fn to_rdb(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Int(n) => Value::String(itoa::Buffer::new().format(n).as_bytes().to_vec()),
        ValueRef::Str(bytes) => Value::String(bytes.to_vec()),
        ValueRef::Obj(Object::List(list)) => Value::List(list.iter().map(<[u8]>::to_vec).collect()),
        ValueRef::Obj(Object::Set(set)) => Value::Set(set.iter().map(|m| m.to_vec()).collect()),
        ValueRef::Obj(Object::ZSet(zset)) => {
            Value::SortedSet(zset.iter().map(|(m, s)| (m.to_vec(), s)).collect())
        }
        ValueRef::Obj(Object::Hash(hash)) if hash.keeps_deadlines() => Value::HashWithExpiry(
            hash.iter_with_deadlines()
                .map(|(f, v, at)| (f.to_vec(), v.to_vec(), at))
                .collect(),
        ),
        ValueRef::Obj(Object::Hash(hash)) => {
            Value::Hash(hash.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect())
        }
        ValueRef::Obj(Object::Stream(stream)) => Value::Stream(Box::new(stream_to_rdb(stream))),
    }
}

fn parts(id: StreamId) -> (u64, u64) {
    (id.ms, id.seq)
}

fn id_of((ms, seq): (u64, u64)) -> StreamId {
    StreamId::new(ms, seq)
}

fn stream_to_rdb(stream: &Stream) -> StreamValue {
    let groups = stream
        .groups()
        .iter()
        .map(|(name, group)| StreamGroup {
            name: name.clone(),
            last_id: parts(group.last_id),
            entries_read: group.entries_read,
            pending: group
                .pending
                .iter()
                .map(|(id, entry)| (parts(*id), entry.delivery_time, entry.delivery_count))
                .collect(),
            consumers: group
                .consumers
                .iter()
                .map(|(name, consumer)| StreamConsumer {
                    name: name.clone(),
                    seen_time: consumer.seen_time,
                    active_time: consumer.active_time,
                    pending: consumer.pending.iter().map(|id| parts(*id)).collect(),
                })
                .collect(),
        })
        .collect();
    StreamValue {
        nodes: stream
            .nodes()
            .map(|(master, lp)| (master.encode(), lp.as_bytes().to_vec()))
            .collect(),
        length: stream.len(),
        last_id: parts(stream.last_id()),
        first_id: parts(stream.first_id()),
        max_deleted_id: parts(stream.max_deleted_entry_id()),
        entries_added: stream.entries_added(),
        v1: false,
        groups,
    }
}

/// A stream as the store holds it, its nodes checked as Redis's deep
/// integrity check does; what an RDB file of Redis 6 lacks worked out as
/// Redis 7.0 does when it loads one.
fn stream_from_rdb(value: StreamValue) -> Result<Stream, &'static str> {
    let last_id = id_of(value.last_id);
    let mut nodes = Vec::with_capacity(value.nodes.len());
    let mut live = 0u64;
    for (key, bytes) in value.nodes {
        let master = StreamId::decode(&key);
        if Listpack::validate(&bytes).is_none() {
            return Err("a stream node is not a listpack");
        }
        let lp = Listpack::from_bytes(bytes);
        if !Stream::node_is_sound(master, &lp, last_id) {
            return Err("a stream node's entries are corrupt");
        }
        live += Stream::live_in_node(&lp);
        nodes.push((master, lp));
    }
    if live != value.length {
        return Err("a stream's length does not match its entries");
    }
    let mut stream = Stream::from_parts(
        nodes,
        value.length,
        last_id,
        id_of(value.first_id),
        id_of(value.max_deleted_id),
        value.entries_added,
    );
    if value.v1 {
        let first = if stream.is_empty() {
            StreamId::MIN
        } else {
            stream.edge_id(true, true)
        };
        stream.set_first_id(first);
    }
    let mut groups = BTreeMap::new();
    for group in value.groups {
        // Each pending entry names the consumer whose list holds it (the
        // reader checked that every entry has one).
        let mut pending = BTreeMap::new();
        let mut consumers = BTreeMap::new();
        let times: BTreeMap<StreamId, (u64, u64)> = group
            .pending
            .iter()
            .map(|&(id, delivered, count)| (id_of(id), (delivered, count)))
            .collect();
        for consumer in group.consumers {
            let owned: BTreeSet<StreamId> = consumer.pending.iter().map(|id| id_of(*id)).collect();
            for id in &owned {
                if let Some(&(delivery_time, delivery_count)) = times.get(id) {
                    pending.insert(
                        *id,
                        PendingEntry {
                            owner: consumer.name.clone(),
                            delivery_time,
                            delivery_count,
                        },
                    );
                }
            }
            consumers.insert(
                consumer.name,
                Consumer {
                    seen_time: consumer.seen_time,
                    active_time: consumer.active_time,
                    pending: owned,
                },
            );
        }
        // A Redis 6 file has no count of the entries a group read: Redis
        // 7.0 works it out from the stream's counters where it can.
        let entries_read = if value.v1 {
            stream
                .entries_up_to(id_of(group.last_id))
                .map_or(-1, |read| read as i64)
        } else {
            group.entries_read
        };
        groups.insert(
            group.name,
            ConsumerGroup {
                last_id: id_of(group.last_id),
                entries_read,
                pending,
                consumers,
            },
        );
    }
    stream.set_groups(groups);
    Ok(stream)
}

/// An RDB value as the store holds it, converted where `limits` say, as
/// Redis converts what it loads; `Ok(None)` for an empty collection, which
/// Redis refuses to RESTORE and skips when it loads a file, and an error
/// for a stream whose nodes do not hold what the file says.
pub fn from_rdb(value: Value, limits: &Encodings) -> Result<Option<OwnedValue>, &'static str> {
    let object = match value {
        // Integers are stored as numbers, as SET stores them.
        Value::String(bytes) => return Ok(Some(OwnedValue::of(ValueRef::string(&bytes)))),
        Value::Stream(stream) => Object::Stream(Box::new(stream_from_rdb(*stream)?)),
        Value::List(items) => {
            let mut list = List::default();
            for item in &items {
                list.push(item, false);
            }
            Object::List(list)
        }
        Value::Set(members) => {
            let mut set = Set::default();
            for member in &members {
                set.insert(member, limits);
            }
            Object::Set(set)
        }
        Value::SortedSet(members) => {
            let mut zset = ZSet::default();
            for (member, score) in &members {
                zset.insert(member, *score, limits);
            }
            Object::ZSet(zset)
        }
        Value::Hash(fields) => {
            let mut hash = Hash::default();
            for (field, value) in &fields {
                hash.insert(field, value, limits);
            }
            Object::Hash(hash)
        }
        // Fields already past their deadline load too: the store purges
        // them when the hash is next touched, or its expiry gets to them.
        Value::HashWithExpiry(fields) => {
            let mut hash = Hash::default();
            hash.enable_deadlines();
            for (field, value, _) in &fields {
                hash.insert(field, value, limits);
            }
            for (field, _, at) in &fields {
                if *at != 0 {
                    hash.set_deadline(field, *at);
                }
            }
            Object::Hash(hash)
        }
    };
    Ok((!object.is_empty()).then(|| OwnedValue::Obj(Box::new(object))))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis 7.0.15's DUMP of a stream with a deleted entry, two groups,
    /// pending entries and three consumers (see the rdb crate's test).
    const PAYLOAD: &[u8] = include_bytes!("../../../rdb/tests/data/redis7-stream-with-groups.dump");

    #[test]
    fn a_stream_from_redis_is_held_and_written_back_byte_for_byte() {
        let value = tally_rdb::restore(PAYLOAD).expect("a stream payload");
        let Ok(Some(OwnedValue::Obj(object))) = from_rdb(value, &Encodings::default()) else {
            panic!("not loaded");
        };
        let Object::Stream(stream) = &*object else {
            panic!("not a stream");
        };
        let ids: Vec<StreamId> = stream
            .range(StreamId::MIN, StreamId::MAX, false, 0)
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(
            ids,
            vec![
                StreamId::new(1, 0),
                StreamId::new(3, 0),
                StreamId::new(4, 0)
            ]
        );
        let g1 = &stream.groups()[&b"g1".to_vec()];
        assert_eq!(g1.pending[&StreamId::new(2, 0)].owner, b"bob".to_vec());
        let back = to_rdb(ValueRef::Obj(&object));
        assert_eq!(
            tally_rdb::dump(&back, &tally_rdb::Encodings::default()),
            PAYLOAD
        );
    }

    #[test]
    fn a_stream_whose_length_disagrees_with_its_nodes_is_refused() {
        let Ok(Value::Stream(mut stream)) = tally_rdb::restore(PAYLOAD) else {
            panic!("a stream payload");
        };
        stream.length = 4;
        assert!(from_rdb(Value::Stream(stream.clone()), &Encodings::default()).is_err());
        stream.length = 3;
        stream.last_id = (3, 0);
        assert!(
            from_rdb(Value::Stream(stream.clone()), &Encodings::default()).is_err(),
            "an entry past the last ID"
        );
        stream.last_id = (4, 0);
        let node = &mut stream.nodes[0].1;
        let last = node.len() - 2;
        node[last] ^= 0x01;
        assert!(from_rdb(Value::Stream(stream), &Encodings::default()).is_err());
    }
}
