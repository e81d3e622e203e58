#!/usr/bin/env bash
# Makes Node's `redlock` 4.2.0 and `ioredis` 6.0.0 (npm) available for the test that drives
# tallyd with them (e2e/locklibs_test.go): installs node and npm with apt-get when they are
# missing and we are root, then the two packages with npm into a cache directory outside
# the repository, $TALLYD_NODE_MODULES or else ${XDG_CACHE_HOME:-$HOME/.cache}/tallyd/node-redlock
# (the test looks in the same place). Prints what it found; exits 1 if it cannot.
set -euo pipefail

say() { echo "ensure-node-redlock: $*"; }
die() { echo "ensure-node-redlock: $*" >&2; exit 1; }

dir=${TALLYD_NODE_MODULES:-${XDG_CACHE_HOME:-$HOME/.cache}/tallyd/node-redlock}
want_redlock=4.2.0
want_ioredis=6.0.0

version_of() { # the version in dir's node_modules/$1/package.json, or nothing
	local f="$dir/node_modules/$1/package.json"
	[ -f "$f" ] && sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$f" | head -n1
}

need=()
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] || die "missing ${need[*]} and this is not root: sudo apt-get install ${need[*]}"
	command -v apt-get >/dev/null || die "missing ${need[*]} and there is no apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || die "apt-get update failed"
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null || die "apt-get install ${need[*]} failed"
fi

if [ "$(version_of redlock)" = "$want_redlock" ] && [ "$(version_of ioredis)" = "$want_ioredis" ]; then
	say "redlock $want_redlock and ioredis $want_ioredis are in $dir (node $(node --version))"
	exit 0
fi

mkdir -p "$dir"
# A package.json of its own, so npm installs here and not into a parent directory's project.
[ -f "$dir/package.json" ] || echo '{"name":"tallyd-node-redlock","private":true}' >"$dir/package.json"
log=$(mktemp)
if ! (cd "$dir" && npm install --no-audit --no-fund --save-exact "redlock@$want_redlock" "ioredis@$want_ioredis") >"$log" 2>&1; then
	cat "$log" >&2
	rm -f "$log"
	die "npm install redlock@$want_redlock ioredis@$want_ioredis into $dir failed (is the npm registry reachable?)"
fi
rm -f "$log"
[ "$(version_of redlock)" = "$want_redlock" ] && [ "$(version_of ioredis)" = "$want_ioredis" ] ||
	die "npm ran but $dir/node_modules lacks redlock $want_redlock or ioredis $want_ioredis"
say "redlock $want_redlock and ioredis $want_ioredis installed in $dir (node $(node --version))"
