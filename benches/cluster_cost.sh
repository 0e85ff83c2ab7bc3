#!/usr/bin/env bash
# What cluster mode costs one node, counted rather than timed: one tally
# with `cluster-enabled yes` owning all 16384 slots and one without, each
# under valgrind's callgrind, serve the same redis-benchmark load (-P 16);
# the user-space instructions each executed for it (counters zeroed before,
# dumped after) give instructions per request and the ratio cluster/plain.
# Instruction counts do not move with the machine's load, which makes
# req/s ratios on a shared 2-core box swing by ±8% (benches/cluster.sh);
# kernel time (the network) is not counted, so the ratio is an upper bound
# of the share of CPU that cluster mode adds. Each run is preceded by an
# unmeasured one, so the keys exist (creating a key also records it in
# the per-slot key index: not counted here).
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
C_SHA=$(redis-cli -p "$C_PORT" SCRIPT LOAD "$(cat $SRC)")

count() { # pid port dump-tag test-args... -> instructions for the run
    local pid=$1 port=$2 tag=$3; shift 3
    # Once unmeasured first, so that the keys exist: the measured run is the
    # steady state of a counter store (a key is created once per window,
    # then incremented), not key creation.
    redis-benchmark -p "$port" -c 50 -r 100000 -n "$REQUESTS" -P 16 "$@" >/dev/null 2>&1
    callgrind_control -z "$pid" >/dev/null 2>&1
    redis-benchmark -p "$port" -c 50 -r 100000 -n "$REQUESTS" -P 16 "$@" >/dev/null 2>&1
    callgrind_control -d "$tag" "$pid" >/dev/null 2>&1
    # The newest dump of this process holds the run's totals.
    grep -h '^summary:' "$(ls -t "$WORK"/*.out.* | head -1)" | awk '{print $2}'
}

echo "Instructions per request (user space, callgrind), ${SERVER:-tally}, -P 16, $REQUESTS requests"
echo
echo "| test | plain | cluster | cluster/plain |"
echo "|---|---|---|---|"
for test in SET GET INCR EVALSHA; do
    if [ $test = EVALSHA ]; then
        p=$(count "$P_PID" "$P_PORT" p-$test EVALSHA "$P_SHA" 2 'rl:{u}:__rand_int__:c' 'rl:{u}:__rand_int__:p' 1000 60 1720000030 1)
        c=$(count "$C_PID" "$C_PORT" c-$test EVALSHA "$C_SHA" 2 'rl:{u}:__rand_int__:c' 'rl:{u}:__rand_int__:p' 1000 60 1720000030 1)
    else
        p=$(count "$P_PID" "$P_PORT" p-$test -t "${test,,}")
        c=$(count "$C_PID" "$C_PORT" c-$test -t "${test,,}")
    fi
    python3 -c "import sys; p,c,n=map(int,sys.argv[2:]); print(f'| {sys.argv[1]} | {p/n:,.0f} | {c/n:,.0f} | {c/p:.3f}x |')" \
        "$test" "$p" "$c" "$REQUESTS"
done
