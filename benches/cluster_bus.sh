#!/usr/bin/env bash
# Cluster bus traffic, tally vs redis-server: for each cluster size N (default
# "3 30"), N redis-server 7.0 nodes and N tally nodes, each set created with
# `redis-cli --cluster create`, left idle to settle, then the bytes sent on
# every bus link (kernel counters, `ss -tin` bytes_sent, over the links to or
# from a bus port) over SECONDS. Prints bytes/s per node for each, and the
# ratio. Same node timeout for both (15 s, Redis's default).
#
# Usage: benches/cluster_bus.sh [seconds] [sizes]   e.g. 60 "3 30"
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_MEASURED=${1:-60}
SIZES=${2:-3 30}
TALLY=target/release/tally-server
cargo build --release -p tally-server >/dev/null 2>&1
work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

wait_port() {
    for _ in $(seq 1 600); do
        redis-cli -p "$1" PING >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "nothing answers on $1" >&2
    return 1
}

# Bytes sent so far on every established link to or from one of the bus
# ports given (each byte counted once, by the socket that sent it).
bus_bytes() {
    ss -Htin state established | python3 -c '
import re, sys
cports = set(int(p) for p in sys.argv[1:])
total = 0
lines = sys.stdin.read().split("\n")
i = 0
while i < len(lines):
    head = lines[i].split()
    info = lines[i + 1] if i + 1 < len(lines) else ""
    i += 2
    if len(head) < 4:
        continue
    local = int(head[2].rsplit(":", 1)[1])
    remote = int(head[3].rsplit(":", 1)[1])
    if local in cports or remote in cports:
        sent = re.search(r"bytes_sent:(\d+)", info)
        total += int(sent.group(1)) if sent else 0
print(total)
' "$@"
}

# One cluster of `kind` (redis|tally) with n nodes from `base`; its bus
# ports are left in CPORTS.
start_cluster() {
    local kind=$1 n=$2 base=$3 addresses=()
    CPORTS=()
    for i in $(seq 0 $((n - 1))); do
        local port=$((base + i)) dir="$work/$kind-$n-$i"
        mkdir -p "$dir"
        if [ "$kind" = redis ]; then
            redis-server --port "$port" --cluster-enabled yes --dir "$dir" --save "" \
                --appendonly no --cluster-node-timeout 15000 --logfile "$dir/log" >/dev/null 2>&1 &
        else
            "$TALLY" --port "$port" --cluster-enabled yes --dir "$dir" \
                --cluster-node-timeout 15000 >"$dir/log" 2>&1 &
        fi
        pids+=($!)
        addresses+=("127.0.0.1:$port")
        CPORTS+=($((port + 10000)))
    done
    for i in $(seq 0 $((n - 1))); do wait_port $((base + i)); done
    redis-cli --cluster create "${addresses[@]}" --cluster-yes >"$work/$kind-create.log" 2>&1
}

printf '%-6s %-8s %14s\n' nodes server 'bytes/s/node'
for n in $SIZES; do
    start_cluster redis "$n" 21000
    redis_ports="${CPORTS[*]}"
    start_cluster tally "$n" 23000
    tally_ports="${CPORTS[*]}"
    # Settle: every node knows every other and has pinged it.
    sleep 20
    r0=$(bus_bytes $redis_ports); t0=$(bus_bytes $tally_ports)
    sleep "$SECONDS_MEASURED"
    r1=$(bus_bytes $redis_ports); t1=$(bus_bytes $tally_ports)
    redis_rate=$(( (r1 - r0) / SECONDS_MEASURED / n ))
    tally_rate=$(( (t1 - t0) / SECONDS_MEASURED / n ))
    printf '%-6s %-8s %14s\n' "$n" redis "$redis_rate" "$n" tally "$tally_rate"
    python3 -c "import sys; print(f'{sys.argv[1]:<6} tally/redis {int(sys.argv[3]) / max(1, int(sys.argv[2])):.2f}x')" \
        "$n" "$redis_rate" "$tally_rate"
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    pids=()
done
