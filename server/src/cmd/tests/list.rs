//! LIST commands: both ends, positions, moves, the blocking forms.
//! Every expected reply is the one Redis 7.0.15 gave for the same commands,
//! except where a comment names a deliberate difference.

use crate::cmd::harness::Harness;

#[test]
fn pushes_and_pops_at_both_ends() {
    Harness::new().check(&[
        (&["RPUSH", "l", "a", "b", "c"], ":3\r\n"),
        (&["LPUSH", "l", "z"], ":4\r\n"),
        (
            &["LRANGE", "l", "0", "-1"],
            "*4\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
        ),
        (&["LPOP", "l"], "$1\r\nz\r\n"),
        (&["RPOP", "l", "2"], "*2\r\n$1\r\nc\r\n$1\r\nb\r\n"),
        (&["LLEN", "l"], ":1\r\n"),
        (&["LPOP", "l", "0"], "*0\r\n"),
        (
            &["LPOP", "l", "-1"],
            "-ERR value is out of range, must be positive\r\n",
        ),
        (&["RPOP", "l"], "$1\r\na\r\n"),
        (&["EXISTS", "l"], ":0\r\n"),
        (&["RPOP", "l"], "$-1\r\n"),
    ]);
}

#[test]
fn positions_inserts_and_trims_follow_redis() {
    Harness::new().check(&[
        (&["RPUSH", "l", "a", "b", "a", "b"], ":4\r\n"),
        (&["LINDEX", "l", "-1"], "$1\r\nb\r\n"),
        (&["LINDEX", "l", "10"], "$-1\r\n"),
        (&["LSET", "l", "10", "x"], "-ERR index out of range\r\n"),
        (&["LSET", "missing", "0", "x"], "-ERR no such key\r\n"),
        (&["LINSERT", "l", "BEFORE", "b", "q"], ":5\r\n"),
        (&["LINSERT", "l", "AFTER", "nope", "q"], ":-1\r\n"),
        (
            &["LRANGE", "l", "0", "-1"],
            "*5\r\n$1\r\na\r\n$1\r\nq\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\nb\r\n",
        ),
        (&["LREM", "l", "-1", "b"], ":1\r\n"),
        (&["LPOS", "l", "b"], ":2\r\n"),
        (&["LPOS", "l", "a", "RANK", "-1"], ":3\r\n"),
        (&["LTRIM", "l", "1", "1"], "+OK\r\n"),
        (&["LRANGE", "l", "0", "-1"], "*1\r\n$1\r\nq\r\n"),
    ]);
}

#[test]
fn moves_between_lists_and_blocking_forms_in_a_harness_do_not_block() {
    Harness::new().check(&[
        (&["RPUSH", "l", "q"], ":1\r\n"),
        (&["RPOPLPUSH", "l", "m"], "$1\r\nq\r\n"),
        (&["EXISTS", "l"], ":0\r\n"),
        (&["LMOVE", "m", "m", "LEFT", "RIGHT"], "$1\r\nq\r\n"),
        (&["LRANGE", "m", "0", "-1"], "*1\r\n$1\r\nq\r\n"),
        // A blocking form pops what is there; with nothing there the
        // harness (no connection to wait on) times it out at once.
        (&["BLPOP", "m", "0"], "*2\r\n$1\r\nm\r\n$1\r\nq\r\n"),
        (&["BLPOP", "m", "0"], "*-1\r\n"),
        (&["BLMOVE", "m", "n", "LEFT", "LEFT", "0"], "*-1\r\n"),
    ]);
}
