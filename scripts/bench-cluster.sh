#!/usr/bin/env bash
# make bench-cluster (issue 13): replicated, fsynced writes on this machine, in one run:
#   - tallyd, 3 nodes on 127.0.0.1 (--cluster, --appendfsync always, default consistency
#     QUORUM): INCRs sent through the leader, then slock lock pairs through the leader
#     (`tallyd-bench writes --locks`: rounds of BENCH_PIPELINE "LOCK k TIMEOUT 0 EXPRIED 30
#     LOCK_ID x" + "UNLOCK k LOCK_ID x", a key of its own each; every grant and release is
#     replicated before it is answered), the same with each round's UNLOCKs sent once its
#     LOCKs are answered (--await-grant: a pair's LOCK and UNLOCK then never run in one turn
#     of the leader's loop, where the grant would be netted out before it reaches the raft
#     log), then INCRs through a follower;
#   - tallyd, 1 node, --appendfsync always (nothing replicated: the reference);
#   - Debian's etcd 3.4, 3 members on 127.0.0.1: `etcdctl check perf --load=xl`;
#   - redis-server, a master and one replica (appendonly yes, appendfsync always on both):
#     INCRs on the master, each round followed by WAIT 1 0;
#   - redis-server, a master and two replicas, each round followed by WAIT 1 0: two copies of
#     three, as tallyd's QUORUM (row redis2);
#   - the wide rows (row wide): the tallyd leader's INCRs and lock pairs, and Redis with two
#     replicas, at BENCH_WIDE_CONNS (256) connections; at a fixed concurrency throughput is
#     the writes in flight divided by the latency, so the table shows both.
# tallyd and Redis get the same load from `tallyd-bench writes`: BENCH_CONNS (64)
# connections, each sending rounds of BENCH_PIPELINE (16) pipelined INCRs on keys picked at
# random among BENCH_KEYS (100,000), the next round once every reply (and WAIT's) is in.
# Latency is per round: from writing its INCRs to reading its last reply. etcd's figures
# are check perf's own (writes/s, slowest request, stddev: it prints no percentiles).
#
# Until bin/tallyd knows --cluster the cluster rows are skipped with a message; the others
# run. The etcd row is skipped when etcd cannot be installed (scripts/ensure-etcd.sh, apt-get
# as root). Servers are pinned to BENCH_SERVER_CPU (0), the generators to BENCH_CLIENT_CPU
# (1) with taskset on 2+ cores (BENCH_PIN=0: no pinning). Every process it starts is
# stopped and every temporary directory removed on exit.
#
# Knobs: BENCH_DURATION (10s measured per tallyd/Redis row), BENCH_WARMUP (2s),
# BENCH_CONNS, BENCH_PIPELINE, BENCH_KEYS, BENCH_ETCD_LOAD (xl; check perf runs 60 s),
# BENCH_CONSISTENCY (sent as CONSISTENCY <level> on the cluster's connections; default:
# none, so the server's default QUORUM), TALLYD (the binary; bin/tallyd),
# BENCH_CLUSTER_ROWS (tallyd,single,etcd,redis,redis2,wide: which rows run), BENCH_WIDE_CONNS, BENCH_OUT (results
# directory; default bench/out/cluster-<UTC time> (BENCH_OUT/cluster-<UTC time>), which git ignores).
# Each row's notes give the servers' CPU a write: their user+system time (/proc/PID/stat)
# over the measured window, divided by the writes in it (all servers share one core);
# cluster.json has each server's too (server_cpu_us_per_write_each, tallyd's in node order).
# Output: the table on stdout; BENCH_OUT/cluster.md (a section to paste into
# BENCHMARKS.md), cluster.json, and each row's raw output and server logs.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${BENCH_DURATION:-10s}
warmup=${BENCH_WARMUP:-2s}
conns=${BENCH_CONNS:-64}
pipeline=${BENCH_PIPELINE:-16}
keys=${BENCH_KEYS:-100000}
etcd_load=${BENCH_ETCD_LOAD:-xl}
rows=${BENCH_CLUSTER_ROWS:-tallyd,single,etcd,redis,redis2,wide}
wide=${BENCH_WIDE_CONNS:-256}
server_cpu=${BENCH_SERVER_CPU:-0}
client_cpu=${BENCH_CLIENT_CPU:-1}
out=${BENCH_OUT:-bench/out}/cluster-$(date -u +%Y%m%dT%H%M%SZ)
bench=bin/tallyd-bench
tallyd=${TALLYD:-bin/tallyd}

say() { echo "bench-cluster: $*" >&2; }
die() { say "$*"; exit 1; }
want() { [[ ",$rows," == *",$1,"* ]]; }

for b in "$bench" "$tallyd"; do [[ -x $b ]] || die "$b is missing (make build bench-build)"; done
command -v jq >/dev/null || die "jq is missing (apt-get install jq)"
mkdir -p "$out"
tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/tallyd-bench-cluster.XXXXXX")
load_before=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || true) # the machine may be shared

# Every server started, by pid; stop() ends the ones given (all by default).
pids=()
stop() {
	local p
	(($# > 0)) || set -- "${pids[@]}"
	for p in "$@"; do kill "$p" 2>/dev/null || true; done
	for p in "$@"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	local keep=() q
	for q in "${pids[@]}"; do [[ " $* " == *" $q "* ]] || keep+=("$q"); done
	pids=("${keep[@]}")
}
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	((${#pids[@]} == 0)) || stop
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pin_s=() pin_c=() pinning="not pinned"
if [[ ${BENCH_PIN:-1} != 0 ]] && command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then
	pin_s=(taskset -c "$server_cpu") pin_c=(taskset -c "$client_cpu")
	pinning="every server process on CPU $server_cpu, the load generators (tallyd-bench, etcdctl) on CPU $client_cpu"
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# Ports: free ones from a random base below the ephemeral range (a port there may be the
# local end of any connection by the time a server binds it), never the same twice in a run.
eph=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
next_port=$((20000 + RANDOM % 8000))
((eph > 21000)) && next_port=$((20000 + RANDOM % (eph - 20500)))
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# port VAR sets VAR (a name, or NAME[KEY]) to the next free port.
port() {
	while listening "$next_port"; do next_port=$((next_port + 1)); done
	printf -v "$1" %d "$next_port"
	next_port=$((next_port + 1))
}
wait_port() {
	local i
	for i in $(seq 150); do listening "$1" && return 0; sleep 0.1; done
	return 1
}
# rcli runs redis-cli, bounded in time (a server that never answers must not hang the run).
rcli() { timeout 5 redis-cli "$@"; }
# field NAME reads "NAME:value" from INFO output on stdin.
field() { tr -d '\r' | sed -n "s/^$1://p" | head -1; }

results=() # one JSON object a row
notes=()
add_row() { results+=("$1"); }

# The servers of the row being run (cpu_pids): the CPU they use in the measured window, over
# the writes in it, is the row's server CPU a write (all of them share one core, so it is
# what sets the rate). cpu_ticks prints their user+system clock ticks.
cpu_pids=()
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
# cpu_ticks prints the servers' user+system clock ticks: their sum, then each one's.
cpu_ticks() {
	local p t=0 st each=()
	for p in "${cpu_pids[@]}"; do
		st=$(cat "/proc/$p/stat" 2>/dev/null) || st="x) 0 0 0 0 0 0 0 0 0 0 0 0 0"
		st=${st##*) }
		read -r -a f <<<"$st"
		t=$((t + f[11] + f[12]))
		each+=($((f[11] + f[12])))
	done
	echo "$t ${each[*]}"
}
# secs D prints Go duration D (5s, 1500ms, 1m) in seconds.
secs() { awk -v d="$1" 'BEGIN{ if (d ~ /ms$/) print substr(d, 1, length(d)-2)/1000; else if (d ~ /m$/) print substr(d, 1, length(d)-1)*60; else { sub(/s$/, "", d); print d+0 } }'; }

# writes_row NAME VIA ADDR [tallyd-bench writes flags...] runs the INCR load at ADDR.
writes_row() {
	local name=$1 via=$2 addr=$3 file
	shift 3
	file="$out/$(tr -c 'a-zA-Z0-9\n' - <<<"$name-$via" | tr -s -).json"
	local what="$pipeline INCRs" n=${ROW_CONNS:-$conns}
	[[ " $* " != *" --locks "* ]] || what="$pipeline LOCK+UNLOCK pairs"
	say "$name, through $via ($addr): $n conns x $what a round, $warmup warm-up + $duration"
	# The servers' CPU over the measured window (sampled at its start and end, roughly).
	(sleep "$(secs "$warmup")"; cpu_ticks >"$file.cpu0"; sleep "$(secs "$duration")"; cpu_ticks >"$file.cpu1") &
	local sampler=$!
	if "${pin_c[@]}" "$bench" writes --addr "$addr" --conns "$n" --pipeline "$pipeline" --keys "$keys" \
		--duration "$duration" --warmup "$warmup" --label "$name/$via" --json "$@" >"$file" 2> >(tee "${file%.json}.log" >&2); then
		wait "$sampler" 2>/dev/null || true
		local cpu_s=null
		[[ -s $file.cpu0 && -s $file.cpu1 ]] && cpu_s=$(paste -d' ' "$file.cpu0" "$file.cpu1" | awk -v hz="$hz" '{n = NF / 2; printf "["; for (i = 1; i <= n; i++) printf "%s%g", (i > 1 ? "," : ""), ($(n + i) - $i) / hz; print "]"}')
		add_row "$(jq -c --arg s "$name" --arg v "$via" --argjson cpu "$cpu_s" --argjson d "$(secs "$duration")" '{system: $s, via: $v, kind: "writes", lock_pairs: (.lock_pairs // false), writes_per_sec, p50_us: .round_latency.p50_us, p99_us: .round_latency.p99_us, errors, first_error, conns_lost, client_cpu_ns_per_write, server_cpu_us_per_write: (if $cpu == null or .writes_per_sec == 0 then null else $cpu[0] * 1e6 / (.writes_per_sec * $d) end), server_cpu_us_per_write_each: (if $cpu == null or .writes_per_sec == 0 then null else [$cpu[1:][] * 1e6 / (.writes_per_sec * $d)] end), raw: .}' "$file")"
		rm -f "$file.cpu0" "$file.cpu1"
	else
		kill "$sampler" 2>/dev/null || true
		wait "$sampler" 2>/dev/null || true
		sleep 0.2 # tee's last lines
		why=$(grep -v 'writes/s, errors' "${file%.json}.log" | tail -1)
		say "$name through $via failed: ${why:-see ${file%.json}.log}"
		add_row "$(jq -nc --arg s "$name" --arg v "$via" --arg w "$why" '{system: $s, via: $v, kind: "failed", why: $w}')"
	fi
}

# ---- tallyd, 3 nodes -------------------------------------------------------------
tallyd_version=$("$tallyd" --version 2>&1 | head -1 | sed 's/^tallyd //' || true)
if want tallyd; then
	if ! "$tallyd" --help 2>&1 | grep -q -- '--cluster'; then
		say "tallyd has no cluster mode yet ($tallyd --help lists no --cluster): the tallyd cluster rows are skipped"
		notes+=("tallyd has no cluster mode yet (\`$tallyd --help\` lists no \`--cluster\`): its cluster rows were skipped.")
		add_row "$(jq -nc '{system: "tallyd 3 nodes", via: "leader / follower", kind: "skipped", why: "tallyd has no cluster mode yet"}')"
	elif ! command -v redis-cli >/dev/null && ! ./scripts/ensure-redis-tools.sh >&2; then
		say "redis-cli is missing (it reads INFO cluster to find the leader): the tallyd cluster rows are skipped"
		add_row "$(jq -nc '{system: "tallyd 3 nodes", via: "leader / follower", kind: "skipped", why: "no redis-cli to read INFO cluster with"}')"
	else
		declare -A peer slock npid
		spec=""
		for n in 1 2 3; do
			port "peer[$n]"; port "slock[$n]"
			spec+="${spec:+,}$n=127.0.0.1:${peer[$n]}"
		done
		# A new cluster is bootstrapped explicitly once tallyd knows the flag (issue 19).
		bootstrap=()
		"$tallyd" --help 2>&1 | grep -q -- '--initial-cluster-state' && bootstrap=(--initial-cluster-state new)
		for n in 1 2 3; do
			mkdir -p "$tmp/tallyd$n"
			"${pin_s[@]}" "$tallyd" --cluster "$spec" --node-id "$n" --data-dir "$tmp/tallyd$n" "${bootstrap[@]}" \
				--appendfsync always --bind 127.0.0.1 --slock-port "${slock[$n]}" --counter-port 0 --pool-port 0 \
				--log-level warn >"$out/tallyd-node$n.log" 2>&1 &
			pids+=($!) npid[$n]=$!
		done
		say "tallyd cluster: peers $spec, Redis text on ${slock[1]}, ${slock[2]}, ${slock[3]}"
		leader="" follower=""
		for n in 1 2 3; do wait_port "${slock[$n]}" || say "tallyd node $n does not listen on ${slock[$n]}: see $out/tallyd-node$n.log"; done
		for _ in $(seq 300); do
			for n in 1 2 3; do
				case $(rcli -p "${slock[$n]}" INFO cluster 2>/dev/null | field role || true) in
				leader) leader=$n ;;
				follower) follower=${follower:-$n} ;;
				esac
			done
			[[ -n $leader && -n $follower && $follower != "$leader" ]] && break
			leader="" follower=""
			sleep 0.1
		done
		if [[ -z $leader ]]; then
			say "tallyd cluster: no leader and follower within 30 s (INFO cluster): see $out/tallyd-node*.log"
			notes+=("The tallyd cluster elected no leader within 30 s; its rows were skipped.")
			add_row "$(jq -nc '{system: "tallyd 3 nodes", via: "leader / follower", kind: "failed", why: "no leader within 30 s"}')"
		else
			cpu_pids=("${npid[1]}" "${npid[2]}" "${npid[3]}") # in node order: the rows' server_cpu_us_per_write_each
			term0=$(rcli -p "${slock[$leader]}" INFO cluster | field term || true)
			say "tallyd cluster: node $leader leads (term $term0), node $follower follows"
			level=()
			[[ -z ${BENCH_CONSISTENCY:-} ]] || level=(--consistency "$BENCH_CONSISTENCY")
			writes_row "tallyd 3 nodes" leader "127.0.0.1:${slock[$leader]}" --prefix "bc:l:" "${level[@]}"
			writes_row "tallyd 3 nodes" "leader, lock pairs" "127.0.0.1:${slock[$leader]}" --locks --prefix "bc:k:" "${level[@]}"
			writes_row "tallyd 3 nodes" "leader, lock pairs, UNLOCKs after the grants" "127.0.0.1:${slock[$leader]}" \
				--locks --await-grant --prefix "bc:g:" "${level[@]}"
			writes_row "tallyd 3 nodes" follower "127.0.0.1:${slock[$follower]}" --prefix "bc:f:" "${level[@]}"
			if want wide; then
				ROW_CONNS=$wide writes_row "tallyd 3 nodes" "leader, $wide conns" "127.0.0.1:${slock[$leader]}" --prefix "bc:w:" "${level[@]}"
				ROW_CONNS=$wide writes_row "tallyd 3 nodes" "leader, lock pairs, UNLOCKs after the grants, $wide conns" "127.0.0.1:${slock[$leader]}" \
					--locks --await-grant --prefix "bc:v:" "${level[@]}"
			fi
			info=$(rcli -p "${slock[$leader]}" INFO cluster | tr -d '\r' || true)
			echo "$info" >"$out/tallyd-info-cluster.txt"
			if [[ $(field role <<<"$info") != leader || $(field term <<<"$info") != "$term0" ]]; then
				say "tallyd cluster: the leadership changed during the run (INFO cluster in $out/tallyd-info-cluster.txt)"
				notes+=("The tallyd cluster's leadership changed during the run (node $leader was leader in term $term0).")
			fi
		fi
		stop "${npid[@]}"
	fi
fi

# ---- tallyd, 1 node (no replication) -----------------------------------------------
if want single; then
	port sp
	mkdir -p "$tmp/single"
	"${pin_s[@]}" "$tallyd" --data-dir "$tmp/single" --appendfsync always --bind 127.0.0.1 --slock-port "$sp" \
		--counter-port 0 --pool-port 0 --log-level warn >"$out/tallyd-single.log" 2>&1 &
	pids+=($!)
	spid=$!
	if wait_port "$sp"; then
		cpu_pids=("$spid")
		writes_row "tallyd 1 node" "the node" "127.0.0.1:$sp" --prefix "bc:s:"
	else
		say "tallyd (1 node) does not listen on $sp: see $out/tallyd-single.log"
		add_row "$(jq -nc '{system: "tallyd 1 node", via: "the node", kind: "failed"}')"
	fi
	stop "$spid"
fi

# ---- etcd 3.4, 3 members -------------------------------------------------------------
etcd_version=""
if want etcd; then
	if ! ./scripts/ensure-etcd.sh >&2; then
		say "etcd is not available: the etcd row is skipped"
		notes+=("etcd could not be installed (scripts/ensure-etcd.sh): its row was skipped.")
		add_row "$(jq -nc '{system: "etcd 3 members", via: "check perf", kind: "skipped", why: "etcd could not be installed"}')"
	else
		etcd_version=$(etcd --version 2>/dev/null | sed -n 's/^etcd Version: //p')
		declare -A ecl epe epid
		initial="" endpoints=""
		for i in 1 2 3; do
			port "ecl[$i]"; port "epe[$i]"
			initial+="${initial:+,}e$i=http://127.0.0.1:${epe[$i]}"
			endpoints+="${endpoints:+,}127.0.0.1:${ecl[$i]}"
		done
		for i in 1 2 3; do
			"${pin_s[@]}" etcd --name "e$i" --data-dir "$tmp/etcd$i" \
				--listen-client-urls "http://127.0.0.1:${ecl[$i]}" --advertise-client-urls "http://127.0.0.1:${ecl[$i]}" \
				--listen-peer-urls "http://127.0.0.1:${epe[$i]}" --initial-advertise-peer-urls "http://127.0.0.1:${epe[$i]}" \
				--initial-cluster "$initial" --initial-cluster-state new --initial-cluster-token "tallyd-bench-$$" \
				--logger zap --log-level warn >"$out/etcd-member$i.log" 2>&1 &
			pids+=($!) epid[$i]=$!
		done
		say "etcd $etcd_version: members $initial, clients on $endpoints"
		healthy=""
		for _ in $(seq 60); do
			if ETCDCTL_API=3 timeout 10 etcdctl --endpoints "$endpoints" endpoint health >/dev/null 2>&1; then healthy=1; break; fi
			sleep 0.5
		done
		if [[ -z $healthy ]]; then
			say "etcd: the members are not healthy within 30 s: see $out/etcd-member*.log"
			add_row "$(jq -nc '{system: "etcd 3 members", via: "check perf", kind: "failed", why: "not healthy within 30 s"}')"
		else
			ETCDCTL_API=3 timeout 10 etcdctl --endpoints "$endpoints" endpoint status -w table >"$out/etcd-status.txt" 2>&1 || true
			# check perf exits 1 when its own thresholds fail ("Throughput too low"): still a
			# result. When a request times out after the run (it deletes its keys), it prints
			# no figures at all: then once more, on a prefix of its own (the first one may
			# still hold keys, which check perf refuses).
			for attempt in 1 2; do
				again=""
				((attempt == 1)) || again=", once more"
				say "etcd: etcdctl check perf --load=$etcd_load (60 s) against all three members$again"
				"${pin_c[@]}" env ETCDCTL_API=3 timeout 300 etcdctl --endpoints "$endpoints" check perf --load="$etcd_load" \
					--prefix "/etcdctl-check-perf-$attempt/" >"$out/etcd-check-perf.txt" 2>&1 || true
				tr '\r' '\n' <"$out/etcd-check-perf.txt" | grep -E '^(PASS|FAIL|Slowest|Stddev|Error)' >&2 || true
				perf=$(tr '\r' '\n' <"$out/etcd-check-perf.txt")
				wps=$(sed -n 's/.*Throughput[^0-9]*\([0-9][0-9]*\) writes\/s.*/\1/p' <<<"$perf" | head -1)
				[[ -z $wps ]] || break
				cp "$out/etcd-check-perf.txt" "$out/etcd-check-perf-$attempt-failed.txt"
			done
			slowest=$(sed -n 's/.*Slowest request took[^0-9]*\([0-9.][0-9.]*\)s.*/\1/p' <<<"$perf" | head -1)
			stddev=$(sed -n 's/.*Stddev[^0-9]*\([0-9.][0-9.]*\)s.*/\1/p' <<<"$perf" | head -1)
			verdict=$(grep -oE '^(PASS|FAIL)$' <<<"$perf" | tail -1 || true)
			# Failed requests: "FAIL: ERROR(<what>) -> <count>" a kind.
			eerrs=$(sed -n 's/.*ERROR(.*) -> \([0-9][0-9]*\).*/\1/p' <<<"$perf" | awk '{s += $1} END {print s + 0}')
			if [[ -z $wps ]]; then
				why=$(grep -E '^Error:' <<<"$perf" | tail -1)
				say "etcd: check perf printed no throughput twice (${why:-no error}): see $out/etcd-check-perf*.txt"
				add_row "$(jq -nc --arg w "${why:-no figures}" '{system: "etcd 3 members", via: "check perf", kind: "failed", why: "check perf printed no throughput twice, the last time: \($w)"}')"
			else
				add_row "$(jq -nc --arg l "$etcd_load" --argjson w "$wps" --arg s "${slowest:-}" --arg d "${stddev:-}" --arg v "${verdict:-}" --argjson e "$eerrs" --argjson a "$attempt" \
					'{system: "etcd 3 members", via: "all 3 (check perf --load=\($l))", kind: "checkperf", writes_per_sec: $w, slowest_s: ($s | tonumber? // null), stddev_s: ($d | tonumber? // null), verdict: $v, failed_requests: $e, attempt: $a}')"
			fi
		fi
		stop "${epid[@]}"
	fi
fi

# ---- Redis master + replicas, WAIT 1 0 ---------------------------------------------------
redis_version=""
if want redis || want redis2; then
	if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
		if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >&2 || true
		fi
	fi
fi
# redis_rows N starts a Redis master and N replicas and runs its rows (WAIT 1 0 after each round).
redis_rows() {
	local nrep=$1 sys="Redis master + replica" r rp linked up
	((nrep == 1)) || sys="Redis master + $nrep replicas"
	if ! command -v redis-server >/dev/null; then
		say "redis-server is missing and could not be installed: the $sys row is skipped"
		notes+=("redis-server could not be installed: its rows were skipped.")
		add_row "$(jq -nc --arg s "$sys" '{system: $s, via: "master, WAIT 1 0", kind: "skipped", why: "no redis-server"}')"
		return
	fi
	redis_version=$(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')
	local common=(--bind 127.0.0.1 --protected-mode no --save '' --appendonly yes --appendfsync always --daemonize no)
	local rm_port rports=() rpids=()
	port rm_port
	mkdir -p "$tmp/redis$nrep-master"
	"${pin_s[@]}" redis-server --port "$rm_port" --dir "$tmp/redis$nrep-master" "${common[@]}" >"$out/redis$nrep-master.log" 2>&1 &
	pids+=($!) rpids+=($!)
	for r in $(seq "$nrep"); do
		port rp
		rports+=("$rp")
		mkdir -p "$tmp/redis$nrep-replica$r"
		"${pin_s[@]}" redis-server --port "$rp" --dir "$tmp/redis$nrep-replica$r" "${common[@]}" \
			--replicaof 127.0.0.1 "$rm_port" >"$out/redis$nrep-replica$r.log" 2>&1 &
		pids+=($!) rpids+=($!)
	done
	linked=""
	if wait_port "$rm_port"; then
		for _ in $(seq 100); do
			up=0
			for rp in "${rports[@]}"; do
				[[ $(rcli -p "$rp" INFO replication 2>/dev/null | field master_link_status || true) == up ]] && up=$((up + 1))
			done
			((up == nrep)) && { linked=1; break; }
			sleep 0.1
		done
	fi
	if [[ -z $linked ]]; then
		say "Redis: the replicas did not link to the master within 10 s: see $out/redis$nrep-*.log"
		add_row "$(jq -nc --arg s "$sys" '{system: $s, via: "master, WAIT 1 0", kind: "failed", why: "replicas not linked"}')"
	else
		say "Redis $redis_version: master :$rm_port, replicas :${rports[*]} (appendonly yes, appendfsync always on all)"
		cpu_pids=("${rpids[@]}")
		writes_row "$sys" "master, WAIT 1 0" "127.0.0.1:$rm_port" --wait 1 --wait-timeout 0 --prefix "bc:r:"
		if ((nrep > 1)) && want wide; then
			ROW_CONNS=$wide writes_row "$sys" "master, WAIT 1 0, $wide conns" "127.0.0.1:$rm_port" --wait 1 --wait-timeout 0 --prefix "bc:q:"
		fi
		rcli -p "$rm_port" INFO replication | tr -d '\r' >"$out/redis$nrep-replication.txt" 2>&1 || true
	fi
	stop "${rpids[@]}"
}
want redis && redis_rows 1
want redis2 && redis_rows 2

# ---- report ------------------------------------------------------------------------------
disk=$(df -P "$tmp" | awk 'NR==2{print $1" ("$6")"}')
load_after=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || true)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
now=$(date -u +%Y-%m-%dT%H:%MZ)
printf '%s\n' "${results[@]}" | jq -s \
	--arg date "$now" --arg cpu "$cpu" --argjson cores "$(nproc)" --arg disk "$disk" --arg pin "$pinning" --arg l0 "$load_before" --arg l1 "$load_after" \
	--arg tallyd "$tallyd_version" --arg etcd "$etcd_version" --arg redis "$redis_version" \
	--argjson conns "$conns" --argjson pipeline "$pipeline" --argjson keys "$keys" --arg duration "$duration" \
	'{date: $date, machine: {cpu: $cpu, cores: $cores, disk: $disk, loadavg_before: $l0, loadavg_after: $l1}, pinning: $pin,
	  versions: {tallyd: $tallyd, etcd: $etcd, redis: $redis},
	  load: {conns: $conns, pipeline: $pipeline, keys: $keys, duration: $duration,
	         latency: "per round: from writing its INCRs (and WAIT) to reading its last reply"},
	  rows: .}' >"$out/cluster.json"

# The table: one line a row (markdown), the same on stdout and in cluster.md.
table=$(jq -r '
	def us: if . == null or . == 0 then "-" elif . < 1000 then "\(. * 10 | round / 10) µs" elif . < 1e6 then "\(. / 100 | round / 10) ms" else "\(. / 1e4 | round / 100) s" end;
	def grouped: tostring | explode | reverse | [range(0; length; 3) as $i | .[$i:$i+3] | reverse | implode] | reverse | join(",");
	def errs: if (.errors // {}) == {} then "" else "errors: " + ([.errors | to_entries[] | "\(.key) \(.value)"] | join(", ")) end;
	"| system | sent through | writes/s | p50 | p99 | notes |",
	"|---|---|--:|--:|--:|---|",
	(.rows[] |
		if .kind == "writes" then
			"| \(.system) | \(.via) | \(.writes_per_sec | floor | grouped) | \(.p50_us | us) | \(.p99_us | us) | \([(if .lock_pairs then "LOCK+UNLOCK pairs a second, rounds of \(.raw.pipeline) pairs" + (if .raw.await_grant then ", the UNLOCKs sent once the LOCKs are answered (two round trips a round)" else " in one write" end) else "" end), errs, (if .conns_lost > 0 then "\(.conns_lost) connections lost" else empty end), (if .server_cpu_us_per_write then "servers \(.server_cpu_us_per_write * 10 | round / 10) µs CPU a write" else empty end), (.raw.client_cpu_s / .raw.seconds) as $c | (if $c > 0.7 then "the generator used \($c * 100 | round)% of a core: its bound, not the server'"'"'s" else empty end)] | map(select(. != "")) | join("; ")) |"
		elif .kind == "checkperf" then
			"| \(.system) | \(.via) | \(.writes_per_sec | grouped) | - | - | check perf prints no percentiles: slowest \(if .slowest_s then (.slowest_s * 1e6 | us) else "?" end), stddev \(if .stddev_s then (.stddev_s * 1e6 | us) else "?" end); \(if .failed_requests > 0 then "\(.failed_requests) requests failed; " else "" end)check perf says \(.verdict)\(if .attempt > 1 then " (second try: the first printed no figures)" else "" end) |"
		else
			"| \(.system) | \(.via) | - | - | - | \(.kind): \(.why // "see the log") |"
		end)' "$out/cluster.json")

{
	echo "## Replicated writes: tallyd cluster, etcd, Redis + WAIT (\`make bench-cluster\`)"
	echo
	echo "$now, $(nproc) cores ($cpu), data on $disk; $pinning; load average ${load_before:-?} before, ${load_after:-?} after."
	echo "tallyd $tallyd_version${etcd_version:+, etcd $etcd_version}${redis_version:+, Redis $redis_version}."
	echo
	echo "tallyd and Redis: \`tallyd-bench writes\`, $conns connections, each sending rounds of $pipeline pipelined \`INCR\`s on keys picked at random among $keys"
	echo "(Redis: each round followed by \`WAIT 1 0\`, which is not counted as a write), the next round once every reply is in; $duration measured after $warmup of warm-up."
	echo "Rows marked \"$wide conns\" use $wide connections (same rounds): at a fixed concurrency writes/s is the writes in flight over the latency."
	echo "The lock-pairs rows: the same connections, each round $pipeline pairs of \`LOCK k TIMEOUT 0 EXPRIED 30 LOCK_ID x\` and \`UNLOCK k LOCK_ID x\` on keys of the connection's own, each pair's two in one write,"
	echo "or (\"UNLOCKs after the grants\") the round's UNLOCKs sent once all its LOCKs are answered; their figure is pairs a second."
	echo "p50 and p99 are of rounds: from writing a round's INCRs to reading its last reply. Every server fsyncs a write before it acknowledges it:"
	echo "tallyd \`--appendfsync always\` (cluster: 3 nodes on 127.0.0.1, consistency ${BENCH_CONSISTENCY:-QUORUM (the default)}; at QUORUM a write is acknowledged once a majority has it on disk);"
	echo "Redis \`appendonly yes\`, \`appendfsync always\` on the master and on the replicas, and \`WAIT 1 0\` returns once a replica has acknowledged the round (with two replicas: two copies of three, as QUORUM); etcd always (its WAL)."
	echo "etcd: 3 members on 127.0.0.1, figures as \`etcdctl check perf --load=$etcd_load\` prints them (60 s, its own clients and rate limit)."
	echo
	echo "$table"
	for n in "${notes[@]}"; do
		echo
		echo "$n"
	done
} >"$out/cluster.md"

echo
echo "$table"
for n in "${notes[@]}"; do echo "note: $n"; done
echo
echo "($pinning; latency per round of $pipeline INCRs; load average ${load_before:-?} before, ${load_after:-?} after)"
say "results in $out (cluster.md to paste into BENCHMARKS.md, cluster.json, logs)"
