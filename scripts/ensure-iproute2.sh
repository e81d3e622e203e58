#!/usr/bin/env bash
# Makes `ip` (iproute2) available for the cluster tests (e2e/cluster*_test.go), which put each
# node in its own network namespace with veth links when run as root, installing the Debian
# package with apt-get when it is missing and we are root. Prints where ip is; exits 1 if it
# can't. Not root: the tests use a fault-injecting proxy instead and need no ip. The package
# starts no service.
set -euo pipefail

say() { echo "ensure-iproute2: $*"; }
die() { echo "ensure-iproute2: $*" >&2; exit 1; }

if path=$(command -v ip 2>/dev/null); then
	say "ip is $path"
	exit 0
fi

[ "$(id -u)" -eq 0 ] || die "ip is not installed and this is not root: install the Debian package (sudo apt-get install iproute2) or run this script as root (without it, the cluster tests use their proxy)"
command -v apt-get >/dev/null || die "ip is not installed and there is no apt-get to install iproute2 with"

export DEBIAN_FRONTEND=noninteractive
has_candidate() {
	local policy_out
	policy_out=$(apt-cache policy iproute2 2>/dev/null) || return 1
	[[ $policy_out == *"Candidate: "[0-9]* ]]
}
if ! has_candidate; then
	say "apt-get update (no iproute2 in the package lists yet)"
	apt-get update -qq || die "apt-get update failed"
	has_candidate || die "no package iproute2 in the configured apt sources"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! apt-get install -y -qq --no-install-recommends iproute2 >"$log" 2>&1; then
	# The lists may be stale (a 404 for an old version): refresh once and retry.
	say "install failed; apt-get update and retry"
	apt-get update -qq || { cat "$log" >&2; die "apt-get update failed"; }
	if ! apt-get install -y -qq --no-install-recommends iproute2 >"$log" 2>&1; then
		cat "$log" >&2
		die "apt-get install iproute2 failed"
	fi
fi

path=$(command -v ip 2>/dev/null) || die "the iproute2 package is installed but ip is not on PATH"
say "installed iproute2; ip is $path"
