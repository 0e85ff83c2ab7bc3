#!/usr/bin/env bash
# What a replica costs, tally against Redis 7.0 (Debian's redis-server) in
# one run, each replicating to its own kind:
#   1. the master under INCR at -P 16 (random keys, REQUESTS calls) with
#      no replica (it never had one) and then with one: requests per
#      second and the master's CPU per request (utime+stime from /proc
#      over the same load); the cost of a replica is the ratio of the two;
#   2. between the two loads, a full sync of KEYS counters (plus the
#      load's keys): time from REPLICAOF until the replica's link is up
#      with the snapshot loaded;
#   3. the replica's CPU per request of that load, how far behind it is
#      when the load ends (bytes), and how long it takes to have
#      everything.
#
# Usage: benches/replication.sh [requests] [keys]
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

REQUESTS=${1:-300000}
KEYS=${2:-1000000}
cargo build --release -p tally-server >/dev/null 2>&1

start() { # KIND PORT: a fresh server, no persistence; its pid
    local kind=$1 port=$2 dir="$WORK/$2"
    mkdir -p "$dir"
    case $kind in
        redis) redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
                   --repl-diskless-sync-delay 0 --dir "$dir" >/dev/null 2>&1 & ;;
        tally) target/release/tally-server --port "$port" --bind 127.0.0.1 --save "" \
                   --dir "$dir" >/dev/null 2>&1 & ;;
    esac
    local pid=$!
    PIDS+=("$pid")
    wait_up "$port"
    echo "$pid"
}

field() { redis-cli -p "$1" info replication | tr -d '\r' | sed -n "s/^$2://p"; }
now_ms() { date +%s%3N; }

# INCR load on port $1; prints "requests/s cpu_ticks" for process $2.
incr_load() {
    local port=$1 pid=$2 before after rps
    before=$(cpu_ticks "$pid")
    rps=$(redis-benchmark -p "$port" -n "$REQUESTS" -c 50 -P 16 -r 100000 -t incr -q \
        | tr '\r' '\n' | awk '/INCR/ {print $2}' | tail -1)
    after=$(cpu_ticks "$pid")
    echo "$rps $((after - before))"
}

printf '%-6s %12s %11s %10s %11s %10s %12s %10s %11s\n' server full_sync_ms alone_rps alone_us \
    with_rps with_us replica_us lag_bytes catch_up_ms
for kind in redis tally; do
    mport=$(free_port); rport=$(free_port)
    mpid=$(start "$kind" "$mport"); rpid=$(start "$kind" "$rport")
    # KEYS counters on the master, then the full sync.
    python3 - "$KEYS" <<'EOF' | redis-cli -p "$mport" --pipe >/dev/null
import sys
out = sys.stdout
for i in range(int(sys.argv[1])):
    key = f"rl:{i}"
    out.write(f"*3\r\n$3\r\nSET\r\n${len(key)}\r\n{key}\r\n$1\r\n7\r\n")
EOF
    # The master alone: it never had a replica, so it keeps no backlog.
    read -r alone_rps alone_ticks < <(incr_load "$mport" "$mpid")
    keys=$(redis-cli -p "$mport" dbsize)
    started=$(now_ms)
    redis-cli -p "$rport" replicaof 127.0.0.1 "$mport" >/dev/null
    until [ "$(field "$rport" master_link_status)" = up ] \
        && [ "$(field "$rport" master_sync_in_progress)" = 0 ]; do sleep 0.01; done
    sync_ms=$(( $(now_ms) - started ))
    [ "$(redis-cli -p "$rport" dbsize)" = "$keys" ] || { echo "$kind: replica holds $(redis-cli -p "$rport" dbsize) of $keys keys"; exit 1; }
    # The same load with the replica attached (and the replica's CPU
    # over it).
    replica_before=$(cpu_ticks "$rpid")
    read -r with_rps with_ticks < <(incr_load "$mport" "$mpid")
    replica_ticks=$(( $(cpu_ticks "$rpid") - replica_before ))
    lag=$(( $(field "$mport" master_repl_offset) - $(field "$rport" master_repl_offset) ))
    started=$(now_ms)
    until [ "$(field "$mport" master_repl_offset)" = "$(field "$rport" master_repl_offset)" ]; do sleep 0.005; done
    catch_up=$(( $(now_ms) - started ))
    us() { python3 -c "print(round($1 * 10000 / $REQUESTS, 3))"; }
    printf '%-6s %12s %11s %10s %11s %10s %12s %10s %11s\n' "$kind" "$sync_ms" "$alone_rps" \
        "$(us "$alone_ticks")" "$with_rps" "$(us "$with_ticks")" "$(us "$replica_ticks")" "$lag" "$catch_up"
    kill "$mpid" "$rpid" 2>/dev/null || true
done
