# Load generator targets, included by the top-level Makefile.
#   make bench-build     bin/tallyd-bench
#   make bench           fresh bin/tallyd (counter, PoolCounter, slock and slock over TLS on free ports)
#                        on one core, the standard suite on the other:
#                        $(BENCH_OUT)/latest.{md,json,png}
#   make bench-compare   the same beside redis-server (and yrmcds, and poolcounterd for the
#                        PoolCounter stampede), installed with
#                        apt-get when missing: $(BENCH_OUT)/compare.{md,json,png}
#   make bench-before-after  make bench with tallyd at BENCH_BASE_REV beside today's, as
#                        "before", in one run (the no-regression check of a change)
#   make bench-publish   copy the whole runs in $(BENCH_OUT) to bench/results and their
#                        tables into BENCHMARKS.md; refuses a partial run
# Runs never touch committed files: they write to BENCH_OUT (bench/out, ignored by git).
#   make bench-cluster   tallyd 3 nodes vs etcd 3.4 vs Redis+WAIT (scripts/bench-cluster.sh):
#                        $(BENCH_OUT)/cluster-<time>/ (ignored by git)
# Knobs: BENCH_DURATION (5s per run), BENCH_ROUNDS (1; compare: 2), BENCH_SOAK (60s,
# 0 skips), BENCH_QUICK=1 (fewer connection counts), BENCH_CASES (regexp),
# BENCH_SERVER_CPU (0), BENCH_CLIENT_CPU (1). BENCH_QUICK, BENCH_CASES, BENCH_SOAK=0 or
# a BENCH_DURATION under 5s makes a partial run, which bench-publish refuses.
GO ?= go
BENCH_OUT ?= bench/out

.PHONY: bench-build bench bench-compare

bench-build:
	$(GO) build -o bin/tallyd-bench ./bench

bench: build bench-build
	BENCH_OUT="$(BENCH_OUT)" ./scripts/bench.sh

bench-compare: build bench-build
	BENCH_OUT="$(BENCH_OUT)" ./scripts/bench.sh --compare

# make bench with tallyd as it was at BENCH_BASE_REV (a git revision) beside today's, as
# "before", in the same run: $(BENCH_OUT)/latest.{md,json,png}.
BENCH_BASE_REV ?= HEAD
.PHONY: bench-before-after
bench-before-after: build bench-build
	GO="$(GO)" ./scripts/build-rev.sh "$(BENCH_BASE_REV)" bin/tallyd-before
	BENCH_OUT="$(BENCH_OUT)" BENCH_BASELINE=bin/tallyd-before BENCH_BASE_REV="$(BENCH_BASE_REV)" ./scripts/bench.sh

.PHONY: bench-publish
bench-publish: bench-build
	./bin/tallyd-bench publish --from "$(BENCH_OUT)" --to bench/results --update BENCHMARKS.md $(BENCH_PUBLISH)

# INCR with the append-only log on, per fsync policy, beside redis-server with the same
# policy: $(BENCH_OUT)/aof.{md,json}.
.PHONY: bench-aof
bench-aof: build bench-build
	BENCH_OUT="$(BENCH_OUT)" ./scripts/bench-aof.sh

# Replicated writes with fsync on: a 3-node tallyd cluster on 127.0.0.1 (INCRs through the
# leader and through a follower, and lock acquire+release pairs through the leader, QUORUM) and one node, beside Debian's etcd 3.4 (3 members,
# etcdctl check perf --load=xl, installed with apt-get when missing) and redis-server with one
# replica and with two (WAIT 1 0 after each pipeline); the wide rows repeat the leader's rows
# and Redis with two replicas at 256 connections. Prints the table; results, a section for
# BENCHMARKS.md and the logs go to $(BENCH_OUT)/cluster-<time>/ (not committed).
# Knobs: BENCH_DURATION (10s), BENCH_CLUSTER_ROWS (tallyd,single,etcd,redis,redis2,wide), and those
# listed in scripts/bench-cluster.sh. Not part of make test.
.PHONY: bench-cluster
bench-cluster: build bench-build
	BENCH_OUT="$(BENCH_OUT)" ./scripts/bench-cluster.sh
