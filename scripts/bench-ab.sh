#!/usr/bin/env bash
# Compares two tallyd binaries in one run: scripts/bench.sh serves NEW_BINARY as "tallyd" and
# OLD_BINARY beside it as "before" (BENCH_BASELINE), both pinned to one core, and tallyd-bench's
# suite runs the chosen cases against each, alternating, BENCH_ROUNDS times.
#   scripts/bench-ab.sh OLD_BINARY NEW_BINARY
# Knobs: BENCH_CASES (regexp; default: the counter and slock pairs 64x16 and 16x1 cases),
# BENCH_DURATION (3s), BENCH_ROUNDS (3), BENCH_OUT (a temporary directory it prints; never the
# committed results). `make bench-before-after` runs the whole suite this way against a git
# revision. Everything runs on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -eq 2 ]] || { echo "usage: $0 OLD_BINARY NEW_BINARY" >&2; exit 2; }
[[ -x bin/tallyd-bench ]] || go build -o bin/tallyd-bench ./bench
out=${BENCH_OUT:-$(mktemp -d /tmp/tallyd-bench-ab.XXXXXX)}
BENCH_OUT=$out TALLYD_BIN=$2 BENCH_BASELINE=$1 \
	BENCH_CASES=${BENCH_CASES:-'^(pairs 64x16|slock pairs 64x16|slock pairs 16x1|pool pairs 64x16|slock-text pairs 64x16)$'} \
	BENCH_DURATION=${BENCH_DURATION:-3s} BENCH_ROUNDS=${BENCH_ROUNDS:-3} BENCH_SOAK=${BENCH_SOAK:-0} \
	./scripts/bench.sh
echo "bench-ab: $out/latest.md" >&2
