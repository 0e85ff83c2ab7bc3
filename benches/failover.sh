#!/usr/bin/env bash
# Cluster failover, tally against Redis 7.0 (Debian's redis-server) in one
# run: six nodes of one kind made into three masters with a replica each
# (redis-cli --cluster create --cluster-replicas 1), then, RUNS times for
# each fault, one master is killed (SIGKILL) or stopped (SIGSTOP) while a
# client INCRs a counter on it as fast as it can, with no WAIT. Reported
# per run:
#   - promoted_ms: from the fault until the master's replica answers ROLE
#     as a master;
#   - ok_ms: until every surviving node reports cluster_state:ok;
#   - first_write_ms: until a cluster client (redis-py's RedisCluster)
#     retrying an INCR on the failed shard gets one done;
#   - acked: increments the master acknowledged to the client;
#   - lost: those the new master does not have (asynchronous replication's
#     window: what a client that needs none lost asks WAIT for).
# After each run the failed node is brought back (restarted, or resumed)
# and rejoins as a replica before the next run.
#
# Usage: benches/failover.sh [runs] [node-timeout-ms]
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

RUNS=${1:-3}
TIMEOUT=${2:-2000}
cargo build --release -p tally-server >/dev/null 2>&1

declare -A PID_OF DIR_OF BUS_OF KIND_OF

start() { # KIND PORT
    local kind=$1 port=$2 dir="$WORK/$2" bus=${BUS_OF[$2]:-}
    [ -n "$bus" ] || bus=$(free_port)
    BUS_OF[$port]=$bus
    DIR_OF[$port]=$dir
    KIND_OF[$port]=$kind
    mkdir -p "$dir"
    case $kind in
        redis) redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
                   --cluster-enabled yes --cluster-port "$bus" --cluster-node-timeout "$TIMEOUT" \
                   --dir "$dir" >/dev/null 2>&1 & ;;
        tally) target/release/tally-server --port "$port" --bind 127.0.0.1 --save "" \
                   --cluster-enabled yes --cluster-port "$bus" --cluster-node-timeout "$TIMEOUT" \
                   --dir "$dir" >/dev/null 2>&1 & ;;
    esac
    PID_OF[$port]=$!
    PIDS+=("$!")
    wait_up "$port"
}

now_ms() { date +%s%3N; }
role() { redis-cli -p "$1" role 2>/dev/null | head -1; }
state_ok() { redis-cli -p "$1" cluster info 2>/dev/null | tr -d '\r' | grep -q '^cluster_state:ok'; }

# The master (port) serving {failover}, and its replica's port, from
# CLUSTER NODES.
shard() {
    local slot
    slot=$(redis-cli -p "$1" cluster keyslot '{failover}')
    redis-cli -p "$1" cluster nodes | python3 -c '
import sys
slot = int(sys.argv[1])
nodes = [l.split() for l in sys.stdin if l.strip()]
port = lambda n: n[1].split("@")[0].rsplit(":", 1)[1]
for n in nodes:
    for r in n[8:]:
        a, _, b = r.partition("-")
        if r[0] != "[" and int(a) <= slot <= int(b or a):
            replica = next(port(m) for m in nodes if m[3] == n[0])
            print(port(n), replica)
' "$slot"
}

printf '%-6s %-5s %4s %12s %8s %14s %8s %6s\n' server fault run promoted_ms ok_ms first_write_ms acked lost
for kind in ${KINDS:-redis tally}; do
    PORTS=()
    for _ in 1 2 3 4 5 6; do p=$(free_port); start "$kind" "$p"; PORTS+=("$p"); done
    echo yes | redis-cli --cluster create $(printf '127.0.0.1:%s ' "${PORTS[@]}") \
        --cluster-replicas 1 --cluster-yes >/dev/null
    for p in "${PORTS[@]}"; do until state_ok "$p"; do sleep 0.1; done; done
    sleep 2
    for fault in kill stop; do
        for run in $(seq 1 "$RUNS"); do
            read -r master replica < <(shard "${PORTS[0]}")
            until [ "$(redis-cli -p "$replica" info replication | tr -d '\r' | sed -n 's/^master_link_status://p')" = up ]; do sleep 0.1; done
            redis-cli -p "$master" del '{failover}:n' >/dev/null
            # Bounded: a writer that never sees its server go (it should)
            # must not hold the bench.
            timeout 60 python3 - "$master" > "$WORK/acked" <<'EOF' &
import sys, redis
r = redis.Redis(port=int(sys.argv[1]), socket_timeout=0.5)
last = 0
try:
    while True:
        last = r.incr('{failover}:n')
except Exception:
    pass
print(last)
EOF
            writer=$!
            sleep 1
            t0=$(now_ms)
            if [ "$fault" = kill ]; then
                kill -9 "${PID_OF[$master]}"
                wait "${PID_OF[$master]}" 2>/dev/null || true
            else
                kill -STOP "${PID_OF[$master]}"
            fi
            # A cluster client (redis-py's RedisCluster, seeded with a
            # surviving node) retrying an INCR on the failed shard (another
            # key of its slot) until one succeeds: when the application
            # writes again.
            timeout 60 python3 - "$replica" "$t0" > "$WORK/first_write" <<'EOF' &
import sys, time
from redis.cluster import RedisCluster
port, t0 = int(sys.argv[1]), int(sys.argv[2])
while True:
    try:
        RedisCluster(host='127.0.0.1', port=port, socket_timeout=0.5).incr('{failover}:probe')
        break
    except Exception:
        time.sleep(0.02)
print(int(time.time() * 1000) - t0)
EOF
            client=$!
            until [ "$(role "$replica")" = master ]; do sleep 0.02; done
            t1=$(now_ms)
            for p in "${PORTS[@]}"; do
                [ "$p" = "$master" ] && continue
                until state_ok "$p"; do sleep 0.02; done
            done
            t2=$(now_ms)
            wait "$writer" || true
            acked=$(cat "$WORK/acked")
            [ -n "$acked" ] || acked=0
            have=$(redis-cli -p "$replica" get '{failover}:n')
            wait "$client" || true
            first_write=$(cat "$WORK/first_write")
            printf '%-6s %-5s %4s %12s %8s %14s %8s %6s\n' "$kind" "$fault" "$run" $((t1 - t0)) \
                $((t2 - t0)) "${first_write:-?}" "$acked" $((acked - ${have:-0}))
            # Back as a replica of the new master before the next run.
            if [ "$fault" = kill ]; then start "$kind" "$master"; else kill -CONT "${PID_OF[$master]}"; fi
            until [ "$(role "$master")" = slave ] && \
                [ "$(redis-cli -p "$master" info replication | tr -d '\r' | sed -n 's/^master_link_status://p')" = up ]; do
                sleep 0.1
            done
            for p in "${PORTS[@]}"; do until state_ok "$p"; do sleep 0.1; done; done
            sleep 2
        done
    done
    for p in "${PORTS[@]}"; do kill "${PID_OF[$p]}" 2>/dev/null || true; done
done
