#!/usr/bin/env bash
# Cluster mode, side by side, in one run (ROUNDS alternating rounds, medians):
#
# 1. One tally node with `cluster-enabled yes` owning all 16384 slots beside
#    one tally without cluster mode: redis-benchmark -P 16 SET/GET/INCR and
#    the sliding-window limiter's EVALSHA (lua/scripts/sliding_window.lua); requests/s and the server's CPU time
#    per million requests (from /proc), as ratios cluster/plain.
# 2. Three tally nodes and three redis-server nodes, each trio created with
#    `redis-cli --cluster create`: `redis-benchmark --cluster -P 16` SET/GET/
#    INCR and the sliding-window EVALSHA on `{tag}`-tagged keys; tally/Redis ratios.
#
# Usage: [ONE_NODE_ONLY=1] benches/cluster.sh [requests] [rounds]   (defaults 1000000, 3; CPU
# time is read in 10 ms ticks, so fewer requests blur the CPU ratios)
# Needs redis-server, redis-benchmark, redis-cli and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${1:-1000000}
ROUNDS=${2:-3}
cargo build --release -p tally-server >/dev/null 2>&1
TALLY_BIN=target/release/tally-server
. benches/lib.sh
SRC=lua/scripts/sliding_window.lua

# --- 1. one node, cluster mode on and off -----------------------------------
P_PORT=$(free_port); C_PORT=$(free_port); C_BUS=$(free_port)
mkdir -p "$WORK/plain" "$WORK/cluster"
"$TALLY_BIN" --port "$P_PORT" --dir "$WORK/plain" --save "" >/dev/null 2>&1 &
P_PID=$!; PIDS+=($P_PID)
"$TALLY_BIN" --port "$C_PORT" --dir "$WORK/cluster" --save "" --cluster-enabled yes \
    --cluster-port "$C_BUS" >/dev/null 2>&1 &
C_PID=$!; PIDS+=($C_PID)
wait_up "$P_PORT"; wait_up "$C_PORT"
redis-cli -p "$C_PORT" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
until redis-cli -p "$C_PORT" CLUSTER INFO | grep -q cluster_state:ok; do sleep 0.1; done
P_SHA=$(redis-cli -p "$P_PORT" SCRIPT LOAD "$(cat $SRC)")
C_SHA=$(redis-cli -p "$C_PORT" SCRIPT LOAD "$(cat $SRC)")

one() { # port pid test-args... -> "req/s cpu-seconds-per-million"
    local port=$1 pid=$2; shift 2
    local before after rps
    before=$(cpu_ticks "$pid")
    rps=$(redis-benchmark -p "$port" -c 50 -r 100000 -n "$REQUESTS" -P 16 --csv "$@" 2>/dev/null |
        tail -n +2 | cut -d, -f2 | tr -d '"')
    after=$(cpu_ticks "$pid")
    python3 -c "import sys; print(sys.argv[1], (int(sys.argv[3])-int(sys.argv[2]))/100/int(sys.argv[4])*1e6)" \
        "$rps" "$before" "$after" "$REQUESTS"
}

declare -A ONE
for round in $(seq "$ROUNDS"); do
    # Which server runs first alternates: the machine's speed drifts.
    sides="plain cluster"; if [ $((round % 2)) = 0 ]; then sides="cluster plain"; fi
    for side in $sides; do
        if [ $side = plain ]; then port=$P_PORT; pid=$P_PID; sha=$P_SHA; else port=$C_PORT; pid=$C_PID; sha=$C_SHA; fi
        for test in SET GET INCR; do
            read -r rps cpu <<<"$(one "$port" "$pid" -t "${test,,}")"
            ONE[$side,$test,rps]+="$rps "; ONE[$side,$test,cpu]+="$cpu "
        done
        read -r rps cpu <<<"$(one "$port" "$pid" EVALSHA "$sha" 2 'rl:{u}:__rand_int__:c' 'rl:{u}:__rand_int__:p' 1000 60 1720000030 1)"
        ONE[$side,EVALSHA,rps]+="$rps "; ONE[$side,EVALSHA,cpu]+="$cpu "
    done
    echo "round $round done" >&2
done

echo "One node, -P 16, $REQUESTS requests, medians of $ROUNDS rounds"
echo
echo "| test | plain req/s | cluster req/s | req/s cluster/plain | CPU s per 1M plain | CPU s per 1M cluster | CPU cluster/plain |"
echo "|---|---|---|---|---|---|---|"
for test in SET GET INCR EVALSHA; do
    # shellcheck disable=SC2086 # the lists are meant to split
    pr=$(median ${ONE[plain,$test,rps]}); cr=$(median ${ONE[cluster,$test,rps]})
    # shellcheck disable=SC2086
    pc=$(median ${ONE[plain,$test,cpu]}); cc=$(median ${ONE[cluster,$test,cpu]})
    python3 -c "import sys; pr,cr,pc,cc=map(float,sys.argv[2:]); print(f'| {sys.argv[1]} | {pr:,.0f} | {cr:,.0f} | {cr/pr:.3f}x | {pc:.2f} | {cc:.2f} | {cc/pc:.3f}x |')" \
        "$test" "$pr" "$cr" "$pc" "$cc"
done
kill "$P_PID" "$C_PID" 2>/dev/null || true
if [ "${ONE_NODE_ONLY:-0}" = 1 ]; then exit 0; fi

# --- 2. three tally nodes vs three redis-server nodes ------------------------
start_trio() { # kind -> TRIO_PORTS
    local kind=$1 ports=()
    for _ in 1 2 3; do
        local port bus dir
        port=$(free_port); bus=$((port + 10000))
        while ! python3 -c "import socket,sys; s=socket.socket(); s.bind(('127.0.0.1',int(sys.argv[1])))" "$bus" 2>/dev/null; do
            port=$(free_port); bus=$((port + 10000))
        done
        dir="$WORK/$kind-$port"; mkdir -p "$dir"
        if [ "$kind" = redis ]; then
            (cd "$dir" && exec redis-server --port "$port" --cluster-enabled yes --save "" --appendonly no) >/dev/null 2>&1 &
        else
            "$TALLY_BIN" --port "$port" --dir "$dir" --save "" --cluster-enabled yes >/dev/null 2>&1 &
        fi
        PIDS+=($!)
        ports+=("$port")
    done
    for port in "${ports[@]}"; do wait_up "$port"; done
    redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-yes >/dev/null 2>&1
    for port in "${ports[@]}"; do
        until redis-cli -p "$port" CLUSTER INFO | grep -q cluster_state:ok; do sleep 0.1; done
    done
    TRIO_PORTS=("${ports[@]}")
}
start_trio redis; R_PORTS=("${TRIO_PORTS[@]}")
start_trio tally; T_PORTS=("${TRIO_PORTS[@]}")
for port in "${R_PORTS[@]}" "${T_PORTS[@]}"; do
    SHA=$(redis-cli -p "$port" SCRIPT LOAD "$(cat $SRC)")
done

trio() { # first-port test-args... -> req/s
    # Timed here: redis-benchmark --cluster reports req/s from a clock that
    # moves in steps of about 250 ms.
    local port=$1 start end; shift
    start=$(date +%s%N)
    redis-benchmark --cluster -p "$port" -c 50 -r 100000 -n "$REQUESTS" -P 16 -q "$@" >/dev/null 2>&1
    end=$(date +%s%N)
    python3 -c "import sys; print(int(sys.argv[1]) / ((int(sys.argv[3]) - int(sys.argv[2])) / 1e9))" \
        "$REQUESTS" "$start" "$end"
}

declare -A THREE
for round in $(seq "$ROUNDS"); do
    for side in redis tally; do
        if [ $side = redis ]; then port=${R_PORTS[0]}; else port=${T_PORTS[0]}; fi
        set=$(trio "$port" -t set); get=$(trio "$port" -t get); incr=$(trio "$port" -t incr)
        evalsha=$(trio "$port" EVALSHA "$SHA" 2 'rl:{tag}:__rand_int__:c' 'rl:{tag}:__rand_int__:p' 1000 60 1720000030 1)
        THREE[$side,SET]+="$set "; THREE[$side,GET]+="$get "; THREE[$side,INCR]+="$incr "
        THREE[$side,EVALSHA]+="$evalsha "
    done
    echo "round $round done" >&2
done

echo
echo "Three nodes each, redis-benchmark --cluster -P 16, $REQUESTS requests, medians of $ROUNDS rounds"
echo
echo "| test | Redis cluster req/s | tally cluster req/s | tally/Redis |"
echo "|---|---|---|---|"
for test in SET GET INCR EVALSHA; do
    # shellcheck disable=SC2086
    r=$(median ${THREE[redis,$test]}); t=$(median ${THREE[tally,$test]})
    python3 -c "import sys; r,t=float(sys.argv[2]),float(sys.argv[3]); print(f'| {sys.argv[1]} | {r:,.0f} | {t:,.0f} | {t/r:.2f}x |')" "$test" "$r" "$t"
done
