#!/usr/bin/env bash
# Runs the tallyd-bench standard suite against a fresh bin/tallyd (and, with --compare,
# redis-server, yrmcds and poolcounterd), each server pinned to one core and the load generator to
# another. tallyd serves the counter protocol, PoolCounter and slock, each on a free port:
# the lock protocols' cases run on it alone. Writes $BENCH_OUT/{latest,compare}.{md,json,png}
# ($BENCH_OUT: bench/out, which git ignores); the committed results and BENCHMARKS.md change
# only with `make bench-publish` (tallyd-bench publish), which refuses a partial run.
# Every server it starts is stopped on exit. Everything runs on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

compare=0
[[ "${1:-}" == "--compare" ]] && compare=1

duration=${BENCH_DURATION:-5s}
soak=${BENCH_SOAK:-60s}
rounds=${BENCH_ROUNDS:-$((compare ? 2 : 1))}
server_cpu=${BENCH_SERVER_CPU:-0}
client_cpu=${BENCH_CLIENT_CPU:-1}
bench=bin/tallyd-bench
tallyd=${TALLYD_BIN:-bin/tallyd} # TALLYD_BIN: another build to measure (scripts/bench-ab.sh)
# TALLYD_FLAGS: more flags for it (scripts/ui-cost.sh gives it a metrics listener)
out=${BENCH_OUT:-bench/out}
tmp=$(mktemp -d /tmp/tallyd-bench.XXXXXX)

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

# Pinning: the server on one core, the generator on another, when taskset and two
# cores are there.
server_pin=() client_pin=() pinning="not pinned (no taskset or fewer than 2 cores)"
if command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then
	server_pin=(taskset -c "$server_cpu") client_pin=(taskset -c "$client_cpu")
	pinning="servers pinned to CPU $server_cpu, tallyd-bench to CPU $client_cpu (taskset)"
fi
# Connections: as many open files as the hard limit allows (19,000 need ~20,000).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# free_port N: the first port from N up that nothing listens on.
free_port() {
	local p=$1
	while listening "$p"; do p=$((p + 1)); done
	echo "$p"
}
# wait_port PORT PID NAME: wait until PORT accepts, or fail if PID died.
wait_port() {
	for _ in $(seq 100); do
		listening "$1" && return 0
		kill -0 "$2" 2>/dev/null || { echo "bench: $3 exited at start" >&2; cat "$tmp/$3.log" >&2 || true; exit 1; }
		sleep 0.1
	done
	echo "bench: $3 does not listen on 127.0.0.1:$1" >&2
	exit 1
}

args=(--duration "$duration" --rounds "$rounds" --soak "$soak")
[[ -n "${BENCH_QUICK:-}" ]] && args+=(--quick)
[[ -n "${BENCH_CASES:-}" ]] && args+=(--cases "$BENCH_CASES")

# tallyd, fresh: the counter protocol, PoolCounter and slock, each on a free port, and slock
# over TLS (a self-signed certificate made for the run) for the TLS cases.
port=$(free_port "${TALLYD_PORT:-21215}")
pool_port=$(free_port "${TALLYD_POOL_PORT:-21531}")
slock_port=$(free_port "${TALLYD_SLOCK_PORT:-21658}")
tls_port=$(free_port "${TALLYD_SLOCK_TLS_PORT:-21659}")
[[ $tls_port == "$slock_port" ]] && tls_port=$(free_port $((slock_port + 1)))
"$bench" tls-cert --out "$tmp/tls" --host 127.0.0.1
"${server_pin[@]}" "$tallyd" --counter-port "$port" --pool-port "$pool_port" --slock-port "$slock_port" \
	--slock-tls-port "$tls_port" --tls-cert-file "$tmp/tls/cert.pem" --tls-key-file "$tmp/tls/key.pem" \
	-l 127.0.0.1 --log-level warn --data-dir "$tmp/data" ${TALLYD_FLAGS:-} >"$tmp/tallyd.log" 2>&1 &
pids+=($!)
wait_port "$port" $! tallyd
wait_port "$pool_port" $! tallyd
wait_port "$slock_port" $! tallyd
wait_port "$tls_port" $! tallyd
args+=(--target "tallyd=counter@127.0.0.1:$port" --pid "tallyd=$!")
args+=(--endpoint "tallyd=pool@127.0.0.1:$pool_port" --endpoint "tallyd=slock@127.0.0.1:$slock_port"
	--endpoint "tallyd=slock-text@127.0.0.1:$slock_port"
	--endpoint "tallyd=redis-lock@127.0.0.1:$slock_port" --endpoint "tallyd=redis-lock-lua@127.0.0.1:$slock_port"
	--endpoint "tallyd=slock+tls@127.0.0.1:$tls_port" --endpoint "tallyd=slock-text+tls@127.0.0.1:$tls_port"
	--tls-ca "$tmp/tls/cert.pem")
notes=("Servers: $("$tallyd" --version 2>&1 | head -1 || true)")

# BENCH_BASELINE=FILE: a second tallyd binary (an older build: make bench-before-after builds
# one from BENCH_BASE_REV) served the same way beside it, as "before", so that one run shows
# both and a change's cost is read within that run.
if [[ -n "${BENCH_BASELINE:-}" ]]; then
	[[ -x $BENCH_BASELINE ]] || { echo "bench: BENCH_BASELINE=$BENCH_BASELINE is not an executable" >&2; exit 1; }
	bport=$(free_port $((tls_port + 1)))
	bpool=$(free_port $((bport + 1)))
	bslock=$(free_port $((bpool + 1)))
	"${server_pin[@]}" "$BENCH_BASELINE" --counter-port "$bport" --pool-port "$bpool" --slock-port "$bslock" \
		-l 127.0.0.1 --log-level warn --data-dir "$tmp/data-before" >"$tmp/before.log" 2>&1 &
	pids+=($!)
	wait_port "$bport" $! before
	wait_port "$bpool" $! before
	wait_port "$bslock" $! before
	args+=(--target "before=counter@127.0.0.1:$bport" --pid "before=$!")
	args+=(--endpoint "before=pool@127.0.0.1:$bpool" --endpoint "before=slock@127.0.0.1:$bslock"
		--endpoint "before=slock-text@127.0.0.1:$bslock"
		--endpoint "before=redis-lock@127.0.0.1:$bslock" --endpoint "before=redis-lock-lua@127.0.0.1:$bslock")
	notes+=("before: $("$BENCH_BASELINE" --version 2>&1 | head -1 || true)${BENCH_BASE_REV:+ (built from $BENCH_BASE_REV)}")
fi

if ((compare)); then
	name=compare
	# BENCH_NO_YRMCDS=1: compare with Redis only, and do not install yrmcds.
	if ! command -v redis-server >/dev/null || { [[ -z "${BENCH_NO_YRMCDS:-}" ]] && ! command -v yrmcdsd >/dev/null; }; then
		if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
			echo "bench: installing redis-server and yrmcds with apt-get" >&2
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >&2 ||
				{ echo "bench: could not install redis-server" >&2; exit 1; }
			(DEBIAN_FRONTEND=noninteractive apt-get install -y -qq yrmcds) >&2 ||
				echo "bench: no yrmcds: comparing with Redis only" >&2
		else
			command -v redis-server >/dev/null || { echo "bench: redis-server missing and apt-get unusable (need root)" >&2; exit 1; }
		fi
	fi
	rport=$(free_port "${REDIS_PORT:-26379}")
	"${server_pin[@]}" redis-server --port "$rport" --bind 127.0.0.1 --protected-mode no --save '' \
		--appendonly no --maxclients 19900 --dir "$tmp" --loglevel warning --daemonize no >"$tmp/redis.log" 2>&1 &
	pids+=($!)
	wait_port "$rport" $! redis
	args+=(--target "redis=resp@127.0.0.1:$rport" --pid "redis=$!")
	# The Redis lock rows: redis-server 7.0 has no DELEX, so its releases are all EVALSHA.
	args+=(--endpoint "redis=redis-lock-lua@127.0.0.1:$rport")
	notes+=("$(redis-server --version 2>&1 | cut -d' ' -f1-3 || true), persistence off")
	if command -v yrmcdsd >/dev/null && [[ -z "${BENCH_NO_YRMCDS:-}" ]]; then
		yport=$(free_port "${YRMCDS_PORT:-21315}")
		mport=$(free_port 21411)
		rpport=$(free_port $((mport + 1)))
		cat >"$tmp/yrmcds.conf" <<CONF
virtual_ip = 127.0.0.1
port = $mport
repl_port = $rpport
max_connections = 0
temp_dir = "$tmp"
log.threshold = error
log.file = "$tmp/yrmcds.log"
buckets = 10000
memory_limit = 256M
workers = 2
gc_interval = 10
counter.enable = true
counter.port = $yport
counter.max_connections = 0
counter.buckets = 1000000
counter.stat_interval = 86400
CONF
		"${server_pin[@]}" yrmcdsd -f "$tmp/yrmcds.conf" >"$tmp/yrmcds.out" 2>&1 &
		pids+=($!)
		wait_port "$yport" $! yrmcds
		args+=(--target "yrmcds=counter@127.0.0.1:$yport" --pid "yrmcds=$!")
		notes+=("yrmcds $(dpkg-query -W -f '${Version}' yrmcds 2>/dev/null || echo '?'), counter extension, 2 workers")
	fi
	# poolcounterd (Debian's poolcounter), beside tallyd's PoolCounter port: the PoolCounter
	# stampede runs on both (the other pool cases can put two lines in one read, which poolcounterd
	# does not serve). It has no port flag, but serves a listening
	# socket given as its stdin: python3 binds a free port and hands it over.
	# BENCH_NO_POOLCOUNTER=1: leave it out, and do not install it.
	if [[ -z "${BENCH_NO_POOLCOUNTER:-}" ]]; then
		if pcd=$(scripts/ensure-poolcounter.sh >&2 && { command -v poolcounterd || echo /usr/sbin/poolcounterd; }) && command -v python3 >/dev/null; then
			pcport=$(free_port "${POOLCOUNTER_PORT:-27531}")
			"${server_pin[@]}" python3 -c 'import os, socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(1024)
os.dup2(s.fileno(), 0)
os.execv(sys.argv[2], sys.argv[2:])' "$pcport" "$pcd" >"$tmp/poolcounterd.log" 2>&1 &
			pids+=($!)
			wait_port "$pcport" $! poolcounterd
			args+=(--target "poolcounterd=pool@127.0.0.1:$pcport" --pid "poolcounterd=$!")
			notes+=("poolcounterd $(dpkg-query -W -f '${Version}' poolcounter 2>/dev/null || echo '?') (Debian's poolcounter): the PoolCounter stampede only")
		else
			echo "bench: no poolcounterd (or no python3 to start it): PoolCounter cases on tallyd only" >&2
		fi
	fi
else
	name=latest
fi

# The generator check: a trivial sink on the server core.
sport=$(free_port "${SINK_PORT:-21299}")
"${server_pin[@]}" "$bench" sink --listen "127.0.0.1:$sport" >"$tmp/sink.log" 2>&1 &
pids+=($!)
wait_port "$sport" $! sink
args+=(--sink "127.0.0.1:$sport")

notes+=("Pinning: $pinning.")
for n in "${notes[@]}"; do args+=(--note "$n"); done
"${client_pin[@]}" "$bench" suite "${args[@]}" --name "$name" --out "$out"
echo "bench: wrote $out/$name.md, $name.json and $name.png; make bench-publish copies a whole run to bench/results and BENCHMARKS.md" >&2
