//! STRING commands: SET and its options, in-place edits, counters,
//! MSET/MGET. Every expected reply is the one Redis 7.0.15 gave for the
//! same commands, except where a comment names a deliberate difference.

use crate::cmd::harness::Harness;

#[test]
fn set_takes_nx_xx_get_and_refuses_conflicting_or_bad_expiries() {
    Harness::new().check(&[
        (&["SET", "k", "v"], "+OK\r\n"),
        (&["SET", "k", "v2", "NX"], "$-1\r\n"),
        (&["SET", "k", "v3", "XX", "GET"], "$1\r\nv\r\n"),
        (&["GETSET", "k", "x"], "$2\r\nv3\r\n"),
        (
            &["SET", "k", "v", "EX", "0"],
            "-ERR invalid expire time in 'set' command\r\n",
        ),
        (
            &["SET", "k", "v", "EX", "10", "PX", "10"],
            "-ERR syntax error\r\n",
        ),
        (
            &["SET", "k", "v", "KEEPTTL", "EX", "10"],
            "-ERR syntax error\r\n",
        ),
        (&["SETNX", "k", "again"], ":0\r\n"),
        (
            &["SETEX", "k", "-1", "v"],
            "-ERR invalid expire time in 'setex' command\r\n",
        ),
        (&["GETEX", "k", "PERSIST"], "$1\r\nx\r\n"),
        (&["GETDEL", "k"], "$1\r\nx\r\n"),
        (&["GETDEL", "k"], "$-1\r\n"),
    ]);
}

#[test]
fn strings_are_edited_in_place_by_offset() {
    Harness::new().check(&[
        (&["SET", "k", "x"], "+OK\r\n"),
        (&["APPEND", "k", "yz"], ":3\r\n"),
        (&["STRLEN", "k"], ":3\r\n"),
        (&["GETRANGE", "k", "0", "1"], "$2\r\nxy\r\n"),
        (&["SUBSTR", "k", "0", "-1"], "$3\r\nxyz\r\n"),
        (&["SETRANGE", "k", "1", "AB"], ":3\r\n"),
        (&["GET", "k"], "$3\r\nxAB\r\n"),
        (
            &["SETRANGE", "k", "-1", "x"],
            "-ERR offset is out of range\r\n",
        ),
    ]);
}

#[test]
fn counters_refuse_text_and_overflow_in_both_directions() {
    Harness::new().check(&[
        (&["SET", "k", "xAB"], "+OK\r\n"),
        (&["INCR", "k"], "-ERR value is not an integer or out of range\r\n"),
        (&["SET", "n", "9223372036854775807"], "+OK\r\n"),
        (&["INCR", "n"], "-ERR increment or decrement would overflow\r\n"),
        (&["DECRBY", "n", "1"], ":9223372036854775806\r\n"),
        (&["INCRBY", "n", "-9223372036854775808"], ":-2\r\n"),
        (&["DECRBY", "n", "-9223372036854775808"], "-ERR decrement would overflow\r\n"),
        (&["INCRBYFLOAT", "f", "1.5"], "$3\r\n1.5\r\n"),
        (&["INCRBYFLOAT", "f", "abc"], "-ERR value is not a valid float\r\n"),
        (&["INCRBYFLOAT", "f", "1e400"], "$401\r\n10000000000000000000281880683947586514586453433629052038625910693539685534008629862039363994848324160522094053927317616200295822777259255734023828976593340661017797447434546173917862448116674971723778943824391593338047470675026246684401359237513603830343735485505244955964979021825038280091068414947402456898653040951017512658092615827588920183472511643316591362664138176309734806343732497430221946880\r\n"),
    ]);
}

#[test]
fn mset_msetnx_and_mget_work_on_many_keys() {
    Harness::new().check(&[
        (&["MSET", "a", "1", "b", "2"], "+OK\r\n"),
        (
            &["MGET", "a", "b", "missing"],
            "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n",
        ),
        (&["MSETNX", "a", "3", "c", "4"], ":0\r\n"),
        (&["MGET", "c"], "*1\r\n$-1\r\n"),
        (
            &["MSET", "a"],
            "-ERR wrong number of arguments for 'mset' command\r\n",
        ),
    ]);
}
