//! SET commands: intset to hashtable, intersections, differences, moves.
//! Every expected reply is the one Redis 7.0.15 gave for the same commands,
//! except where a comment names a deliberate difference.

use crate::cmd::harness::Harness;

#[test]
fn small_integer_sets_are_intsets_until_a_string_joins() {
    Harness::new().check(&[
        (&["SADD", "s", "3", "1", "2", "1"], ":3\r\n"),
        (
            &["SMEMBERS", "s"],
            "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n",
        ),
        (&["SCARD", "s"], ":3\r\n"),
        (&["SISMEMBER", "s", "2"], ":1\r\n"),
        (&["SMISMEMBER", "s", "1", "9"], "*2\r\n:1\r\n:0\r\n"),
        (&["OBJECT", "ENCODING", "s"], "$6\r\nintset\r\n"),
        (&["SADD", "s", "x"], ":1\r\n"),
        (&["OBJECT", "ENCODING", "s"], "$9\r\nhashtable\r\n"),
        (&["SREM", "s", "x", "nope"], ":1\r\n"),
        (&["SET", "str", "v"], "+OK\r\n"),
        (
            &["SADD", "str", "a"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
    ]);
}

#[test]
fn intersections_differences_and_moves() {
    Harness::new().check(&[
        (&["SADD", "s", "1", "2", "3"], ":3\r\n"),
        (&["SADD", "t", "2", "3", "4"], ":3\r\n"),
        (&["SINTERSTORE", "i", "s", "t"], ":2\r\n"),
        (&["SMEMBERS", "i"], "*2\r\n$1\r\n2\r\n$1\r\n3\r\n"),
        (&["SINTERCARD", "2", "s", "t"], ":2\r\n"),
        (
            &["SINTERCARD", "3", "s", "t"],
            "-ERR Number of keys can't be greater than number of args\r\n",
        ),
        (&["SINTERCARD", "2", "s", "t", "LIMIT", "1"], ":1\r\n"),
        (
            &["SINTERCARD", "0", "s"],
            "-ERR numkeys should be greater than 0\r\n",
        ),
        (&["SDIFFSTORE", "d", "s", "t"], ":1\r\n"),
        (&["SMEMBERS", "d"], "*1\r\n$1\r\n1\r\n"),
        (&["SMOVE", "s", "t", "1"], ":1\r\n"),
        (&["SCARD", "t"], ":4\r\n"),
        (&["SMOVE", "s", "t", "9"], ":0\r\n"),
    ]);
}
