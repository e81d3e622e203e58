#!/usr/bin/env bash
# Makes Debian's python3-redis (redis-py, for the test that drives tallyd with a real client
# library) and, if the apt sources have it, redis-server (to run the same script against
# Redis itself) available, installing them with apt-get when missing and we are root.
# Debian's redis-server package starts a service when systemd runs; in containers it does not,
# and the test starts its own redis-server on a free port anyway.
# Prints what it found; exits 1 if python3-redis cannot be had.
set -euo pipefail

say() { echo "ensure-python-redis: $*"; }
die() { echo "ensure-python-redis: $*" >&2; exit 1; }

have_pyredis() { [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import redis' 2>/dev/null; }

need=()
have_pyredis || need+=(python3-redis)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
if [ ${#need[@]} -eq 0 ]; then
	say "python3-redis and redis-server are installed"
	exit 0
fi

[ "$(id -u)" -eq 0 ] || die "missing ${need[*]} and this is not root: sudo apt-get install ${need[*]}"
command -v apt-get >/dev/null || die "missing ${need[*]} and there is no apt-get"

export DEBIAN_FRONTEND=noninteractive
has_candidate() {
	local policy_out
	policy_out=$(apt-cache policy "$1" 2>/dev/null) || return 1
	[[ $policy_out == *"Candidate: "[0-9]* ]]
}
if ! has_candidate python3-redis; then
	say "apt-get update (no python3-redis in the package lists yet)"
	apt-get update -qq || die "apt-get update failed"
fi
for p in "${need[@]}"; do
	if ! has_candidate "$p"; then
		say "no package $p in the configured apt sources"
		continue
	fi
	log=$(mktemp)
	if ! apt-get install -y -qq --no-install-recommends "$p" >"$log" 2>&1; then
		say "install of $p failed; apt-get update and retry"
		apt-get update -qq || true
		apt-get install -y -qq --no-install-recommends "$p" >"$log" 2>&1 || { cat "$log" >&2; say "apt-get install $p failed"; }
	fi
	rm -f "$log"
done

have_pyredis || die "python3-redis could not be installed"
if command -v redis-server >/dev/null 2>&1; then
	say "python3-redis installed; redis-server is $(command -v redis-server)"
else
	say "python3-redis installed; no redis-server (the client test runs against tallyd only)"
fi
