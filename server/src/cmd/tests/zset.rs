//! SORTED SET commands: ZADD options, ranges by rank, score and lex, pops.
//! Every expected reply is the one Redis 7.0.15 gave for the same commands,
//! except where a comment names a deliberate difference.

use crate::cmd::harness::Harness;

#[test]
fn zadd_options_refuse_their_incompatible_combinations() {
    Harness::new().check(&[
        (&["ZADD", "z", "1", "a", "2", "b"], ":2\r\n"),
        (
            &["ZADD", "z", "NX", "XX", "1", "a"],
            "-ERR XX and NX options at the same time are not compatible\r\n",
        ),
        (
            &["ZADD", "z", "GT", "LT", "1", "a"],
            "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n",
        ),
        (
            &["ZADD", "z", "INCR", "1", "a", "2", "b"],
            "-ERR INCR option supports a single increment-element pair\r\n",
        ),
        (&["ZADD", "z", "CH", "5", "a", "3", "c"], ":2\r\n"),
        (&["ZADD", "z", "XX", "INCR", "1", "nope"], "$-1\r\n"),
        (
            &["ZADD", "z", "nan", "a"],
            "-ERR value is not a valid float\r\n",
        ),
        (
            &["ZINCRBY", "z", "x", "a"],
            "-ERR value is not a valid float\r\n",
        ),
        (
            &["ZADD", "z", "1"],
            "-ERR wrong number of arguments for 'zadd' command\r\n",
        ),
    ]);
}

#[test]
fn ranges_by_rank_score_and_lex() {
    Harness::new().check(&[
        (&["ZADD", "z", "5", "a", "3.5", "b", "3", "c"], ":3\r\n"),
        (&["ZSCORE", "z", "a"], "$1\r\n5\r\n"),
        (&["ZINCRBY", "z", "1.5", "b"], "$1\r\n5\r\n"),
        (
            &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
            "*6\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\na\r\n$1\r\n5\r\n$1\r\nb\r\n$1\r\n5\r\n",
        ),
        (&["ZRANK", "z", "c"], ":0\r\n"),
        (&["ZREVRANGE", "z", "0", "0"], "*1\r\n$1\r\nb\r\n"),
        (&["ZCOUNT", "z", "(2", "+inf"], ":3\r\n"),
        (
            &["ZRANGEBYSCORE", "z", "-inf", "(5", "LIMIT", "0", "1"],
            "*1\r\n$1\r\nc\r\n",
        ),
        (
            &["ZRANGE", "z", "(a", "[c", "BYLEX"],
            "*3\r\n$1\r\nc\r\n$1\r\na\r\n$1\r\nb\r\n",
        ),
        (&["ZMSCORE", "z", "a", "nope"], "*2\r\n$1\r\n5\r\n$-1\r\n"),
    ]);
}

#[test]
fn pops_and_removals_empty_the_key() {
    Harness::new().check(&[
        (&["ZADD", "z", "1", "a", "2", "b"], ":2\r\n"),
        (&["ZREM", "z", "b", "nope"], ":1\r\n"),
        (&["ZPOPMIN", "z"], "*2\r\n$1\r\na\r\n$1\r\n1\r\n"),
        (&["ZCARD", "z"], ":0\r\n"),
        (&["EXISTS", "z"], ":0\r\n"),
        (&["ZPOPMIN", "z"], "*0\r\n"),
    ]);
}
