#!/usr/bin/env bash
# What a SNAPSHOT (tallyctl snapshot save) of a large store costs the other clients (issue 30,
# item 7). For each size in SNAP_KEYS (1000000 5000000): a fresh tallyd on a data directory
# of its own, the keys filled with pipelined MSETs, then `tallyd-bench snapshot`: a writer
# (16 SETs a round) and a reader (GET after GET) on connections of their own, the reader's
# latency before and during a SNAPSHOT, and the server's long loop turns over the save (INFO
# latency); then the encoding's longest step from the server's log ("snapshot taken for a
# backup ... longest_step_ms"). Run it on a quiet machine: the goal is another client's p99
# at most 10 ms during the save.
#
#   make build bench-build && scripts/snapshot-latency.sh
#   SNAP_KEYS=200000 scripts/snapshot-latency.sh          # a quick check
#
# Knobs: SNAP_KEYS (space-separated sizes), SNAP_VALUE (bytes a value; 8), SNAP_PORT (a free
# port; 56580), TALLYD (bin/tallyd), BENCH (bin/tallyd-bench), SNAP_OUT (where the logs stay;
# a temporary directory, removed unless given). The server is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

sizes=${SNAP_KEYS:-1000000 5000000}
value=${SNAP_VALUE:-8}
port=${SNAP_PORT:-56580}
tallyd=${TALLYD:-bin/tallyd}
bench=${BENCH:-bin/tallyd-bench}
keep=${SNAP_OUT:-}
out=${SNAP_OUT:-$(mktemp -d)}
mkdir -p "$out"
pid=

say() { echo "snapshot-latency: $*" >&2; }
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	[ -n "$keep" ] || rm -rf "$out"
}
trap cleanup EXIT

for f in "$tallyd" "$bench"; do
	[ -x "$f" ] || { say "$f not built: make build bench-build"; exit 2; }
done

for n in $sizes; do
	dir=$out/data-$n
	rm -rf "$dir"
	mkdir -p "$dir"
	# No log rewrite during the run (its slices are not what this measures), the default
	# --max-memory (none) and --conn-slice.
	"$tallyd" --counter-port 0 --slock-port "$port" --bind 127.0.0.1 --data-dir "$dir" \
		--aof-rewrite-size 1099511627776 >"$out/tallyd-$n.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
		sleep 0.1
	done
	say "$n keys: tallyd pid $pid on 127.0.0.1:$port, load $(cut -d' ' -f1-3 /proc/loadavg)"
	"$bench" snapshot --addr "127.0.0.1:$port" --keys "$n" --value "$value"
	echo "server: $(grep 'snapshot taken for a backup' "$out/tallyd-$n.log" |
		grep -o '\(bytes\|keys\|took_ms\|longest_step_ms\)=[^ ]*' | tr '\n' ' ')"
	echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
	rm -rf "$dir"
done
