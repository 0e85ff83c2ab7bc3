//! MULTI/EXEC/DISCARD/WATCH within one client. Every expected reply is the
//! one Redis 7.0.15 gave for the same commands, except where a comment
//! names a deliberate difference.

use crate::cmd::harness::Harness;

#[test]
fn exec_runs_the_queue_and_returns_every_reply() {
    Harness::new().check(&[
        (&["MULTI"], "+OK\r\n"),
        (&["SET", "k", "1"], "+QUEUED\r\n"),
        (&["INCR", "k"], "+QUEUED\r\n"),
        (&["EXEC"], "*2\r\n+OK\r\n:2\r\n"),
        (&["EXEC"], "-ERR EXEC without MULTI\r\n"),
        (&["DISCARD"], "-ERR DISCARD without MULTI\r\n"),
    ]);
}

#[test]
fn a_command_refused_while_queuing_aborts_exec() {
    Harness::new().check(&[
        (&["MULTI"], "+OK\r\n"),
        (
            &["SET", "k"],
            "-ERR wrong number of arguments for 'set' command\r\n",
        ),
        (&["INCR", "k"], "+QUEUED\r\n"),
        (
            &["EXEC"],
            "-EXECABORT Transaction discarded because of previous errors.\r\n",
        ),
        (&["GET", "k"], "$-1\r\n"),
    ]);
}

#[test]
fn multi_does_not_nest_and_watch_is_refused_inside_it() {
    Harness::new().check(&[
        (&["MULTI"], "+OK\r\n"),
        (&["MULTI"], "-ERR MULTI calls can not be nested\r\n"),
        (
            &["WATCH", "k"],
            "-ERR WATCH inside MULTI is not allowed\r\n",
        ),
        (&["DISCARD"], "+OK\r\n"),
        (&["WATCH", "k"], "+OK\r\n"),
        (&["MULTI"], "+OK\r\n"),
        (&["INCR", "k"], "+QUEUED\r\n"),
        (&["EXEC"], "*1\r\n:1\r\n"),
    ]);
}
