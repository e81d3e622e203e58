#!/usr/bin/env bash
# Makes Debian's etcd 3.4 (packages `etcd-server` and `etcd-client`: the `etcd` and
# `etcdctl` programs) available for make bench-cluster, installing them with apt-get when
# they are missing and we are root. A temporary policy-rc.d keeps the package from starting
# its own etcd service during the install (the bench runs its own members on free ports).
# Prints where etcd and etcdctl are; exits 1 if it can't.
set -euo pipefail

say() { echo "ensure-etcd: $*"; }
die() { echo "ensure-etcd: $*" >&2; exit 1; }

if e=$(command -v etcd 2>/dev/null) && c=$(command -v etcdctl 2>/dev/null); then
	say "etcd is $e ($("$e" --version 2>/dev/null | head -1)), etcdctl is $c"
	exit 0
fi

[ "$(id -u)" -eq 0 ] || die "etcd is not installed and this is not root: install the Debian packages (sudo apt-get install etcd-server etcd-client) or run this script as root"
command -v apt-get >/dev/null || die "etcd is not installed and there is no apt-get to install etcd-server and etcd-client with"

export DEBIAN_FRONTEND=noninteractive
has_candidate() {
	local policy_out
	policy_out=$(apt-cache policy "$1" 2>/dev/null) || return 1
	[[ $policy_out == *"Candidate: "[0-9]* ]]
}
if ! has_candidate etcd-server || ! has_candidate etcd-client; then
	say "apt-get update (no etcd-server or etcd-client in the package lists yet)"
	apt-get update -qq || die "apt-get update failed"
	has_candidate etcd-server && has_candidate etcd-client || die "no package etcd-server or etcd-client in the configured apt sources"
fi

log=$(mktemp)
rc_made=
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
	rc_made=1
fi
cleanup() {
	rm -f "$log"
	if [ -n "$rc_made" ]; then rm -f /usr/sbin/policy-rc.d; fi
}
trap cleanup EXIT
install() { apt-get install -y -qq --no-install-recommends etcd-server etcd-client >"$log" 2>&1; }
if ! install; then
	# The lists may be stale (a 404 for an old version): refresh once and retry.
	say "install failed; apt-get update and retry"
	apt-get update -qq || { cat "$log" >&2; die "apt-get update failed"; }
	install || { cat "$log" >&2; die "apt-get install etcd-server etcd-client failed"; }
fi
# A system that starts services all the same (no policy-rc.d honoured) gets its etcd stopped:
# it would hold the default ports and a data directory the bench does not use.
if command -v systemctl >/dev/null && systemctl is-active --quiet etcd 2>/dev/null; then
	systemctl stop etcd || true
fi

e=$(command -v etcd 2>/dev/null) || die "etcd-server is installed but etcd is not on PATH"
c=$(command -v etcdctl 2>/dev/null) || die "etcd-client is installed but etcdctl is not on PATH"
say "installed etcd-server and etcd-client: etcd is $e ($("$e" --version 2>/dev/null | head -1)), etcdctl is $c"
