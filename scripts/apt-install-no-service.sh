#!/usr/bin/env bash
# apt-install-no-service.sh PACKAGE [SERVICE]: installs the Debian package PACKAGE with
# apt-get (as root), never letting its maintainer scripts start a service, then stops and
# disables the systemd unit SERVICE (default PACKAGE) if a service manager started it anyway.
# For the ensure-*.sh scripts of reference servers that the tests and benches start
# themselves. Exits 1, saying why, if the package cannot be installed.
set -euo pipefail
pkg=${1:?usage: apt-install-no-service.sh PACKAGE [SERVICE]}
service=${2:-$pkg}

say() { echo "apt-install-no-service: $*"; }
die() { echo "apt-install-no-service: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "installing $pkg needs root"
command -v apt-get >/dev/null || die "no apt-get to install $pkg with"

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
printf '#!/bin/sh\n# written by apt-install-no-service.sh: start no service during the install\nexit 101\n' >"$policy"
chmod 755 "$policy"

export DEBIAN_FRONTEND=noninteractive
has_candidate() {
	local policy_out
	policy_out=$(apt-cache policy "$pkg" 2>/dev/null) || return 1
	[[ $policy_out == *"Candidate: "[0-9]* ]]
}
if ! has_candidate; then
	say "apt-get update (no $pkg in the package lists yet)"
	apt-get update -qq || die "apt-get update failed"
	has_candidate || die "no package $pkg in the configured apt sources"
fi
log=$(mktemp)
if ! apt-get install -y -qq --no-install-recommends "$pkg" >"$log" 2>&1; then
	# The lists may be stale (a 404 for an old version): refresh once and retry.
	say "install failed; apt-get update and retry"
	apt-get update -qq || { cat "$log" >&2; die "apt-get update failed"; }
	if ! apt-get install -y -qq --no-install-recommends "$pkg" >"$log" 2>&1; then
		cat "$log" >&2
		rm -f "$log"
		die "apt-get install $pkg failed"
	fi
fi
rm -f "$log"

# Belt and braces: if a service manager started it anyway, stop it and keep it off.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
	systemctl disable --now "$service" >/dev/null 2>&1 || true
fi
