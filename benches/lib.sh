# Helpers the side-by-side benches share; sourced after `cd` to the repo.
# A scratch folder and the servers started (their pids in PIDS) are
# removed and stopped when the bench exits, however it exits.
WORK=$(mktemp -d)
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
# A port free on loopback now (a server started on it may still lose a race).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
# Waits until the server on port $1 answers PING; gives up after 30 s
# (a server that cannot start, or is not installed, would otherwise leave
# the bench waiting for ever).
wait_up() {
    local tries=0
    until [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ]; do
        tries=$((tries + 1))
        if [ "$tries" -gt 600 ]; then
            echo "no server answers on port $1 after 30 s" >&2
            exit 1
        fi
        sleep 0.05
    done
}
# User + system CPU ticks (1/100 s) of process $1 so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# User and system CPU ticks of process $1 so far, apart ("user system").
user_system_ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }
# The median of the numbers given.
median() { python3 -c "import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }
# Runs redis-benchmark against port $1 for $2 requests (-c 50 -P $PIPELINE,
# 16 unless set; random keys among $KEY_RANGE, 100000 unless set), the rest
# of the arguments being the command; prints requests per second.
rps() {
    local port=$1 requests=$2; shift 2
    redis-benchmark -p "$port" -c 50 -P "${PIPELINE:-16}" -r "${KEY_RANGE:-100000}" -n "$requests" -q "$@" 2>/dev/null |
        tr '\r' '\n' | grep "per second" | tail -1 | sed 's/.*: //;s/ requests per second.*//'
}
# The tally-server to measure: $TALLY_BIN when set (another build, e.g. an
# older commit's, to compare before and after), else this tree's release
# build, built now.
tally_binary() {
    if [ -z "${TALLY_BIN:-}" ]; then
        cargo build --release -p tally-server >/dev/null 2>&1
        TALLY_BIN=target/release/tally-server
    fi
}
# The persistence benches' dataset, as RESP commands on stdout: $1
# rate-limit counters (`SET rl:user:u_<i>:a3f2:1720000000 7 EX 120`) and,
# when $2 is `collections`, $1/10 small hashes and $1/10 small sorted sets.
limiter_dataset() {
    python3 - "$1" "${2:-}" <<'PY'
import sys
n, collections = int(sys.argv[1]), sys.argv[2] == "collections"
out = sys.stdout.buffer
def cmd(*args):
    out.write(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
for i in range(n):
    cmd(b"SET", b"rl:user:u_%d:a3f2:1720000000" % i, b"7", b"EX", b"120")
for i in range(n // 10 if collections else 0):
    cmd(b"HSET", b"rules:%d" % i, b"limit", b"1000", b"window", b"60", b"burst", b"20")
    cmd(b"ZADD", b"sw:%d" % i, b"1720000000001", b"a", b"1720000000002", b"b", b"1720000000003", b"c")
PY
}
