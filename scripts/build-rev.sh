#!/usr/bin/env bash
# build-rev.sh REV OUT: builds tallyd as it was at git revision REV into OUT, from a temporary
# worktree (the checkout itself is left as it is), for a benchmark of before against after.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: build-rev.sh REV OUT} out=${2:?usage: build-rev.sh REV OUT}
commit=$(git rev-parse --verify "$rev^{commit}")
tmp=$(mktemp -d /tmp/tallyd-rev.XXXXXX)
trap 'git worktree remove --force "$tmp" >/dev/null 2>&1 || rm -rf "$tmp"' EXIT
git worktree add --detach "$tmp" "$commit" >/dev/null 2>&1
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
(cd "$tmp" && ${GO:-go} build -o "$out" .)
echo "build-rev: $out is tallyd at $(git log -1 --format='%h %s' "$commit" | cut -c1-80)" >&2
