#!/usr/bin/env bash
# Makes the reference server yrmcdsd (Debian package `yrmcds`) available for the
# differential conformance test, installing it with apt-get when missing and we are root,
# without ever starting its system service. Prints where yrmcdsd is; exits 1 if it can't.
set -euo pipefail

say() { echo "ensure-yrmcds: $*"; }
die() { echo "ensure-yrmcds: $*" >&2; exit 1; }

find_yrmcdsd() {
	command -v yrmcdsd 2>/dev/null && return 0
	# /usr/sbin is not on every user's PATH.
	[ -x /usr/sbin/yrmcdsd ] && echo /usr/sbin/yrmcdsd && return 0
	return 1
}

if path=$(find_yrmcdsd); then
	say "yrmcdsd is $path"
	exit 0
fi

[ "$(id -u)" -eq 0 ] || die "yrmcdsd is not installed and this is not root: install the Debian package (sudo apt-get install yrmcds) or run this script as root"
command -v apt-get >/dev/null || die "yrmcdsd is not installed and there is no apt-get to install the yrmcds package with"

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
printf '#!/bin/sh\n# written by ensure-yrmcds.sh: start no service during the install\nexit 101\n' >"$policy"
chmod 755 "$policy"

export DEBIAN_FRONTEND=noninteractive
has_candidate() {
	local policy_out
	policy_out=$(apt-cache policy yrmcds 2>/dev/null) || return 1
	[[ $policy_out == *"Candidate: "[0-9]* ]]
}
if ! has_candidate; then
	say "apt-get update (no yrmcds in the package lists yet)"
	apt-get update -qq || die "apt-get update failed"
	has_candidate || die "no package yrmcds in the configured apt sources"
fi
log=$(mktemp)
if ! apt-get install -y -qq --no-install-recommends yrmcds >"$log" 2>&1; then
	# The lists may be stale (a 404 for an old version): refresh once and retry.
	say "install failed; apt-get update and retry"
	apt-get update -qq || { cat "$log" >&2; die "apt-get update failed"; }
	if ! apt-get install -y -qq --no-install-recommends yrmcds >"$log" 2>&1; then
		cat "$log" >&2
		rm -f "$log"
		die "apt-get install yrmcds failed"
	fi
fi
rm -f "$log"

# Belt and braces: if a service manager started it anyway, stop it and keep it off.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
	systemctl disable --now yrmcds >/dev/null 2>&1 || true
elif [ -x /etc/init.d/yrmcds ] && [ -s /var/run/yrmcds.pid ]; then
	/etc/init.d/yrmcds stop >/dev/null 2>&1 || true
fi

path=$(find_yrmcdsd) || die "the yrmcds package is installed but yrmcdsd is not on PATH nor in /usr/sbin"
say "installed yrmcds; yrmcdsd is $path"
