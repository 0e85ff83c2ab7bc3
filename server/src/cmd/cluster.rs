//! CLUSTER, READONLY, READWRITE, ASKING: the commands of a Redis Cluster
//! node (see `crate::cluster`); without `cluster-enabled` they answer
//! Redis's "cluster support disabled".

use super::args::parse_i64;
use super::server::help_reply;
use super::{error, Ctx};
use crate::cluster::{Cluster, EndpointType, SetSlot};
use crate::resp::Reply;
use tally_cluster::node::FailoverKind;
use tally_cluster::nodes_conf::NodeLine;

/// Redis's error without `cluster-enabled yes`.
const DISABLED: &str = "ERR This instance has cluster support disabled";

fn cluster<'a>(ctx: &Ctx<'a>) -> Result<&'a Cluster, Reply> {
    ctx.shared
        .cluster
        .get()
        .ok_or_else(|| Reply::error(DISABLED))
}

fn bulk(text: impl Into<Vec<u8>>) -> Reply {
    Reply::Bulk(text.into())
}

/// A slot argument, with Redis's errors (getSlotOrReply).
fn slot(arg: &[u8]) -> Result<u16, Reply> {
    match parse_i64(arg) {
        Some(n) if (0..tally_cluster::SLOTS as i64).contains(&n) => Ok(n as u16),
        _ => Err(Reply::error("ERR Invalid or out of range slot")),
    }
}

macro_rules! node {
    ($ctx:expr) => {
        match cluster($ctx) {
            Ok(cluster) => cluster,
            Err(reply) => return reply,
        }
    };
}

/// The container without a subcommand, or with one it does not have, when
/// cluster support is off: Redis answers "disabled" for every CLUSTER call.
pub fn cluster_container(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let _ = node!(ctx);
    super::handlers::container_without_subcommand(ctx, argv)
}

/// CLUSTER INFO
pub fn cluster_info(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let node = node!(ctx);
    let ok = node.state_ok();
    let assigned = node.assigned();
    let slots_ok = node.slots_ok();
    let (current, mine) = node.epochs();
    let (known, size) = node.sizes();
    let mut lines = vec![
        format!("cluster_state:{}", if ok { "ok" } else { "fail" }),
        format!("cluster_slots_assigned:{assigned}"),
        format!("cluster_slots_ok:{slots_ok}"),
        "cluster_slots_pfail:0".to_string(),
        format!("cluster_slots_fail:{}", assigned - slots_ok),
        format!("cluster_known_nodes:{known}"),
        format!("cluster_size:{}", size.max(usize::from(known == 1))),
        format!("cluster_current_epoch:{current}"),
        format!("cluster_my_epoch:{mine}"),
    ];
    lines.extend(node.bus_stats.info_lines());
    lines.push("total_cluster_links_buffer_limit_exceeded:0".to_string());
    let mut text = lines.join("\r\n");
    text.push_str("\r\n");
    Reply::Verbatim(text.into_bytes())
}

/// CLUSTER MYID
pub fn cluster_myid(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    bulk(node!(ctx).myid())
}

/// CLUSTER NODES
pub fn cluster_nodes(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let mut text = String::new();
    let tls_client = ctx.client.info.tls;
    for line in node!(ctx).nodes_for_client(tls_client).nodes {
        text.push_str(&line.render());
        text.push('\n');
    }
    Reply::Verbatim(text.into_bytes())
}

/// Every (start, end, node line) served, in slot order.
fn served_ranges(node: &Cluster, tls_client: bool) -> Vec<(u16, u16, NodeLine)> {
    let mut ranges = Vec::new();
    for line in node.nodes_for_client(tls_client).nodes {
        for &(start, end) in &line.slots {
            ranges.push((start, end, line.clone()));
        }
    }
    ranges.sort_by_key(|r| r.0);
    ranges
}

/// The replicas of the node on `master`'s line, in `lines`.
fn replica_lines<'l>(lines: &'l [NodeLine], master: &NodeLine) -> Vec<&'l NodeLine> {
    lines
        .iter()
        .filter(|line| line.master.as_deref() == Some(master.name.as_str()))
        .collect()
}

/// A line's node is marked FAIL.
fn failed(line: &NodeLine) -> bool {
    line.flags.iter().any(|f| f == "fail")
}

/// CLUSTER SLOTS: each range with its master, then its replicas that are
/// not failing and have an offset (isReplicaAvailable).
pub fn cluster_slots(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let node = node!(ctx);
    let preferred = node.preferred_endpoint();
    let lines = node.nodes_for_client(ctx.client.info.tls).nodes;
    let offsets = node.repl_offsets();
    Reply::Array(
        served_ranges(node, ctx.client.info.tls)
            .into_iter()
            .map(|(start, end, line)| {
                let mut entry = vec![
                    Reply::Int(start as i64),
                    Reply::Int(end as i64),
                    node_of_slots(preferred, &line),
                ];
                for replica in replica_lines(&lines, &line) {
                    let offset = offsets.get(&replica.name).copied().unwrap_or(0);
                    if !failed(replica) && offset != 0 {
                        entry.push(node_of_slots(preferred, replica));
                    }
                }
                Reply::Array(entry)
            })
            .collect(),
    )
}

/// A node in CLUSTER SLOTS (addNodeToNodeReply): its preferred endpoint,
/// port and name, then what else is known of its address.
fn node_of_slots(preferred: EndpointType, line: &NodeLine) -> Reply {
    let hostname = hostname_of(line);
    let endpoint = match preferred {
        EndpointType::UnknownEndpoint => Reply::Nil,
        _ => bulk(preferred.endpoint(&line.ip, hostname)),
    };
    let mut more = Vec::new();
    if preferred != EndpointType::Ip {
        more.push((bulk("ip"), bulk(line.ip.as_str())));
    }
    if preferred != EndpointType::Hostname && !hostname.is_empty() {
        more.push((bulk("hostname"), bulk(hostname)));
    }
    Reply::Array(vec![
        endpoint,
        Reply::Int(line.port as i64),
        bulk(line.name.as_str()),
        Reply::Map(more),
    ])
}

fn hostname_of(line: &NodeLine) -> &str {
    line.hostname.as_deref().unwrap_or_default()
}

/// CLUSTER SHARDS: one shard per master, its slots, itself and its
/// replicas.
pub fn cluster_shards(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let node = node!(ctx);
    let preferred = node.preferred_endpoint();
    let tls = node.tls();
    let lines = node.nodes_conf().nodes;
    let offsets = node.repl_offsets();
    let details = |line: &NodeLine| {
        let mut details = vec![(bulk("id"), bulk(line.name.as_str()))];
        // In a TLS cluster a node's port is its TLS port, and its
        // plaintext port rides along (addNodeDetailsToShardReply).
        let (plaintext_port, tls_port) = if tls {
            (line.pport, line.port)
        } else {
            (line.port, 0)
        };
        if plaintext_port != 0 {
            details.push((bulk("port"), Reply::Int(plaintext_port as i64)));
        }
        if tls_port != 0 {
            details.push((bulk("tls-port"), Reply::Int(tls_port as i64)));
        }
        details.extend([
            (bulk("ip"), bulk(line.ip.as_str())),
            (
                bulk("endpoint"),
                bulk(preferred.endpoint(&line.ip, hostname_of(line))),
            ),
        ]);
        if let Some(hostname) = &line.hostname {
            details.push((bulk("hostname"), bulk(hostname.as_str())));
        }
        let replica = line.master.is_some();
        let offset = offsets.get(&line.name).copied().unwrap_or(0);
        let health = if failed(line) {
            "fail"
        } else if replica && offset == 0 {
            "loading"
        } else {
            "online"
        };
        details.extend([
            (
                bulk("role"),
                bulk(if replica { "replica" } else { "master" }),
            ),
            (bulk("replication-offset"), Reply::Int(offset as i64)),
            (bulk("health"), bulk(health)),
        ]);
        Reply::Map(details)
    };
    Reply::Array(
        lines
            .iter()
            .filter(|line| line.master.is_none() && line.flags.iter().any(|f| f == "master"))
            .map(|line| {
                let slots = line
                    .slots
                    .iter()
                    .flat_map(|&(start, end)| [Reply::Int(start as i64), Reply::Int(end as i64)])
                    .collect();
                let nodes = std::iter::once(line)
                    .chain(replica_lines(&lines, line))
                    .map(details)
                    .collect();
                Reply::Map(vec![
                    (bulk("slots"), Reply::Array(slots)),
                    (bulk("nodes"), Reply::Array(nodes)),
                ])
            })
            .collect(),
    )
}

/// CLUSTER MEET ip port [cluster-bus-port]: the handshake starts; the bus
/// carries it out.
pub fn cluster_meet(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let node = node!(ctx);
    if argv.len() > 5 {
        return Reply::error(error::wrong_arity("cluster|meet"));
    }
    let port = parse_i64(argv[3]);
    let cport = match argv.get(4) {
        None => port.map(|p| p + 10000),
        Some(arg) => parse_i64(arg),
    };
    let (Some(port), Some(cport)) = (port, cport) else {
        return Reply::error_bytes(
            [&b"ERR Invalid TCP base port specified: "[..], argv[3]].concat(),
        );
    };
    let ip = String::from_utf8_lossy(argv[2]);
    if ip.parse::<std::net::IpAddr>().is_err()
        || !(0..=65535).contains(&port)
        || !(0..=65535).contains(&cport)
    {
        return Reply::error(format!("ERR Invalid node address specified: {ip}:{port}"));
    }
    let outputs = node.meet(
        ip.as_bytes(),
        port as u16,
        cport as u16,
        ctx.shared.clock.now_ms(),
    );
    let Some(shared) = ctx.shared.itself.get().and_then(std::sync::Weak::upgrade) else {
        return Reply::error("ERR CLUSTER MEET needs a started server");
    };
    crate::net::bus::carry_out(&shared, outputs, None);
    Reply::Ok
}

/// In cluster mode, relays a PUBLISH to the other nodes over the bus
/// (an SPUBLISH to the other nodes of this shard: its master and replicas).
pub fn relay_publish(ctx: &Ctx<'_>, channel: &[u8], message: &[u8], sharded: bool) {
    let Some(cluster) = ctx.shared.cluster.get() else {
        return;
    };
    let outputs = cluster.with_node(|node| node.publish(channel, message, sharded));
    if !outputs.is_empty() {
        carry_out(ctx, outputs);
    }
}

/// The bus, to carry out what the state machine asked.
fn carry_out(ctx: &Ctx<'_>, outputs: Vec<tally_cluster::node::Output>) {
    if let Some(shared) = ctx.shared.itself.get().and_then(std::sync::Weak::upgrade) {
        crate::net::bus::carry_out(&shared, outputs, None);
    }
}

/// CLUSTER SETSLOT slot IMPORTING node | MIGRATING node | STABLE | NODE node
pub fn cluster_setslot(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let node = node!(ctx);
    let slot = match slot(argv[2]) {
        Ok(slot) => slot,
        Err(reply) => return reply,
    };
    let action = match (argv.get(3), argv.get(4), argv.len()) {
        (Some(a), Some(name), 5) if a.eq_ignore_ascii_case(b"migrating") => {
            SetSlot::Migrating(name.to_vec())
        }
        (Some(a), Some(name), 5) if a.eq_ignore_ascii_case(b"importing") => {
            SetSlot::Importing(name.to_vec())
        }
        (Some(a), None, 4) if a.eq_ignore_ascii_case(b"stable") => SetSlot::Stable,
        (Some(a), Some(name), 5) if a.eq_ignore_ascii_case(b"node") => SetSlot::Node(name.to_vec()),
        _ => {
            return Reply::error(
                "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP",
            )
        }
    };
    let shards = ctx.shared.store.db(0).shard_count();
    let keys_here: usize = (0..shards)
        .map(|i| ctx.lock_shard(0, i).count_in_slot(slot))
        .sum();
    match node.set_slot(slot, action, keys_here) {
        Ok(outputs) => {
            carry_out(ctx, outputs);
            Reply::Ok
        }
        Err(e) => Reply::error(e),
    }
}

/// CLUSTER FORGET node
pub fn cluster_forget(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let node = node!(ctx);
    match node.forget(argv[2], ctx.shared.clock.now_ms()) {
        Ok(outputs) => {
            carry_out(ctx, outputs);
            Reply::Ok
        }
        Err(e) => Reply::error(e),
    }
}

/// ASKING: the next command may use a slot this node is importing.
pub fn asking(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let _ = node!(ctx);
    ctx.client.asking = true;
    Reply::Ok
}

/// CLUSTER KEYSLOT key
pub fn cluster_keyslot(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let _ = node!(ctx);
    Reply::Int(tally_cluster::slot::key_slot(argv[2]) as i64)
}

/// The keys of one slot (every shard of database 0 walked: tally keeps no
/// per-slot index yet).
/// CLUSTER COUNTKEYSINSLOT slot
pub fn cluster_countkeysinslot(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let _ = node!(ctx);
    let slot = match parse_i64(argv[2]) {
        None => return Reply::error(error::NOT_INTEGER),
        Some(n) if !(0..tally_cluster::SLOTS as i64).contains(&n) => {
            return Reply::error("ERR Invalid slot")
        }
        Some(n) => n as u16,
    };
    let shards = ctx.shared.store.db(0).shard_count();
    let count: usize = (0..shards)
        .map(|i| ctx.lock_shard(0, i).count_in_slot(slot))
        .sum();
    Reply::Int(count as i64)
}

/// CLUSTER GETKEYSINSLOT slot count
pub fn cluster_getkeysinslot(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let _ = node!(ctx);
    let (Some(slot), Some(count)) = (parse_i64(argv[2]), parse_i64(argv[3])) else {
        return Reply::error(error::NOT_INTEGER);
    };
    if !(0..tally_cluster::SLOTS as i64).contains(&slot) || count < 0 {
        return Reply::error("ERR Invalid slot or number of keys");
    }
    let mut keys = Vec::new();
    for i in 0..ctx.shared.store.db(0).shard_count() {
        ctx.lock_shard(0, i)
            .keys_in_slot(slot as u16, count as usize, &mut keys);
    }
    Reply::Array(keys.into_iter().map(Reply::Bulk).collect())
}

fn change_slots(ctx: &Ctx<'_>, argv: &[&[u8]], add: bool, ranges: bool) -> Reply {
    let node = node!(ctx);
    let mut slots = Vec::new();
    if ranges {
        if (argv.len() - 2) % 2 != 0 {
            return Reply::error(error::wrong_arity(if add {
                "cluster|addslotsrange"
            } else {
                "cluster|delslotsrange"
            }));
        }
        for pair in argv[2..].chunks(2) {
            let (start, end) = match (slot(pair[0]), slot(pair[1])) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(e), _) | (_, Err(e)) => return e,
            };
            if start > end {
                return Reply::error(format!(
                    "ERR start slot number {start} is greater than end slot number {end}"
                ));
            }
            slots.extend(start..=end);
        }
    } else {
        for arg in &argv[2..] {
            match slot(arg) {
                Ok(s) => slots.push(s),
                Err(e) => return e,
            }
        }
    }
    match node.change_slots(&slots, add) {
        Ok(()) => Reply::Ok,
        Err(e) => Reply::error(e),
    }
}

/// CLUSTER ADDSLOTS slot [slot ...]
pub fn cluster_addslots(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    change_slots(ctx, argv, true, false)
}

/// CLUSTER ADDSLOTSRANGE start end [start end ...]
pub fn cluster_addslotsrange(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    change_slots(ctx, argv, true, true)
}

/// CLUSTER DELSLOTS slot [slot ...]
pub fn cluster_delslots(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    change_slots(ctx, argv, false, false)
}

/// CLUSTER DELSLOTSRANGE start end [start end ...]
pub fn cluster_delslotsrange(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    change_slots(ctx, argv, false, true)
}

/// CLUSTER FLUSHSLOTS (refused while the node holds keys, as Redis).
pub fn cluster_flushslots(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let node = node!(ctx);
    if ctx.db_sizes(0).0 != 0 {
        return Reply::error("ERR DB must be empty to perform CLUSTER FLUSHSLOTS.");
    }
    match node.flush_slots() {
        Ok(()) => Reply::Ok,
        Err(e) => Reply::error(e),
    }
}

/// CLUSTER SET-CONFIG-EPOCH epoch
pub fn cluster_set_config_epoch(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let node = node!(ctx);
    let Some(epoch) = parse_i64(argv[2]) else {
        return Reply::error(error::NOT_INTEGER);
    };
    if epoch < 0 {
        return Reply::error(format!("ERR Invalid config epoch specified: {epoch}"));
    }
    match node.set_config_epoch(epoch as u64) {
        Ok(()) => Reply::Ok,
        Err(e) => Reply::error(e),
    }
}

/// CLUSTER BUMPEPOCH
pub fn cluster_bumpepoch(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    match node!(ctx).bump_epoch() {
        Ok(status) => Reply::Status(status.into()),
        Err(e) => Reply::error(e),
    }
}

/// CLUSTER SAVECONFIG
pub fn cluster_saveconfig(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    match node!(ctx).save() {
        Ok(()) => Reply::Ok,
        Err(e) => Reply::error(format!("ERR error saving the cluster node config: {e}")),
    }
}

/// CLUSTER COUNT-FAILURE-REPORTS node-id (no failure detection yet: 0
/// for any known node).
pub fn cluster_count_failure_reports(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let node = node!(ctx);
    if let Some(reports) = node.failure_reports(argv[2]) {
        return Reply::Int(reports as i64);
    }
    let mut text = b"ERR Unknown node ".to_vec();
    text.extend_from_slice(argv[2]);
    Reply::error_bytes(text)
}

/// CLUSTER LINKS: every bus link to and from a known node, as Redis 7.0
/// describes it (a map per link).
pub fn cluster_links(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let node = node!(ctx);
    let peers: Vec<tally_cluster::NodeName> =
        node.with_node(|node| node.peers().map(|peer| peer.name).collect());
    let links = ctx.shared.bus_links.describe(&peers);
    Reply::Array(
        links
            .into_iter()
            .map(|link| {
                Reply::Map(vec![
                    (
                        bulk("direction"),
                        bulk(if link.inbound { "from" } else { "to" }),
                    ),
                    (bulk("node"), bulk(link.node.to_vec())),
                    (bulk("create-time"), Reply::Int(link.created_ms as i64)),
                    (bulk("events"), bulk(link.events)),
                    (
                        bulk("send-buffer-allocated"),
                        Reply::Int(link.send_buffer as i64),
                    ),
                    (
                        bulk("send-buffer-used"),
                        Reply::Int(link.send_buffer as i64),
                    ),
                ])
            })
            .collect(),
    )
}

/// CLUSTER RESET [HARD|SOFT]: refused on a master holding keys; a
/// replica stops replicating and empties its data (clusterReset).
pub fn cluster_reset(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let node = node!(ctx);
    let hard = match argv.get(2) {
        None => false,
        Some(a) if a.eq_ignore_ascii_case(b"hard") => true,
        Some(a) if a.eq_ignore_ascii_case(b"soft") => false,
        Some(_) => return Reply::error(error::SYNTAX),
    };
    let replica = node.my_master().is_some();
    if !replica && ctx.db_sizes(0).0 != 0 {
        return Reply::error("ERR CLUSTER RESET can't be called with master nodes containing keys");
    }
    if let Err(e) = node.reset(hard) {
        return Reply::error(e);
    }
    if replica {
        super::replication::become_master(ctx.shared);
        for index in 0..ctx.shared.store.databases() {
            for shard in ctx.lock_all(index).shards() {
                shard.clear();
            }
        }
        ctx.shared.tracking.flushed();
    }
    Reply::Ok
}

/// CLUSTER REPLICATE node-id: this node replicates that master.
pub fn cluster_replicate(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let node = node!(ctx);
    let keys = ctx.db_sizes(0).0;
    match node.replicate(argv[2], keys) {
        Ok(outputs) => {
            carry_out(ctx, outputs);
            Reply::Ok
        }
        Err(e) => Reply::error(e),
    }
}

/// CLUSTER REPLICAS node-id (and its old name CLUSTER SLAVES): the
/// replicas' CLUSTER NODES lines.
pub fn cluster_replicas(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let node = node!(ctx);
    match node.replicas_of(argv[2], ctx.client.info.tls) {
        Ok(lines) => Reply::Array(lines.iter().map(|l| bulk(l.render())).collect()),
        Err(e) => Reply::error(e),
    }
}

/// CLUSTER FAILOVER [FORCE|TAKEOVER], on a replica.
pub fn cluster_failover(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let node = node!(ctx);
    if argv.len() > 3 {
        return Reply::error_bytes(error::subcommand_syntax("CLUSTER", argv[1]));
    }
    let how = match argv.get(2) {
        None => FailoverKind::Coordinated,
        Some(a) if a.eq_ignore_ascii_case(b"force") => FailoverKind::Force,
        Some(a) if a.eq_ignore_ascii_case(b"takeover") => FailoverKind::Takeover,
        Some(_) => return Reply::error(error::SYNTAX),
    };
    let linked = node
        .my_master()
        .is_some_and(|master| ctx.shared.bus_links.linked(&master));
    match node.failover(how, linked, ctx.shared.clock.now_ms()) {
        Ok(outputs) => {
            carry_out(ctx, outputs);
            Reply::Ok
        }
        Err(e) => Reply::error(format!("ERR {e}")),
    }
}

/// CLUSTER HELP
pub fn cluster_help(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let _ = node!(ctx);
    help_reply(
        "CLUSTER",
        &[
            "ADDSLOTS <slot> [<slot> ...]",
            "    Assign slots to current node.",
            "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Assign slots which are between <start-slot> and <end-slot> to current node.",
            "BUMPEPOCH",
            "    Advance the cluster config epoch.",
            "COUNT-FAILURE-REPORTS <node-id>",
            "    Return number of failure reports for <node-id>.",
            "COUNTKEYSINSLOT <slot>",
            "    Return the number of keys in <slot>.",
            "DELSLOTS <slot> [<slot> ...]",
            "    Delete slots information from current node.",
            "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
            "FAILOVER [FORCE|TAKEOVER]",
            "    Promote current replica node to being a master.",
            "FORGET <node-id>",
            "    Remove a node from the cluster.",
            "GETKEYSINSLOT <slot> <count>",
            "    Return key names stored by current node in a slot.",
            "FLUSHSLOTS",
            "    Delete current node own slots information.",
            "INFO",
            "    Return information about the cluster.",
            "KEYSLOT <key>",
            "    Return the hash slot for <key>.",
            "MEET <ip> <port> [<bus-port>]",
            "    Connect nodes into a working cluster.",
            "MYID",
            "    Return the node id.",
            "NODES",
            "    Return cluster configuration seen by node. Output format:",
            "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
            "REPLICATE <node-id>",
            "    Configure current node as replica to <node-id>.",
            "RESET [HARD|SOFT]",
            "    Reset current node (default: soft).",
            "SET-CONFIG-EPOCH <epoch>",
            "    Set config epoch of current node.",
            "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
            "    Set slot state.",
            "REPLICAS <node-id>",
            "    Return <node-id> replicas.",
            "SAVECONFIG",
            "    Force saving cluster configuration on disk.",
            "SLOTS",
            "    Return information about slots range mappings. Each range is made of:",
            "    start, end, master and replicas IP addresses, ports and ids",
            "SHARDS",
            "    Return information about slot range mappings and the nodes associated with them.",
            "LINKS",
            "    Return information about all network links between this node and its peers.",
            "    Output format is an array where each array element is a map containing attributes of a link",
        ],
    )
}

/// READONLY: on a replica, this connection's reads of its master's slots
/// are served here.
pub fn readonly(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let _ = node!(ctx);
    ctx.client.readonly = true;
    ctx.client
        .info
        .readonly
        .store(true, std::sync::atomic::Ordering::Relaxed);
    Reply::Ok
}

/// READWRITE: reads go to the master again.
pub fn readwrite(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let _ = node!(ctx);
    ctx.client.readonly = false;
    ctx.client
        .info
        .readonly
        .store(false, std::sync::atomic::Ordering::Relaxed);
    Reply::Ok
}
