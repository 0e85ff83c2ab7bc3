//! Redis Cluster's protocol, without sockets or clocks: the pieces a tally
//! node needs to be a node of a Redis Cluster that `redis-cli --cluster`
//! drives and redis-server nodes join.
//!
//! - [`slot`]: CRC16 hash slots with `{hash tags}`, as Redis's `keyHashSlot`;
//! - [`message`]: the cluster bus messages of Redis 7.0 (`clusterMsg`, the
//!   `RCmb` header, PING/PONG/MEET gossip and extensions, FAIL, PUBLISH,
//!   UPDATE), byte for byte;
//! - [`nodes_conf`]: `nodes.conf` in Redis's own format;
//! - [`node`]: a node's view of the cluster as a state machine (joining,
//!   gossip, slot ownership by epoch), driven by the server's sockets and
//!   timers or by the deterministic simulation in `tests/simulation.rs`.

pub mod message;
pub mod node;
pub mod nodes_conf;
pub mod slot;

/// Hash slots in a cluster.
pub const SLOTS: usize = 16384;

/// A node's name: 40 hex characters.
pub type NodeName = [u8; 40];
