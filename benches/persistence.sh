#!/usr/bin/env bash
# Snapshots side by side: redis-server and tally-server, the same data in
# each, in one run.
#
#   1. SAVE time and file size for N rate-limit counters
#      (`SET rl:user:u_<i>:a3f2:1720000000 7 EX 120`), and for N/10 small
#      hashes and N/10 small sorted sets;
#   2. load time at start (from launch until PING answers PONG);
#   3. INCR throughput (redis-benchmark -P 16) without and during BGSAVEs
#      back to back, the p99 of each, and the extra memory of the save
#      (Redis: rdb_last_cow_size, its fork's copy-on-write; tally: its
#      preserved values and handled keys).
#
# Usage: benches/persistence.sh [counters]   (default 1000000)
#        TALLY_BIN=<path> benches/persistence.sh   (another build, e.g. an
#        older commit's, to compare before and after)
# Prints a markdown table with tally/Redis ratios. Needs redis-server,
# redis-cli, redis-benchmark and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

COUNTERS=${1:-1000000}
. benches/lib.sh
tally_binary
now() { python3 -c 'import time; print(time.time())'; }

start() { # name port dir -> pid in LAST_PID
    local name=$1 port=$2 dir=$3
    if [ "$name" = redis ]; then
        redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
            --dir "$dir" --dbfilename dump.rdb >/dev/null 2>&1 &
    else
        "$TALLY_BIN" --port "$port" --save "" --dir "$dir" --dbfilename dump.rdb >/dev/null 2>&1 &
    fi
    LAST_PID=$!
    PIDS+=("$LAST_PID")
    until [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; do sleep 0.01; done
}

fill() { # port
    limiter_dataset "$COUNTERS" collections | redis-cli -p "$1" --pipe >/dev/null
}

info_field() { redis-cli -p "$1" info persistence | tr -d '\r' | sed -n "s/^$2://p"; }

declare -A SAVE_S SIZE LOAD_S BASE_RPS SAVING_RPS BASE_P99 SAVING_P99 COW
for name in redis tally; do
    dir="$WORK/$name"; mkdir -p "$dir"
    port=$(free_port)
    start "$name" "$port" "$dir"; pid=$LAST_PID
    fill "$port"
    t0=$(now); redis-cli -p "$port" save >/dev/null; t1=$(now)
    SAVE_S[$name]=$(python3 -c "print(f'{$t1-$t0:.2f}')")
    SIZE[$name]=$(stat -c %s "$dir/dump.rdb")
    # INCR throughput without, then during back-to-back BGSAVEs.
    bench() { redis-benchmark -p "$port" -t incr -n 2000000 -r 1000000 -P 16 -c 50 --csv 2>/dev/null | tail -1; }
    base=$(bench)
    ( while [ ! -f "$WORK/stop" ]; do
          redis-cli -p "$port" bgsave >/dev/null 2>&1 || true
          while [ "$(info_field "$port" rdb_bgsave_in_progress)" = 1 ]; do sleep 0.05; done
      done ) & saver=$!
    saving=$(bench)
    touch "$WORK/stop"; wait "$saver"; rm -f "$WORK/stop"
    BASE_RPS[$name]=$(echo "$base" | cut -d, -f2 | tr -d '"')
    SAVING_RPS[$name]=$(echo "$saving" | cut -d, -f2 | tr -d '"')
    BASE_P99[$name]=$(echo "$base" | cut -d, -f7 | tr -d '"')
    SAVING_P99[$name]=$(echo "$saving" | cut -d, -f7 | tr -d '"')
    COW[$name]=$(info_field "$port" rdb_last_cow_size)
    redis-cli -p "$port" save >/dev/null
    kill "$pid"; wait "$pid" 2>/dev/null || true
    # Load at start: launch until PONG.
    port=$(free_port)
    t0=$(now); start "$name" "$port" "$dir"; t1=$(now)
    LOAD_S[$name]=$(python3 -c "print(f'{$t1-$t0:.2f}')")
    kill "$LAST_PID"; wait "$LAST_PID" 2>/dev/null || true
done

ratio() { python3 -c "a,b=float('$1'),float('$2'); print(f'{a/b:.2f}x' if b else 'n/a')"; }
echo "| $COUNTERS counters + $((COUNTERS/10)) hashes + $((COUNTERS/10)) sorted sets | redis-server | tally | tally/Redis |"
echo "|---|---|---|---|"
echo "| SAVE (s) | ${SAVE_S[redis]} | ${SAVE_S[tally]} | $(ratio "${SAVE_S[tally]}" "${SAVE_S[redis]}") |"
echo "| file (bytes) | ${SIZE[redis]} | ${SIZE[tally]} | $(ratio "${SIZE[tally]}" "${SIZE[redis]}") |"
echo "| load at start (s) | ${LOAD_S[redis]} | ${LOAD_S[tally]} | $(ratio "${LOAD_S[tally]}" "${LOAD_S[redis]}") |"
echo "| INCR -P 16 (req/s) | ${BASE_RPS[redis]} | ${BASE_RPS[tally]} | $(ratio "${BASE_RPS[tally]}" "${BASE_RPS[redis]}") |"
echo "| INCR -P 16 during BGSAVEs (req/s) | ${SAVING_RPS[redis]} | ${SAVING_RPS[tally]} | $(ratio "${SAVING_RPS[tally]}" "${SAVING_RPS[redis]}") |"
echo "| during/without, same server | $(ratio "${SAVING_RPS[redis]}" "${BASE_RPS[redis]}") | $(ratio "${SAVING_RPS[tally]}" "${BASE_RPS[tally]}") | |"
echo "| INCR p99 (ms) without / during | ${BASE_P99[redis]} / ${SAVING_P99[redis]} | ${BASE_P99[tally]} / ${SAVING_P99[tally]} | |"
echo "| extra memory of the last BGSAVE (bytes) | ${COW[redis]} | ${COW[tally]} | |"
