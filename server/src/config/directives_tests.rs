//! Tests of the directive table (`directives.rs`).
use super::*;

#[test]
fn every_parameter_reads_back_what_config_get_shows() {
    let defaults = Config::default();
    for directive in DIRECTIVES.iter().filter(|d| d.is_parameter()) {
        let shown = directive.get(&defaults).expect("a parameter");
        for name in directive.names() {
            let mut config = Config::default();
            config
                .apply(name, std::slice::from_ref(&shown))
                .unwrap_or_else(|e| panic!("{name} {shown:?}: {e}"));
            assert_eq!(
                directive.get(&config).as_deref(),
                Some(shown.as_str()),
                "{name}"
            );
        }
    }
}

#[test]
fn names_are_unique_lower_case_and_only_start_up_directives_are_at_start() {
    let mut names: Vec<&str> = DIRECTIVES.iter().flat_map(|d| d.names()).collect();
    assert!(names.iter().all(|n| *n == n.to_ascii_lowercase()));
    let count = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), count, "a name used twice");
    let mut at_start: Vec<&str> = DIRECTIVES
        .iter()
        .filter(|d| d.change == Change::AtStart && d.is_parameter())
        .map(|d| d.name)
        .collect();
    at_start.sort_unstable();
    // Redis 7.0's IMMUTABLE_CONFIG ones, and tls-port, which tally reads
    // only at start where Redis rebinds (docs/compatibility.md). tally's
    // own start-up directives (shards, metrics-port) are AtStartOwn.
    assert_eq!(
        at_start,
        [
            "aclfile",
            "always-show-logo",
            "aof_rewrite_cpulist",
            "appenddirname",
            "appendfilename",
            "bgsave_cpulist",
            "bio_cpulist",
            "cluster-config-file",
            "cluster-enabled",
            "cluster-port",
            "daemonize",
            "databases",
            "disable-thp",
            "enable-debug-command",
            "enable-module-command",
            "enable-protected-configs",
            "io-threads",
            "io-threads-do-reads",
            "logfile",
            "pidfile",
            "replicaof",
            "server_cpulist",
            "set-proc-title",
            "socket-mark-id",
            "supervised",
            "syslog-enabled",
            "syslog-facility",
            "syslog-ident",
            "tcp-backlog",
            "tls-port",
            "unixsocket",
            "unixsocketperm"
        ]
    );
    let own: Vec<&str> = DIRECTIVES
        .iter()
        .filter(|d| d.change == Change::AtStartOwn)
        .map(|d| d.name)
        .collect();
    assert_eq!(own, ["shards", "reported-redis-version", "metrics-port"]);
    assert!(lookup("user").is_some_and(|d| !d.is_parameter()));
    // Redis 7.0's PROTECTED_CONFIG ones.
    let protected: Vec<&str> = DIRECTIVES
        .iter()
        .filter(|d| d.protected)
        .map(|d| d.name)
        .collect();
    assert_eq!(protected, ["dir", "dbfilename"]);
    assert!(std::ptr::eq(
        lookup("hash-max-ziplist-entries").unwrap(),
        lookup("hash-max-listpack-entries").unwrap()
    ));
}

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
        .apply_text("port 7000\n# comment\nno-such-directive x\n", "tally.conf")
        .unwrap_err();
    assert_eq!(
        err.0,
        "tally.conf:3: directive 'no-such-directive': unsupported directive 'no-such-directive'"
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
