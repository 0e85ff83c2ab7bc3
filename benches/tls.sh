#!/usr/bin/env bash
# TLS side by side: redis-server (Debian's build, OpenSSL) and tally-server
# (rustls), each with a TLS port and `tls-auth-clients no`, the same
# certificates, in one run; redis-benchmark --tls SET/GET/INCR and the
# sliding-window limiter's EVALSHA (lua/scripts/sliding_window.lua) at P=1 and P=16, ROUNDS alternating rounds,
# medians. tally runs twice: with its default worker threads (one per core)
# and with `--io-threads 1`, the one thread Redis serves commands on; on a
# two-core box redis-benchmark needs the other core, and a second server
# thread takes CPU from the client it waits for. Also the plain port of
# each server for reference. On a shared box one round's ratio moves by
# ±10%, so the ratio is also given per round (each round runs the servers
# back to back): the median of those paired ratios, their range, and in
# how many rounds tally was ahead.
#
# Usage: benches/tls.sh [requests] [rounds]   (defaults 200000, 3)
#        PIPELINES="1" benches/tls.sh ...     (only P=1; default "1 16")
# Needs redis-server, redis-benchmark, redis-cli, openssl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${1:-200000}
ROUNDS=${2:-3}
PIPELINES=${PIPELINES:-1 16}
cargo build --release -p tally-server >/dev/null 2>&1
TALLY_BIN=target/release/tally-server
. benches/lib.sh

# Certificates: a CA and a server certificate for 127.0.0.1.
(
    cd "$WORK"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout ca.key -out ca.crt -subj "/CN=bench CA" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
        -out server.crt -extfile server.ext 2>/dev/null
)
TLS_ARGS=(--tls-cert-file "$WORK/server.crt" --tls-key-file "$WORK/server.key"
    --tls-ca-cert-file "$WORK/ca.crt" --tls-auth-clients no)

# Each side: its plain port and its TLS port.
declare -A PLAIN TLS
SIDES="redis tally tally1"
for side in $SIDES; do PLAIN[$side]=$(free_port); TLS[$side]=$(free_port); done
redis-server --port "${PLAIN[redis]}" --tls-port "${TLS[redis]}" "${TLS_ARGS[@]}" --save "" \
    --appendonly no --daemonize no >/dev/null 2>&1 &
PIDS+=($!)
"$TALLY_BIN" --port "${PLAIN[tally]}" --tls-port "${TLS[tally]}" "${TLS_ARGS[@]}" --save "" \
    >/dev/null 2>&1 &
PIDS+=($!)
"$TALLY_BIN" --port "${PLAIN[tally1]}" --tls-port "${TLS[tally1]}" "${TLS_ARGS[@]}" --save "" \
    --io-threads 1 >/dev/null 2>&1 &
PIDS+=($!)
SRC=lua/scripts/sliding_window.lua
declare -A SHA
for side in $SIDES; do
    wait_up "${PLAIN[$side]}"
    SHA[$side]=$(redis-cli -p "${PLAIN[$side]}" SCRIPT LOAD "$(cat $SRC)")
done

rps() { # port tls(0/1) pipeline test...
    local port=$1 tls=$2 pipeline=$3; shift 3
    local flags=()
    if [ "$tls" = 1 ]; then flags=(--tls --cacert "$WORK/ca.crt"); fi
    redis-benchmark -p "$port" "${flags[@]}" -c 50 -r 100000 -n "$REQUESTS" -P "$pipeline" --csv "$@" 2>/dev/null |
        tail -n +2 | cut -d, -f2 | tr -d '"' | tr '\n' ' '
}

declare -A OUT
for round in $(seq "$ROUNDS"); do
    for pipeline in $PIPELINES; do
        for side in $SIDES; do
            port=${TLS[$side]}; plain=${PLAIN[$side]}; sha=${SHA[$side]}
            read -r set get incr <<<"$(rps "$port" 1 "$pipeline" -t set,get,incr)"
            evalsha=$(rps "$port" 1 "$pipeline" EVALSHA "$sha" 2 'rl:u:__rand_int__:c' 'rl:u:__rand_int__:p' 1000 60 1720000030 1)
            read -r pset pget pincr <<<"$(rps "$plain" 0 "$pipeline" -t set,get,incr)"
            OUT[$side,$pipeline,SET]+="$set "; OUT[$side,$pipeline,GET]+="$get "; OUT[$side,$pipeline,INCR]+="$incr "
            OUT[$side,$pipeline,EVALSHA]+="$evalsha "
            OUT[$side,$pipeline,plainINCR]+="$pincr "
        done
    done
done

echo "| test | P | Redis TLS req/s | tally TLS, 1 thread | tally/Redis: paired median (range), tally ahead | tally TLS, default threads | tally/Redis: paired median (range), tally ahead | plain INCR: Redis, tally 1 thread, tally default |"
echo "|---|---|---|---|---|---|---|---|"
for pipeline in $PIPELINES; do
    for test in SET GET INCR EVALSHA; do
        python3 - "$test" "$pipeline" "${OUT[redis,$pipeline,$test]}" "${OUT[tally1,$pipeline,$test]}" \
            "${OUT[tally,$pipeline,$test]}" "${OUT[redis,$pipeline,plainINCR]}" \
            "${OUT[tally1,$pipeline,plainINCR]}" "${OUT[tally,$pipeline,plainINCR]}" <<'EOF'
import statistics, sys
test, pipeline = sys.argv[1:3]
redis, one, default, *plain = ([float(x) for x in a.split()] for a in sys.argv[3:9])
median = statistics.median

def against_redis(tally):
    ratios = [t / r for r, t in zip(redis, tally)]
    ahead = sum(x > 1 for x in ratios)
    return (f"{median(tally):,.0f} | {median(ratios):.2f}x "
            f"({min(ratios):.2f}-{max(ratios):.2f}), {ahead} of {len(ratios)}")

print(f"| {test} | {pipeline} | {median(redis):,.0f} | {against_redis(one)} | "
      f"{against_redis(default)} | " + ", ".join(f"{median(p):,.0f}" for p in plain) + " |")
EOF
    done
done
