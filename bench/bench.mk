# Load generator targets, included by the top-level Makefile.
#   make bench-build     bin/tallyd-bench
#   make bench           fresh bin/tallyd (counter, PoolCounter and slock on free ports)
#                        on one core, the standard suite on the other:
#                        bench/results/latest.{md,json,png} and BENCHMARKS.md
#   make bench-compare   the same beside redis-server (and yrmcds), installed with
#                        apt-get when missing: bench/results/compare.{md,json,png}
# Knobs: BENCH_DURATION (5s per run), BENCH_ROUNDS (1; compare: 2), BENCH_SOAK (60s,
# 0 skips), BENCH_QUICK=1 (fewer connection counts), BENCH_CASES (regexp),
# BENCH_SERVER_CPU (0), BENCH_CLIENT_CPU (1).
GO ?= go

.PHONY: bench-build bench bench-compare

bench-build:
	$(GO) build -o bin/tallyd-bench ./bench

bench: build bench-build
	./scripts/bench.sh

bench-compare: build bench-build
	./scripts/bench.sh --compare

# INCR with the append-only log on, per fsync policy, beside redis-server with the same
# policy: bench/results/aof.{md,json}.
.PHONY: bench-aof
bench-aof: build bench-build
	./scripts/bench-aof.sh
