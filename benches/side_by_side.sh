#!/usr/bin/env bash
# Side-by-side benchmark: redis-server and tally-server on free ports, the
# same redis-benchmark runs against each in one go, and memory per key after
# loading the same 1,000,000 rate-limit counters into each.
#
# Usage: [ROUNDS=3] [SUITE_REQUESTS=200000] [SCRIPTS_ONLY=1] [SCRIPTS="lease ..."]
#        benches/side_by_side.sh [requests] [keys]
#   requests  redis-benchmark -n per test (default 500000)
#   keys      keys for the memory test (default 1000000)
#   SCRIPTS_ONLY  only the limiter scripts' table (SCRIPTS: which of them)
#
# Prints markdown tables (throughput with the tally/Redis ratio, memory per key)
# ready for docs/benchmarks.md. Needs redis-server, redis-benchmark, redis-cli
# (Debian: redis-server redis-tools) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${1:-500000}
KEYS=${2:-1000000}
ROUNDS=${ROUNDS:-3}
SUITE_REQUESTS=${SUITE_REQUESTS:-200000}
CLIENTS=50
RANDOM_KEYS=100000

cargo build --release -p tally-server >/dev/null 2>&1
TALLY_BIN=target/release/tally-server

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

REDIS_PORT=$(free_port)
TALLY_PORT=$(free_port)
WORK=$(mktemp -d)
cleanup() {
    [ -n "${REDIS_PID:-}" ] && kill "$REDIS_PID" 2>/dev/null || true
    [ -n "${TALLY_PID:-}" ] && kill "$TALLY_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

start_servers() {
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
        --daemonize no --dir "$WORK" >/dev/null 2>&1 &
    REDIS_PID=$!
    "$TALLY_BIN" --port "$TALLY_PORT" --save "" --dir "$WORK" --loglevel warning >/dev/null 2>&1 &
    TALLY_PID=$!
    for port in "$REDIS_PORT" "$TALLY_PORT"; do
        for _ in $(seq 100); do
            redis-cli -p "$port" PING >/dev/null 2>&1 && break
            sleep 0.1
        done
    done
}

stop_servers() {
    kill "$REDIS_PID" "$TALLY_PID" 2>/dev/null || true
    wait "$REDIS_PID" "$TALLY_PID" 2>/dev/null || true
    REDIS_PID=""
    TALLY_PID=""
}

# rps PORT ARGS... -> "TEST<tab>rps" lines from redis-benchmark's CSV output
rps() {
    local port=$1
    shift
    redis-benchmark -p "$port" --csv "$@" 2>/dev/null | tail -n +2 |
        python3 -c 'import csv,sys; [print(f"{r[0]}\t{r[1]}") for r in csv.reader(sys.stdin)]'
}

# median_table REDIS_FILE TALLY_FILE [COLUMN] -> markdown rows: the median of
# each test's rounds per server and their ratio; COLUMN (the pipeline depth)
# goes after the test name when given.
median_table() {
    python3 - "$@" <<'PY'
import statistics, sys
def load(path):
    runs = {}
    for line in open(path):
        test, rps = line.rstrip("\n").split("\t")
        runs.setdefault(test, []).append(float(rps))
    return {test: statistics.median(v) for test, v in runs.items()}
redis, tally = load(sys.argv[1]), load(sys.argv[2])
column = f" {sys.argv[3]} |" if len(sys.argv) > 3 else ""
for test, r in redis.items():
    t = tally.get(test)
    if t is None:
        print(f"| {test} |{column} {r:,.0f} | failed | - |")
        continue
    print(f"| {test} |{column} {r:,.0f} | {t:,.0f} | {t/r:.2f}x |")
PY
}

start_servers
echo "redis-server $(redis-server --version | grep -o 'v=[^ ]*'), tally-server $("$TALLY_BIN" --version | cut -d' ' -f2)"
echo "redis-benchmark -c $CLIENTS -r $RANDOM_KEYS -n $REQUESTS, $(nproc) cores"
echo
if [ -z "${SCRIPTS_ONLY:-}" ]; then
echo "| test | pipeline | Redis req/s | tally req/s | tally/Redis |"
echo "|---|---|---|---|---|"
for pipeline in 1 16; do
    # ROUNDS runs per server, alternating which goes first; the table shows
    # the median of each, which keeps one noisy run from deciding a ratio.
    for round in $(seq "$ROUNDS"); do
        if [ $((round % 2)) -eq 1 ]; then order="$REDIS_PORT:redis $TALLY_PORT:tally"; else order="$TALLY_PORT:tally $REDIS_PORT:redis"; fi
        for pair in $order; do
            rps "${pair%%:*}" -t set,get,incr -c "$CLIENTS" -r "$RANDOM_KEYS" -n "$REQUESTS" -P "$pipeline" \
                >>"$WORK/${pair##*:}.$pipeline"
        done
    done
    median_table "$WORK/redis.$pipeline" "$WORK/tally.$pipeline" "$pipeline"
done
# redis-benchmark's own default suite (no -t), every test on fresh servers,
# ROUNDS alternating rounds, median per test.
echo
echo "Default suite: redis-benchmark -q -n $SUITE_REQUESTS (50 clients, no -r, P=1)"
echo
echo "| test | Redis req/s | tally req/s | tally/Redis |"
echo "|---|---|---|---|"
stop_servers
for round in $(seq "$ROUNDS"); do
    start_servers
    if [ $((round % 2)) -eq 1 ]; then order="$REDIS_PORT:redis $TALLY_PORT:tally"; else order="$TALLY_PORT:tally $REDIS_PORT:redis"; fi
    for pair in $order; do
        rps "${pair%%:*}" -n "$SUITE_REQUESTS" >>"$WORK/suite.${pair##*:}"
    done
    stop_servers
done
median_table "$WORK/suite.redis" "$WORK/suite.tally"
start_servers
fi

# The known limiter scripts through EVALSHA: tally runs each natively (its
# twin), then with `lua-native-scripts no` through Lua.
echo
echo "| script | path | pipeline | Redis req/s | tally req/s | tally/Redis |"
echo "|---|---|---|---|---|---|"
script_rps() { # PORT SHA PIPELINE NUMKEYS KEYS_AND_ARGS...
    local port=$1 sha=$2 pipeline=$3
    shift 3
    redis-benchmark -p "$port" -c "$CLIENTS" -r "$RANDOM_KEYS" -n "$REQUESTS" -P "$pipeline" -q \
        EVALSHA "$sha" "$@" 2>/dev/null |
        tr '\r' '\n' | grep "per second" | sed 's/.*: //;s/ requests per second.*//'
}
K='rl:u:__rand_int__'
declare -A SCRIPT_ARGS=(
    [sliding_window]="2 $K:c $K:p 1000 60 1720000030 1"
    [sliding_window_server_time]="2 $K:c $K:p 1000 60 1"
    [multi_limit]="6 $K:g:c $K:g:p $K:e:c $K:e:p $K:m:c $K:m:p 1000 60 1 100 60 1 20 1 1"
    # tally-client's sync: give 5 back on the current window, lease 10, cost 1
    [lease]="3 $K:c $K:p $K:c 1000 60 5 10 1"
)
for mode in native lua; do
    if [ "$mode" = lua ]; then redis-cli -p "$TALLY_PORT" CONFIG SET lua-native-scripts no >/dev/null; fi
    for name in ${SCRIPTS:-sliding_window sliding_window_server_time multi_limit lease}; do
        src="lua/scripts/$name.lua"
        r_sha=$(redis-cli -p "$REDIS_PORT" SCRIPT LOAD "$(cat "$src")")
        t_sha=$(redis-cli -p "$TALLY_PORT" SCRIPT LOAD "$(cat "$src")")
        for pipeline in 1 16; do
            # shellcheck disable=SC2086 # the argument list is meant to split
            r=$(script_rps "$REDIS_PORT" "$r_sha" "$pipeline" ${SCRIPT_ARGS[$name]})
            # shellcheck disable=SC2086
            t=$(script_rps "$TALLY_PORT" "$t_sha" "$pipeline" ${SCRIPT_ARGS[$name]})
            python3 -c "import sys; r,t=float(sys.argv[1]),float(sys.argv[2]); print(f'| {sys.argv[3]} | {sys.argv[4]} | {sys.argv[5]} | {r:,.0f} | {t:,.0f} | {t/r:.2f}x |')" \
                "$r" "$t" "$name" "$mode" "$pipeline"
        done
    done
done
stop_servers
[ -n "${SCRIPTS_ONLY:-}" ] && exit 0

# Memory per key: load the same counters into fresh servers with one pipe each.
python3 - "$KEYS" >"$WORK/load.resp" <<'PY'
import sys
out = sys.stdout.buffer
for i in range(int(sys.argv[1])):
    key = f"rl:user:u_{i}:a3f2:1720000000".encode()
    out.write(b"*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\n7\r\n$2\r\nEX\r\n$3\r\n120\r\n" % (len(key), key))
PY
start_servers
baseline() { redis-cli -p "$1" INFO memory | tr -d '\r' | awk -F: -v f="$2" '$1==f {print $2}'; }
R0_USED=$(baseline "$REDIS_PORT" used_memory); R0_RSS=$(baseline "$REDIS_PORT" used_memory_rss)
T0_USED=$(baseline "$TALLY_PORT" used_memory); T0_RSS=$(baseline "$TALLY_PORT" used_memory_rss)
redis-cli -p "$REDIS_PORT" --pipe <"$WORK/load.resp" >/dev/null
redis-cli -p "$TALLY_PORT" --pipe <"$WORK/load.resp" >/dev/null
R_USED=$(baseline "$REDIS_PORT" used_memory); R_RSS=$(baseline "$REDIS_PORT" used_memory_rss)
T_USED=$(baseline "$TALLY_PORT" used_memory); T_RSS=$(baseline "$TALLY_PORT" used_memory_rss)
R_KEYS=$(redis-cli -p "$REDIS_PORT" DBSIZE); T_KEYS=$(redis-cli -p "$TALLY_PORT" DBSIZE)
echo
echo "Memory after SET rl:user:u_<i>:a3f2:1720000000 7 EX 120 for $KEYS keys (Redis: $R_KEYS keys, tally: $T_KEYS keys)"
echo
python3 - "$KEYS" "$R0_USED" "$R_USED" "$R0_RSS" "$R_RSS" "$T0_USED" "$T_USED" "$T0_RSS" "$T_RSS" <<'PY'
import sys
n, r0u, ru, r0r, rr, t0u, tu, t0r, tr = map(int, sys.argv[1:])
print("| | used_memory | bytes/key (used) | RSS | bytes/key (RSS growth) |")
print("|---|---|---|---|---|")
print(f"| Redis | {ru/1e6:.1f} MB | {(ru-r0u)/n:.0f} | {rr/1e6:.1f} MB | {(rr-r0r)/n:.0f} |")
print(f"| tally | {tu/1e6:.1f} MB | {(tu-t0u)/n:.0f} | {tr/1e6:.1f} MB | {(tr-t0r)/n:.0f} |")
print(f"| tally/Redis | {tu/ru:.2f}x | | {tr/rr:.2f}x | |")
PY
