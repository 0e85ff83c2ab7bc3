//! The values of the collection types: hashes, lists, sets, sorted sets
//! and streams.
//!
//! A string lives inside its entry's slab block (see [`super::entry`]); a
//! collection lives in a [`Object`] on the heap that the entry points to. Each
//! type keeps a running estimate of the bytes it owns, so that memory
//! accounting (INFO used_memory, maxmemory) stays O(1) per command whatever
//! the size of the collection.
//!
//! Where Redis 7.0 replies in an order that depends on its encoding, the types
//! reproduce it: a small hash iterates in insertion order (Redis's listpack),
//! a set of integers in numeric order (intset), a sorted set by score then
//! member. Large hashes and sets are unordered in Redis (a dict) and here.

mod byte_table;
mod field_deadlines;
mod hash;
mod list;
mod listpack;
mod packed;
mod ranked;
mod set;
mod stream;
mod zset;

use std::sync::atomic::{AtomicUsize, Ordering};

pub use hash::Hash;
pub use list::List;
pub use listpack::{Element, Listpack};
pub use set::{Member, Set};
pub use stream::{
    AppendError, Consumer, ConsumerGroup, EntryView, NodeLimits, PendingEntry, Stream, StreamEntry,
    StreamId, Trim, TrimTo, ENTRIES_READ_UNKNOWN, MAX_NODE_BYTES,
};
pub use zset::ZIter;
pub use zset::ZSet;

/// Redis 7.0's encoding thresholds: past them Redis converts a small
/// encoding (intset, listpack) to a hash table or skiplist, which changes
/// OBJECT ENCODING and, for sets and hashes, the order replies list
/// members in. Each write that may convert is given the ones in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encodings {
    /// `set-max-intset-entries`.
    pub set_max_intset_entries: usize,
    /// `hash-max-listpack-entries` (alias `hash-max-ziplist-entries`).
    pub hash_max_listpack_entries: usize,
    /// `hash-max-listpack-value`: the longest field or value, in bytes.
    pub hash_max_listpack_value: usize,
    /// `zset-max-listpack-entries`.
    pub zset_max_listpack_entries: usize,
    /// `zset-max-listpack-value`: the longest member, in bytes.
    pub zset_max_listpack_value: usize,
    /// `hll-sparse-max-bytes`: the longest sparse HyperLogLog, header
    /// included, before it turns dense.
    pub hll_sparse_max_bytes: usize,
    /// `stream-node-max-bytes`: where a stream's node is closed.
    pub stream_node_max_bytes: usize,
    /// `stream-node-max-entries`: likewise, in entries.
    pub stream_node_max_entries: usize,
}

impl Encodings {
    /// The node limits a stream append obeys.
    pub fn stream_nodes(&self) -> NodeLimits {
        NodeLimits {
            max_bytes: self.stream_node_max_bytes,
            max_entries: self.stream_node_max_entries,
        }
    }
}

impl Default for Encodings {
    /// Redis 7.0's defaults.
    fn default() -> Encodings {
        Encodings {
            set_max_intset_entries: 512,
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            hll_sparse_max_bytes: 3000,
            stream_node_max_bytes: 4096,
            stream_node_max_entries: 100,
        }
    }
}

/// The thresholds in force, read without a lock by the writes that may
/// convert and replaced by CONFIG SET. A write reads them once, before it
/// locks its shard, and uses that copy throughout (a CONFIG SET changing
/// several at that moment may be seen in part).
#[derive(Debug)]
pub struct EncodingLimits([AtomicUsize; 8]);

impl EncodingLimits {
    /// Limits holding `encodings`.
    pub fn new(encodings: Encodings) -> EncodingLimits {
        let limits = EncodingLimits(Default::default());
        limits.set(encodings);
        limits
    }

    /// The thresholds now.
    pub fn get(&self) -> Encodings {
        let [set, hash_entries, hash_value, zset_entries, zset_value, hll_sparse, stream_bytes, stream_entries] =
            self.0.each_ref().map(|limit| limit.load(Ordering::Relaxed));
        Encodings {
            set_max_intset_entries: set,
            hash_max_listpack_entries: hash_entries,
            hash_max_listpack_value: hash_value,
            zset_max_listpack_entries: zset_entries,
            zset_max_listpack_value: zset_value,
            hll_sparse_max_bytes: hll_sparse,
            stream_node_max_bytes: stream_bytes,
            stream_node_max_entries: stream_entries,
        }
    }

    /// Installs new thresholds; values already converted stay converted,
    /// as in Redis.
    pub fn set(&self, encodings: Encodings) {
        let values = [
            encodings.set_max_intset_entries,
            encodings.hash_max_listpack_entries,
            encodings.hash_max_listpack_value,
            encodings.zset_max_listpack_entries,
            encodings.zset_max_listpack_value,
            encodings.hll_sparse_max_bytes,
            encodings.stream_node_max_bytes,
            encodings.stream_node_max_entries,
        ];
        for (limit, value) in self.0.iter().zip(values) {
            limit.store(value, Ordering::Relaxed);
        }
    }
}

/// Bytes a `Box<[u8]>` element costs beyond its contents: the fat pointer and
/// the allocator's rounding, as an estimate.
const ELEMENT_OVERHEAD: usize = 24;

/// Heap bytes of one boxed element.
fn element_bytes(bytes: &[u8]) -> usize {
    ELEMENT_OVERHEAD + bytes.len()
}

/// A collection value.
#[derive(Debug, Clone)]
pub enum Object {
    /// HSET and friends.
    Hash(Hash),
    /// LPUSH and friends.
    List(List),
    /// SADD and friends.
    Set(Set),
    /// ZADD and friends.
    ZSet(ZSet),
    /// XADD and friends (boxed: the other types stay small).
    Stream(Box<Stream>),
}

impl Object {
    /// The name TYPE replies with.
    pub fn type_name(&self) -> &'static str {
        match self {
            Object::Hash(_) => "hash",
            Object::List(_) => "list",
            Object::Set(_) => "set",
            Object::ZSet(_) => "zset",
            Object::Stream(_) => "stream",
        }
    }

    /// The name OBJECT ENCODING replies with: Redis 7.0's encoding for a
    /// value of this size and shape.
    pub fn encoding(&self) -> &'static str {
        match self {
            Object::Hash(hash) => hash.encoding(),
            Object::List(_) => "quicklist",
            Object::Set(set) => set.encoding(),
            Object::ZSet(zset) => zset.encoding(),
            Object::Stream(_) => "stream",
        }
    }

    /// Elements held (HLEN, LLEN, SCARD, ZCARD).
    pub fn len(&self) -> usize {
        match self {
            Object::Hash(hash) => hash.len(),
            Object::List(list) => list.len(),
            Object::Set(set) => set.len(),
            Object::ZSet(zset) => zset.len(),
            Object::Stream(stream) => stream.len() as usize,
        }
    }

    /// True when the collection holds nothing: the key must then
    /// disappear. Never for a stream: one with no entries keeps its last
    /// ID and groups, and its key, as in Redis.
    pub fn is_empty(&self) -> bool {
        !matches!(self, Object::Stream(_)) && self.len() == 0
    }

    /// Heap bytes owned by the value, including the `Object` itself.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Object>()
            + match self {
                Object::Hash(hash) => hash.heap_bytes(),
                Object::List(list) => list.heap_bytes(),
                Object::Set(set) => set.heap_bytes(),
                Object::ZSet(zset) => zset.heap_bytes(),
                Object::Stream(stream) => std::mem::size_of::<Stream>() + stream.heap_bytes(),
            }
    }
}

/// A collection type handlers can ask an [`Object`] for.
pub trait Kind: Sized {
    /// An empty value of this type, for a key being created.
    fn empty() -> Object;
    /// The value, if the object is of this type.
    fn of(object: &Object) -> Option<&Self>;
    /// The value, mutably, if the object is of this type.
    fn of_mut(object: &mut Object) -> Option<&mut Self>;
}

macro_rules! kind {
    ($type:ident, $variant:ident) => {
        impl Kind for $type {
            fn empty() -> Object {
                Object::$variant($type::default())
            }
            fn of(object: &Object) -> Option<&Self> {
                match object {
                    Object::$variant(value) => Some(value),
                    _ => None,
                }
            }
            fn of_mut(object: &mut Object) -> Option<&mut Self> {
                match object {
                    Object::$variant(value) => Some(value),
                    _ => None,
                }
            }
        }
    };
}

kind!(Hash, Hash);
kind!(List, List);
kind!(Set, Set);
kind!(ZSet, ZSet);

impl Kind for Stream {
    fn empty() -> Object {
        Object::Stream(Box::default())
    }
    fn of(object: &Object) -> Option<&Self> {
        match object {
            Object::Stream(stream) => Some(stream),
            _ => None,
        }
    }
    fn of_mut(object: &mut Object) -> Option<&mut Self> {
        match object {
            Object::Stream(stream) => Some(stream),
            _ => None,
        }
    }
}

/// A reproducible stream of numbers below `n` (xorshift) for the types'
/// randomised tests.
#[cfg(test)]
fn test_random(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}
