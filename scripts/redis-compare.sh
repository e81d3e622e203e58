#!/usr/bin/env bash
# Issue 32's table: redis-benchmark against tallyd and redis-server in one run, both logging
# (appendfsync everysec), the servers on CPU 0 and the generator on CPU 1, rounds alternating:
# SET, GET, INCR over 100k random keys, SET NX PX, and the EVALSHA release of redis-py's Lock;
# then the RSS of each after 1M SETs of 3-byte values (no log).
#   scripts/redis-compare.sh [TALLYD_BINARY...]     (default bin/tallyd)
# Knobs: ROUNDS (2), N (2000000 requests a test). Prints a table; writes nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
bins=("$@")
[[ ${#bins[@]} -gt 0 ]] || bins=(bin/tallyd)
rounds=${ROUNDS:-2} n=${N:-2000000}
command -v redis-benchmark >/dev/null && command -v redis-server >/dev/null || { echo "redis-compare: redis-server and redis-benchmark are needed (apt-get install redis-server redis-tools)" >&2; exit 1; }
pin_s=() pin_c=()
if command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then pin_s=(taskset -c 0) pin_c=(taskset -c 1); fi
tmp=$(mktemp -d /tmp/redis-compare.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() { for _ in $(seq 100); do listening "$1" && return 0; sleep 0.1; done; echo "redis-compare: nothing on $1" >&2; exit 1; }
release='if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end'
names=() ports=()
start() { # name port log(yes/no) binary
	local name=$1 port=$2 log=$3 bin=$4
	mkdir -p "$tmp/$name-$port"
	if [[ $bin == redis ]]; then
		local aof=no; [[ $log == yes ]] && aof=yes
		"${pin_s[@]}" redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly "$aof" --appendfsync everysec \
			--dir "$tmp/$name-$port" --daemonize no --loglevel warning >"$tmp/$name-$port.log" 2>&1 &
	else
		local dd=(--data-dir "$tmp/$name-$port" --appendonly=false)
		[[ $log == yes ]] && dd=(--data-dir "$tmp/$name-$port" --appendfsync everysec)
		"${pin_s[@]}" "$bin" "${dd[@]}" --bind 127.0.0.1 --slock-port "$port" --counter-port 0 --pool-port 0 \
			--log-level warn >"$tmp/$name-$port.log" 2>&1 &
	fi
	pids+=($!)
	wait_port "$port"
}
port=27100
for i in "${!bins[@]}"; do names+=("tallyd$i:${bins[$i]}"); start "t$i" $port yes "${bins[$i]}"; ports+=($port); port=$((port + 1)); done
names+=("redis"); start redis $port yes redis; ports+=($port); port=$((port + 1))
rps() { tr '\r' '\n' | grep -E 'requests per second' | tail -1 | sed -E 's/.*: ([0-9.]+) requests per second.*/\1/'; }
declare -A res
for r in $(seq "$rounds"); do
	for i in "${!ports[@]}"; do
		p=${ports[$i]}
		sha=$(redis-cli -p "$p" SCRIPT LOAD "$release")
		res[$i,set,$r]=$("${pin_c[@]}" redis-benchmark -p "$p" -c 64 -P 16 -n "$n" -r 100000 -t set -q | rps)
		res[$i,get,$r]=$("${pin_c[@]}" redis-benchmark -p "$p" -c 64 -P 16 -n "$n" -r 100000 -t get -q | rps)
		res[$i,incr,$r]=$("${pin_c[@]}" redis-benchmark -p "$p" -c 64 -P 16 -n "$n" -r 100000 -t incr -q | rps)
		res[$i,nx,$r]=$("${pin_c[@]}" redis-benchmark -p "$p" -c 64 -P 16 -n "$n" -r 100000 -q SET 'lk:__rand_int__' tok NX PX 30000 | rps)
		res[$i,eval,$r]=$("${pin_c[@]}" redis-benchmark -p "$p" -c 64 -P 16 -n "$n" -r 100000 -q EVALSHA "$sha" 1 'lk:__rand_int__' tok | rps)
	done
done
printf '%-40s' "requests/s (rounds: $rounds)"; for t in set get incr nx eval; do printf '%22s' "$t"; done; echo
for i in "${!ports[@]}"; do
	printf '%-40s' "${names[$i]}"
	for t in set get incr nx eval; do
		v=""; for r in $(seq "$rounds"); do v+="${v:+/}$(printf '%.0fk' "$(echo "${res[$i,$t,$r]:-0}/1000" | bc -l)")"; done
		printf '%22s' "$v"
	done
	echo
done
# Memory: 1M SETs of 3-byte values into fresh servers without a log, RSS after.
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=()
echo; echo "RSS after 1M SETs of 3-byte values (no log):"
mports=()
for i in "${!bins[@]}"; do start "m$i" $port no "${bins[$i]}"; mports+=("$port|${pids[-1]}|${names[$i]}"); port=$((port + 1)); done
start mredis $port no redis; mports+=("$port|${pids[-1]}|redis"); port=$((port + 1))
for m in "${mports[@]}"; do
	IFS="|" read -r p pid name <<<"$m"
	before=$(awk '/VmRSS/{print $2}' "/proc/$pid/status")
	"${pin_c[@]}" redis-benchmark -p "$p" -c 64 -P 16 -n 1000000 -r 1000000000 -d 3 -t set -q >/dev/null 2>&1 || true
	keys=$(redis-cli -p "$p" DBSIZE)
	after=$(awk '/VmRSS/{print $2}' "/proc/$pid/status")
	echo "  $name: $keys keys, RSS $((after / 1024)) MB ($(( (after - before) * 1024 / (keys > 0 ? keys : 1) )) B/key over the empty server)"
done
