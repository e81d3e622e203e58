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
"$(dirname "$0")/apt-install-no-service.sh" yrmcds yrmcds || die "could not install the yrmcds package"
# Without systemd, the package's init script may have started it before policy-rc.d existed.
if [ -x /etc/init.d/yrmcds ] && [ -s /var/run/yrmcds.pid ]; then
	/etc/init.d/yrmcds stop >/dev/null 2>&1 || true
fi

path=$(find_yrmcdsd) || die "the yrmcds package is installed but yrmcdsd is not on PATH nor in /usr/sbin"
say "installed yrmcds; yrmcdsd is $path"
