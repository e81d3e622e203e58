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

# The package ships a systemd unit (poolcounter.service, listening on 0.0.0.0:7531) and no
# init script: it must not run, the bench starts its own poolcounterd on a free port.
"$(dirname "$0")/apt-install-no-service.sh" poolcounter poolcounter || die "could not install the poolcounter package"

path=$(find_poolcounterd) || die "the poolcounter package is installed but poolcounterd is not on PATH nor in /usr/sbin"
say "installed poolcounter; poolcounterd is $path"
