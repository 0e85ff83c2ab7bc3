#!/usr/bin/env bash
# What the ACL check costs the native limiter path, counted rather than
# timed (issue #13's budget: at most 3%): one tally under valgrind's
# callgrind serves the sliding-window limiter (lua/scripts/sliding_window.lua) through EVALSHA (-P 16) first as the
# default user (unrestricted: the check is one flag test) and then as a
# gateway user that may run only the limiter on `rl:*` keys; the
# user-space instructions each run executed give instructions per request
# and the ratio gateway/default. As in benches/cluster_cost.sh, each
# measured run follows an unmeasured one five times as long (the keys
# exist), and the check adds no system call, so its share of the server's
# CPU is the user-space share (measured natively, second part) times the
# instruction excess.
#
# Usage: benches/acl_cost.sh [requests]   (default 200000)
# Needs valgrind (callgrind_control), redis-server's tools and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${1:-200000}
cargo build --release -p tally-server >/dev/null 2>&1
TALLY_BIN=target/release/tally-server
. benches/lib.sh
SRC=lua/scripts/sliding_window.lua
# The gateway user of the 2026-11-30 measurements: the script's own calls
# (GET, INCR, EXPIRE) on `rl:*`, EVALSHA and SCRIPT, nothing else.
GATEWAY_RULES=(on '>gateway-pass' '~rl:*' -@all +evalsha +get +incr +expire +script)

start() { # port dir [valgrind args...] -> pid
    local port=$1 dir=$2; shift 2
    mkdir -p "$dir"
    "$@" "$TALLY_BIN" --port "$port" --dir "$dir" --save "" >/dev/null 2>&1 &
    echo $!
}

PORT=$(free_port)
PID=$(start "$PORT" "$WORK/cg" valgrind --tool=callgrind --callgrind-out-file="$WORK/acl.out")
PIDS+=("$PID")
wait_up "$PORT"
redis-cli -p "$PORT" ACL SETUSER gateway "${GATEWAY_RULES[@]}" >/dev/null
SHA=$(redis-cli -p "$PORT" SCRIPT LOAD "$(cat $SRC)")
LOAD=(EVALSHA "$SHA" 2 'rl:{u}:__rand_int__:c' 'rl:{u}:__rand_int__:p' 1000 60 1720000030 1)

count() { # dump-tag redis-benchmark-auth-args... -> instructions for the run
    local tag=$1; shift
    redis-benchmark -p "$PORT" "$@" -c 50 -r 100000 -n $((REQUESTS * 5)) -P 16 "${LOAD[@]}" >/dev/null 2>&1
    callgrind_control -z "$PID" >/dev/null 2>&1
    redis-benchmark -p "$PORT" "$@" -c 50 -r 100000 -n "$REQUESTS" -P 16 "${LOAD[@]}" >/dev/null 2>&1
    callgrind_control -d "$tag" "$PID" >/dev/null 2>&1
    grep -h '^summary:' "$(ls -t "$WORK"/*.out.* | head -1)" | awk '{print $2}'
}

# Alternating, twice each: the keys' expiry sweeps move a run by tens of
# instructions per request.
declare -a DEFAULT GATEWAY
for round in 1 2; do
    DEFAULT+=("$(count "default-$round")")
    GATEWAY+=("$(count "gateway-$round" --user gateway -a gateway-pass)")
done
kill "$PID" 2>/dev/null || true
wait "$PID" 2>/dev/null || true

# Part two: the user-space share of the server's CPU under the load, natively.
N_PORT=$(free_port)
N_PID=$(start "$N_PORT" "$WORK/native")
PIDS+=("$N_PID")
wait_up "$N_PORT"
redis-cli -p "$N_PORT" ACL SETUSER gateway "${GATEWAY_RULES[@]}" >/dev/null
N_SHA=$(redis-cli -p "$N_PORT" SCRIPT LOAD "$(cat $SRC)")
LOAD[1]=$N_SHA
redis-benchmark -p "$N_PORT" -c 50 -r 100000 -n 500000 -P 16 "${LOAD[@]}" >/dev/null 2>&1
read -r u1 s1 < <(user_system_ticks "$N_PID")
redis-benchmark -p "$N_PORT" -c 50 -r 100000 -n 2000000 -P 16 "${LOAD[@]}" >/dev/null 2>&1
read -r u2 s2 < <(user_system_ticks "$N_PID")

python3 - "$REQUESTS" $((u2 - u1)) $((s2 - s1)) "${DEFAULT[@]}" "${GATEWAY[@]}" <<'EOF'
import statistics, sys
n, user, system = map(int, sys.argv[1:4])
runs = list(map(int, sys.argv[4:]))
default, gateway = runs[:len(runs) // 2], runs[len(runs) // 2:]
print(f"Sliding-window EVALSHA, -P 16, {n:,} requests per run, user-space instructions per request (callgrind)")
print()
print("| run | default user | gateway user | gateway/default |")
print("|---|---|---|---|")
for i, (d, g) in enumerate(zip(default, gateway), 1):
    print(f"| {i} | {d / n:,.0f} | {g / n:,.0f} | {g / d:.3f}x |")
ratio = statistics.median(g / d for d, g in zip(default, gateway))
share = user / (user + system)
print()
print(f"User-space share of the server's CPU (default user, 2,000,000 requests): "
      f"{user} user, {system} system ticks, {share:.2f}")
print(f"Modelled CPU gateway/default: 1 + {share:.2f} x ({ratio:.3f} - 1) = {1 + share * (ratio - 1):.3f}x")
EOF
