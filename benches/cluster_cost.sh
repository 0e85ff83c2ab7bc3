#!/usr/bin/env bash
# What cluster mode costs one node, counted rather than timed: one tally
# with `cluster-enabled yes` owning all 16384 slots and one without, each
# under valgrind's callgrind, serve the same redis-benchmark load (-P 16);
# the user-space instructions each executed for it (counters zeroed before,
# dumped after) give instructions per request and the ratio cluster/plain.
# Instruction counts do not move with the machine's load, which makes
# req/s ratios on a shared 2-core box swing by ±8% (benches/cluster.sh).
# Each measured run is preceded by an unmeasured one five times as long,
# so that (with -r 100000) over 99% of the keys exist: the measured run is
# the steady state of a counter store, not key creation (creating a key
# also records it in the per-slot key index).
#
# Kernel time (the network) is not counted by callgrind, and cluster mode
# adds no system call per request, so what it adds to the node's CPU is
# the user-space share of that CPU times the instruction ratio's excess.
# The second part measures that share: the plain server, not under
# valgrind, serves each load again and its user and system CPU ticks are
# read from /proc; "modelled CPU" is 1 + share x (ratio - 1), which takes
# the extra instructions to cost what the others do per instruction.
#
# Usage: benches/cluster_cost.sh [requests]   (default 200000)
#        SERVER=redis benches/cluster_cost.sh [requests]
# The second measures redis-server the same way (cluster-enabled yes owning
# every slot vs a plain redis-server): what cluster mode costs Redis itself,
# the yardstick for tally's ratio.
# Needs valgrind (callgrind_control), redis-server's tools and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${1:-200000}
cargo build --release -p tally-server >/dev/null 2>&1
TALLY_BIN=target/release/tally-server
. benches/lib.sh
SRC=lua/scripts/sliding_window.lua

P_PORT=$(free_port); C_PORT=$(free_port); C_BUS=$(free_port)
mkdir -p "$WORK/plain" "$WORK/cluster"
if [ "${SERVER:-tally}" = redis ]; then
    plain_cmd=(redis-server --port "$P_PORT" --dir "$WORK/plain" --save "" --appendonly no)
    cluster_cmd=(redis-server --port "$C_PORT" --dir "$WORK/cluster" --save "" --appendonly no
        --cluster-enabled yes --cluster-port "$C_BUS")
else
    plain_cmd=("$TALLY_BIN" --port "$P_PORT" --dir "$WORK/plain" --save "")
    cluster_cmd=("$TALLY_BIN" --port "$C_PORT" --dir "$WORK/cluster" --save "" --cluster-enabled yes
        --cluster-port "$C_BUS")
fi
valgrind --tool=callgrind --callgrind-out-file="$WORK/plain.out" "${plain_cmd[@]}" >/dev/null 2>&1 &
P_PID=$!; PIDS+=($P_PID)
valgrind --tool=callgrind --callgrind-out-file="$WORK/cluster.out" "${cluster_cmd[@]}" >/dev/null 2>&1 &
C_PID=$!; PIDS+=($C_PID)
wait_up "$P_PORT"; wait_up "$C_PORT"
redis-cli -p "$C_PORT" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
until redis-cli -p "$C_PORT" CLUSTER INFO | grep -q cluster_state:ok; do sleep 0.2; done
P_SHA=$(redis-cli -p "$P_PORT" SCRIPT LOAD "$(cat $SRC)")
# The sliding-window limiter (lua/scripts/sliding_window.lua), two {u}-tagged keys; @SHA@ is each server's.
EVALSHA_ARGS=(EVALSHA @SHA@ 2 'rl:{u}:__rand_int__:c' 'rl:{u}:__rand_int__:p' 1000 60 1720000030 1)
C_SHA=$(redis-cli -p "$C_PORT" SCRIPT LOAD "$(cat $SRC)")

count() { # pid port dump-tag test-args... -> instructions for the run
    local pid=$1 port=$2 tag=$3; shift 3
    # Once unmeasured first, so that the keys exist: the measured run is the
    # steady state of a counter store (a key is created once per window,
    # then incremented), not key creation.
    redis-benchmark -p "$port" -c 50 -r 100000 -n $((REQUESTS * 5)) -P 16 "$@" >/dev/null 2>&1
    callgrind_control -z "$pid" >/dev/null 2>&1
    redis-benchmark -p "$port" -c 50 -r 100000 -n "$REQUESTS" -P 16 "$@" >/dev/null 2>&1
    callgrind_control -d "$tag" "$pid" >/dev/null 2>&1
    # The newest dump of this process holds the run's totals.
    grep -h '^summary:' "$(ls -t "$WORK"/*.out.* | head -1)" | awk '{print $2}'
}

# The redis-benchmark arguments of test $1 against a server whose script
# SHA is $2, into LOAD.
load_args() {
    if [ "$1" = EVALSHA ]; then
        LOAD=("${EVALSHA_ARGS[@]/#@SHA@/$2}")
    else
        LOAD=(-t "${1,,}")
    fi
}

declare -A RATIO
echo "Instructions per request (user space, callgrind), ${SERVER:-tally}, -P 16, $REQUESTS requests"
echo
echo "| test | plain | cluster | cluster/plain |"
echo "|---|---|---|---|"
for test in SET GET INCR EVALSHA; do
    load_args $test "$P_SHA"
    p=$(count "$P_PID" "$P_PORT" p-$test "${LOAD[@]}")
    load_args $test "$C_SHA"
    c=$(count "$C_PID" "$C_PORT" c-$test "${LOAD[@]}")
    RATIO[$test]=$(python3 -c "import sys; print(int(sys.argv[2]) / int(sys.argv[1]))" "$p" "$c")
    python3 -c "import sys; p,c,n=map(int,sys.argv[2:]); print(f'| {sys.argv[1]} | {p/n:,.0f} | {c/n:,.0f} | {c/p:.3f}x |')" \
        "$test" "$p" "$c" "$REQUESTS"
done
kill "$P_PID" "$C_PID" 2>/dev/null || true
wait "$P_PID" "$C_PID" 2>/dev/null || true

# Part two: the plain server's user-space share of its CPU, natively.
N_PORT=$(free_port)
mkdir -p "$WORK/native"
if [ "${SERVER:-tally}" = redis ]; then
    redis-server --port "$N_PORT" --dir "$WORK/native" --save "" --appendonly no >/dev/null 2>&1 &
else
    "$TALLY_BIN" --port "$N_PORT" --dir "$WORK/native" --save "" >/dev/null 2>&1 &
fi
N_PID=$!; PIDS+=($N_PID)
wait_up "$N_PORT"
N_SHA=$(redis-cli -p "$N_PORT" SCRIPT LOAD "$(cat $SRC)")
echo
echo "User-space share of the plain server's CPU (/proc, 2,000,000 requests after 500,000 unmeasured), and the CPU cluster mode adds by it"
echo
echo "| test | user ticks | system ticks | user share | modelled CPU cluster/plain |"
echo "|---|---|---|---|---|"
for test in SET GET INCR EVALSHA; do
    load_args $test "$N_SHA"
    redis-benchmark -p "$N_PORT" -c 50 -r 100000 -n 500000 -P 16 "${LOAD[@]}" >/dev/null 2>&1
    read -r u1 s1 < <(user_system_ticks "$N_PID")
    redis-benchmark -p "$N_PORT" -c 50 -r 100000 -n 2000000 -P 16 "${LOAD[@]}" >/dev/null 2>&1
    read -r u2 s2 < <(user_system_ticks "$N_PID")
    python3 -c "
import sys
u, s, r = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
share = u / (u + s)
print(f'| {sys.argv[1]} | {u} | {s} | {share:.2f} | {1 + share * (r - 1):.3f}x |')" \
        "$test" $((u2 - u1)) $((s2 - s1)) "${RATIO[$test]}"
done
