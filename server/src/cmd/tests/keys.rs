//! Key commands: expiries and their options, RENAME/COPY/DEL, OBJECT
//! ENCODING. Every expected reply is the one Redis 7.0.15 gave for the same
//! commands, except where a comment names a deliberate difference.

use crate::cmd::harness::Harness;

#[test]
fn expire_options_compare_with_the_current_deadline() {
    Harness::new().check(&[
        (&["SET", "a", "1"], "+OK\r\n"),
        (&["EXPIRE", "a", "100"], ":1\r\n"),
        (&["TTL", "a"], ":100\r\n"),
        (&["PTTL", "a"], ":100000\r\n"),
        (&["EXPIRE", "a", "50", "GT"], ":0\r\n"),
        (&["EXPIRE", "a", "200", "LT"], ":0\r\n"),
        (&["EXPIRE", "a", "300", "NX"], ":0\r\n"),
        (&["EXPIRE", "a", "300", "XX"], ":1\r\n"),
        (
            &["EXPIRE", "a", "300", "NX", "XX"],
            "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
        ),
        (
            &["EXPIRE", "a", "abc"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["EXPIRE", "a", "9223372036854775807"],
            "-ERR invalid expire time in 'expire' command\r\n",
        ),
        (&["PERSIST", "a"], ":1\r\n"),
        (&["PERSIST", "a"], ":0\r\n"),
        (&["TTL", "a"], ":-1\r\n"),
        (&["TTL", "missing"], ":-2\r\n"),
        (&["EXPIRETIME", "a"], ":-1\r\n"),
    ]);
}

#[test]
fn a_deadline_in_the_past_deletes_the_key() {
    Harness::new().check(&[
        (&["SET", "d", "1"], "+OK\r\n"),
        (&["PEXPIREAT", "d", "1"], ":1\r\n"),
        (&["EXISTS", "d"], ":0\r\n"),
        (&["SET", "d", "1"], "+OK\r\n"),
        (&["EXPIRE", "d", "-5"], ":1\r\n"),
        (&["EXISTS", "d"], ":0\r\n"),
    ]);
}

#[test]
fn rename_copy_and_del_follow_redis() {
    Harness::new().check(&[
        (&["SET", "a", "1"], "+OK\r\n"),
        (&["TYPE", "a"], "+string\r\n"),
        (&["TYPE", "missing"], "+none\r\n"),
        (&["RENAME", "a", "b"], "+OK\r\n"),
        (&["EXISTS", "a", "b", "b"], ":2\r\n"),
        (&["RENAME", "nokey", "x"], "-ERR no such key\r\n"),
        (&["RENAMENX", "b", "b"], ":0\r\n"),
        (&["COPY", "b", "c"], ":1\r\n"),
        (&["COPY", "b", "c"], ":0\r\n"),
        (&["DEL", "b", "c", "missing"], ":2\r\n"),
    ]);
}

#[test]
fn object_encoding_names_the_string_encodings() {
    Harness::new().check(&[
        (&["OBJECT", "ENCODING", "missing"], "$-1\r\n"),
        (&["SET", "e", "12345"], "+OK\r\n"),
        (&["OBJECT", "ENCODING", "e"], "$3\r\nint\r\n"),
        (&["SET", "e", "hello"], "+OK\r\n"),
        (&["OBJECT", "ENCODING", "e"], "$6\r\nembstr\r\n"),
        (&["APPEND", "e", "!"], ":6\r\n"),
        // docs/compatibility.md: tally answers from the length, not the history (Redis: raw after APPEND).
        (&["OBJECT", "ENCODING", "e"], "$6\r\nembstr\r\n"),
    ]);
}
