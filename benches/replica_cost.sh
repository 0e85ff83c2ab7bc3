#!/usr/bin/env bash
# What one replica costs its master, tally against Redis 7.0 (Debian's
# redis-server) in one run, each replicating to its own kind: SET, INCR and
# the seed's sliding window through EVALSHA (tally runs it natively) at
# -P 16 with 50 clients on random keys, against a master with no replica
# (it never had one) and against a master with one, in alternating rounds.
# Reported per command: the medians of the master's requests per second and
# of its CPU per 100,000 requests (utime+stime ticks from /proc over the
# same load), with and without the replica; a replica's cost is the ratio
# of the two CPU figures, and the last column compares tally's cost with
# Redis's (ratio of ratios: at most 1 means a replica costs tally no more
# than it costs Redis).
#
# Usage: [ROUNDS=5] [REQUESTS=300000] benches/replica_cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

ROUNDS=${ROUNDS:-5}
REQUESTS=${REQUESTS:-300000}
cargo build --release -p tally-server >/dev/null 2>&1

start() { # KIND PORT [MASTER_PORT]: a fresh server, no persistence (its pid in STARTED)
    local kind=$1 port=$2 master=${3:-} dir="$WORK/$2"
    rm -rf "$dir" && mkdir -p "$dir"
    local follow=()
    [ -n "$master" ] && follow=(--replicaof 127.0.0.1 "$master")
    case $kind in
        redis) redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
                   --repl-diskless-sync-delay 0 --dir "$dir" "${follow[@]}" >/dev/null 2>&1 & ;;
        tally) target/release/tally-server --port "$port" --bind 127.0.0.1 --save "" \
                   --dir "$dir" "${follow[@]}" >/dev/null 2>&1 & ;;
    esac
    STARTED=$!
    PIDS+=("$STARTED")
    wait_up "$port"
}

link_up() { # PORT
    until redis-cli -p "$1" info replication | grep -q 'master_link_status:up'; do sleep 0.05; done
}

SEED=$(cat lua/scripts/sliding_window.lua)
K='rl:u:__rand_int__'

load() { # PORT TEST: the load; prints requests per second
    local port=$1 test=$2 args
    case $test in
        set) args=(-t set) ;;
        incr) args=(-t incr) ;;
        evalsha)
            local sha
            sha=$(redis-cli -p "$port" SCRIPT LOAD "$SEED")
            args=(EVALSHA "$sha" 2 "$K:c" "$K:p" 1000 60 1720000030 1) ;;
    esac
    rps "$port" "$REQUESTS" "${args[@]}"
}

one_run() { # KIND TEST REPLICA(yes|no): sets RUN_RPS and RUN_TICKS (per 100k)
    local kind=$1 test=$2 replica=$3 master_port replica_port master
    master_port=$(free_port)
    start "$kind" "$master_port"
    master=$STARTED
    if [ "$replica" = yes ]; then
        replica_port=$(free_port)
        start "$kind" "$replica_port" "$master_port"
        link_up "$replica_port"
    fi
    local before after
    before=$(cpu_ticks "$master")
    RUN_RPS=$(load "$master_port" "$test")
    after=$(cpu_ticks "$master")
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    PIDS=()
    RUN_TICKS=$(python3 -c "import sys; print((int(sys.argv[2]) - int(sys.argv[1])) * 100000 / int(sys.argv[3]))" \
        "$before" "$after" "$REQUESTS")
}

declare -A RPS TICKS
for round in $(seq "$ROUNDS"); do
    for test in set incr evalsha; do
        for kind in redis tally; do
            for replica in no yes; do
                one_run "$kind" "$test" "$replica"
                rps=$RUN_RPS ticks=$RUN_TICKS
                RPS[$kind.$test.$replica]+="$rps "
                TICKS[$kind.$test.$replica]+="$ticks "
                echo "round $round $kind $test replica=$replica rps=$rps ticks_per_100k=$ticks" >&2
            done
        done
    done
done

echo "| command | server | req/s, no replica | req/s, one replica | CPU ticks per 100k, no replica | CPU ticks per 100k, one replica | replica's CPU cost | tally's cost / Redis's |"
echo "|---|---|---|---|---|---|---|---|"
for test in set incr evalsha; do
    declare -A COST=()
    for kind in redis tally; do
        # shellcheck disable=SC2086 # the lists are meant to split
        {
            r0=$(median ${RPS[$kind.$test.no]}); r1=$(median ${RPS[$kind.$test.yes]})
            t0=$(median ${TICKS[$kind.$test.no]}); t1=$(median ${TICKS[$kind.$test.yes]})
        }
        COST[$kind]=$(python3 -c "import sys; print(float(sys.argv[2]) / float(sys.argv[1]))" "$t0" "$t1")
        vs=""
        if [ "$kind" = tally ]; then
            vs=$(python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}x')" "${COST[tally]}" "${COST[redis]}")
        fi
        python3 -c "import sys; a=sys.argv; print(f'| {a[1]} | {a[2]} | {float(a[3]):,.0f} | {float(a[4]):,.0f} | {float(a[5]):.1f} | {float(a[6]):.1f} | {float(a[7]):.2f}x | {a[8]} |')" \
            "$test" "$kind" "$r0" "$r1" "$t0" "$t1" "${COST[$kind]}" "$vs"
    done
done
