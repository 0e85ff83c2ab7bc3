//! HyperLogLog (PFADD, PFCOUNT, PFMERGE, PFDEBUG) against a real
//! redis-server: hand-picked cases and seeded random streams, every reply
//! byte for byte, the sketches' bytes (GET) included, so a sketch moves
//! between the two servers and counts the same; and the log's replay.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tally_tests::{assert_no_mismatch, compare_streams, RedisServer, TestServer};

fn words(line: &str) -> Vec<Vec<u8>> {
    line.split(' ')
        .filter(|w| !w.is_empty())
        .map(|w| w.as_bytes().to_vec())
        .collect()
}

async fn assert_matches_redis(commands: &[Vec<Vec<u8>>]) {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    assert_no_mismatch(&compare_streams(redis.addr, tally.addr(), commands).await);
}

fn lines(text: &str) -> Vec<Vec<Vec<u8>>> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(words)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_picked_cases_match_redis() {
    let mut commands = lines(
        r#"
        PFADD h
        GET h
        PFCOUNT h
        GET h
        PFADD h a b c
        GETRANGE h 15 15
        PFCOUNT h
        GET h
        PFADD h a b c
        GETRANGE h 15 15
        PFADD h ""
        PFADD h 1 2 3 4 5 6 7 8 9 10 11 12
        PFDEBUG ENCODING h
        PFDEBUG DECODE h
        PFDEBUG decode h
        PFCOUNT h
        PFCOUNT h missing
        PFCOUNT missing
        PFCOUNT missing other
        PFADD {t}a x y z
        PFADD {t}b z w
        PFMERGE {t}c {t}a {t}b
        GET {t}c
        PFCOUNT {t}c
        PFCOUNT {t}a {t}b
        PFMERGE {t}a
        GET {t}a
        PFMERGE {t}new
        GET {t}new
        PFMERGE {t}new2 {t}missing
        GET {t}new2
        EXPIRE {t}c 1000
        PFMERGE {t}c {t}a
        TTL {t}c
        PFDEBUG TODENSE {t}c
        PFDEBUG TODENSE {t}c
        PFDEBUG ENCODING {t}c
        PFDEBUG DECODE {t}c
        PFCOUNT {t}c
        PFADD {t}c more elements here
        PFCOUNT {t}c
        GETRANGE {t}c 0 20
        PFMERGE {t}d {t}a {t}c
        PFDEBUG ENCODING {t}d
        PFCOUNT {t}d
        PFDEBUG GETREG {t}b
        PFDEBUG ENCODING {t}b
        GET {t}b
        PFDEBUG NOPE {t}b
        PFDEBUG GETREG missing
        PFDEBUG ENCODING missing
        PFDEBUG
        PFDEBUG GETREG
        PFDEBUG GETREG h extra
        PFADD
        PFCOUNT
        PFMERGE
        SET s notasketch
        PFADD s a
        PFCOUNT s
        PFCOUNT s h
        PFMERGE s h
        PFMERGE h s
        PFDEBUG ENCODING s
        LPUSH l a
        PFADD l a
        PFCOUNT l
        PFCOUNT h l
        PFMERGE l h
        PFDEBUG ENCODING l
        SET n 12345
        PFADD n a
        PFCOUNT n
        SET short HYLL
        PFCOUNT short
        CONFIG GET hll-sparse-max-bytes
        CONFIG SET hll-sparse-max-bytes 40
        PFADD small a b c d e f g h i j k l m n o p
        PFDEBUG ENCODING small
        PFCOUNT small
        GET small
        CONFIG SET hll-sparse-max-bytes 0
        PFADD zero a
        PFDEBUG ENCODING zero
        CONFIG SET hll-sparse-max-bytes -1
        CONFIG SET hll-sparse-max-bytes 1kb
        CONFIG GET hll-sparse-max-bytes
        CONFIG SET hll-sparse-max-bytes 3000
        "#,
    );
    // Corrupt sketches: a tail after the runs, a broken magic, an unknown
    // encoding, a dense one of the wrong length, runs that fall short.
    for (setup, probe) in [
        ("APPEND c1 hello", "PFCOUNT c1"),
        ("SETRANGE c2 0 0123", "PFCOUNT c2"),
        ("SETRANGE c3 4 x", "PFCOUNT c3"),
        ("SETRANGE c4 4 \0", "PFCOUNT c4"),
        ("SETRANGE c5 16 \u{1}", "PFCOUNT c5"),
    ] {
        let key = &probe[8..];
        commands.push(words(&format!("PFADD {key} a b c")));
        commands.push(words(setup));
        for command in [
            probe.to_string(),
            format!("PFCOUNT {key} h"),
            format!("PFADD {key} d e f"),
            format!("PFMERGE {key} h"),
            format!("PFMERGE h2 {key}"),
            format!("PFDEBUG GETREG {key}"),
            format!("PFDEBUG TODENSE {key}"),
            format!("PFDEBUG DECODE {key}"),
            format!("GET {key}"),
        ] {
            commands.push(words(&command));
        }
    }
    assert_matches_redis(&commands).await;
}

/// Enough distinct elements to turn a sketch dense at the default
/// threshold, then more: the dense form is patched in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sketches_growing_dense_match_redis() {
    let mut commands = Vec::new();
    for batch in 0..60 {
        let mut command = vec![b"PFADD".to_vec(), b"big".to_vec()];
        command.extend((0..100).map(|i| format!("e{}", batch * 100 + i).into_bytes()));
        commands.push(command);
        commands.push(words("PFCOUNT big"));
        commands.push(words("PFDEBUG ENCODING big"));
        commands.push(words("STRLEN big"));
        commands.push(words("GETRANGE big 8 15"));
    }
    commands.push(words("GET big"));
    commands.push(words("PFADD other a b c"));
    commands.push(words("PFMERGE other big"));
    commands.push(words("GET other"));
    commands.push(words("PFCOUNT other big"));
    commands.push(words("PFDEBUG GETREG big"));
    assert_matches_redis(&commands).await;
}

const KEYS: [&str; 4] = ["{h}1", "{h}2", "{h}3", "{h}4"];

fn key(rng: &mut StdRng) -> String {
    KEYS[rng.random_range(0..KEYS.len())].to_string()
}

fn element(rng: &mut StdRng) -> String {
    // A small space repeats elements (registers that do not rise), a
    // large one grows the sketch.
    match rng.random_range(0..3) {
        0 => format!("s{}", rng.random_range(0..50)),
        _ => format!("l{}", rng.random_range(0..1_000_000)),
    }
}

fn command(rng: &mut StdRng) -> Vec<String> {
    match rng.random_range(0..20) {
        0..=6 => {
            let mut c = vec!["PFADD".to_string(), key(rng)];
            let n = match rng.random_range(0..10) {
                0 => 0,
                1 => rng.random_range(100..600),
                _ => rng.random_range(1..20),
            };
            c.extend((0..n).map(|_| element(rng)));
            c
        }
        7..=9 => {
            let mut c = vec!["PFCOUNT".to_string(), key(rng)];
            for _ in 0..rng.random_range(0..3) {
                c.push(key(rng));
            }
            c
        }
        10 | 11 => {
            let mut c = vec!["PFMERGE".to_string(), key(rng)];
            for _ in 0..rng.random_range(0..3) {
                c.push(key(rng));
            }
            c
        }
        12 | 13 => vec!["GET".to_string(), key(rng)],
        14 => {
            let sub = ["ENCODING", "DECODE", "TODENSE", "GETREG"][rng.random_range(0..4)];
            vec!["PFDEBUG".to_string(), sub.to_string(), key(rng)]
        }
        15 => {
            let max = ["0", "30", "100", "300", "3000", "20000"][rng.random_range(0..6)];
            vec![
                "CONFIG".to_string(),
                "SET".to_string(),
                "hll-sparse-max-bytes".to_string(),
                max.to_string(),
            ]
        }
        16 => vec!["DEL".to_string(), key(rng)],
        17 => {
            // A byte changed anywhere: the runs may no longer add up.
            let offset = rng.random_range(0..400).to_string();
            let byte = char::from(rng.random_range(0u8..128)).to_string();
            vec!["SETRANGE".to_string(), key(rng), offset, byte]
        }
        _ => vec!["STRLEN".to_string(), key(rng)],
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
async fn random_sketch_streams_match_redis() {
    let seeds: Vec<u64> = match std::env::var("TALLY_DIFF_SEED") {
        Ok(seed) => vec![seed.parse().expect("a seed")],
        Err(_) => vec![41, 42, 43],
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

/// What the sketch commands changed comes back from the append-only file
/// as it was (PFCOUNT's cache refresh included), on tally and on
/// redis-server reading tally's file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sketch_writes_replay_from_the_log() {
    use tally_tests::keyspace::{all_contents, logged_server, wait_loaded};
    let dir = tally_tests::scratch_dir();
    let tally = logged_server(&dir).await;
    let mut conn = tally.raw().await;
    for command in stream(44, 1500)
        .iter()
        .filter(|c| c[0] != b"DEL" && c[0] != b"SETRANGE")
    {
        conn.cmd(command).await;
    }
    // A stale cache refreshed by PFCOUNT is in the log too.
    conn.cmd(&words("PFADD {h}1 fresh element")).await;
    conn.cmd(&words("PFCOUNT {h}1")).await;
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
