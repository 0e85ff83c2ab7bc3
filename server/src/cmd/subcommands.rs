//! The subcommand rows of the container commands (CONFIG, CLIENT, COMMAND,
//! SCRIPT, SLOWLOG, LATENCY, MEMORY, FUNCTION, OBJECT, PUBSUB): part of THE command
//! table (`table.rs`), kept apart so each file stays one screenful of idea.

use super::table::flags::*;
use super::table::{row, Command, KeySpec, NO_KEYS};
use super::{client, command, config, keys, latency, memory, pubsub, scripting, server};

#[rustfmt::skip]
pub(super) static CONFIG_SUBCOMMANDS: &[Command] = &[
    row("config|get", -3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, config::config_get, "server", "2.0.0", "Returns the effective values of configuration parameters."),
    row("config|set", -4, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, config::config_set, "server", "2.0.0", "Sets configuration parameters in-flight."),
    row("config|resetstat", 2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, config::config_resetstat, "server", "2.0.0", "Resets the server's statistics."),
    row("config|help", 2, LOADING | STALE, NO_KEYS, config::config_help, "server", "5.0.0", "Returns helpful text about the different subcommands."),
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
    row("script|exists", -3, NOSCRIPT | STALE, NO_KEYS, scripting::script_exists, "scripting", "2.6.0", "Determines whether server-side Lua scripts exist in the script cache."),
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
    row("object|help", 2, LOADING | STALE, NO_KEYS, keys::object_help, "generic", "6.2.0", "Returns helpful text about the different subcommands."),
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
