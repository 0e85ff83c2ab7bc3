//! ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD against a real
//! redis-server, reply for reply: hand-picked edge cases (infinities,
//! weights, aggregates, sets among the inputs, errors) and seeded random
//! streams whose float sums must agree to the bit.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tally_tests::{
    assert_no_mismatch, assert_script_matches_redis, compare_streams, RedisServer, TestServer,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn algebra_matches_redis() {
    assert_script_matches_redis(
        r#"
        ZADD {z}a 1 x 2 y 3 z
        ZADD {z}b 10 y 20 z 30 w
        SADD {z}s x w v
        ZUNION 2 {z}a {z}b
        ZUNION 2 {z}a {z}b WITHSCORES
        ZUNION 3 {z}a {z}b {z}s WITHSCORES
        ZUNION 2 {z}a {z}b WEIGHTS 2 0.5 WITHSCORES
        ZUNION 2 {z}a {z}b AGGREGATE MIN WITHSCORES
        ZUNION 2 {z}a {z}b AGGREGATE max WITHSCORES
        ZUNION 2 {z}a {z}b WEIGHTS 1 -1 AGGREGATE SUM WITHSCORES
        ZUNION 2 {z}a {z}missing WITHSCORES
        ZINTER 2 {z}a {z}b WITHSCORES
        ZINTER 3 {z}a {z}b {z}s WITHSCORES
        ZINTER 2 {z}a {z}s WITHSCORES
        ZINTER 2 {z}a {z}b AGGREGATE MAX WEIGHTS 3 1 WITHSCORES
        ZINTER 2 {z}a {z}missing
        ZINTER 1 {z}a
        ZDIFF 2 {z}a {z}b WITHSCORES
        ZDIFF 3 {z}b {z}a {z}s WITHSCORES
        ZDIFF 1 {z}missing
        ZDIFF 2 {z}a {z}b WEIGHTS 1 2
        ZDIFF 2 {z}a {z}b AGGREGATE SUM
        ZINTERCARD 2 {z}a {z}b
        ZINTERCARD 2 {z}a {z}b LIMIT 1
        ZINTERCARD 2 {z}a {z}b LIMIT 0
        ZINTERCARD 2 {z}a {z}b LIMIT -1
        ZINTERCARD 2 {z}a {z}b LIMIT x
        ZINTERCARD 2 {z}a {z}b WITHSCORES
        ZINTERCARD 0 {z}a
        ZINTERCARD 3 {z}a {z}b
        ZADD {z}inf +inf p -inf n 0 q
        ZADD {z}ninf -inf p +inf n 5 q
        ZUNION 2 {z}inf {z}ninf WITHSCORES
        ZINTER 2 {z}inf {z}ninf WITHSCORES
        ZUNION 1 {z}inf WEIGHTS 0 WITHSCORES
        ZUNION 1 {z}inf WEIGHTS inf WITHSCORES
        ZUNION 1 {z}inf WEIGHTS nan
        ZUNION 1 {z}inf WEIGHTS x
        ZUNION 1 {z}inf WEIGHTS
        ZUNION 1 {z}inf AGGREGATE avg
        ZUNION 1 {z}inf AGGREGATE
        ZUNION 1 {z}inf FOO
        ZUNION 0 {z}a
        ZUNION -1 {z}a
        ZUNION x {z}a
        ZUNION 3 {z}a {z}b
        ZUNIONSTORE {z}d 2 {z}a {z}b WEIGHTS 1 2
        ZRANGE {z}d 0 -1 WITHSCORES
        ZUNIONSTORE {z}d 2 {z}a {z}b WITHSCORES
        ZINTERSTORE {z}d 2 {z}a {z}b AGGREGATE MIN
        ZRANGE {z}d 0 -1 WITHSCORES
        ZDIFFSTORE {z}d 2 {z}a {z}b
        ZRANGE {z}d 0 -1 WITHSCORES
        SET {z}d x EX 100
        ZINTERSTORE {z}d 2 {z}a {z}missing
        EXISTS {z}d
        SET {z}d x EX 100
        ZUNIONSTORE {z}d 1 {z}a
        TTL {z}d
        TYPE {z}d
        ZUNIONSTORE {z}d 0 {z}a
        ZINTERSTORE {z}d 0 {z}a
        ZDIFFSTORE {z}d 0 {z}a
        ZUNIONSTORE {z}a 2 {z}a {z}a
        ZRANGE {z}a 0 -1 WITHSCORES
        SET {z}str v
        ZUNION 2 {z}a {z}str
        ZINTERSTORE {z}d 2 {z}str {z}a
        ZDIFF 2 {z}a {z}str
        ZINTERCARD 1 {z}str
        COMMAND GETKEYS ZUNION 2 a b WEIGHTS 1 2
        COMMAND GETKEYS ZINTER 1 a
        COMMAND GETKEYS ZDIFF 3 a b
        COMMAND GETKEYS ZINTERCARD 2 a b LIMIT 1
        COMMAND GETKEYS ZUNIONSTORE d 2 a b
        COMMAND GETKEYS ZINTERSTORE d 3 a b c AGGREGATE MAX
        COMMAND GETKEYS ZDIFFSTORE d 0 a
        COMMAND GETKEYS ZDIFFSTORE d 5 a
        COMMAND GETKEYS ZUNION 0 a
        COMMAND GETKEYS LMPOP 2 a b LEFT
        COMMAND GETKEYS ZMPOP 1 a MIN COUNT 2
        COMMAND GETKEYS SORT_RO a BY b
        HELLO 3
        ZUNION 2 {z}a {z}b WITHSCORES
        ZINTER 2 {z}a {z}b
        "#,
    )
    .await;
}

const KEYS: &[&str] = &["{z}0", "{z}1", "{z}2", "{z}3", "{z}s"];

fn score(rng: &mut StdRng) -> String {
    match rng.random_range(0..12) {
        0 => "inf".to_string(),
        1 => "-inf".to_string(),
        2 => format!(
            "{}.{}",
            rng.random_range(-50..50),
            rng.random_range(0..1000)
        ),
        3 => format!("{}e{}", rng.random_range(1..9), rng.random_range(-5..20)),
        _ => rng.random_range(-20..20).to_string(),
    }
}

fn weight(rng: &mut StdRng) -> String {
    match rng.random_range(0..8) {
        0 => "0".to_string(),
        1 => "-1".to_string(),
        2 => "0.1".to_string(),
        3 => "inf".to_string(),
        _ => rng.random_range(-3..4).to_string(),
    }
}

fn member(rng: &mut StdRng) -> String {
    ["a", "b", "c", "d", "e", "f", "10", "2"][rng.random_range(0..8)].to_string()
}

fn command(rng: &mut StdRng) -> Vec<String> {
    let key = |rng: &mut StdRng| KEYS[rng.random_range(0..KEYS.len())].to_string();
    match rng.random_range(0..10) {
        0..=2 => {
            let mut c = vec!["ZADD".to_string(), KEYS[rng.random_range(0..4)].to_string()];
            for _ in 0..rng.random_range(1..4) {
                c.extend([score(rng), member(rng)]);
            }
            c
        }
        3 => vec!["SADD".into(), "{z}s".into(), member(rng)],
        4 => vec!["ZREM".into(), key(rng), member(rng)],
        _ => {
            let (name, store) = [
                ("ZUNION", false),
                ("ZINTER", false),
                ("ZDIFF", false),
                ("ZUNIONSTORE", true),
                ("ZINTERSTORE", true),
                ("ZDIFFSTORE", true),
                ("ZINTERCARD", false),
            ][rng.random_range(0..7)];
            let mut c = vec![name.to_string()];
            if store {
                c.push(KEYS[rng.random_range(0..4)].to_string());
            }
            let n = rng.random_range(1..4);
            c.push(n.to_string());
            for _ in 0..n {
                c.push(key(rng));
            }
            if rng.random_range(0..2) == 0 {
                c.push("WEIGHTS".into());
                for _ in 0..n {
                    c.push(weight(rng));
                }
            }
            if rng.random_range(0..2) == 0 {
                c.push("AGGREGATE".into());
                c.push(["SUM", "MIN", "MAX"][rng.random_range(0..3)].into());
            }
            if name == "ZINTERCARD" && rng.random_range(0..2) == 0 {
                c.extend(["LIMIT".to_string(), rng.random_range(0..4).to_string()]);
            }
            if !store && rng.random_range(0..3) != 0 {
                c.push("WITHSCORES".into());
            }
            c
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_algebra_matches_redis() {
    let len = std::env::var("TALLY_DIFF_LEN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    for seed in [51u64, 52] {
        let Some(redis) = RedisServer::start() else {
            return;
        };
        let tally = TestServer::start_real_clock().await;
        let mut rng = StdRng::seed_from_u64(seed);
        let commands: Vec<Vec<Vec<u8>>> = (0..len)
            .map(|_| {
                command(&mut rng)
                    .into_iter()
                    .map(String::into_bytes)
                    .collect()
            })
            .collect();
        assert_no_mismatch(&compare_streams(redis.addr, tally.addr(), &commands).await);
    }
}

/// LMPOP and ZMPOP (kept here with the other multi-key sorted-set
/// commands): the first key with elements, COUNT, nil, and every error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lmpop_and_zmpop_match_redis() {
    assert_script_matches_redis(
        r#"
        RPUSH {m}l a b c d
        RPUSH {m}l2 x
        LMPOP 2 {m}missing {m}l LEFT
        LMPOP 2 {m}missing {m}l RIGHT COUNT 2
        LMPOP 2 {m}l {m}l2 left COUNT 10
        EXISTS {m}l
        LMPOP 2 {m}l {m}l2 LEFT COUNT 10
        LMPOP 1 {m}l LEFT
        LMPOP 0 {m}l LEFT
        LMPOP -1 {m}l LEFT
        LMPOP x {m}l LEFT
        LMPOP 2 {m}l LEFT
        LMPOP 9223372036854775807 {m}l LEFT
        LMPOP 1 {m}l MIDDLE
        LMPOP 1 {m}l LEFT COUNT 0
        LMPOP 1 {m}l LEFT COUNT -1
        LMPOP 1 {m}l LEFT COUNT x
        LMPOP 1 {m}l LEFT COUNT 1 COUNT 1
        LMPOP 1 {m}l LEFT COUNT
        LMPOP 1 {m}l LEFT FOO
        SET {m}s v
        RPUSH {m}l y
        LMPOP 2 {m}s {m}l LEFT
        LMPOP 2 {m}l {m}s LEFT
        ZADD {m}z 1 a 2 b 3 c -inf n
        ZADD {m}z2 5 q
        ZMPOP 2 {m}missing {m}z MIN
        ZMPOP 2 {m}missing {m}z MAX COUNT 2
        ZMPOP 2 {m}z {m}z2 min COUNT 10
        EXISTS {m}z
        ZMPOP 2 {m}z {m}z2 MAX
        ZMPOP 1 {m}z MIN
        ZMPOP 1 {m}z LEFT
        ZMPOP 0 {m}z MIN
        ZMPOP 1 {m}z MIN COUNT 0
        ZMPOP 2 {m}s {m}z MIN
        HELLO 3
        RPUSH {m}l a b
        LMPOP 1 {m}l RIGHT COUNT 5
        LMPOP 1 {m}l RIGHT
        ZADD {m}z 1.5 a 2 b
        ZMPOP 1 {m}z MIN COUNT 5
        ZMPOP 1 {m}z MIN
        "#,
    )
    .await;
}
