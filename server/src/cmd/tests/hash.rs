//! HASH commands: fields, counters, the key removed when emptied,
//! WRONGTYPE. Every expected reply is the one Redis 7.0.15 gave for the
//! same commands, except where a comment names a deliberate difference.

use crate::cmd::harness::Harness;

#[test]
fn hash_fields_are_set_counted_and_read_in_insertion_order() {
    Harness::new().check(&[
        (&["HSET", "h", "f1", "1", "f2", "2"], ":2\r\n"),
        (&["HSET", "h", "f1", "1"], ":0\r\n"),
        (&["HGET", "h", "f1"], "$1\r\n1\r\n"),
        (&["HGET", "h", "nope"], "$-1\r\n"),
        (
            &["HMGET", "h", "f1", "nope", "f2"],
            "*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n",
        ),
        (&["HLEN", "h"], ":2\r\n"),
        (
            &["HGETALL", "h"],
            "*4\r\n$2\r\nf1\r\n$1\r\n1\r\n$2\r\nf2\r\n$1\r\n2\r\n",
        ),
        (&["HSETNX", "h", "f2", "x"], ":0\r\n"),
        (&["HSTRLEN", "h", "f2"], ":1\r\n"),
        (&["HEXISTS", "h", "f1"], ":1\r\n"),
        (
            &["HSET", "h", "odd"],
            "-ERR wrong number of arguments for 'hset' command\r\n",
        ),
    ]);
}

#[test]
fn hash_counters_refuse_text_and_overflow() {
    Harness::new().check(&[
        (&["HSET", "h", "f1", "1", "f2", "2"], ":2\r\n"),
        (&["HINCRBY", "h", "f1", "10"], ":11\r\n"),
        (
            &["HINCRBY", "h", "f1", "x"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["HINCRBY", "h", "f2", "9223372036854775807"],
            "-ERR increment or decrement would overflow\r\n",
        ),
        (&["HINCRBYFLOAT", "h", "f3", "0.5"], "$3\r\n0.5\r\n"),
        (
            &["HINCRBYFLOAT", "h", "f3", "nan"],
            "-ERR value is not a valid float\r\n",
        ),
    ]);
}

#[test]
fn a_hash_emptied_by_hdel_is_gone_and_strings_are_the_wrong_type() {
    Harness::new().check(&[
        (&["HSET", "h", "f1", "1", "f2", "2"], ":2\r\n"),
        (&["HDEL", "h", "f1", "nope"], ":1\r\n"),
        (&["HDEL", "h", "f2"], ":1\r\n"),
        (&["EXISTS", "h"], ":0\r\n"),
        (&["SET", "s", "v"], "+OK\r\n"),
        (
            &["HGET", "s", "f"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (
            &["HSET", "s", "f", "v"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
    ]);
}
