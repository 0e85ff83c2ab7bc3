//! Reading RDB files (rdbLoadRioWithLoadingCtx) and values (rdbLoadObject).

use crate::compact::{intset_members, listpack_elements, ziplist_elements, zipmap_pairs};
use crate::encoding::{parse_double, Input};
use crate::{
    crc64, Entry, Error, Pairs, StreamConsumer, StreamGroup, StreamValue, Value,
    MAX_FIELD_DEADLINE, MAX_READ_VERSION, MIN_READ_VERSION,
};

/// Value types (RDB_TYPE_*).
pub(crate) mod types {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const MODULE_PRE_GA: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    pub const SET_LISTPACK: u8 = 20;
    pub const STREAM_LISTPACKS_3: u8 = 21;
    /// Redis 7.4's release candidates: a hash with field deadlines, each
    /// absolute, as a table / as a listpack of triples.
    pub const HASH_METADATA_PRE_GA: u8 = 22;
    pub const HASH_LISTPACK_EX_PRE_GA: u8 = 23;
    /// Redis 7.4: the same two, led by the hash's earliest deadline (the
    /// table's deadlines then relative to it).
    pub const HASH_METADATA: u8 = 24;
    pub const HASH_LISTPACK_EX: u8 = 25;
}

/// Opcodes (RDB_OPCODE_*).
pub(crate) mod opcodes {
    /// Redis 7.4: a cluster node's slot sizes, a hint for resizing.
    pub const SLOT_INFO: u8 = 244;
    pub const FUNCTION2: u8 = 245;
    pub const FUNCTION_PRE_GA: u8 = 246;
    pub const MODULE_AUX: u8 = 247;
    pub const IDLE: u8 = 248;
    pub const FREQ: u8 = 249;
    pub const AUX: u8 = 250;
    pub const RESIZEDB: u8 = 251;
    pub const EXPIRETIME_MS: u8 = 252;
    pub const EXPIRETIME: u8 = 253;
    pub const SELECTDB: u8 = 254;
    pub const EOF: u8 = 255;
}

/// Quicklist-2 node containers.
const CONTAINER_PLAIN: u64 = 1;
const CONTAINER_PACKED: u64 = 2;

/// A value, or what kind of value tally does not hold.
pub(crate) enum Decoded {
    Value(Value),
    Unsupported(&'static str),
}

/// One item of a file, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// An AUX field (redis-ver, ctime, used-mem, ...).
    Aux(Vec<u8>, Vec<u8>),
    /// RESIZEDB's hint: the next database's key and volatile-key counts.
    ResizeDb { keys: u64, volatile: u64 },
    /// A key and its value.
    Entry(Entry),
    /// A function library's code (FUNCTION2), as FUNCTION LOAD took it.
    Function(Vec<u8>),
    /// A key whose value tally cannot hold (`stream`); see
    /// [`Reader::next_item`].
    Unsupported {
        db: u32,
        key: Vec<u8>,
        kind: &'static str,
    },
}

/// Reads a whole RDB file held in memory.
pub struct Reader<'a> {
    input: Input<'a>,
    data: &'a [u8],
    version: u16,
    db: u32,
    done: bool,
}

impl<'a> Reader<'a> {
    /// Checks the header (`REDIS` and a version from 9 to 12) and, when the
    /// file carries one, the CRC64 trailer, before anything is read.
    pub fn new(data: &'a [u8]) -> Result<Reader<'a>, Error> {
        if data.len() < 9 || &data[..5] != b"REDIS" {
            return Err(Error::NotRdb);
        }
        let version: u16 = std::str::from_utf8(&data[5..9])
            .ok()
            .and_then(|v| v.parse().ok())
            .ok_or(Error::NotRdb)?;
        if !(MIN_READ_VERSION..=MAX_READ_VERSION).contains(&version) {
            return Err(Error::Version(version));
        }
        let mut input = Input::new(data);
        input.bytes(9)?;
        Ok(Reader {
            input,
            data,
            version,
            db: 0,
            done: false,
        })
    }

    /// Checks the whole file's CRC64 trailer up front (a file written with
    /// `rdbchecksum no` stores 0 and is not checked): a damaged or cut file
    /// is refused before anything is loaded.
    pub fn verify_checksum(&self) -> Result<(), Error> {
        let data = self.data;
        if data.len() < 9 + 1 + 8 {
            return Err(Error::Truncated);
        }
        let (body, trailer) = data.split_at(data.len() - 8);
        let mut stored = [0u8; 8];
        stored.copy_from_slice(trailer);
        let stored = u64::from_le_bytes(stored);
        if stored != 0 && stored != crc64(body) {
            return Err(Error::Checksum);
        }
        Ok(())
    }

    /// The file's RDB version.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Bytes read so far (for loading progress).
    pub fn position(&self) -> usize {
        self.input.position()
    }

    /// The next item, or None after EOF (whose checksum was verified: a
    /// stored checksum of 0 means the writer had `rdbchecksum no`). A
    /// stream or a function library is read past and reported; a module
    /// value cannot be (only its module knows its layout): an error naming
    /// its key.
    pub fn next_item(&mut self) -> Result<Option<Item>, Error> {
        if self.done {
            return Ok(None);
        }
        let (mut expire_at_ms, mut idle_seconds) = (None, None);
        loop {
            let opcode = self.input.byte()?;
            match opcode {
                opcodes::EOF => {
                    self.done = true;
                    let checked = self.input.position();
                    if self.input.remaining() >= 8 {
                        let stored = self.input.u64_le()?;
                        if stored != 0 && stored != crc64(&self.data[..checked]) {
                            return Err(Error::Checksum);
                        }
                    } else {
                        return Err(Error::Truncated);
                    }
                    return Ok(None);
                }
                opcodes::SELECTDB => {
                    self.db = u32::try_from(self.input.length()?)
                        .map_err(|_| Error::Corrupt("database index".into()))?;
                }
                opcodes::RESIZEDB => {
                    let keys = self.input.length()?;
                    let volatile = self.input.length()?;
                    return Ok(Some(Item::ResizeDb { keys, volatile }));
                }
                opcodes::AUX => {
                    let field = self.input.string()?;
                    let value = self.input.string()?;
                    return Ok(Some(Item::Aux(field, value)));
                }
                opcodes::EXPIRETIME_MS => expire_at_ms = Some(self.input.u64_le()?),
                opcodes::EXPIRETIME => expire_at_ms = Some(self.input.u32_le()? as u64 * 1000),
                opcodes::IDLE => idle_seconds = Some(self.input.length()?),
                opcodes::FREQ => {
                    self.input.byte()?;
                }
                opcodes::SLOT_INFO => {
                    // Slot, its key count and its volatile key count: a
                    // sizing hint this reader has no use for.
                    for _ in 0..3 {
                        self.input.length()?;
                    }
                }
                opcodes::FUNCTION2 => return Ok(Some(Item::Function(self.input.string()?))),
                opcodes::FUNCTION_PRE_GA | opcodes::MODULE_AUX => {
                    return Err(Error::Corrupt(format!(
                        "opcode {opcode} (modules or pre-release functions) is not supported"
                    )));
                }
                kind => {
                    let key = self.input.string()?;
                    return match read_value(&mut self.input, kind)? {
                        Decoded::Value(value) => Ok(Some(Item::Entry(Entry {
                            db: self.db,
                            key,
                            value,
                            expire_at_ms,
                            idle_seconds,
                        }))),
                        // A module value's bytes only its module can parse:
                        // nothing after it can be read.
                        Decoded::Unsupported("module") => Err(Error::Corrupt(format!(
                            "key '{}' holds a module value, which tally cannot load",
                            String::from_utf8_lossy(&key)
                        ))),
                        Decoded::Unsupported(what) => Ok(Some(Item::Unsupported {
                            db: self.db,
                            key,
                            kind: what,
                        })),
                    };
                }
            }
        }
    }
}

/// rdbLoadObject for the types tally holds.
pub(crate) fn read_value(input: &mut Input<'_>, kind: u8) -> Result<Decoded, Error> {
    use types::*;
    let value = match kind {
        STRING => Value::String(input.string()?),
        LIST => {
            let n = input.count(1)?;
            Value::List((0..n).map(|_| input.string()).collect::<Result<_, _>>()?)
        }
        LIST_ZIPLIST => Value::List(ziplist_elements(&input.string()?)?),
        LIST_QUICKLIST => {
            let nodes = input.count(1)?;
            let mut list = Vec::new();
            for _ in 0..nodes {
                list.extend(ziplist_elements(&input.string()?)?);
            }
            Value::List(list)
        }
        LIST_QUICKLIST_2 => {
            let nodes = input.count(2)?;
            let mut list = Vec::new();
            for _ in 0..nodes {
                let container = input.length()?;
                let blob = input.string()?;
                match container {
                    CONTAINER_PLAIN => list.push(blob),
                    CONTAINER_PACKED => list.extend(listpack_elements(&blob)?),
                    other => return Err(Error::Corrupt(format!("quicklist container {other}"))),
                }
            }
            Value::List(list)
        }
        SET => {
            let n = input.count(1)?;
            Value::Set((0..n).map(|_| input.string()).collect::<Result<_, _>>()?)
        }
        SET_INTSET => Value::Set(intset_members(&input.string()?)?),
        SET_LISTPACK => Value::Set(listpack_elements(&input.string()?)?),
        ZSET | ZSET_2 => {
            let n = input.count(2)?;
            let mut members = Vec::with_capacity(n);
            for _ in 0..n {
                let member = input.string()?;
                let score = if kind == ZSET {
                    input.text_double()?
                } else {
                    input.binary_double()?
                };
                if score.is_nan() {
                    return Err(Error::Corrupt("NaN score".into()));
                }
                members.push((member, score));
            }
            Value::SortedSet(members)
        }
        ZSET_ZIPLIST | ZSET_LISTPACK => {
            let blob = input.string()?;
            let flat = if kind == ZSET_ZIPLIST {
                ziplist_elements(&blob)?
            } else {
                listpack_elements(&blob)?
            };
            Value::SortedSet(
                pairs(flat)?
                    .into_iter()
                    .map(|(m, s)| Ok((m, score(&s)?)))
                    .collect::<Result<_, Error>>()?,
            )
        }
        HASH => {
            let n = input.count(2)?;
            let mut fields = Vec::with_capacity(n);
            for _ in 0..n {
                fields.push((input.string()?, input.string()?));
            }
            Value::Hash(fields)
        }
        HASH_ZIPMAP => Value::Hash(zipmap_pairs(&input.string()?)?),
        HASH_ZIPLIST => Value::Hash(pairs(ziplist_elements(&input.string()?)?)?),
        HASH_LISTPACK => Value::Hash(pairs(listpack_elements(&input.string()?)?)?),
        HASH_METADATA | HASH_METADATA_PRE_GA => {
            // Relative deadlines count from the minimum, plus one (0 is "no
            // deadline"); the pre-release form stores them absolute.
            let base = if kind == HASH_METADATA {
                input.u64_le()?.wrapping_sub(1)
            } else {
                0
            };
            let n = input.count(3)?;
            let mut fields = Vec::with_capacity(n);
            for _ in 0..n {
                let stored = input.length()?;
                let at = if stored == 0 {
                    0
                } else {
                    stored.wrapping_add(base)
                };
                if at > MAX_FIELD_DEADLINE {
                    return Err(Error::Corrupt(format!("hash field deadline {at}")));
                }
                fields.push((input.string()?, input.string()?, at));
            }
            Value::HashWithExpiry(fields)
        }
        HASH_LISTPACK_EX | HASH_LISTPACK_EX_PRE_GA => {
            if kind == HASH_LISTPACK_EX {
                input.u64_le()?; // the earliest deadline, implied by the triples
            }
            let flat = listpack_elements(&input.string()?)?;
            if flat.len() % 3 != 0 {
                return Err(Error::Corrupt("hash listpack of triples".into()));
            }
            let mut fields = Vec::with_capacity(flat.len() / 3);
            let mut elements = flat.into_iter();
            while let (Some(field), Some(value), Some(at)) =
                (elements.next(), elements.next(), elements.next())
            {
                let at = std::str::from_utf8(&at)
                    .ok()
                    .and_then(|at| at.parse::<u64>().ok())
                    .filter(|&at| at <= MAX_FIELD_DEADLINE)
                    .ok_or_else(|| Error::Corrupt("hash field deadline".into()))?;
                fields.push((field, value, at));
            }
            Value::HashWithExpiry(fields)
        }
        STREAM_LISTPACKS | STREAM_LISTPACKS_2 | STREAM_LISTPACKS_3 => {
            Value::Stream(Box::new(read_stream(input, kind)?))
        }
        MODULE_PRE_GA | MODULE_2 => return Ok(Decoded::Unsupported("module")),
        other => return Err(Error::Corrupt(format!("unknown value type {other}"))),
    };
    Ok(Decoded::Value(value))
}

/// A stream (rdbLoadObject's STREAM_LISTPACKS branches). The nodes'
/// listpacks are checked as listpacks here; what their entries say is the
/// loader's to check.
fn read_stream(input: &mut Input<'_>, kind: u8) -> Result<StreamValue, Error> {
    let v2 = kind >= types::STREAM_LISTPACKS_2;
    let v3 = kind >= types::STREAM_LISTPACKS_3;
    let mut stream = StreamValue {
        v1: !v2,
        ..StreamValue::default()
    };
    let listpacks = input.count(2)?;
    for _ in 0..listpacks {
        let key: [u8; 16] = input
            .string()?
            .try_into()
            .map_err(|_| Error::Corrupt("stream node key is not a stream ID".into()))?;
        let lp = input.string()?;
        if listpack_elements(&lp)?.is_empty() {
            return Err(Error::Corrupt("empty listpack inside a stream".into()));
        }
        stream.nodes.push((key, lp));
    }
    if stream.nodes.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err(Error::Corrupt("stream nodes out of order".into()));
    }
    stream.length = input.length()?;
    stream.last_id = (input.length()?, input.length()?);
    if v2 {
        stream.first_id = (input.length()?, input.length()?);
        stream.max_deleted_id = (input.length()?, input.length()?);
        stream.entries_added = input.length()?;
    } else {
        stream.entries_added = stream.length;
    }
    if stream.length != 0 && stream.nodes.is_empty() {
        return Err(Error::Corrupt("stream with entries and no node".into()));
    }
    let groups = input.count(1)?;
    for _ in 0..groups {
        let mut group = StreamGroup {
            name: input.string()?,
            last_id: (input.length()?, input.length()?),
            entries_read: -1,
            ..StreamGroup::default()
        };
        if v2 {
            group.entries_read = input.length()? as i64;
        }
        if stream.groups.last().is_some_and(|g| g.name >= group.name) {
            return Err(Error::Corrupt(
                "duplicate or unordered consumer group".into(),
            ));
        }
        let pending = input.count(17)?;
        for _ in 0..pending {
            let id = raw_id(input)?;
            let delivered = input.u64_le()?;
            let count = input.length()?;
            if group.pending.last().is_some_and(|p| p.0 >= id) {
                return Err(Error::Corrupt("duplicate pending entry in a group".into()));
            }
            group.pending.push((id, delivered, count));
        }
        let consumers = input.count(1)?;
        let mut owners = vec![false; group.pending.len()];
        for _ in 0..consumers {
            let name = input.string()?;
            let seen_time = input.u64_le()?;
            let active_time = if v3 { input.u64_le()? } else { seen_time };
            let owned = input.count(16)?;
            let mut ids = Vec::with_capacity(owned);
            for _ in 0..owned {
                let id = raw_id(input)?;
                let Ok(at) = group.pending.binary_search_by(|p| p.0.cmp(&id)) else {
                    return Err(Error::Corrupt(
                        "consumer owns an entry its group does not hold".into(),
                    ));
                };
                if std::mem::replace(&mut owners[at], true) {
                    return Err(Error::Corrupt("a pending entry with two owners".into()));
                }
                ids.push(id);
            }
            if group
                .consumers
                .last()
                .is_some_and(|c: &StreamConsumer| c.name >= name)
            {
                return Err(Error::Corrupt("duplicate or unordered consumer".into()));
            }
            group.consumers.push(StreamConsumer {
                name,
                seen_time,
                active_time,
                pending: ids,
            });
        }
        if owners.contains(&false) {
            return Err(Error::Corrupt("a pending entry without a consumer".into()));
        }
        stream.groups.push(group);
    }
    Ok(stream)
}

/// A stream ID written raw: 16 bytes, big endian.
fn raw_id(input: &mut Input<'_>) -> Result<(u64, u64), Error> {
    let bytes = input.bytes(16)?;
    let half = |b: &[u8]| b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
    Ok((half(&bytes[..8]), half(&bytes[8..])))
}

fn pairs(flat: Vec<Vec<u8>>) -> Result<Pairs, Error> {
    if flat.len() % 2 != 0 {
        return Err(Error::Corrupt(
            "odd number of elements in a pair container".into(),
        ));
    }
    let mut out = Vec::with_capacity(flat.len() / 2);
    let mut items = flat.into_iter();
    while let (Some(a), Some(b)) = (items.next(), items.next()) {
        out.push((a, b));
    }
    Ok(out)
}

fn score(text: &[u8]) -> Result<f64, Error> {
    match parse_double(text) {
        Some(value) if !value.is_nan() => Ok(value),
        _ => Err(Error::Corrupt("bad score in a compact sorted set".into())),
    }
}
