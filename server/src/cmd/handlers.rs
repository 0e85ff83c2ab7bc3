//! Which function serves each command: the binding of the catalog's rows
//! (`crate::catalog`, which knows no handler) to the code in this
//! directory. One line per command, in the catalog's order: adding a
//! command means a line here, its handler in the file of its family, and
//! running tools/gen_command_catalog.py, which reads the names from here.

use std::sync::OnceLock;

use super::{
    acl, bitfield, bitmap, blocking, client, cluster, command, config, connection as conn,
    failover, functions, hash, increx, info, keys, latency, lcs, list, memory, migrate, mpop,
    multi, persistence, pubsub, replication, scripting, server, set, sort, string, throttle, zset,
    zset_algebra, Ctx,
};
use crate::catalog::registry;
use crate::resp::Reply;

/// A command handler.
pub type Handler = fn(&mut Ctx<'_>, &[&[u8]]) -> Reply;

/// Every command's handler by full name; a container's own handler
/// answers a call without a subcommand.
#[rustfmt::skip]
static BINDINGS: &[(&str, Handler)] = &[
    ("get", string::get),
    ("set", string::set),
    ("setnx", string::setnx),
    ("setex", string::setex),
    ("psetex", string::psetex),
    ("mget", string::mget),
    ("mset", string::mset),
    ("msetnx", string::msetnx),
    ("getset", string::getset),
    ("getdel", string::getdel),
    ("getex", string::getex),
    ("incr", string::incr),
    ("incrby", string::incrby),
    ("incrbyfloat", string::incrbyfloat),
    ("increx", increx::increx),
    ("decr", string::decr),
    ("decrby", string::decrby),
    ("cl.throttle", throttle::cl_throttle),
    ("append", string::append),
    ("strlen", string::strlen),
    ("getrange", string::getrange),
    ("substr", string::getrange),
    ("setrange", string::setrange),
    ("lcs", lcs::lcs),
    ("setbit", bitmap::setbit),
    ("getbit", bitmap::getbit),
    ("bitcount", bitmap::bitcount),
    ("bitpos", bitmap::bitpos),
    ("bitop", bitmap::bitop),
    ("bitfield", bitfield::bitfield),
    ("bitfield_ro", bitfield::bitfield_ro),
    ("del", keys::del),
    ("unlink", keys::del),
    ("exists", keys::exists),
    ("touch", keys::touch),
    ("expire", keys::expire),
    ("pexpire", keys::pexpire),
    ("expireat", keys::expireat),
    ("pexpireat", keys::pexpireat),
    ("ttl", keys::ttl),
    ("pttl", keys::pttl),
    ("expiretime", keys::expiretime),
    ("pexpiretime", keys::pexpiretime),
    ("persist", keys::persist),
    ("type", keys::type_of),
    ("sort", sort::sort),
    ("sort_ro", sort::sort_ro),
    ("rename", keys::rename),
    ("renamenx", keys::renamenx),
    ("dump", persistence::dump),
    ("restore", persistence::restore),
    ("migrate", migrate::migrate),
    ("restore-asking", migrate::restore_asking),
    ("copy", keys::copy),
    ("move", keys::move_key),
    ("keys", keys::keys),
    ("scan", keys::scan),
    ("randomkey", keys::randomkey),
    ("dbsize", keys::dbsize),
    ("flushdb", keys::flushdb),
    ("flushall", keys::flushall),
    ("select", keys::select),
    ("swapdb", keys::swapdb),
    ("object", container_without_subcommand),
    ("hset", hash::hset),
    ("hsetnx", hash::hsetnx),
    ("hget", hash::hget),
    ("hmget", hash::hmget),
    ("hmset", hash::hmset),
    ("hgetall", hash::hgetall),
    ("hdel", hash::hdel),
    ("hexists", hash::hexists),
    ("hlen", hash::hlen),
    ("hkeys", hash::hkeys),
    ("hvals", hash::hvals),
    ("hincrby", hash::hincrby),
    ("hincrbyfloat", hash::hincrbyfloat),
    ("hstrlen", hash::hstrlen),
    ("hrandfield", hash::hrandfield),
    ("hscan", hash::hscan),
    ("lpush", list::lpush),
    ("rpush", list::rpush),
    ("lpushx", list::lpushx),
    ("rpushx", list::rpushx),
    ("lpop", list::lpop),
    ("rpop", list::rpop),
    ("llen", list::llen),
    ("lindex", list::lindex),
    ("lrange", list::lrange),
    ("ltrim", list::ltrim),
    ("lset", list::lset),
    ("lrem", list::lrem),
    ("linsert", list::linsert),
    ("lpos", list::lpos),
    ("lmove", list::lmove),
    ("rpoplpush", list::rpoplpush),
    ("lmpop", mpop::lmpop),
    ("blpop", blocking::blpop),
    ("brpop", blocking::brpop),
    ("blmove", blocking::blmove),
    ("brpoplpush", blocking::brpoplpush),
    ("blmpop", blocking::blmpop),
    ("bzpopmin", blocking::bzpopmin),
    ("bzpopmax", blocking::bzpopmax),
    ("bzmpop", blocking::bzmpop),
    ("sadd", set::sadd),
    ("srem", set::srem),
    ("smembers", set::smembers),
    ("sismember", set::sismember),
    ("smismember", set::smismember),
    ("scard", set::scard),
    ("spop", set::spop),
    ("srandmember", set::srandmember),
    ("smove", set::smove),
    ("sinter", set::sinter),
    ("sunion", set::sunion),
    ("sdiff", set::sdiff),
    ("sinterstore", set::sinterstore),
    ("sunionstore", set::sunionstore),
    ("sdiffstore", set::sdiffstore),
    ("sintercard", set::sintercard),
    ("sscan", set::sscan),
    ("zadd", zset::zadd),
    ("zrem", zset::zrem),
    ("zcard", zset::zcard),
    ("zscore", zset::zscore),
    ("zmscore", zset::zmscore),
    ("zincrby", zset::zincrby),
    ("zcount", zset::zcount),
    ("zlexcount", zset::zlexcount),
    ("zrange", zset::zrange),
    ("zrangestore", zset::zrangestore),
    ("zrangebyscore", zset::zrangebyscore),
    ("zrevrange", zset::zrevrange),
    ("zrevrangebyscore", zset::zrevrangebyscore),
    ("zrangebylex", zset::zrangebylex),
    ("zrevrangebylex", zset::zrevrangebylex),
    ("zrank", zset::zrank),
    ("zrevrank", zset::zrevrank),
    ("zremrangebyscore", zset::zremrangebyscore),
    ("zremrangebyrank", zset::zremrangebyrank),
    ("zremrangebylex", zset::zremrangebylex),
    ("zpopmin", zset::zpopmin),
    ("zpopmax", zset::zpopmax),
    ("zrandmember", zset::zrandmember),
    ("zscan", zset::zscan),
    ("zunion", zset_algebra::zunion),
    ("zinter", zset_algebra::zinter),
    ("zdiff", zset_algebra::zdiff),
    ("zunionstore", zset_algebra::zunionstore),
    ("zinterstore", zset_algebra::zinterstore),
    ("zdiffstore", zset_algebra::zdiffstore),
    ("zintercard", zset_algebra::zintercard),
    ("zmpop", mpop::zmpop),
    ("eval", scripting::eval),
    ("evalsha", scripting::evalsha),
    ("fcall", functions::fcall),
    ("fcall_ro", functions::fcall_ro),
    ("eval_ro", scripting::eval_ro),
    ("evalsha_ro", scripting::evalsha_ro),
    ("script", container_without_subcommand),
    ("function", container_without_subcommand),
    ("subscribe", pubsub::subscribe),
    ("unsubscribe", pubsub::unsubscribe),
    ("psubscribe", pubsub::psubscribe),
    ("punsubscribe", pubsub::punsubscribe),
    ("ssubscribe", pubsub::ssubscribe),
    ("sunsubscribe", pubsub::sunsubscribe),
    ("spublish", pubsub::spublish),
    ("publish", pubsub::publish),
    ("pubsub", container_without_subcommand),
    ("multi", multi::multi),
    ("exec", multi::exec),
    ("watch", multi::watch),
    ("unwatch", multi::unwatch),
    ("discard", multi::discard),
    ("ping", conn::ping),
    ("echo", conn::echo),
    ("quit", conn::quit),
    ("reset", conn::reset),
    ("hello", conn::hello),
    ("auth", conn::auth),
    ("client", container_without_subcommand),
    ("time", server::time),
    ("info", info::info),
    ("cluster", cluster::cluster_container),
    ("readonly", cluster::readonly),
    ("readwrite", cluster::readwrite),
    ("asking", cluster::asking),
    ("acl", container_without_subcommand),
    ("config", container_without_subcommand),
    ("command", command::command),
    ("shutdown", server::shutdown),
    ("wait", replication::wait),
    ("lastsave", persistence::lastsave),
    ("save", persistence::save),
    ("replconf", replication::replconf),
    ("sync", replication::sync),
    ("psync", replication::psync),
    ("role", replication::role),
    ("replicaof", replication::replicaof),
    ("slaveof", replication::replicaof),
    ("failover", failover::failover),
    ("bgrewriteaof", persistence::bgrewriteaof),
    ("bgsave", persistence::bgsave),
    ("slowlog", container_without_subcommand),
    ("memory", container_without_subcommand),
    ("latency", container_without_subcommand),
    ("monitor", server::monitor),
    ("debug", server::debug),
    // OBJECT subcommands
    ("object|encoding", keys::object_encoding),
    ("object|freq", keys::object_freq),
    ("object|help", keys::object_help),
    ("object|refcount", keys::object_refcount),
    // SCRIPT subcommands
    ("script|load", scripting::script_load),
    ("script|exists", scripting::script_exists),
    ("script|flush", scripting::script_flush),
    ("script|kill", scripting::script_kill),
    ("script|help", scripting::script_help),
    // FUNCTION subcommands
    ("function|load", functions::function_load),
    ("function|delete", functions::function_delete),
    ("function|flush", functions::function_flush),
    ("function|list", functions::function_list),
    ("function|stats", functions::function_stats),
    ("function|kill", functions::function_kill),
    ("function|dump", functions::function_dump),
    ("function|restore", functions::function_restore),
    ("function|help", functions::function_help),
    // PUBSUB subcommands
    ("pubsub|channels", pubsub::pubsub_channels),
    ("pubsub|numsub", pubsub::pubsub_numsub),
    ("pubsub|numpat", pubsub::pubsub_numpat),
    ("pubsub|shardchannels", pubsub::pubsub_shardchannels),
    ("pubsub|shardnumsub", pubsub::pubsub_shardnumsub),
    ("pubsub|help", pubsub::pubsub_help),
    // CLIENT subcommands
    ("client|id", client::client_id),
    ("client|setname", client::client_setname),
    ("client|getname", client::client_getname),
    ("client|setinfo", client::client_setinfo),
    ("client|list", client::client_list),
    ("client|info", client::client_info),
    ("client|pause", client::client_pause),
    ("client|unpause", client::client_unpause),
    ("client|reply", client::client_reply),
    ("client|no-evict", client::client_no_evict),
    ("client|tracking", client::client_tracking),
    ("client|caching", client::client_caching),
    ("client|getredir", client::client_getredir),
    ("client|trackinginfo", client::client_trackinginfo),
    ("client|kill", client::client_kill),
    ("client|unblock", blocking::client_unblock),
    ("client|help", client::client_help),
    // CLUSTER subcommands
    ("cluster|addslots", cluster::cluster_addslots),
    ("cluster|addslotsrange", cluster::cluster_addslotsrange),
    ("cluster|bumpepoch", cluster::cluster_bumpepoch),
    ("cluster|count-failure-reports", cluster::cluster_count_failure_reports),
    ("cluster|countkeysinslot", cluster::cluster_countkeysinslot),
    ("cluster|delslots", cluster::cluster_delslots),
    ("cluster|delslotsrange", cluster::cluster_delslotsrange),
    ("cluster|failover", cluster::cluster_failover),
    ("cluster|flushslots", cluster::cluster_flushslots),
    ("cluster|forget", cluster::cluster_forget),
    ("cluster|getkeysinslot", cluster::cluster_getkeysinslot),
    ("cluster|help", cluster::cluster_help),
    ("cluster|info", cluster::cluster_info),
    ("cluster|keyslot", cluster::cluster_keyslot),
    ("cluster|links", cluster::cluster_links),
    ("cluster|meet", cluster::cluster_meet),
    ("cluster|myid", cluster::cluster_myid),
    ("cluster|nodes", cluster::cluster_nodes),
    ("cluster|replicas", cluster::cluster_replicas),
    ("cluster|replicate", cluster::cluster_replicate),
    ("cluster|reset", cluster::cluster_reset),
    ("cluster|saveconfig", cluster::cluster_saveconfig),
    ("cluster|set-config-epoch", cluster::cluster_set_config_epoch),
    ("cluster|setslot", cluster::cluster_setslot),
    ("cluster|shards", cluster::cluster_shards),
    ("cluster|slaves", cluster::cluster_replicas),
    ("cluster|slots", cluster::cluster_slots),
    // ACL subcommands
    ("acl|cat", acl::acl_cat),
    ("acl|deluser", acl::acl_deluser),
    ("acl|dryrun", acl::acl_dryrun),
    ("acl|genpass", acl::acl_genpass),
    ("acl|getuser", acl::acl_getuser),
    ("acl|help", acl::acl_help),
    ("acl|list", acl::acl_list),
    ("acl|load", acl::acl_load),
    ("acl|log", acl::acl_log),
    ("acl|save", acl::acl_save),
    ("acl|setuser", acl::acl_setuser),
    ("acl|users", acl::acl_users),
    ("acl|whoami", acl::acl_whoami),
    // CONFIG subcommands
    ("config|get", config::config_get),
    ("config|set", config::config_set),
    ("config|resetstat", config::config_resetstat),
    ("config|rewrite", config::config_rewrite),
    ("config|help", config::config_help),
    // COMMAND subcommands
    ("command|count", command::command_count),
    ("command|list", command::command_list),
    ("command|info", command::command_info_cmd),
    ("command|docs", command::command_docs),
    ("command|getkeys", command::command_getkeys),
    ("command|help", command::command_help),
    // SLOWLOG subcommands
    ("slowlog|get", server::slowlog_get),
    ("slowlog|len", server::slowlog_len),
    ("slowlog|reset", server::slowlog_reset),
    ("slowlog|help", server::slowlog_help),
    // MEMORY subcommands
    ("memory|usage", memory::memory_usage),
    ("memory|stats", memory::memory_stats),
    ("memory|doctor", memory::memory_doctor),
    ("memory|malloc-stats", memory::memory_malloc_stats),
    ("memory|purge", memory::memory_purge),
    ("memory|help", memory::memory_help),
    // LATENCY subcommands
    ("latency|latest", latency::latency_latest),
    ("latency|history", latency::latency_history),
    ("latency|reset", latency::latency_reset),
    ("latency|doctor", latency::latency_doctor),
    ("latency|graph", latency::latency_graph),
    ("latency|histogram", latency::latency_histogram),
    ("latency|help", latency::latency_help),
];

/// A container command called without a subcommand (or with one it does
/// not have, which dispatch sends here too): Redis's arity error.
pub(super) fn container_without_subcommand(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    Reply::error(super::error::wrong_arity(
        &String::from_utf8_lossy(argv[0]).to_ascii_lowercase(),
    ))
}

/// A catalog row without a binding. Never reached: the test below binds
/// every row; the dispatcher still needs something to call.
fn unbound(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    Reply::error_bytes(super::error::unknown_command(argv))
}

/// The handler of the command at a catalog index
/// ([`crate::catalog::Registry::index_of`]).
#[inline]
pub fn handler(index: usize) -> Handler {
    static BY_INDEX: OnceLock<Vec<Handler>> = OnceLock::new();
    let by_index = BY_INDEX.get_or_init(|| {
        let registry = registry();
        let mut by_index: Vec<Handler> = vec![unbound; registry.len()];
        for &(name, handler) in BINDINGS {
            if let Some(index) = registry.index_of(name.as_bytes()) {
                by_index[index] = handler;
            }
        }
        by_index
    });
    by_index.get(index).copied().unwrap_or(unbound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalog_row_has_one_binding_and_every_binding_a_row() {
        let registry = registry();
        let names: Vec<&str> = BINDINGS.iter().map(|(name, _)| *name).collect();
        let catalog: Vec<&str> = registry.all().map(|command| command.name).collect();
        // Same names, same order: the generator takes its order from here.
        assert_eq!(names, catalog, "run tools/gen_command_catalog.py");
        for index in 0..registry.len() {
            assert!(!std::ptr::fn_addr_eq(handler(index), unbound as Handler));
        }
    }
}
