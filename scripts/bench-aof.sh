#!/usr/bin/env bash
# INCR throughput with the append-only log on, for each fsync policy, tallyd beside
# redis-server with the same policy: tallyd-bench's RESP dialect (INCR/DECR pairs, every
# op a write), 64 connections, 16 pipelined each, alternating rounds. Each server runs on
# one core, the generator on the other; logs live in a temporary directory on the same
# disk. Writes $BENCH_OUT/aof.{md,json} ($BENCH_OUT: bench/out, which git ignores; make
# bench-publish copies them to bench/results) and prints the table.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${BENCH_DURATION:-5s}
rounds=${BENCH_ROUNDS:-2}
conns=${BENCH_CONNS:-64}
pipeline=${BENCH_PIPELINE:-16}
server_cpu=${BENCH_SERVER_CPU:-0}
client_cpu=${BENCH_CLIENT_CPU:-1}
bench=bin/tallyd-bench
out=${BENCH_OUT:-bench/out}
tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/tallyd-bench-aof.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

command -v redis-server >/dev/null || {
	[ "$(id -u)" -eq 0 ] || { echo "bench-aof: redis-server is missing (apt-get install redis-server)" >&2; exit 1; }
	(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >&2
}
server_pin=() client_pin=()
if command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then
	server_pin=(taskset -c "$server_cpu") client_pin=(taskset -c "$client_cpu")
fi
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() { local p=$1; while listening "$p"; do p=$((p + 1)); done; echo "$p"; }
wait_port() {
	for _ in $(seq 100); do listening "$1" && return 0; sleep 0.1; done
	echo "bench-aof: nothing listens on $1" >&2; exit 1
}

mkdir -p "$out"
json="[" md="| appendfsync | tallyd INCR/DECR per s | Redis INCR/DECR per s | tallyd / Redis | tallyd p99 | Redis p99 |\n|---|---:|---:|---:|---:|---:|\n"
for policy in always everysec no; do
	tport=$(free_port 26000) rport=$(free_port 26500)
	mkdir -p "$tmp/$policy/tallyd" "$tmp/$policy/redis"
	"${server_pin[@]}" ./bin/tallyd --counter-port 0 --pool-port 0 --slock-port "$tport" \
		--data-dir "$tmp/$policy/tallyd" --appendfsync "$policy" >"$tmp/$policy/tallyd.log" 2>&1 &
	pids+=($!)
	"${server_pin[@]}" redis-server --port "$rport" --bind 127.0.0.1 --protected-mode no --save '' \
		--appendonly yes --appendfsync "$policy" --dir "$tmp/$policy/redis" >"$tmp/$policy/redis.log" 2>&1 &
	pids+=($!)
	wait_port "$tport"; wait_port "$rport"
	echo "bench-aof: appendfsync $policy: tallyd :$tport, redis :$rport" >&2
	out=$("${client_pin[@]}" "$bench" --proto resp --addr "127.0.0.1:$tport" --compare "127.0.0.1:$rport" \
		--conns "$conns" --pipeline "$pipeline" --duration "$duration" --rounds "$rounds" --label "$policy" --json)
	json+="{\"appendfsync\":\"$policy\",\"result\":$out},"
	md+=$(jq -r --arg p "$policy" '"| \($p) | \(.a.requests_per_sec|floor) | \(.b.requests_per_sec|floor) | \((.a.requests_per_sec/.b.requests_per_sec*100|floor)/100)x | \(.a.latency.p99_us) µs | \(.b.latency.p99_us) µs |"' <<<"$out")"\n"
	kill "${pids[-1]}" "${pids[-2]}"; wait "${pids[-1]}" "${pids[-2]}" 2>/dev/null || true
	pids=("${pids[@]:0:${#pids[@]}-2}")
done
json="${json%,}]"
echo "$json" | jq . >"$out/aof.json"
{
	echo "# INCR with the append-only log: tallyd vs Redis, same fsync policy"
	echo
	echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(redis-server --version | cut -d' ' -f1-3); $conns connections x $pipeline pipelined INCR/DECR, $rounds alternating rounds of $duration; servers on CPU $server_cpu, generator on CPU $client_cpu; logs in $(df -P "$tmp" | awk 'NR==2{print $1" ("$6")"}')."
	echo
	printf "%b" "$md"
} >"$out/aof.md"
cat "$out/aof.md"
