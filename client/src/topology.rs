//! Where each identity's counters live: one standalone server, or the
//! nodes of a Redis Cluster (tally's, Redis's, or both mixed).
//!
//! The URLs a limiter is built with are seed nodes. The first that answers
//! `CLUSTER SLOTS` tells which node serves each of the 16384 hash slots;
//! a standalone server answers that cluster support is disabled, and then
//! every slot is that server. MOVED replies correct single slots at once
//! and mark the map stale, and the maintenance task asks again. Each node
//! has its own connection and circuit breaker, so a node that is down
//! trips the policy only for the identities it serves.
//!
//! An identity's keys share the hash tag `{scope:id}` (keys.rs), so every
//! check and every lease is one call to one node.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU16, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use redis::aio::MultiplexedConnection;
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, Value};

use crate::breaker::{Breaker, BreakerConfig};

/// Redis Cluster's hash slots.
pub const SLOTS: usize = 16384;

/// The slot a key is stored in: CRC16 of its hash tag (or of the whole
/// key), as Redis computes it (shared with tally-server's cluster crate).
pub fn key_slot(key: &str) -> u16 {
    tally_cluster::slot::key_slot(key.as_bytes())
}

/// One server: its address, connection and breaker.
pub struct Node {
    /// `host:port`, as CLUSTER SLOTS and MOVED name it.
    pub address: String,
    client: redis::Client,
    /// The multiplexed connection, made on first use and dropped after a
    /// failed call so that the next call (behind the breaker) reconnects.
    /// (redis's ConnectionManager reconnects by itself but leaves a task
    /// behind when dropped.)
    connection: Mutex<Option<MultiplexedConnection>>,
    /// Trips when this node fails.
    pub breaker: Breaker,
}

impl Node {
    /// The node's connection, connecting if there is none.
    pub async fn connection(&self) -> redis::RedisResult<MultiplexedConnection> {
        if let Some(connection) = self.connection.lock().clone() {
            return Ok(connection);
        }
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_millis(500)))
            .set_response_timeout(None);
        let connection = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        *self.connection.lock() = Some(connection.clone());
        Ok(connection)
    }

    /// Forgets the connection (after a failure or a timeout: it may be stuck).
    pub fn drop_connection(&self) {
        self.connection.lock().take();
    }

    /// A client for pub/sub on this node.
    pub fn client(&self) -> &redis::Client {
        &self.client
    }
}

/// What the seeds turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// No seed has answered yet: everything goes to the first.
    Unknown = 0,
    /// A server without cluster support: every slot is the first seed.
    Standalone = 1,
    /// A Redis Cluster: the slot map routes.
    Cluster = 2,
}

/// The nodes and the slot map.
pub struct Topology {
    /// The first seed's connection settings (credentials, TLS, database):
    /// a node learnt from the cluster is reached with the same ones.
    template: ConnectionInfo,
    #[cfg(feature = "tls")]
    tls: Option<redis::TlsCertificates>,
    breaker: BreakerConfig,
    /// Append-only (an index stays valid), seeds first.
    nodes: RwLock<Vec<Arc<Node>>>,
    /// Slot → index into `nodes`; read on every check without a lock.
    slots: Box<[AtomicU16]>,
    kind: AtomicU8,
    /// A redirect was seen: ask the cluster for the whole map again.
    stale: AtomicBool,
    /// Server time minus local time, in ms. The nodes of one cluster read
    /// NTP-synchronized clocks; one offset, updated from every reply,
    /// stands for all of them.
    offset_ms: AtomicI64,
}

impl Topology {
    /// Seed nodes from URLs (`redis://`, `rediss://` with `tls`).
    pub fn new(
        urls: &[String],
        breaker: BreakerConfig,
        #[cfg(feature = "tls")] tls: Option<redis::TlsCertificates>,
    ) -> redis::RedisResult<Topology> {
        let infos = urls
            .iter()
            .map(|url| url.as_str().into_connection_info())
            .collect::<redis::RedisResult<Vec<_>>>()?;
        let topology = Topology {
            template: infos[0].clone(),
            #[cfg(feature = "tls")]
            tls,
            breaker,
            nodes: RwLock::new(Vec::new()),
            slots: (0..SLOTS).map(|_| AtomicU16::new(0)).collect(),
            kind: AtomicU8::new(Kind::Unknown as u8),
            stale: AtomicBool::new(false),
            offset_ms: AtomicI64::new(0),
        };
        for info in infos {
            let address = address_of(&info);
            let node = topology.make_node(address, info)?;
            topology.nodes.write().push(Arc::new(node));
        }
        Ok(topology)
    }

    fn make_node(&self, address: String, info: ConnectionInfo) -> redis::RedisResult<Node> {
        #[cfg(feature = "tls")]
        let client = match (&self.tls, info.addr()) {
            (Some(certificates), ConnectionAddr::TcpTls { .. }) => {
                redis::Client::build_with_tls(info, certificates.clone())?
            }
            _ => redis::Client::open(info)?,
        };
        #[cfg(not(feature = "tls"))]
        let client = redis::Client::open(info)?;
        Ok(Node {
            address,
            client,
            connection: Mutex::new(None),
            breaker: Breaker::new(self.breaker),
        })
    }

    /// What the seeds are.
    pub fn kind(&self) -> Kind {
        match self.kind.load(Ordering::Acquire) {
            1 => Kind::Standalone,
            2 => Kind::Cluster,
            _ => Kind::Unknown,
        }
    }

    /// Node `index`.
    pub fn node(&self, index: usize) -> Arc<Node> {
        self.nodes.read()[index].clone()
    }

    /// Nodes known (seeds and learnt).
    pub fn len(&self) -> usize {
        self.nodes.read().len()
    }

    /// The node serving `slot`.
    #[inline]
    pub fn node_for_slot(&self, slot: u16) -> usize {
        self.slots[slot as usize].load(Ordering::Relaxed) as usize
    }

    /// The node at `address` (`host:port`), added when new.
    pub fn node_at(&self, address: &str) -> usize {
        if let Some(index) = self.nodes.read().iter().position(|n| n.address == address) {
            return index;
        }
        let mut nodes = self.nodes.write();
        if let Some(index) = nodes.iter().position(|n| n.address == address) {
            return index;
        }
        let Some((host, port)) = address
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host, port.parse::<u16>().ok()?)))
        else {
            tracing::warn!(address, "a node address that is not host:port");
            return 0;
        };
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let addr = match self.template.addr() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(host, port),
        };
        let info = self.template.clone().set_addr(addr);
        match self.make_node(address.to_string(), info) {
            Ok(node) => {
                nodes.push(Arc::new(node));
                nodes.len() - 1
            }
            Err(error) => {
                tracing::warn!(address, %error, "a cluster node that cannot be reached");
                0
            }
        }
    }

    /// A MOVED reply: `slot` is served at `address` now. The rest of the
    /// map is probably out of date too (a reshard moves many slots).
    pub fn moved(&self, slot: u16, address: &str) -> usize {
        let index = self.node_at(address);
        self.slots[slot as usize % SLOTS].store(index as u16, Ordering::Relaxed);
        self.kind.store(Kind::Cluster as u8, Ordering::Release);
        self.stale.store(true, Ordering::Release);
        index
    }

    /// Whether the map should be asked for again.
    pub fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Acquire)
    }

    /// Marks the map for a refresh (a node failed: its slots may have gone
    /// elsewhere).
    pub fn mark_stale(&self) {
        if self.kind() != Kind::Standalone {
            self.stale.store(true, Ordering::Release);
        }
    }

    /// Asks the known nodes, in order, for the slot map, and installs the
    /// first answer. A standalone server's "cluster support disabled" makes
    /// every slot the first seed. `Err` when no node answered.
    pub async fn refresh(&self, timeout: Duration) -> redis::RedisResult<Kind> {
        let mut last_error = None;
        // Nodes whose breaker is closed first: a node that is down would
        // cost a timeout.
        let mut order: Vec<usize> = (0..self.len()).collect();
        order
            .sort_by_key(|&i| self.node(i).breaker.state() != crate::breaker::BreakerState::Closed);
        for index in order {
            let node = self.node(index);
            let call = async {
                let mut connection = node.connection().await?;
                redis::cmd("CLUSTER")
                    .arg("SLOTS")
                    .query_async::<Value>(&mut connection)
                    .await
            };
            let reply = match tokio::time::timeout(timeout, call).await {
                Ok(Ok(reply)) => reply,
                Ok(Err(error)) if standalone_answer(&error) => {
                    if index != 0 {
                        // Only the first seed's data would be used.
                        tracing::warn!(
                            address = node.address,
                            "a seed without cluster support: the first URL is the server"
                        );
                    }
                    self.kind.store(Kind::Standalone as u8, Ordering::Release);
                    self.stale.store(false, Ordering::Release);
                    return Ok(Kind::Standalone);
                }
                Ok(Err(error)) => {
                    node.drop_connection();
                    last_error = Some(error);
                    continue;
                }
                Err(_) => {
                    node.drop_connection();
                    last_error = Some(redis::RedisError::from(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "CLUSTER SLOTS timed out",
                    )));
                    continue;
                }
            };
            let host = match node.client.get_connection_info().addr() {
                ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => host.clone(),
                _ => "127.0.0.1".to_string(),
            };
            for (start, end, address) in parse_cluster_slots(&reply, &host) {
                let owner = self.node_at(&address) as u16;
                for slot in start..=end.min(SLOTS as u16 - 1) {
                    self.slots[slot as usize].store(owner, Ordering::Relaxed);
                }
            }
            self.kind.store(Kind::Cluster as u8, Ordering::Release);
            self.stale.store(false, Ordering::Release);
            return Ok(Kind::Cluster);
        }
        Err(last_error
            .unwrap_or_else(|| redis::RedisError::from(std::io::Error::other("no node to ask"))))
    }

    /// Server time minus local time, in ms.
    #[inline]
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }

    /// Notes a server's time (ms) against the local clock's.
    pub fn note_server_time(&self, server_ms: u64, local_ms: u64) {
        if server_ms > 0 {
            self.offset_ms
                .store(server_ms as i64 - local_ms as i64, Ordering::Relaxed);
        }
    }
}

/// Whether a CLUSTER SLOTS error means "treat this as one server": cluster
/// support disabled, or a user (or server) that cannot ask. The latter is
/// taken once, not asked again every refresh (each refusal would be an ACL
/// LOG entry on the server); docs/security.md gives the gateway user
/// `+cluster|slots` for clusters.
fn standalone_answer(error: &redis::RedisError) -> bool {
    let text = error.to_string();
    error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm)
        || text.contains("cluster support disabled")
        || text.contains("unknown command")
}

/// `host:port` of a connection's address.
fn address_of(info: &ConnectionInfo) -> String {
    match info.addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            format!("{host}:{port}")
        }
        ConnectionAddr::Unix(path) => path.display().to_string(),
        other => format!("{other}"),
    }
}

/// The (first slot, last slot, master `host:port`) ranges of a CLUSTER
/// SLOTS reply. An empty or `?` endpoint means the node that was asked
/// (Redis's "unknown endpoint"), whose host is `asked_host`.
pub fn parse_cluster_slots(reply: &Value, asked_host: &str) -> Vec<(u16, u16, String)> {
    let Value::Array(ranges) = reply else {
        return Vec::new();
    };
    let int = |v: &Value| match v {
        Value::Int(n) => Some(*n),
        _ => None,
    };
    let text = |v: &Value| match v {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    ranges
        .iter()
        .filter_map(|range| {
            let Value::Array(fields) = range else {
                return None;
            };
            let start = u16::try_from(int(fields.first()?)?).ok()?;
            let end = u16::try_from(int(fields.get(1)?)?).ok()?;
            let Value::Array(master) = fields.get(2)? else {
                return None;
            };
            let host = text(master.first()?)?;
            let port = int(master.get(1)?)?;
            let host = if host.is_empty() || host == "?" {
                asked_host.to_string()
            } else {
                host
            };
            // As MOVED and the seeds' addresses name it (no brackets for
            // IPv6, as Redis writes it), so one node is one entry.
            Some((start, end, format!("{host}:{port}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn cluster_slots_replies_give_ranges_and_masters() {
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                Value::Array(vec![
                    bulk("127.0.0.1"),
                    Value::Int(7001),
                    bulk("a".repeat(40).as_str()),
                ]),
                Value::Array(vec![
                    bulk("127.0.0.1"),
                    Value::Int(7004),
                    bulk("b".repeat(40).as_str()),
                ]),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(16383),
                Value::Array(vec![bulk(""), Value::Int(7002)]),
            ]),
        ]);
        assert_eq!(
            parse_cluster_slots(&reply, "10.0.0.9"),
            vec![
                (0, 5460, "127.0.0.1:7001".to_string()),
                (5461, 16383, "10.0.0.9:7002".to_string()),
            ]
        );
        assert!(parse_cluster_slots(&Value::Nil, "h").is_empty());
    }

    #[test]
    fn an_identity_s_keys_share_one_slot() {
        let user = crate::keys::Identity::new("user", "u_1", "free");
        let global = crate::keys::limit_prefix(&user, None);
        let search = crate::keys::limit_prefix(&user, Some("GET /search"));
        assert_eq!(key_slot(&global), key_slot(&search));
        assert_eq!(key_slot(&global), key_slot("user:u_1"));
        // Redis's CLUSTER KEYSLOT of "foo" is 12182.
        assert_eq!(key_slot("foo"), 12182);
    }

    #[test]
    fn moved_learns_a_node_and_marks_the_map_stale() {
        let topology = Topology::new(
            &["redis://127.0.0.1:7001".to_string()],
            BreakerConfig::default(),
            #[cfg(feature = "tls")]
            None,
        )
        .unwrap();
        assert_eq!(topology.node_for_slot(100), 0);
        assert!(!topology.is_stale());
        let index = topology.moved(100, "127.0.0.1:7002");
        assert_eq!(index, 1);
        assert_eq!(topology.node_for_slot(100), 1);
        assert_eq!(topology.node_for_slot(101), 0);
        assert_eq!(topology.node(1).address, "127.0.0.1:7002");
        assert!(topology.is_stale());
        assert_eq!(topology.kind(), Kind::Cluster);
        assert_eq!(topology.node_at("127.0.0.1:7002"), 1);
    }
}
