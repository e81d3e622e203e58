#!/usr/bin/env bash
# Makes redis-cli (Debian package `redis-tools`) available for the slock tests that drive
# the server with it, installing the package with apt-get when it is missing and we are
# root. Prints where redis-cli is; exits 1 if it can't. redis-tools holds only the client
# programs, so no service can start during the install.
set -euo pipefail

say() { echo "ensure-redis-tools: $*"; }
die() { echo "ensure-redis-tools: $*" >&2; exit 1; }

if path=$(command -v redis-cli 2>/dev/null); then
	say "redis-cli is $path"
	exit 0
fi

[ "$(id -u)" -eq 0 ] || die "redis-cli is not installed and this is not root: install the Debian package (sudo apt-get install redis-tools) or run this script as root"
command -v apt-get >/dev/null || die "redis-cli is not installed and there is no apt-get to install the redis-tools package with"

export DEBIAN_FRONTEND=noninteractive
has_candidate() {
	local policy_out
	policy_out=$(apt-cache policy redis-tools 2>/dev/null) || return 1
	[[ $policy_out == *"Candidate: "[0-9]* ]]
}
if ! has_candidate; then
	say "apt-get update (no redis-tools in the package lists yet)"
	apt-get update -qq || die "apt-get update failed"
	has_candidate || die "no package redis-tools in the configured apt sources"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! apt-get install -y -qq --no-install-recommends redis-tools >"$log" 2>&1; then
	# The lists may be stale (a 404 for an old version): refresh once and retry.
	say "install failed; apt-get update and retry"
	apt-get update -qq || { cat "$log" >&2; die "apt-get update failed"; }
	if ! apt-get install -y -qq --no-install-recommends redis-tools >"$log" 2>&1; then
		cat "$log" >&2
		die "apt-get install redis-tools failed"
	fi
fi

path=$(command -v redis-cli 2>/dev/null) || die "the redis-tools package is installed but redis-cli is not on PATH"
say "installed redis-tools; redis-cli is $path"
