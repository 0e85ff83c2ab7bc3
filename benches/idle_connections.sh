#!/usr/bin/env bash
# Memory of idle connections side by side: redis-server and tally-server
# each get N connections that send one PING and then stay idle for SECONDS;
# reported is each server's RSS growth (VmRSS before and after), in total
# and per connection. A gateway fleet holds many pooled connections that
# are idle most of the time.
#
# Usage: benches/idle_connections.sh [connections] [seconds]   (defaults 3000, 5)
# Needs redis-server, redis-cli and python3; raises the open-file limit.
set -euo pipefail
cd "$(dirname "$0")/.."

CONNECTIONS=${1:-3000}
SECONDS_IDLE=${2:-5}
ulimit -n $((CONNECTIONS * 2 + 100))
cargo build --release -p tally-server >/dev/null 2>&1
. benches/lib.sh

R_PORT=$(free_port); T_PORT=$(free_port)
redis-server --port "$R_PORT" --save "" --appendonly no --maxclients $((CONNECTIONS + 100)) \
    --daemonize no >/dev/null 2>&1 &
R_PID=$!; PIDS+=("$R_PID")
target/release/tally-server --port "$T_PORT" --save "" --maxclients $((CONNECTIONS + 100)) \
    >/dev/null 2>&1 &
T_PID=$!; PIDS+=("$T_PID")
wait_up "$R_PORT"
wait_up "$T_PORT"

echo "| server | idle connections | seconds idle | RSS growth | per connection |"
echo "|---|---|---|---|---|"
for side in redis tally; do
    if [ $side = redis ]; then port=$R_PORT; pid=$R_PID; else port=$T_PORT; pid=$T_PID; fi
    python3 - "$side" "$port" "$pid" "$CONNECTIONS" "$SECONDS_IDLE" <<'PY'
import socket, sys, time
side, port, pid, n, idle = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
def rss_kib():
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
before = rss_kib()
held = []
for _ in range(n):
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(b"PING\r\n")
    conn.recv(64)
    held.append(conn)
time.sleep(idle)
grown = rss_kib() - before
print(f"| {side} | {n:,} | {idle:g} | {grown / 1024:.1f} MiB | {grown * 1024 / n:,.0f} bytes |")
PY
done
