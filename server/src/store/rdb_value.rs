//! Values between the store ([`ValueRef`] / [`OwnedValue`]) and RDB
//! ([`tally_rdb::Value`]): how an entry is encoded in a snapshot, a DUMP
//! payload or an AOF base, kept beside the entries it encodes so that the
//! store's own snapshots need nothing above it.

use tally_rdb::Value;

use super::object::{Encodings, Hash, List, Set, ZSet};
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
    }
}

/// An RDB value as the store holds it, converted where `limits` say, as
/// Redis converts what it loads; None for an empty collection, which Redis
/// refuses to RESTORE and skips when it loads a file.
pub fn from_rdb(value: Value, limits: &Encodings) -> Option<OwnedValue> {
    let object = match value {
        // Integers are stored as numbers, as SET stores them.
        Value::String(bytes) => return Some(OwnedValue::of(ValueRef::string(&bytes))),
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
    (!object.is_empty()).then(|| OwnedValue::Obj(Box::new(object)))
}
