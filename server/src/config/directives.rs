//! Every directive tally reads, as one table ([`DIRECTIVES`]): each row is
//! a parameter's name and aliases, how its value is read (with Redis's
//! range and error text), how CONFIG GET shows it, whether CONFIG SET may
//! change it while the server runs, and its `--help` line. Config files,
//! the command line, CONFIG GET and CONFIG SET all read this table, as
//! Redis's `standardConfig` array serves its config file, CONFIG and
//! REWRITE; a new directive is one row.

use std::path::Path;

use super::accepted;
use super::settings::{
    ClientAuth, EndpointType, Fsync, OutputLimit, ProtectedAction, ShutdownFlags,
};
use super::values::{parse_memory, parse_yes_no, redis_number, Range};
use super::{Config, ConfigError, MAXMEMORY_POLICY};

/// When a change to a directive takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// At once: CONFIG SET may change it.
    Live,
    /// Only at start (Redis's IMMUTABLE_CONFIG): CONFIG SET refuses it.
    AtStart,
    /// tally's own, and only at start: CONFIG SET accepts the value it
    /// has (nothing to do) and refuses any other, so that a tool that
    /// saves CONFIG GET * and sets it all back works (Redis has no such
    /// directive whose behaviour this could differ from).
    AtStartOwn,
}

/// Reads a directive's values into the configuration; the error names
/// what is wrong with them (callers add where they came from).
type Setter = fn(&mut Config, &[String]) -> Result<(), String>;
/// The value CONFIG GET shows.
type Getter = fn(&Config) -> String;

/// One directive.
pub struct Directive {
    /// Its name, lower-case, as in redis.conf and CONFIG.
    pub name: &'static str,
    /// Older names it answers to; CONFIG GET lists each beside it, as
    /// Redis 7.0 does.
    pub aliases: &'static [&'static str],
    /// When a change takes effect.
    pub change: Change,
    set: Setter,
    /// `None` for a directive that is not a CONFIG parameter (a file's
    /// `user` lines).
    get: Option<Getter>,
    /// What it does, for `--help` (the binary adds the default).
    pub help: &'static str,
    /// Redis's PROTECTED_CONFIG: CONFIG SET may change it only where
    /// `enable-protected-configs` allows.
    pub protected: bool,
    /// Redis's HIDDEN_CONFIG (its test knobs): CONFIG GET shows it only
    /// when asked for by its exact name, never for a pattern.
    pub hidden: bool,
}

impl Directive {
    const fn new(name: &'static str, change: Change, set: Setter, get: Getter) -> Directive {
        Directive {
            name,
            aliases: &[],
            change,
            set,
            get: Some(get),
            help: "",
            protected: false,
            hidden: false,
        }
    }

    /// The same directive, settable by CONFIG SET only where
    /// `enable-protected-configs` allows.
    const fn protected(self) -> Directive {
        Directive {
            protected: true,
            ..self
        }
    }

    const fn hidden(self) -> Directive {
        Directive {
            hidden: true,
            ..self
        }
    }

    /// The same directive, answering to `aliases` too.
    const fn aliases(self, aliases: &'static [&'static str]) -> Directive {
        Directive { aliases, ..self }
    }

    /// The same directive, with its `--help` line.
    const fn help(self, help: &'static str) -> Directive {
        Directive { help, ..self }
    }

    /// Applies `values` to `config`.
    pub fn set(&self, config: &mut Config, values: &[String]) -> Result<(), String> {
        (self.set)(config, values)
    }

    /// What CONFIG GET shows; `None` when CONFIG does not know the directive.
    pub fn get(&self, config: &Config) -> Option<String> {
        self.get.map(|get| get(config))
    }

    /// Whether CONFIG GET and SET know it.
    pub fn is_parameter(&self) -> bool {
        self.get.is_some()
    }

    /// Whether it takes several values (`bind`, `save`, ...); the others
    /// take exactly one.
    pub fn takes_a_list(&self) -> bool {
        LISTS.contains(&self.name)
    }

    /// Its name, then its aliases.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.name).chain(self.aliases.iter().copied())
    }
}

/// The directives whose values are a list of words.
const LISTS: &[&str] = &[
    "bind",
    "save",
    "client-output-buffer-limit",
    "latency-tracking-info-percentiles",
    "tls-protocols",
    "shutdown-on-sigterm",
    "shutdown-on-sigint",
    "oom-score-adj-values",
    "user",
    // `--replicaof <host> <port>`, as redis-server takes it.
    "replicaof",
];

/// The directive called `name` (lower-case), by its name or an alias.
pub fn lookup(name: &str) -> Option<&'static Directive> {
    DIRECTIVES
        .iter()
        .find(|directive| directive.names().any(|n| n == name))
}

/// The one value of a single-valued directive.
fn one(values: &[String]) -> Result<&str, String> {
    match values {
        [value] => Ok(value.as_str()),
        _ => Err("wrong number of arguments".to_string()),
    }
}

/// A plain count (tally's own directives).
fn count(value: &str) -> Result<u64, String> {
    value
        .parse::<u64>()
        .map_err(|_| format!("argument must be a number, got '{value}'"))
}

/// A memory amount (tally's own directives and output limits).
fn memory(value: &str) -> Result<u64, String> {
    parse_memory(value).ok_or_else(|| format!("argument must be a memory value, got '{value}'"))
}

/// yes or no, with Redis's error text.
fn yes_no(values: &[String]) -> Result<bool, String> {
    parse_yes_no(one(values)?).ok_or_else(|| "argument must be 'yes' or 'no'".to_string())
}

fn shown(flag: bool) -> String {
    if flag { "yes" } else { "no" }.to_string()
}

/// A number in `range` as Redis's numeric parameters read it.
fn int(values: &[String], range: Range) -> Result<i128, String> {
    redis_number(one(values)?, false, range)
}

/// A memory value in `range` as Redis's memory parameters read it.
fn bytes(values: &[String], range: Range) -> Result<i128, String> {
    redis_number(one(values)?, true, range)
}

/// A name inside `dir` (the append-only file's and its folder's): not
/// empty and not a path, with Redis's error texts.
fn bare_name(directive: &str, what: &str, values: &[String]) -> Result<String, String> {
    let name = one(values)?;
    if name.is_empty() {
        return Err(format!("{directive} can't be empty"));
    }
    if name.contains('/') {
        return Err(format!("{directive} can't be a path, just {what}"));
    }
    Ok(name.to_string())
}

/// File permissions in octal, 0 to 777, with Redis's errors (an
/// OCTAL_CONFIG).
fn octal_permissions(value: &str) -> Result<u32, String> {
    let digits = value.strip_prefix('-').unwrap_or(value);
    let parsed = i64::from_str_radix(digits, 8)
        .map_err(|_| "argument couldn't be parsed as an octal number".to_string())?;
    let parsed = if value.starts_with('-') {
        -parsed
    } else {
        parsed
    };
    u32::try_from(parsed)
        .ok()
        .filter(|perm| *perm <= 0o777)
        .ok_or_else(|| "argument must be between 0 and 777 inclusive".to_string())
}

const INT_MAX: i64 = i32::MAX as i64;
const PORT: Range = Range::Signed(0, 65535);
const LONG: Range = Range::Signed(0, i64::MAX);
const ULONG: Range = Range::Unsigned(0, i64::MAX as u64);
const INT: Range = Range::Signed(0, INT_MAX);

/// A yes/no directive on a `bool` field.
macro_rules! flag {
    ($name:literal, $change:ident, $($field:ident).+) => {
        Directive::new(
            $name,
            Change::$change,
            |c, v| {
                c.$($field).+ = yes_no(v)?;
                Ok(())
            },
            |c| shown(c.$($field).+),
        )
    };
}

/// A start-only directive on a `ProtectedAction` field: who may take a
/// protected action (no, yes, or local: loopback clients).
macro_rules! protected_action {
    ($name:literal, $field:ident) => {
        Directive::new(
            $name,
            Change::AtStart,
            |c, v| {
                c.$field = ProtectedAction::parse(one(v)?).ok_or_else(|| {
                    "argument(s) must be one of the following: no, yes, local".to_string()
                })?;
                Ok(())
            },
            |c| c.$field.name().to_string(),
        )
    };
}

/// A free-text directive on a `String` field.
macro_rules! text {
    ($name:literal, $change:ident, $($field:ident).+) => {
        Directive::new(
            $name,
            Change::$change,
            |c, v| {
                c.$($field).+ = one(v)?.to_string();
                Ok(())
            },
            |c| c.$($field).+.clone(),
        )
    };
}

/// A numeric directive read as Redis reads its own (`int` or `bytes`,
/// within a range) into a field of type `$ty`.
macro_rules! number {
    ($name:literal, $change:ident, $($field:ident).+, $read:ident($range:expr) as $ty:ty) => {
        Directive::new(
            $name,
            Change::$change,
            |c, v| {
                c.$($field).+ = $read(v, $range)? as $ty;
                Ok(())
            },
            |c| c.$($field).+.to_string(),
        )
    };
}

/// A Redis 7.0 parameter tally reads, checks and shows as Redis does but
/// does not act on (see [`super::accepted`]): its value is kept in
/// `Config::accepted` and CONFIG GET shows it, or Redis's default. `why` is
/// the reason, which `--help` and docs/compatibility.md give.
macro_rules! accepted {
    ($name:literal, $change:ident, $default:literal, $check:path $(, $arg:expr)?; $why:literal) => {
        Directive::new(
            $name,
            Change::$change,
            |c, v| {
                let value = $check(v $(, $arg)?)?;
                c.accepted.insert($name, value);
                Ok(())
            },
            |c| {
                c.accepted
                    .get($name)
                    .cloned()
                    .unwrap_or_else(|| $default.to_string())
            },
        )
        .help($why)
    };
}

/// Every directive, in the order CONFIG GET lists them.
pub static DIRECTIVES: &[Directive] = &[
    Directive::new(
        "bind",
        Change::Live,
        |c, v| {
            if v.is_empty() {
                return Err("wrong number of arguments".to_string());
            }
            c.bind = v.to_vec();
            Ok(())
        },
        |c| c.bind.join(" "),
    ).help("Addresses to listen on (CONFIG SET replaces the listening sockets; open connections stay)."),
    number!("port", Live, port, int(PORT) as u16).help("TCP port to listen on (0 picks a free port; with --tls-port, no plain port)."),
    number!("maxmemory", Live, maxmemory, bytes(Range::Unsigned(0, u64::MAX)) as u64).help("Memory limit for data, e.g. 100mb or 1gb (0 = none). Past it, writes get an OOM error; nothing is evicted."),
    Directive::new(
        "maxmemory-policy",
        Change::Live,
        |_, v| {
            let policy = one(v)?.to_ascii_lowercase();
            if policy != MAXMEMORY_POLICY {
                return Err(format!(
                    "maxmemory-policy '{policy}' is not supported: tally only runs noeviction, \
                     because evicting a rate-limit counter silently resets a client's window; \
                     writes past maxmemory get an OOM error instead and nothing is lost"
                ));
            }
            Ok(())
        },
        |_| MAXMEMORY_POLICY.to_string(),
    ).help("Eviction policy. Only `noeviction` is accepted: an evicted rate-limit counter would silently reset a client's window."),
    Directive::new(
        "requirepass",
        Change::Live,
        |c, v| {
            let pass = one(v)?;
            c.requirepass = (!pass.is_empty()).then(|| pass.to_string());
            Ok(())
        },
        |c| c.requirepass.clone().unwrap_or_default(),
    ).help("Password clients must AUTH with."),
    Directive::new(
        "databases",
        Change::AtStart,
        |c, v| {
            let n = count(one(v)?)?;
            if n == 0 || n > 1_000_000 {
                return Err("Invalid number of databases".to_string());
            }
            c.databases = n as usize;
            Ok(())
        },
        |c| c.databases.to_string(),
    ).help("Number of databases."),
    number!("maxclients", Live, maxclients, int(Range::Unsigned(1, u32::MAX as u64)) as usize).help("Maximum simultaneous clients."),
    number!("timeout", Live, timeout_secs, int(Range::Unsigned(0, INT_MAX as u64)) as u64).help("Close clients idle for this many seconds (0 = never)."),
    number!("proto-max-bulk-len", Live, proto_max_bulk_len, bytes(Range::Signed(1024 * 1024, i64::MAX)) as u64).help("Largest bulk string a client may send, e.g. 512mb."),
    number!("prefetch-batch-max-size", Live, prefetch_batch_max_size, int(Range::Signed(0, 128)) as usize).help("Keys of a pipeline's next commands whose memory is fetched together before they run, as Valkey 8 names it (0 or 1 = off)."),
    number!("client-query-buffer-limit", Live, client_query_buffer_limit, bytes(Range::Signed(1024 * 1024, i64::MAX)) as u64).help("Largest unprocessed input kept for one client, e.g. 1gb."),
    Directive::new(
        "loglevel",
        Change::Live,
        |c, v| {
            let level = one(v)?.to_ascii_lowercase();
            if !["debug", "verbose", "notice", "warning", "nothing"].contains(&level.as_str()) {
                return Err(format!("Invalid log level '{level}'"));
            }
            c.loglevel = level;
            Ok(())
        },
        |c| c.loglevel.clone(),
    ).help("debug, verbose, notice, warning or nothing."),
    text!("logfile", AtStart, logfile).help("The file the server logs to, appended to (empty: standard output)."),
    flag!("syslog-enabled", AtStart, syslog_enabled).help("Log lines also go to the system log."),
    text!("syslog-ident", AtStart, syslog_ident).help("The name log lines go to the system log under."),
    Directive::new(
        "syslog-facility",
        Change::AtStart,
        |c, v| {
            let names = crate::syslog::FACILITIES.map(|(name, _)| name);
            c.syslog_facility = accepted::one_of(v, &names)?;
            Ok(())
        },
        |c| c.syslog_facility.clone(),
    ).help("The system log's facility: user or local0 to local7."),
    Directive::new(
        "acl-pubsub-default",
        Change::Live,
        |c, v| {
            let value = accepted::one_of(v, &["allchannels", "resetchannels"])?;
            c.acl_pubsub_all_channels = value == "allchannels";
            Ok(())
        },
        |c| {
            if c.acl_pubsub_all_channels { "allchannels" } else { "resetchannels" }.to_string()
        },
    )
    .help("The channels new users and selectors start with: resetchannels (none, Redis 7's default) or allchannels."),
    text!("unixsocket", AtStart, unixsocket).help("The path of a Unix socket clients may connect to, beside the TCP ports."),
    Directive::new(
        "unixsocketperm",
        Change::AtStart,
        |c, v| {
            c.unixsocketperm = octal_permissions(one(v)?)?;
            Ok(())
        },
        |c| format!("{:o}", c.unixsocketperm),
    )
    .help("The Unix socket file's permissions, in octal (0: as created)."),
    Directive::new(
        "supervised",
        Change::AtStart,
        |c, v| {
            c.supervised = accepted::one_of(v, &["upstart", "systemd", "auto", "no"])?;
            Ok(())
        },
        |c| c.supervised.clone(),
    )
    .help("Tell a supervisor the server is ready: no, systemd (sd_notify READY=1), upstart (SIGSTOP) or auto."),
    text!("pidfile", AtStart, pidfile).help("A file the server writes its process id to while it runs, removed when it exits."),
    Directive::new(
        "notify-keyspace-events",
        Change::Live,
        |c, v| {
            c.notify_keyspace_events = crate::event_classes::parse(one(v)?).ok_or_else(|| {
                "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_string()
            })?;
            Ok(())
        },
        |c| crate::event_classes::format(c.notify_keyspace_events),
    ).help("Keyspace notification classes, e.g. KEA (empty: none)."),
    Directive::new(
        "hz",
        Change::Live,
        |c, v| {
            // Accepted in 0..INT_MAX and used within 1..500, as Redis does.
            c.hz = int(v, INT)?.clamp(1, 500) as u32;
            Ok(())
        },
        |c| c.hz.to_string(),
    ).help("Background tasks (active expiry, timeouts) per second, within 1..500."),
    // Redis 7.0: the entry counts are integers, the value lengths memory
    // values, all in 0..LONG_MAX.
    number!("set-max-intset-entries", Live, encodings.set_max_intset_entries, int(ULONG) as usize).help("Largest set of integers kept as an intset."),
    number!("hash-max-listpack-entries", Live, encodings.hash_max_listpack_entries, int(ULONG) as usize)
        .aliases(&["hash-max-ziplist-entries"]).help("Largest hash kept as a listpack, in fields."),
    number!("hash-max-listpack-value", Live, encodings.hash_max_listpack_value, bytes(ULONG) as usize)
        .aliases(&["hash-max-ziplist-value"]).help("Longest field or value of a hash kept as a listpack."),
    number!("zset-max-listpack-entries", Live, encodings.zset_max_listpack_entries, int(ULONG) as usize)
        .aliases(&["zset-max-ziplist-entries"]).help("Largest sorted set kept as a listpack, in members."),
    number!("zset-max-listpack-value", Live, encodings.zset_max_listpack_value, bytes(ULONG) as usize)
        .aliases(&["zset-max-ziplist-value"]).help("Longest member of a sorted set kept as a listpack."),
    number!("hll-sparse-max-bytes", Live, encodings.hll_sparse_max_bytes, bytes(ULONG) as usize).help("Longest sparse HyperLogLog, in bytes, before it turns dense."),
    number!("stream-node-max-bytes", Live, encodings.stream_node_max_bytes, bytes(Range::Unsigned(0, i64::MAX as u64)) as usize).help("Largest stream node, in bytes (0: no limit but the listpack's own)."),
    number!("stream-node-max-entries", Live, encodings.stream_node_max_entries, int(Range::Signed(0, i64::MAX)) as usize).help("Most entries in a stream node (0: no limit)."),
    number!("list-max-listpack-size", Live, list_max_listpack_size, int(Range::Signed(i32::MIN as i64, INT_MAX)) as i32)
        .aliases(&["list-max-ziplist-size"]).help("Size of a list's quicklist nodes (negative: in kilobytes, -1 = 4kb ... -5 = 64kb)."),
    number!("list-compress-depth", Live, list_compress_depth, int(INT) as i32).help("Quicklist nodes at each end of a list left uncompressed (shown; lists are not compressed)."),
    Directive::new(
        "shards",
        Change::AtStartOwn,
        |c, v| {
            let n = count(one(v)?)?;
            if n == 0 || n > 65536 {
                return Err("shards must be between 1 and 65536".to_string());
            }
            c.shards = n as usize;
            Ok(())
        },
        |c| c.shards.to_string(),
    ).help("Shards per database (rounded up to a power of two)."),
    Directive::new(
        "reported-redis-version",
        Change::AtStartOwn,
        |c, v| {
            let version = one(v)?;
            if !version.is_empty() && !crate::catalog::valid_version(version) {
                return Err(format!(
                    "argument must be a version like 8.0.0 (each part 0 to 255), got '{version}'"
                ));
            }
            c.reported_redis_version = version.to_string();
            Ok(())
        },
        |c| {
            if c.reported_redis_version.is_empty() {
                crate::catalog::REDIS_VERSION.to_string()
            } else {
                c.reported_redis_version.clone()
            }
        },
    ).help("The Redis version INFO, HELLO and Lua report (default 7.0.15, the one tally follows); clients gate features such as hash field expiry on it."),
    Directive::new(
        "io-threads",
        Change::AtStart,
        |c, v| {
            c.io_threads = count(one(v)?)? as usize;
            Ok(())
        },
        // 0 (one per core) shows as Redis's smallest value.
        |c| c.io_threads.max(1).to_string(),
    ).help("Worker threads (0 = one per core)."),
    number!("busy-reply-threshold", Live, busy_reply_threshold_ms, int(LONG) as u64)
        .aliases(&["lua-time-limit"]).help("Milliseconds a script may run before other clients get BUSY."),
    Directive::new(
        "lua-memory-limit",
        Change::Live,
        |c, v| {
            let n = memory(one(v)?)?;
            if n < 1024 * 1024 {
                return Err("lua-memory-limit must be at least 1mb".to_string());
            }
            c.lua_memory_limit = n;
            Ok(())
        },
        |c| c.lua_memory_limit.to_string(),
    ).help("Memory one worker's Lua VM may use; a script that needs more fails with an error."),
    number!("slowlog-max-len", Live, slowlog_max_len, int(ULONG) as u64).help("Entries SLOWLOG keeps."),
    number!("slowlog-log-slower-than", Live, slowlog_log_slower_than, int(Range::Signed(-1, i64::MAX)) as i64).help("Microseconds past which a command is logged in SLOWLOG (negative: off)."),
    number!("metrics-port", AtStartOwn, metrics_port, int(PORT) as u16).help("Serve Prometheus metrics on this port, on the first bind address (0 = off)."),
    number!("latency-monitor-threshold", Live, latency_monitor_threshold_ms, int(LONG) as u64).help("Milliseconds past which an event is kept by LATENCY (0 = off)."),
    flag!("latency-tracking", Live, latency_tracking).help("Keep per-command latency histograms for INFO latencystats (yes/no)."),
    number!("tracking-table-max-keys", Live, tracking_table_max_keys, int(ULONG) as u64).help("Keys CLIENT TRACKING remembers before it invalidates the oldest (0 = no limit)."),
    Directive::new(
        "latency-tracking-info-percentiles",
        Change::Live,
        |c, v| {
            // CONFIG SET passes the list as one string; a file as words.
            let mut percentiles = Vec::new();
            for word in v.iter().flat_map(|v| v.split_whitespace()) {
                let p = crate::float::string2d(word.as_bytes()).ok_or_else(|| {
                    "Invalid latency-tracking-info-percentiles parameters".to_string()
                })?;
                if !(0.0..=100.0).contains(&p) {
                    return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".to_string());
                }
                percentiles.push(p);
            }
            c.latency_tracking_info_percentiles = percentiles;
            Ok(())
        },
        |c| {
            c.latency_tracking_info_percentiles
                .iter()
                .map(|p| crate::float::trim_double(*p))
                .collect::<Vec<_>>()
                .join(" ")
        },
    ).help("Percentiles INFO latencystats shows, \"50 99 99.9\"."),
    Directive::new(
        "client-output-buffer-limit",
        Change::Live,
        |c, v| {
            // Groups of <class> <hard> <soft> <seconds>. Only subscribers
            // and replicas (monitors) have a limit here: normal clients
            // have none (Redis's default too). CONFIG SET passes the
            // groups as one string.
            let words: Vec<&str> = v.iter().flat_map(|v| v.split_whitespace()).collect();
            if words.is_empty() || words.len() % 4 != 0 {
                return Err("wrong number of arguments".to_string());
            }
            for group in words.chunks_exact(4) {
                let limit = OutputLimit {
                    hard: memory(group[1])?,
                    soft: memory(group[2])?,
                    soft_seconds: count(group[3])?,
                };
                match group[0].to_ascii_lowercase().as_str() {
                    "pubsub" => c.pubsub_output_limit = limit,
                    "normal" if limit.hard == 0 && limit.soft == 0 => {}
                    "normal" => {
                        return Err("tally has no output-buffer limit for normal clients: only \
                                    `normal 0 0 0` is accepted"
                            .to_string())
                    }
                    "replica" | "slave" => c.replica_output_limit = limit,
                    other => {
                        return Err(format!(
                            "Invalid client class specified in buffer limit configuration: '{other}'"
                        ))
                    }
                }
            }
            Ok(())
        },
        |c| {
            let (replica, pubsub) = (c.replica_output_limit, c.pubsub_output_limit);
            format!(
                "normal 0 0 0 slave {} {} {} pubsub {} {} {}",
                replica.hard,
                replica.soft,
                replica.soft_seconds,
                pubsub.hard,
                pubsub.soft,
                pubsub.soft_seconds
            )
        },
    ).help("Output limits, \"<class> <hard> <soft> <seconds> ...\" for pubsub and replica (monitors); normal clients have none."),
    number!("min-replicas-to-write", Live, min_replicas_to_write, int(INT) as u64)
        .aliases(&["min-slaves-to-write"])
        .help("Refuse writes (NOREPLICAS) unless this many replicas acknowledged within min-replicas-max-lag seconds (0 = no check)."),
    number!("min-replicas-max-lag", Live, min_replicas_max_lag, int(INT) as u64)
        .aliases(&["min-slaves-max-lag"])
        .help("Seconds since its last acknowledgement within which a replica counts for min-replicas-to-write (0 = no check)."),
    number!("repl-backlog-size", Live, repl_backlog_size, bytes(Range::Signed(1, i64::MAX)) as u64)
        .help("The replication stream's last bytes kept, so that a replica that lost its link continues from them (at least 16kb is kept)."),
    number!("repl-backlog-ttl", Live, repl_backlog_ttl, int(LONG) as u64)
        .help("Seconds without any replica before the backlog is freed (0 = never)."),
    Directive::new(
        "replicaof",
        Change::AtStart,
        |c, v| {
            // Empty, as CONFIG GET shows it: no master.
            if let [none] = v {
                if none.is_empty() {
                    c.replicaof = None;
                    return Ok(());
                }
            }
            let [host, port] = v else {
                return Err("wrong number of arguments".to_string());
            };
            let port = match crate::number::parse_i64(port.as_bytes()) {
                Some(port @ 0..=65535) => port as u16,
                _ => return Err("Invalid master port".to_string()),
            };
            c.replicaof = Some((host.clone(), port));
            Ok(())
        },
        |c| {
            c.replicaof
                .as_ref()
                .map(|(host, port)| format!("{host} {port}"))
                .unwrap_or_default()
        },
    )
    .aliases(&["slaveof"])
    .help("The master to replicate, \"<host> <port>\" (REPLICAOF changes it at run time)."),
    text!("masteruser", Live, masteruser).help("The user this replica authenticates as to its master (with masterauth)."),
    text!("masterauth", Live, masterauth).help("The password this replica authenticates to its master with."),
    flag!("replica-read-only", Live, replica_read_only)
        .aliases(&["slave-read-only"])
        .help("Refuse clients' writes on a replica (READONLY) (yes/no)."),
    flag!("replica-serve-stale-data", Live, replica_serve_stale_data)
        .aliases(&["slave-serve-stale-data"])
        .help("Answer with the data held while the link to the master is down (no: MASTERDOWN) (yes/no)."),
    flag!("replica-ignore-disk-write-errors", Live, replica_ignore_disk_write_errors)
        .help("A replica that cannot write to disk (a failed BGSAVE with stop-writes-on-bgsave-error, or append-only file errors) goes on applying its master's writes, logging every 10 s (no: it stops the server rather than hold what it cannot persist) (yes/no)."),
    number!("repl-timeout", Live, repl_timeout, int(Range::Signed(1, INT_MAX)) as u64)
        .help("Seconds without a byte from the other side before a replication link counts as lost."),
    number!("repl-ping-replica-period", Live, repl_ping_replica_period, int(Range::Signed(1, INT_MAX)) as u64)
        .aliases(&["repl-ping-slave-period"])
        .help("Seconds between the PINGs a master sends its replicas."),
    flag!("repl-diskless-sync", Live, repl_diskless_sync)
        .help("Accepted for Redis's configs: a full sync's snapshot is always taken in memory, never on disk (yes/no)."),
    number!("repl-diskless-sync-delay", Live, repl_diskless_sync_delay, int(Range::Signed(0, INT_MAX)) as u64)
        .help("Accepted for Redis's configs: each replica gets its own snapshot at once, none waits."),
    number!("repl-diskless-sync-max-replicas", Live, repl_diskless_sync_max_replicas, int(Range::Signed(0, INT_MAX)) as u64)
        .help("Accepted for Redis's configs (see repl-diskless-sync-delay)."),
    Directive::new(
        "repl-diskless-load",
        Change::Live,
        |c, v| {
            let value = one(v)?.to_ascii_lowercase();
            if !["disabled", "on-empty-db", "swapdb"].contains(&value.as_str()) {
                return Err("argument(s) must be one of the following: disabled, on-empty-db, swapdb"
                    .to_string());
            }
            c.repl_diskless_load = value;
            Ok(())
        },
        |c| c.repl_diskless_load.clone(),
    ).help("Accepted for Redis's configs: a replica receives the snapshot into memory, then swaps it in whole."),
    number!("replica-priority", Live, replica_priority, int(INT) as u64)
        .aliases(&["slave-priority"])
        .help("Sentinel promotes the replica with the lowest non-zero priority (0: never)."),
    text!("replica-announce-ip", Live, replica_announce_ip)
        .aliases(&["slave-announce-ip"])
        .help("The address this replica tells its master to list (behind NAT; empty = the one it sees)."),
    number!("replica-announce-port", Live, replica_announce_port, int(Range::Signed(0, 65535)) as u16)
        .aliases(&["slave-announce-port"])
        .help("The port this replica tells its master to list (0 = its own)."),
    flag!("replica-announced", Live, replica_announced).help("Sentinel lists this replica (yes/no)."),
    flag!("lua-native-scripts", Live, lua_native_scripts).help("Run the known limiter scripts natively, with replies identical to Lua's (yes/no)."),
    flag!("lua-persist-scripts", Live, lua_persist_scripts).help(
        "Keep the scripts SCRIPT LOAD and EVAL cached in snapshots and the append-only file, so EVALSHA works after a restart (yes/no; Redis 7 keeps none).",
    ),
    Directive::new(
        "save",
        Change::Live,
        |c, v| {
            // CONFIG SET passes the pairs as one string, a file as words;
            // `save ""` (or nothing) turns snapshots off. A file's lines
            // add up (see `apply_text`).
            let words: Vec<&str> = v.iter().flat_map(|v| v.split_whitespace()).collect();
            if words.len() % 2 != 0 {
                return Err("Invalid save parameters".to_string());
            }
            let mut points = Vec::new();
            for pair in words.chunks(2) {
                match (pair[0].parse::<u64>(), pair[1].parse::<u64>()) {
                    (Ok(seconds), Ok(changes)) if seconds >= 1 => points.push((seconds, changes)),
                    _ => return Err("Invalid save parameters".to_string()),
                }
            }
            c.save_points = points;
            Ok(())
        },
        |c| {
            c.save_points
                .iter()
                .map(|(seconds, changes)| format!("{seconds} {changes}"))
                .collect::<Vec<_>>()
                .join(" ")
        },
    ).help("Snapshot points, \"<seconds> <changes> ...\" (\"\" for none)."),
    flag!("stop-writes-on-bgsave-error", Live, stop_writes_on_bgsave_error).help("Refuse writes (MISCONF) while the last background save failed (yes/no)."),
    flag!("protected-mode", Live, protected_mode).help("Refuse clients outside the loopback interface while the default user has no password (yes/no)."),
    flag!("cluster-enabled", AtStart, cluster_enabled).help("Run as a Redis Cluster node (yes/no)."),
    text!("cluster-config-file", AtStart, cluster_config_file).help("The node's nodes.conf, in --dir."),
    flag!("cluster-require-full-coverage", Live, cluster_require_full_coverage).help("Stop serving when some slot has no node (yes/no)."),
    flag!("cluster-allow-reads-when-down", Live, cluster_allow_reads_when_down).help("Serve reads while the cluster is down (yes/no)."),
    flag!("cluster-allow-pubsubshard-when-down", Live, cluster_allow_pubsubshard_when_down).help("Serve shard channels while the cluster is down (yes/no)."),
    number!("cluster-node-timeout", Live, cluster_node_timeout, int(LONG) as u64).help("Milliseconds without an answer before a node is suspected failing."),
    number!("cluster-replica-validity-factor", Live, cluster_replica_validity_factor, int(Range::Signed(0, INT_MAX)) as u64)
        .aliases(&["cluster-slave-validity-factor"])
        .help("A replica cut off from its master for longer than the node timeout times this does not stand for election (0: always stands)."),
    flag!("cluster-replica-no-failover", Live, cluster_replica_no_failover)
        .aliases(&["cluster-slave-no-failover"])
        .help("Never fail over automatically; CLUSTER FAILOVER still does (yes/no)."),
    number!("cluster-migration-barrier", Live, cluster_migration_barrier, int(INT) as u64)
        .help("A spare replica moves to a master left without one only if its own master keeps more working replicas than this."),
    flag!("cluster-allow-replica-migration", Live, cluster_allow_replica_migration)
        .help("A master whose last slot went to another node becomes its replica even if that node serves other slots (yes/no)."),
    number!("cluster-port", AtStart, cluster_port, int(PORT) as u16).help("The cluster bus port (0 = the port + 10000)."),
    text!("cluster-announce-ip", Live, cluster_announce_ip).help("The IP other cluster nodes are told to reach this one at (behind NAT, in containers; empty = the one they see)."),
    Directive::new(
        "cluster-announce-hostname",
        Change::Live,
        |c, v| {
            let hostname = one(v)?;
            // Redis's isValidAuxString check for hostnames.
            if hostname.len() >= 256 {
                return Err("Hostnames must be less than 256 characters".to_string());
            }
            if !hostname
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            {
                return Err(
                    "Hostnames may only contain alphanumeric characters, hyphens or dots"
                        .to_string(),
                );
            }
            c.cluster_announce_hostname = hostname.to_string();
            Ok(())
        },
        |c| c.cluster_announce_hostname.clone(),
    ).help("A hostname other nodes and clients are told (CLUSTER NODES, SLOTS, SHARDS)."),
    number!("cluster-announce-port", Live, cluster_announce_port, int(PORT) as u16).help("The client port other nodes and clients are told (0 = --port)."),
    Directive::new(
        "cluster-preferred-endpoint-type",
        Change::Live,
        |c, v| {
            c.cluster_preferred_endpoint_type = EndpointType::parse(one(v)?).ok_or_else(|| {
                "argument(s) must be one of the following: ip, hostname, unknown-endpoint"
                    .to_string()
            })?;
            Ok(())
        },
        |c| c.cluster_preferred_endpoint_type.name().to_string(),
    ).help("How redirects, CLUSTER SLOTS and SHARDS name a node: ip, hostname or unknown-endpoint."),
    number!("cluster-announce-bus-port", Live, cluster_announce_bus_port, int(PORT) as u16).help("The bus port other nodes are told (0 = --cluster-port)."),
    number!("cluster-announce-tls-port", Live, cluster_announce_tls_port, int(PORT) as u16).help("With --tls-cluster, the TLS port other nodes are told (0 = --tls-port)."),
    number!("tls-port", AtStart, tls.port, int(PORT) as u16).help("Port for TLS connections, beside the plain port (0 = none)."),
    text!("tls-cert-file", Live, tls.cert_file).help("The server's certificate chain (PEM)."),
    text!("tls-key-file", Live, tls.key_file).help("The server's private key (PEM; encrypted PKCS#8 with --tls-key-file-pass)."),
    text!("tls-key-file-pass", Live, tls.key_file_pass).help("The password of an encrypted --tls-key-file."),
    text!("tls-client-cert-file", Live, tls.client_cert_file).help("The certificate shown to other nodes (PEM; empty = --tls-cert-file)."),
    text!("tls-client-key-file", Live, tls.client_key_file).help("Its private key (PEM; empty = --tls-key-file)."),
    text!("tls-client-key-file-pass", Live, tls.client_key_file_pass).help("The password of an encrypted --tls-client-key-file."),
    flag!("tls-cluster", Live, tls.cluster).help("The cluster bus and MIGRATE between nodes over TLS (yes/no)."),
    flag!("tls-replication", Live, tls.replication).help("A replica's link to its master over TLS, to the master's TLS port (yes/no)."),
    text!("tls-ca-cert-file", Live, tls.ca_cert_file).help("CA certificates clients are verified against (PEM)."),
    text!("tls-ca-cert-dir", Live, tls.ca_cert_dir).help("A directory of CA certificates clients are verified against."),
    Directive::new(
        "tls-auth-clients",
        Change::Live,
        |c, v| {
            c.tls.auth_clients = ClientAuth::parse(one(v)?).ok_or_else(|| {
                "argument(s) must be one of the following: no, yes, optional".to_string()
            })?;
            Ok(())
        },
        |c| c.tls.auth_clients.name().to_string(),
    ).help("Client certificates: yes (required), optional or no."),
    Directive::new(
        "tls-protocols",
        Change::Live,
        |c, v| {
            c.tls.protocols = v.join(" ");
            Ok(())
        },
        |c| c.tls.protocols.clone(),
    ).help("TLS versions accepted, \"TLSv1.2 TLSv1.3\" (empty = both)."),
    text!("tls-ciphersuites", Live, tls.ciphersuites).help("TLS 1.3 suites, colon-separated (empty = all)."),
    text!("tls-ciphers", Live, tls.ciphers).help("TLS 1.2 ciphers in OpenSSL's names (empty = all)."),
    flag!("tls-prefer-server-ciphers", Live, tls.prefer_server_ciphers).help("Choose the cipher by the server's order (yes/no)."),
    flag!("tls-session-caching", Live, tls.session_caching).help("Resume TLS sessions (yes/no)."),
    number!("tls-session-cache-size", Live, tls.session_cache_size, int(INT) as u64).help("TLS sessions kept for resumption."),
    number!("tls-session-cache-timeout", Live, tls.session_cache_timeout, int(INT) as u64).help("Seconds a TLS session is kept (accepted and shown)."),
    text!("aclfile", AtStart, aclfile).help("The ACL file users are loaded from and ACL SAVE writes."),
    number!("acllog-max-len", Live, acllog_max_len, int(LONG) as u64).help("Entries ACL LOG keeps."),
    flag!("appendonly", Live, appendonly).help("Keep the append-only file (yes/no); when on, it is loaded at start instead of the snapshot."),
    Directive::new(
        "appendfilename",
        Change::AtStart,
        |c, v| {
            c.appendfilename = bare_name("appendfilename", "a filename", v)?;
            Ok(())
        },
        |c| c.appendfilename.clone(),
    ).help("Base name of the append-only file's parts."),
    Directive::new(
        "appenddirname",
        Change::AtStart,
        |c, v| {
            c.appenddirname = bare_name("appenddirname", "a dirname", v)?;
            Ok(())
        },
        |c| c.appenddirname.clone(),
    ).help("Directory of the append-only file, inside --dir."),
    Directive::new(
        "shutdown-on-sigterm",
        Change::Live,
        |c, v| {
            c.shutdown_on_sigterm = ShutdownFlags::parse(v)?;
            Ok(())
        },
        |c| c.shutdown_on_sigterm.shown(),
    )
    .help("What SIGTERM's shutdown does: default (save when save points are set), save, nosave, now, force."),
    number!("shutdown-timeout", Live, shutdown_timeout, int(INT) as u64).help("Seconds a shutdown waits, writes paused, for lagging replicas to catch up (0: no wait)."),
    Directive::new(
        "shutdown-on-sigint",
        Change::Live,
        |c, v| {
            c.shutdown_on_sigint = ShutdownFlags::parse(v)?;
            Ok(())
        },
        |c| c.shutdown_on_sigint.shown(),
    )
    .help("What SIGINT's shutdown does, as shutdown-on-sigterm."),
    Directive::new(
        "appendfsync",
        Change::Live,
        |c, v| {
            c.appendfsync = Fsync::parse(one(v)?).ok_or_else(|| {
                "argument(s) must be one of the following: always, everysec, no".to_string()
            })?;
            Ok(())
        },
        |c| c.appendfsync.name().to_string(),
    ).help("When the append-only file is fsynced: always, everysec or no."),
    flag!("aof-load-truncated", Live, aof_load_truncated).help("Load an append-only file cut short at its end up to its last whole command (yes/no)."),
    Directive::new(
        "aof-use-rdb-preamble",
        Change::Live,
        |_, v| {
            if yes_no(v)? {
                Ok(())
            } else {
                Err("tally writes the append-only file's base as RDB: only \
                     `aof-use-rdb-preamble yes` is accepted"
                    .to_string())
            }
        },
        |_| "yes".to_string(),
    ).help("Write the append-only file's base as RDB; only yes is accepted."),
    number!("auto-aof-rewrite-percentage", Live, auto_aof_rewrite_percentage, int(INT) as u64).help("Rewrite the append-only file when it grew by this percentage since the last rewrite (0 = never)."),
    number!("auto-aof-rewrite-min-size", Live, auto_aof_rewrite_min_size, bytes(ULONG) as u64).help("Smallest append-only file rewritten automatically."),
    flag!("no-appendfsync-on-rewrite", Live, no_appendfsync_on_rewrite).help("Skip fsyncs while a rewrite or snapshot runs (yes/no)."),
    flag!("aof-rewrite-incremental-fsync", Live, aof_rewrite_incremental_fsync).help("Fsync a rewrite's file every 4mb as it is written (yes/no)."),
    Directive::new(
        "dir",
        Change::Live,
        |c, v| {
            let dir = one(v)?;
            // Redis chdirs there: a directory that is not there is refused.
            if !Path::new(dir).is_dir() {
                return Err("No such file or directory".to_string());
            }
            c.dir = dir.to_string();
            Ok(())
        },
        // Redis chdirs to it and shows getcwd(): the absolute path, links
        // resolved. tally (which may be embedded in another process) does
        // not chdir, and shows what that would give.
        |c| {
            std::fs::canonicalize(&c.dir)
                .map(|path| path.to_string_lossy().into_owned())
                .unwrap_or_else(|_| c.dir.clone())
        },
    )
    .protected()
    .help("Directory of the snapshot and the append-only file."),
    Directive::new(
        "dbfilename",
        Change::Live,
        |c, v| {
            let name = one(v)?;
            // Redis refuses a path: the file lives in `dir`.
            if name.contains('/') {
                return Err("dbfilename can't be a path, just a filename".to_string());
            }
            c.dbfilename = name.to_string();
            Ok(())
        },
        |c| c.dbfilename.clone(),
    )
    .protected()
    .help("Snapshot file name, loaded at start and written by SAVE."),
    protected_action!("enable-protected-configs", enable_protected_configs).help("Who may CONFIG SET dir and dbfilename: no, yes, or local (loopback clients)."),
    flag!("rdbcompression", Live, rdbcompression).help("LZF-compress long strings in snapshots and DUMP (yes/no)."),
    flag!("rdbchecksum", Live, rdbchecksum).help("Stamp snapshots with a CRC64 (yes/no)."),
    flag!("rdb-skip-unsupported", Live, rdb_skip_unsupported).help("Load a snapshot's other keys when it holds streams or functions, which tally does not (yes/no); each skipped key is logged."),
    Directive::new(
        "daemonize",
        Change::AtStart,
        |_, v| {
            if parse_yes_no(one(v)?) != Some(false) {
                return Err("tally does not daemonize: run it under a supervisor".to_string());
            }
            Ok(())
        },
        |_| "no".to_string(),
    ).help("Only no is accepted: run tally under a supervisor."),
    // A config file's users (`user <name> <rules...>`, as in an ACL file);
    // not a CONFIG parameter.
    Directive {
        name: "user",
        aliases: &[],
        change: Change::AtStart,
        set: |c, v| {
            let words: Vec<Vec<u8>> = v.iter().map(|v| v.as_bytes().to_vec()).collect();
            let user = crate::acl::file::parse_user(&words, c.acl_pubsub_all_channels)?;
            if c.users
                .iter()
                .any(|u| u.first().map(|n| n.as_slice()) == Some(user.name.as_bytes()))
            {
                return Err(format!("Duplicate user '{}' found", user.name));
            }
            c.users.push(words);
            Ok(())
        },
        get: None,
        help: "A user and its ACL rules, \"<name> <rule> ...\", as in an ACL file.",
        protected: false,
        hidden: false,
    },
    // Redis 7.0 parameters accepted and shown, not acted on (see
    // config/accepted.rs); each row gives the reason.
    accepted!("active-defrag-cycle-max", Live, "25", accepted::int, Range::Signed(1, 99); "Accepted, not used: there is no defragmenter; jemalloc gives freed memory back on its own."),
    accepted!("active-defrag-cycle-min", Live, "1", accepted::int, Range::Signed(1, 99); "Accepted, not used: there is no defragmenter."),
    accepted!("active-defrag-ignore-bytes", Live, "104857600", accepted::bytes, Range::Unsigned(1, i64::MAX as u64); "Accepted, not used: there is no defragmenter."),
    accepted!("active-defrag-max-scan-fields", Live, "1000", accepted::int, Range::Unsigned(1, i64::MAX as u64); "Accepted, not used: there is no defragmenter."),
    accepted!("active-defrag-threshold-lower", Live, "10", accepted::int, Range::Signed(0, 1000); "Accepted, not used: there is no defragmenter."),
    accepted!("active-defrag-threshold-upper", Live, "100", accepted::int, Range::Signed(0, 1000); "Accepted, not used: there is no defragmenter."),
    accepted!("activedefrag", Live, "no", accepted::no_defragmenter; "Only 'no': there is no defragmenter (Redis built without its own jemalloc refuses 'yes' the same way)."),
    accepted!("active-expire-effort", Live, "1", accepted::int, Range::Signed(1, 10); "Accepted, not used: the expiry sweep keeps its own pace."),
    accepted!("activerehashing", Live, "yes", accepted::yes_no; "Accepted, not used: tables grow at once, there is no incremental rehashing to schedule."),
    accepted!("dynamic-hz", Live, "yes", accepted::yes_no; "Accepted, not used: background work does not follow hz."),
    accepted!("always-show-logo", AtStart, "no", accepted::yes_no; "Accepted, not used: there is no ASCII logo."),
    accepted!("set-proc-title", AtStart, "yes", accepted::yes_no; "Accepted, not used: the process title is the binary's."),
    // Redis's hidden test knobs, checked as Redis checks them.
    accepted!("use-exit-on-panic", Live, "no", accepted::yes_no; "Accepted, not used (hidden, a Redis test knob): a panic is contained to its connection, nothing exits.").hidden(),
    number!("rdb-key-save-delay", Live, rdb_key_save_delay, int(Range::Signed(i32::MIN as i64, INT_MAX)) as i32).help("Microseconds a background save waits per key (hidden, a Redis test knob; -N: one microsecond for one key in N).").hidden(),
    number!("key-load-delay", Live, key_load_delay, int(Range::Signed(i32::MIN as i64, INT_MAX)) as i32).help("Microseconds a load waits per key (hidden, a Redis test knob; -N: one microsecond for one key in N).").hidden(),
    accepted!("watchdog-period", Live, "0", accepted::int, Range::Signed(0, INT_MAX); "Accepted, not used (hidden, a Redis test knob): there is no software watchdog.").hidden(),
    accepted!("loading-process-events-interval-bytes", Live, "2097152", accepted::int, Range::Signed(1024, INT_MAX); "Accepted, not used (hidden, a Redis test knob): clients are served throughout a load.").hidden(),
    Directive::new(
        "proc-title-template",
        Change::Live,
        |c, v| {
            let template = accepted::proc_title_template(v, c.cluster_enabled, &c.unixsocket)?;
            c.accepted.insert("proc-title-template", template);
            Ok(())
        },
        |c| {
            c.accepted
                .get("proc-title-template")
                .cloned()
                .unwrap_or_else(|| "{title} {listen-addr} {server-mode}".to_string())
        },
    )
    .help("Accepted and checked as Redis checks it (its variables, a title that is not blank), not used: the process title is the binary's."),
    accepted!("aof-disable-auto-gc", Live, "no", accepted::yes_no; "Accepted, not used: a rewrite deletes the files it replaced."),
    accepted!("aof-timestamp-enabled", Live, "no", accepted::yes_no; "Accepted, not used: the append-only file carries no timestamp annotations."),
    accepted!("aof_rewrite_cpulist", AtStart, "", accepted::text; "Accepted, not used: threads are not pinned to CPUs."),
    accepted!("bgsave_cpulist", AtStart, "", accepted::text; "Accepted, not used: threads are not pinned to CPUs."),
    accepted!("bio_cpulist", AtStart, "", accepted::text; "Accepted, not used: threads are not pinned to CPUs."),
    accepted!("server_cpulist", AtStart, "", accepted::text; "Accepted, not used: threads are not pinned to CPUs."),
    accepted!("bind-source-addr", Live, "", accepted::text; "Accepted, not used: outgoing links take the system's source address."),
    accepted!("cluster-link-sendbuf-limit", Live, "0", accepted::bytes, Range::Unsigned(0, u64::MAX); "Accepted, not used: cluster bus links are not freed for their send buffer."),
    accepted!("crash-log-enabled", Live, "yes", accepted::yes_no; "Accepted, not used: a panic is contained to its connection, there is no crash report."),
    accepted!("crash-memcheck-enabled", Live, "yes", accepted::yes_no; "Accepted, not used: there is no crash report."),
    accepted!("disable-thp", AtStart, "yes", accepted::yes_no; "Accepted, not used: there is no fork for huge pages to slow down."),
    accepted!("ignore-warnings", Live, "", accepted::text; "Accepted, not used: there are no startup warnings to silence."),
    accepted!("io-threads-do-reads", AtStart, "no", accepted::yes_no; "Accepted, not used: every connection worker reads its own connections."),
    accepted!("jemalloc-bg-thread", Live, "yes", accepted::yes_no; "Accepted, not used: jemalloc's background thread is always on."),
    accepted!("maxmemory-clients", Live, "0", accepted::memory_or_percent, 100; "Accepted, not used: tally does not evict clients; each client's buffers are bounded by client-query-buffer-limit and client-output-buffer-limit."),
    accepted!("lazyfree-lazy-eviction", Live, "no", accepted::yes_no; "Accepted, not used: nothing is evicted."),
    accepted!("lazyfree-lazy-expire", Live, "no", accepted::yes_no; "Accepted, not used: memory is freed inline."),
    accepted!("lazyfree-lazy-server-del", Live, "no", accepted::yes_no; "Accepted, not used: memory is freed inline."),
    accepted!("lazyfree-lazy-user-del", Live, "no", accepted::yes_no; "Accepted, not used: memory is freed inline."),
    accepted!("lazyfree-lazy-user-flush", Live, "no", accepted::yes_no; "Accepted, not used: memory is freed inline."),
    accepted!("replica-lazy-flush", Live, "no", accepted::yes_no; "Accepted, not used: memory is freed inline.").aliases(&["slave-lazy-flush"]),
    accepted!("lfu-decay-time", Live, "1", accepted::int, Range::Signed(0, INT_MAX); "Accepted, not used: nothing is evicted (noeviction)."),
    accepted!("lfu-log-factor", Live, "10", accepted::int, Range::Signed(0, INT_MAX); "Accepted, not used: nothing is evicted (noeviction)."),
    accepted!("maxmemory-eviction-tenacity", Live, "10", accepted::int, Range::Signed(0, 100); "Accepted, not used: nothing is evicted (noeviction)."),
    accepted!("maxmemory-samples", Live, "5", accepted::int, Range::Signed(1, INT_MAX); "Accepted, not used: nothing is evicted (noeviction)."),
    accepted!("rdb-del-sync-files", Live, "no", accepted::yes_no; "Accepted, not used: snapshot files are kept as they are."),
    accepted!("rdb-save-incremental-fsync", Live, "yes", accepted::yes_no; "Accepted, not used: a snapshot is fsynced once, when written."),
    accepted!("repl-disable-tcp-nodelay", Live, "no", accepted::yes_no; "Accepted, not used: replication links keep TCP_NODELAY."),
    accepted!("sanitize-dump-payload", Live, "no", accepted::one_of, &["no", "yes", "clients"]; "Accepted, not used: RESTORE and RDB loading always check a payload whole."),
    accepted!("socket-mark-id", AtStart, "0", accepted::int, Range::Unsigned(0, u32::MAX as u64); "Accepted, not used: sockets are not marked."),
    accepted!("tls-dh-params-file", Live, "", accepted::text; "Accepted, not used: TLS key exchange is ECDHE only (rustls), which takes no DH parameters."),
    protected_action!("enable-debug-command", enable_debug_command).help("Who may run DEBUG OBJECT, which shows addresses in the server's memory: no, yes, or local (loopback clients). SLEEP, HELP and a contained PANIC are always allowed."),
    protected_action!("enable-module-command", enable_module_command).help("Who may run MODULE LOAD, LOADEX and UNLOAD: no, yes, or local (loopback clients). tally loads no modules: where allowed they answer Redis's errors for a module that cannot be loaded or is not loaded."),
    accepted!("oom-score-adj", Live, "no", accepted::oom_score_adj; "Accepted, not used: the process's OOM score is left alone."),
    accepted!("oom-score-adj-values", Live, "0 200 800", accepted::oom_score_adj_values; "Accepted, not used: the process's OOM score is left alone."),
    accepted!("replica-ignore-maxmemory", Live, "yes", accepted::yes_no; "Accepted: a replica applies its master's stream whatever its maxmemory, and with noeviction (tally's only policy) 'no' evicts nothing either.").aliases(&["slave-ignore-maxmemory"]),
    accepted!("propagation-error-behavior", Live, "ignore", accepted::one_of, &["ignore"]; "Only 'ignore': a replicated command that fails is skipped, as Redis's default does; tally does not panic on one."),
    accepted!("tcp-keepalive", Live, "300", accepted::int, Range::Signed(0, INT_MAX); "Accepted, not used: TCP keepalive follows the system's settings; `timeout` closes idle clients."),
    accepted!("tcp-backlog", AtStart, "511", accepted::int, Range::Signed(0, INT_MAX); "Accepted, not used: the listen backlog is tokio's (1024)."),
];

impl Config {
    /// Applies one directive (`name` lower-case, as in redis.conf or CONFIG SET).
    /// The error names what is wrong with the value; callers add where it came from.
    pub fn apply(&mut self, name: &str, values: &[String]) -> Result<(), String> {
        match lookup(name) {
            Some(directive) => directive.set(self, values),
            None => Err(format!("unsupported directive '{name}'")),
        }
    }

    /// Applies a redis.conf-style file: one directive per line, `#` comments,
    /// arguments split (and quotes removed) as Redis splits them.
    pub fn apply_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read config file {}: {e}", path.display())))?;
        self.apply_text(&text, &path.display().to_string())
    }

    /// Applies configuration text; `origin` names it in errors.
    pub fn apply_text(&mut self, text: &str, origin: &str) -> Result<(), ConfigError> {
        // A file's `save` lines add up, as in redis.conf; the first one
        // replaces the defaults.
        let mut save_points: Option<Vec<(u64, u64)>> = None;
        for (index, raw) in text.lines().enumerate() {
            let line_no = index + 1;
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words = crate::resp::parse::split_args(line.as_bytes()).ok_or_else(|| {
                ConfigError(format!("{origin}:{line_no}: unbalanced quotes in '{line}'"))
            })?;
            let mut words = words
                .into_iter()
                .map(|w| String::from_utf8_lossy(&w).into_owned());
            let Some(name) = words.next() else { continue };
            let name = name.to_ascii_lowercase();
            let values: Vec<String> = words.collect();
            self.apply(&name, &values).map_err(|why| {
                ConfigError(format!("{origin}:{line_no}: directive '{name}': {why}"))
            })?;
            if name == "save" {
                let mut points = save_points.take().unwrap_or_default();
                points.append(&mut self.save_points);
                self.save_points = points.clone();
                save_points = Some(points);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "directives_tests.rs"]
mod tests;
