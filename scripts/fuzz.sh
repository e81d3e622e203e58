#!/usr/bin/env bash
# Runs every Fuzz* target in the given packages for $FUZZTIME each (default 10s), and says
# how long each took (its seed corpus, then $FUZZTIME of new inputs). With $TESTLOG set, the
# events are saved to $TESTLOG/fuzz.json for the slowest-tests report.
#
# Go's fuzzing coordinator sometimes ends a time-limited run with "context deadline
# exceeded" when a worker is slow to stop on a busy machine, with no failing input. Such a
# run is repeated once; a run that found a failing input always fails.
set -euo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
TESTLOG=${TESTLOG:-}
[ $# -gt 0 ] || set -- ./proto/...
n=0
start=$SECONDS
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# run fuzzes one target, its output to the terminal and $log (and its events to $TESTLOG).
run() {
	if [ -n "$TESTLOG" ]; then
		"$GO" test -json -run '^$' -fuzz "^$2\$" -fuzztime "$FUZZTIME" "$1" 2>&1 |
			"$TESTLOG/testlog" -save "$TESTLOG/fuzz.json" | tee "$log"
	else
		"$GO" test -run '^$' -fuzz "^$2\$" -fuzztime "$FUZZTIME" "$1" 2>&1 | tee "$log"
	fi
}
if [ -n "$TESTLOG" ]; then
	mkdir -p "$TESTLOG"
	"$GO" build -o "$TESTLOG/testlog.$$" "$(dirname "$0")/testlog.go" && mv -f "$TESTLOG/testlog.$$" "$TESTLOG/testlog"
fi
# The targets are read from the test files (func FuzzX(f *testing.F)), not with go test -list,
# which links each package's test binary once more only to print its names.
pkgs=$("$GO" list -f '{{.ImportPath}}={{.Dir}}' "$@")
for pd in $pkgs; do
	pkg=${pd%%=*} dir=${pd#*=}
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*(f \*testing\.F)' "$dir"/*_test.go 2>/dev/null | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/' | sort -u || true); do
		for try in 1 2; do
			echo "fuzz: $pkg $target ($FUZZTIME)"
			t0=$SECONDS
			if run "$pkg" "$target"; then
				echo "fuzz: $target took $((SECONDS - t0))s"
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
echo "fuzz: $n targets passed in $((SECONDS - start))s"
