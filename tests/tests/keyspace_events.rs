//! Keyspace notifications against a real redis-server: the same commands
//! on both servers, with a subscriber to `__key*__:*` on each, must
//! produce the same messages in the same order, frame for frame.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::net::SocketAddr;
use tally_tests::{words, RawConn, RedisServer, TestServer};

/// Runs `commands` on the server at `addr` with `notify-keyspace-events`
/// set to `classes`; returns every frame a `__key*__:*` subscriber got,
/// and the commands' replies.
async fn events(
    addr: SocketAddr,
    classes: &str,
    commands: &[Vec<Vec<u8>>],
) -> (Vec<String>, Vec<Vec<u8>>) {
    let mut control = RawConn::connect(addr).await;
    control
        .cmd(&[
            b"CONFIG".as_slice(),
            b"SET",
            b"notify-keyspace-events",
            classes.as_bytes(),
        ])
        .await;
    let mut subscriber = RawConn::connect(addr).await;
    subscriber.cmd(&words("PSUBSCRIBE __key*__:*")).await;
    let mut replies = Vec::new();
    for command in commands {
        replies.push(control.cmd(command).await);
    }
    // The end of the run, through the same pattern.
    control
        .cmd(&words("PUBLISH __keyevent@0__:zz-end end"))
        .await;
    let mut frames = Vec::new();
    loop {
        let frame = String::from_utf8_lossy(&subscriber.reply().await).into_owned();
        if frame.contains("zz-end") {
            break;
        }
        frames.push(frame);
    }
    control.cmd(&words("FLUSHALL")).await;
    (frames, replies)
}

/// Fails with the first difference between the two servers' messages.
async fn assert_same_events(classes: &str, commands: &[Vec<Vec<u8>>]) {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let (expected, redis_replies) = events(redis.addr, classes, commands).await;
    let (got, tally_replies) = events(tally.addr(), classes, commands).await;
    for (i, (a, b)) in redis_replies.iter().zip(&tally_replies).enumerate() {
        // Random picks and a script's TTLs (read a millisecond apart) may
        // differ; their events do not.
        if commands[i][0].eq_ignore_ascii_case(b"SPOP")
            || commands[i][0].eq_ignore_ascii_case(b"EVAL")
        {
            continue;
        }
        assert_eq!(
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(b),
            "reply to {:?}",
            String::from_utf8_lossy(&commands[i].join(&b' '))
        );
    }
    assert!(!expected.is_empty(), "redis-server published nothing");
    let first_difference = expected.iter().zip(&got).position(|(a, b)| a != b);
    if first_difference.is_some() || expected.len() != got.len() {
        let at = first_difference.unwrap_or(expected.len().min(got.len()));
        let from = at.saturating_sub(3);
        panic!(
            "keyspace events differ at message {at} ({} from redis-server, {} from tally)\nredis:\n{}\ntally:\n{}",
            expected.len(),
            got.len(),
            expected[from..(at + 4).min(expected.len())].join("\n").replace("\r\n", " "),
            got[from..(at + 4).min(got.len())].join("\n").replace("\r\n", " "),
        );
    }
}

fn lines(text: &str) -> Vec<Vec<Vec<u8>>> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(words)
        .collect()
}

const STRINGS_AND_KEYS: &str = r#"
    SET s v
    SET s v2 EX 100
    SET s v3 NX
    SET s v4 XX GET
    SET s v5 KEEPTTL
    SET s v6 PXAT 1
    SET s2 v PX 100000
    SETNX s3 v
    SETNX s3 v
    SETEX s4 100 v
    PSETEX s5 100000 v
    MSET m1 a m2 b
    MSETNX m1 a m3 c
    MSETNX m4 a m5 b
    GETSET m1 z
    GETDEL m2
    GETDEL missing
    GETEX m1 EX 100
    GETEX m1 PERSIST
    GETEX m1 PERSIST
    GETEX m1 PXAT 1
    GETEX m3
    INCR n
    INCRBY n 5
    DECR n
    DECRBY n 2
    INCRBYFLOAT f 1.5
    APPEND a hello
    APPEND a world
    SETRANGE r 5 x
    SETRANGE r 0 ""
    SETRANGE missing2 0 ""
    SETRANGE big 100 x
    GET s
    DEL s s2 missing s3
    UNLINK s4
    EXPIRE s5 100
    PEXPIRE s5 100000 NX
    EXPIREAT s5 1
    SET e v
    PEXPIREAT e 99999999999999
    PERSIST e
    PERSIST e
    EXPIRE missing 10
    RENAME e e2
    RENAME e2 e2
    SET other x
    RENAME e2 other
    RENAMENX other a
    RENAMENX other fresh
    COPY fresh copy1
    COPY fresh copy1
    COPY fresh copy1 REPLACE
    COPY fresh copy2 DB 1
    MOVE copy1 1
    MOVE fresh 2
    MOVE a 1
    SELECT 1
    SET indb1 v
    DEL indb1 copy1 copy2
    SELECT 0
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strings_and_generic_commands_notify_as_redis() {
    assert_same_events("KEA", &lines(STRINGS_AND_KEYS)).await;
    assert_same_events("KEAn", &lines(STRINGS_AND_KEYS)).await;
    assert_same_events("E$", &lines(STRINGS_AND_KEYS)).await;
    assert_same_events("Kg", &lines(STRINGS_AND_KEYS)).await;
}

const COLLECTIONS: &str = r#"
    LPUSH l a b c
    RPUSH l d
    LPUSHX l e
    RPUSHX missing e
    LPUSHX missing e
    LINSERT l BEFORE a x
    LINSERT l BEFORE nope x
    LSET l 0 y
    LSET l 100 y
    LREM l 0 nope
    LREM l 1 y
    LTRIM l 0 2
    LPOP l
    RPOP l 0
    RPOP l 2
    LPOP l
    RPUSH l2 1 2 3
    LMOVE l2 l3 LEFT RIGHT
    LMOVE l2 l3 RIGHT LEFT
    LMOVE l3 l3 LEFT LEFT
    RPOPLPUSH l2 l3
    RPOPLPUSH l2 l3
    LMPOP 2 nolist l3 LEFT COUNT 1
    LMPOP 1 l3 RIGHT COUNT 10
    BLPOP missing l3 0.01
    RPUSH bl 1 2
    BLPOP bl 1
    BRPOP bl 1
    RPUSH bm 1 2 3
    BLMOVE bm bm2 LEFT RIGHT 1
    BLMPOP 1 1 bm LEFT COUNT 5
    SADD s a b c 1
    SADD s a
    SREM s nope
    SREM s a
    SMOVE s s2 b
    SMOVE s s2 nope
    SADD s2 c
    SMOVE s s2 c
    SMOVE s2 s2 b
    SPOP s 0
    SPOP s 10
    SADD t 1 2 3
    SPOP t
    SADD u 1 2 3
    SINTERSTORE d t u
    SINTERSTORE d t nokey
    SUNIONSTORE d t u
    SDIFFSTORE d u u
    SDIFFSTORE d2 u u
    SUNIONSTORE d t u
    HSET h f v g w
    HSET h f v
    HMSET h x y
    HSETNX h f z
    HSETNX h new z
    HSETNX h2 f z
    HINCRBY h n 5
    HINCRBYFLOAT h fl 1.5
    HINCRBY h f 1
    HDEL h nope
    HDEL h f g x new n fl
    HDEL h2 f
    ZADD z 1 a 2 b 3 c
    ZADD z 1 a
    ZADD z XX 5 a
    ZADD z NX 5 a
    ZADD z GT 1 a
    ZADD z INCR 2 a
    ZADD z2 XX 1 a
    ZINCRBY z 1 b
    ZREM z nope
    ZREM z c
    ZADD z 4 d 5 e 6 f
    ZREMRANGEBYRANK z 0 0
    ZREMRANGEBYSCORE z 100 200
    ZREMRANGEBYSCORE z 5 5
    ZREMRANGEBYLEX z [a [b
    ZPOPMIN z
    ZPOPMAX z 0
    ZPOPMAX z 1
    ZADD y 1 a 2 b
    ZRANGESTORE y2 y 0 -1
    ZRANGESTORE y2 y 5 10
    ZRANGESTORE y3 y 5 10
    ZUNIONSTORE zu 2 y z
    ZINTERSTORE zu 2 y nokey
    ZDIFFSTORE zd 1 y
    ZMPOP 1 y MIN COUNT 5
    BZPOPMIN y zd 1
    BZPOPMAX zd 1
    SETBIT b 7 1
    SETBIT b 7 1
    SETBIT b 100 0
    BITFIELD bf SET u8 0 1
    BITFIELD bf SET u8 0 1
    BITFIELD bf GET u8 0
    BITFIELD bf OVERFLOW FAIL INCRBY u2 0 10
    BITOP OR bo b bf
    BITOP AND bo nokey1 nokey2
    RPUSH sl 3 1 2
    SORT sl STORE sorted
    SORT sl STORE sorted
    SORT nokey STORE sorted
    SORT sl
    GEOADD geo 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
    GEOADD geo NX 13.361389 38.115556 Palermo
    GEOADD geo XX CH 13.4 38.1 Palermo
    GEORADIUS geo 15 37 200 km STORE near
    GEORADIUS geo 15 37 1 km STORE near
    GEORADIUSBYMEMBER geo Palermo 200 km STOREDIST near
    GEOSEARCHSTORE far geo FROMLONLAT 15 37 BYRADIUS 200 km
    GEOSEARCHSTORE far geo FROMLONLAT 15 37 BYRADIUS 1 km
    GEOSEARCHSTORE far nokey FROMLONLAT 15 37 BYRADIUS 1 km
    GEOSEARCH geo FROMMEMBER Palermo BYBOX 400 400 km
    XADD st 1-0 f 1
    XADD st 2-0 f 2
    XADD st MAXLEN 1 3-0 f 3
    XADD st MAXLEN 5 4-0 f 4
    XADD missing NOMKSTREAM 1-0 f 1
    XDEL st 1-0
    XDEL st 3-0
    XTRIM st MAXLEN 5
    XTRIM st MAXLEN 0
    XSETID st 9-0
    XADD st 1-0 f 1
    XLEN st
    XRANGE st - +
    XGROUP CREATE st g 0
    XGROUP CREATE st g 0
    XGROUP CREATE newst g $ MKSTREAM
    XGROUP SETID st g 0
    XGROUP CREATECONSUMER st g c1
    XGROUP CREATECONSUMER st g c1
    XADD st 10-0 f 2
    XREADGROUP GROUP g c2 STREAMS st >
    XREADGROUP GROUP g c3 STREAMS st >
    XACK st g 10-0
    XCLAIM st g c4 0 10-0 FORCE
    XAUTOCLAIM st g c5 0 -
    XGROUP DELCONSUMER st g c1
    XGROUP DELCONSUMER st g nosuch
    XGROUP DESTROY st g
    XGROUP DESTROY st g
    PFADD hll a b c
    PFADD hll a
    PFMERGE hll2 hll
    PFCOUNT hll
    SET str v
    DUMP str
    LPUSH wrong a
    SADD wrong a
    HSET wrong a b
    XADD wrong 1-0 a b
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collection_commands_notify_as_redis() {
    let mut commands = lines(COLLECTIONS);
    // RESTORE of a dumped value: fresh, replacing, and already expired.
    let payload = {
        let Some(redis) = RedisServer::start() else {
            return;
        };
        let mut conn = RawConn::connect(redis.addr).await;
        conn.cmd(&words("SET src hello")).await;
        let reply = conn.cmd(&words("DUMP src")).await;
        // $<len>\r\n<payload>\r\n
        let start = reply.iter().position(|&b| b == b'\n').unwrap() + 1;
        reply[start..reply.len() - 2].to_vec()
    };
    for (key, ttl, option) in [
        ("r1", "0", None),
        ("r1", "0", Some("REPLACE")),
        ("r1", "1", Some("REPLACE")),
        ("r2", "0", None),
    ] {
        let mut command = vec![
            b"RESTORE".to_vec(),
            key.as_bytes().to_vec(),
            ttl.as_bytes().to_vec(),
            payload.clone(),
        ];
        if let Some(option) = option {
            command.push(option.as_bytes().to_vec());
        }
        if ttl == "1" {
            command.push(b"ABSTTL".to_vec());
        }
        commands.push(command);
    }
    assert_same_events("KEA", &commands).await;
    assert_same_events("KEAn", &commands).await;
    assert_same_events("Elshz", &commands).await;
}

/// Expiry, by a read after the deadline or by the sweep, and the key-miss
/// events of reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_and_keymiss_events_match_redis() {
    for classes in ["KEA", "Ex", "KEAm", "Exm"] {
        let Some(redis) = RedisServer::start() else {
            return;
        };
        let tally = TestServer::start_real_clock().await;
        let mut all = Vec::new();
        for addr in [redis.addr, tally.addr()] {
            let mut control = RawConn::connect(addr).await;
            control
                .cmd(&[
                    b"CONFIG".as_slice(),
                    b"SET",
                    b"notify-keyspace-events",
                    classes.as_bytes(),
                ])
                .await;
            let mut subscriber = RawConn::connect(addr).await;
            subscriber.cmd(&words("PSUBSCRIBE __key*__:*")).await;
            control.cmd(&words("SET k v PX 20")).await;
            control.cmd(&words("GET missing")).await;
            control.cmd(&words("EXISTS missing2")).await;
            tokio::time::sleep(std::time::Duration::from_millis(60)).await;
            control.cmd(&words("GET k")).await;
            control.cmd(&words("SET swept v PX 10")).await;
            // `k` expires by the sweep or by the read, whichever comes
            // first: the events are the same (`expired`, then the read's
            // `keymiss`). `swept` is left to the sweep (hz times a second).
            let mut frames = Vec::new();
            loop {
                let frame = String::from_utf8_lossy(&subscriber.reply().await).into_owned();
                let done = frame.contains("__keyevent@0__:expired") && frame.contains("swept");
                frames.push(frame);
                if done {
                    break;
                }
            }
            all.push(frames);
        }
        assert_eq!(all[0], all[1], "{classes}");
    }
}

const KEYS: [&str; 5] = ["{k}1", "{k}2", "{k}3", "{k}4", "{k}5"];

fn key(rng: &mut StdRng) -> String {
    KEYS[rng.random_range(0..KEYS.len())].to_string()
}

fn member(rng: &mut StdRng) -> String {
    format!("m{}", rng.random_range(0..6))
}

/// A random command of any family on a few keys, so types collide
/// (WRONGTYPE raises nothing) and collections empty out (`del`).
fn command(rng: &mut StdRng) -> String {
    let (k, k2, m) = (key(rng), key(rng), member(rng));
    let n = rng.random_range(-2..4);
    match rng.random_range(0..40) {
        0 => format!("SET {k} {n}"),
        1 => format!("SET {k} v EX 100 NX"),
        2 => format!("INCRBY {k} {n}"),
        3 => format!("APPEND {k} x"),
        4 => format!("GETDEL {k}"),
        5 => format!("GETEX {k} PERSIST"),
        6 => format!("DEL {k} {k2}"),
        7 => format!("EXPIRE {k} 100"),
        8 => format!("PERSIST {k}"),
        9 => format!("RENAME {k} {k2}"),
        10 => format!("COPY {k} {k2} REPLACE"),
        11 => format!("LPUSH {k} {m}"),
        12 => format!("RPOP {k}"),
        13 => format!("LMOVE {k} {k2} LEFT RIGHT"),
        14 => format!("LREM {k} 0 {m}"),
        15 => format!("LTRIM {k} 1 -1"),
        16 => format!("SADD {k} {m}"),
        17 => format!("SREM {k} {m}"),
        18 => format!("SMOVE {k} {k2} {m}"),
        19 => format!("SINTERSTORE {k} {k2} {k}"),
        20 => format!("SUNIONSTORE {k} {k2}"),
        21 => format!("HSET {k} {m} {n}"),
        22 => format!("HDEL {k} {m}"),
        23 => format!("HINCRBY {k} {m} {n}"),
        24 => format!("ZADD {k} {n} {m}"),
        25 => format!("ZINCRBY {k} {n} {m}"),
        26 => format!("ZREM {k} {m}"),
        27 => format!("ZPOPMIN {k}"),
        28 => format!("ZREMRANGEBYSCORE {k} -1 1"),
        29 => format!("ZUNIONSTORE {k} 2 {k} {k2}"),
        30 => format!("ZRANGESTORE {k} {k2} 0 {n}"),
        31 => format!("SETBIT {k} {} 1", rng.random_range(0..20)),
        32 => format!("BITOP OR {k} {k2}"),
        33 => format!("SORT {k2} STORE {k}"),
        34 => format!("PFADD {k} {m}"),
        35 => format!("LMPOP 2 {k} {k2} LEFT COUNT 2"),
        36 => format!("ZMPOP 1 {k} MAX"),
        37 => format!("HSETNX {k} {m} v"),
        38 => format!("LINSERT {k} BEFORE {m} x"),
        _ => format!("SETRANGE {k} {} ab", rng.random_range(0..5)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_streams_notify_as_redis() {
    for seed in [51u64, 52, 53] {
        let mut rng = StdRng::seed_from_u64(seed);
        let commands: Vec<Vec<Vec<u8>>> = (0..1500).map(|_| words(&command(&mut rng))).collect();
        assert_same_events("KEAn", &commands).await;
    }
}

/// A known limiter script (which tally otherwise runs natively) raises the
/// events its redis.calls raise on Redis, as does the seed's sliding window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_limiter_scripts_notify_as_redis() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../lua/scripts/");
    let limits = std::fs::read(format!("{root}limits_incr_expire.lua")).expect("the script");
    let window =
        std::fs::read(format!("{root}rate_limiter_flexible_incr_ttl.lua")).expect("the script");
    let mut commands = Vec::new();
    for _ in 0..3 {
        commands.push(vec![
            b"EVAL".to_vec(),
            limits.clone(),
            b"1".to_vec(),
            b"rl:a".to_vec(),
            b"60".to_vec(),
            b"1".to_vec(),
        ]);
        commands.push(vec![
            b"EVAL".to_vec(),
            window.clone(),
            b"1".to_vec(),
            b"rl:b".to_vec(),
            b"1".to_vec(),
            b"60".to_vec(),
            b"5".to_vec(),
            b"60".to_vec(),
        ]);
    }
    assert_same_events("KEA", &commands).await;
}
