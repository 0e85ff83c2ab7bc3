//! Bitmaps (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO)
//! against a real redis-server: hand-picked edge cases and seeded random
//! streams, every reply byte for byte; and the log's replay.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tally_tests::{assert_no_mismatch, compare_streams, RedisServer, TestServer};

/// A word of a hand-written stream: as written, or between double quotes
/// with `\xNN` escapes for any byte ("" is the empty string).
fn word(text: &str) -> Vec<u8> {
    let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) else {
        return text.as_bytes().to_vec();
    };
    let mut out = Vec::new();
    let mut rest = inner.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        if first == b'\\' && tail.first() == Some(&b'x') && tail.len() >= 3 {
            let hex = std::str::from_utf8(&tail[1..3]).expect("hex");
            out.push(u8::from_str_radix(hex, 16).expect("a \\xNN escape"));
            rest = &tail[3..];
        } else {
            out.push(first);
            rest = tail;
        }
    }
    out
}

/// Sends the stream (a command per line) to redis-server and to tally.
async fn assert_script_matches_redis(text: &str) {
    let commands: Vec<Vec<Vec<u8>>> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.split(' ').filter(|w| !w.is_empty()).map(word).collect())
        .collect();
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    assert_no_mismatch(&compare_streams(redis.addr, tally.addr(), &commands).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setbit_and_getbit_match_redis() {
    assert_script_matches_redis(
        r#"
        SETBIT b 7 1
        GET b
        GETBIT b 7
        GETBIT b 6
        GETBIT b 100000
        GETBIT missing 0
        SETBIT b 7 1
        SETBIT b 7 0
        GET b
        STRLEN b
        SETBIT b 0 0
        SETBIT b 100 1
        STRLEN b
        GET b
        SETBIT new 0 0
        EXISTS new
        GET new
        SETBIT b -1 1
        SETBIT b x 1
        SETBIT b 4294967296 1
        SETBIT b 4294967295 2
        SETBIT b 0 2
        SETBIT b 0 -1
        SETBIT b 0 x
        SETBIT b 0
        GETBIT b -1
        GETBIT b 4294967296
        GETBIT b 1.5
        SET n 1234
        GETBIT n 2
        GETBIT n 3
        SETBIT n 6 1
        GET n
        SET n 255
        SETBIT n 23 0
        GET n
        INCR n
        SET long aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
        SETBIT long 1 0
        SETBIT long 399 0
        SETBIT long 500 1
        GET long
        STRLEN long
        HSET h f v
        SETBIT h 0 1
        GETBIT h 0
        SET t v EX 1000
        SETBIT t 100 1
        TTL t
    "#,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bitcount_and_bitpos_match_redis() {
    assert_script_matches_redis(
        r#"
        SET s foobar
        BITCOUNT s
        BITCOUNT s 0 0
        BITCOUNT s 1 1
        BITCOUNT s 1 -2
        BITCOUNT s -2 -1
        BITCOUNT s -1 -2
        BITCOUNT s -1 -2 FOO
        BITCOUNT s 5 30 BIT
        BITCOUNT s 5 30 BYTE
        BITCOUNT s 5 30 bit
        BITCOUNT s 0 -1 BIT
        BITCOUNT s -5 -1 BIT
        BITCOUNT s 3 2 BIT
        BITCOUNT s 7 7 BIT
        BITCOUNT s 0 1000 BIT
        BITCOUNT s 0 1000
        BITCOUNT s 1000 2000
        BITCOUNT s 0
        BITCOUNT s 0 1 BIT x
        BITCOUNT s a 1
        BITCOUNT s 1 a
        BITCOUNT s 0 1 FOO
        BITCOUNT missing
        BITCOUNT missing 0
        BITCOUNT missing 0 1 FOO
        SET n -12345
        BITCOUNT n
        BITCOUNT n 1 2
        LPUSH l a
        BITCOUNT l
        SET z ""
        BITCOUNT z
        BITCOUNT z 0 -1
        BITCOUNT z 0 -1 BIT
        SET p "\xff\xf0\x00"
        BITPOS p 0
        BITPOS p 1
        BITPOS p 0 2
        BITPOS p 1 2
        BITPOS p 1 2 -1
        BITPOS p 0 0 0
        BITPOS p 0 0 -1 BIT
        BITPOS p 1 7 15 BIT
        BITPOS p 0 7 15 BIT
        BITPOS p 0 3 9 BIT
        BITPOS p 1 12 23 BIT
        BITPOS p 0 12 BIT
        BITPOS p 1 -3 -1 BIT
        BITPOS p 1 5 1
        BITPOS p 1 0 1 FOO
        BITPOS p 2
        BITPOS p -1
        BITPOS p x
        BITPOS p 1 x
        BITPOS p 1 0 x
        BITPOS missing 1
        BITPOS missing 0
        BITPOS missing 2
        BITPOS l 1
        SET ones "\xff\xff"
        BITPOS ones 0
        BITPOS ones 0 0
        BITPOS ones 0 0 -1
        BITPOS ones 0 0 -1 BIT
        BITPOS ones 0 0 BIT
        BITPOS ones 1 3 BIT
        SET zeros "\x00\x00"
        BITPOS zeros 1
        BITPOS zeros 0 1
        BITPOS zeros 1 0 -1 BIT
        BITPOS z 0
        BITPOS z 1
        BITPOS n 1
        BITPOS n 0 1 3 BIT
    "#,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bitop_matches_redis() {
    assert_script_matches_redis(
        r#"
        SET a "\xff\x0f"
        SET b "\x0f\xf0\xaa"
        BITOP AND d a b
        GET d
        BITOP OR d a b
        GET d
        BITOP XOR d a b missing
        GET d
        BITOP NOT d a
        GET d
        BITOP not d b
        GET d
        BITOP NOT d a b
        BITOP NOT d
        BITOP FOO d a
        BITOP AND d missing other
        EXISTS d
        SET d x EX 1000
        BITOP OR d a
        TTL d
        SET n 12
        BITOP AND d n a
        GET d
        BITOP OR d d a
        GET d
        HSET h f v
        BITOP AND d a h
        GET d
        BITOP AND h a
        TYPE h
        GET h
        SET e ""
        BITOP OR d e
        EXISTS d
    "#,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bitfield_matches_redis() {
    assert_script_matches_redis(
        r#"
        BITFIELD f SET u8 0 255 GET u8 0
        BITFIELD f SET i8 0 -100 GET i8 0 GET u8 0
        BITFIELD f INCRBY u2 100 1 OVERFLOW SAT INCRBY u2 102 1
        BITFIELD f INCRBY i5 100 1 GET u4 0
        BITFIELD f OVERFLOW WRAP INCRBY u8 0 300 INCRBY i8 0 300
        BITFIELD f OVERFLOW SAT INCRBY u8 0 300 INCRBY i8 8 300 INCRBY i8 8 -300 INCRBY u8 0 -300
        BITFIELD f OVERFLOW FAIL INCRBY u8 0 300 INCRBY u8 0 1 SET u8 0 256 SET i8 0 -129 SET i8 0 -128
        BITFIELD f OVERFLOW WRAP SET u8 0 256 SET i8 0 -129 SET u8 0 -1 SET i4 0 8
        BITFIELD f OVERFLOW SAT SET u8 0 256 SET i8 0 -129 SET u8 0 -1
        BITFIELD f SET i64 0 -1 GET i64 0 GET u63 0 GET u63 1
        BITFIELD f OVERFLOW WRAP INCRBY i64 0 9223372036854775807 INCRBY i64 0 9223372036854775807
        BITFIELD f OVERFLOW SAT INCRBY i64 64 9223372036854775807 INCRBY i64 64 1 INCRBY i64 64 -9223372036854775808
        BITFIELD f OVERFLOW FAIL INCRBY i64 128 -9223372036854775808 INCRBY i64 128 -1
        BITFIELD f OVERFLOW SAT INCRBY u63 200 9223372036854775807 INCRBY u63 200 1
        BITFIELD f GET u8 #1 SET u8 #2 7 GET u8 16 INCRBY i16 #3 -5 GET i16 #3
        BITFIELD f GET u8 #-1
        BITFIELD f GET u64 0
        BITFIELD f GET i65 0
        BITFIELD f GET i0 0
        BITFIELD f GET x8 0
        BITFIELD f GET "" 0
        BITFIELD f GET u8 -1
        BITFIELD f GET u8 4294967296
        BITFIELD f SET u8 0 x
        BITFIELD f SET u8 0
        BITFIELD f GET u8
        BITFIELD f FOO
        BITFIELD f OVERFLOW FOO GET u8 0
        BITFIELD f OVERFLOW
        BITFIELD f
        BITFIELD f GET u8 3 GET i4 5 GET u1 2000
        GET f
        STRLEN f
        BITFIELD_RO f GET u8 0 GET i16 3
        BITFIELD_RO f SET u8 0 1
        BITFIELD_RO f GET u8 0 INCRBY u8 0 1
        BITFIELD_RO missing GET u8 0
        BITFIELD missing GET u8 0
        EXISTS missing
        BITFIELD new OVERFLOW FAIL INCRBY u8 80 300
        GET new
        STRLEN new
        SET n 123
        BITFIELD n GET u8 0 INCRBY u8 0 1
        GET n
        SET long xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
        BITFIELD long SET u16 8 0 INCRBY i32 400 -7 GET i32 400
        GET long
        HSET h f v
        BITFIELD h GET u8 0
        BITFIELD h SET u8 0 1
        BITFIELD_RO h GET u8 0
    "#,
    )
    .await;
}

const KEYS: &[&str] = &["b0", "b1", "b2", "{b}3", "n"];

fn key(rng: &mut StdRng) -> String {
    KEYS[rng.random_range(0..KEYS.len())].to_string()
}

/// Offsets, ranges and values around the edges a bitmap has: bytes, the
/// string's end, negative indexes, and an odd bad one.
fn index(rng: &mut StdRng) -> String {
    match rng.random_range(0..12) {
        0 => "x".to_string(),
        1 => rng.random_range(-80..0).to_string(),
        2 => i64::MAX.to_string(),
        3 => i64::MIN.to_string(),
        _ => rng.random_range(0..300).to_string(),
    }
}

fn unit(rng: &mut StdRng) -> Vec<String> {
    match rng.random_range(0..6) {
        0 => vec!["BIT".to_string()],
        1 => vec!["BYTE".to_string()],
        2 => vec!["bit".to_string()],
        3 => vec!["NOPE".to_string()],
        _ => vec![],
    }
}

fn field_type(rng: &mut StdRng) -> String {
    match rng.random_range(0..20) {
        0 => "u64".to_string(),
        1 => "x8".to_string(),
        2 => "i65".to_string(),
        n if n < 11 => format!("i{}", rng.random_range(1..=64)),
        _ => format!("u{}", rng.random_range(1..=63)),
    }
}

fn field_offset(rng: &mut StdRng) -> String {
    match rng.random_range(0..10) {
        0 => format!("#{}", rng.random_range(0..20)),
        1 => "-3".to_string(),
        _ => rng.random_range(0..400).to_string(),
    }
}

fn field_value(rng: &mut StdRng) -> String {
    match rng.random_range(0..10) {
        0 => i64::MAX.to_string(),
        1 => i64::MIN.to_string(),
        2 => "nan".to_string(),
        3 => rng.random_range(-300..300).to_string(),
        4 => rng.random_range(i64::MIN..i64::MAX).to_string(),
        _ => rng.random_range(-20..20).to_string(),
    }
}

fn bitfield(rng: &mut StdRng) -> Vec<String> {
    let read_only = rng.random_range(0..5) == 0;
    let mut c = vec![
        if read_only { "BITFIELD_RO" } else { "BITFIELD" }.to_string(),
        key(rng),
    ];
    for _ in 0..rng.random_range(0..5) {
        match rng.random_range(0..10) {
            0 => c.extend([
                "OVERFLOW".to_string(),
                ["WRAP", "SAT", "FAIL", "fail", "BAD"][rng.random_range(0..5)].to_string(),
            ]),
            1..=4 => c.extend(["GET".to_string(), field_type(rng), field_offset(rng)]),
            5..=6 => c.extend([
                "SET".to_string(),
                field_type(rng),
                field_offset(rng),
                field_value(rng),
            ]),
            _ => c.extend([
                "INCRBY".to_string(),
                field_type(rng),
                field_offset(rng),
                field_value(rng),
            ]),
        }
    }
    c
}

fn command(rng: &mut StdRng) -> Vec<String> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    match rng.random_range(0..16) {
        0 | 1 => {
            let bit = ["0", "1", "1", "0", "2", "x"][rng.random_range(0..6)];
            vec!["SETBIT".into(), key(rng), index(rng), bit.into()]
        }
        2 => vec!["GETBIT".into(), key(rng), index(rng)],
        3 => {
            let mut c = vec!["BITCOUNT".into(), key(rng)];
            if rng.random_range(0..4) != 0 {
                c.extend([index(rng), index(rng)]);
                c.extend(unit(rng));
            }
            c
        }
        4 => {
            let mut c = vec![
                "BITPOS".into(),
                key(rng),
                ["0", "1", "1", "0", "2"][rng.random_range(0..5)].into(),
            ];
            match rng.random_range(0..4) {
                0 => {}
                1 => c.push(index(rng)),
                _ => {
                    c.extend([index(rng), index(rng)]);
                    c.extend(unit(rng));
                }
            }
            c
        }
        5 => {
            let op = ["AND", "OR", "XOR", "NOT", "or"][rng.random_range(0..5)];
            let mut c = vec!["BITOP".into(), op.into(), key(rng)];
            for _ in 0..rng.random_range(1..4) {
                c.push(key(rng));
            }
            c
        }
        6..=8 => bitfield(rng),
        9 => vec!["GET".into(), key(rng)],
        10 => {
            let value = match rng.random_range(0..5) {
                0 => rng.random_range(-1000..100_000).to_string(),
                1 => String::new(),
                2 => "\u{7f}\u{1}abc".to_string(),
                _ => "z".repeat(rng.random_range(1..40)),
            };
            vec!["SET".into(), key(rng), value]
        }
        11 => vec![
            "INCRBY".into(),
            key(rng),
            rng.random_range(-50..50).to_string(),
        ],
        12 => vec!["APPEND".into(), key(rng), "\u{0}\u{ff}".into()],
        13 => vec!["DEL".into(), key(rng)],
        14 => vec![
            "SETRANGE".into(),
            key(rng),
            rng.random_range(0..40).to_string(),
            "q".into(),
        ],
        _ => s(&["STRLEN", KEYS[rng.random_range(0..KEYS.len())]]),
    }
}

fn stream(seed: u64, len: usize) -> Vec<Vec<Vec<u8>>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..len)
        .map(|_| {
            command(&mut rng)
                .into_iter()
                .map(String::into_bytes)
                .collect()
        })
        .collect()
}

fn length() -> usize {
    std::env::var("TALLY_DIFF_LEN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bitmap_streams_match_redis() {
    let seeds: Vec<u64> = match std::env::var("TALLY_DIFF_SEED") {
        Ok(seed) => vec![seed.parse().expect("a seed")],
        Err(_) => vec![31, 32, 33],
    };
    for seed in seeds {
        let Some(redis) = RedisServer::start() else {
            return;
        };
        let tally = TestServer::start_real_clock().await;
        let mismatches = compare_streams(redis.addr, tally.addr(), &stream(seed, length())).await;
        assert_no_mismatch(&mismatches);
    }
}

/// What the bit commands changed comes back from the append-only file as
/// it was, on tally and on redis-server reading tally's file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bitmap_writes_replay_from_the_log() {
    use tally_tests::keyspace::{all_contents, logged_server, wait_loaded};
    let dir = tally_tests::scratch_dir();
    let tally = logged_server(&dir).await;
    let mut conn = tally.raw().await;
    // Without DEL, so that what is left to replay is most of the keys.
    for command in stream(34, 2000).iter().filter(|c| c[0] != b"DEL") {
        conn.cmd(command).await;
    }
    let before = all_contents(tally.addr(), 0).await;
    assert!(before.len() >= 3, "the stream left keys: {before:?}");
    tally.handle.shutdown().await;
    let again = tally_server::Server::new(tally_server::Config {
        port: 0,
        dir: dir.clone(),
        save_points: Vec::new(),
        appendonly: true,
        ..tally_server::Config::default()
    })
    .start()
    .await
    .expect("tally starts again");
    wait_loaded(again.local_addr()).await;
    assert_eq!(all_contents(again.local_addr(), 0).await, before);
    again.shutdown().await;
    let Some(redis) = RedisServer::start_with(&["--dir", &dir, "--appendonly", "yes"]) else {
        return;
    };
    wait_loaded(redis.addr).await;
    assert_eq!(all_contents(redis.addr, 0).await, before);
}
