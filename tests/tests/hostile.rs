//! Hostile input: requests written to crash, freeze or escape the server.
//!
//! Each case asserts the exact reply (against redis-server where Redis's
//! behaviour is the reference), that other clients are still served while
//! and after it runs, and that a canary counter written before it survived.
//! The cases come from the hardening issue's reproductions; docs/security.md
//! says what tally defends against and how.

use std::time::Duration;

use tally_tests::{
    assert_no_mismatch, compare_streams, encode_command, RawConn, RedisServer, TestServer,
};

/// A counter written before the attack, read after it.
struct Canary;

impl Canary {
    async fn set(server: &TestServer) -> Canary {
        let mut conn = server.raw().await;
        assert_eq!(conn.line("SET canary 41").await, "+OK\r\n");
        Canary
    }

    /// The canary is intact and a fresh client is served.
    async fn check(self, server: &TestServer) {
        let mut conn = server.raw().await;
        assert_eq!(conn.line("PING").await, "+PONG\r\n");
        assert_eq!(conn.line("INCR canary").await, ":42\r\n");
    }
}

fn eval(script: &str) -> Vec<Vec<u8>> {
    vec![b"EVAL".to_vec(), script.as_bytes().to_vec(), b"0".to_vec()]
}

async fn differential(commands: Vec<Vec<Vec<u8>>>) {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let canary = Canary::set(&tally).await;
    let mismatches = compare_streams(redis.addr, tally.addr(), &commands).await;
    assert_no_mismatch(&mismatches);
    canary.check(&tally).await;
}

// ---------------------------------------------------------------- framing

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_byte_in_an_inline_command_waits_like_redis_then_hits_the_inline_limit() {
    let server = TestServer::start_with(|c| c.requirepass = Some("secret".into())).await;
    let mut canary_conn = server.raw().await;
    assert_eq!(canary_conn.line("AUTH secret").await, "+OK\r\n");
    assert_eq!(canary_conn.line("SET canary 41").await, "+OK\r\n");
    // Before AUTH, as in the report: nothing is answered, nothing grows.
    let mut attacker = server.raw().await;
    attacker.send(b"\x00\r\n").await;
    attacker.send(b"GET a\x00b\r\nPING\r\n").await;
    assert_eq!(canary_conn.line("PING").await, "+PONG\r\n");
    let info = canary_conn.line("INFO clients").await;
    let buffer: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("client_recent_max_input_buffer:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("INFO has client_recent_max_input_buffer");
    assert!(buffer < 1 << 20, "input buffer grew to {buffer} bytes");
    // As on Redis, the line never ends (strchr stops at the NUL), so the
    // buffer is refused once it passes the 64 KiB inline limit.
    attacker.send(&vec![b'x'; 70 * 1024]).await;
    assert_eq!(
        attacker.read_until_closed().await,
        b"-ERR Protocol error: too big inline request\r\n"
    );
    assert_eq!(canary_conn.line("INCR canary").await, ":42\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_edge_cases_match_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start().await;
    let canary = Canary::set(&tally).await;
    let cases: Vec<Vec<u8>> = vec![
        b"\x00\r\nPING\r\n".to_vec(),
        // \v and \f are blanks between words; inside a word \v is a byte.
        b"\x0bSET\x0c inline\x0bkey v\r\nGET inline\x0bkey\r\n".to_vec(),
        b"ECHO \"a\"\x0b\r\n".to_vec(),
        b"ECHO \"a\"b\r\n".to_vec(),
        [vec![b'a'; 100 * 1024], b"\r\n".to_vec()].concat(),
    ];
    for case in cases {
        let mut a = RawConn::connect(redis.addr).await;
        let mut b = RawConn::connect(tally.addr()).await;
        // One write: a server that closes on the case must not make the
        // test's own second write fail.
        let stream = [&case[..], b"PING\r\n"].concat();
        a.send(&stream).await;
        b.send(&stream).await;
        let expected = collect_for(&mut a, Duration::from_millis(300)).await;
        let actual = collect_for(&mut b, Duration::from_millis(300)).await;
        assert_eq!(
            String::from_utf8_lossy(&actual),
            String::from_utf8_lossy(&expected),
            "case {:?}",
            String::from_utf8_lossy(&case[..case.len().min(40)])
        );
    }
    canary.check(&tally).await;
}

/// Everything the server sends within `window` (or until it closes).
async fn collect_for(conn: &mut RawConn, window: Duration) -> Vec<u8> {
    let mut all = Vec::new();
    let deadline = tokio::time::Instant::now() + window;
    while let Ok(reply) = tokio::time::timeout_at(deadline, conn.read_until_closed_or_reply()).await
    {
        if reply.is_empty() {
            break;
        }
        all.extend_from_slice(&reply);
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_million_argument_request_is_framed_once_not_per_read() {
    // The request is parsed incrementally: this is a correctness test that
    // the resumed framing assembles it exactly (the cost is in the unit tests
    // of resp::parse, which check that framed arguments are not re-read).
    let server = TestServer::start().await;
    let canary = Canary::set(&server).await;
    let pairs = 20_000;
    let mut request = format!("*{}\r\n$4\r\nMSET\r\n", 1 + 2 * pairs).into_bytes();
    for i in 0..pairs {
        let (k, v) = (format!("k{i}"), format!("{i}"));
        request.extend(format!("${}\r\n{k}\r\n${}\r\n{v}\r\n", k.len(), v.len()).bytes());
    }
    let mut conn = server.raw().await;
    for chunk in request.chunks(997) {
        conn.send(chunk).await;
    }
    assert_eq!(conn.reply().await, b"+OK\r\n");
    assert_eq!(conn.line("GET k19999").await, "$5\r\n19999\r\n");
    assert_eq!(conn.line("DBSIZE").await, format!(":{}\r\n", pairs + 1));
    canary.check(&server).await;
}

// ------------------------------------------------------------------- glob

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exponential_glob_patterns_answer_at_once_everywhere_they_are_used() {
    let server = TestServer::start().await;
    let canary = Canary::set(&server).await;
    let key = "a".repeat(40);
    let pattern = "*a*a*a*a*a*a*a*a*a*a*b";
    let mut conn = server.raw().await;
    assert_eq!(conn.line(&format!("SET {key} 1")).await, "+OK\r\n");
    assert_eq!(conn.line(&format!("KEYS {pattern}")).await, "*0\r\n");
    let mut cursor = "0".to_string();
    loop {
        let reply = conn
            .line(&format!("SCAN {cursor} MATCH {pattern} COUNT 1000"))
            .await;
        assert!(reply.ends_with("*0\r\n"), "{reply}");
        cursor = reply.split("\r\n").nth(2).unwrap().to_string();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(conn.line(&format!("HSET h {key} 1")).await, ":1\r\n");
    assert_eq!(
        conn.line(&format!("HSCAN h 0 MATCH {pattern}")).await,
        "*2\r\n$1\r\n0\r\n*0\r\n"
    );
    let mut subscriber = server.raw().await;
    subscriber
        .send(&encode_command(&["PSUBSCRIBE", pattern]))
        .await;
    subscriber.reply().await;
    let mut subscriber2 = server.raw().await;
    subscriber2
        .send(&encode_command(&["SUBSCRIBE", &key]))
        .await;
    subscriber2.reply().await;
    assert_eq!(conn.line(&format!("PUBLISH {key} m")).await, ":1\r\n");
    assert_eq!(
        conn.line(&format!("PUBSUB CHANNELS {pattern}")).await,
        "*0\r\n"
    );
    canary.check(&server).await;
}

// -------------------------------------------------------- Lua: the sandbox

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lua_sandbox_matches_redis() {
    let scripts = [
        // Binary chunks are never loaded (CVE-2015-4335).
        "return loadstring(string.dump(function() return 7 end))()",
        "local f, e = loadstring(string.dump(function() return 7 end)) return e",
        "local parts = {string.dump(function() return 8 end)} local f, e = load(function() return table.remove(parts) end) return {type(f), e}",
        "return loadstring('return 9')()",
        // Nothing a script can reach is writable.
        "rawset(_G,'x',1) return 1",
        "_G.x=1 return 1",
        "x=1",
        "setmetatable(_G,nil) return 1",
        "_G.redis=1 return 1",
        "redis.call=nil return 1",
        "rawset(redis,'call',nil) return 1",
        "string.foo=1 return 1",
        "rawset(string,'foo',1) return 1",
        "cjson.encode=nil return 1",
        "bit.band=nil return 1",
        "math.floor=nil return 1",
        "table.insert(string, 1) return 1",
        "getmetatable('').__index = {} return 1",
        "local m = getmetatable('') m.__index = nil return 1",
        "setmetatable(string, {}) return 1",
        "coroutine.resume=nil return 1",
        // Gone, as on Redis.
        "return type(getfenv)",
        "return type(setfenv)",
        "return type(newproxy)",
        "return type(print)",
        // What must still work.
        "local t = {} t.x = 1 setmetatable(t, {}) rawset(t, 'y', 2) return t.x + t.y",
        "KEYS[1] = 'changed' return KEYS[1]",
        "return type(loadstring)",
        "local co = coroutine.create(function() return 1 end) return tostring(coroutine.resume(co))",
    ];
    differential(scripts.iter().map(|s| eval(s)).collect()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_script_can_change_what_another_script_sees() {
    let server = TestServer::start().await;
    let canary = Canary::set(&server).await;
    let hijacks = [
        "rawset(_G,'redis',{call=function() return 'HIJACKED' end}) return 1",
        "redis.call = function() return 'HIJACKED' end return 1",
        "rawset(redis,'call',function() return 'HIJACKED' end) return 1",
        "string.len = function() return 'HIJACKED' end return 1",
        "getmetatable('').__index = {len=function() return 'HIJACKED' end} return 1",
    ];
    // Many connections, so every worker thread's VM sees every attempt.
    let mut conns = Vec::new();
    for _ in 0..8 {
        conns.push(server.raw().await);
    }
    for conn in &mut conns {
        for hijack in hijacks {
            let reply = String::from_utf8(conn.cmd(&eval(hijack)).await).unwrap();
            assert!(
                reply.contains("Attempt to modify a readonly table"),
                "{hijack}: {reply}"
            );
        }
    }
    // cjson's configuration is state too: on Redis a script can lower the
    // decoder's depth for every later script; here it is read-only.
    for conn in &mut conns {
        let reply =
            String::from_utf8(conn.cmd(&eval("cjson.decode_max_depth(1) return 1")).await).unwrap();
        assert!(
            reply.starts_with("-ERR user_script:1: cjson configuration is read-only"),
            "{reply}"
        );
        assert_eq!(
            conn.cmd(&eval("return cjson.encode(cjson.decode('[[1]]'))"))
                .await,
            b"$5\r\n[[1]]\r\n"
        );
        assert_eq!(
            conn.cmd(&eval("return cjson.decode_max_depth()")).await,
            b":1000\r\n"
        );
    }
    for conn in &mut conns {
        assert_eq!(
            conn.cmd(&eval("return redis.call('GET', 'canary')")).await,
            b"$2\r\n41\r\n"
        );
        assert_eq!(conn.cmd(&eval("return ('abc'):len()")).await, b":3\r\n");
    }
    canary.check(&server).await;
}

// ------------------------------------------------ Lua: results and limits

#[test]
fn nested_and_self_referencing_results_match_redis() {
    // The test's own RESP decoder recurses once per level: it gets a big
    // stack. The server's workers keep tokio's default.
    std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap()
                .block_on(nested_results())
        })
        .unwrap()
        .join()
        .unwrap();
}

async fn nested_results() {
    let chain = |n: usize| {
        format!("local t={{}} local c=t for i=1,{n} do local n={{}} c[1]=n c=n end return t")
    };
    let scripts = [
        "local t={} t[1]=t return t".to_string(),
        "local t={} t[2]=1 t[1]=t return t".to_string(),
        chain(4500),
        chain(7993),
        chain(7994),
        chain(10000),
        "local t={} t[1]=t redis.setresp(3) return {map={a=t}}".to_string(),
        "local t={} t[1]=t redis.setresp(3) return {set={[t]=true}}".to_string(),
        "local t={} t[1]={ok='deep'} for i=1,8000 do t={t} end return t".to_string(),
    ];
    differential(scripts.iter().map(|s| eval(s)).collect()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_describing_endless_elements_is_refused_not_sent() {
    // Redis would walk 2^7995 elements and never answer (nor serve anyone).
    let server = TestServer::start().await;
    let canary = Canary::set(&server).await;
    let mut conn = server.raw().await;
    for script in [
        "local t={} t[1]=t t[2]=t return t",
        "local m={} local t={map=m} m[t]=t redis.setresp(3) return t",
        "local s=string.rep('x', 1024*1024) local t={} for i=1,600 do t[i]=s end return t",
    ] {
        assert_eq!(
            String::from_utf8(conn.cmd(&eval(script)).await).unwrap(),
            "-ERR the script's result is too large to send (more than 4194304 values or 512 MB)\r\n",
            "{script}"
        );
    }
    assert_eq!(
        conn.cmd(&eval("return {1, {2, {3}}}")).await,
        b"*2\r\n:1\r\n*2\r\n:2\r\n*1\r\n:3\r\n"
    );
    canary.check(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loops_that_catch_the_kill_error_are_still_killed() {
    let server = TestServer::start_with(|c| c.busy_reply_threshold_ms = 50).await;
    let canary = Canary::set(&server).await;
    let loops = [
        "local co=coroutine.wrap(function() while true do end end) co()",
        "local co=coroutine.create(function() while true do end end) while true do coroutine.resume(co) end",
        "while true do pcall(function() while true do end end) end",
        "while true do xpcall(function() while true do end end, function(e) return e end) end",
    ];
    for script in loops {
        let mut scripted = server.raw().await;
        scripted.send(&encode_command(&["EVAL", script, "0"])).await;
        let mut client = server.raw().await;
        let mut killed = false;
        for _ in 0..500 {
            let reply = client.line("SCRIPT KILL").await;
            if reply == "+OK\r\n" {
                killed = true;
                break;
            }
            assert_eq!(reply, "-NOTBUSY No scripts in execution right now.\r\n");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(killed, "{script}: SCRIPT KILL never took");
        let reply = String::from_utf8(scripted.reply().await).unwrap();
        assert!(
            reply.starts_with("-ERR Script killed by user with SCRIPT KILL..."),
            "{script}: {reply}"
        );
        assert_eq!(client.line("PING").await, "+PONG\r\n");
    }
    canary.check(&server).await;
}

// ------------------------------------------------- panics and client slots

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_sleep_inf_answers_like_redis_and_holds_no_slot() {
    let server = TestServer::start_with(|c| c.maxclients = 5).await;
    let canary = Canary::set(&server).await;
    for value in ["inf", "1e300", "-0"] {
        for _ in 0..10 {
            let mut conn = server.raw().await;
            // Redis: (long long)(inf * 1e6) is negative, nanosleep returns at once.
            assert_eq!(conn.line(&format!("DEBUG SLEEP {value}")).await, "+OK\r\n");
            // A connection still asleep would never answer QUIT; one that is
            // awake gives its slot back before it closes.
            conn.send(&encode_command(&["QUIT"])).await;
            assert_eq!(conn.read_until_closed().await, b"+OK\r\n");
        }
    }
    canary.check(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_command_is_contained_to_its_connection_and_frees_its_slot() {
    let server = TestServer::start_with(|c| c.maxclients = 5).await;
    let canary = Canary::set(&server).await;
    for _ in 0..20 {
        let mut conn = server.raw().await;
        assert_eq!(conn.line("SET inside 1").await, "+OK\r\n");
        conn.send(&encode_command(&["DEBUG", "PANIC"])).await;
        assert_eq!(
            conn.read_until_closed().await,
            b"-ERR internal error: the command failed unexpectedly and the connection will close\r\n"
        );
    }
    let mut conn = server.raw().await;
    let info = conn.line("INFO stats").await;
    assert!(info.contains("tally_contained_panics:20\r\n"), "{info}");
    assert!(
        conn.line("INFO clients")
            .await
            .contains("connected_clients:1\r\n"),
        "every panicked connection gave its slot back"
    );
    canary.check(&server).await;
}

// ---------------------------------------------------------------- memory

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_write_larger_than_what_is_left_is_refused() {
    let server = TestServer::start_with(|c| c.maxmemory = 8 * 1024 * 1024).await;
    let canary = Canary::set(&server).await;
    let mut conn = server.raw().await;
    let big = vec![b'x'; 20 * 1024 * 1024];
    assert_eq!(
        conn.cmd(&[&b"SET"[..], b"big", &big]).await,
        b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    );
    assert_eq!(conn.line("EXISTS big").await, ":0\r\n");
    // A small write still fits.
    assert_eq!(conn.line("SET small 1").await, "+OK\r\n");
    canary.check(&server).await;
}

/// Redis's Lua allocator never fails; tally's fails past lua-memory-limit,
/// and Redis's cmsgpack wrote through the NULL it got: `cmsgpack.pack` of
/// a value whose encoding passed the limit killed the process (found by
/// the lua_libraries fuzz target; vendor/lua-src patch 0103). Now it is
/// the limit's error, caught by pcall as Lua's own memory error, again and
/// again, and the VM goes on encoding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cmsgpack_past_the_lua_memory_limit_is_a_memory_error() {
    let server = TestServer::start_with(|c| c.lua_memory_limit = 8 * 1024 * 1024).await;
    let canary = Canary::set(&server).await;
    let mut conn = server.raw().await;
    let pack = "local s = string.rep('x', 1024 * 1024) local t = {} \
        for i = 1, 5 do t[i] = s end return #cmsgpack.pack(t, t, t)";
    // The reply any script gets when it allocates past the limit.
    let rep = "local s = string.rep('x', 1024 * 1024) return #string.rep(s, 20)";
    let expected = |script: &str| {
        format!(
            "-ERR Error running script {}, not enough memory\r\n",
            tally_server::scripting::vm::sha1(script.as_bytes())
        )
    };
    assert_eq!(
        String::from_utf8(conn.cmd(&eval(rep)).await).unwrap(),
        expected(rep)
    );
    for _ in 0..20 {
        let reply = String::from_utf8(conn.cmd(&eval(pack)).await).unwrap();
        assert_eq!(reply, expected(pack));
    }
    let caught = "local s = string.rep('x', 1024 * 1024) local t = {} \
        for i = 1, 5 do t[i] = s end \
        local ok, e = pcall(cmsgpack.pack, t, t, t) return {tostring(ok), e}";
    assert_eq!(
        conn.cmd(&eval(caught)).await,
        b"*2\r\n$5\r\nfalse\r\n$17\r\nnot enough memory\r\n"
    );
    assert_eq!(
        conn.cmd(&eval("return cmsgpack.pack({1, 2, 3}, 'ab')"))
            .await,
        b"$7\r\n\x93\x01\x02\x03\xa2ab\r\n"
    );
    canary.check(&server).await;
}

// ------------------------------------------------------------ error texts

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_echo_the_bytes_clients_sent_as_redis_does() {
    let commands: Vec<Vec<Vec<u8>>> = vec![
        vec![b"\xff\xfe".to_vec(), b"a\x00b".to_vec(), b"\xc3".to_vec()],
        vec![b"CONFIG".to_vec(), b"\xff".to_vec()],
        vec![b"OBJECT".to_vec(), b"\xff\r\nx".to_vec()],
        vec![
            b"CONFIG".to_vec(),
            b"SET".to_vec(),
            b"\xff".to_vec(),
            b"1".to_vec(),
        ],
        eval("error('\u{1}\\255\\254')"),
        eval("return redis.error_reply('\\255 bad')"),
        eval("return {err='ERR \\255'}"),
    ];
    differential(commands).await;
}
