//! Randomly generated command streams over strings, counters, keys and TTLs,
//! sent to redis-server and to tally; every reply must match byte for byte.
//!
//! The seeds are fixed so a failure reproduces; set TALLY_DIFF_SEED to run
//! another seed, and TALLY_DIFF_LEN to change the stream length.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tally_tests::{assert_no_mismatch, compare_streams, RedisServer, TestServer};

const KEYS: &[&str] = &["k0", "k1", "k2", "k3", "k4", "{rl}:a", "{rl}:b", "counter"];

fn value(rng: &mut StdRng) -> String {
    match rng.random_range(0..10) {
        0 => rng.random_range(-5..100).to_string(),
        1 => i64::MAX.to_string(),
        2 => i64::MIN.to_string(),
        3 => format!(
            "{}.{}",
            rng.random_range(-100..100),
            rng.random_range(0..1000)
        ),
        4 => "".to_string(),
        5 => format!("0{}", rng.random_range(1..9)),
        6 => "hello".to_string(),
        7 => format!("{}", rng.random_range(0..10_000)),
        8 => "1e3".to_string(),
        _ => "x".repeat(rng.random_range(1..60)),
    }
}

fn key(rng: &mut StdRng) -> String {
    KEYS[rng.random_range(0..KEYS.len())].to_string()
}

fn int(rng: &mut StdRng) -> String {
    match rng.random_range(0..8) {
        0 => "abc".to_string(),
        1 => i64::MAX.to_string(),
        2 => i64::MIN.to_string(),
        _ => rng.random_range(-20..20).to_string(),
    }
}

/// A TTL far enough away that the wall clock cannot move a reply between the
/// two servers (TTL rounds to whole seconds).
fn ttl(rng: &mut StdRng) -> String {
    match rng.random_range(0..6) {
        0 => "0".to_string(),
        1 => "-1".to_string(),
        _ => rng.random_range(1000..5000).to_string(),
    }
}

fn command(rng: &mut StdRng) -> Vec<String> {
    let k = key(rng);
    let words: Vec<String> = match rng.random_range(0..34) {
        0 => vec!["SET".into(), k, value(rng)],
        1 => {
            let mut c = vec!["SET".into(), k, value(rng)];
            for opt in ["NX", "XX", "GET", "KEEPTTL"] {
                if rng.random_bool(0.25) {
                    c.push(opt.into());
                }
            }
            if rng.random_bool(0.4) {
                c.push(["EX", "PX", "EXAT", "PXAT"][rng.random_range(0..4)].into());
                c.push(ttl(rng));
            }
            c
        }
        2 | 3 => vec!["GET".into(), k],
        4 => vec!["INCR".into(), k],
        5 => vec!["INCRBY".into(), k, int(rng)],
        6 => vec!["DECR".into(), k],
        7 => vec!["DECRBY".into(), k, int(rng)],
        8 => vec!["APPEND".into(), k, value(rng)],
        9 => vec!["STRLEN".into(), k],
        10 => vec!["GETRANGE".into(), k, int(rng), int(rng)],
        11 => vec![
            "SETRANGE".into(),
            k,
            rng.random_range(-1..20).to_string(),
            value(rng),
        ],
        12 => vec!["DEL".into(), k, key(rng)],
        13 => vec!["EXISTS".into(), k, key(rng), key(rng)],
        14 => {
            let mut c = vec![
                ["EXPIRE", "PEXPIRE"][rng.random_range(0..2)].into(),
                k,
                ttl(rng),
            ];
            if rng.random_bool(0.4) {
                c.push(["NX", "XX", "GT", "LT"][rng.random_range(0..4)].into());
            }
            c
        }
        15 => vec!["TTL".into(), k],
        16 => vec!["PERSIST".into(), k],
        17 => vec!["TYPE".into(), k],
        18 => vec!["MSET".into(), k, value(rng), key(rng), value(rng)],
        19 => vec!["MGET".into(), k, key(rng), key(rng)],
        20 => vec!["MSETNX".into(), k, value(rng), key(rng), value(rng)],
        21 => vec!["GETSET".into(), k, value(rng)],
        22 => vec!["GETDEL".into(), k],
        23 => vec!["RENAME".into(), k, key(rng)],
        24 => vec!["RENAMENX".into(), k, key(rng)],
        25 => {
            let mut c = vec!["COPY".into(), k, key(rng)];
            if rng.random_bool(0.5) {
                c.push("REPLACE".into());
            }
            c
        }
        26 => vec!["SETNX".into(), k, value(rng)],
        27 => {
            let mut c = vec!["GETEX".into(), k];
            match rng.random_range(0..3) {
                0 => c.push("PERSIST".into()),
                1 => {
                    c.push("EX".into());
                    c.push(ttl(rng));
                }
                _ => {}
            }
            c
        }
        28 => vec!["INCRBYFLOAT".into(), k, value(rng)],
        // DBSIZE counts keys whose deadline passed until expiry reclaims them,
        // which happens on each server's own schedule, so it is not compared here.
        29 => vec!["EXISTS".into(), k],
        30 => vec!["SELECT".into(), rng.random_range(0..2).to_string()],
        31 => vec!["EXPIRETIME".into(), k],
        32 => vec!["SETEX".into(), k, ttl(rng), value(rng)],
        _ => vec!["MOVE".into(), k, rng.random_range(0..2).to_string()],
    };
    words
}

async fn run_seed(seed: u64, length: usize) {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let mut rng = StdRng::seed_from_u64(seed);
    let commands: Vec<Vec<Vec<u8>>> = (0..length)
        .map(|_| {
            command(&mut rng)
                .into_iter()
                .map(String::into_bytes)
                .collect()
        })
        .collect();
    if let Ok(path) = std::env::var("TALLY_DIFF_DUMP") {
        let text: Vec<String> = commands
            .iter()
            .map(|c| {
                c.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join("\t")
            })
            .collect();
        std::fs::write(path, text.join("\n")).expect("write the stream");
    }
    let mismatches = compare_streams(redis.addr, tally.addr(), &commands).await;
    if let Some(first) = mismatches.first() {
        eprintln!("seed {seed} diverged; the commands before the first difference:");
        for (i, c) in commands[..first.index].iter().enumerate().rev().take(40) {
            let text: Vec<_> = c.iter().map(|a| String::from_utf8_lossy(a)).collect();
            eprintln!("  #{i} {}", text.join(" "));
        }
    }
    assert_no_mismatch(&mismatches);
}

fn length() -> usize {
    std::env::var("TALLY_DIFF_LEN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_streams_match_redis() {
    let seeds: Vec<u64> = match std::env::var("TALLY_DIFF_SEED") {
        Ok(seed) => vec![seed.parse().expect("TALLY_DIFF_SEED is a number")],
        Err(_) => vec![1, 2, 3, 4],
    };
    for seed in seeds {
        run_seed(seed, length()).await;
    }
}
