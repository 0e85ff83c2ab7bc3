//! Which writes count as changing their key, as Redis's signalModifiedKey
//! decides: a WATCHed key that a command only looked at (SADD of a member
//! already there, SREM of a missing one, ZADD of the same score, a count of
//! 0, an error) leaves the transaction to run; one it changed, or one Redis
//! signals regardless (HSET, LSET, LTRIM), aborts it. Each case is the same
//! stream to a real redis-server and to tally: set-up, WATCH, the command,
//! MULTI, PING, EXEC (nil when the key was signalled). Client tracking
//! hears of the same keys.

use tally_tests::assert_script_matches_redis;

/// (set-up commands, `|`-separated; the write under test on key `k`).
const CASES: &[(&str, &str)] = &[
    ("SADD k a", "SADD k a"),
    ("SADD k a", "SADD k a b"),
    ("SADD k a b", "SREM k zz"),
    ("SADD k a b", "SREM k a"),
    ("SADD k a | SADD src a", "SMOVE src k a"),
    ("SADD src a | SADD k a", "SMOVE src k zz"),
    ("SADD k a", "SMOVE k other a"),
    ("SADD k a", "SPOP k 0"),
    ("SADD k a", "SPOP k 1"),
    ("SADD k 1 2", "SINTERSTORE k k"),
    ("HSET k f v", "HSETNX k f v"),
    ("HSET k f v", "HSETNX k g v"),
    ("HSET k f v", "HDEL k zz"),
    ("HSET k f v", "HSET k f v"),
    ("HSET k f 1", "HINCRBY k f 0"),
    ("HSET k f v", "HINCRBY k f 1"),
    ("HSET k f v", "HINCRBYFLOAT k f 0"),
    ("HSET k f 1", "HINCRBYFLOAT k f 0"),
    ("ZADD k 1 a", "ZADD k 1 a"),
    ("ZADD k 1 a", "ZADD k 2 a"),
    ("ZADD k 1 a", "ZADD k NX 2 a"),
    ("ZADD k 1 a", "ZADD k XX 1 zz"),
    ("ZADD k 1 a", "ZADD k GT 0 a"),
    ("ZADD k 1 a", "ZADD k CH 1 a"),
    ("ZADD k 1 a", "ZADD k INCR 0 a"),
    ("ZADD k 1 a", "ZINCRBY k 0 a"),
    ("ZADD k 1 a", "ZINCRBY k 1 a"),
    ("ZADD k 1 a", "ZREM k zz"),
    ("ZADD k 1 a", "ZREMRANGEBYSCORE k 5 6"),
    ("ZADD k 1 a", "ZREMRANGEBYRANK k 5 6"),
    ("ZADD k 1 a", "ZREMRANGEBYLEX k [x [y"),
    ("ZADD k 1 a", "ZPOPMIN k 0"),
    ("ZADD k 1 a 2 b", "ZPOPMAX k"),
    ("RPUSH k a", "LREM k 0 zz"),
    ("RPUSH k a", "LREM k 0 a"),
    ("RPUSH k a", "LINSERT k BEFORE zz x"),
    ("RPUSH k a", "LINSERT k AFTER a x"),
    ("RPUSH k a b", "LTRIM k 0 -1"),
    ("RPUSH k a", "LSET k 0 a"),
    ("RPUSH k a", "LSET k 5 a"),
    ("RPUSH k a", "LPOP k 0"),
    ("RPUSH k a", "RPOP k 0"),
    ("RPUSH k a", "LPUSHX k b"),
    ("RPUSH k a", "LMOVE k k LEFT RIGHT"),
    ("SET k 1", "INCRBY k 0"),
    ("SET k 1", "GETEX k"),
    ("SET k v", "APPEND k x"),
    ("PING", "DEL k"),
    ("SET k v", "SET k w NX"),
    ("PING", "SET k w XX"),
    ("SET k v", "PERSIST k"),
    ("SET k 1", "SETNX k 2"),
    ("SET k v", "MSETNX k 1 z 2"),
    ("SET k v | SET z v", "RENAMENX z k"),
    ("SET k v | SET z v", "COPY z k"),
    ("PING", "EXPIRE k 10"),
    ("SET k v", "EXPIRE k 100 NX"),
    ("SET k v", "EXPIRE k 10 XX"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_signal_their_key_only_when_redis_does() {
    let mut script = String::new();
    for (setup, write) in CASES {
        script.push_str("FLUSHALL\n");
        for command in setup.split(" | ") {
            script.push_str(command);
            script.push('\n');
        }
        script.push_str(&format!("WATCH k\n{write}\nMULTI\nPING\nEXEC\n"));
    }
    assert_script_matches_redis(&script).await;
}
