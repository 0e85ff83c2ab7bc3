//! Scripting compared with redis-server byte for byte: EVAL/EVALSHA/SCRIPT,
//! conversions in both directions, error formats, the sandbox, and the
//! sliding-window limiter script.

use tally_tests::{assert_no_mismatch, compare_streams, RedisServer, TestServer};

/// lua/scripts/sliding_window.lua without its header comments: the same
/// logic in a text tally does not recognise, so tally runs it through Lua.
fn sliding_window_as_plain_lua() -> String {
    tally_lua::SCRIPTS[0]
        .source
        .lines()
        .filter(|line| !line.starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn eval(script: &str, keys: &[&str], args: &[&str]) -> Vec<Vec<u8>> {
    let mut command = vec![b"EVAL".to_vec(), script.as_bytes().to_vec()];
    command.push(keys.len().to_string().into_bytes());
    command.extend(keys.iter().map(|k| k.as_bytes().to_vec()));
    command.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    command
}

fn cmd(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

async fn run(commands: Vec<Vec<Vec<u8>>>) {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let mismatches = compare_streams(redis.addr, tally.addr(), &commands).await;
    assert_no_mismatch(&mismatches);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversions_and_errors_match_redis() {
    let scripts = [
        "return 1",
        "return 3.99",
        "return -3.99",
        "return 'hello'",
        "return true",
        "return false",
        "return nil",
        "return",
        "return {1, 2, nil, 4}",
        "return {1, 'a', {2, {3}}, true, false}",
        "return {ok='fine'}",
        "return {err='x'}",
        "return {err='ERR custom message'}",
        "return {1, {ok='s'}, {err='e'}}",
        "return redis.error_reply('My Error')",
        "return redis.error_reply('x')",
        "return redis.status_reply('fine')",
        "return redis.sha1hex('')",
        "return redis.sha1hex('tally')",
        "redis.call('SET', 'k', 0.1); return redis.call('GET', 'k')",
        "redis.call('SET', 'k', 10); return redis.call('GET', 'k')",
        "redis.call('SET', 'k', 1e20); return redis.call('GET', 'k')",
        "return redis.call('GET', {})",
        "return redis.call('NOSUCH')",
        "return redis.call()",
        "return redis.call('GET')",
        "return redis.call('CONFIG', 'GET', 'x')",
        "x = 1",
        "return y",
        "return print",
        "return os",
        "return loadfile",
        "return 'x' ..",
        "error('boom')",
        "error({err='custom'})",
        "local t = nil; return t.x",
        "redis.call('SET', 'n', 'v'); return redis.pcall('INCR', 'n')",
        "redis.call('SET', 'n', 'v'); return redis.call('INCR', 'n')",
        "redis.call('SET', 'n', 'v'); local x = redis.call('INCR', 'n')",
        "local ok, e = pcall(redis.call, 'NOSUCH'); return {tostring(ok), e}",
        "local ok, e = pcall(function() error('x') end); return e",
        "return redis.call('PING')",
        "return redis.call('INCRBY', 'c', 5)",
        "return redis.call('MGET', 'c', 'missing')",
        "return redis.call('EXISTS', 'missing')",
        "return redis.call('DBSIZE')",
        "return string.len(redis.call('INFO', 'keyspace')) > 0",
        "return tostring(0.1) .. ' ' .. tostring(1/3) .. ' ' .. tostring(100)",
        "return {math.floor(7.9), math.ceil(7.1), math.max(1, 5)}",
        "return {bit.band(0xff, 0x0f), bit.bor(1, 2), bit.bxor(3, 1), bit.lshift(1, 4), bit.rshift(-1, 28), bit.tohex(255), bit.tohex(-1, -4)}",
        "return string.format('%d %s %5.2f', 5, 'x', 3.14159)",
        "return redis.replicate_commands()",
        "redis.set_repl(redis.REPL_ALL); return redis.REPL_AOF",
        "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}",
        "redis.log(redis.LOG_WARNING, 'hello from a script'); return 1",
        "redis.setresp(3); return redis.call('GET', 'missing')",
        "redis.setresp(4)",
        "return type(KEYS) .. type(ARGV) .. #KEYS .. #ARGV",
        "#!lua\nerror('x')",
        "#!lua flags=no-writes\nreturn redis.call('SET', 'a', '1')",
        "#!lua flags=no-writes\nreturn redis.call('GET', 'a')",
        "#!lua flags=bogus\nreturn 1",
        "#!notlua\nreturn 1",
        "redis.call('SELECT', 1); redis.call('SET', 'in1', 'x'); return redis.call('GET', 'in1')",
    ];
    let mut commands: Vec<Vec<Vec<u8>>> = scripts.iter().map(|s| eval(s, &[], &[])).collect();
    commands.push(cmd(&["GET", "in1"]));
    commands.push(cmd(&["SELECT", "1"]));
    commands.push(cmd(&["GET", "in1"]));
    commands.push(cmd(&["SELECT", "0"]));
    commands.push(eval(
        "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2]}",
        &["a", "b"],
        &["x", "y"],
    ));
    commands.push(cmd(&["EVAL", "return 1", "-1"]));
    commands.push(cmd(&["EVAL", "return 1", "2", "a"]));
    commands.push(cmd(&["EVAL", "return 1", "x"]));
    commands.push(cmd(&["EVAL", "return 1"]));
    commands.push(cmd(&["EVAL_RO", "return redis.call('SET', 'a', '1')", "0"]));
    commands.push(cmd(&["EVAL_RO", "return redis.call('GET', 'a')", "0"]));
    run(commands).await;
}

/// Scripts past maxmemory (Redis's scriptVerifyOOM): a script flagged
/// allow-oom writes; any other is refused its first command that may grow
/// memory, and once it has written, its later writes go through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_past_maxmemory_match_redis() {
    let mut commands = vec![
        // An empty server is past `maxmemory 1` too: the call's own
        // arguments count.
        cmd(&["FLUSHALL"]),
        cmd(&["CONFIG", "SET", "maxmemory", "1"]),
        eval("redis.call('incr', 'x')", &[], &[]),
        cmd(&["CONFIG", "SET", "maxmemory", "0"]),
        cmd(&["SET", "x", "123"]),
        cmd(&["CONFIG", "SET", "maxmemory", "1"]),
    ];
    for (script, keys) in [
        ("redis.call('set', 'x', 1)\nreturn 1", &["x"][..]),
        ("return redis.call('get', 'x')", &["x"]),
        ("#!lua flags=\nreturn 1", &[]),
        (
            "#!lua flags=allow-oom\nredis.call('set', 'x', 1)\nreturn 1",
            &["x"],
        ),
        (
            "#!lua flags=no-writes\nredis.call('get', 'x')\nreturn 1",
            &[],
        ),
        // DEL may not grow memory: after it, the script has written.
        (
            "redis.call('del', 'x'); redis.call('set', 'x', 5); return redis.call('get', 'x')",
            &["x"],
        ),
        (
            "return {redis.pcall('set', 'x', 1), redis.pcall('set', 'x', 2)}",
            &["x"],
        ),
        (
            "redis.call('get', 'x'); return redis.call('rpush', 'l', 'a')",
            &["l"],
        ),
    ] {
        commands.push(eval(script, keys, &[]));
    }
    commands.push(cmd(&["CONFIG", "SET", "maxmemory", "0"]));
    commands.push(cmd(&["GET", "x"]));
    run(commands).await;
}

/// redis.sha1hex's arity and argument types, and redis.acl_check_cmd
/// (Redis 7.0) for the default user and for a user limited to SET on one
/// key: answers and error texts as Redis gives them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lib_helpers_match_redis() {
    let scripts = [
        "return redis.sha1hex()",
        "return redis.sha1hex(1, 2)",
        "return redis.sha1hex(nil)",
        "return redis.sha1hex({})",
        "return redis.sha1hex(1.5)",
        "return redis.sha1hex(12)",
        "return {pcall(redis.sha1hex)}",
        "return redis.acl_check_cmd('set', 'xx', 1)",
        "return redis.acl_check_cmd('get')",
        "return redis.acl_check_cmd('config', 'get', 'x')",
        "return redis.acl_check_cmd('config', 'nosuch')",
        "return redis.acl_check_cmd('invalid-cmd', 'arg')",
        "return redis.acl_check_cmd()",
        "return redis.acl_check_cmd('set', {})",
        "return {pcall(redis.acl_check_cmd, 'nosuch')}",
    ];
    let mut commands: Vec<Vec<Vec<u8>>> = scripts.iter().map(|s| eval(s, &[], &[])).collect();
    commands.push(cmd(&[
        "ACL",
        "SETUSER",
        "bob",
        "on",
        ">123",
        "+@scripting",
        "+set",
        "~xx",
    ]));
    commands.push(cmd(&["AUTH", "bob", "123"]));
    for (script, keys) in [
        ("return redis.acl_check_cmd('set', 'xx', 1)", &["xx"][..]),
        ("return redis.acl_check_cmd('hset', 'xx', 'f', 1)", &["xx"]),
        // A key the script was not given: only the check refuses it.
        ("return redis.acl_check_cmd('set', 'yy', 1)", &[]),
        ("return redis.acl_check_cmd('publish', 'ch', 'm')", &[]),
        ("return redis.acl_check_cmd('invalid-cmd', 'arg')", &[]),
    ] {
        commands.push(eval(script, keys, &[]));
    }
    commands.push(cmd(&["AUTH", "default", "x"]));
    commands.push(cmd(&["ACL", "DELUSER", "bob"]));
    run(commands).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_cache_commands_match_redis() {
    let sha = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"; // sha1("return 1")
    run(vec![
        cmd(&[
            "SCRIPT",
            "EXISTS",
            sha,
            "0000000000000000000000000000000000000000",
        ]),
        cmd(&["EVALSHA", sha, "0"]),
        cmd(&["SCRIPT", "LOAD", "return 1"]),
        cmd(&["SCRIPT", "EXISTS", sha]),
        cmd(&["SCRIPT", "EXISTS", &sha.to_uppercase()]),
        cmd(&["EVALSHA", sha, "0"]),
        cmd(&["EVALSHA", &sha.to_uppercase(), "0"]),
        cmd(&["EVALSHA_RO", sha, "0"]),
        cmd(&["EVALSHA", "abc", "0"]),
        cmd(&["SCRIPT", "LOAD", "return 'x' .."]),
        cmd(&["SCRIPT", "FLUSH"]),
        cmd(&["SCRIPT", "EXISTS", sha]),
        cmd(&["EVALSHA", sha, "0"]),
        cmd(&["EVAL", "return 2", "0"]),
        cmd(&[
            "SCRIPT",
            "EXISTS",
            "7f923f79fe76194c868d7e1d0820de36700eb649",
        ]),
        cmd(&["SCRIPT", "FLUSH", "ASYNC"]),
        cmd(&["SCRIPT", "FLUSH", "SYNC"]),
        cmd(&["SCRIPT", "FLUSH", "FOO"]),
        cmd(&["SCRIPT", "KILL"]),
        cmd(&["SCRIPT", "FOO"]),
        cmd(&["SCRIPT"]),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_native_sliding_window_matches_redis_running_lua() {
    // The script text as shipped: tally recognises it and runs its twin,
    // redis-server runs the Lua.
    let source = tally_lua::SCRIPTS[0].source;
    let sha = tally_lua::sha1_hex(source);
    let mut commands = vec![cmd(&["SCRIPT", "LOAD", source])];
    let now = 1_720_000_030;
    for i in 0..30 {
        let now = (now + i).to_string();
        commands.push(cmd(&[
            "EVALSHA", &sha, "2", "rl:n:1:c", "rl:n:1:p", "5", "60", &now, "1",
        ]));
    }
    commands.push(cmd(&["SET", "rl:n:2:p", "50"]));
    for i in 0..10 {
        let now = format!("{}.5", now + 3 * i);
        commands.push(cmd(&[
            "EVALSHA", &sha, "2", "rl:n:2:c", "rl:n:2:p", "100", "60", &now, "7",
        ]));
    }
    commands.push(cmd(&["GET", "rl:n:1:c"]));
    commands.push(cmd(&["TTL", "rl:n:1:c"]));
    commands.push(cmd(&["GET", "rl:n:2:c"]));
    commands.push(cmd(&["TTL", "rl:n:2:c"]));
    // Off the twin's path: the same text falls back to Lua in tally.
    commands.push(cmd(&[
        "EVALSHA", &sha, "2", "rl:n:3:c", "rl:n:3:p", "x", "60", "1", "1",
    ]));
    commands.push(cmd(&["SET", "rl:n:4:c", "3.5"]));
    commands.push(cmd(&[
        "EVALSHA", &sha, "2", "rl:n:4:c", "rl:n:4:p", "10", "60", "1", "1",
    ]));
    commands.push(cmd(&[
        "EVALSHA", &sha, "2", "rl:n:5:c", "rl:n:5:p", "10", "0", "1", "1",
    ]));
    commands.push(cmd(&[
        "EVALSHA", &sha, "1", "rl:n:6:c", "10", "60", "1", "1",
    ]));
    run(commands).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_sliding_window_script_matches_redis() {
    let mut commands = Vec::new();
    let script = sliding_window_as_plain_lua();
    let now = 1_720_000_030;
    for i in 0..30 {
        let args = ["5", "60", &(now + i).to_string(), "1"];
        commands.push(eval(&script, &["rl:u:1:c", "rl:u:1:p"], &args));
    }
    commands.push(cmd(&["SET", "rl:u:2:p", "50"]));
    for i in 0..10 {
        let args = ["100", "60", &format!("{}.5", now + 3 * i), "7"];
        commands.push(eval(&script, &["rl:u:2:c", "rl:u:2:p"], &args));
    }
    commands.push(cmd(&["GET", "rl:u:1:c"]));
    commands.push(cmd(&["TTL", "rl:u:1:c"]));
    commands.push(cmd(&["GET", "rl:u:2:c"]));
    // Off the happy path: non-numeric arguments and stored values.
    commands.push(eval(
        &script,
        &["rl:u:3:c", "rl:u:3:p"],
        &["x", "60", "1", "1"],
    ));
    commands.push(cmd(&["SET", "rl:u:4:p", "abc"]));
    commands.push(eval(
        &script,
        &["rl:u:4:c", "rl:u:4:p"],
        &["10", "60", "1", "1"],
    ));
    commands.push(cmd(&["SET", "rl:u:5:c", "3.5"]));
    commands.push(eval(
        &script,
        &["rl:u:5:c", "rl:u:5:p"],
        &["10", "60", "1", "1"],
    ));
    run(commands).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cjson_matches_redis() {
    let scripts = [
        "return cjson.encode({1, 2, 3})",
        "return cjson.encode({a = 1})",
        "return cjson.encode({})",
        "return cjson.encode('a/b\"c\\n\\1')",
        "return cjson.encode(0.1)",
        "return cjson.encode(1/3)",
        "return cjson.encode(1e20)",
        "return cjson.encode({1, nil, 3})",
        "return cjson.encode({[1] = 1, [100] = 2})",
        "return cjson.encode({x = {y = {1, 2}}, z = true, w = 'v', n = 5})",
        "return cjson.encode({[3] = 'c', [1] = 'a', [2] = 'b'})",
        "return cjson.encode({[2.5] = 'x'})",
        "return cjson.encode(function() end)",
        "return cjson.encode(cjson.null)",
        "return cjson.encode({a = cjson.null})",
        "return cjson.decode('[1,2,{\"a\":\"b\"}]')[3].a",
        "return tostring(cjson.decode('{\"a\":null}').a == cjson.null)",
        "return cjson.decode('\"x\"')",
        "return cjson.decode('5.5')",
        "return cjson.encode(cjson.decode('{\"k\":[1,2,\"s\"]}'))",
        "return {cjson.decode('[true,false]')[1], cjson.decode('[true,false]')[2]}",
        "local ok, e = pcall(cjson.encode, function() end); return e",
        // Decoding as lua-cjson does: its errors, its nesting limit (1000),
        // strtod numbers, bytes passed through.
        "return cjson.encode(cjson.decode(string.rep('[',200)..string.rep(']',200)))",
        "return cjson.encode(cjson.decode(string.rep('[',1000)..string.rep(']',1000)))",
        "return cjson.decode(string.rep('[',1001)..string.rep(']',1001))",
        "return cjson.decode('\"\\255\\254\"')",
        "return cjson.decode('\"' .. string.char(255, 254) .. '\"')",
        "return tostring(cjson.decode('1e400'))",
        "return tostring(cjson.decode('-1e400'))",
        "return tostring(cjson.decode('0x10'))",
        "return cjson.decode('[1,2')",
        "return cjson.decode('[1,]')",
        "return cjson.decode('')",
        "return cjson.decode('{\"a\":1,\"a\":2}').a",
        "return cjson.decode('\"\\ud800\"')",
        "return cjson.decode('\"a\\u0041b\"')",
        "return cjson.decode('nan')",
        "return {cjson._NAME, cjson._VERSION, type(cjson.new)}",
        "return cjson.encode(cjson.encode_max_depth())",
        "return cjson.encode(string.rep('[', 1))",
        "local t = {} t[1] = t return cjson.encode(t)",
    ];
    run(scripts.iter().map(|s| eval(s, &[], &[])).collect()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn function_flush_matches_redis() {
    run(vec![
        cmd(&["FUNCTION", "FLUSH"]),
        cmd(&["FUNCTION", "FLUSH", "ASYNC"]),
        cmd(&["FUNCTION", "FLUSH", "sync"]),
        cmd(&["FUNCTION", "FLUSH", "foo"]),
        cmd(&["FUNCTION", "FLUSH", "ASYNC", "x"]),
        cmd(&["FUNCTION"]),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bit_struct_and_cmsgpack_match_redis() {
    let scripts = [
        "return bit.tohex(255,0)",
        "return bit.tohex(255)",
        "return bit.tohex(255,-3)",
        "return bit.tohex(-1, 9)",
        "return bit.tobit(1e300)",
        "return bit.band(1e300, 1)",
        "return bit.tobit(2^53+1)",
        "return bit.bor('a')",
        "return bit.bor('12', 1)",
        "return bit.tohex({})",
        "return bit.tobit(-1e300)",
        "return bit.tobit(1e15)",
        "return bit.lshift(1, 40)",
        "return bit.tobit(0/0)",
        "return bit.tobit(1/0)",
        "return bit.bnot(nil)",
        "return bit.tohex(1, 1e300)",
        "return {bit.arshift(-256, 4), bit.rol(1, 33), bit.bswap(1)}",
        "local f = bit.band return f('x')",
        "return struct.pack('>I2', 258)",
        "return {struct.unpack('>I2', struct.pack('>I2', 258))}",
        "return struct.size('>I2i4')",
        "return struct.pack('x')",
        "return struct.unpack('>I4', 'ab')",
        "return cmsgpack.pack(1, 'a', {1, 2}, {k = 'v'}, true, 1.5)",
        "return cmsgpack.unpack(cmsgpack.pack({1, 2, 3}))",
        "return {cmsgpack.unpack(cmsgpack.pack(1, 2))}",
        "return cmsgpack.unpack('\\193')",
        "return type(cmsgpack.pack)",
    ];
    run(scripts.iter().map(|s| eval(s, &[], &[])).collect()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_inside_transactions_match_redis() {
    let window = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../lua/scripts/multi_limit.lua"
    ))
    .unwrap();
    let sha = tally_lua::sha1_hex(&window);
    run(vec![
        cmd(&["SET", "k", "1"]),
        cmd(&["MULTI"]),
        cmd(&["INCR", "k"]),
        eval("return redis.call('INCR', KEYS[1])", &["k"], &[]),
        eval("return redis.call('GET', 'undeclared')", &[], &[]),
        eval("return redis.error_reply('mine')", &[], &[]),
        eval("return redis.call('NOSUCH')", &[], &[]),
        eval(
            "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('HSET', KEYS[1], 'f', 'v')",
            &["k"],
            &["x"],
        ),
        cmd(&["GET", "k"]),
        cmd(&["EXEC"]),
        // The known multi-limit script (native on tally) queued with others.
        cmd(&["SCRIPT", "LOAD", &window]),
        cmd(&["MULTI"]),
        cmd(&[
            "EVALSHA",
            &sha,
            "2",
            "rl:{u}:*:c",
            "rl:{u}:*:p",
            "10",
            "60",
            "3",
        ]),
        // (Allowed calls only: a denial's retry_after counts seconds, which
        // could tick between the two servers' replies.)
        cmd(&[
            "EVALSHA",
            &sha,
            "2",
            "rl:{u}:*:c",
            "rl:{u}:*:p",
            "10",
            "60",
            "2",
        ]),
        cmd(&["EVALSHA", "0000000000000000000000000000000000000000", "0"]),
        cmd(&["GET", "rl:{u}:*:c"]),
        cmd(&["EXEC"]),
        cmd(&["MULTI"]),
        eval("return 1", &[], &[]),
        cmd(&["DISCARD"]),
    ])
    .await;
}
