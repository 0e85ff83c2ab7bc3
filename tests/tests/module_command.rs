//! MODULE on a server that loads no modules, beside redis-server without
//! any: LIST and HELP byte for byte, and LOAD, LOADEX and UNLOAD refused
//! under `enable-module-command no` (the default) and answered with
//! Redis's errors under `yes`. (COMMAND INFO MODULE is left out: Redis
//! lists the subcommands in its dict's order, which changes from one
//! start to the next.)

use tally_server::config::ProtectedAction;
use tally_tests::{assert_no_mismatch, compare_streams, script, RedisServer, TestServer};

const STREAM: &str = r#"
    MODULE LIST
    MODULE HELP
    MODULE help
    MODULE LOAD /nonexistent/module.so
    MODULE LOAD /nonexistent/module.so arg1 arg2
    MODULE LOADEX /nonexistent/module.so CONFIG name value ARGS a
    MODULE UNLOAD somemodule
    MODULE
    MODULE FOO
    MODULE LIST extra
    MODULE LOAD
    MODULE UNLOAD
    MODULE UNLOAD a b
    COMMAND INFO MODULE|LOAD MODULE|LIST MODULE|UNLOAD
    COMMAND DOCS MODULE|LOADEX
    HELLO 3
    MODULE LIST
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_answers_as_redis_without_modules() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    assert_no_mismatch(&compare_streams(redis.addr, tally.addr(), &script(STREAM)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_answers_as_redis_when_the_command_is_enabled() {
    let Some(redis) = RedisServer::start_with(&["--enable-module-command", "yes"]) else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    tally.handle.shared().config.write().enable_module_command = ProtectedAction::Yes;
    assert_no_mismatch(&compare_streams(redis.addr, tally.addr(), &script(STREAM)).await);
    // `local` lets a loopback client through, as Redis does.
    tally.handle.shared().config.write().enable_module_command = ProtectedAction::Local;
    let mut conn = tally.raw().await;
    assert_eq!(
        conn.line("MODULE UNLOAD x").await,
        "-ERR Error unloading module: no such module with that name\r\n"
    );
}
