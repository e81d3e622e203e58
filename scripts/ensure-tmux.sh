#!/usr/bin/env bash
# Makes tmux available for the test of `tallyctl top`, which runs it in a detached tmux
# session and reads its screen, installing the Debian package with apt-get when it is
# missing and we are root. Prints where tmux is; exits 1 if it can't. The package starts
# no service.
set -euo pipefail

say() { echo "ensure-tmux: $*"; }
die() { echo "ensure-tmux: $*" >&2; exit 1; }

if path=$(command -v tmux 2>/dev/null); then
	say "tmux is $path"
	exit 0
fi

[ "$(id -u)" -eq 0 ] || die "tmux is not installed and this is not root: install the Debian package (sudo apt-get install tmux) or run this script as root"
command -v apt-get >/dev/null || die "tmux is not installed and there is no apt-get to install it with"

export DEBIAN_FRONTEND=noninteractive
has_candidate() {
	local policy_out
	policy_out=$(apt-cache policy tmux 2>/dev/null) || return 1
	[[ $policy_out == *"Candidate: "[0-9]* ]]
}
if ! has_candidate; then
	say "apt-get update (no tmux in the package lists yet)"
	apt-get update -qq || die "apt-get update failed"
	has_candidate || die "no package tmux in the configured apt sources"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! apt-get install -y -qq --no-install-recommends tmux >"$log" 2>&1; then
	# The lists may be stale (a 404 for an old version): refresh once and retry.
	say "install failed; apt-get update and retry"
	apt-get update -qq || { cat "$log" >&2; die "apt-get update failed"; }
	if ! apt-get install -y -qq --no-install-recommends tmux >"$log" 2>&1; then
		cat "$log" >&2
		die "apt-get install tmux failed"
	fi
fi

path=$(command -v tmux 2>/dev/null) || die "the tmux package is installed but tmux is not on PATH"
say "installed tmux; tmux is $path"
