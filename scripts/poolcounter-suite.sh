#!/usr/bin/env bash
# Runs PoolCounter's own test suite (the pytest files of wikimedia's
# mediawiki-services-poolcounter, tests/) against bin/tallyd, N times, and counts the runs
# that pass. Not part of make test: it needs the suite's repository at run time (git clone,
# network) and python3 with pytest, and a run of 50 takes about half an hour.
#
#   scripts/poolcounter-suite.sh [-n RUNS] [-b BUSY] [-k PYTEST_EXPR]
#
#   -n RUNS   runs of the whole suite (default 1); each starts its own daemon, as the suite does
#   -b BUSY   start BUSY processes that spin (sh -c 'while :; do :; done') beside the runs,
#             stopped at the end: the goal of issue 31 is every run passing with 2
#   -k EXPR   pass -k EXPR to pytest (a subset of the tests)
#
# Environment:
#   TALLYD           the binary to test (default bin/tallyd: go build -o bin/tallyd .)
#   POOLCOUNTER_REPO where to clone the suite from (default the GitHub mirror below; a local
#                    clone or bare repository works too)
#   POOLCOUNTER_REF  the commit to test with (default the one this script was written against)
#   PYTHON           the python3 to run pytest with (default: the first python3 with pytest)
#   KEEP             1: keep the work directory (the suite, each run's pytest output, the
#                    daemon's log) and print where it is; failed runs always keep it
#
# Nothing of the suite is copied into this repository: it is cloned into a temporary
# directory. The suite's conftest.py starts the daemon once per run (POOLCOUNTERD) and
# connects to 127.0.0.1:7531; here the daemon is tallyd behind a small wrapper that adds
# --pool-port (a free port, patched into the clone's conftest.py, so that a tallyd or
# poolcounterd already on 7531 is not tested instead), turns the other listeners and the
# append-only log off, and passes the suite's own arguments (test_invalid_listen runs
# `poolcounterd -l bad` and expects exit 1).
#
# Prints one line per run (passed or the failed tests' names, seconds, load average) and a
# summary; exits 1 if any run failed.
set -euo pipefail

say() { echo "poolcounter-suite: $*"; }
die() { echo "poolcounter-suite: $*" >&2; exit 2; }

runs=1 busy=0 expr=""
while getopts "n:b:k:h" opt; do
	case $opt in
	n) runs=$OPTARG ;;
	b) busy=$OPTARG ;;
	k) expr=$OPTARG ;;
	*) sed -n '2,29s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "-n takes a number of runs, not $runs"
[[ $busy =~ ^[0-9]+$ ]] || die "-b takes a number of processes, not $busy"

repo_root=$(cd "$(dirname "$0")/.." && pwd)
tallyd=${TALLYD:-$repo_root/bin/tallyd}
[ -x "$tallyd" ] || die "$tallyd is missing: go build -o bin/tallyd . (or set TALLYD)"
tallyd=$(cd "$(dirname "$tallyd")" && pwd)/$(basename "$tallyd")
# The first python3 that has pytest (a pyenv's python3 on PATH may not have Debian's).
python=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do
	if "$p" -c 'import pytest' 2>/dev/null; then python=$p; break; fi
done
[ -n "$python" ] || die "python3 with pytest is needed (Debian: apt-get install python3-pytest; or set PYTHON)"

src_repo=${POOLCOUNTER_REPO:-https://github.com/wikimedia/mediawiki-services-poolcounter.git}
src_ref=${POOLCOUNTER_REF:-37b2af9}

work=$(mktemp -d "${TMPDIR:-/tmp}/poolcounter-suite.XXXXXX")
busy_pids=()
failed=0
cleanup() {
	for p in "${busy_pids[@]}"; do kill "$p" 2>/dev/null || true; done
	if [ "${KEEP:-0}" = 1 ] || [ "$failed" -gt 0 ]; then
		say "work directory kept: $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

git clone --quiet --no-checkout "$src_repo" "$work/src" || die "could not clone $src_repo"
git -C "$work/src" checkout --quiet "$src_ref" -- tests || die "$src_repo has no tests/ at $src_ref"
grep -q '^    port = 7531$' "$work/src/tests/conftest.py" ||
	die "the suite's conftest.py no longer sets 'port = 7531': this script needs a look"
sed -i 's/^    port = 7531$/    port = int(os.environ["POOLCOUNTER_PORT"])/' "$work/src/tests/conftest.py"

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cat >"$work/poolcounterd" <<EOF
#!/bin/sh
# The suite's daemon: tallyd serving PoolCounter alone on \$POOLCOUNTER_PORT.
exec "$tallyd" --pool-port "\$POOLCOUNTER_PORT" --counter-port 0 --slock-port 0 \\
	--appendonly=false --data-dir "\$POOLCOUNTER_DATA" --log-level info "\$@" 2>>"\$POOLCOUNTER_LOG"
EOF
chmod +x "$work/poolcounterd"

for ((i = 0; i < busy; i++)); do
	sh -c 'while :; do :; done' &
	busy_pids+=($!)
done
[ "$busy" -gt 0 ] && say "$busy busy processes beside the runs: ${busy_pids[*]}"

passed=0
loads=()
declare -A failures=()
for ((r = 1; r <= runs; r++)); do
	port=$(free_port)
	mkdir -p "$work/run$r/data"
	start=$SECONDS
	args=(-q -p no:cacheprovider -o addopts= "$work/src/tests")
	[ -n "$expr" ] && args+=(-k "$expr")
	set +e
	(cd "$work/run$r" && POOLCOUNTERD="$work/poolcounterd" POOLCOUNTER_PORT=$port \
		POOLCOUNTER_DATA="$work/run$r/data" POOLCOUNTER_LOG="$work/run$r/tallyd.log" \
		"$python" -m pytest "${args[@]}" >"$work/run$r/pytest.log" 2>&1)
	rc=$?
	set -e
	# The suite's fixture sends SIGTERM and does not wait: wait here, so that the next run
	# does not share the machine with this one's daemon.
	for ((w = 0; w < 50; w++)); do
		pgrep -f -- "--pool-port $port " >/dev/null || break
		sleep 0.1
	done
	load=$(cut -d' ' -f1 /proc/loadavg)
	loads+=("$load")
	secs=$((SECONDS - start))
	if [ $rc -eq 0 ]; then
		passed=$((passed + 1))
		say "run $r/$runs: passed (${secs} s, load $load)"
	else
		failed=$((failed + 1))
		names=$(sed -n 's/^FAILED \([^ ]*\).*/\1/p; s/^ERROR \([^ ]*\).*/\1/p' "$work/run$r/pytest.log" | sed 's|.*/tests/||' | sort -u)
		[ -n "$names" ] || names="(pytest exit $rc: $(tail -n 1 "$work/run$r/pytest.log"))"
		for n in $names; do failures[$n]=$((${failures[$n]:-0} + 1)); done
		say "run $r/$runs: FAILED (${secs} s, load $load): $(echo $names)"
	fi
done

lo=$(printf '%s\n' "${loads[@]}" | sort -g | head -n 1)
hi=$(printf '%s\n' "${loads[@]}" | sort -g | tail -n 1)
say "passed $passed of $runs runs (busy processes: $busy; 1-minute load average $lo-$hi)"
for n in "${!failures[@]}"; do say "  failed in ${failures[$n]} runs: $n"; done
[ "$failed" -eq 0 ]
