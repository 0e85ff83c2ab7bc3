//! Redis's published CVEs, one test each where the attack reaches tally.
//!
//! Each test runs the reproduction from Redis's fix (its regression test in
//! Debian's patch of 7.0.15, or the attack the advisory describes) against
//! tally, and against a real redis-server where the replies are compared:
//! Debian's 7.0.15 package carries every fix, so its replies are the
//! patched behaviour. Every test ends by checking that the server is still
//! up and a counter written before the attack is intact. docs/security.md
//! has the table of every CVE in Debian's changelog with its verdict.

use tally_tests::{assert_no_mismatch, compare_streams, RawConn, RedisServer, TestServer};

/// A counter written before the attack, read after it.
struct Canary;

impl Canary {
    async fn set(server: &TestServer) -> Canary {
        Canary::set_at(server.addr()).await
    }

    async fn set_at(addr: std::net::SocketAddr) -> Canary {
        let mut conn = RawConn::connect(addr).await;
        assert_eq!(conn.line("SET canary 41").await, "+OK\r\n");
        Canary
    }

    /// The process is alive, a fresh client is served and the canary holds.
    async fn check(self, server: &TestServer) {
        self.check_at(server.addr()).await;
    }

    async fn check_at(self, addr: std::net::SocketAddr) {
        let mut conn = RawConn::connect(addr).await;
        assert_eq!(conn.line("PING").await, "+PONG\r\n");
        assert_eq!(conn.line("INCR canary").await, ":42\r\n");
    }
}

fn eval(script: &str) -> Vec<Vec<u8>> {
    vec![b"EVAL".to_vec(), script.as_bytes().to_vec(), b"0".to_vec()]
}

fn command(words: &[&[u8]]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.to_vec()).collect()
}

/// Runs `commands` on a fresh redis-server and a fresh tally, fails on any
/// reply that differs, then checks tally's canary.
async fn same_as_redis(commands: Vec<Vec<Vec<u8>>>) {
    same_as_redis_with(&[], |_| {}, commands).await;
}

async fn same_as_redis_with(
    redis_args: &[&str],
    tally_config: impl FnOnce(&mut tally_server::Config),
    commands: Vec<Vec<Vec<u8>>>,
) {
    let Some(redis) = RedisServer::start_with(redis_args) else {
        return;
    };
    let tally = TestServer::start_with(tally_config).await;
    let canary = Canary::set(&tally).await;
    let mismatches = compare_streams(redis.addr, tally.addr(), &commands).await;
    assert_no_mismatch(&mismatches);
    canary.check(&tally).await;
}

// ------------------------------------------------ the vendored Lua (C)

/// CVE-2024-31449: `bit.tohex` with a count of INT32_MIN read past its
/// 8-byte buffer and killed the process (vendor/lua-src patch 0001).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cve_2024_31449_bit_tohex_of_int32_min() {
    same_as_redis(vec![
        eval("return bit.tohex(65535, -2147483648)"),
        eval("return bit.tohex(65535, 2147483647)"),
        eval("return bit.tohex(-1, -2147483647)"),
        eval("return bit.tohex(65535, -8)"),
        eval("return bit.tohex(65535, 0)"),
    ])
    .await;
}

/// CVE-2025-46817: `unpack` over a range whose length overflows an int
/// grew the Lua stack by a negative count and killed the process (patch
/// 0002). Redis's regression test, all of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cve_2025_46817_unpack_of_ranges_that_overflow() {
    let unpack_to_list = "local function unpack_to_list(t, i, j) \
         local n, v = select('#', unpack(t, i, j)), {unpack(t, i, j)} \
         for i = 1, n do v[i] = v[i] or '_NIL_' end \
         v.n = n \
         return v \
       end ";
    same_as_redis(vec![
        eval("return {unpack({1,2,3}, -2, 2147483647)}"),
        eval("return {unpack({1,2,3}, 0, 2147483647)}"),
        eval("return {unpack({1,2,3}, -2147483648, -2)}"),
        eval("return {unpack({1,2,3}, -2147483648, 2147483647)}"),
        eval("return {unpack({1,2,3}, -1, -2)}"),
        eval("return {unpack({1,2,3}, 1, -1)}"),
        eval(&format!(
            "{unpack_to_list} return unpack_to_list({{1,2,3}}, -1, 5)"
        )),
        eval(&format!(
            "{unpack_to_list} return unpack_to_list({{1,2,3}}, -2147483648, -2147483646)"
        )),
        // luaH_getnum's half of the fix: INT_MIN as an array index.
        eval("local t = {1,2,3} return {t[-2147483648], rawget(t, -2147483648)}"),
    ])
    .await;
}

/// CVE-2025-46819: the lexer's long-string separator count (patch 0004).
/// The out-of-bounds read needs a separator of 2^31 `=`, which no script
/// can build under lua-memory-limit's default (256 MB); what the rewrite of
/// `skip_sep` touches is checked at every edge a small script can reach.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cve_2025_46819_long_string_separators_at_every_small_edge() {
    let chunks = [
        "return [[x]]",
        "return [==[x]==]",
        "return [==[x]=]==]",
        "return #[=[\nx]=]",
        "--[==[ comment ]==] return 1",
        "--[= not a long comment\nreturn 2",
        "return [=",
        "return [==x",
        "return [",
        "return ]=]",
        "local t = {} t[ [[k]] ] = 1 return t.k",
        "[",
        "\n\n[==",
    ];
    let mut commands = Vec::new();
    for chunk in chunks {
        commands.push(eval(&format!(
            "local f, e = loadstring({chunk:?}) if f then return f() else return e end"
        )));
        commands.push(eval(chunk));
    }
    same_as_redis(commands).await;
}

/// CVE-2025-46819's "chunk has too many lines" and 1 GB separator, from
/// Redis's large-memory tests: they need Lua allocations of several GB, so
/// they run only on request (`cargo test -p tally-tests --test cves --
/// --ignored`), with lua-memory-limit raised to allow them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "large-memory: builds multi-GB strings inside Lua"]
async fn cve_2025_46819_gigabyte_separators_and_lines() {
    let server = TestServer::start_with(|c| c.lua_memory_limit = 12 << 30).await;
    let canary = Canary::set(&server).await;
    let mut conn = server.raw().await;
    let separator = "local s = string.rep('=', 1024 * 1024) \
        local t = {} for i=1,1024 do t[i] = s end \
        local sep = table.concat(t) collectgarbage('collect') \
        local code = table.concat({'return [',sep,'[x]',sep,']'}) collectgarbage('collect') \
        local func = loadstring(code) return #func()";
    assert_eq!(conn.cmd(&eval(separator)).await, b":1\r\n");
    let lines = "local s = string.rep('\\n', 1024 * 1024) \
        local t = {} for i=1,2048 do t[#t+1] = s end \
        local lines = table.concat(t) \
        local fn, err = loadstring(lines) return err";
    let reply = String::from_utf8(conn.cmd(&eval(lines)).await).unwrap();
    assert!(reply.ends_with("chunk has too many lines\r\n"), "{reply}");
    canary.check(&server).await;
}

/// CVE-2025-49844: the parser interned the chunk name (`@user_script` for
/// EVAL) without anchoring it, so a collection during the parse could free
/// it while the lexer and the new function still pointed at it (patch
/// 0003, Redis's fix verbatim). No deterministic reproduction is public;
/// this runs the condition the bug needs: the name not referenced by any
/// live script (after SCRIPT FLUSH), the collector made to run at every
/// allocation, and a parse that allocates thousands of constants, then
/// checks that the name the error reports is intact. The `lua_libraries`
/// fuzz target runs parses like it under AddressSanitizer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cve_2025_49844_parse_under_constant_collection_keeps_the_chunk_name() {
    let constants: Vec<String> = (0..5000).map(|i| format!("'c{i}'")).collect();
    let big = format!("local t = {{{}}} error('boom ' .. #t)", constants.join(","));
    let stress = "collectgarbage('setpause', 1) collectgarbage('setstepmul', 1000000) return 1";
    let mut commands = Vec::new();
    // Every worker's VM: a script runs on whichever worker took the call.
    for _ in 0..8 {
        commands.push(eval(stress));
    }
    for _ in 0..4 {
        commands.push(command(&[b"SCRIPT", b"FLUSH"]));
        commands.push(eval(&big));
        commands.push(eval(&format!(
            "local f, e = loadstring({big:?}, '@user_script') return {{pcall(f)}}"
        )));
    }
    same_as_redis(commands).await;
}

// ------------------------------------------------------- the cluster bus

/// A cluster bus message header as Redis's own test builds it
/// (tests/unit/cluster/packet.tcl in Debian's patch for CVE-2026-21863),
/// field by field: `kind`, `count` gossip entries claimed, `extensions`
/// claimed, and the extension-data flag. `totlen` is set by [`finish`].
fn bus_header(kind: u16, count: u16, extensions: u16, sender: &[u8; 40]) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(b"RCmb");
    p.extend_from_slice(&0u32.to_be_bytes()); // totlen
    p.extend_from_slice(&1u16.to_be_bytes()); // ver
    p.extend_from_slice(&7000u16.to_be_bytes()); // port
    p.extend_from_slice(&kind.to_be_bytes());
    p.extend_from_slice(&count.to_be_bytes());
    p.extend_from_slice(&1u64.to_be_bytes()); // currentEpoch
    p.extend_from_slice(&1u64.to_be_bytes()); // configEpoch
    p.extend_from_slice(&0u64.to_be_bytes()); // offset
    p.extend_from_slice(sender);
    p.extend_from_slice(&[0; 16384 / 8]); // myslots
    p.extend_from_slice(&[0; 40]); // replicaof
    p.extend_from_slice(&[0; 46]); // myip
    p.extend_from_slice(&extensions.to_be_bytes());
    p.extend_from_slice(&[0; 30]); // notused1
    p.extend_from_slice(&0u16.to_be_bytes()); // pport
    p.extend_from_slice(&17000u16.to_be_bytes()); // cport
    p.extend_from_slice(&1u16.to_be_bytes()); // flags: master
    p.push(0); // state
    p.extend_from_slice(&[4, 0, 0]); // mflags: CLUSTERMSG_FLAG0_EXT_DATA
    p
}

fn finish(mut packet: Vec<u8>) -> Vec<u8> {
    let total = packet.len() as u32;
    packet[4..8].copy_from_slice(&total.to_be_bytes());
    packet
}

/// CVE-2026-21863: a MEET claiming 100 gossip entries and 2,000,000,000
/// (as a u16) extensions, carrying none, read past the packet in Redis.
/// CVE-2026-92925: a PING whose hostname extension has no NUL was read
/// past its end as a C string. Both are sent to a tally node's bus port and
/// to a redis-server cluster node's: each is counted as received and
/// otherwise ignored, as Redis does, and the node carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cve_2026_21863_and_cve_2026_92925_malformed_cluster_bus_messages() {
    use tokio::io::AsyncWriteExt;
    let sender = *b"abcdef1234567890abcdef1234567890abcdef12";
    let meet = finish(bus_header(2, 100, 2_000_000_000u32 as u16, &sender));
    let mut ping = bus_header(0, 0, 1, &sender);
    ping.extend_from_slice(&(8u32 + 32).to_be_bytes()); // extension length
    ping.extend_from_slice(&0u16.to_be_bytes()); // CLUSTERMSG_EXT_TYPE_HOSTNAME
    ping.extend_from_slice(&[0, 0]);
    ping.extend_from_slice(&[b'h'; 32]); // no NUL anywhere
    let ping = finish(ping);
    assert_eq!(meet.len(), 2256);

    async fn send_and_read_stats(
        client: std::net::SocketAddr,
        bus_port: u16,
        packets: &[&[u8]],
    ) -> Vec<String> {
        for packet in packets {
            let mut bus = tokio::net::TcpStream::connect(("127.0.0.1", bus_port))
                .await
                .unwrap();
            bus.write_all(packet).await.unwrap();
            bus.flush().await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
        let mut conn = RawConn::connect(client).await;
        assert_eq!(conn.line("PING").await, "+PONG\r\n");
        let info = String::from_utf8(conn.cmd(&["CLUSTER", "INFO"]).await).unwrap();
        let nodes = String::from_utf8(conn.cmd(&["CLUSTER", "NODES"]).await).unwrap();
        assert!(
            !nodes.contains("abcdef1234567890"),
            "the sender was not added: {nodes}"
        );
        let mut received: Vec<String> = info
            .lines()
            .filter(|l| l.starts_with("cluster_stats_messages_") && l.contains("received"))
            .map(str::to_string)
            .collect();
        received.sort();
        received
    }

    let (tally, tally_bus) =
        tally_tests::cluster::start_on_free_bus_port(|bus_port| tally_server::Config {
            cluster_port: bus_port,
            ..tally_tests::cluster::node_config(&tally_tests::scratch_dir())
        })
        .await;
    // A node with no slots answers keyed commands with CLUSTERDOWN: it
    // takes them all first, so the canary can be written.
    let mut admin = RawConn::connect(tally.local_addr()).await;
    assert_eq!(admin.line("CLUSTER ADDSLOTSRANGE 0 16383").await, "+OK\r\n");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !String::from_utf8_lossy(&admin.cmd(&["CLUSTER", "INFO"]).await)
        .contains("cluster_state:ok")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the node never served its slots"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let canary = Canary::set_at(tally.local_addr()).await;
    let tally_stats = send_and_read_stats(tally.local_addr(), tally_bus, &[&meet, &ping]).await;
    assert_eq!(
        tally_stats,
        [
            "cluster_stats_messages_meet_received:1",
            "cluster_stats_messages_ping_received:1",
            "cluster_stats_messages_received:2"
        ]
    );
    canary.check_at(tally.local_addr()).await;

    let dir = tally_tests::scratch_dir();
    let Some(redis) = RedisServer::start_with(&[
        "--cluster-enabled",
        "yes",
        "--dir",
        &dir,
        "--cluster-config-file",
        "nodes.conf",
    ]) else {
        return;
    };
    let redis_stats =
        send_and_read_stats(redis.addr, redis.addr.port() + 10000, &[&meet, &ping]).await;
    assert_eq!(tally_stats, redis_stats);
}
