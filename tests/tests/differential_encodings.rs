//! Differential tests for Redis's encoding thresholds: CONFIG SET of
//! `set-max-intset-entries`, `hash-max-listpack-*` and `zset-max-listpack-*`
//! (and their `ziplist` aliases) decides when a write converts a value, which
//! OBJECT ENCODING and the order of small sets and hashes show. Replies are
//! compared byte for byte with a real redis-server; members are listed only
//! while their order is the small encoding's (Redis's hash tables order by
//! chance).

use tally_tests::assert_script_matches_redis;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_max_intset_entries_decides_when_sets_convert() {
    assert_script_matches_redis(
        r#"
        CONFIG GET set-max-intset-entries
        CONFIG SET set-max-intset-entries 3
        SADD s 3 1 2
        OBJECT ENCODING s
        SMEMBERS s
        SADD s 4
        OBJECT ENCODING s
        SCARD s
        CONFIG SET set-max-intset-entries 512
        OBJECT ENCODING s
        SADD s2 1
        OBJECT ENCODING s2
        CONFIG SET set-max-intset-entries 0
        SADD s3 1
        OBJECT ENCODING s3
        SISMEMBER s3 1
        CONFIG SET set-max-intset-entries 4
        SADD a 1 2 3
        SADD b 3 4 5
        SUNIONSTORE u a b
        OBJECT ENCODING u
        SINTERSTORE i a b
        OBJECT ENCODING i
        SMEMBERS i
        SDIFFSTORE d a b
        OBJECT ENCODING d
        SMEMBERS d
        SMOVE a fresh 1
        OBJECT ENCODING fresh
        CONFIG GET set-max-intset-entries
        CONFIG SET set-max-intset-entries -1
        CONFIG SET set-max-intset-entries abc
        CONFIG SET set-max-intset-entries 9223372036854775807
        CONFIG SET set-max-intset-entries 9223372036854775808
        CONFIG GET set-max-intset-entries
    "#,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_thresholds_decide_when_hashes_convert() {
    assert_script_matches_redis(
        r#"
        CONFIG GET hash-max-ziplist-entries
        CONFIG SET hash-max-ziplist-entries 2
        CONFIG GET hash-max-listpack-entries
        HSET h b 2 a 1
        OBJECT ENCODING h
        HGETALL h
        HSET h c 3
        OBJECT ENCODING h
        HDEL h c b
        OBJECT ENCODING h
        CONFIG SET hash-max-listpack-entries 512 hash-max-listpack-value 3
        HSET h2 f abcd
        OBJECT ENCODING h2
        HSET h3 f abc
        OBJECT ENCODING h3
        HSETNX h4 long-field v
        OBJECT ENCODING h4
        HINCRBY h5 counter 1
        OBJECT ENCODING h5
        CONFIG GET hash-max-ziplist-value
        CONFIG SET hash-max-listpack-value 1kb
        CONFIG GET hash-max-listpack-value
        CONFIG SET hash-max-listpack-value -1
        CONFIG SET hash-max-listpack-entries -1
        CONFIG SET hash-max-ziplist-value 9223372036854775808
    "#,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zset_thresholds_decide_when_sorted_sets_convert() {
    assert_script_matches_redis(
        r#"
        CONFIG SET zset-max-ziplist-entries 1
        ZADD z 1 a
        OBJECT ENCODING z
        ZADD z 2 b
        OBJECT ENCODING z
        CONFIG SET zset-max-listpack-entries 128 zset-max-listpack-value 2
        ZADD z2 1 abc
        OBJECT ENCODING z2
        ZADD z3 1 ab
        OBJECT ENCODING z3
        ZINCRBY z4 1 toolong
        OBJECT ENCODING z4
        CONFIG SET zset-max-listpack-value 64 zset-max-listpack-entries 2
        ZADD src 1 a 2 b 3 c
        OBJECT ENCODING src
        ZRANGESTORE all src 0 -1
        OBJECT ENCODING all
        ZRANGESTORE two src 0 1
        OBJECT ENCODING two
        CONFIG SET zset-max-ziplist-entries 0
        ZADD none 1 a
        OBJECT ENCODING none
        CONFIG GET zset-max-listpack-entries
        CONFIG GET zset-max-ziplist-value
        CONFIG SET zset-max-listpack-value -1
        CONFIG SET zset-max-listpack-entries x
    "#,
    )
    .await;
}
