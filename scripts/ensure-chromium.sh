#!/usr/bin/env bash
# Makes chromium available for the browser test of the status page (e2e/ui_test.go), which
# drives it headless, installing the Debian package with apt-get when it is
# missing and we are root. Prints where chromium is; exits 1 if it can't. The package starts
# no service.
set -euo pipefail

say() { echo "ensure-chromium: $*"; }
die() { echo "ensure-chromium: $*" >&2; exit 1; }

if path=$(command -v chromium 2>/dev/null); then
	say "chromium is $path"
	exit 0
fi

[ "$(id -u)" -eq 0 ] || die "chromium is not installed and this is not root: install the Debian package (sudo apt-get install chromium) or run this script as root"
command -v apt-get >/dev/null || die "chromium is not installed and there is no apt-get to install it with"

export DEBIAN_FRONTEND=noninteractive
has_candidate() {
	local policy_out
	policy_out=$(apt-cache policy chromium 2>/dev/null) || return 1
	[[ $policy_out == *"Candidate: "[0-9]* ]]
}
if ! has_candidate; then
	say "apt-get update (no chromium in the package lists yet)"
	apt-get update -qq || die "apt-get update failed"
	has_candidate || die "no package chromium in the configured apt sources"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! apt-get install -y -qq --no-install-recommends chromium >"$log" 2>&1; then
	# The lists may be stale (a 404 for an old version): refresh once and retry.
	say "install failed; apt-get update and retry"
	apt-get update -qq || { cat "$log" >&2; die "apt-get update failed"; }
	if ! apt-get install -y -qq --no-install-recommends chromium >"$log" 2>&1; then
		cat "$log" >&2
		die "apt-get install chromium failed"
	fi
fi

path=$(command -v chromium 2>/dev/null) || die "the chromium package is installed but chromium is not on PATH"
say "installed chromium; chromium is $path"
