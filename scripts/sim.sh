#!/usr/bin/env bash
# make sim: the explorer's seeds (loop/explore_test.go, docs/testing.md "The explorer").
#   scripts/sim.sh SEED=17            one seed, verbose: its history and trace
#   scripts/sim.sh SEEDS=N FIRST=F    N seeds from F, split over JOBS processes (default 2:
#                                     a process runs its seeds one after another, on one
#                                     core; each prints its seeds/s, failures with the command
#                                     that replays them)
# TALLYD_SIM_MUTANT=name plants a mutant in every run.
set -euo pipefail
GO=${GO:-go}
SEED= SEEDS=1000 FIRST=1 JOBS=${JOBS:-2}
for a in "$@"; do
	case $a in
	SEED=*) SEED=${a#SEED=} ;;
	SEEDS=*) SEEDS=${a#SEEDS=} ;;
	FIRST=*) FIRST=${a#FIRST=} ;;
	JOBS=*) JOBS=${a#JOBS=} ;;
	*) echo "sim.sh: unknown argument $a" >&2; exit 2 ;;
	esac
done
cd "$(dirname "$0")/.."
if [ -n "$SEED" ]; then
	exec env TALLYD_SIM_SEED="$SEED" "$GO" test -count=1 -timeout 0 -run 'TestExplore$' -v ./loop/
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
"$GO" test -c -o "$bin/loop.test" ./loop/
per=$(( (SEEDS + JOBS - 1) / JOBS ))
start=$(date +%s.%N)
pids=()
for ((j = 0; j < JOBS; j++)); do
	first=$(( FIRST + j * per ))
	n=$(( SEEDS - j * per < per ? SEEDS - j * per : per ))
	[ "$n" -gt 0 ] || break
	(cd loop && TALLYD_SIM_SEEDS=$n TALLYD_SIM_FIRST=$first "$bin/loop.test" -test.count=1 -test.timeout 0 \
		-test.run 'TestExplore$' -test.v >"$bin/out.$j" 2>&1; echo $? >"$bin/rc.$j") &
	pids+=($!)
done
wait "${pids[@]}"
rc=0
for ((j = 0; j < ${#pids[@]}; j++)); do
	grep -v -E '^(=== RUN|PASS$)' "$bin/out.$j" || true
	[ "$(cat "$bin/rc.$j")" = 0 ] || rc=1
done
end=$(date +%s.%N)
awk -v n="$SEEDS" -v s="$start" -v e="$end" -v j="$JOBS" \
	'BEGIN { printf "sim: %d seeds in %.1f s with %d processes: %.2f seeds/s, %.0f seeds/hour\n", n, e-s, j, n/(e-s), 3600*n/(e-s) }'
exit $rc
