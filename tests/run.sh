#!/usr/bin/env bash
# Runs every test of the workspace on this machine, first installing what
# the tests need that is missing: redis-server and redis-tools (the
# differential tests compare replies with a real Redis; redis-cli,
# redis-benchmark, redis-check-rdb), redis-sentinel (the failover of a
# tally master), prometheus-redis-exporter, tmux
# (redis-cli's hints), openssl (TLS certificates), curl, redis-py, Python's
# limits and the Node clients in tests/clients. Nothing is skipped: a test whose tool is
# missing fails (TALLY_SKIP_MISSING_TOOLS=1 skips them instead, loudly).
#
#   tests/run.sh                  everything
#   tests/run.sh -p tally-server  extra arguments go to `cargo test`
set -euo pipefail
cd "$(dirname "$0")/.."

# Installing needs root; a developer's machine may offer sudo.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

export DEBIAN_FRONTEND=noninteractive
missing=()
for tool in redis-server redis-cli redis-benchmark redis-check-rdb redis-sentinel \
    prometheus-redis-exporter curl tmux openssl; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "tests/run.sh: installing what provides: ${missing[*]}"
    as_root apt-get update
    as_root apt-get install -y redis-server redis-tools redis-sentinel prometheus-redis-exporter \
        curl tmux openssl
fi
# redis-py: the TLS and cluster client tests drive tally with it (pip
# where python3 is one's own, Debian's package where it is the system's).
if ! python3 -c 'import redis' >/dev/null 2>&1; then
    python3 -m pip install --quiet redis 2>/dev/null \
        || { as_root apt-get update && as_root apt-get install -y python3 python3-redis; }
fi
# Python's `limits` at the version whose script tally recognises
# (tests/tests/limiter_libraries.rs); Debian packages an older one.
if ! python3 -c 'import limits, sys; sys.exit(limits.__version__ != "5.8.0")' >/dev/null 2>&1; then
    python3 -m pip install --quiet limits==5.8.0 2>/dev/null \
        || python3 -m pip install --quiet --break-system-packages limits==5.8.0
fi
# ioredis and redis-py's cluster client (tests/tests/cluster_clients.rs),
# rate-limiter-flexible and rate-limit-redis (tests/tests/limiter_libraries.rs).
if ! command -v npm >/dev/null 2>&1; then
    as_root apt-get update
    as_root apt-get install -y nodejs npm
fi
if [ ! -d tests/clients/node_modules ] || [ tests/clients/package-lock.json -nt tests/clients/node_modules ]; then
    npm ci --prefix tests/clients --no-audit --no-fund
fi
# The Debian package may start a redis-server of its own on 6379; the
# tests start their own on free ports and need nothing else listening.
redis-server --version

# --all-features: tally-client's tower layer and HTTP tests, and the fuzz
# targets' corpus replay (server/tests/fuzz_corpus.rs).
log="$(mktemp)"
status=0
cargo test --workspace --all-features "$@" 2>&1 | tee "$log" || status=$?
skipped=$(grep -c '^SKIPPED:' "$log" || true)
if [ "$skipped" -gt 0 ]; then
    echo
    echo "tests/run.sh: $skipped test(s) SKIPPED for missing tools:"
    grep '^SKIPPED:' "$log" | sort | uniq -c
fi
rm -f "$log"
exit "$status"
