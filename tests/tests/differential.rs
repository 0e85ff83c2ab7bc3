//! Differential tests: the same command streams go to a real redis-server and
//! to tally; every reply must match byte for byte, except the deliberate
//! differences listed in docs/compatibility.md (none of which these streams
//! exercise).

use tally_tests::assert_script_matches_redis;

async fn run(text: &str) {
    assert_script_matches_redis(text).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strings_and_counters_match_redis() {
    run(r#"
        GET missing
        SET k v
        GET k
        SET k v2 NX
        SET k v3 XX
        GET k
        SET k v4 NX GET
        SET k v5 XX GET
        SET new v NX GET
        SET k v EX 100
        TTL k
        SET k v PX 100000
        TTL k
        SET k v KEEPTTL
        TTL k
        SET k v EX 0
        SET k v EX -1
        SET k v EX 9223372036854775807
        SET k v PX 9223372036854775807
        SET k v EX notanumber
        SET k v EX 10 PX 10
        SET k v NX XX
        SET k v KEEPTTL EX 10
        SET k v FOO
        SET k v EXAT 1
        GET k
        SET k
        SETNX k a
        SETNX k b
        GET k
        SETEX s 100 v
        TTL s
        SETEX s 0 v
        SETEX s -5 v
        SETEX s x v
        PSETEX p 100000 v
        TTL p
        MSET a 1 b 2 c 3
        MGET a b c missing
        MSET a 1 b
        MSETNX a 1 z 2
        MSETNX y 1 z 2
        MGET y z
        GETSET a 10
        GETSET nothere 1
        GETDEL a
        GETDEL a
        GETEX b EX 100
        TTL b
        GETEX b PERSIST
        TTL b
        GETEX b EX 10 PERSIST
        GETEX b FOO
        GETEX missing EX 10
        INCR counter
        INCR counter
        INCRBY counter 10
        DECR counter
        DECRBY counter 5
        DECRBY counter -9223372036854775808
        INCRBY counter notanumber
        INCRBY counter 9223372036854775807
        SET big 9223372036854775807
        INCR big
        SET small -9223372036854775808
        DECR small
        SET str hello
        INCR str
        SET spaced " 1"
        SET lead 01
        INCR lead
        SET neg -0
        INCR neg
        INCRBYFLOAT f 1.5
        INCRBYFLOAT f 0.1
        INCRBYFLOAT f 12345.6
        INCRBYFLOAT f -12347.2
        INCRBYFLOAT f abc
        INCRBYFLOAT f inf
        INCRBYFLOAT str 1
        SET e 1e3
        INCRBYFLOAT e 1
        INCRBYFLOAT counter 0.5
        APPEND ap hello
        APPEND ap " world"
        GET ap
        APPEND counter 1
        GET counter
        STRLEN ap
        STRLEN missing
        STRLEN counter
        GETRANGE ap 0 4
        GETRANGE ap -5 -1
        GETRANGE ap 5 3
        GETRANGE ap -1 -5
        GETRANGE ap 0 100
        GETRANGE missing 0 1
        GETRANGE ap x 1
        SUBSTR ap 1 3
        SETRANGE ap 6 WORLD
        GET ap
        SETRANGE sr 5 x
        GET sr
        SETRANGE sr -1 x
        SETRANGE empty 3 ""
        EXISTS empty
        SETRANGE counter 0 9
        GET counter
        SETRANGE ap 536870911 x
        SETRANGE ap 536870912 x
        SET counter2 12345
        SETRANGE counter2 30 tail
        GET counter2
        SET long aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa EX 100
        SETRANGE long 3 XYZ
        GET long
        TTL long
        SETRANGE long 40 end
        GET long
        STRLEN long
        TTL long
        SETRANGE fresh 25 x
        GET fresh
        STRLEN fresh
        SETRANGE fresh 0 12345678901234567890123456
        GET fresh
        INCR fresh
    "#)
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyspace_commands_match_redis() {
    run(r#"
        MSET a 1 b 2 c 3
        DEL a b missing
        DEL a
        UNLINK c
        SET x 1
        EXISTS x x missing
        TOUCH x missing
        EXPIRE x 100
        TTL x
        EXPIRE x 100 NX
        EXPIRE x 200 XX
        TTL x
        EXPIRE x 50 GT
        EXPIRE x 500 GT
        TTL x
        EXPIRE x 600 LT
        EXPIRE x 100 LT
        TTL x
        EXPIRE x 10 NX XX
        EXPIRE x 10 GT LT
        EXPIRE x 10 FOO
        EXPIRE x abc
        EXPIRE x 9223372036854775807
        EXPIRE x -9223372036854775808
        PEXPIRE x 9223372036854775807
        EXPIRE missing 10
        PERSIST x
        PERSIST x
        TTL x
        EXPIRE x 10 XX
        EXPIRE x 10 GT
        EXPIRE x 10 LT
        TTL x
        EXPIREAT x 1
        EXISTS x
        SET y 1
        PEXPIREAT y 99999999999999
        PEXPIRETIME y
        EXPIRETIME y
        EXPIRETIME missing
        PTTL missing
        SET nottl 1
        TTL nottl
        PTTL nottl
        EXPIRETIME nottl
        PEXPIRE y -1
        EXISTS y
        TYPE nottl
        TYPE missing
        SET r1 v
        EXPIRE r1 100
        RENAME r1 r2
        TTL r2
        GET r2
        EXISTS r1
        RENAME missing r3
        RENAME r2 r2
        SET r4 other
        RENAMENX r2 r4
        RENAMENX r2 r5
        RENAMENX r5 r5
        RENAMENX missing r6
        COPY r5 r6
        GET r6
        COPY r5 r6
        COPY r5 r6 REPLACE
        COPY r5 r5
        COPY missing r7
        COPY r5 r7 DB 1
        COPY r5 r7 DB 99
        COPY r5 r7 DB x
        COPY r5 r7 FOO
        MOVE r5 1
        MOVE r5 1
        MOVE r6 0
        MOVE r6 99
        SELECT 1
        GET r5
        GET r7
        SELECT 0
        SELECT 99
        SELECT -1
        SELECT x
        DBSIZE
        SWAPDB 0 1
        DBSIZE
        GET r5
        SWAPDB 0 1
        SWAPDB 0 99
        SWAPDB x 0
        SWAPDB 0 x
        FLUSHDB
        DBSIZE
        FLUSHDB ASYNC
        FLUSHDB SYNC
        FLUSHDB FOO
        FLUSHDB SYNC FOO
        FLUSHALL
        FLUSHALL FOO
        RANDOMKEY
        SET only 1
        RANDOMKEY
        KEYS *
        KEYS o?ly
        KEYS x*
        SCAN 0 COUNT 100
        SCAN 0 MATCH o* COUNT 100
        SCAN 0 TYPE string COUNT 100
        SCAN 0 TYPE hash COUNT 100
        SCAN 0 COUNT 0
        SCAN 0 COUNT x
        SCAN 0 FOO
        SCAN abc
        SET n 12
        OBJECT ENCODING n
        SET s hello
        OBJECT ENCODING s
        SET l aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
        OBJECT ENCODING l
        OBJECT ENCODING missing
        OBJECT REFCOUNT n
        OBJECT REFCOUNT s
        OBJECT REFCOUNT l
        OBJECT REFCOUNT missing
        SET zero 0
        SET top 9999
        SET past 10000
        SET neg -1
        SET padded 0123
        INCR counter
        RPUSH list a
        OBJECT REFCOUNT zero
        OBJECT REFCOUNT top
        OBJECT REFCOUNT past
        OBJECT REFCOUNT neg
        OBJECT REFCOUNT padded
        OBJECT REFCOUNT counter
        OBJECT REFCOUNT list
        OBJECT REFCOUNT
        OBJECT FREQ n
        OBJECT FREQ list
        OBJECT FREQ missing
        OBJECT FREQ a b
        OBJECT FOO
        OBJECT
    "#)
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_and_connection_commands_match_redis() {
    run(r#"
        PING
        PING hello
        PING a b
        ECHO hi
        ECHO
        FOO
        FOO bar baz
        GET
        GET a b
        SET a
        CONFIG
        CONFIG FOO
        CONFIG GET maxmemory
        CONFIG GET maxmemory-policy
        CONFIG GET save
        CONFIG GET appendonly
        CONFIG GET databases
        CONFIG SET nosuchparam 1
        CONFIG SET maxmemory
        CLIENT
        CLIENT FOO
        CLIENT SETNAME my-name
        CLIENT GETNAME
        CLIENT SETNAME "bad name"
        CLIENT SETNAME
        CLIENT KILL 1.2.3.4:5
        CLIENT KILL ID 999999
        CLIENT KILL ID abc
        CLIENT LIST TYPE foo
        AUTH foo
        AUTH default foo
        AUTH a b c
        HELLO 4
        HELLO x
        HELLO 2 FOO
        HELLO 3 AUTH default
        SELECT 0
        WAIT 0 0
        WAIT 0 -1
        WAIT x 0
        COMMAND GETKEYS GET a
        COMMAND GETKEYS MSET a 1 b 2
        COMMAND GETKEYS PING
        COMMAND GETKEYS FOO
        COMMAND GETKEYS GET
        COMMAND COUNTX
        SHUTDOWN ABORT
        SHUTDOWN FOO
        MSET a 1 b 2
        CLIENT GETNAME
        GET a
        GET missing
        MGET a missing
        CONFIG GET maxmemory
        GET missing
    "#)
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_match_redis() {
    run(r#"
        MULTI
        SET a 1
        INCR a
        INCRBY a 10
        PTTL a
        EXEC
        EXEC
        DISCARD
        MULTI
        MULTI
        SET b 2
        EXEC
        MULTI
        FOO
        SET c 3
        EXEC
        GET c
        MULTI
        GET
        EXEC
        MULTI
        SET d 4
        DISCARD
        GET d
        SET s x
        MULTI
        INCR s
        SET s y
        EXEC
        GET s
        MULTI
        SET k v EX 100
        TTL k
        PING
        MGET a b k
        DEL a
        EXEC
        MULTI
        SELECT 1
        SET in1 v
        SELECT 0
        GET in1
        EXEC
        SELECT 1
        GET in1
        SELECT 0
        MULTI
        FLUSHDB
        DBSIZE
        EXEC
        MULTI
        EXEC
    "#)
    .await;
}

/// The exact-behaviour items of the hardening issue: strtod scores, SET
/// option rules, CONFIG SET parsing and ranges, COMMAND GETKEYS of counted
/// keys, EXEC refused in subscribe mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardening_edge_cases_match_redis() {
    run(r#"
        ZADD z 0x10 a
        ZADD z 1e400 b
        ZADD z 1e-400 c
        ZADD z 1e-310 d
        ZADD z 0x1p3 e
        ZADD z inf f
        ZADD z -INFINITY g
        ZADD z nan h
        ZINCRBY z 1e400 a
        ZINCRBY z 0x10 a
        ZRANGE z 0 -1 WITHSCORES
        ZRANGEBYSCORE z 1e400 +inf
        ZRANGEBYSCORE z (0x10 +inf
        ZCOUNT z -1e400 1e400
        ZCOUNT z 1e-400 1
        SET k v EX 10 EX 20
        TTL k
        SET k v EX 10 PX 20
        SET k v PX 10 PX 20000
        SET k v EX abc FOO
        SET k v EX abc
        SET k v KEEPTTL KEEPTTL
        SET k v KEEPTTL EX 10
        SET k v EX 10 KEEPTTL
        SET k v EXAT 10 EXAT 99999999999
        TTL k
        GETEX k EX 10 EX 20
        GETEX k PERSIST PERSIST
        GETEX k EX 10 PERSIST
        CONFIG SET timeout 99999999999
        CONFIG SET timeout -1
        CONFIG SET maxmemory 1gb maxmemory 2gb
        CONFIG SET timeout 10 timeout 20
        CONFIG SET lua-time-limit 5000 busy-reply-threshold 5000
        CONFIG SET maxclients 0
        CONFIG SET maxclients abc
        CONFIG SET proto-max-bulk-len 1
        CONFIG SET proto-max-bulk-len 99999999999999999999999gb
        CONFIG SET timeout abc nosuch 1
        CONFIG SET hz -1
        CONFIG SET busy-reply-threshold -5
        CONFIG SET maxmemory 99999999999999999999999gb
        CONFIG GET maxmemory
        CONFIG SET maxmemory mb
        CONFIG GET maxmemory
        CONFIG SET timeout 0
        CONFIG GET list-compress-depth
        CONFIG GET proc-title-template
        CONFIG GET MAXMEMORY
        CONFIG GET Maxmemory maxmemory
        CONFIG GET KEY-LOAD-DELAY
        CONFIG GET key-load-*
        CONFIG GET rdb-key-save-delay
        CONFIG SET rdb-key-save-delay -5
        CONFIG GET rdb-key-save-delay
        CONFIG SET watchdog-period -1
        CONFIG SET loading-process-events-interval-bytes 1023
        CONFIG GET use-exit-on-panic
        CONFIG SET proc-title-template {title}
        CONFIG SET proc-title-template {foo}
        CONFIG SET proc-title-template {title
        CONFIG SET proc-title-template {
        CONFIG SET proc-title-template {server-mode}
        CONFIG SET proc-title-template {unixsocket}
        CONFIG SET proc-title-template {{title}}x
        CONFIG SET proc-title-template x}
        CONFIG SET proc-title-template {title}-{port}-{tls-port}-{config-file}-{listen-addr}
        CONFIG GET proc-title-template
        CONFIG GET replica-ignore-disk-write-errors
        CONFIG SET replica-ignore-disk-write-errors maybe
        CONFIG SET replica-ignore-disk-write-errors yes
        CONFIG GET replica-ignore-disk-write-errors
        CONFIG GET list-max-listpack-size
        CONFIG SET list-compress-depth -1
        CONFIG SET list-compress-depth 2147483648
        CONFIG SET list-max-ziplist-size -2147483649
        CONFIG SET list-max-ziplist-size abc
        CONFIG SET list-max-listpack-size 5
        CONFIG GET list-max-ziplist-size
        CONFIG SET list-compress-depth 3 list-max-ziplist-size -2147483648
        CONFIG GET list-compress-depth
        CONFIG GET list-max-listpack-size
        CONFIG SET list-compress-depth 1 list-compress-depth 2
        COMMAND GETKEYS EVAL x 5 a
        COMMAND GETKEYS EVAL x 1 a
        COMMAND GETKEYS EVAL x -1 a
        COMMAND GETKEYS EVAL x 1x a
        COMMAND GETKEYS EVAL x
        COMMAND GETKEYS EVALSHA_RO abc 2 a b
        COMMAND GETKEYS SINTERCARD 0 a
        COMMAND GETKEYS SINTERCARD 2 a b
        COMMAND GETKEYS PING a b
        COMMAND GETKEYSANDFLAGS SET k1 v1
        COMMAND GETKEYSANDFLAGS SET k1 v1 get
        COMMAND GETKEYSANDFLAGS MSET k1 v1 k2 v2
        COMMAND GETKEYSANDFLAGS LMOVE k1 k2 left right
        COMMAND GETKEYSANDFLAGS SORT k1 store k2
        COMMAND GETKEYSANDFLAGS SORT_RO k1 BY x
        COMMAND GETKEYSANDFLAGS BITFIELD k GET u8 0
        COMMAND GETKEYSANDFLAGS BITFIELD k GET u8 0 INCRBY u8 0 1
        COMMAND GETKEYSANDFLAGS MIGRATE h 1 k 0 5
        COMMAND GETKEYSANDFLAGS ZUNIONSTORE d 2 a b
        COMMAND GETKEYSANDFLAGS BLMPOP 0 2 a b LEFT
        COMMAND GETKEYSANDFLAGS EVAL x 2 a b
        COMMAND GETKEYSANDFLAGS EVAL x 0
        COMMAND GETKEYSANDFLAGS OBJECT ENCODING k
        COMMAND GETKEYSANDFLAGS SPUBLISH c m
        COMMAND GETKEYSANDFLAGS ZADD k 1 a
        COMMAND GETKEYSANDFLAGS SINTERCARD 3 a b
        COMMAND GETKEYSANDFLAGS GET
        COMMAND GETKEYSANDFLAGS FOO
        COMMAND HELP
        EVALSHA_RO abcdefabcdefabcdefabcdefabcdefabcdefabcd 9223372036854775807
        EVAL x 9223372036854775807
        MULTI
        SET queued 1
        EXEC x
        EXEC
        GET queued
        SUBSCRIBE ch
        EXEC
        MULTI
        PING
        UNSUBSCRIBE
        EXEC
    "#)
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lcs_matches_redis() {
    run(r#"
        MSET {l}a ohmytext {l}b mynewtext
        LCS {l}a {l}b
        LCS {l}a {l}b LEN
        LCS {l}a {l}b IDX
        LCS {l}a {l}b IDX MINMATCHLEN 4
        LCS {l}a {l}b IDX MINMATCHLEN 4 WITHMATCHLEN
        LCS {l}a {l}b IDX WITHMATCHLEN MINMATCHLEN -5
        LCS {l}a {l}b LEN IDX
        LCS {l}a {l}b MINMATCHLEN
        LCS {l}a {l}b MINMATCHLEN x
        LCS {l}a {l}b FOO
        LCS {l}a {l}missing
        LCS {l}missing {l}missing IDX
        SET {l}n 12345
        SET {l}m 2x4
        LCS {l}n {l}m IDX WITHMATCHLEN
        RPUSH {l}list a
        LCS {l}a {l}list
        LCS {l}list {l}a LEN IDX
        LCS {l}a {l}list FOO
        SET {l}x AAABBBAAA
        SET {l}y ABABABABA
        LCS {l}x {l}y IDX WITHMATCHLEN
        HELLO 3
        LCS {l}a {l}b IDX WITHMATCHLEN
        LCS {l}x {l}y IDX MINMATCHLEN 2
    "#)
    .await;
}

/// Random strings over a small alphabet, so that ties in the table (which
/// way the walk back turns) are common: every option against Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_lcs_matches_redis() {
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};
    let mut rng = StdRng::seed_from_u64(41);
    let mut text = String::new();
    for _ in 0..300 {
        let word = |rng: &mut StdRng| -> String {
            let len = rng.random_range(1..40);
            (0..len)
                .map(|_| ['a', 'b', 'c', 'd'][rng.random_range(0..4)])
                .collect()
        };
        let (a, b) = (word(&mut rng), word(&mut rng));
        text.push_str(&format!("MSET {{l}}a {a} {{l}}b {b}\n"));
        text.push_str("LCS {l}a {l}b\n");
        let min = rng.random_range(0..5);
        text.push_str(&format!(
            "LCS {{l}}a {{l}}b IDX MINMATCHLEN {min} WITHMATCHLEN\n"
        ));
    }
    run(&text).await;
}
