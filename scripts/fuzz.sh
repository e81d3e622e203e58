#!/usr/bin/env bash
# Runs every Fuzz* target in the given packages for $FUZZTIME each (default 10s).
#
# Go's fuzzing coordinator sometimes ends a time-limited run with "context deadline
# exceeded" when a worker is slow to stop on a busy machine, with no failing input. Such a
# run is repeated once; a run that found a failing input always fails.
set -euo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
[ $# -gt 0 ] || set -- ./proto/...
n=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for pkg in $("$GO" list "$@"); do
	for target in $("$GO" test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		for try in 1 2; do
			echo "fuzz: $pkg $target ($FUZZTIME)"
			if "$GO" test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | tee "$log"; then
				break
			fi
			if [ "$try" = 1 ] && grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input' "$log"; then
				echo "fuzz: $target stopped with a coordinator deadline and no failing input; running it again"
				continue
			fi
			exit 1
		done
		n=$((n + 1))
	done
done
echo "fuzz: $n targets passed"
