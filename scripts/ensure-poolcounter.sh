#!/usr/bin/env bash
# Makes the reference server poolcounterd (Debian package `poolcounter`, /usr/bin/poolcounterd)
# available for make bench-compare, installing it with apt-get when missing and we are root,
# without ever starting its system service. Prints where poolcounterd is; exits 1 if it can't.
set -euo pipefail

say() { echo "ensure-poolcounter: $*"; }
die() { echo "ensure-poolcounter: $*" >&2; exit 1; }

find_poolcounterd() {
	command -v poolcounterd 2>/dev/null && return 0
	# /usr/sbin is not on every user's PATH.
	[ -x /usr/sbin/poolcounterd ] && echo /usr/sbin/poolcounterd && return 0
	return 1
}

if path=$(find_poolcounterd); then
	say "poolcounterd is $path"
	exit 0
fi

[ "$(id -u)" -eq 0 ] || die "poolcounterd is not installed and this is not root: install the Debian package (sudo apt-get install poolcounter) or run this script as root"
command -v apt-get >/dev/null || die "poolcounterd is not installed and there is no apt-get to install the poolcounter package with"

# The package's maintainer scripts start the service through invoke-rc.d, which asks
# policy-rc.d first: answer 101 ("action forbidden") for the duration of the install and
# put back whatever policy was there before.
policy=/usr/sbin/policy-rc.d
backup=""
if [ -e "$policy" ]; then
	backup=$(mktemp)
	cp -p "$policy" "$backup"
fi
restore_policy() {
	if [ -n "$backup" ]; then
		cp -p "$backup" "$policy"
		rm -f "$backup"
	else
		rm -f "$policy"
	fi
}
trap restore_policy EXIT
printf '#!/bin/sh\n# written by ensure-poolcounter.sh: start no service during the install\nexit 101\n' >"$policy"
chmod 755 "$policy"

export DEBIAN_FRONTEND=noninteractive
has_candidate() {
	local policy_out
	policy_out=$(apt-cache policy poolcounter 2>/dev/null) || return 1
	[[ $policy_out == *"Candidate: "[0-9]* ]]
}
if ! has_candidate; then
	say "apt-get update (no poolcounter in the package lists yet)"
	apt-get update -qq || die "apt-get update failed"
	has_candidate || die "no package poolcounter in the configured apt sources"
fi
log=$(mktemp)
if ! apt-get install -y -qq --no-install-recommends poolcounter >"$log" 2>&1; then
	# The lists may be stale (a 404 for an old version): refresh once and retry.
	say "install failed; apt-get update and retry"
	apt-get update -qq || { cat "$log" >&2; die "apt-get update failed"; }
	if ! apt-get install -y -qq --no-install-recommends poolcounter >"$log" 2>&1; then
		cat "$log" >&2
		rm -f "$log"
		die "apt-get install poolcounter failed"
	fi
fi
rm -f "$log"

# Belt and braces: the package ships a systemd unit (poolcounter.service, listening on
# 0.0.0.0:7531) and no init script. If a service manager started it anyway, stop it and
# keep it off: the bench starts its own poolcounterd on a free port.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
	systemctl disable --now poolcounter >/dev/null 2>&1 || true
fi

path=$(find_poolcounterd) || die "the poolcounter package is installed but poolcounterd is not on PATH nor in /usr/sbin"
say "installed poolcounter; poolcounterd is $path"
