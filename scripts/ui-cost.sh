#!/usr/bin/env bash
# What an open status page costs: the same tallyd binary twice in one make-bench run
# (scripts/bench.sh, BENCH_BASELINE), "tallyd" with its metrics listener polled as an open
# /ui page polls it (the page once, then /ui/live every second, as its script does) and
# "before" with no page, both pinned to one core, the suite alternating between them.
# Issue 35's goal: the page costs under 1% of the throughput.
#   scripts/ui-cost.sh            BENCH_CASES, BENCH_DURATION (5s), BENCH_ROUNDS (3) as bench.sh
# Writes $BENCH_OUT/latest.md (a temporary directory it prints; never the committed results).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x bin/tallyd && -x bin/tallyd-bench ]] || { echo "ui-cost: make build bench-build first" >&2; exit 1; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
mport=21715
while listening $mport; do mport=$((mport + 1)); done
out=${BENCH_OUT:-$(mktemp -d /tmp/tallyd-ui-cost.XXXXXX)}
poll() {
	until curl -fsS -o /dev/null "http://127.0.0.1:$mport/ui" 2>/dev/null; do sleep 0.2; done
	n=0
	while sleep 1; do
		curl -fsS -o /dev/null "http://127.0.0.1:$mport/ui/live" 2>/dev/null && n=$((n + 1))
		echo "$n" >"$out/polls"
	done
}
poll &
poller=$!
trap 'kill $poller 2>/dev/null || true' EXIT
BENCH_OUT=$out TALLYD_FLAGS="--metrics-addr 127.0.0.1:$mport" BENCH_BASELINE=bin/tallyd BENCH_BASE_REV="the same build, no page open" \
	BENCH_ROUNDS=${BENCH_ROUNDS:-3} BENCH_SOAK=${BENCH_SOAK:-0} ./scripts/bench.sh
echo "ui-cost: $out/latest.md: 'tallyd' had the page open ($(cat "$out/polls" 2>/dev/null || echo 0) polls of /ui/live), 'before' had none" >&2
