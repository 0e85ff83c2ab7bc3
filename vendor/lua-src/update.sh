#!/usr/bin/env bash
# Builds lua-5.1.5/ (the sources the crate compiles) from upstream/ (Redis
# 7.0.15's deps/lua/src as released, never edited) and the patches listed in
# patches/series, in order.
#
#   ./update.sh          rewrite lua-5.1.5/ from upstream/ + the series
#   ./update.sh --check  build it in a scratch folder and fail if it differs
#                        from the lua-5.1.5/ checked in (a test runs this)
#
# Taking Redis's next Lua fix is: add its patch file (paths relative to the
# Lua source folder, a/ and b/ prefixes), list it in patches/series after the
# other security fixes, run ./update.sh, commit all three. PATCHES.md says
# what each patch is for.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
check=0
case "${1:-}" in
    --check) check=1 ;;
    "") ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cp -R "$here/upstream" "$scratch/lua"

while read -r name; do
    case "$name" in ''|'#'*) continue ;; esac
    # git apply outside any repository behaves as patch(1) but refuses
    # fuzz: a patch that no longer applies exactly is an error, not a guess.
    if ! (cd "$scratch/lua" && env -u GIT_DIR -u GIT_WORK_TREE git apply --whitespace=nowarn -p1 "$here/patches/$name"); then
        echo "update.sh: $name does not apply to upstream/ plus the patches before it" >&2
        exit 1
    fi
done < "$here/patches/series"

if [ "$check" = 1 ]; then
    if ! diff -r "$scratch/lua" "$here/lua-5.1.5"; then
        echo "update.sh: lua-5.1.5/ is not upstream/ + patches/series; run vendor/lua-src/update.sh" >&2
        exit 1
    fi
    echo "update.sh: lua-5.1.5/ is upstream/ + $(grep -cv '^\(#\|$\)' "$here/patches/series") patches"
else
    rm -rf "$here/lua-5.1.5"
    cp -R "$scratch/lua" "$here/lua-5.1.5"
    echo "update.sh: wrote lua-5.1.5/"
fi
