#!/usr/bin/env bash
# What a replica's full sync costs the master's clients: the master holds
# N rate-limit counters (`SET rl:user:u_<i>:a3f2:1720000000 7 EX 120`);
# a client sends INCR after INCR to it while a replica of the same kind
# attaches (REPLICAOF) and is fully synchronized. Prints, per server, the
# longest wait for one reply, how many waits were over 50 ms, and how long
# until the replica's link was up (every replica's, with REPLICAS=n
# replicas asking at once: a master with several replicas restarting).
#
# Usage: benches/sync_stall.sh [counters]   (default 1000000)
#        TALLY_BIN=<path> benches/sync_stall.sh   (another build)
#        REPLICAS=2 benches/sync_stall.sh
set -euo pipefail
cd "$(dirname "$0")/.."

COUNTERS=${1:-1000000}
REPLICAS=${REPLICAS:-1}
. benches/lib.sh
tally_binary

start() { # kind port dir
    if [ "$1" = redis ]; then
        redis-server --port "$2" --bind 127.0.0.1 --save "" --appendonly no --dir "$3" \
            --repl-diskless-sync-delay 0 >/dev/null 2>&1 &
    else
        "$TALLY_BIN" --port "$2" --save "" --dir "$3" >/dev/null 2>&1 &
    fi
    PIDS+=("$!")
    wait_up "$2"
}

limiter_dataset "$COUNTERS" >"$WORK/load.resp"

echo "| server | replicas | longest wait for an INCR's reply (ms) | waits over 50 ms | every replica's link up after (s) |"
echo "|---|---|---|---|---|"
for kind in redis tally; do
    master=$(free_port)
    mkdir -p "$WORK/$kind-m"
    start "$kind" "$master" "$WORK/$kind-m"
    replicas=()
    for n in $(seq "$REPLICAS"); do
        replica=$(free_port)
        mkdir -p "$WORK/$kind-r$n"
        start "$kind" "$replica" "$WORK/$kind-r$n"
        replicas+=("$replica")
    done
    redis-cli -p "$master" --pipe <"$WORK/load.resp" >/dev/null
    python3 - "$master" >"$WORK/$kind-pings" <<'PY' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
waits = []
end = time.monotonic() + 10
while time.monotonic() < end:
    t = time.monotonic()
    s.sendall(b"INCR probe\r\n")
    buf = b""
    while not buf.endswith(b"\r\n"):
        buf += s.recv(64)
    waits.append(time.monotonic() - t)
print(f"{max(waits) * 1000:.1f} {sum(w > 0.05 for w in waits)}")
PY
    pinger=$!
    sleep 1
    t0=$(date +%s.%N)
    for replica in "${replicas[@]}"; do
        redis-cli -p "$replica" replicaof 127.0.0.1 "$master" >/dev/null
    done
    for replica in "${replicas[@]}"; do
        until redis-cli -p "$replica" info replication | grep -q "master_link_status:up"; do
            sleep 0.02
        done
    done
    t1=$(date +%s.%N)
    wait "$pinger"
    read -r longest over <"$WORK/$kind-pings"
    echo "| $kind | $REPLICAS | $longest | $over | $(python3 -c "print(f'{$t1 - $t0:.2f}')") |"
    for replica in "${replicas[@]}"; do
        redis-cli -p "$replica" shutdown nosave >/dev/null 2>&1 || true
    done
    redis-cli -p "$master" shutdown nosave >/dev/null 2>&1 || true
done
