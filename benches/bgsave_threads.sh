#!/usr/bin/env bash
# Where tally's CPU goes while BGSAVEs run back to back: per-thread CPU
# ticks from /proc/<pid>/task over the INCR load of benches/persistence.sh
# (1,000,000 counters + 200,000 small collections loaded first, then
# 2,000,000 INCRs, -P 16 -c 50, over 1,000,000 random keys), once without
# saving and once with BGSAVEs back to back. The writer's ticks are the
# process's less its live threads' (each save's thread has exited by the
# end of the load).
#
# Usage: benches/bgsave_threads.sh [counters]   (default 1000000)
#        TALLY_BIN=<path> benches/bgsave_threads.sh   (another build)
set -euo pipefail
cd "$(dirname "$0")/.."

COUNTERS=${1:-1000000}
. benches/lib.sh
tally_binary

port=$(free_port)
"$TALLY_BIN" --port "$port" --save "" --dir "$WORK" --dbfilename dump.rdb >/dev/null 2>&1 &
pid=$!
PIDS+=("$pid")
wait_up "$port"
limiter_dataset "$COUNTERS" collections | redis-cli -p "$port" --pipe >/dev/null

# "name ticks" per thread name, and "process ticks", sorted for join.
threads() {
    echo "process $(cpu_ticks "$pid")"
    for task in /proc/"$pid"/task/*; do
        echo "$(tr ' ' _ <"$task/comm") $(awk '{print $14 + $15}' "$task/stat")"
    done | awk '{t[$1] += $2} END {for (k in t) print k, t[k]}'
}
delta() { # before after -> "name ticks" over the load
    LC_ALL=C join -a2 <(LC_ALL=C sort "$1") <(LC_ALL=C sort "$2") |
        awk '{ if (NF == 3) print $1, $3 - $2; else print $1, $2 }'
}
bench() {
    redis-benchmark -p "$port" -t incr -n 2000000 -r 1000000 -P 16 -c 50 --csv 2>/dev/null |
        tail -1 | cut -d, -f2 | tr -d '"'
}
info_field() { redis-cli -p "$port" info persistence | tr -d '\r' | sed -n "s/^$1://p"; }

bench >/dev/null # the INCR keys exist from here on, as in both loads below
threads >"$WORK/t0"; base=$(bench); threads >"$WORK/t1"
delta "$WORK/t0" "$WORK/t1" >"$WORK/base"
saves_before=$(redis-cli -p "$port" info persistence | tr -d '\r' | sed -n 's/^rdb_saves://p')
( while [ ! -f "$WORK/stop" ]; do
      redis-cli -p "$port" bgsave >/dev/null 2>&1 || true
      while [ "$(info_field rdb_bgsave_in_progress)" = 1 ]; do sleep 0.05; done
  done ) & saver=$!
threads >"$WORK/t0"; saving=$(bench); threads >"$WORK/t1"
touch "$WORK/stop"; wait "$saver"
delta "$WORK/t0" "$WORK/t1" >"$WORK/saving"
saves=$(( $(redis-cli -p "$port" info persistence | tr -d '\r' | sed -n 's/^rdb_saves://p') - saves_before ))

python3 - "$base" "$saving" "$WORK/base" "$WORK/saving" "$saves" <<'PY'
import sys
base_rps, saving_rps = float(sys.argv[1]), float(sys.argv[2])
def load(path):
    return {k: int(v) for k, v in (line.split() for line in open(path))}
base, saving = load(sys.argv[3]), load(sys.argv[4])
def workers(t): return sum(v for k, v in t.items() if k.startswith("tally-io"))
def writer(t): return t["process"] - sum(v for k, v in t.items() if k != "process" and k != "tally-bgsave")
print("| | without saves | during BGSAVEs |")
print("|---|---|---|")
print(f"| INCR -P 16 (req/s) | {base_rps:,.0f} | {saving_rps:,.0f} ({saving_rps / base_rps:.2f}x) |")
print(f"| workers' ticks | {workers(base)} | {workers(saving)} |")
print(f"| writer's ticks | 0 | {writer(saving)} |")
print(f"| tally's ticks | {base['process']} | {saving['process']} |")
print(f"| saves finished during the load | | {sys.argv[5]} |")
PY
