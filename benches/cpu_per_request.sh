#!/usr/bin/env bash
# Server CPU per request, tally against Redis 7.0 (Debian's redis-server),
# both running side by side for the whole run. Each load runs against each
# server in turn (alternating, the order flipped every round) with
# redis-benchmark at -c 50 -P 16 on random keys; the server's utime+stime
# ticks are read from /proc before and after the same load. On a 2-core box
# the benchmark client is often the bottleneck, so throughput alone hides
# what a request costs the server; ticks per 100,000 requests do not.
#
# Loads: SET, GET, INCR; a one-command EVAL; a fixed window (INCRBY, EXPIRE
# if new; through EVALSHA, and as a function through FCALL,
# `fcall_fixed_window`, and rate-limiter-flexible's Valkey Glide function,
# `rate_limiter_flexible_glide`, neither in the default list) and a token bucket (HMGET, HSET, PEXPIRE) through EVALSHA, neither
# of which tally recognises, so both take the Lua path; and the seed's
# sliding window through EVALSHA, which tally runs natively; and the
# limiter scripts of six libraries as their packages send them (Python
# limits, rate-limit-redis, rate-limiter-flexible, Spring Cloud Gateway,
# go-redis/redis_rate, bucket4j), which tally also runs natively.
#
# Prints the median over the rounds of ticks per 100k and of requests per
# second for each server, and tally's ratio to Redis for both.
#
# `sliding_log` (not in the default list) is a sliding window log in a
# sorted set (ZREMRANGEBYSCORE, ZCARD, ZADD, PEXPIRE) through EVALSHA, on
# the Lua path.
#
# Any other load name is passed to redis-benchmark as `-t <name>`: its
# own tests (lpush, rpush, lpop, rpop, sadd, hset, spop, zadd, zpopmin,
# lrange_100, mset), for a look across the command surface.
#
# `geoadd`, `geopos` and `geosearch` (not in the default list) are the geo
# commands over KEY_RANGE points.
#
# `xadd`, `xrevrange` and `xread` (not in the default list) are stream
# commands on one capped stream of events; `xreadgroup`, `xpending` and
# `xclaim` are a consumer group's, on the same stream with a group whose
# one consumer holds its first 100 events pending.
#
# `increx` (not in the default list) is INCREX on tally against the INCR +
# EXPIRE script it replaces on Redis 7.0.
#
# CL.THROTTLE (load `cl_throttle`, not in the default list) needs Redis
# with redis-cell: REDIS_CELL names the module, built from
# github:brandur/redis-cell with `cargo build --release`.
#
# GET reads keys SET just before (three SETs per key of the range, not
# measured); KEY_RANGE (100000 unless set) is how many keys the loads
# pick from at random: 1000000 shows a keyspace far past the CPU's caches.
#
# Usage: [ROUNDS=5] [REQUESTS=300000] [LOADS="set get ..."] [PIPELINE=16]
#        [KEY_RANGE=100000]
#        [REDIS_CELL=.../libredis_cell.so] [TALLY_ARGS="--shards 256"]
#        [TALLY_BIN=<another build's tally-server>]
#        [REDIS_SERVER=<the binary on the "Redis" side: another tally build
#         for an A/B of two builds in one run; default redis-server>]
#        benches/cpu_per_request.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

ROUNDS=${ROUNDS:-5}
REQUESTS=${REQUESTS:-300000}
LOADS=${LOADS:-set get incr eval_incr fixed_window token_bucket sliding_window limits limits_sliding limits_moving rate_limit_redis rate_limiter_flexible spring_cloud_gateway redis_rate bucket4j}
cargo build --release -p tally-server >/dev/null 2>&1

REDIS_PORT=$(free_port)
mkdir -p "$WORK/redis" "$WORK/tally"
MODULES=()
[ -n "${REDIS_CELL:-}" ] && MODULES=(--loadmodule "$REDIS_CELL")
${REDIS_SERVER:-redis-server} --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$WORK/redis" "${MODULES[@]}" >/dev/null 2>&1 &
PIDS+=($!)
REDIS_PID=$!
TALLY_PORT=$(free_port)
${TALLY_BIN:-target/release/tally-server} --port "$TALLY_PORT" --bind 127.0.0.1 --save "" \
    --dir "$WORK/tally" ${TALLY_ARGS:-} >/dev/null 2>&1 &
PIDS+=($!)
TALLY_PID=$!
wait_up "$REDIS_PORT"
wait_up "$TALLY_PORT"

# A fixed-window limiter of the commonest shape: count, and start the
# window's expiry on the first hit.
FIXED_WINDOW='local n = redis.call("INCRBY", KEYS[1], ARGV[1])
if n == tonumber(ARGV[1]) then redis.call("EXPIRE", KEYS[1], ARGV[2]) end
return n'
# A token bucket kept in a hash, refilled from the caller's clock.
TOKEN_BUCKET='local rate, burst, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local s = redis.call("HMGET", KEYS[1], "tokens", "ts")
local tokens, ts = tonumber(s[1]) or burst, tonumber(s[2]) or now
tokens = math.min(burst, tokens + (now - ts) * rate / 1000)
local allowed = 0
if tokens >= 1 then tokens = tokens - 1; allowed = 1 end
redis.call("HSET", KEYS[1], "tokens", tostring(tokens), "ts", now)
redis.call("PEXPIRE", KEYS[1], math.ceil(burst * 1000 / rate))
return allowed'
# A sliding window log: one sorted-set entry per request, the old ones
# trimmed first (now ms, window ms, limit, request id).
SLIDING_LOG='local now, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now - window)
if redis.call("ZCARD", KEYS[1]) >= limit then return 0 end
redis.call("ZADD", KEYS[1], now, ARGV[4])
redis.call("PEXPIRE", KEYS[1], window)
return 1'
SEED=$(cat lua/scripts/sliding_window.lua)
LIMITS=$(cat lua/scripts/limits_incr_expire.lua)
LIMITS_SLIDING=$(cat lua/scripts/limits_acquire_sliding_window.lua)
LIMITS_MOVING=$(cat lua/scripts/limits_acquire_moving_window.lua)
RATE_LIMIT_REDIS=$(cat lua/scripts/rate_limit_redis_increment.lua)
RATE_LIMITER_FLEXIBLE=$(cat lua/scripts/rate_limiter_flexible_incr_ttl.lua)
SPRING_CLOUD_GATEWAY=$(cat lua/scripts/spring_cloud_gateway_request_rate_limiter.lua)
REDIS_RATE=$(cat lua/scripts/redis_rate_allow_n.lua)
BUCKET4J=$(cat lua/scripts/bucket4j_compare_and_swap_px.lua)
K='rl:u:__rand_int__'

FIXED_WINDOW_LIBRARY="#!lua name=limiter
redis.register_function('fixed_window', function(KEYS, ARGV)
$FIXED_WINDOW
end)"
GLIDE_LIBRARY="#!lua name=ratelimiterflexible
        local function consume(KEYS, ARGV)
          $(cat lua/scripts/rate_limiter_flexible_valkey_glide.lua)
        end
        server.register_function('consume', consume)"
load() { # PORT LOAD: runs it; prints requests per second
    local port=$1 name=$2 args
    case $name in
        set) args=(-t set) ;;
        get) args=(-t get) ;;
        incr) args=(-t incr) ;;
        eval_incr) args=(EVAL "return redis.call('INCR', KEYS[1])" 1 "$K") ;;
        fixed_window) args=(EVALSHA "$(redis-cli -p "$port" SCRIPT LOAD "$FIXED_WINDOW")" 1 "$K" 1 60) ;;
        # rate-limiter-flexible's RateLimiterValkeyGlide: the library it
        # loads and its FCALL (points, duration s). Redis 7.0 has no
        # `server` table, so there its calls are spelled `redis.`.
        rate_limiter_flexible_glide)
            local library=$GLIDE_LIBRARY
            [ "$port" = "$REDIS_PORT" ] && library=${library//server./redis.}
            redis-cli -p "$port" FUNCTION LOAD REPLACE "$library" >/dev/null
            args=(FCALL consume 1 "$K" 1 60) ;;
        # The same fixed window as a Redis 7 function, called with FCALL.
        fcall_fixed_window)
            redis-cli -p "$port" FUNCTION LOAD REPLACE "$FIXED_WINDOW_LIBRARY" >/dev/null
            args=(FCALL fixed_window 1 "$K" 1 60) ;;
        token_bucket) args=(EVALSHA "$(redis-cli -p "$port" SCRIPT LOAD "$TOKEN_BUCKET")" 1 "$K" 10 20 1720000030000) ;;
        sliding_log) args=(EVALSHA "$(redis-cli -p "$port" SCRIPT LOAD "$SLIDING_LOG")" 1 "$K" 1720000030000 60000 100 "r:__rand_int__") ;;
        sliding_window) args=(EVALSHA "$(redis-cli -p "$port" SCRIPT LOAD "$SEED")" 2 "$K:c" "$K:p" 1000 60 1720000030 1) ;;
        # As each library calls it: limits (expiry s, amount), rate-limit-
        # redis (window ms), rate-limiter-flexible (points, duration s, and
        # two it passes but the script ignores).
        limits) args=(EVALSHA "$(redis-cli -p "$port" SCRIPT LOAD "$LIMITS")" 1 "$K" 60 1) ;;
        # limits' sliding window (limit, window s, amount) and moving window
        # (now, limit, window s, amount), 10 per minute.
        limits_sliding) args=(EVALSHA "$(redis-cli -p "$port" SCRIPT LOAD "$LIMITS_SLIDING")" 2 "$K:p" "$K:c" 10 60 1) ;;
        limits_moving) args=(EVALSHA "$(redis-cli -p "$port" SCRIPT LOAD "$LIMITS_MOVING")" 1 "$K" 1720000030.25 10 60 1) ;;
        rate_limit_redis) args=(EVALSHA "$(redis-cli -p "$port" SCRIPT LOAD "$RATE_LIMIT_REDIS")" 1 "$K" 60000) ;;
        rate_limiter_flexible) args=(EVALSHA "$(redis-cli -p "$port" SCRIPT LOAD "$RATE_LIMITER_FLEXIBLE")" 1 "$K" 1 60 5 60) ;;
        # Spring Cloud Gateway: rate, burst, "" (read TIME), requested.
        spring_cloud_gateway) args=(EVALSHA "$(redis-cli -p "$port" SCRIPT LOAD "$SPRING_CLOUD_GATEWAY")" 2 "$K:tokens" "$K:ts" 10 20 "" 1) ;;
        # go-redis/redis_rate's AllowN: burst, rate, period s, cost.
        redis_rate) args=(EVALSHA "$(redis-cli -p "$port" SCRIPT LOAD "$REDIS_RATE")" 1 "$K" 1000 1000 1 1) ;;
        # bucket4j sends EVAL with the text every time: a swap that fails
        # (the keys hold no state), the commonest outcome under contention.
        bucket4j) args=(EVAL "$BUCKET4J" 1 "$K" state-0 state-1 60000) ;;
        # HyperLogLog: random elements into one sketch (dense after the
        # first thousands), sketches per random key (sparse), and PFCOUNT
        # of one sketch, whose cache the PFADDs keep stale.
        pfadd_dense) args=(PFADD visitors "e:__rand_int__") ;;
        pfadd_sparse) args=(PFADD "hll:__rand_int__" "e:__rand_int__") ;;
        pfcount) args=(PFCOUNT visitors) ;;
        # Geo: GEOADD of a point per random member; GEOPOS of a random
        # member and a search of the 10 nearest within 2 km (of the 30 or so
        # there; every search reads some hundreds of points), both over
        # KEY_RANGE points spread across Sicily (loaded first, not
        # measured).
        geoadd) args=(GEOADD places 13.361389 38.115556 "m:__rand_int__") ;;
        geopos) args=(GEOPOS places "m:__rand_int__") ;;
        geosearch) args=(GEOSEARCH places FROMLONLAT 14.2 37.6 BYRADIUS 2 km COUNT 10 ASC) ;;
        # Streams: XADD of an event to one stream (an audit or request log),
        # capped as such logs are (MAXLEN ~ 10000); XREVRANGE of its 10
        # newest; XREAD of what followed an ID early in it.
        xadd) args=(XADD events MAXLEN "~" 10000 "*" user "u:__rand_int__" path /v1/orders status 200) ;;
        xrevrange) args=(XREVRANGE events + - COUNT 10) ;;
        xread) args=(XREAD COUNT 10 STREAMS events 0-1) ;;
        # Consumer groups: a consumer reading its 10 oldest pending events
        # again (a retry after a crash; each is delivered once more),
        # XPENDING's first 10, and XCLAIM of the first pending event by
        # another consumer (the first call takes it, the rest re-claim).
        xreadgroup) args=(XREADGROUP GROUP g c COUNT 10 STREAMS events 0) ;;
        xpending) args=(XPENDING events g - + 10) ;;
        xclaim) args=(XCLAIM events g c2 0 1-1) ;;
        # redis-cell's GCRA: burst 100, 1000 per minute, one each.
        cl_throttle) args=(CL.THROTTLE "$K" 100 1000 60) ;;
        # The fixed window in one command (Redis 8.8's INCREX) on tally;
        # Redis 7.0 has no INCREX, so there it is the INCR + EXPIRE script
        # it replaces (`fixed_window`, the same effect).
        increx)
            if [ "$port" = "$REDIS_PORT" ]; then
                args=(EVALSHA "$(redis-cli -p "$port" SCRIPT LOAD "$FIXED_WINDOW")" 1 "$K" 1 60)
            else
                args=(INCREX "$K" BYINT 1 EX 60 ENX)
            fi ;;
        # Any other name is one of redis-benchmark's own tests (lpush,
        # rpop, sadd, hset, spop, zadd, zpopmin, lrange_100, mset, ...).
        *) args=(-t "$name") ;;
    esac
    rps "$port" "$REQUESTS" "${args[@]}"
}

measure() { # KIND LOAD: sets RUN_RPS and RUN_TICKS (per 100k requests)
    local port pid before after
    if [ "$1" = redis ]; then port=$REDIS_PORT pid=$REDIS_PID; else port=$TALLY_PORT pid=$TALLY_PID; fi
    redis-cli -p "$port" FLUSHALL >/dev/null
    if [ "$2" = get ]; then
        # GET reads counters that exist, as a limiter's read does (before
        # 2026-12-07 it read an empty keyspace: misses that touch no memory).
        rps "$port" "$((${KEY_RANGE:-100000} * 3))" -t set >/dev/null
    fi
    if [ "$2" = geopos ] || [ "$2" = geosearch ]; then
        # The same points on both servers (a fixed seed), members named
        # as redis-benchmark's __rand_int__ spells them.
        python3 -c "
import random, sys
r = random.Random(7)
for i in range(int(sys.argv[1])):
    lon, lat = r.uniform(12.4, 15.6), r.uniform(36.7, 38.3)
    m = 'm:%012d' % i
    sys.stdout.write('*5\r\n\$6\r\nGEOADD\r\n\$6\r\nplaces\r\n\$%d\r\n%s\r\n\$%d\r\n%s\r\n\$%d\r\n%s\r\n' % (len('%.6f' % lon), '%.6f' % lon, len('%.6f' % lat), '%.6f' % lat, len(m), m))
" "${KEY_RANGE:-100000}" | redis-cli -p "$port" --pipe >/dev/null
    fi
    case "$2" in xrevrange | xread | xreadgroup | xpending | xclaim)
        # The stream the reads read: 10,000 events, as the xadd load
        # keeps; for the group loads, the first with a known ID, and a
        # group whose consumer `c` has the first 100 pending.
        redis-cli -p "$port" XADD events 1-1 user u:0 path /v1/orders status 200 >/dev/null
        rps "$port" 10000 XADD events "*" user "u:__rand_int__" path /v1/orders status 200 >/dev/null
        redis-cli -p "$port" XGROUP CREATE events g 0 >/dev/null
        redis-cli -p "$port" XREADGROUP GROUP g c COUNT 100 STREAMS events ">" >/dev/null ;;
    esac
    before=$(cpu_ticks "$pid")
    RUN_RPS=$(load "$port" "$2")
    after=$(cpu_ticks "$pid")
    RUN_TICKS=$(python3 -c "import sys; print((int(sys.argv[2]) - int(sys.argv[1])) * 100000 / int(sys.argv[3]))" "$before" "$after" "$REQUESTS")
}

declare -A RPS TICKS
for round in $(seq "$ROUNDS"); do
    order="redis tally"
    [ $((round % 2)) = 0 ] && order="tally redis"
    for name in $LOADS; do
        for kind in $order; do
            measure "$kind" "$name"
            RPS[$kind.$name]+="$RUN_RPS "
            TICKS[$kind.$name]+="$RUN_TICKS "
            echo "round $round $kind $name rps=$RUN_RPS ticks_per_100k=$RUN_TICKS" >&2
        done
    done
done

echo "| load | tally ticks/100k | Redis ticks/100k | tally/Redis CPU | tally req/s | Redis req/s | tally/Redis throughput |"
echo "|---|---|---|---|---|---|---|"
for name in $LOADS; do
    # shellcheck disable=SC2086 # the lists are meant to split
    python3 -c "import sys; a=sys.argv; t,r,tr,rr=map(float,a[2:6]); print(f'| {a[1]} | {t:.1f} | {r:.1f} | {t/r:.2f}x | {tr:,.0f} | {rr:,.0f} | {tr/rr:.2f}x |')" \
        "$name" "$(median ${TICKS[tally.$name]})" "$(median ${TICKS[redis.$name]})" \
        "$(median ${RPS[tally.$name]})" "$(median ${RPS[redis.$name]})"
done
