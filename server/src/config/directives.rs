//! Every directive tally reads, from a file, the command line or CONFIG
//! SET: [`Config::apply`] is the one table of them.

use std::path::Path;

use super::values::{parse_memory, parse_yes_no, redis_number, Range};
use super::{Config, ConfigError, MAXMEMORY_POLICY};

impl Config {
    /// Applies one directive (`name` lower-case, as in redis.conf or CONFIG SET).
    /// The error names what is wrong with the value; callers add where it came from.
    pub fn apply(&mut self, name: &str, values: &[String]) -> Result<(), String> {
        let one = || -> Result<&str, String> {
            match values {
                [v] => Ok(v.as_str()),
                _ => Err("wrong number of arguments".to_string()),
            }
        };
        let number = |v: &str| -> Result<u64, String> {
            v.parse::<u64>()
                .map_err(|_| format!("argument must be a number, got '{v}'"))
        };
        let memory = |v: &str| -> Result<u64, String> {
            parse_memory(v).ok_or_else(|| format!("argument must be a memory value, got '{v}'"))
        };
        // Redis's own parameters: Redis's parsing, bounds and error texts.
        let redis = |memory: bool, range: Range| -> Result<i128, String> {
            redis_number(one()?, memory, range)
        };
        const INT_MAX: i64 = i32::MAX as i64;
        match name {
            "port" => self.port = redis(false, Range::Signed(0, 65535))? as u16,
            "bind" => {
                if values.is_empty() {
                    return Err("wrong number of arguments".to_string());
                }
                self.bind = values.to_vec();
            }
            "maxmemory" => self.maxmemory = redis(true, Range::Unsigned(0, u64::MAX))? as u64,
            "maxmemory-policy" => {
                let policy = one()?.to_ascii_lowercase();
                if policy != MAXMEMORY_POLICY {
                    return Err(format!(
                        "maxmemory-policy '{policy}' is not supported: tally only runs noeviction, \
                         because evicting a rate-limit counter silently resets a client's window; \
                         writes past maxmemory get an OOM error instead and nothing is lost"
                    ));
                }
            }
            "requirepass" => {
                let pass = one()?;
                self.requirepass = if pass.is_empty() {
                    None
                } else {
                    Some(pass.to_string())
                };
            }
            "databases" => {
                let n = number(one()?)?;
                if n == 0 || n > 1_000_000 {
                    return Err("Invalid number of databases".to_string());
                }
                self.databases = n as usize;
            }
            "maxclients" => {
                self.maxclients = redis(false, Range::Unsigned(1, u32::MAX as u64))? as usize
            }
            "timeout" => {
                self.timeout_secs = redis(false, Range::Unsigned(0, INT_MAX as u64))? as u64
            }
            "proto-max-bulk-len" => {
                self.proto_max_bulk_len = redis(true, Range::Signed(1024 * 1024, i64::MAX))? as u64
            }
            "client-query-buffer-limit" => {
                self.client_query_buffer_limit =
                    redis(true, Range::Signed(1024 * 1024, i64::MAX))? as u64
            }
            "loglevel" => {
                let level = one()?.to_ascii_lowercase();
                if !["debug", "verbose", "notice", "warning", "nothing"].contains(&level.as_str()) {
                    return Err(format!("Invalid log level '{level}'"));
                }
                self.loglevel = level;
            }
            "shards" => {
                let n = number(one()?)?;
                if n == 0 || n > 65536 {
                    return Err("shards must be between 1 and 65536".to_string());
                }
                self.shards = n as usize;
            }
            "hz" => {
                // Accepted in 0..INT_MAX and used within 1..500, as Redis does.
                self.hz = redis(false, Range::Signed(0, INT_MAX))?.clamp(1, 500) as u32;
            }
            "io-threads" => self.io_threads = number(one()?)? as usize,
            "lua-native-scripts" => {
                self.lua_native_scripts = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "lua-memory-limit" => {
                let n = memory(one()?)?;
                if n < 1024 * 1024 {
                    return Err("lua-memory-limit must be at least 1mb".to_string());
                }
                self.lua_memory_limit = n;
            }
            "client-output-buffer-limit" => {
                // Groups of <class> <hard> <soft> <seconds>. Only subscribers
                // have a limit here: normal clients have none (Redis's
                // default too) and there are no replicas.
                // CONFIG SET passes the groups as one string.
                let words: Vec<String> = values
                    .iter()
                    .flat_map(|v| v.split_whitespace().map(str::to_string))
                    .collect();
                if words.is_empty() || words.len() % 4 != 0 {
                    return Err("wrong number of arguments".to_string());
                }
                for group in words.chunks_exact(4) {
                    let limit = crate::config::OutputLimit {
                        hard: memory(&group[1])?,
                        soft: memory(&group[2])?,
                        soft_seconds: number(&group[3])?,
                    };
                    match group[0].to_ascii_lowercase().as_str() {
                        "pubsub" => self.pubsub_output_limit = limit,
                        "normal" if limit.hard == 0 && limit.soft == 0 => {}
                        "normal" => {
                            return Err(
                                "tally has no output-buffer limit for normal clients: only \
                                 `normal 0 0 0` is accepted"
                                    .to_string(),
                            )
                        }
                        "replica" | "slave" => self.replica_output_limit = limit,
                        other => return Err(format!("Invalid client class specified in buffer limit configuration: '{other}'")),
                    }
                }
            }
            "slowlog-log-slower-than" => {
                self.slowlog_log_slower_than = redis(false, Range::Signed(-1, i64::MAX))? as i64
            }
            "slowlog-max-len" => {
                self.slowlog_max_len = redis(false, Range::Unsigned(0, i64::MAX as u64))? as u64
            }
            "metrics-port" => self.metrics_port = redis(false, Range::Signed(0, 65535))? as u16,
            "cluster-enabled" => {
                self.cluster_enabled = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "cluster-config-file" => self.cluster_config_file = one()?.to_string(),
            "cluster-require-full-coverage" => {
                self.cluster_require_full_coverage = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "cluster-allow-reads-when-down" => {
                self.cluster_allow_reads_when_down = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "cluster-allow-pubsubshard-when-down" => {
                self.cluster_allow_pubsubshard_when_down = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "cluster-port" => self.cluster_port = redis(false, Range::Signed(0, 65535))? as u16,
            "cluster-announce-ip" => self.cluster_announce_ip = one()?.to_string(),
            "cluster-announce-port" => {
                self.cluster_announce_port = redis(false, Range::Signed(0, 65535))? as u16
            }
            "cluster-announce-hostname" => {
                let hostname = one()?;
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
                self.cluster_announce_hostname = hostname.to_string();
            }
            "cluster-preferred-endpoint-type" => {
                self.cluster_preferred_endpoint_type = crate::config::EndpointType::parse(one()?)
                    .ok_or_else(|| {
                        "argument(s) must be one of the following: ip, hostname, unknown-endpoint"
                            .to_string()
                    })?
            }
            "cluster-announce-tls-port" => {
                self.cluster_announce_tls_port = redis(false, Range::Signed(0, 65535))? as u16
            }
            "cluster-announce-bus-port" => {
                self.cluster_announce_bus_port = redis(false, Range::Signed(0, 65535))? as u16
            }
            "cluster-node-timeout" => {
                self.cluster_node_timeout = redis(false, Range::Signed(0, i64::MAX))? as u64
            }
            "protected-mode" => {
                self.protected_mode = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "tls-port" => self.tls.port = redis(false, Range::Signed(0, 65535))? as u16,
            "tls-cert-file" => self.tls.cert_file = one()?.to_string(),
            "tls-key-file" => self.tls.key_file = one()?.to_string(),
            "tls-key-file-pass" => self.tls.key_file_pass = one()?.to_string(),
            "tls-client-cert-file" => self.tls.client_cert_file = one()?.to_string(),
            "tls-client-key-file" => self.tls.client_key_file = one()?.to_string(),
            "tls-client-key-file-pass" => self.tls.client_key_file_pass = one()?.to_string(),
            "tls-cluster" => {
                self.tls.cluster = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "tls-ca-cert-file" => self.tls.ca_cert_file = one()?.to_string(),
            "tls-ca-cert-dir" => self.tls.ca_cert_dir = one()?.to_string(),
            "tls-auth-clients" => {
                self.tls.auth_clients =
                    crate::config::ClientAuth::parse(one()?).ok_or_else(|| {
                        "argument(s) must be one of the following: no, yes, optional".to_string()
                    })?
            }
            "tls-protocols" => self.tls.protocols = values.join(" "),
            "tls-ciphersuites" => self.tls.ciphersuites = one()?.to_string(),
            "tls-ciphers" => self.tls.ciphers = one()?.to_string(),
            "tls-prefer-server-ciphers" => {
                self.tls.prefer_server_ciphers = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "tls-session-caching" => {
                self.tls.session_caching = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "tls-session-cache-size" => {
                self.tls.session_cache_size = redis(false, Range::Signed(0, INT_MAX))? as u64
            }
            "tls-session-cache-timeout" => {
                self.tls.session_cache_timeout = redis(false, Range::Signed(0, INT_MAX))? as u64
            }
            // Redis 7.0: the entry counts are integers, the value lengths
            // memory values, all in 0..LONG_MAX.
            "set-max-intset-entries" => {
                self.encodings.set_max_intset_entries =
                    redis(false, Range::Unsigned(0, i64::MAX as u64))? as usize
            }
            "hash-max-listpack-entries" | "hash-max-ziplist-entries" => {
                self.encodings.hash_max_listpack_entries =
                    redis(false, Range::Unsigned(0, i64::MAX as u64))? as usize
            }
            "hash-max-listpack-value" | "hash-max-ziplist-value" => {
                self.encodings.hash_max_listpack_value =
                    redis(true, Range::Unsigned(0, i64::MAX as u64))? as usize
            }
            "zset-max-listpack-entries" | "zset-max-ziplist-entries" => {
                self.encodings.zset_max_listpack_entries =
                    redis(false, Range::Unsigned(0, i64::MAX as u64))? as usize
            }
            "zset-max-listpack-value" | "zset-max-ziplist-value" => {
                self.encodings.zset_max_listpack_value =
                    redis(true, Range::Unsigned(0, i64::MAX as u64))? as usize
            }
            "list-max-listpack-size" | "list-max-ziplist-size" => {
                self.list_max_listpack_size =
                    redis(false, Range::Signed(i32::MIN as i64, INT_MAX))? as i32
            }
            "list-compress-depth" => {
                self.list_compress_depth = redis(false, Range::Signed(0, INT_MAX))? as i32
            }
            "tracking-table-max-keys" => {
                self.tracking_table_max_keys =
                    redis(false, Range::Unsigned(0, i64::MAX as u64))? as u64
            }
            "latency-monitor-threshold" => {
                self.latency_monitor_threshold_ms = redis(false, Range::Signed(0, i64::MAX))? as u64
            }
            "latency-tracking" => {
                self.latency_tracking = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "latency-tracking-info-percentiles" => {
                // CONFIG SET passes the list as one string; a file as words.
                let mut percentiles = Vec::new();
                for word in values.iter().flat_map(|v| v.split_whitespace()) {
                    let p = crate::float::string2d(word.as_bytes()).ok_or_else(|| {
                        "Invalid latency-tracking-info-percentiles parameters".to_string()
                    })?;
                    if !(0.0..=100.0).contains(&p) {
                        return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".to_string());
                    }
                    percentiles.push(p);
                }
                self.latency_tracking_info_percentiles = percentiles;
            }
            "busy-reply-threshold" | "lua-time-limit" => {
                self.busy_reply_threshold_ms = redis(false, Range::Signed(0, i64::MAX))? as u64
            }
            "save" => {
                // CONFIG SET passes the pairs as one string, a file as
                // words; `save ""` (or nothing) turns snapshots off.
                let words: Vec<&str> = values.iter().flat_map(|v| v.split_whitespace()).collect();
                if words.len() % 2 != 0 {
                    return Err("Invalid save parameters".to_string());
                }
                let mut points = Vec::new();
                for pair in words.chunks(2) {
                    match (pair[0].parse::<u64>(), pair[1].parse::<u64>()) {
                        (Ok(seconds), Ok(changes)) if seconds >= 1 => {
                            points.push((seconds, changes))
                        }
                        _ => return Err("Invalid save parameters".to_string()),
                    }
                }
                self.save_points = points;
            }
            "user" => {
                let words: Vec<Vec<u8>> = values.iter().map(|v| v.as_bytes().to_vec()).collect();
                let user = crate::acl::file::parse_user(&words)?;
                if self
                    .users
                    .iter()
                    .any(|u| u.first().map(|n| n.as_slice()) == Some(user.name.as_bytes()))
                {
                    return Err(format!("Duplicate user '{}' found", user.name));
                }
                self.users.push(words);
            }
            "aclfile" => self.aclfile = one()?.to_string(),
            "acllog-max-len" => {
                self.acllog_max_len = redis(false, Range::Signed(0, i64::MAX))? as u64
            }
            "appendonly" => {
                self.appendonly = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "appendfilename" => {
                let name = one()?;
                if name.is_empty() {
                    return Err("appendfilename can't be empty".to_string());
                }
                if name.contains('/') {
                    return Err("appendfilename can't be a path, just a filename".to_string());
                }
                self.appendfilename = name.to_string()
            }
            "appenddirname" => {
                let name = one()?;
                if name.is_empty() {
                    return Err("appenddirname can't be empty".to_string());
                }
                if name.contains('/') {
                    return Err("appenddirname can't be a path, just a dirname".to_string());
                }
                self.appenddirname = name.to_string()
            }
            "appendfsync" => {
                self.appendfsync = crate::config::Fsync::parse(one()?).ok_or_else(|| {
                    "argument(s) must be one of the following: always, everysec, no".to_string()
                })?
            }
            "aof-load-truncated" => {
                self.aof_load_truncated = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "aof-use-rdb-preamble" => {
                if parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
                {
                } else {
                    return Err(
                        "tally writes the append-only file's base as RDB: only `aof-use-rdb-preamble yes` is accepted"
                            .to_string(),
                    );
                }
            }
            "auto-aof-rewrite-percentage" => {
                self.auto_aof_rewrite_percentage = redis(false, Range::Signed(0, INT_MAX))? as u64
            }
            "auto-aof-rewrite-min-size" => {
                self.auto_aof_rewrite_min_size =
                    redis(true, Range::Unsigned(0, i64::MAX as u64))? as u64
            }
            "no-appendfsync-on-rewrite" => {
                self.no_appendfsync_on_rewrite = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "aof-rewrite-incremental-fsync" => {
                self.aof_rewrite_incremental_fsync = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "dir" => {
                let dir = one()?;
                // Redis chdirs there: a directory that is not there is refused.
                if !std::path::Path::new(dir).is_dir() {
                    return Err("No such file or directory".to_string());
                }
                self.dir = dir.to_string()
            }
            "dbfilename" => {
                let name = one()?;
                // Redis refuses a path: the file lives in `dir`.
                if name.contains('/') {
                    return Err("dbfilename can't be a path, just a filename".to_string());
                }
                self.dbfilename = name.to_string()
            }
            "stop-writes-on-bgsave-error" => {
                self.stop_writes_on_bgsave_error = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "rdbcompression" => {
                self.rdbcompression = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "rdbchecksum" => {
                self.rdbchecksum = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "rdb-skip-unsupported" => {
                self.rdb_skip_unsupported = parse_yes_no(one()?)
                    .ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?
            }
            "daemonize" => {
                if parse_yes_no(one()?) != Some(false) {
                    return Err("tally does not daemonize: run it under a supervisor".to_string());
                }
            }
            _ => return Err(format!("unsupported directive '{name}'")),
        }
        Ok(())
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
mod tests {
    use super::*;

    #[test]
    fn save_lines_of_a_file_add_up_and_config_set_replaces() {
        let mut config = Config::default();
        config
            .apply_text("save 900 1\nsave 300 10\n", "test")
            .expect("valid");
        assert_eq!(config.save_points, vec![(900, 1), (300, 10)]);
        config.apply("save", &["60 5".to_string()]).expect("valid");
        assert_eq!(config.save_points, vec![(60, 5)]);
        config.apply("save", &["".to_string()]).expect("valid");
        assert!(config.save_points.is_empty());
        for bad in ["60", "0 1", "60 -1", "x 1"] {
            assert_eq!(
                config.apply("save", &[bad.to_string()]),
                Err("Invalid save parameters".to_string()),
                "{bad}"
            );
        }
    }

    #[test]
    fn memory_units_follow_redis() {
        assert_eq!(parse_memory("100"), Some(100));
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("1kb"), Some(1024));
        assert_eq!(parse_memory("100mb"), Some(100 * 1024 * 1024));
        assert_eq!(parse_memory("1GB"), Some(1024 * 1024 * 1024));
        assert_eq!(parse_memory("1g"), Some(1_000_000_000));
        assert_eq!(parse_memory("mb"), None);
        assert_eq!(parse_memory("1tb"), None);
    }

    #[test]
    fn config_file_errors_name_file_line_and_directive() {
        let mut config = Config::default();
        let err = config
            .apply_text("port 7000\n# comment\nactivedefrag yes\n", "tally.conf")
            .unwrap_err();
        assert_eq!(
            err.0,
            "tally.conf:3: directive 'activedefrag': unsupported directive 'activedefrag'"
        );
        assert_eq!(config.port, 7000);
    }

    #[test]
    fn eviction_policies_other_than_noeviction_are_refused() {
        let mut config = Config::default();
        let err = config
            .apply_text("maxmemory 1gb\nmaxmemory-policy allkeys-lru\n", "x.conf")
            .unwrap_err();
        assert!(err.0.starts_with("x.conf:2: directive 'maxmemory-policy': maxmemory-policy 'allkeys-lru' is not supported"), "{}", err.0);
        assert!(config
            .apply_text("maxmemory-policy noeviction", "x")
            .is_ok());
    }
}
