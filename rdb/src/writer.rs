//! Writing RDB 10 as Redis 7.0 does (rdbSaveRio, rdbSaveObject).

use crate::compact::{intset, ListpackBuilder};
use crate::encoding::{canonical_int, write_int, write_length, write_string};
use crate::float::{as_integer, d2string};
use crate::reader::{opcodes, types};
use crate::{crc64_update, FieldsWithExpiry, Pairs, StreamValue, Value, RDB_VERSION};

/// Which compact encodings to write, at which sizes: Redis 7.0's defaults,
/// so that a value keeps its `OBJECT ENCODING` through a save and a load.
#[derive(Debug, Clone)]
pub struct Encodings {
    /// `rdbcompression`: LZF for strings over 20 bytes.
    pub compress: bool,
    /// `hash-max-listpack-entries` / `-value`.
    pub hash_max_listpack_entries: usize,
    pub hash_max_listpack_value: usize,
    /// `zset-max-listpack-entries` / `-value`.
    pub zset_max_listpack_entries: usize,
    pub zset_max_listpack_value: usize,
    /// `set-max-intset-entries`.
    pub set_max_intset_entries: usize,
    /// Bytes per quicklist node (`list-max-listpack-size -2`: 8 KB).
    pub list_max_listpack_bytes: usize,
}

impl Default for Encodings {
    fn default() -> Encodings {
        Encodings {
            compress: true,
            hash_max_listpack_entries: 128,
            hash_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            set_max_intset_entries: 512,
            list_max_listpack_bytes: 8192,
        }
    }
}

/// Quicklist's estimate of an element's cost when deciding whether a node
/// has room (SIZE_ESTIMATE_OVERHEAD).
const NODE_ENTRY_OVERHEAD: usize = 8;

/// A list's elements packed into quicklist nodes (listpacks), as Redis
/// fills them pushing at the tail.
pub(crate) fn quicklist_nodes(items: &[Vec<u8>], enc: &Encodings) -> Vec<Vec<u8>> {
    let mut nodes: Vec<Vec<u8>> = Vec::new();
    let mut node = ListpackBuilder::default();
    for item in items {
        if node.len() > 0
            && node.size() + item.len() + NODE_ENTRY_OVERHEAD > enc.list_max_listpack_bytes
        {
            nodes.push(std::mem::take(&mut node).finish());
        }
        node.push(item);
    }
    if node.len() > 0 {
        nodes.push(node.finish());
    }
    nodes
}

/// Writes one value: its type byte, then its encoding.
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value, enc: &Encodings) {
    let mut body = Vec::new();
    let kind = encode_value(&mut body, value, enc);
    out.push(kind);
    out.extend_from_slice(&body);
}

/// Writes a value's encoding into `out` and returns its RDB type.
fn encode_value(out: &mut Vec<u8>, value: &Value, enc: &Encodings) -> u8 {
    match value {
        Value::String(text) => {
            write_string(out, text, enc.compress);
            types::STRING
        }
        Value::List(items) => {
            let nodes = quicklist_nodes(items, enc);
            write_length(out, nodes.len() as u64);
            for blob in nodes {
                write_length(out, 2); // QUICKLIST_NODE_CONTAINER_PACKED
                write_string(out, &blob, enc.compress);
            }
            types::LIST_QUICKLIST_2
        }
        Value::Set(members) => {
            let integers: Option<Vec<i64>> = members.iter().map(|m| canonical_int(m)).collect();
            match integers {
                Some(values) if members.len() <= enc.set_max_intset_entries => {
                    write_string(out, &intset(values), enc.compress);
                    types::SET_INTSET
                }
                _ => {
                    write_length(out, members.len() as u64);
                    for member in members {
                        write_string(out, member, enc.compress);
                    }
                    types::SET
                }
            }
        }
        Value::SortedSet(members) => {
            let small = members.len() <= enc.zset_max_listpack_entries
                && members
                    .iter()
                    .all(|(m, _)| m.len() <= enc.zset_max_listpack_value);
            if small {
                // In score order, as the listpack keeps them.
                let mut sorted: Vec<&(Vec<u8>, f64)> = members.iter().collect();
                sorted.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
                let mut lp = ListpackBuilder::default();
                for (member, score) in sorted {
                    lp.push(member);
                    match as_integer(*score) {
                        Some(integer) => lp.push_int(integer),
                        None => lp.push(d2string(*score).as_bytes()),
                    }
                }
                write_string(out, &lp.finish(), enc.compress);
                types::ZSET_LISTPACK
            } else {
                // Highest score first, as Redis walks its skiplist back to
                // front so that loading inserts at the head.
                let mut sorted: Vec<&(Vec<u8>, f64)> = members.iter().collect();
                sorted.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
                write_length(out, sorted.len() as u64);
                for (member, score) in sorted {
                    write_string(out, member, enc.compress);
                    out.extend_from_slice(&score.to_bits().to_le_bytes());
                }
                types::ZSET_2
            }
        }
        Value::Hash(fields) => {
            let small = fields.len() <= enc.hash_max_listpack_entries
                && fields.iter().all(|(f, v)| {
                    f.len() <= enc.hash_max_listpack_value && v.len() <= enc.hash_max_listpack_value
                });
            if small {
                let mut lp = ListpackBuilder::default();
                for (field, value) in fields {
                    lp.push(field);
                    lp.push(value);
                }
                write_string(out, &lp.finish(), enc.compress);
                types::HASH_LISTPACK
            } else {
                write_length(out, fields.len() as u64);
                for (field, value) in fields {
                    write_string(out, field, enc.compress);
                    write_string(out, value, enc.compress);
                }
                types::HASH
            }
        }
        Value::HashWithExpiry(fields) => encode_hash_with_expiry(out, fields, enc),
        Value::Stream(stream) => encode_stream(out, stream, enc),
    }
}

/// A stream as Redis 7.0 saves one (RDB_TYPE_STREAM_LISTPACKS_2): the
/// nodes as they are, the counters, then each group with its pending
/// entries and its consumers.
fn encode_stream(out: &mut Vec<u8>, stream: &StreamValue, enc: &Encodings) -> u8 {
    write_length(out, stream.nodes.len() as u64);
    for (key, lp) in &stream.nodes {
        write_string(out, key, enc.compress);
        write_string(out, lp, enc.compress);
    }
    write_length(out, stream.length);
    for (ms, seq) in [stream.last_id, stream.first_id, stream.max_deleted_id] {
        write_length(out, ms);
        write_length(out, seq);
    }
    write_length(out, stream.entries_added);
    write_length(out, stream.groups.len() as u64);
    for group in &stream.groups {
        write_string(out, &group.name, enc.compress);
        write_length(out, group.last_id.0);
        write_length(out, group.last_id.1);
        // -1 (not known) as Redis writes it: the u64 of the same bits.
        write_length(out, group.entries_read as u64);
        write_length(out, group.pending.len() as u64);
        for &(id, delivered, count) in &group.pending {
            write_raw_id(out, id);
            out.extend_from_slice(&delivered.to_le_bytes());
            write_length(out, count);
        }
        write_length(out, group.consumers.len() as u64);
        for consumer in &group.consumers {
            write_string(out, &consumer.name, enc.compress);
            out.extend_from_slice(&consumer.seen_time.to_le_bytes());
            write_length(out, consumer.pending.len() as u64);
            for &id in &consumer.pending {
                write_raw_id(out, id);
            }
        }
    }
    types::STREAM_LISTPACKS_2
}

fn write_raw_id(out: &mut Vec<u8>, (ms, seq): (u64, u64)) {
    out.extend_from_slice(&ms.to_be_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
}

/// A hash whose fields may carry deadlines, as Redis 7.4 saves one: small
/// enough for a listpack, a listpack of field, value, deadline triples
/// (0: none) led by the earliest deadline; otherwise, when some field has
/// a deadline, a table whose deadlines count from that earliest one; a
/// plain table when none has.
fn encode_hash_with_expiry(out: &mut Vec<u8>, fields: &FieldsWithExpiry, enc: &Encodings) -> u8 {
    let earliest = fields
        .iter()
        .map(|&(_, _, at)| at)
        .filter(|&at| at != 0)
        .min();
    let small = fields.len() <= enc.hash_max_listpack_entries
        && fields.iter().all(|(f, v, _)| {
            f.len() <= enc.hash_max_listpack_value && v.len() <= enc.hash_max_listpack_value
        });
    if small {
        out.extend_from_slice(&earliest.unwrap_or(0).to_le_bytes());
        let mut lp = ListpackBuilder::default();
        for (field, value, at) in fields {
            lp.push(field);
            lp.push(value);
            lp.push_int(*at as i64);
        }
        write_string(out, &lp.finish(), enc.compress);
        return types::HASH_LISTPACK_EX;
    }
    let Some(earliest) = earliest else {
        let plain: Pairs = fields
            .iter()
            .map(|(f, v, _)| (f.clone(), v.clone()))
            .collect();
        return encode_value(out, &Value::Hash(plain), enc);
    };
    out.extend_from_slice(&earliest.to_le_bytes());
    write_length(out, fields.len() as u64);
    for (field, value, at) in fields {
        write_length(out, if *at == 0 { 0 } else { at - earliest + 1 });
        write_string(out, field, enc.compress);
        write_string(out, value, enc.compress);
    }
    types::HASH_METADATA
}

/// One key as a file holds it: its expiry (ms) if volatile, its type, the
/// key and the value.
pub fn encode_entry(
    out: &mut Vec<u8>,
    key: &[u8],
    value: &Value,
    expire_at_ms: Option<u64>,
    encodings: &Encodings,
) {
    if let Some(at) = expire_at_ms {
        out.push(opcodes::EXPIRETIME_MS);
        out.extend_from_slice(&at.to_le_bytes());
    }
    let mut body = Vec::new();
    let kind = encode_value(&mut body, value, encodings);
    out.push(kind);
    write_string(out, key, encodings.compress);
    out.extend_from_slice(&body);
}

/// A string's value as a store may hold it: the integer it is, or its
/// bytes.
#[derive(Debug, Clone, Copy)]
pub enum StringValue<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

/// A string key as a file holds it, written from the value as the store
/// keeps it: the same bytes as [`encode_entry`] of `Value::String`, without
/// building the value or formatting the integer. A background save writes
/// every counter this way.
pub fn encode_string_entry(
    out: &mut Vec<u8>,
    key: &[u8],
    value: StringValue<'_>,
    expire_at_ms: Option<u64>,
    encodings: &Encodings,
) {
    if let Some(at) = expire_at_ms {
        out.push(opcodes::EXPIRETIME_MS);
        out.extend_from_slice(&at.to_le_bytes());
    }
    out.push(types::STRING);
    write_string(out, key, encodings.compress);
    match value {
        StringValue::Int(n) => write_int(out, n),
        StringValue::Bytes(text) => write_string(out, text, encodings.compress),
    }
}

/// Writes an RDB file into a byte sink, section by section, keeping the
/// running CRC64: header and AUX fields, then per database SELECTDB,
/// RESIZEDB and its keys, then EOF and the checksum.
pub struct Writer {
    buffer: Vec<u8>,
    crc: u64,
    encodings: Encodings,
    checksum: bool,
}

impl Writer {
    /// A file with Redis 7.0's header; `checksum` false writes a zero
    /// trailer (`rdbchecksum no`).
    pub fn new(encodings: Encodings, checksum: bool) -> Writer {
        let mut writer = Writer {
            buffer: Vec::new(),
            crc: 0,
            encodings,
            checksum,
        };
        writer
            .buffer
            .extend_from_slice(format!("REDIS{RDB_VERSION:04}").as_bytes());
        writer
    }

    /// An AUX field (written with rdbSaveAuxField's string encodings).
    pub fn aux(&mut self, field: &str, value: &[u8]) {
        self.buffer.push(opcodes::AUX);
        write_string(&mut self.buffer, field.as_bytes(), false);
        write_string(&mut self.buffer, value, false);
    }

    /// A function library's code (Redis 7's FUNCTION2 opcode).
    pub fn function(&mut self, code: &[u8]) {
        self.buffer.push(opcodes::FUNCTION2);
        write_string(&mut self.buffer, code, self.encodings.compress);
    }

    /// SELECTDB and RESIZEDB for the database whose keys follow.
    pub fn select_db(&mut self, db: u32, keys: u64, volatile: u64) {
        self.buffer.push(opcodes::SELECTDB);
        write_length(&mut self.buffer, db as u64);
        self.buffer.push(opcodes::RESIZEDB);
        write_length(&mut self.buffer, keys);
        write_length(&mut self.buffer, volatile);
    }

    /// One key: its expiry (ms) if volatile, its type, key and value.
    pub fn entry(&mut self, key: &[u8], value: &Value, expire_at_ms: Option<u64>) {
        encode_entry(&mut self.buffer, key, value, expire_at_ms, &self.encodings);
    }

    /// Entries encoded elsewhere with [`encode_entry`] (a snapshot's keys
    /// saved by the writers that changed them first).
    pub fn encoded_entries(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// Bytes written and not yet taken.
    pub fn pending(&self) -> usize {
        self.buffer.len()
    }

    /// Takes the bytes written so far (to write them out while the file
    /// grows), folding them into the checksum.
    pub fn take(&mut self) -> Vec<u8> {
        let bytes = std::mem::take(&mut self.buffer);
        if self.checksum {
            self.crc = crc64_update(self.crc, &bytes);
        }
        bytes
    }

    /// EOF and the checksum: the file's last bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.buffer.push(opcodes::EOF);
        let mut tail = self.take();
        let crc = if self.checksum { self.crc } else { 0 };
        tail.extend_from_slice(&crc.to_le_bytes());
        tail
    }
}
