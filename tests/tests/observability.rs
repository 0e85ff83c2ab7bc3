//! What monitoring reads, compared with redis-server: INFO's fields, error
//! statistics, keyspace hits and misses, and the LATENCY commands.

use std::net::SocketAddr;

use tally_tests::{RawConn, RedisServer, TestServer};

fn words(line: &str) -> Vec<Vec<u8>> {
    tally_tests::words(line)
}

/// Sends one command given as words and returns its reply as text.
async fn run(conn: &mut RawConn, line: &str) -> String {
    String::from_utf8_lossy(&conn.cmd(&words(line)).await).into_owned()
}

/// Sends one command given as arguments and returns its reply as text.
async fn run_args(conn: &mut RawConn, args: &[&str]) -> String {
    String::from_utf8_lossy(&conn.cmd(args).await).into_owned()
}

/// `INFO <section>` as `name:value` lines.
async fn info(conn: &mut RawConn, section: &str) -> Vec<String> {
    let text = run(conn, &format!("INFO {section}")).await;
    text.split("\r\n")
        .filter(|l| l.contains(':') && !l.starts_with('$'))
        .map(str::to_string)
        .collect()
}

/// One field of an INFO section.
async fn field(conn: &mut RawConn, section: &str, name: &str) -> String {
    info(conn, section)
        .await
        .into_iter()
        .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("INFO {section} has no {name}"))
}

/// Commands that fail in each of the ways Redis counts differently.
const FAILING: &[&[&str]] = &[
    &["HSET", "h", "f", "v"],
    &["EVAL", "return redis.call('incr', KEYS[1])", "1", "h"],
    &["EVAL", "return redis.pcall('incr', KEYS[1])", "1", "h"],
    &["EVAL", "redis.pcall('incr', KEYS[1]); return 1", "1", "h"],
    &["EVAL", "return redis.error_reply('MY bad')", "0"],
    &["EVAL", "return {err='X y'}", "0"],
    &["EVAL", "error('boom')", "0"],
    &["EVAL", "return redis.call('nosuchcommand')", "0"],
    &["EVAL", "return {1, redis.error_reply('NESTED x')}", "0"],
    &["EVAL", "return redis.call('get')", "0"],
    &["NOSUCH", "a"],
    &["GET"],
    &["INCR", "h"],
    &["SET", "a", "1", "EX", "0"],
];

async fn error_statistics(addr: SocketAddr) -> (Vec<String>, String, Vec<String>) {
    let mut conn = RawConn::connect(addr).await;
    run(&mut conn, "CONFIG RESETSTAT").await;
    for args in FAILING {
        run_args(&mut conn, args).await;
    }
    let errorstats = info(&mut conn, "errorstats").await;
    let total = field(&mut conn, "stats", "total_error_replies").await;
    // Durations differ; which commands failed or were rejected must not.
    let commands = info(&mut conn, "commandstats")
        .await
        .into_iter()
        .filter(|l| {
            ["cmdstat_eval:", "cmdstat_get:", "cmdstat_incr:"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .map(|l| {
            let (name, rest) = l.split_once(':').expect("a field");
            let kept: Vec<&str> = rest
                .split(',')
                .filter(|kv| kv.starts_with("rejected_calls") || kv.starts_with("failed_calls"))
                .collect();
            format!("{name}:{}", kept.join(","))
        })
        .collect::<Vec<_>>();
    let mut commands = commands;
    commands.sort();
    (errorstats, total, commands)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_counted_once_by_code_as_redis_counts_them() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let expected = error_statistics(redis.addr).await;
    let got = error_statistics(tally.addr()).await;
    assert_eq!(got, expected);
    // The figures themselves, so that a change on both sides is seen.
    assert_eq!(
        expected.0,
        vec![
            "errorstat_ERR:count=6",
            "errorstat_MY:count=1",
            "errorstat_NESTED:count=1",
            "errorstat_WRONGTYPE:count=4",
            "errorstat_X:count=1",
        ]
    );
    assert_eq!(expected.1, "13");
}

/// Keys for every type, then `line`, then (hits, misses).
async fn lookups(addr: SocketAddr, line: &str) -> (String, String) {
    let mut conn = RawConn::connect(addr).await;
    for setup in [
        "FLUSHALL",
        "SET k v",
        "HSET h f v",
        "SADD s a",
        "RPUSH l a b",
        "ZADD z 1 a",
        "CONFIG RESETSTAT",
    ] {
        run(&mut conn, setup).await;
    }
    run(&mut conn, line).await;
    (
        field(&mut conn, "stats", "keyspace_hits").await,
        field(&mut conn, "stats", "keyspace_misses").await,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyspace_hits_and_misses_are_counted_for_the_reads_redis_counts() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let lines = [
        "GET k",
        "GET nokey",
        "MGET k h nokey",
        "EXISTS k h nokey",
        "TTL nokey",
        "PTTL k",
        "TYPE h",
        "STRLEN k",
        "GETRANGE k 0 1",
        "GETEX k",
        "GETDEL k",
        "GETSET k 1",
        "SET k 2 GET",
        "SET k 2",
        "INCR n",
        "APPEND k x",
        "OBJECT ENCODING k",
        "TOUCH k nokey",
        "COPY k k2",
        "RENAME k k3",
        "HGET h f",
        "HGETALL nokey",
        "HEXISTS h f",
        "HSET h g 1",
        "LRANGE l 0 -1",
        "LPOS l a",
        "LMOVE l l2 LEFT LEFT",
        "LPUSH l x",
        "SMEMBERS s",
        "SINTER s nokey",
        "SINTERSTORE d s nokey",
        "SUNIONSTORE d s",
        "SINTERCARD 2 s nokey",
        "SMOVE s s2 a",
        "ZSCORE z a",
        "ZRANGE z 0 -1",
        "ZRANGESTORE d z 0 -1",
        "ZADD z 2 b",
        "HSCAN h 0",
        "SCAN 0",
        "KEYS *",
        "EVAL return(redis.call('get',KEYS[1])) 1 k",
        "EVAL return(redis.call('get',KEYS[1])) 1 nokey",
    ];
    for line in lines {
        let expected = lookups(redis.addr, line).await;
        let got = lookups(tally.addr(), line).await;
        assert_eq!(got, expected, "hits and misses after {line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_has_every_field_redis_reports() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let mut names = Vec::new();
    for addr in [redis.addr, tally.addr()] {
        let mut conn = RawConn::connect(addr).await;
        // The same load on both, so that per-command and per-error lines
        // exist on both.
        for line in [
            "INFO server",
            "SET a 1",
            "GET a",
            "GET",
            "CONFIG GET maxmemory",
            "LATENCY LATEST",
        ] {
            run(&mut conn, line).await;
        }
        let fields: Vec<String> = info(&mut conn, "everything")
            .await
            .into_iter()
            .filter_map(|l| l.split_once(':').map(|(name, _)| name.to_string()))
            .collect();
        names.push(fields);
    }
    let missing: Vec<&String> = names[0].iter().filter(|n| !names[1].contains(n)).collect();
    assert!(
        missing.is_empty(),
        "INFO fields Redis has and tally lacks: {missing:?}"
    );
    // Sections in Redis's order, tally's own last.
    let mut conn = RawConn::connect(tally.addr()).await;
    let text = run(&mut conn, "INFO everything").await;
    let titles: Vec<&str> = text
        .split("\r\n")
        .filter_map(|l| l.strip_prefix("# "))
        .collect();
    assert_eq!(
        titles,
        vec![
            "Server",
            "Clients",
            "Memory",
            "Persistence",
            "Stats",
            "Replication",
            "CPU",
            "Modules",
            "Commandstats",
            "Errorstats",
            "Latencystats",
            "Cluster",
            "Keyspace",
            "Limiter_scripts"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_that_follow_traffic_move_with_it() {
    let tally = TestServer::start_real_clock().await;
    let mut conn = tally.raw().await;
    // A second of traffic: the 100 ms sampler sees it.
    let until = std::time::Instant::now() + std::time::Duration::from_millis(1200);
    while std::time::Instant::now() < until {
        run(&mut conn, "SET a 1").await;
    }
    let ops: u64 = field(&mut conn, "stats", "instantaneous_ops_per_sec")
        .await
        .parse()
        .expect("a number");
    assert!(ops > 0, "instantaneous_ops_per_sec stayed 0 under load");
    let reads: u64 = field(&mut conn, "stats", "total_reads_processed")
        .await
        .parse()
        .expect("a number");
    let writes: u64 = field(&mut conn, "stats", "total_writes_processed")
        .await
        .parse()
        .expect("a number");
    assert!(
        reads >= 100 && writes >= 100,
        "reads {reads}, writes {writes}"
    );
    let peak: u64 = field(&mut conn, "memory", "used_memory_peak")
        .await
        .parse()
        .expect("a number");
    let used: u64 = field(&mut conn, "memory", "used_memory")
        .await
        .parse()
        .expect("a number");
    assert!(peak >= used && used > 0, "peak {peak}, used {used}");
    // Scripts are reported once one ran.
    run_args(&mut conn, &["EVAL", "return 1", "0"]).await;
    let lua: u64 = field(&mut conn, "memory", "used_memory_lua")
        .await
        .parse()
        .expect("a number");
    assert!(lua > 0, "used_memory_lua is 0 after a Lua run");
}

/// Replies that do not depend on timing, for both servers.
async fn latency_replies(addr: SocketAddr) -> Vec<String> {
    let mut conn = RawConn::connect(addr).await;
    let mut out = Vec::new();
    for line in [
        "LATENCY RESET",
        "LATENCY HELP",
        "LATENCY DOCTOR",
        "LATENCY LATEST",
        "LATENCY HISTORY command",
        "LATENCY GRAPH command",
        "LATENCY RESET command nope",
        "LATENCY",
        "LATENCY HISTORY",
        "LATENCY NOPE",
        "LATENCY HISTOGRAM nosuchcommand",
        "CONFIG GET latency-monitor-threshold",
        "CONFIG GET latency-tracking",
        "CONFIG GET latency-tracking-info-percentiles",
        "CONFIG SET latency-tracking-info-percentiles 101",
        "CONFIG SET latency-tracking-info-percentiles abc",
        "CONFIG SET latency-tracking maybe",
        "CONFIG SET latency-monitor-threshold -1",
    ] {
        out.push(format!("{line} -> {}", run(&mut conn, line).await));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_commands_reply_as_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let expected = latency_replies(redis.addr).await;
    let got = latency_replies(tally.addr()).await;
    assert_eq!(got, expected);
}

/// A script that keeps the server busy for tens of milliseconds.
const SLOW_SCRIPT: &str = "local i = 0 while i < 3000000 do i = i + 1 end return i";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_commands_are_latency_events() {
    let tally = TestServer::start_real_clock().await;
    let mut conn = tally.raw().await;
    run(&mut conn, "CONFIG SET latency-monitor-threshold 1").await;
    run_args(&mut conn, &["EVAL", SLOW_SCRIPT, "0"]).await;
    let latest = conn.cmd(&words("LATENCY LATEST")).await;
    let redis::Value::Array(events) = redis::parse_redis_value(&latest).expect("RESP") else {
        panic!("LATENCY LATEST is an array");
    };
    assert_eq!(events.len(), 1);
    let redis::Value::Array(event) = &events[0] else {
        panic!("an event is an array");
    };
    assert_eq!(event[0], redis::Value::BulkString(b"command".to_vec()));
    let (redis::Value::Int(time), redis::Value::Int(latest), redis::Value::Int(max)) =
        (&event[1], &event[2], &event[3])
    else {
        panic!("time, latest and max are integers: {event:?}");
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64;
    assert!((now - 5..=now).contains(time), "time {time}, now {now}");
    assert!(*latest >= 1 && latest == max, "latest {latest}, max {max}");
    let history = run(&mut conn, "LATENCY HISTORY command").await;
    assert!(history.starts_with("*1\r\n*2\r\n:"), "{history:?}");
    let graph = run(&mut conn, "LATENCY GRAPH command").await;
    assert!(graph.contains("command - high"), "{graph:?}");
    let doctor = run(&mut conn, "LATENCY DOCTOR").await;
    assert!(
        doctor.contains("1. command: 1 latency spikes"),
        "{doctor:?}"
    );
    assert_eq!(run(&mut conn, "LATENCY RESET").await, ":1\r\n");
    assert_eq!(run(&mut conn, "LATENCY LATEST").await, "*0\r\n");
    // Below the threshold nothing is recorded; with the monitor off, not even that.
    run(&mut conn, "CONFIG SET latency-monitor-threshold 0").await;
    run_args(&mut conn, &["EVAL", SLOW_SCRIPT, "0"]).await;
    assert_eq!(run(&mut conn, "LATENCY LATEST").await, "*0\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_latencies_are_histograms_and_percentiles() {
    let tally = TestServer::start_real_clock().await;
    let mut conn = tally.raw().await;
    run(&mut conn, "CONFIG RESETSTAT").await;
    for _ in 0..10 {
        run(&mut conn, "SET a 1").await;
    }
    let reply = conn.cmd(&words("LATENCY HISTOGRAM set nosuch")).await;
    let redis::Value::Array(map) = redis::parse_redis_value(&reply).expect("RESP") else {
        panic!("a map (RESP2 array): {reply:?}");
    };
    assert_eq!(map.len(), 2, "only SET: {map:?}");
    assert_eq!(map[0], redis::Value::BulkString(b"set".to_vec()));
    let redis::Value::Array(fields) = &map[1] else {
        panic!("calls and histogram");
    };
    assert_eq!(fields[0], redis::Value::BulkString(b"calls".to_vec()));
    assert_eq!(fields[1], redis::Value::Int(10));
    let redis::Value::Array(buckets) = &fields[3] else {
        panic!("buckets");
    };
    // Cumulative counts, rising to every call.
    assert_eq!(buckets.last(), Some(&redis::Value::Int(10)));
    let line = info(&mut conn, "latencystats")
        .await
        .into_iter()
        .find(|l| l.starts_with("latency_percentiles_usec_set:"))
        .expect("SET's percentiles");
    let keys: Vec<&str> = line
        .split_once(':')
        .expect("a field")
        .1
        .split(',')
        .map(|kv| kv.split_once('=').expect("p=value").0)
        .collect();
    assert_eq!(keys, vec!["p50", "p99", "p99.9"]);
    run_args(
        &mut conn,
        &[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "25 75.5",
        ],
    )
    .await;
    let line = info(&mut conn, "latencystats")
        .await
        .into_iter()
        .find(|l| l.starts_with("latency_percentiles_usec_set:"))
        .expect("SET's percentiles");
    assert!(line.contains(":p25=") && line.contains(",p75.5="), "{line}");
    // Off: no new histogram.
    run(&mut conn, "CONFIG SET latency-tracking no").await;
    run(&mut conn, "GET a").await;
    assert_eq!(run(&mut conn, "LATENCY HISTOGRAM get").await, "*0\r\n");
}

/// MEMORY replies whose figures do not depend on the server: errors, nil
/// for a missing key, the doctor on an almost empty instance, the map's keys.
async fn memory_replies(addr: SocketAddr) -> Vec<String> {
    let mut conn = RawConn::connect(addr).await;
    let mut out = Vec::new();
    for line in [
        "FLUSHALL",
        "SET k v",
        "MEMORY USAGE nokey",
        "MEMORY USAGE k SAMPLES -1",
        "MEMORY USAGE k SAMPLES x",
        "MEMORY USAGE k FOO",
        "MEMORY USAGE k SAMPLES",
        "MEMORY DOCTOR",
        "MEMORY",
        "MEMORY NOPE",
        "MEMORY HELP",
        "MEMORY PURGE",
        "MEMORY PURGE now",
        "MEMORY MALLOC-STATS x",
    ] {
        out.push(format!("{line} -> {}", run(&mut conn, line).await));
    }
    // Both allocate with jemalloc 5.3: its report, whose figures differ.
    let report = run(&mut conn, "MEMORY MALLOC-STATS").await;
    let first_line = report.lines().nth(1).unwrap_or_default().to_string();
    out.push(format!("MEMORY MALLOC-STATS starts: {first_line}"));
    let stats = conn.cmd(&words("MEMORY STATS")).await;
    let redis::Value::Array(items) = redis::parse_redis_value(&stats).expect("RESP") else {
        panic!("MEMORY STATS is a map: {stats:?}");
    };
    let keys: Vec<String> = items
        .iter()
        .step_by(2)
        .map(|k| match k {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            other => format!("{other:?}"),
        })
        .collect();
    out.push(format!("MEMORY STATS keys: {keys:?}"));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_commands_reply_as_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let expected = memory_replies(redis.addr).await;
    let got = memory_replies(tally.addr()).await;
    assert_eq!(got, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_usage_follows_what_a_key_holds() {
    let tally = TestServer::start_real_clock().await;
    let mut conn = tally.raw().await;
    let usage = |reply: String| -> i64 {
        reply
            .trim_start_matches(':')
            .trim_end()
            .parse()
            .unwrap_or_else(|_| panic!("an integer: {reply:?}"))
    };
    run(&mut conn, "SET small v").await;
    let big = "x".repeat(10_000);
    run_args(&mut conn, &["SET", "big", &big]).await;
    let small = usage(run(&mut conn, "MEMORY USAGE small").await);
    let large = usage(run(&mut conn, "MEMORY USAGE big SAMPLES 0").await);
    assert!(small > 0 && small < 100, "small string: {small}");
    assert!((10_000..11_000).contains(&large), "10 kB string: {large}");
    for i in 0..1000 {
        run(&mut conn, &format!("HSET h field{i} value{i}")).await;
    }
    let hash = usage(run(&mut conn, "MEMORY USAGE h").await);
    assert!(hash > 1000 * 10, "1000 fields in {hash} bytes");
}

/// `GET path` on the metrics endpoint: (status line, body).
async fn http_get(port: u16, path: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("the metrics port answers");
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: tally\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .expect("write");
    let mut text = String::new();
    stream.read_to_string(&mut text).await.expect("read");
    let (head, body) = text.split_once("\r\n\r\n").expect("headers, then the body");
    (
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    )
}

/// A server with its metrics endpoint on a free port, and the port.
async fn with_metrics_port() -> (TestServer, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    (
        TestServer::start_with(|c| c.metrics_port = port).await,
        port,
    )
}

/// The value of one sample line of an exposition.
fn sample(body: &str, series: &str) -> u64 {
    body.lines()
        .find_map(|l| l.strip_prefix(&format!("{series} ")))
        .unwrap_or_else(|| panic!("{series} in {body}"))
        .parse()
        .expect("a number")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_endpoint_counts_limiter_decisions_by_path() {
    let (tally, port) = with_metrics_port().await;
    let mut conn = tally.raw().await;
    let known = tally_lua::SCRIPTS
        .iter()
        .find(|s| s.name == "sliding_window")
        .expect("the sliding window script");
    let sha = tally_lua::sha1_hex(known.source);
    // A limit of 2: allowed, allowed, denied; natively, then the same in Lua.
    let check = |key: &'static str| {
        vec![
            "EVALSHA".to_string(),
            sha.clone(),
            "2".to_string(),
            format!("{key}:current"),
            format!("{key}:previous"),
            "2".to_string(),
            "60".to_string(),
            "0".to_string(),
            "1".to_string(),
        ]
    };
    for _ in 0..3 {
        conn.cmd(&check("native")).await;
    }
    run(&mut conn, "CONFIG SET lua-native-scripts no").await;
    for _ in 0..3 {
        conn.cmd(&check("lua")).await;
    }
    let (status, body) = http_get(port, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let runs = |path: &str| {
        sample(
            &body,
            &format!("tally_script_runs_total{{script=\"sliding_window\",path=\"{path}\"}}"),
        )
    };
    let decisions = |decision: &str| {
        sample(
            &body,
            &format!(
                "tally_script_decisions_total{{script=\"sliding_window\",decision=\"{decision}\"}}"
            ),
        )
    };
    assert_eq!((runs("native"), runs("lua")), (3, 3));
    assert_eq!((decisions("allowed"), decisions("denied")), (4, 2));
    assert_eq!(sample(&body, "tally_up"), 1);
    let keys: u64 = body
        .lines()
        .filter(|l| l.starts_with("tally_shard_keys{db=\"0\""))
        .map(|l| {
            l.rsplit(' ')
                .next()
                .unwrap_or("0")
                .parse::<u64>()
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(keys, 2, "the two current-window counters");
    assert!(body.contains("# TYPE tally_shard_lock_waits_total counter"));
    let (status, _) = http_get(port, "/elsewhere").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_sync_is_not_counted_as_a_decision() {
    let (tally, port) = with_metrics_port().await;
    let mut conn = tally.raw().await;
    let sha = tally_lua::sha1_hex(tally_lua::lease::SOURCE);
    // One limit of 100 per 60 s: keys (current, previous, given-back
    // window), then limit, window, give-back, lease wanted, cost.
    let call = |want: &str, cost: &str| {
        let mut call: Vec<String> = ["EVALSHA", &sha, "3", "k:cur", "k:prev", "k:cur"]
            .map(String::from)
            .to_vec();
        call.extend(["100", "60", "0", want, cost].map(String::from));
        call
    };
    for lua in ["no", "yes"] {
        run(&mut conn, &format!("CONFIG SET lua-native-scripts {lua}")).await;
        // A sync's top-up and a request's check with a top-up.
        conn.cmd(&call("10", "0")).await;
        conn.cmd(&call("10", "1")).await;
    }
    let (_, body) = http_get(port, "/metrics").await;
    let series =
        |name: &str, label: &str| sample(&body, &format!("{name}{{script=\"lease\",{label}}}"));
    assert_eq!(
        (
            series("tally_script_runs_total", "path=\"native\""),
            series("tally_script_runs_total", "path=\"lua\"")
        ),
        (2, 2),
        "every call ran"
    );
    assert_eq!(
        (
            series("tally_script_decisions_total", "decision=\"allowed\""),
            series("tally_script_decisions_total", "decision=\"denied\"")
        ),
        (2, 0),
        "only the calls that admitted a request, by either path"
    );
}
