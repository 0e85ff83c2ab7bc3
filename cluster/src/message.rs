//! The cluster bus messages of Redis 7.0 (`clusterMsg` in cluster.h), byte
//! for byte: a 2256-byte header (`RCmb`, lengths and epochs in network
//! order, the sender's slot bitmap) and a body by type. Decoding applies
//! Redis's own length checks (clusterProcessPacket); a message that fails
//! them is refused, as Redis drops it.

use crate::NodeName;

/// `RCmb`.
pub const SIGNATURE: &[u8; 4] = b"RCmb";
/// The bus protocol version.
pub const PROTOCOL_VERSION: u16 = 1;
/// Bytes of the header (sizeof(clusterMsg) - sizeof(union clusterMsgData)).
pub const HEADER_LEN: usize = 2256;
/// Bytes of one gossip section (clusterMsgDataGossip).
pub const GOSSIP_LEN: usize = 104;
/// NET_IP_STR_LEN.
const IP_LEN: usize = 46;
/// The slot bitmap's bytes.
const SLOT_BYTES: usize = crate::SLOTS / 8;

/// Message types (CLUSTERMSG_TYPE_*).
pub mod kind {
    /// PING.
    pub const PING: u16 = 0;
    /// PONG.
    pub const PONG: u16 = 1;
    /// MEET.
    pub const MEET: u16 = 2;
    /// FAIL.
    pub const FAIL: u16 = 3;
    /// PUBLISH.
    pub const PUBLISH: u16 = 4;
    /// FAILOVER_AUTH_REQUEST.
    pub const FAILOVER_AUTH_REQUEST: u16 = 5;
    /// FAILOVER_AUTH_ACK.
    pub const FAILOVER_AUTH_ACK: u16 = 6;
    /// UPDATE.
    pub const UPDATE: u16 = 7;
    /// MFSTART.
    pub const MFSTART: u16 = 8;
    /// MODULE.
    pub const MODULE: u16 = 9;
    /// PUBLISHSHARD.
    pub const PUBLISHSHARD: u16 = 10;
}

/// Node flags as the bus carries them (CLUSTER_NODE_*).
pub mod node_flags {
    /// A master.
    pub const MASTER: u16 = 1;
    /// A replica.
    pub const SLAVE: u16 = 2;
    /// Possibly failing.
    pub const PFAIL: u16 = 4;
    /// Failing.
    pub const FAIL: u16 = 8;
    /// The sender itself.
    pub const MYSELF: u16 = 16;
    /// Handshake not finished.
    pub const HANDSHAKE: u16 = 32;
    /// Address unknown.
    pub const NOADDR: u16 = 64;
    /// A MEET is to be sent.
    pub const MEET: u16 = 128;
    /// Eligible for replica migration.
    pub const MIGRATE_TO: u16 = 256;
    /// Will not fail over.
    pub const NOFAILOVER: u16 = 512;
}

/// `mflags[0]`: the message carries ping extensions.
pub const MFLAG0_EXT_DATA: u8 = 1 << 2;
/// A master's messages while it holds writes for a manual failover
/// (CLUSTERMSG_FLAG0_PAUSED): its offset is where the replica must be.
pub const MFLAG0_PAUSED: u8 = 1 << 0;
/// A failover auth request to be granted though the master is not failing
/// (CLUSTERMSG_FLAG0_FORCEACK: CLUSTER FAILOVER).
pub const MFLAG0_FORCEACK: u8 = 1 << 1;

/// The header every message starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Protocol version (1).
    pub version: u16,
    /// The sender's client port (its TLS port when the bus runs TLS).
    pub port: u16,
    /// The message type ([`kind`]).
    pub kind: u16,
    /// Gossip sections (PING, PONG, MEET).
    pub count: u16,
    /// The sender's current epoch.
    pub current_epoch: u64,
    /// The sender's config epoch (its master's, for a replica).
    pub config_epoch: u64,
    /// Replication offset.
    pub offset: u64,
    /// The sender's name.
    pub sender: NodeName,
    /// The slots the sender (or its master) serves.
    pub slots: Box<[u8; SLOT_BYTES]>,
    /// The sender's master, all zero for a master.
    pub slaveof: NodeName,
    /// The sender's IP if it announces one, else empty.
    pub ip: Vec<u8>,
    /// Ping extensions that follow the gossip.
    pub extensions: u16,
    /// The plaintext port when `port` is the TLS port.
    pub pport: u16,
    /// The sender's bus port.
    pub cport: u16,
    /// The sender's flags ([`node_flags`]).
    pub flags: u16,
    /// The cluster's state as the sender sees it (0 ok, 1 fail).
    pub state: u8,
    /// Message flags.
    pub mflags: [u8; 3],
}

impl Header {
    /// A header with everything zero but the signature's fields.
    pub fn new(kind: u16, sender: NodeName) -> Header {
        Header {
            version: PROTOCOL_VERSION,
            port: 0,
            kind,
            count: 0,
            current_epoch: 0,
            config_epoch: 0,
            offset: 0,
            sender,
            slots: Box::new([0; SLOT_BYTES]),
            slaveof: [0; 40],
            ip: Vec::new(),
            extensions: 0,
            pport: 0,
            cport: 0,
            flags: 0,
            state: 0,
            mflags: [0; 3],
        }
    }

    /// True when the header claims `slot`.
    pub fn serves(&self, slot: u16) -> bool {
        let slot = slot as usize;
        self.slots[slot / 8] & (1 << (slot % 8)) != 0
    }
}

/// What a gossip section says of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gossip {
    /// The node.
    pub node: NodeName,
    /// When the sender last pinged it (seconds).
    pub ping_sent: u32,
    /// When the sender last heard its pong (seconds).
    pub pong_received: u32,
    /// Its IP.
    pub ip: Vec<u8>,
    /// Its client port.
    pub port: u16,
    /// Its bus port.
    pub cport: u16,
    /// Its flags.
    pub flags: u16,
    /// Its plaintext port.
    pub pport: u16,
}

/// A ping extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extension {
    /// CLUSTERMSG_EXT_TYPE_HOSTNAME: the sender's announced hostname.
    Hostname(Vec<u8>),
    /// A type this version does not know, kept as it came.
    Other {
        /// Its type.
        kind: u16,
        /// Its bytes after the 8-byte extension header.
        data: Vec<u8>,
    },
}

/// A message's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// PING, PONG, MEET.
    Ping {
        /// Gossip about other nodes.
        gossip: Vec<Gossip>,
        /// Extensions.
        extensions: Vec<Extension>,
    },
    /// FAIL: the node is failing.
    Fail {
        /// The failing node.
        node: NodeName,
    },
    /// PUBLISH / PUBLISHSHARD.
    Publish {
        /// The channel.
        channel: Vec<u8>,
        /// The message.
        message: Vec<u8>,
    },
    /// UPDATE: a node's slots as of its config epoch.
    Update {
        /// Its config epoch.
        config_epoch: u64,
        /// The node.
        node: NodeName,
        /// Its slots.
        slots: Box<[u8; SLOT_BYTES]>,
    },
    /// FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK, MFSTART: the header is all.
    Empty,
    /// MODULE.
    Module {
        /// The module's id.
        module_id: u64,
        /// Its message type.
        module_type: u8,
        /// Its payload.
        payload: Vec<u8>,
    },
}

/// A whole message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The header.
    pub header: Header,
    /// The body.
    pub body: Body,
}

/// Why bytes are not a message Redis would process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Not `RCmb`.
    Signature,
    /// Shorter than its header or than its declared length.
    Truncated,
    /// A protocol version other than 1.
    Version(u16),
    /// The declared length is not the one its type and counts imply.
    Length {
        /// The message's `totlen`.
        declared: u32,
        /// What its contents need.
        expected: u32,
    },
    /// An extension is not padded to 8 bytes or runs past the message.
    Extension,
    /// A type Redis 7.0 does not define.
    Kind(u16),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Signature => write!(f, "not a cluster bus message (signature)"),
            Error::Truncated => write!(f, "truncated cluster bus message"),
            Error::Version(v) => write!(f, "cluster bus protocol version {v}"),
            Error::Length { declared, expected } => {
                write!(
                    f,
                    "cluster bus message of {declared} bytes, {expected} expected"
                )
            }
            Error::Extension => write!(f, "malformed ping extension"),
            Error::Kind(k) => write!(f, "unknown cluster bus message type {k}"),
        }
    }
}

impl std::error::Error for Error {}

/// The length of the message at the start of `bytes`, once its first 8
/// bytes are there (the bus reads that much, then the rest).
pub fn frame_len(bytes: &[u8]) -> Result<Option<usize>, Error> {
    if bytes.len() < 8 {
        return Ok(None);
    }
    if &bytes[..4] != SIGNATURE {
        return Err(Error::Signature);
    }
    Ok(Some(
        u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize,
    ))
}

/// The type field of a framed message (what Redis counts a message by
/// before checking anything else); 0 when too short to have one.
pub fn kind_of(bytes: &[u8]) -> u16 {
    Fields(bytes).u16(AT_TYPE)
}

/// A reader of big-endian fields at fixed offsets.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn u16(&self, at: usize) -> u16 {
        match self.0.get(at..at + 2) {
            Some(&[a, b]) => u16::from_be_bytes([a, b]),
            _ => 0,
        }
    }
    fn u32(&self, at: usize) -> u32 {
        u32::from_be_bytes(self.0[at..at + 4].try_into().unwrap_or([0; 4]))
    }
    fn u64(&self, at: usize) -> u64 {
        u64::from_be_bytes(self.0[at..at + 8].try_into().unwrap_or([0; 8]))
    }
    fn name(&self, at: usize) -> NodeName {
        self.0[at..at + 40].try_into().unwrap_or([0; 40])
    }
    /// A NUL-terminated string in a fixed field.
    fn cstr(&self, at: usize, len: usize) -> Vec<u8> {
        let field = &self.0[at..at + len];
        let end = field.iter().position(|&b| b == 0).unwrap_or(len);
        field[..end].to_vec()
    }
}

// Header field offsets (cluster.h's clusterMsg).
const AT_VER: usize = 8;
const AT_PORT: usize = 10;
const AT_TYPE: usize = 12;
const AT_COUNT: usize = 14;
const AT_CURRENT_EPOCH: usize = 16;
const AT_CONFIG_EPOCH: usize = 24;
const AT_OFFSET: usize = 32;
const AT_SENDER: usize = 40;
const AT_SLOTS: usize = 80;
const AT_SLAVEOF: usize = AT_SLOTS + SLOT_BYTES;
const AT_MYIP: usize = AT_SLAVEOF + 40;
const AT_EXTENSIONS: usize = AT_MYIP + IP_LEN;
const AT_PPORT: usize = AT_EXTENSIONS + 2 + 30;
const AT_CPORT: usize = AT_PPORT + 2;
const AT_FLAGS: usize = AT_CPORT + 2;
const AT_STATE: usize = AT_FLAGS + 2;
const AT_MFLAGS: usize = AT_STATE + 1;

/// Decodes one whole message (exactly `bytes`), with Redis's checks.
pub fn decode(bytes: &[u8]) -> Result<Message, Error> {
    let Some(total) = frame_len(bytes)? else {
        return Err(Error::Truncated);
    };
    // A declared length shorter than the header is refused too: every
    // type's length includes the header (Redis drops such a message).
    if total < HEADER_LEN || bytes.len() < total {
        return Err(Error::Truncated);
    }
    let bytes = &bytes[..total];
    let f = Fields(bytes);
    let version = f.u16(AT_VER);
    if version != PROTOCOL_VERSION {
        return Err(Error::Version(version));
    }
    let mut slots = Box::new([0u8; SLOT_BYTES]);
    slots.copy_from_slice(&bytes[AT_SLOTS..AT_SLOTS + SLOT_BYTES]);
    let header = Header {
        version,
        port: f.u16(AT_PORT),
        kind: f.u16(AT_TYPE),
        count: f.u16(AT_COUNT),
        current_epoch: f.u64(AT_CURRENT_EPOCH),
        config_epoch: f.u64(AT_CONFIG_EPOCH),
        offset: f.u64(AT_OFFSET),
        sender: f.name(AT_SENDER),
        slots,
        slaveof: f.name(AT_SLAVEOF),
        ip: f.cstr(AT_MYIP, IP_LEN),
        extensions: f.u16(AT_EXTENSIONS),
        pport: f.u16(AT_PPORT),
        cport: f.u16(AT_CPORT),
        flags: f.u16(AT_FLAGS),
        state: bytes[AT_STATE],
        mflags: [bytes[AT_MFLAGS], bytes[AT_MFLAGS + 1], bytes[AT_MFLAGS + 2]],
    };
    let data = HEADER_LEN;
    let expect = |expected: usize| -> Result<(), Error> {
        if expected == total {
            Ok(())
        } else {
            Err(Error::Length {
                declared: total as u32,
                expected: expected as u32,
            })
        }
    };
    let body = match header.kind {
        kind::PING | kind::PONG | kind::MEET => {
            let count = header.count as usize;
            let mut at = data + GOSSIP_LEN * count;
            if at > total {
                return Err(Error::Length {
                    declared: total as u32,
                    expected: at as u32,
                });
            }
            let gossip = (0..count)
                .map(|i| {
                    let g = data + i * GOSSIP_LEN;
                    Gossip {
                        node: f.name(g),
                        ping_sent: f.u32(g + 40),
                        pong_received: f.u32(g + 44),
                        ip: f.cstr(g + 48, IP_LEN),
                        port: f.u16(g + 94),
                        cport: f.u16(g + 96),
                        flags: f.u16(g + 98),
                        pport: f.u16(g + 100),
                    }
                })
                .collect();
            let mut extensions = Vec::new();
            if header.mflags[0] & MFLAG0_EXT_DATA != 0 {
                for _ in 0..header.extensions {
                    if at + 8 > total {
                        return Err(Error::Extension);
                    }
                    let len = f.u32(at) as usize;
                    let ext_kind = f.u16(at + 4);
                    if len % 8 != 0 || len < 8 || total - at < len {
                        return Err(Error::Extension);
                    }
                    let payload = &bytes[at + 8..at + len];
                    extensions.push(match ext_kind {
                        0 => {
                            // Redis reads the hostname as a C string: it
                            // must end in NUL inside its extension
                            // (CVE-2026-92925), else the message is refused.
                            if payload.last() != Some(&0) {
                                return Err(Error::Extension);
                            }
                            let end = payload.iter().position(|&b| b == 0).unwrap_or(0);
                            Extension::Hostname(payload[..end].to_vec())
                        }
                        other => Extension::Other {
                            kind: other,
                            data: payload.to_vec(),
                        },
                    });
                    at += len;
                }
            }
            expect(at)?;
            Body::Ping { gossip, extensions }
        }
        kind::FAIL => {
            expect(data + 40)?;
            Body::Fail { node: f.name(data) }
        }
        kind::PUBLISH | kind::PUBLISHSHARD => {
            if total < data + 8 {
                return Err(Error::Truncated);
            }
            let channel_len = f.u32(data) as usize;
            let message_len = f.u32(data + 4) as usize;
            let expected = (data + 16 - 8)
                .checked_add(channel_len)
                .and_then(|n| n.checked_add(message_len))
                .ok_or(Error::Truncated)?;
            expect(expected)?;
            let start = data + 8;
            Body::Publish {
                channel: bytes[start..start + channel_len].to_vec(),
                message: bytes[start + channel_len..start + channel_len + message_len].to_vec(),
            }
        }
        kind::FAILOVER_AUTH_REQUEST | kind::FAILOVER_AUTH_ACK | kind::MFSTART => {
            expect(data)?;
            Body::Empty
        }
        kind::UPDATE => {
            expect(data + 8 + 40 + SLOT_BYTES)?;
            let mut slots = Box::new([0u8; SLOT_BYTES]);
            slots.copy_from_slice(&bytes[data + 48..data + 48 + SLOT_BYTES]);
            Body::Update {
                config_epoch: f.u64(data),
                node: f.name(data + 8),
                slots,
            }
        }
        kind::MODULE => {
            if total < data + 16 {
                return Err(Error::Truncated);
            }
            let len = f.u32(data + 8) as usize;
            expect(data + 16 - 3 + len)?;
            Body::Module {
                module_id: f.u64(data),
                module_type: bytes[data + 12],
                payload: bytes[data + 13..data + 13 + len].to_vec(),
            }
        }
        other => return Err(Error::Kind(other)),
    };
    Ok(Message { header, body })
}

/// Encodes a message as Redis writes it: the header's `totlen`, `count`,
/// `extensions` and the extension flag follow from the body.
pub fn encode(message: &Message) -> Vec<u8> {
    let mut header = message.header.clone();
    let mut body = Vec::new();
    match &message.body {
        Body::Ping { gossip, extensions } => {
            header.count = gossip.len() as u16;
            for g in gossip {
                body.extend_from_slice(&g.node);
                body.extend_from_slice(&g.ping_sent.to_be_bytes());
                body.extend_from_slice(&g.pong_received.to_be_bytes());
                put_cstr(&mut body, &g.ip, IP_LEN);
                for v in [g.port, g.cport, g.flags, g.pport, 0] {
                    body.extend_from_slice(&v.to_be_bytes());
                }
            }
            header.extensions = extensions.len() as u16;
            if !extensions.is_empty() {
                header.mflags[0] |= MFLAG0_EXT_DATA;
            }
            for ext in extensions {
                let (ext_kind, payload) = match ext {
                    Extension::Hostname(name) => {
                        let mut p = name.clone();
                        p.push(0);
                        (0u16, p)
                    }
                    Extension::Other { kind, data } => (*kind, data.clone()),
                };
                let len = (8 + payload.len()).div_ceil(8) * 8;
                body.extend_from_slice(&(len as u32).to_be_bytes());
                body.extend_from_slice(&ext_kind.to_be_bytes());
                body.extend_from_slice(&[0, 0]);
                body.extend_from_slice(&payload);
                body.resize(body.len() + (len - 8 - payload.len()), 0);
            }
        }
        Body::Fail { node } => body.extend_from_slice(node),
        Body::Publish { channel, message } => {
            body.extend_from_slice(&(channel.len() as u32).to_be_bytes());
            body.extend_from_slice(&(message.len() as u32).to_be_bytes());
            body.extend_from_slice(channel);
            body.extend_from_slice(message);
        }
        Body::Update {
            config_epoch,
            node,
            slots,
        } => {
            body.extend_from_slice(&config_epoch.to_be_bytes());
            body.extend_from_slice(node);
            body.extend_from_slice(&slots[..]);
        }
        Body::Empty => {}
        Body::Module {
            module_id,
            module_type,
            payload,
        } => {
            body.extend_from_slice(&module_id.to_be_bytes());
            body.extend_from_slice(&(payload.len() as u32).to_be_bytes());
            body.push(*module_type);
            body.extend_from_slice(payload);
        }
    }
    let total = HEADER_LEN + body.len();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(SIGNATURE);
    out.extend_from_slice(&(total as u32).to_be_bytes());
    for v in [header.version, header.port, header.kind, header.count] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    for v in [header.current_epoch, header.config_epoch, header.offset] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out.extend_from_slice(&header.sender);
    out.extend_from_slice(&header.slots[..]);
    out.extend_from_slice(&header.slaveof);
    put_cstr(&mut out, &header.ip, IP_LEN);
    out.extend_from_slice(&header.extensions.to_be_bytes());
    out.extend_from_slice(&[0; 30]);
    for v in [header.pport, header.cport, header.flags] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out.push(header.state);
    out.extend_from_slice(&header.mflags);
    debug_assert_eq!(out.len(), HEADER_LEN);
    out.extend_from_slice(&body);
    out
}

/// A string in a fixed NUL-padded field.
fn put_cstr(out: &mut Vec<u8>, text: &[u8], len: usize) {
    let take = text.len().min(len - 1);
    out.extend_from_slice(&text[..take]);
    out.resize(out.len() + (len - take), 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(c: u8) -> NodeName {
        [c; 40]
    }

    #[test]
    fn messages_round_trip_at_redis_sizes() {
        let mut header = Header::new(kind::PING, name(b'a'));
        header.port = 7000;
        header.cport = 17000;
        header.current_epoch = 5;
        header.flags = node_flags::MASTER | node_flags::MYSELF;
        header.ip = b"127.0.0.1".to_vec();
        header.slots[0] = 0b101;
        let gossip = Gossip {
            node: name(b'b'),
            ping_sent: 1,
            pong_received: 2,
            ip: b"127.0.0.1".to_vec(),
            port: 7001,
            cport: 17001,
            flags: node_flags::MASTER,
            pport: 0,
        };
        let message = Message {
            header,
            body: Body::Ping {
                gossip: vec![gossip.clone(), gossip],
                extensions: vec![Extension::Hostname(b"node-a.example".to_vec())],
            },
        };
        let bytes = encode(&message);
        // The header, two gossip sections, and the hostname extension
        // padded to 8 (8 + 15 bytes -> 24).
        assert_eq!(bytes.len(), HEADER_LEN + 2 * GOSSIP_LEN + 24);
        let back = decode(&bytes).expect("decodes");
        assert!(back.header.serves(0) && !back.header.serves(1) && back.header.serves(2));
        assert_eq!(back.header.count, 2);
        assert_eq!(back.header.extensions, 1);
        assert_eq!(back.body, message.body);
        assert_eq!(encode(&back), bytes);
    }

    #[test]
    fn lengths_are_checked_as_redis_checks_them() {
        let fail = encode(&Message {
            header: Header::new(kind::FAIL, name(b'a')),
            body: Body::Fail { node: name(b'c') },
        });
        assert_eq!(fail.len(), HEADER_LEN + 40);
        assert!(decode(&fail).is_ok());
        let mut longer = fail.clone();
        longer.extend_from_slice(&[0; 8]);
        longer[4..8].copy_from_slice(&((HEADER_LEN + 48) as u32).to_be_bytes());
        assert!(matches!(decode(&longer), Err(Error::Length { .. })));
        let mut short = fail.clone();
        short[4..8].copy_from_slice(&16u32.to_be_bytes());
        assert_eq!(
            decode(&short),
            Err(Error::Truncated),
            "totlen below the header"
        );
        let mut wrong = fail.clone();
        wrong[0] = b'X';
        assert_eq!(decode(&wrong), Err(Error::Signature));
        assert_eq!(decode(&fail[..100]), Err(Error::Truncated));
        let publish = encode(&Message {
            header: Header::new(kind::PUBLISH, name(b'a')),
            body: Body::Publish {
                channel: b"tally:rules".to_vec(),
                message: b"2".to_vec(),
            },
        });
        assert_eq!(publish.len(), HEADER_LEN + 8 + 11 + 1);
        assert!(decode(&publish).is_ok());
    }

    /// CVE-2026-92925: a hostname extension is a C string in Redis; one
    /// without its NUL, or with no bytes at all, refuses the message.
    #[test]
    fn a_hostname_extension_must_end_in_nul() {
        let ping = |payload: &[u8]| {
            let mut bytes = encode(&Message {
                header: Header::new(kind::PING, name(b'a')),
                body: Body::Ping {
                    gossip: Vec::new(),
                    extensions: vec![Extension::Other {
                        kind: 0,
                        data: payload.to_vec(),
                    }],
                },
            });
            let total = bytes.len() as u32;
            bytes[4..8].copy_from_slice(&total.to_be_bytes());
            decode(&bytes)
        };
        assert_eq!(ping(&[b'h'; 32]), Err(Error::Extension));
        assert_eq!(ping(&[]), Err(Error::Extension));
        let ok = ping(b"node-a\0\0").expect("NUL-terminated decodes");
        assert!(matches!(
            &ok.body,
            Body::Ping { extensions, .. } if extensions == &[Extension::Hostname(b"node-a".to_vec())]
        ));
    }
}
