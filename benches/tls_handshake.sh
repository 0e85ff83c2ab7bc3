#!/usr/bin/env bash
# New TLS connections side by side: redis-server (OpenSSL) and tally-server
# (rustls with ring), with an RSA-2048 and an ECDSA P-256 certificate. Each
# request comes on a new connection (redis-benchmark -k 0, PING_INLINE, 10
# clients), so the server's work is the handshake. Reported per
# certificate: connections per second (the client's limit as much as the
# server's) and the server's CPU per connection (user + system ticks over
# the run), medians of ROUNDS rounds that run Redis then tally back to back.
#
# Usage: benches/tls_handshake.sh [connections] [rounds]   (defaults 3000, 3)
# Needs redis-server, redis-benchmark, redis-cli, openssl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

CONNECTIONS=${1:-3000}
ROUNDS=${2:-3}
cargo build --release -p tally-server >/dev/null 2>&1
TALLY_BIN=target/release/tally-server
. benches/lib.sh

# One self-signed certificate for 127.0.0.1 per key type.
certificate() { # name openssl-newkey-args...
    local name=$1; shift
    openssl req -x509 "$@" -nodes -days 2 -keyout "$WORK/$name.key" -out "$WORK/$name.crt" \
        -subj "/CN=localhost" -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" 2>/dev/null
}
certificate rsa -newkey rsa:2048
certificate ecdsa -newkey ec -pkeyopt ec_paramgen_curve:prime256v1

echo "| certificate | Redis conn/s | tally conn/s | tally/Redis | Redis CPU ms/conn | tally CPU ms/conn | tally/Redis CPU |"
echo "|---|---|---|---|---|---|---|"
for cert in rsa ecdsa; do
    args=(--tls-cert-file "$WORK/$cert.crt" --tls-key-file "$WORK/$cert.key" --tls-auth-clients no
        --save "")
    r_plain=$(free_port); r_tls=$(free_port); t_plain=$(free_port); t_tls=$(free_port)
    redis-server --port "$r_plain" --tls-port "$r_tls" "${args[@]}" --appendonly no \
        --daemonize no >/dev/null 2>&1 &
    r_pid=$!; PIDS+=("$r_pid")
    "$TALLY_BIN" --port "$t_plain" --tls-port "$t_tls" "${args[@]}" >/dev/null 2>&1 &
    t_pid=$!; PIDS+=("$t_pid")
    wait_up "$r_plain"
    wait_up "$t_plain"
    declare -A RATE=() CPU=()
    for round in $(seq "$ROUNDS"); do
        for side in redis tally; do
            if [ $side = redis ]; then port=$r_tls; pid=$r_pid; else port=$t_tls; pid=$t_pid; fi
            before=$(cpu_ticks "$pid")
            rate=$(redis-benchmark -p "$port" --tls --cacert "$WORK/$cert.crt" -c 10 -k 0 \
                -n "$CONNECTIONS" -t ping_inline --csv 2>/dev/null | tail -n 1 | cut -d, -f2 | tr -d '"')
            after=$(cpu_ticks "$pid")
            RATE[$side]+="$rate "
            CPU[$side]+="$(python3 -c "print(($after - $before) * 10 / $CONNECTIONS)") "
        done
    done
    python3 - "$cert" "${RATE[redis]}" "${RATE[tally]}" "${CPU[redis]}" "${CPU[tally]}" <<'EOF'
import statistics, sys
cert = sys.argv[1]
r_rate, t_rate, r_cpu, t_cpu = (statistics.median(float(x) for x in a.split()) for a in sys.argv[2:6])
print(f"| {cert} | {r_rate:,.0f} | {t_rate:,.0f} | {t_rate / r_rate:.2f}x | {r_cpu:.2f} | {t_cpu:.2f} | "
      f"{t_cpu / r_cpu:.2f}x |")
EOF
    kill "$r_pid" "$t_pid"
    wait "$r_pid" "$t_pid" 2>/dev/null || true
done
