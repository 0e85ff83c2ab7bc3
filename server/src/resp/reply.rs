//! Replies and their RESP2/RESP3 encoding.
//!
//! Handlers build a [`Reply`]; the connection encodes it for the client's
//! protocol version. The same value feeds MULTI/EXEC and, later, Lua's
//! `redis.call`, which is why handlers do not write bytes themselves.

use std::borrow::Cow;

use bytes::{BufMut, BytesMut};

/// RESP version spoken by a client (HELLO switches it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// RESP2, the default.
    #[default]
    Resp2,
    /// RESP3, after `HELLO 3`.
    Resp3,
}

/// A reply to one command.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`.
    Ok,
    /// A simple string (`+PONG`, `+QUEUED`, ...).
    Status(Cow<'static, str>),
    /// An error; the text starts with its code (`ERR ...`, `WRONGTYPE ...`).
    /// Bytes, not text: Redis echoes what the client sent (an unknown
    /// command's name, a script's error message) byte for byte.
    Error(Cow<'static, [u8]>),
    /// An integer.
    Int(i64),
    /// A bulk string.
    Bulk(Vec<u8>),
    /// A bulk string holding the decimal form of an integer (GET of a counter),
    /// encoded without an intermediate allocation.
    BulkInt(i64),
    /// A static bulk string.
    BulkStatic(&'static [u8]),
    /// The null bulk string (RESP2 `$-1`, RESP3 `_`).
    Nil,
    /// The null array (RESP2 `*-1`, RESP3 `_`).
    NilArray,
    /// An array.
    Array(Vec<Reply>),
    /// A map: RESP3 `%`, a flat array in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// A set: RESP3 `~`, an array in RESP2.
    Set(Vec<Reply>),
    /// A boolean: RESP3 `#t`/`#f`, the integer 1/0 in RESP2.
    Bool(bool),
    /// No reply at all (SHUTDOWN closes the connection instead of answering).
    Nothing,
    /// Bytes written as they are, not a RESP frame: SYNC's snapshot
    /// (`$<len>\r\n` and the file, with no trailing CRLF, as the
    /// replication protocol sends it).
    Raw(Vec<u8>),
    /// Verbatim text (RESP3 `=txt:`), a bulk string in RESP2 (INFO, CLIENT LIST).
    Verbatim(Vec<u8>),
    /// An array of bulk strings kept back to back in one buffer: LRANGE of
    /// 600 elements costs two allocations instead of 600.
    Bulks(BulkList),
    /// Out-of-band data (pub/sub messages and confirmations): RESP3 `>`, an
    /// array in RESP2.
    Push(Vec<Reply>),
    /// Several replies sent back to back for one command (SUBSCRIBE with
    /// several channels confirms each one separately).
    Multi(Vec<Reply>),
    /// A double (scores): RESP3 `,`, a bulk string in RESP2; `%.17g` either
    /// way, as Redis 7.0 formats them.
    Double(f64),
    /// A long double already printed as Redis prints them (INCREX BYFLOAT's
    /// `%.17Lf` without trailing zeros, addReplyHumanLongDouble): RESP3 `,`,
    /// a bulk string in RESP2.
    HumanDouble(Vec<u8>),
    /// A reply already encoded for the protocol of the client it goes to:
    /// a script's result nested thousands deep is encoded once, on a stack
    /// of its own, rather than kept as a tree that every later walk (encode,
    /// drop) would recurse through.
    Encoded(Vec<u8>),
}

/// Bulk strings stored contiguously, already in their wire form
/// (`$<len>\r\n<bytes>\r\n`, the same in RESP2 and RESP3), so that sending
/// them is one copy; see [`Reply::Bulks`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BulkList {
    encoded: Vec<u8>,
    count: usize,
}

impl BulkList {
    /// Encodes `items` (iterated twice: once to size the buffer exactly,
    /// once to fill it, so the loop that runs per element does no growth
    /// checks and no length updates).
    pub fn collect<'a, I>(items: I) -> BulkList
    where
        I: Iterator<Item = &'a [u8]> + Clone,
    {
        let mut total = 0;
        let mut count = 0;
        for item in items.clone() {
            total += 5 + decimal_len(item.len()) + item.len();
            count += 1;
        }
        let mut encoded = vec![0u8; total];
        let mut at = 0;
        for item in items {
            let mut digits = itoa::Buffer::new();
            let digits = digits.format(item.len()).as_bytes();
            let header = at + 1 + digits.len();
            encoded[at] = b'$';
            encoded[at + 1..header].copy_from_slice(digits);
            encoded[header..header + 2].copy_from_slice(b"\r\n");
            let body = header + 2;
            encoded[body..body + item.len()].copy_from_slice(item);
            let end = body + item.len();
            encoded[end..end + 2].copy_from_slice(b"\r\n");
            at = end + 2;
        }
        BulkList { encoded, count }
    }

    /// An empty list with room for `bytes` of encoded strings, to
    /// [`BulkList::push`] onto.
    pub fn with_capacity(bytes: usize) -> BulkList {
        BulkList {
            encoded: Vec::with_capacity(bytes),
            count: 0,
        }
    }

    /// Appends a string.
    pub fn push(&mut self, item: &[u8]) {
        let mut digits = itoa::Buffer::new();
        self.encoded.push(b'$');
        self.encoded
            .extend_from_slice(digits.format(item.len()).as_bytes());
        self.encoded.extend_from_slice(b"\r\n");
        self.encoded.extend_from_slice(item);
        self.encoded.extend_from_slice(b"\r\n");
        self.count += 1;
    }

    /// Appends an integer's decimal form as a string.
    pub fn push_int(&mut self, value: i64) {
        let mut digits = itoa::Buffer::new();
        self.push(digits.format(value).as_bytes());
    }

    /// The strings in order (for Lua, which wants them one by one).
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let mut rest = &self.encoded[..];
        std::iter::from_fn(move || {
            let header_end = rest.iter().position(|&b| b == b'\r')?;
            let len: usize = std::str::from_utf8(&rest[1..header_end])
                .ok()?
                .parse()
                .ok()?;
            let start = header_end + 2;
            let item = &rest[start..start + len];
            rest = &rest[start + len + 2..];
            Some(item)
        })
    }

    /// Number of strings.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

impl Reply {
    /// An error reply from a message that already carries its code.
    pub fn error(message: impl Into<Cow<'static, str>>) -> Reply {
        Reply::Error(match message.into() {
            Cow::Borrowed(text) => Cow::Borrowed(text.as_bytes()),
            Cow::Owned(text) => Cow::Owned(text.into_bytes()),
        })
    }

    /// An error reply whose message holds bytes a client or a script
    /// supplied, kept as they are but for CR and LF, which become spaces so
    /// the error stays one line (as Redis maps them).
    pub fn error_bytes(mut message: Vec<u8>) -> Reply {
        for b in &mut message {
            if *b == b'\r' || *b == b'\n' {
                *b = b' ';
            }
        }
        Reply::Error(Cow::Owned(message))
    }

    /// A simple-string reply.
    pub fn status(text: &'static str) -> Reply {
        Reply::Status(Cow::Borrowed(text))
    }

    /// A bulk string copied from a slice.
    pub fn bulk(bytes: &[u8]) -> Reply {
        Reply::Bulk(bytes.to_vec())
    }

    /// True for error replies.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// True for out-of-band data (pub/sub confirmations), alone or several
    /// back to back: not a reply to the command, so CLIENT REPLY OFF and
    /// SKIP do not silence it (Redis's CLIENT_PUSHING, in both protocols).
    pub fn is_push(&self) -> bool {
        match self {
            Reply::Push(_) => true,
            Reply::Multi(replies) => !replies.is_empty() && replies.iter().all(Reply::is_push),
            _ => false,
        }
    }

    /// Encodes a reply of any depth without recursion, consuming it: each
    /// aggregate's children are moved out before the aggregate is dropped,
    /// so neither the encoding nor the drop recurses. For script results,
    /// which can nest thousands deep; [`Reply::encode`] serves every other
    /// reply, whose depth is a handler's.
    pub fn encode_deep(self, proto: Protocol, out: &mut BytesMut) {
        let mut pending: Vec<std::vec::IntoIter<Reply>> = vec![vec![self].into_iter()];
        while let Some(next) = pending.last_mut().map(Iterator::next) {
            let Some(reply) = next else {
                pending.pop();
                continue;
            };
            let (marker, children) = match reply {
                Reply::Array(items) => (b'*', items),
                Reply::Set(items) if proto == Protocol::Resp3 => (b'~', items),
                Reply::Set(items) => (b'*', items),
                Reply::Push(items) if proto == Protocol::Resp3 => (b'>', items),
                Reply::Push(items) => (b'*', items),
                Reply::Map(pairs) => {
                    match proto {
                        Protocol::Resp2 => int_line(out, b'*', pairs.len() as i64 * 2),
                        Protocol::Resp3 => int_line(out, b'%', pairs.len() as i64),
                    }
                    let flat: Vec<Reply> = pairs.into_iter().flat_map(|(k, v)| [k, v]).collect();
                    pending.push(flat.into_iter());
                    continue;
                }
                Reply::Multi(replies) => {
                    pending.push(replies.into_iter());
                    continue;
                }
                leaf => {
                    leaf.encode(proto, out);
                    continue;
                }
            };
            int_line(out, marker, children.len() as i64);
            pending.push(children.into_iter());
        }
    }

    /// Appends the encoding of this reply to `out`.
    pub fn encode(&self, proto: Protocol, out: &mut BytesMut) {
        match self {
            Reply::Ok => out.put_slice(b"+OK\r\n"),
            Reply::Status(text) => line(out, b'+', text.as_bytes()),
            Reply::Error(text) => line(out, b'-', text),
            Reply::Int(n) => int_line(out, b':', *n),
            Reply::Bulk(bytes) => bulk(out, bytes),
            Reply::BulkStatic(bytes) => bulk(out, bytes),
            Reply::BulkInt(n) => {
                let mut digits = itoa::Buffer::new();
                bulk(out, digits.format(*n).as_bytes());
            }
            Reply::Nil => match proto {
                Protocol::Resp2 => out.put_slice(b"$-1\r\n"),
                Protocol::Resp3 => out.put_slice(b"_\r\n"),
            },
            Reply::NilArray => match proto {
                Protocol::Resp2 => out.put_slice(b"*-1\r\n"),
                Protocol::Resp3 => out.put_slice(b"_\r\n"),
            },
            Reply::Array(items) => {
                int_line(out, b'*', items.len() as i64);
                for item in items {
                    item.encode(proto, out);
                }
            }
            Reply::Set(items) => {
                let marker = if proto == Protocol::Resp3 { b'~' } else { b'*' };
                int_line(out, marker, items.len() as i64);
                for item in items {
                    item.encode(proto, out);
                }
            }
            Reply::Map(pairs) => {
                match proto {
                    Protocol::Resp2 => int_line(out, b'*', pairs.len() as i64 * 2),
                    Protocol::Resp3 => int_line(out, b'%', pairs.len() as i64),
                }
                for (key, value) in pairs {
                    key.encode(proto, out);
                    value.encode(proto, out);
                }
            }
            Reply::Bool(value) => match proto {
                Protocol::Resp2 => int_line(out, b':', *value as i64),
                Protocol::Resp3 => out.put_slice(if *value { b"#t\r\n" } else { b"#f\r\n" }),
            },
            Reply::Nothing => {}
            Reply::Raw(bytes) => out.extend_from_slice(bytes),
            Reply::Bulks(list) => {
                int_line(out, b'*', list.len() as i64);
                out.put_slice(&list.encoded);
            }
            Reply::Push(items) => {
                let marker = if proto == Protocol::Resp3 { b'>' } else { b'*' };
                int_line(out, marker, items.len() as i64);
                for item in items {
                    item.encode(proto, out);
                }
            }
            Reply::Encoded(bytes) => out.put_slice(bytes),
            Reply::Multi(replies) => {
                for reply in replies {
                    reply.encode(proto, out);
                }
            }
            Reply::Double(value) => {
                let text = crate::float::format_g17(*value);
                match proto {
                    Protocol::Resp2 => bulk(out, text.as_bytes()),
                    Protocol::Resp3 => line(out, b',', text.as_bytes()),
                }
            }
            Reply::HumanDouble(text) => match proto {
                Protocol::Resp2 => bulk(out, text),
                Protocol::Resp3 => line(out, b',', text),
            },
            Reply::Verbatim(text) => match proto {
                Protocol::Resp2 => bulk(out, text),
                Protocol::Resp3 => {
                    int_line(out, b'=', text.len() as i64 + 4);
                    out.put_slice(b"txt:");
                    out.put_slice(text);
                    out.put_slice(b"\r\n");
                }
            },
        }
    }
}

/// Digits in the decimal form of `n`.
fn decimal_len(mut n: usize) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

fn line(out: &mut BytesMut, marker: u8, text: &[u8]) {
    out.reserve(text.len() + 3);
    out.put_u8(marker);
    out.put_slice(text);
    out.put_slice(b"\r\n");
}

fn int_line(out: &mut BytesMut, marker: u8, n: i64) {
    let mut digits = itoa::Buffer::new();
    line(out, marker, digits.format(n).as_bytes());
}

fn bulk(out: &mut BytesMut, bytes: &[u8]) {
    int_line(out, b'$', bytes.len() as i64);
    out.reserve(bytes.len() + 2);
    out.put_slice(bytes);
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(reply: &Reply, proto: Protocol) -> Vec<u8> {
        let mut out = BytesMut::new();
        reply.encode(proto, &mut out);
        out.to_vec()
    }

    #[test]
    fn null_and_aggregate_encodings_follow_the_protocol_version() {
        assert_eq!(encoded(&Reply::Nil, Protocol::Resp2), b"$-1\r\n");
        assert_eq!(encoded(&Reply::Nil, Protocol::Resp3), b"_\r\n");
        assert_eq!(encoded(&Reply::NilArray, Protocol::Resp2), b"*-1\r\n");
        let map = Reply::Map(vec![(Reply::bulk(b"a"), Reply::Int(1))]);
        assert_eq!(encoded(&map, Protocol::Resp2), b"*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(encoded(&map, Protocol::Resp3), b"%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(encoded(&Reply::Bool(true), Protocol::Resp3), b"#t\r\n");
        assert_eq!(
            encoded(&Reply::BulkInt(-12), Protocol::Resp2),
            b"$3\r\n-12\r\n"
        );
        assert_eq!(
            encoded(&Reply::Verbatim(b"hi".to_vec()), Protocol::Resp3),
            b"=6\r\ntxt:hi\r\n"
        );
    }

    #[test]
    fn a_bulk_list_encodes_as_an_array_of_bulks_and_iterates_back() {
        let long = vec![b'x'; 1234];
        let items = [&b"a"[..], b"", b"hello\r\n", &long];
        let list = BulkList::collect(items.iter().copied());
        let expected = Reply::Array(items.iter().map(|i| Reply::bulk(i)).collect());
        for proto in [Protocol::Resp2, Protocol::Resp3] {
            assert_eq!(
                encoded(&Reply::Bulks(list.clone()), proto),
                encoded(&expected, proto)
            );
        }
        let back: Vec<&[u8]> = list.iter().collect();
        assert_eq!(back, items);
        // Built a string at a time, integers as their decimal forms.
        let mut pushed = BulkList::with_capacity(8);
        for item in items {
            pushed.push(item);
        }
        assert_eq!(pushed, list);
        let mut numbers = BulkList::with_capacity(0);
        numbers.push_int(-42);
        numbers.push_int(i64::MAX);
        assert_eq!(
            numbers,
            BulkList::collect([&b"-42"[..], b"9223372036854775807"].into_iter())
        );
    }

    #[test]
    fn deep_encoding_equals_encoding_at_any_depth_without_recursing() {
        let shallow = Reply::Array(vec![
            Reply::Int(1),
            Reply::Map(vec![(Reply::bulk(b"k"), Reply::Set(vec![Reply::Nil]))]),
            Reply::Push(vec![Reply::Bool(true)]),
            Reply::Array(vec![]),
        ]);
        for proto in [Protocol::Resp2, Protocol::Resp3] {
            let mut deep = BytesMut::new();
            shallow.clone().encode_deep(proto, &mut deep);
            assert_eq!(deep.to_vec(), encoded(&shallow, proto));
        }
        // A million levels: a recursive encode or drop would overflow the
        // test thread's stack.
        let mut nested = Reply::Int(7);
        for _ in 0..1_000_000 {
            nested = Reply::Array(vec![nested]);
        }
        let mut out = BytesMut::new();
        nested.encode_deep(Protocol::Resp2, &mut out);
        assert_eq!(out.len(), 4 * 1_000_000 + 4);
        assert!(out.ends_with(b"*1\r\n:7\r\n"));
    }
}
