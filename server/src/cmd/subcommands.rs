//! The subcommand rows of the container commands (ACL, CLUSTER, CONFIG, CLIENT, COMMAND,
//! SCRIPT, SLOWLOG, LATENCY, MEMORY, FUNCTION, OBJECT, PUBSUB): part of THE command
//! table (`table.rs`), kept apart so each file stays one screenful of idea.

use super::table::flags::*;
use super::table::{row, Command, KeySpec, NO_KEYS};
use super::{
    acl, client, cluster, command, config, keys, latency, memory, pubsub, scripting, server,
};

#[rustfmt::skip]
pub(super) static CONFIG_SUBCOMMANDS: &[Command] = &[
    row("config|get", -3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, config::config_get, "server", "2.0.0", "Returns the effective values of configuration parameters."),
    row("config|set", -4, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, config::config_set, "server", "2.0.0", "Sets configuration parameters in-flight."),
    row("config|resetstat", 2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, config::config_resetstat, "server", "2.0.0", "Resets the server's statistics."),
    row("config|help", 2, LOADING | STALE, NO_KEYS, config::config_help, "server", "5.0.0", "Returns helpful text about the different subcommands."),
];

#[rustfmt::skip]
pub(super) static ACL_SUBCOMMANDS: &[Command] = &[
    row("acl|cat", -2, NOSCRIPT | LOADING | STALE, NO_KEYS, acl::acl_cat, "server", "6.0.0", "Lists the ACL categories, or the commands inside a category."),
    row("acl|deluser", -3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, acl::acl_deluser, "server", "6.0.0", "Deletes ACL users, and terminates their connections."),
    row("acl|dryrun", -4, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, acl::acl_dryrun, "server", "7.0.0", "Simulates the execution of a command by a user, without executing the command."),
    row("acl|genpass", -2, NOSCRIPT | LOADING | STALE, NO_KEYS, acl::acl_genpass, "server", "6.0.0", "Generates a pseudorandom, secure password that can be used to identify ACL users."),
    row("acl|getuser", 3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, acl::acl_getuser, "server", "6.0.0", "Lists the ACL rules of a user."),
    row("acl|help", 2, LOADING | STALE, NO_KEYS, acl::acl_help, "server", "6.0.0", "Returns helpful text about the different subcommands."),
    row("acl|list", 2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, acl::acl_list, "server", "6.0.0", "Dumps the effective rules in ACL file format."),
    row("acl|load", 2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, acl::acl_load, "server", "6.0.0", "Reloads the rules from the configured ACL file."),
    row("acl|log", -2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, acl::acl_log, "server", "6.0.0", "Lists recent security events generated due to ACL rules."),
    row("acl|save", 2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, acl::acl_save, "server", "6.0.0", "Saves the effective ACL rules in the configured ACL file."),
    row("acl|setuser", -3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, acl::acl_setuser, "server", "6.0.0", "Creates and modifies an ACL user and its rules."),
    row("acl|users", 2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, acl::acl_users, "server", "6.0.0", "Lists all ACL users."),
    row("acl|whoami", 2, NOSCRIPT | LOADING | STALE, NO_KEYS, acl::acl_whoami, "server", "6.0.0", "Returns the authenticated username of the current connection."),
];

#[rustfmt::skip]
pub(super) static CLUSTER_SUBCOMMANDS: &[Command] = &[
    row("cluster|addslots", -3, ADMIN | STALE | NO_ASYNC_LOADING, NO_KEYS, cluster::cluster_addslots, "cluster", "3.0.0", "Assigns new hash slots to a node."),
    row("cluster|addslotsrange", -4, ADMIN | STALE | NO_ASYNC_LOADING, NO_KEYS, cluster::cluster_addslotsrange, "cluster", "7.0.0", "Assigns new hash slot ranges to a node."),
    row("cluster|bumpepoch", 2, ADMIN | STALE | NO_ASYNC_LOADING, NO_KEYS, cluster::cluster_bumpepoch, "cluster", "3.0.0", "Advances the cluster config epoch."),
    row("cluster|count-failure-reports", 3, ADMIN | STALE, NO_KEYS, cluster::cluster_count_failure_reports, "cluster", "3.0.0", "Returns the number of active failure reports active for a node."),
    row("cluster|countkeysinslot", 3, STALE, NO_KEYS, cluster::cluster_countkeysinslot, "cluster", "3.0.0", "Returns the number of keys in a hash slot."),
    row("cluster|delslots", -3, ADMIN | STALE | NO_ASYNC_LOADING, NO_KEYS, cluster::cluster_delslots, "cluster", "3.0.0", "Sets hash slots as unbound for a node."),
    row("cluster|delslotsrange", -4, ADMIN | STALE | NO_ASYNC_LOADING, NO_KEYS, cluster::cluster_delslotsrange, "cluster", "7.0.0", "Sets hash slot ranges as unbound for a node."),
    row("cluster|failover", -2, ADMIN | STALE | NO_ASYNC_LOADING, NO_KEYS, cluster::cluster_not_yet, "cluster", "3.0.0", "Forces a replica to perform a manual failover of its master."),
    row("cluster|flushslots", 2, ADMIN | STALE | NO_ASYNC_LOADING, NO_KEYS, cluster::cluster_flushslots, "cluster", "3.0.0", "Deletes all slots information from a node."),
    row("cluster|forget", 3, ADMIN | STALE | NO_ASYNC_LOADING, NO_KEYS, cluster::cluster_forget, "cluster", "3.0.0", "Removes a node from the nodes table."),
    row("cluster|getkeysinslot", 4, STALE, NO_KEYS, cluster::cluster_getkeysinslot, "cluster", "3.0.0", "Returns the key names in a hash slot."),
    row("cluster|help", 2, LOADING | STALE, NO_KEYS, cluster::cluster_help, "cluster", "5.0.0", "Returns helpful text about the different subcommands."),
    row("cluster|info", 2, STALE, NO_KEYS, cluster::cluster_info, "cluster", "3.0.0", "Returns information about the state of a node."),
    row("cluster|keyslot", 3, STALE, NO_KEYS, cluster::cluster_keyslot, "cluster", "3.0.0", "Returns the hash slot for a key."),
    row("cluster|links", 2, STALE, NO_KEYS, cluster::cluster_links, "cluster", "7.0.0", "Returns a list of all TCP links to and from peer nodes."),
    row("cluster|meet", -4, ADMIN | STALE | NO_ASYNC_LOADING, NO_KEYS, cluster::cluster_meet, "cluster", "3.0.0", "Forces a node to handshake with another node."),
    row("cluster|myid", 2, STALE, NO_KEYS, cluster::cluster_myid, "cluster", "3.0.0", "Returns the ID of a node."),
    row("cluster|nodes", 2, STALE, NO_KEYS, cluster::cluster_nodes, "cluster", "3.0.0", "Returns the cluster configuration for a node."),
    row("cluster|replicas", 3, ADMIN | STALE, NO_KEYS, cluster::cluster_not_yet, "cluster", "5.0.0", "Lists the replica nodes of a master node."),
    row("cluster|replicate", 3, ADMIN | STALE | NO_ASYNC_LOADING, NO_KEYS, cluster::cluster_not_yet, "cluster", "3.0.0", "Configure a node as replica of a master node."),
    row("cluster|reset", -2, ADMIN | STALE | NOSCRIPT, NO_KEYS, cluster::cluster_reset, "cluster", "3.0.0", "Resets a node."),
    row("cluster|saveconfig", 2, ADMIN | STALE | NO_ASYNC_LOADING, NO_KEYS, cluster::cluster_saveconfig, "cluster", "3.0.0", "Forces a node to save the cluster configuration to disk."),
    row("cluster|set-config-epoch", 3, ADMIN | STALE | NO_ASYNC_LOADING, NO_KEYS, cluster::cluster_set_config_epoch, "cluster", "3.0.0", "Sets the configuration epoch for a new node."),
    row("cluster|setslot", -4, ADMIN | STALE | NO_ASYNC_LOADING, NO_KEYS, cluster::cluster_setslot, "cluster", "3.0.0", "Binds a hash slot to a node."),
    row("cluster|shards", 2, STALE, NO_KEYS, cluster::cluster_shards, "cluster", "7.0.0", "Returns the mapping of cluster slots to shards."),
    row("cluster|slots", 2, STALE, NO_KEYS, cluster::cluster_slots, "cluster", "3.0.0", "Returns the mapping of cluster slots to nodes."),
];

#[rustfmt::skip]
pub(super) static CLIENT_SUBCOMMANDS: &[Command] = &[
    row("client|id", 2, NOSCRIPT | LOADING | STALE, NO_KEYS, client::client_id, "connection", "5.0.0", "Returns the unique client ID of the connection."),
    row("client|setname", 3, NOSCRIPT | LOADING | STALE, NO_KEYS, client::client_setname, "connection", "2.6.9", "Sets the connection name."),
    row("client|getname", 2, NOSCRIPT | LOADING | STALE, NO_KEYS, client::client_getname, "connection", "2.6.9", "Returns the name of the connection."),
    row("client|setinfo", 4, NOSCRIPT | LOADING | STALE, NO_KEYS, client::client_setinfo, "connection", "7.2.0", "Sets information specific to the client or connection."),
    row("client|list", -2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, client::client_list, "connection", "2.4.0", "Lists open connections."),
    row("client|info", 2, NOSCRIPT | LOADING | STALE, NO_KEYS, client::client_info, "connection", "6.2.0", "Returns information about the connection."),
    row("client|pause", -3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, client::client_pause, "connection", "3.0.0", "Suspends commands processing."),
    row("client|unpause", 2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, client::client_unpause, "connection", "6.2.0", "Resumes processing commands from paused clients."),
    row("client|reply", 3, NOSCRIPT | LOADING | STALE, NO_KEYS, client::client_reply, "connection", "3.2.0", "Instructs the server whether to reply to commands."),
    row("client|no-evict", 3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, client::client_no_evict, "connection", "7.0.0", "Sets the client eviction mode of the connection."),
    row("client|tracking", -3, NOSCRIPT | LOADING | STALE, NO_KEYS, client::client_tracking, "connection", "6.0.0", "Controls server-assisted client-side caching for the connection."),
    row("client|caching", 3, NOSCRIPT | LOADING | STALE, NO_KEYS, client::client_caching, "connection", "6.0.0", "Instructs the server whether to track the keys in the next request."),
    row("client|getredir", 2, NOSCRIPT | LOADING | STALE, NO_KEYS, client::client_getredir, "connection", "6.0.0", "Returns the client ID to which the connection's tracking notifications are redirected."),
    row("client|trackinginfo", 2, NOSCRIPT | LOADING | STALE, NO_KEYS, client::client_trackinginfo, "connection", "6.2.0", "Returns information about server-assisted client-side caching for the connection."),
    row("client|kill", -3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, client::client_kill, "connection", "2.4.0", "Terminates open connections."),
    row("client|help", 2, LOADING | STALE, NO_KEYS, client::client_help, "connection", "5.0.0", "Returns helpful text about the different subcommands."),
];

#[rustfmt::skip]
pub(super) static COMMAND_SUBCOMMANDS: &[Command] = &[
    row("command|count", 2, LOADING | STALE, NO_KEYS, command::command_count, "server", "2.8.13", "Returns a count of commands."),
    row("command|list", -2, LOADING | STALE, NO_KEYS, command::command_list, "server", "7.0.0", "Returns a list of command names."),
    row("command|info", -2, LOADING | STALE, NO_KEYS, command::command_info_cmd, "server", "2.8.13", "Returns information about one, multiple or all commands."),
    row("command|docs", -2, LOADING | STALE, NO_KEYS, command::command_docs, "server", "7.0.0", "Returns documentary information about one, multiple or all commands."),
    row("command|getkeys", -4, LOADING | STALE, NO_KEYS, command::command_getkeys, "server", "2.8.13", "Extracts the key names from an arbitrary command."),
    row("command|help", 2, LOADING | STALE, NO_KEYS, command::command_help, "server", "5.0.0", "Returns helpful text about the different subcommands."),
];

#[rustfmt::skip]
pub(super) static SCRIPT_SUBCOMMANDS: &[Command] = &[
    row("script|load", 3, NOSCRIPT | STALE, NO_KEYS, scripting::script_load, "scripting", "2.6.0", "Loads a server-side Lua script to the script cache."),
    row("script|exists", -3, NOSCRIPT, NO_KEYS, scripting::script_exists, "scripting", "2.6.0", "Determines whether server-side Lua scripts exist in the script cache."),
    row("script|flush", -2, NOSCRIPT, NO_KEYS, scripting::script_flush, "scripting", "2.6.0", "Removes all server-side Lua scripts from the script cache."),
    row("script|kill", 2, NOSCRIPT | ALLOW_BUSY, NO_KEYS, scripting::script_kill, "scripting", "2.6.0", "Terminates a server-side Lua script during execution."),
    row("script|help", 2, LOADING | STALE, NO_KEYS, scripting::script_help, "scripting", "5.0.0", "Returns helpful text about the different subcommands."),
];

#[rustfmt::skip]
pub(super) static SLOWLOG_SUBCOMMANDS: &[Command] = &[
    row("slowlog|get", -2, ADMIN | LOADING | STALE, NO_KEYS, server::slowlog_get, "server", "2.2.12", "Returns the slow log's entries."),
    row("slowlog|len", 2, ADMIN | LOADING | STALE, NO_KEYS, server::slowlog_len, "server", "2.2.12", "Returns the number of entries in the slow log."),
    row("slowlog|reset", 2, ADMIN | LOADING | STALE, NO_KEYS, server::slowlog_reset, "server", "2.2.12", "Clears all entries from the slow log."),
    row("slowlog|help", 2, LOADING | STALE, NO_KEYS, server::slowlog_help, "server", "6.2.0", "Show helpful text about the different subcommands"),
];

/// FUNCTION: tally has no functions (FUNCTION LOAD is not supported), so
/// FLUSH is all there is, and it has nothing to delete. Redis's test harness
/// sends it before every unit.
#[rustfmt::skip]
pub(super) static FUNCTION_SUBCOMMANDS: &[Command] = &[
    row("function|flush", -2, NOSCRIPT | WRITE, NO_KEYS, scripting::function_flush, "scripting", "7.0.0", "Deletes all libraries and functions."),
];

#[rustfmt::skip]
pub(super) static OBJECT_SUBCOMMANDS: &[Command] = &[
    row("object|encoding", 3, READONLY, KeySpec { first: 2, last: 2, step: 1 }, keys::object_encoding, "generic", "2.2.3", "Returns the internal encoding of a Redis object."),
    row("object|freq", 3, READONLY, KeySpec { first: 2, last: 2, step: 1 }, keys::object_freq, "generic", "4.0.0", "Returns the logarithmic access frequency counter of a Redis object."),
    row("object|help", 2, LOADING | STALE, NO_KEYS, keys::object_help, "generic", "6.2.0", "Returns helpful text about the different subcommands."),
    row("object|refcount", 3, READONLY, KeySpec { first: 2, last: 2, step: 1 }, keys::object_refcount, "generic", "2.2.3", "Returns the reference count of a value of a key."),
];

pub(super) static PUBSUB_SUBCOMMANDS: &[Command] = &[
    row(
        "pubsub|channels",
        -2,
        PUBSUB | LOADING | STALE,
        NO_KEYS,
        pubsub::pubsub_channels,
        "pubsub",
        "2.8.0",
        "Returns the active channels.",
    ),
    row(
        "pubsub|numsub",
        -2,
        PUBSUB | LOADING | STALE,
        NO_KEYS,
        pubsub::pubsub_numsub,
        "pubsub",
        "2.8.0",
        "Returns a count of subscribers to channels.",
    ),
    row(
        "pubsub|numpat",
        2,
        PUBSUB | LOADING | STALE,
        NO_KEYS,
        pubsub::pubsub_numpat,
        "pubsub",
        "2.8.0",
        "Returns a count of unique pattern subscriptions.",
    ),
    row(
        "pubsub|shardchannels",
        -2,
        PUBSUB | LOADING | STALE,
        NO_KEYS,
        pubsub::pubsub_shardchannels,
        "pubsub",
        "7.0.0",
        "Returns the active shard channels.",
    ),
    row(
        "pubsub|shardnumsub",
        -2,
        PUBSUB | LOADING | STALE,
        NO_KEYS,
        pubsub::pubsub_shardnumsub,
        "pubsub",
        "7.0.0",
        "Returns the count of subscribers of shard channels.",
    ),
    row(
        "pubsub|help",
        2,
        LOADING | STALE,
        NO_KEYS,
        pubsub::pubsub_help,
        "pubsub",
        "6.2.0",
        "Returns helpful text about the different subcommands.",
    ),
];

#[rustfmt::skip]
pub(super) static LATENCY_SUBCOMMANDS: &[Command] = &[
    row("latency|latest", 2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, latency::latency_latest, "server", "2.8.13", "Returns the latest latency samples for all events."),
    row("latency|history", 3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, latency::latency_history, "server", "2.8.13", "Returns timestamp-latency samples for an event."),
    row("latency|reset", -2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, latency::latency_reset, "server", "2.8.13", "Resets the latency data for one or more events."),
    row("latency|doctor", 2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, latency::latency_doctor, "server", "2.8.13", "Returns a human-readable latency analysis report."),
    row("latency|graph", 3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, latency::latency_graph, "server", "2.8.13", "Returns a latency graph for an event."),
    row("latency|histogram", -2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, latency::latency_histogram, "server", "7.0.0", "Returns the cumulative distribution of latencies of a subset or all commands."),
    row("latency|help", 2, LOADING | STALE, NO_KEYS, latency::latency_help, "server", "2.8.13", "Returns helpful text about the different subcommands."),
];

#[rustfmt::skip]
pub(super) static MEMORY_SUBCOMMANDS: &[Command] = &[
    row("memory|usage", -3, READONLY, KeySpec { first: 2, last: 2, step: 1 }, memory::memory_usage, "server", "4.0.0", "Estimates the memory usage of a key."),
    row("memory|stats", 2, 0, NO_KEYS, memory::memory_stats, "server", "4.0.0", "Returns details about memory usage."),
    row("memory|doctor", 2, 0, NO_KEYS, memory::memory_doctor, "server", "4.0.0", "Outputs a memory problems report."),
    row("memory|malloc-stats", 2, 0, NO_KEYS, memory::memory_malloc_stats, "server", "4.0.0", "Returns the allocator's internal statistics."),
    row("memory|purge", 2, 0, NO_KEYS, memory::memory_purge, "server", "4.0.0", "Asks the allocator to release memory."),
    row("memory|help", 2, LOADING | STALE, NO_KEYS, memory::memory_help, "server", "4.0.0", "Returns helpful text about the different subcommands."),
];
