//! Differential tests for hashes, lists, sets and sorted sets: the same
//! command streams go to a real redis-server and to tally, replies compared
//! byte for byte. Replies whose order Redis leaves to its hash tables (a set
//! of non-integers, a hash past 512 fields) or to chance (SPOP, random picks
//! smaller than the collection) are kept out of these streams; the socket
//! tests in `types.rs` check those by content.

use tally_tests::assert_script_matches_redis;

async fn run(text: &str) {
    assert_script_matches_redis(text).await;
}

/// Every type's commands against a key of every other type.
const WRONGTYPE_MIX: &str = r#"
    SET str v
    HSET hash f v
    RPUSH list a
    SADD set m
    ZADD zset 1 m
    GET hash
    GET list
    INCR set
    APPEND zset x
    STRLEN hash
    GETRANGE list 0 1
    SETRANGE set 0 x
    INCRBYFLOAT zset 1
    GETDEL hash
    GETEX list
    GETSET set v
    MGET str hash list set zset
    HGET str f
    HSET list f v
    HGETALL set
    HLEN zset
    HINCRBY str f 1
    HDEL list f
    HRANDFIELD set
    HSCAN zset 0
    LPUSH hash x
    RPUSH str x
    LPOP set
    LLEN zset
    LRANGE hash 0 -1
    LINDEX str 0
    LSET set 0 x
    LMOVE list hash LEFT RIGHT
    LMOVE hash list LEFT RIGHT
    RPOPLPUSH str list
    SADD str x
    SMEMBERS hash
    SISMEMBER list a
    SCARD zset
    SINTER set hash
    SUNION set list
    SDIFF set zset
    SINTERSTORE dst set str
    SMOVE set hash m
    SMOVE list set a
    ZADD str 1 x
    ZSCORE hash f
    ZRANGE list 0 -1
    ZCARD set
    ZINCRBY str 1 m
    ZPOPMIN hash
    ZRANGESTORE dst set 0 -1
    PFADD hash a
    PFCOUNT list
    PFCOUNT str set
    PFMERGE zset str
    PFMERGE dst hash
    PFDEBUG ENCODING set
    PFADD sketch a b
    TYPE sketch
    HSET sketch f v
    LPUSH sketch x
    DEL sketch
    TYPE str
    TYPE hash
    TYPE list
    TYPE set
    TYPE zset
    TYPE missing
    OBJECT ENCODING hash
    OBJECT ENCODING list
    OBJECT ENCODING set
    OBJECT ENCODING zset
    EXISTS str hash list set zset
    DEL str hash list set zset
    EXISTS str hash list set zset
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_types_are_refused_like_redis() {
    run(WRONGTYPE_MIX).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hashes_match_redis() {
    run(r#"
        HSET h a 1 b 2 c 3
        HSET h a 10 d 4
        HSET h odd
        HMSET h x 1 y
        HSETNX h a 5
        HSETNX h e 5
        HGET h a
        HGET h nosuch
        HGET missing a
        HMGET h a nosuch b
        HMGET missing a b
        HGETALL h
        HKEYS h
        HVALS h
        HLEN h
        HLEN missing
        HEXISTS h a
        HEXISTS h nosuch
        HSTRLEN h a
        HSTRLEN h nosuch
        HDEL h b nosuch
        HGETALL h
        HINCRBY h a 5
        HINCRBY h new -3
        HINCRBY h a notanumber
        HSET h s text
        HINCRBY h s 1
        HSET h big 9223372036854775807
        HINCRBY h big 1
        HINCRBYFLOAT h f 1.5
        HINCRBYFLOAT h f 0.1
        HINCRBYFLOAT h f 1e3
        HINCRBYFLOAT h s 1
        HINCRBYFLOAT h f abc
        HINCRBYFLOAT h f inf
        HSET h inf inf
        HINCRBYFLOAT h inf 1
        HINCRBYFLOAT h f -1.6
        HGET h f
        HRANDFIELD missing
        HRANDFIELD missing 3
        HRANDFIELD h 0
        HRANDFIELD h 100
        HRANDFIELD h 100 WITHVALUES
        HRANDFIELD h 1 WITHVALUES extra
        HRANDFIELD h 1 NOTWITH
        HRANDFIELD h abc
        HRANDFIELD h -9223372036854775808
        HSCAN h 0
        HSCAN h 0 MATCH a*
        HSCAN h 0 COUNT 1000
        HSCAN h 0 COUNT 0
        HSCAN h abc
        HSCAN h 0 NOPE
        HSCAN missing 0
        OBJECT ENCODING h
        HSET h longvalue aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
        OBJECT ENCODING h
        HDEL h longvalue
        OBJECT ENCODING h
        HDEL h a c d x y e new s big f inf
        EXISTS h
        HDEL h a
        HSET h
        HGET h
        HINCRBY h a
    "#)
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_match_redis() {
    run(r#"
        RPUSH l a b c
        LPUSH l z y
        LRANGE l 0 -1
        LPUSHX nosuch a
        RPUSHX nosuch a
        LPUSHX l first
        RPUSHX l last x2
        LLEN l
        LLEN missing
        LINDEX l 0
        LINDEX l -1
        LINDEX l 100
        LINDEX l abc
        LINDEX missing 0
        LRANGE l 1 3
        LRANGE l -3 -1
        LRANGE l 5 2
        LRANGE l -100 100
        LRANGE l 0 abc
        LRANGE missing 0 -1
        LSET l 0 FIRST
        LSET l -1 LAST
        LSET l 100 x
        LSET missing 0 x
        LSET l abc x
        LRANGE l 0 -1
        RPUSH r a b a c a d a
        LREM r 2 a
        LRANGE r 0 -1
        LREM r -1 a
        LRANGE r 0 -1
        LREM r 0 a
        LRANGE r 0 -1
        LREM r 0 nosuch
        LREM missing 0 a
        LREM r x a
        LINSERT r BEFORE c X
        LINSERT r AFTER d Y
        LINSERT r AFTER nosuch Y
        LINSERT missing AFTER a b
        LINSERT r MIDDLE c X
        LRANGE r 0 -1
        RPUSH p a b c a b c a
        LPOS p a
        LPOS p a RANK 2
        LPOS p a RANK -1
        LPOS p a COUNT 0
        LPOS p a COUNT 2
        LPOS p a RANK -2 COUNT 2
        LPOS p a MAXLEN 3 COUNT 0
        LPOS p a RANK -1 MAXLEN 2 COUNT 0
        LPOS p nosuch
        LPOS p nosuch COUNT 2
        LPOS missing a
        LPOS missing a COUNT 1
        LPOS p a RANK 0
        LPOS p a COUNT -1
        LPOS p a MAXLEN -1
        LPOS p a RANK
        LPOS p a FOO 1
        LPOS p a RANK -9223372036854775808
        LPOP p
        RPOP p
        LPOP p 2
        RPOP p 0
        LPOP p -1
        LPOP p abc
        LPOP p 1 2
        LPOP p 100
        EXISTS p
        LPOP p
        LPOP p 2
        RPOP missing 1
        LTRIM l 1 -2
        LRANGE l 0 -1
        LTRIM l 5 1
        EXISTS l
        LTRIM missing 0 1
        RPUSH m1 a b c
        LMOVE m1 m2 LEFT RIGHT
        LMOVE m1 m2 RIGHT LEFT
        LMOVE m1 m2 LEFT UP
        LRANGE m2 0 -1
        LMOVE m1 m1 LEFT RIGHT
        LMOVE m1 m2 LEFT LEFT
        EXISTS m1
        LMOVE m1 m2 LEFT LEFT
        RPOPLPUSH m2 m2
        LRANGE m2 0 -1
        RPOPLPUSH m2 m3
        RPOPLPUSH missing m3
        LRANGE m3 0 -1
        OBJECT ENCODING m3
    "#)
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sets_match_redis() {
    run(r#"
        SADD s 3 1 2 3
        SMEMBERS s
        SADD s 10 -5
        SMEMBERS s
        OBJECT ENCODING s
        SISMEMBER s 1
        SISMEMBER s 01
        SISMEMBER missing 1
        SMISMEMBER s 1 4 10
        SMISMEMBER missing 1 2
        SCARD s
        SCARD missing
        SREM s 1 nosuch
        SMEMBERS s
        SRANDMEMBER s 100
        SRANDMEMBER s 0
        SRANDMEMBER missing
        SRANDMEMBER missing 5
        SRANDMEMBER s abc
        SRANDMEMBER s 1 2
        SRANDMEMBER s -9223372036854775808
        SPOP missing
        SPOP missing 3
        SPOP s 0
        SPOP s -1
        SPOP s abc
        SPOP s 1 2
        SADD t 2 3 4 100
        SINTER s t
        SINTER s t missing
        SUNION s t
        SUNION s missing
        SDIFF s t
        SDIFF t s
        SDIFF missing s
        SINTERSTORE dst s t
        SMEMBERS dst
        SUNIONSTORE dst s t
        SMEMBERS dst
        SDIFFSTORE dst s t
        SMEMBERS dst
        SINTERSTORE dst s missing
        EXISTS dst
        SET str v
        SUNIONSTORE str s
        TYPE str
        SINTERCARD 2 s t
        SINTERCARD 2 s t LIMIT 1
        SINTERCARD 2 s t LIMIT 0
        SINTERCARD 1 s
        SINTERCARD 0 s
        SINTERCARD 3 s t
        SINTERCARD 2 s t LIMIT -1
        SINTERCARD 2 s t LIMIT a
        SINTERCARD 2 s t LIMIT 99999999999999999999
        SINTERCARD 2 s t LIMIT
        SINTERCARD 2 s t FOO 1
        SINTERCARD abc s
        SMOVE s t 3
        SMOVE s t nosuch
        SMOVE missing t 3
        SMOVE t t 100
        SMEMBERS s
        SMEMBERS t
        SMOVE t s 100
        SMEMBERS s
        SSCAN s 0
        SSCAN s 0 MATCH 1*
        SSCAN s x
        SSCAN missing 0
        SADD one onlymember
        SMEMBERS one
        OBJECT ENCODING one
        SINTER one s
        SREM one onlymember
        EXISTS one
        SADD big 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20
        SCARD big
        SPOP big 100
        EXISTS big
        SADD s
        SISMEMBER s
    "#)
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sorted_sets_match_redis() {
    run(r#"
        ZADD z 1 a 2 b 3 c
        ZADD z 1.5 a
        ZADD z NX 9 a 4 d
        ZADD z XX 9 a 5 e
        ZADD z XX CH 9 a 8 b
        ZADD z GT 1 a
        ZADD z LT 1 a
        ZADD z GT CH 10 a
        ZADD z INCR 1 a
        ZADD z INCR NX 1 a
        ZADD z INCR XX 1 nosuch
        ZADD z INCR 1 a 2 b
        ZADD z NX XX 1 a
        ZADD z GT LT 1 a
        ZADD z GT NX 1 a
        ZADD z 1
        ZADD z abc a
        ZADD z nan a
        ZADD z 1 a abc b
        ZADD z inf inf
        ZADD z INCR -inf inf
        ZADD xxmissing XX 1 a
        EXISTS xxmissing
        ZADD z -inf minf 0.1 point1 -0 zero
        ZRANGE z 0 -1 WITHSCORES
        ZSCORE z a
        ZSCORE z point1
        ZSCORE z nosuch
        ZSCORE missing a
        ZMSCORE z a nosuch b
        ZMSCORE missing a
        ZINCRBY z 2.5 b
        ZINCRBY z 1 new
        ZINCRBY z abc b
        ZINCRBY z -inf inf
        ZCARD z
        ZCARD missing
        ZCOUNT z -inf +inf
        ZCOUNT z (1 3
        ZCOUNT z 2 (3
        ZCOUNT z 5 1
        ZCOUNT z abc 1
        ZCOUNT z (inf +inf
        ZRANK z a
        ZREVRANK z a
        ZRANK z nosuch
        ZRANK missing a
        ZRANGE z 0 2
        ZRANGE z -2 -1 WITHSCORES
        ZRANGE z 0 -1 REV
        ZRANGE z (1 3 BYSCORE
        ZRANGE z 3 (1 BYSCORE REV WITHSCORES
        ZRANGE z -inf +inf BYSCORE LIMIT 1 2
        ZRANGE z -inf +inf BYSCORE LIMIT -1 2
        ZRANGE z -inf +inf BYSCORE LIMIT 1 -1 WITHSCORES
        ZRANGE z 0 -1 LIMIT 0 1
        ZRANGE z 0 -1 BYLEX
        ZRANGE z - + BYLEX WITHSCORES
        ZRANGE z 0 -1 BYSCORE BYLEX
        ZRANGE z 0 -1 REV REV
        ZRANGE z 0 -1 FOO
        ZRANGE z a b
        ZRANGE z a b BYSCORE
        ZRANGE missing 0 -1
        ZRANGEBYSCORE z 1 3
        ZRANGEBYSCORE z (1 +inf WITHSCORES LIMIT 0 2
        ZRANGEBYSCORE z 1 3 BYSCORE
        ZRANGEBYSCORE z 1 3 REV
        ZREVRANGEBYSCORE z +inf -inf
        ZREVRANGEBYSCORE z 3 1 WITHSCORES
        ZREVRANGE z 0 1 WITHSCORES
        ZREVRANGE z 0 1 LIMIT 0 1
        ZRANGESTORE dst z 0 1
        ZRANGE dst 0 -1 WITHSCORES
        ZRANGESTORE dst z 5 1 BYSCORE
        EXISTS dst
        ZRANGESTORE dst z 0 -1 WITHSCORES
        ZRANGESTORE dst missing 0 -1
        ZADD lex 0 a 0 b 0 c 0 d 0 e
        ZRANGEBYLEX lex - +
        ZRANGEBYLEX lex [b (d
        ZRANGEBYLEX lex (a [c LIMIT 1 1
        ZREVRANGEBYLEX lex + -
        ZREVRANGEBYLEX lex [d [b
        ZRANGEBYLEX lex b d
        ZRANGEBYLEX lex + -
        ZLEXCOUNT lex - +
        ZLEXCOUNT lex [b [c
        ZLEXCOUNT lex a b
        ZREMRANGEBYLEX lex [a (c
        ZRANGE lex 0 -1
        ZREMRANGEBYRANK lex 0 0
        ZRANGE lex 0 -1
        ZREMRANGEBYSCORE z -inf (1
        ZRANGE z 0 -1 WITHSCORES
        ZREMRANGEBYSCORE z abc 1
        ZREMRANGEBYRANK z x 1
        ZREMRANGEBYLEX z x y
        ZREMRANGEBYRANK missing 0 -1
        ZPOPMIN z
        ZPOPMAX z
        ZPOPMIN z 2
        ZPOPMAX z 0
        ZPOPMIN z -1
        ZPOPMIN z 1 2
        ZPOPMIN missing
        ZPOPMIN missing 2
        ZREM z b nosuch
        ZRANDMEMBER missing
        ZRANDMEMBER missing 2
        ZADD single 7 only
        ZRANDMEMBER single 100
        ZRANDMEMBER single 100 WITHSCORES
        ZRANDMEMBER single 1
        ZRANDMEMBER single -3 WITHSCORES
        ZRANDMEMBER z 1 NOPE
        ZRANDMEMBER z abc
        ZSCAN z 0
        ZSCAN z 0 MATCH i*
        ZSCAN missing 0
        OBJECT ENCODING z
        ZADD long 1 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
        OBJECT ENCODING long
        ZPOPMIN z 100
        EXISTS z
        ZADD window 1720000000001 r1 1720000000002 r2 1720000000003 r3
        ZREMRANGEBYSCORE window 0 1720000000001
        ZCARD window
        ZRANGE window 0 0 WITHSCORES
    "#)
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collection_replies_match_redis_in_resp3() {
    run(r#"
        HELLO 3
        HSET h a 1 b 2
        HGETALL h
        HGETALL missing
        HRANDFIELD h 10 WITHVALUES
        SADD s 1 2 3
        SMEMBERS s
        SMEMBERS missing
        SINTER s s
        SUNION s missing
        SDIFF s missing
        SPOP missing 2
        SRANDMEMBER s 10
        ZADD z 1 a 2.5 b
        ZSCORE z b
        ZMSCORE z a nosuch
        ZINCRBY z 1 a
        ZADD z INCR 1 a
        ZRANGE z 0 -1 WITHSCORES
        ZRANGEBYSCORE z -inf +inf WITHSCORES
        ZREVRANGE z 0 -1 WITHSCORES
        ZADD single 7 only
        ZRANDMEMBER single 10 WITHSCORES
        ZPOPMIN z
        ZPOPMAX z 5
        ZPOPMIN missing
        LPOP missing 2
        RPUSH l a
        LPOP l 0
        LPOS l a COUNT 0
        HSCAN h 0
        ZADD inf inf a -inf b
        ZRANGE inf 0 -1 WITHSCORES
        HELLO 2
        ZRANGE inf 0 -1 WITHSCORES
    "#)
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyspace_commands_cover_every_type() {
    run(r#"
        HSET h a 1
        RPUSH l a b
        SADD s x
        ZADD z 1 a
        EXPIRE h 100
        TTL h
        PERSIST h
        TTL h
        COPY h h2
        HGETALL h2
        COPY l s
        COPY l s REPLACE
        TYPE s
        LRANGE s 0 -1
        RENAME z z2
        ZRANGE z2 0 -1 WITHSCORES
        EXISTS z
        RENAMENX z2 h
        RENAME s h
        TYPE h
        DEL h
        SCAN 0 TYPE list COUNT 1000
        SCAN 0 TYPE zset COUNT 1000
        SCAN 0 TYPE hash COUNT 1000
        SCAN 0 TYPE set COUNT 1000
        MOVE z2 1
        SELECT 1
        TYPE z2
        ZCARD z2
        SELECT 0
        DBSIZE
        FLUSHDB
        DBSIZE
    "#)
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_matches_redis() {
    run(r#"
        SET k 1
        WATCH k
        GET k
        MULTI
        INCR k
        EXEC
        WATCH k
        SET k 5
        MULTI
        INCR k
        EXEC
        GET k
        WATCH k other
        MULTI
        INCR k
        EXEC
        WATCH missing
        MULTI
        SET missing 1
        EXEC
        WATCH k
        UNWATCH
        SET k 2
        MULTI
        GET k
        EXEC
        WATCH k
        MULTI
        WATCH k
        INCR k
        EXEC
        WATCH k
        DEL k
        MULTI
        PING
        EXEC
        SET k 1
        WATCH k
        FLUSHDB
        MULTI
        PING
        EXEC
        WATCH nosuch
        FLUSHALL
        MULTI
        PING
        EXEC
        HSET h f 1
        WATCH h
        HINCRBY h f 1
        MULTI
        HGET h f
        EXEC
        RPUSH l a
        WATCH l
        MULTI
        LPUSH l b
        DISCARD
        LPUSH l c
        MULTI
        LRANGE l 0 -1
        EXEC
        SET s 1
        WATCH s
        SELECT 1
        SET s 2
        SELECT 0
        MULTI
        GET s
        EXEC
        WATCH s
        SWAPDB 0 1
        MULTI
        GET s
        EXEC
        WATCH
        UNWATCH extra
        MULTI
        UNWATCH
        EXEC
    "#)
    .await;
}
