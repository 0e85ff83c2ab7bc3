#!/usr/bin/env bash
# The append-only file side by side: redis-server and tally-server, each
# with `appendonly yes`, in one run.
#
#   1. SET and INCR (redis-benchmark -c 50 -r 100000) at P=1 and P=16, and
#      the sliding-window limiter (lua/scripts/sliding_window.lua) through EVALSHA at P=16, under
#      appendfsync everysec and always; each server without the log as
#      well, so each one's own cost of the log shows (with/without);
#   2. INCR -P 16 throughput while BGREWRITEAOF runs back to back, against
#      without;
#   3. the log's size after the INCR run, and the time to load it at start.
#
# Usage: benches/append_only.sh [requests]   (default 300000)
# Prints markdown tables with tally/Redis ratios. Needs redis-server,
# redis-cli, redis-benchmark and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${1:-300000}
cargo build --release -p tally-server >/dev/null 2>&1
TALLY_BIN=target/release/tally-server
SCRIPT=lua/scripts/sliding_window.lua

. benches/lib.sh
now() { python3 -c 'import time; print(time.time())'; }

start() { # name port dir appendonly fsync -> pid in LAST_PID
    local name=$1 port=$2 dir=$3 aof=$4 fsync=$5
    if [ "$name" = redis ]; then
        redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly "$aof" \
            --appendfsync "$fsync" --dir "$dir" --daemonize no >/dev/null 2>&1 &
    else
        "$TALLY_BIN" --port "$port" --save "" --appendonly "$aof" --appendfsync "$fsync" \
            --dir "$dir" >/dev/null 2>&1 &
    fi
    LAST_PID=$!
    PIDS+=("$LAST_PID")
    until [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; do sleep 0.01; done
}
stop() { kill "$1"; wait "$1" 2>/dev/null || true; }
rps() { # port pipeline tests...
    local port=$1 pipeline=$2; shift 2
    redis-benchmark -p "$port" -c 50 -r 100000 -n "$REQUESTS" -P "$pipeline" --csv "$@" 2>/dev/null |
        tail -n +2 | cut -d, -f2 | tr -d '"' | tr '\n' ' '
}
script_rps() { # port
    local sha
    sha=$(redis-cli -p "$1" SCRIPT LOAD "$(cat "$SCRIPT")")
    redis-benchmark -p "$1" -c 50 -r 100000 -n "$REQUESTS" -P 16 --csv \
        EVALSHA "$sha" 2 'rl:u:__rand_int__:c' 'rl:u:__rand_int__:p' 1000 60 1720000030 1 2>/dev/null |
        tail -1 | cut -d, -f2 | tr -d '"'
}
info_field() { redis-cli -p "$1" info persistence | tr -d '\r' | sed -n "s/^$2://p"; }
ratio() { python3 -c "a,b=float('$1'),float('$2'); print(f'{a/b:.2f}x' if b else 'n/a')"; }

echo "| appendfsync | test | pipeline | Redis req/s | Redis without log | Redis with/without | tally req/s | tally without log | tally with/without | tally/Redis |"
echo "|---|---|---|---|---|---|---|---|---|---|"
declare -A R
for fsync in everysec always; do
    for name in redis redis-off tally tally-off; do
        dir="$WORK/$name-$fsync"; mkdir -p "$dir"
        port=$(free_port)
        case $name in
            *-off) start "${name%-off}" "$port" "$dir" no "$fsync" ;;
            *) start "$name" "$port" "$dir" yes "$fsync" ;;
        esac
        pid=$LAST_PID
        for pipeline in 1 16; do
            read -r set incr <<<"$(rps "$port" "$pipeline" -t set,incr)"
            R[$name,$fsync,SET,$pipeline]=$set
            R[$name,$fsync,INCR,$pipeline]=$incr
        done
        R[$name,$fsync,EVALSHA,16]=$(script_rps "$port")
        stop "$pid"
    done
    for row in "SET 1" "SET 16" "INCR 1" "INCR 16" "EVALSHA 16"; do
        read -r test pipeline <<<"$row"
        r=${R[redis,$fsync,$test,$pipeline]}; t=${R[tally,$fsync,$test,$pipeline]}
        r0=${R[redis-off,$fsync,$test,$pipeline]}; t0=${R[tally-off,$fsync,$test,$pipeline]}
        echo "| $fsync | $test | $pipeline | $r | $r0 | $(ratio "$r" "$r0") | $t | $t0 | $(ratio "$t" "$t0") | $(ratio "$t" "$r") |"
    done
done

echo
echo "| everysec, INCR -P 16 | redis-server | tally | tally/Redis |"
echo "|---|---|---|---|"
declare -A BASE DURING SIZE LOAD
for name in redis tally; do
    dir="$WORK/$name-rw"; mkdir -p "$dir"
    port=$(free_port)
    start "$name" "$port" "$dir" yes everysec; pid=$LAST_PID
    BASE[$name]=$(rps "$port" 16 -t incr)
    ( while [ ! -f "$WORK/stop" ]; do
          redis-cli -p "$port" bgrewriteaof >/dev/null 2>&1 || true
          sleep 0.05
          while [ "$(info_field "$port" aof_rewrite_in_progress)" = 1 ]; do sleep 0.05; done
      done ) & rewriter=$!
    DURING[$name]=$(rps "$port" 16 -t incr)
    touch "$WORK/stop"; wait "$rewriter"; rm -f "$WORK/stop"
    # The log as commands (no rewrite since): fresh server, INCRs only.
    stop "$pid"; rm -rf "$dir"; mkdir -p "$dir"
    start "$name" "$port" "$dir" yes everysec; pid=$LAST_PID
    rps "$port" 16 -t incr >/dev/null
    SIZE[$name]=$(du -sb "$dir/appendonlydir" | cut -f1)
    stop "$pid"
    t0=$(now); start "$name" "$port" "$dir" yes everysec; t1=$(now)
    LOAD[$name]=$(python3 -c "print(f'{$t1-$t0:.2f}')")
    stop "$LAST_PID"
done
echo "| req/s without a rewrite | ${BASE[redis]} | ${BASE[tally]} | $(ratio "${BASE[tally]}" "${BASE[redis]}") |"
echo "| req/s during back-to-back BGREWRITEAOF | ${DURING[redis]} | ${DURING[tally]} | $(ratio "${DURING[tally]}" "${DURING[redis]}") |"
echo "| during/without, same server | $(ratio "${DURING[redis]}" "${BASE[redis]}") | $(ratio "${DURING[tally]}" "${BASE[tally]}") | |"
echo "| log after $REQUESTS INCRs (bytes) | ${SIZE[redis]} | ${SIZE[tally]} | $(ratio "${SIZE[tally]}" "${SIZE[redis]}") |"
echo "| load it at start (s) | ${LOAD[redis]} | ${LOAD[tally]} | $(ratio "${LOAD[tally]}" "${LOAD[redis]}") |"
