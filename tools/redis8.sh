#!/usr/bin/env bash
# A Redis 8 server to compare tally with, on a Debian 12 box: Debian sid's
# redis-server package (8.0.x), run with sid's own C library through sid's
# loader, so nothing on the system changes. Commands newer than 7.0
# (HGETDEL, the hash field expiry family, HGETEX, HSETEX) are checked
# reply for reply against it.
#
# Usage: tools/redis8.sh [dir]      (default /tmp/redis8)
# Prints the path of a `redis8-server` wrapper that takes redis-server's
# arguments. Needs curl, xz and dpkg-deb, and deb.debian.org.
# REDIS_SUITE=experimental takes Redis from Debian experimental instead
# (8.6.x, with Redis 8.4's SET IFEQ, DELEX, DIGEST and MSETEX), its
# libraries still from sid: tools/redis8.sh /tmp/redis86.
set -euo pipefail
DIR=$(realpath -m "${1:-/tmp/redis8}")
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
WRAPPER="$DIR/redis8-server"
if [ -x "$WRAPPER" ]; then echo "$WRAPPER"; exit 0; fi
mkdir -p "$DIR/debs" "$DIR/root"
SUITE=${REDIS_SUITE:-sid}
curl -fsS -o "$DIR/Packages.xz" "$MIRROR/dists/sid/main/binary-amd64/Packages.xz"
curl -fsS -o "$DIR/Redis-Packages.xz" "$MIRROR/dists/$SUITE/main/binary-amd64/Packages.xz"
# redis-server and redis-tools (which holds the binary) from the suite,
# what they link from sid.
pick() {
    awk -v want="$1" '
        BEGIN { n = split(want, a); for (i = 1; i <= n; i++) w[a[i]] = 1 }
        /^Package: / { p = $2 }
        /^Filename: / { if ((p in w) && !(p in seen)) { print $2; seen[p] = 1 } }'
}
{
    xz -dc "$DIR/Redis-Packages.xz" | pick "redis-server redis-tools"
    xz -dc "$DIR/Packages.xz" | pick "libc6 libjemalloc2 liblzf1 libssl3t64 libstdc++6 libsystemd0
        libgcc-s1 libatomic1 libcap2 libgcrypt20 liblz4-1 liblzma5 libzstd1 libgpg-error0"
} |
while read -r file; do
    curl -fsS -o "$DIR/debs/$(basename "$file")" "$MIRROR/$file"
done
for deb in "$DIR"/debs/*.deb; do dpkg-deb -x "$deb" "$DIR/root"; done
LIBS="$DIR/root/usr/lib/x86_64-linux-gnu:$DIR/root/lib/x86_64-linux-gnu"
cat > "$WRAPPER" <<WRAP
#!/bin/sh
exec "$DIR/root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --library-path "$LIBS" \\
    --argv0 redis-server "$DIR/root/usr/bin/redis-check-rdb" "\$@"
WRAP
chmod +x "$WRAPPER"
"$WRAPPER" --version >&2
echo "$WRAPPER"
