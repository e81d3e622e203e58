#!/usr/bin/env bash
# Runs every Fuzz* target in the given packages for $FUZZTIME each (default 10s).
set -euo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
[ $# -gt 0 ] || set -- ./proto/...
n=0
for pkg in $("$GO" list "$@"); do
	for target in $("$GO" test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "fuzz: $pkg $target ($FUZZTIME)"
		"$GO" test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"
		n=$((n + 1))
	done
done
echo "fuzz: $n targets passed"
