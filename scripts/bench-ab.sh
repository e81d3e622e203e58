#!/usr/bin/env bash
# Compares two tallyd binaries in one run: both serve the counter protocol, PoolCounter and
# slock on free ports (pinned to one core, the generator to the other), and tallyd-bench's
# suite runs the chosen cases against each, alternating, BENCH_ROUNDS times.
#   scripts/bench-ab.sh OLD_BINARY NEW_BINARY
# Knobs: BENCH_CASES (regexp; default: the counter and slock pairs 64x16 and 16x1 cases),
# BENCH_DURATION (3s), BENCH_ROUNDS (3). Writes bench-ab.md and .json under a temporary
# directory it prints, never the committed results. Everything runs on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -eq 2 ]] || { echo "usage: $0 OLD_BINARY NEW_BINARY" >&2; exit 2; }
old=$1 new=$2
cases=${BENCH_CASES:-'^(pairs 64x16|slock pairs 64x16|slock pairs 16x1|pool pairs 64x16|slock-text pairs 64x16)$'}
out=$(mktemp -d /tmp/tallyd-bench-ab.XXXXXX)
[[ -x bin/tallyd-bench ]] || go build -o bin/tallyd-bench ./bench

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
pin_s=() pin_c=()
if command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then pin_s=(taskset -c 0) pin_c=(taskset -c 1); fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
args=(--duration "${BENCH_DURATION:-3s}" --rounds "${BENCH_ROUNDS:-3}" --soak 0 --cases "$cases")
base=22000
for name in old new; do
	bin=${!name}
	c=$base p=$((base + 1)) s=$((base + 2))
	base=$((base + 10))
	mkdir -p "$out/$name"
	"${pin_s[@]}" "$bin" --counter-port $c --pool-port $p --slock-port $s -l 127.0.0.1 --log-level warn \
		--data-dir "$out/$name/data" >"$out/$name/tallyd.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do listening $s && break; sleep 0.1; done
	args+=(--target "$name=counter@127.0.0.1:$c" --pid "$name=$!" --endpoint "$name=pool@127.0.0.1:$p"
		--endpoint "$name=slock@127.0.0.1:$s" --endpoint "$name=slock-text@127.0.0.1:$s")
done
"${pin_c[@]}" bin/tallyd-bench suite "${args[@]}" --name bench-ab --out "$out" \
	--note "A/B: old=$old new=$new, same run, alternating"
echo "bench-ab: $out/bench-ab.md" >&2
