//! Redis's RDB format, read and written with no sockets and no files: the
//! snapshot files `SAVE` writes and `redis-server` loads, and the DUMP /
//! RESTORE payloads cluster resharding and replication are built on.
//!
//! - [`Reader`] reads RDB versions 9 to 12 (Redis 6.0 to 8.0): every
//!   encoding of the five types tally holds (strings with their integer and
//!   LZF forms; lists as plain, ziplist, quicklist and quicklist-2 with
//!   listpack nodes; sets as plain, intset and listpack; sorted sets as
//!   plain, binary-score, ziplist and listpack; hashes as plain, zipmap,
//!   ziplist and listpack, and Redis 7.4's hashes with field deadlines),
//!   expiry in seconds and milliseconds, SELECTDB,
//!   RESIZEDB, AUX, IDLE/FREQ, and the CRC64 trailer (a bad checksum is
//!   refused). Streams come as their listpack nodes and groups
//!   ([`StreamValue`]). A module value is reported as
//!   [`Item::Unsupported`], so the caller decides.
//! - [`Writer`] writes RDB 10 as Redis 7.0 does, choosing the listpack and
//!   intset encodings at Redis 7.0's thresholds ([`Encodings`]), so that
//!   `OBJECT ENCODING` survives a round trip through either server.
//! - [`dump`] and [`restore`] are DUMP's payload (one value, the RDB version
//!   and a CRC64), byte-identical to Redis's wherever the encodings agree.
//!
//! Everything is in memory: the caller streams entries in and bytes out
//! (the server writes the file, fsyncs and renames it).

mod compact;
mod encoding;
mod float;
mod lzf;
mod reader;
mod writer;

pub use compact::{
    backlen_size as listpack_backlen_size, decode_backlen as listpack_decode_backlen, listpack_int,
    listpack_str,
};
pub use reader::{Item, Reader};
pub use writer::{encode_entry, encode_string_entry, Encodings, StringValue, Writer};

/// The RDB version Redis 7.0 writes (and DUMP payloads carry).
pub const RDB_VERSION: u16 = 10;

/// The newest RDB version read (Redis 7.4 and 8.0 write 12).
pub const MAX_READ_VERSION: u16 = 12;

/// The latest deadline a hash field may carry (Redis 7.4's
/// EB_EXPIRE_TIME_MAX, 2^48 - 1 ms): a file with a later one is corrupt.
pub const MAX_FIELD_DEADLINE: u64 = (1 << 48) - 1;

/// The oldest RDB version read (Redis 6.0 writes 9).
pub const MIN_READ_VERSION: u16 = 9;

/// A value of a type tally holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string (integers as their decimal text).
    String(Vec<u8>),
    /// A list, head first.
    List(Vec<Vec<u8>>),
    /// A set's members, in the file's order.
    Set(Vec<Vec<u8>>),
    /// A sorted set's members and scores, in the file's order.
    SortedSet(Vec<(Vec<u8>, f64)>),
    /// A hash's fields and values, in the file's order.
    Hash(Pairs),
    /// A hash some of whose fields carry a deadline (Redis 7.4's hash
    /// field expiry), in the file's order.
    HashWithExpiry(FieldsWithExpiry),
    /// A stream: its listpack nodes as Redis keeps them, its counters and
    /// its consumer groups.
    Stream(Box<StreamValue>),
}

/// A stream ID as two numbers: milliseconds and sequence.
pub type StreamIdParts = (u64, u64);

/// A stream as an RDB file holds it (RDB_TYPE_STREAM_LISTPACKS*).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamValue {
    /// Each node's master ID (16 bytes, big endian) and its listpack, in
    /// ID order.
    pub nodes: Vec<([u8; 16], Vec<u8>)>,
    /// Live entries.
    pub length: u64,
    pub last_id: StreamIdParts,
    /// Files before Redis 7.0 (RDB_TYPE_STREAM_LISTPACKS) have none: the
    /// reader leaves these 0 and `entries_added` the length, and
    /// `v1` true, for the loader to work out as Redis does.
    pub first_id: StreamIdParts,
    pub max_deleted_id: StreamIdParts,
    pub entries_added: u64,
    /// Read from a file of Redis 6 (no first ID, deleted ID, entries
    /// added or groups' entries read).
    pub v1: bool,
    /// Consumer groups, by name.
    pub groups: Vec<StreamGroup>,
}

/// A consumer group as an RDB file holds it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamGroup {
    pub name: Vec<u8>,
    pub last_id: StreamIdParts,
    /// Entries the group has read (-1: not known).
    pub entries_read: i64,
    /// Delivered, not acknowledged: ID, last delivery (unix ms), deliveries.
    pub pending: Vec<(StreamIdParts, u64, u64)>,
    /// Consumers, by name.
    pub consumers: Vec<StreamConsumer>,
}

/// A consumer as an RDB file holds it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamConsumer {
    pub name: Vec<u8>,
    /// When it was last seen (unix ms).
    pub seen_time: u64,
    /// When it last read (Redis 7.2's files; otherwise `seen_time`).
    pub active_time: u64,
    /// The IDs of the group's pending entries it owns.
    pub pending: Vec<StreamIdParts>,
}

impl Value {
    /// The name TYPE replies with.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::String(_) => "string",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::SortedSet(_) => "zset",
            Value::Hash(_) | Value::HashWithExpiry(_) => "hash",
            Value::Stream(_) => "stream",
        }
    }
}

/// A hash's fields and values.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// A hash's fields, values and deadlines (unix ms; 0 for none).
pub type FieldsWithExpiry = Vec<(Vec<u8>, Vec<u8>, u64)>;

/// One key of a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The database it belongs to (SELECTDB).
    pub db: u32,
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Value,
    /// Absolute expiry in unix milliseconds, if the key is volatile.
    pub expire_at_ms: Option<u64>,
    /// Seconds since the key was last used, when the file says (Redis
    /// writes it under an LRU maxmemory policy).
    pub idle_seconds: Option<u64>,
}

/// Why a file or payload could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Not an RDB file (the `REDIS` magic is missing).
    NotRdb,
    /// An RDB version outside 9..=11.
    Version(u16),
    /// The data ended before the structure did.
    Truncated,
    /// The CRC64 trailer does not match the contents.
    Checksum,
    /// A structure that cannot be (an unknown type or opcode, a bad
    /// length, a compact encoding that does not parse).
    Corrupt(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::NotRdb => write!(f, "Wrong signature trying to load DB from file"),
            Error::Version(v) => write!(f, "Can't handle RDB format version {v}"),
            Error::Truncated => write!(f, "Short read or OOM loading DB. Unrecoverable error"),
            Error::Checksum => write!(f, "Wrong RDB checksum. Aborting now."),
            Error::Corrupt(what) => write!(f, "Bad RDB format: {what}"),
        }
    }
}

impl std::error::Error for Error {}

/// The CRC64 Redis stamps files and payloads with (Jones polynomial,
/// reflected, as crc64.c).
pub fn crc64(data: &[u8]) -> u64 {
    crc64_update(0, data)
}

/// Continues a CRC64 over more bytes.
pub fn crc64_update(crc: u64, data: &[u8]) -> u64 {
    // Sixteen tables (32 KiB) take sixteen bytes per step where one table
    // takes one: a snapshot checksums every byte it writes, and the
    // byte-wise loop was a sixth of the background writer's time.
    const CRC: crc::Crc<u64, crc::Table<16>> =
        crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_REDIS);
    // Carrying a running value across calls: `digest_with_initial` takes
    // the initial value unreflected and reflects it for this reflected
    // algorithm, whose register is the output as is.
    let mut digest = CRC.digest_with_initial(crc.reverse_bits());
    digest.update(data);
    digest.finalize()
}

/// DUMP's payload for `value`: its RDB type and encoding, then the RDB
/// version (2 bytes, little-endian) and the CRC64 of all that (8 bytes).
pub fn dump(value: &Value, encodings: &Encodings) -> Vec<u8> {
    let mut out = Vec::new();
    writer::write_value(&mut out, value, encodings);
    sealed(out)
}

/// The byte sizes of the quicklist nodes (listpacks) a list is written
/// as: DEBUG OBJECT's `ql_*` fields describe them.
pub fn list_node_sizes(items: &[Vec<u8>], encodings: &Encodings) -> Vec<usize> {
    writer::quicklist_nodes(items, encodings)
        .iter()
        .map(Vec::len)
        .collect()
}

/// `body` with DUMP's footer: the RDB version and the CRC64 of both.
fn sealed(mut body: Vec<u8>) -> Vec<u8> {
    body.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

/// A DUMP payload's body, once its footer says a version this reader
/// knows (up to Redis 7.2's 11) and a matching checksum.
fn unsealed(payload: &[u8]) -> Result<&[u8], Error> {
    // Too short for the footer: Redis reports the footer as wrong.
    if payload.len() < 10 {
        return Err(Error::Checksum);
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > MAX_READ_VERSION {
        return Err(Error::Version(version));
    }
    let stored = u64::from_le_bytes(footer[2..10].try_into().map_err(|_| Error::Truncated)?);
    if crc64(&payload[..payload.len() - 8]) != stored {
        return Err(Error::Checksum);
    }
    Ok(body)
}

/// Reads a DUMP payload back, as RESTORE does: the footer's version must
/// be one this reader knows (up to Redis 7.2's 11) and the checksum must
/// match ("DUMP payload version or checksum are wrong" on Redis).
pub fn restore(payload: &[u8]) -> Result<Value, Error> {
    let mut input = encoding::Input::new(unsealed(payload)?);
    let kind = input.byte()?;
    match reader::read_value(&mut input, kind)? {
        // Bytes after the value are ignored, as Redis's RESTORE does.
        reader::Decoded::Value(value) => Ok(value),
        reader::Decoded::Unsupported(what) => {
            Err(Error::Corrupt(format!("{what} values are not supported")))
        }
    }
}

/// FUNCTION DUMP's payload: each library's code after the FUNCTION2
/// opcode (LZF-compressed past 20 bytes when `compress`, as
/// `rdbcompression` makes Redis's), then DUMP's footer (RDB version and
/// CRC64).
pub fn dump_functions<'a>(codes: impl IntoIterator<Item = &'a [u8]>, compress: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(reader::opcodes::FUNCTION2);
        encoding::write_string(&mut out, code, compress);
    }
    sealed(out)
}

/// Why a FUNCTION RESTORE payload was refused, in Redis's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FunctionsPayloadError {
    /// The footer's version or checksum.
    Footer,
    /// Something else than FUNCTION2 where a library should start.
    NotAFunction,
    /// A truncated or malformed library.
    Unreadable,
}

/// The library codes of a FUNCTION DUMP payload, checked as Redis's
/// FUNCTION RESTORE checks it.
pub fn restore_functions(payload: &[u8]) -> Result<Vec<Vec<u8>>, FunctionsPayloadError> {
    let body = unsealed(payload).map_err(|_| FunctionsPayloadError::Footer)?;
    let mut input = encoding::Input::new(body);
    let mut codes = Vec::new();
    while input.remaining() > 0 {
        let opcode = input
            .byte()
            .map_err(|_| FunctionsPayloadError::Unreadable)?;
        if opcode != reader::opcodes::FUNCTION2 {
            return Err(FunctionsPayloadError::NotAFunction);
        }
        codes.push(
            input
                .string()
                .map_err(|_| FunctionsPayloadError::Unreadable)?,
        );
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_is_redis_s() {
        // crc64.c's self test: "123456789" -> 0xe9c6d914c4b8d9ca.
        assert_eq!(crc64(b"123456789"), 0xe9c6d914c4b8d9ca);
        assert_eq!(crc64_update(crc64(b"1234"), b"56789"), 0xe9c6d914c4b8d9ca);
    }

    #[test]
    fn a_string_entry_written_from_the_store_s_form_is_the_value_s_bytes() {
        let encodings = Encodings::default();
        let long = b"a string long enough to be compressed, compressed, compressed";
        for (value, text) in [
            (StringValue::Int(7), b"7".to_vec()),
            (StringValue::Int(-40000), b"-40000".to_vec()),
            (
                StringValue::Int(i64::MAX),
                i64::MAX.to_string().into_bytes(),
            ),
            (StringValue::Bytes(b"12"), b"12".to_vec()),
            (StringValue::Bytes(b"v"), b"v".to_vec()),
            (StringValue::Bytes(long), long.to_vec()),
        ] {
            for expire in [None, Some(1_720_000_000_000)] {
                let (mut direct, mut built) = (Vec::new(), Vec::new());
                encode_string_entry(&mut direct, b"rl:key", value, expire, &encodings);
                encode_entry(
                    &mut built,
                    b"rl:key",
                    &Value::String(text.clone()),
                    expire,
                    &encodings,
                );
                assert_eq!(direct, built, "{value:?} {expire:?}");
            }
        }
    }

    /// DUMP of a small hash by redis-server 8.0.6, after `HSET small a 1 b
    /// 2 c 3`, `HPEXPIREAT small 1900000000000 FIELDS 1 b` and
    /// `HPEXPIREAT small 1900000000500 FIELDS 1 a`: a listpack of triples
    /// in deadline order, fields without one last.
    const REDIS8_LISTPACK_EX: &[u8] = b"\x19\x008\xd3`\xba\x01\x00\x00,,\x00\x00\x00\t\x00\x81b\x02\x02\x01\xf4\x008\xd3`\xba\x01\x00\x00\t\x81a\x02\x01\x01\xf4\xf49\xd3`\xba\x01\x00\x00\t\x81c\x02\x03\x01\x00\x01\xff\x0c\x00\xfa\xff\x15{\x873\xf3\xc5";

    #[test]
    fn redis_7_4_listpack_of_triples_reads_and_writes_back_byte_for_byte() {
        let value = restore(REDIS8_LISTPACK_EX).unwrap();
        let expected = Value::HashWithExpiry(vec![
            (b"b".to_vec(), b"2".to_vec(), 1_900_000_000_000),
            (b"a".to_vec(), b"1".to_vec(), 1_900_000_000_500),
            (b"c".to_vec(), b"3".to_vec(), 0),
        ]);
        assert_eq!(value, expected);
        let ours = dump(&value, &Encodings::default());
        // The same bytes but the footer's RDB version and checksum.
        let body = |payload: &[u8]| payload[..payload.len() - 10].to_vec();
        assert_eq!(body(&ours), body(REDIS8_LISTPACK_EX));
    }

    #[test]
    fn redis_7_4_table_with_deadlines_reads_and_round_trips() {
        // `HSET big f0 v0 ... f599 v599`, then `HPEXPIREAT big
        // 1900000000000 FIELDS 2 f1 f2` and `... 1900000000007 FIELDS 1 f3`.
        let payload = include_bytes!("../tests/data/redis8-hash-table-with-deadlines.dump");
        let Ok(Value::HashWithExpiry(fields)) = restore(payload) else {
            panic!("not a hash with deadlines");
        };
        assert_eq!(fields.len(), 600);
        let mut timed: Vec<_> = fields
            .iter()
            .filter(|f| f.2 != 0)
            .map(|(f, v, at)| (f.as_slice(), v.as_slice(), *at))
            .collect();
        timed.sort();
        assert_eq!(
            timed,
            vec![
                (&b"f1"[..], &b"v1"[..], 1_900_000_000_000),
                (b"f2", b"v2", 1_900_000_000_000),
                (b"f3", b"v3", 1_900_000_000_007),
            ]
        );
        let value = Value::HashWithExpiry(fields);
        let ours = dump(&value, &Encodings::default());
        assert_eq!(ours[0], 24, "a table with deadlines");
        assert_eq!(restore(&ours), Ok(value));
    }

    #[test]
    fn a_hash_with_deadlines_picks_redis_7_4_s_type_by_size() {
        let enc = Encodings::default();
        let untimed = Value::HashWithExpiry(vec![(b"f".repeat(65), b"v".to_vec(), 0)]);
        let payload = dump(&untimed, &enc);
        assert_eq!(payload[0], 4, "a plain table when no field has a deadline");
        assert_eq!(
            restore(&payload),
            Ok(Value::Hash(vec![(b"f".repeat(65), b"v".to_vec())]))
        );
        let small = Value::HashWithExpiry(vec![(b"f".to_vec(), b"v".to_vec(), 0)]);
        assert_eq!(
            dump(&small, &enc)[0],
            25,
            "a small hash stays a listpack of triples"
        );
    }

    #[test]
    fn a_field_deadline_past_2_to_the_48_is_corrupt() {
        let mut lp = crate::compact::ListpackBuilder::default();
        lp.push(b"f");
        lp.push(b"v");
        lp.push_int(1 << 48);
        let mut body = vec![25u8];
        body.extend_from_slice(&0u64.to_le_bytes());
        crate::encoding::write_string(&mut body, &lp.finish(), false);
        let payload = sealed(body);
        assert!(matches!(restore(&payload), Err(Error::Corrupt(_))));
    }

    #[test]
    fn a_dump_payload_round_trips_and_a_flipped_bit_is_refused() {
        let value = Value::Hash(vec![(b"f".to_vec(), b"v".to_vec())]);
        let mut payload = dump(&value, &Encodings::default());
        assert_eq!(restore(&payload), Ok(value));
        payload[1] ^= 1;
        assert_eq!(restore(&payload), Err(Error::Checksum));
    }
}

#[cfg(test)]
mod stream_tests {
    use super::*;

    /// redis-server 7.0.15: `XADD s2 <i>-0 name user-<i> n <i>` for i in
    /// 1..3, `XADD s2 4-0 other field`, `XGROUP CREATE s2 g1 0`, `XGROUP
    /// CREATE s2 g0 $`, XREADGROUP of two entries by bob and one by alice
    /// in g1, `XGROUP CREATECONSUMER s2 g1 carol`, `XDEL s2 2-0`, then
    /// `DUMP s2` (rdbcompression yes: the node is LZF-compressed).
    const PAYLOAD: &[u8] = include_bytes!("../tests/data/redis7-stream-with-groups.dump");

    #[test]
    fn a_stream_dumped_by_redis_reads_whole_and_dumps_back_to_the_same_bytes() {
        let value = restore(PAYLOAD).expect("a stream payload");
        let Value::Stream(stream) = &value else {
            panic!("not a stream: {value:?}");
        };
        assert_eq!(stream.nodes.len(), 1);
        assert_eq!(stream.nodes[0].0[7], 1, "master 1-0");
        assert_eq!(stream.length, 3);
        assert_eq!(stream.last_id, (4, 0));
        assert_eq!(stream.first_id, (1, 0));
        assert_eq!(stream.max_deleted_id, (2, 0));
        assert_eq!(stream.entries_added, 4);
        assert!(!stream.v1);
        let names: Vec<&[u8]> = stream.groups.iter().map(|g| &g.name[..]).collect();
        assert_eq!(names, vec![&b"g0"[..], b"g1"]);
        assert_eq!(stream.groups[0].entries_read, -1);
        assert_eq!(stream.groups[0].last_id, (4, 0));
        let g1 = &stream.groups[1];
        assert_eq!(g1.entries_read, 3);
        // 2-0 stays pending after XDEL, as in Redis.
        let pending: Vec<(u64, u64)> = g1.pending.iter().map(|p| p.0).collect();
        assert_eq!(pending, vec![(1, 0), (2, 0), (3, 0)]);
        assert!(g1.pending.iter().all(|p| p.2 == 1));
        let consumers: Vec<(&[u8], usize)> = g1
            .consumers
            .iter()
            .map(|c| (&c.name[..], c.pending.len()))
            .collect();
        assert_eq!(
            consumers,
            vec![(&b"alice"[..], 1), (b"bob", 2), (b"carol", 0)]
        );
        assert_eq!(dump(&value, &Encodings::default()), PAYLOAD);
    }

    #[test]
    fn a_stream_whose_groups_disagree_is_corrupt() {
        let Ok(Value::Stream(stream)) = restore(PAYLOAD) else {
            panic!("a stream payload");
        };
        let mut orphan = stream.clone();
        orphan.groups[1].consumers[1].pending.pop();
        let payload = dump(&Value::Stream(orphan), &Encodings::default());
        assert!(matches!(restore(&payload), Err(Error::Corrupt(_))));
        let mut stranger = stream.clone();
        stranger.groups[1].consumers[2].pending.push((9, 0));
        let payload = dump(&Value::Stream(stranger), &Encodings::default());
        assert!(matches!(restore(&payload), Err(Error::Corrupt(_))));
        let mut keyless = *stream;
        keyless.nodes.clear();
        let payload = dump(&Value::Stream(Box::new(keyless)), &Encodings::default());
        assert!(matches!(restore(&payload), Err(Error::Corrupt(_))));
    }
}
