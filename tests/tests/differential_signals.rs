//! Which writes count as changing their key, as Redis's signalModifiedKey
//! decides: a WATCHed key that a command only looked at (SADD of a member
//! already there, SREM of a missing one, ZADD of the same score, a count of
//! 0, an error) leaves the transaction to run; one it changed, or one Redis
//! signals regardless (HSET, LSET, LTRIM), aborts it. Each case is the same
//! stream to a real redis-server and to tally: set-up, WATCH, the command,
//! MULTI, PING, EXEC (nil when the key was signalled). Client tracking
//! hears of the same keys.

use tally_tests::assert_script_matches_redis;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_signal_their_key_only_when_redis_does() {
    assert_script_matches_redis(
        r#"
        FLUSHALL
        SADD k a
        WATCH k
        SADD k a
        MULTI
        PING
        EXEC
        FLUSHALL
        SADD k a
        WATCH k
        SADD k a b
        MULTI
        PING
        EXEC
        FLUSHALL
        SADD k a b
        WATCH k
        SREM k zz
        MULTI
        PING
        EXEC
        FLUSHALL
        SADD k a b
        WATCH k
        SREM k a
        MULTI
        PING
        EXEC
        FLUSHALL
        SADD k a
        SADD src a
        WATCH k
        SMOVE src k a
        MULTI
        PING
        EXEC
        FLUSHALL
        SADD src a
        SADD k a
        WATCH k
        SMOVE src k zz
        MULTI
        PING
        EXEC
        FLUSHALL
        SADD k a
        WATCH k
        SMOVE k other a
        MULTI
        PING
        EXEC
        FLUSHALL
        SADD k a
        WATCH k
        SPOP k 0
        MULTI
        PING
        EXEC
        FLUSHALL
        SADD k a
        WATCH k
        SPOP k 1
        MULTI
        PING
        EXEC
        FLUSHALL
        SADD k 1 2
        WATCH k
        SINTERSTORE k k
        MULTI
        PING
        EXEC
        FLUSHALL
        HSET k f v
        WATCH k
        HSETNX k f v
        MULTI
        PING
        EXEC
        FLUSHALL
        HSET k f v
        WATCH k
        HSETNX k g v
        MULTI
        PING
        EXEC
        FLUSHALL
        HSET k f v
        WATCH k
        HDEL k zz
        MULTI
        PING
        EXEC
        FLUSHALL
        HSET k f v
        WATCH k
        HSET k f v
        MULTI
        PING
        EXEC
        FLUSHALL
        HSET k f 1
        WATCH k
        HINCRBY k f 0
        MULTI
        PING
        EXEC
        FLUSHALL
        HSET k f v
        WATCH k
        HINCRBY k f 1
        MULTI
        PING
        EXEC
        FLUSHALL
        HSET k f v
        WATCH k
        HINCRBYFLOAT k f 0
        MULTI
        PING
        EXEC
        FLUSHALL
        HSET k f 1
        WATCH k
        HINCRBYFLOAT k f 0
        MULTI
        PING
        EXEC
        FLUSHALL
        ZADD k 1 a
        WATCH k
        ZADD k 1 a
        MULTI
        PING
        EXEC
        FLUSHALL
        ZADD k 1 a
        WATCH k
        ZADD k 2 a
        MULTI
        PING
        EXEC
        FLUSHALL
        ZADD k 1 a
        WATCH k
        ZADD k NX 2 a
        MULTI
        PING
        EXEC
        FLUSHALL
        ZADD k 1 a
        WATCH k
        ZADD k XX 1 zz
        MULTI
        PING
        EXEC
        FLUSHALL
        ZADD k 1 a
        WATCH k
        ZADD k GT 0 a
        MULTI
        PING
        EXEC
        FLUSHALL
        ZADD k 1 a
        WATCH k
        ZADD k CH 1 a
        MULTI
        PING
        EXEC
        FLUSHALL
        ZADD k 1 a
        WATCH k
        ZADD k INCR 0 a
        MULTI
        PING
        EXEC
        FLUSHALL
        ZADD k 1 a
        WATCH k
        ZINCRBY k 0 a
        MULTI
        PING
        EXEC
        FLUSHALL
        ZADD k 1 a
        WATCH k
        ZINCRBY k 1 a
        MULTI
        PING
        EXEC
        FLUSHALL
        ZADD k 1 a
        WATCH k
        ZREM k zz
        MULTI
        PING
        EXEC
        FLUSHALL
        ZADD k 1 a
        WATCH k
        ZREMRANGEBYSCORE k 5 6
        MULTI
        PING
        EXEC
        FLUSHALL
        ZADD k 1 a
        WATCH k
        ZREMRANGEBYRANK k 5 6
        MULTI
        PING
        EXEC
        FLUSHALL
        ZADD k 1 a
        WATCH k
        ZREMRANGEBYLEX k [x [y
        MULTI
        PING
        EXEC
        FLUSHALL
        ZADD k 1 a
        WATCH k
        ZPOPMIN k 0
        MULTI
        PING
        EXEC
        FLUSHALL
        ZADD k 1 a 2 b
        WATCH k
        ZPOPMAX k
        MULTI
        PING
        EXEC
        FLUSHALL
        RPUSH k a
        WATCH k
        LREM k 0 zz
        MULTI
        PING
        EXEC
        FLUSHALL
        RPUSH k a
        WATCH k
        LREM k 0 a
        MULTI
        PING
        EXEC
        FLUSHALL
        RPUSH k a
        WATCH k
        LINSERT k BEFORE zz x
        MULTI
        PING
        EXEC
        FLUSHALL
        RPUSH k a
        WATCH k
        LINSERT k AFTER a x
        MULTI
        PING
        EXEC
        FLUSHALL
        RPUSH k a b
        WATCH k
        LTRIM k 0 -1
        MULTI
        PING
        EXEC
        FLUSHALL
        RPUSH k a
        WATCH k
        LSET k 0 a
        MULTI
        PING
        EXEC
        FLUSHALL
        RPUSH k a
        WATCH k
        LSET k 5 a
        MULTI
        PING
        EXEC
        FLUSHALL
        RPUSH k a
        WATCH k
        LPOP k 0
        MULTI
        PING
        EXEC
        FLUSHALL
        RPUSH k a
        WATCH k
        RPOP k 0
        MULTI
        PING
        EXEC
        FLUSHALL
        RPUSH k a
        WATCH k
        LPUSHX k b
        MULTI
        PING
        EXEC
        FLUSHALL
        RPUSH k a
        WATCH k
        LMOVE k k LEFT RIGHT
        MULTI
        PING
        EXEC
        FLUSHALL
        SET k 1
        WATCH k
        INCRBY k 0
        MULTI
        PING
        EXEC
        FLUSHALL
        SET k 1
        WATCH k
        GETEX k
        MULTI
        PING
        EXEC
        FLUSHALL
        SET k v
        WATCH k
        APPEND k x
        MULTI
        PING
        EXEC
        FLUSHALL
        PING
        WATCH k
        DEL k
        MULTI
        PING
        EXEC
        FLUSHALL
        SET k v
        WATCH k
        SET k w NX
        MULTI
        PING
        EXEC
        FLUSHALL
        PING
        WATCH k
        SET k w XX
        MULTI
        PING
        EXEC
        FLUSHALL
        SET k v
        WATCH k
        PERSIST k
        MULTI
        PING
        EXEC
        FLUSHALL
        SET k 1
        WATCH k
        SETNX k 2
        MULTI
        PING
        EXEC
        FLUSHALL
        SET k v
        WATCH k
        MSETNX k 1 z 2
        MULTI
        PING
        EXEC
        FLUSHALL
        SET k v
        SET z v
        WATCH k
        RENAMENX z k
        MULTI
        PING
        EXEC
        FLUSHALL
        SET k v
        SET z v
        WATCH k
        COPY z k
        MULTI
        PING
        EXEC
        FLUSHALL
        PING
        WATCH k
        EXPIRE k 10
        MULTI
        PING
        EXEC
        FLUSHALL
        SET k v
        WATCH k
        EXPIRE k 100 NX
        MULTI
        PING
        EXEC
        FLUSHALL
        SET k v
        WATCH k
        EXPIRE k 10 XX
        MULTI
        PING
        EXEC
    "#,
    )
    .await;
}
