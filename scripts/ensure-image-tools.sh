#!/usr/bin/env bash
# Makes skopeo and umoci available for the container image's test (e2e/image_test.go), which
# unpacks the OCI archive of `make image` with them, installing the Debian packages with
# apt-get when they are missing and we are root. Exits 1 if it can't. The packages start no
# service.
set -euo pipefail

say() { echo "ensure-image-tools: $*"; }
die() { echo "ensure-image-tools: $*" >&2; exit 1; }

missing=()
for tool in skopeo umoci; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -eq 0 ]; then
	say "skopeo is $(command -v skopeo), umoci is $(command -v umoci)"
	exit 0
fi

[ "$(id -u)" -eq 0 ] || die "${missing[*]} not installed and this is not root: sudo apt-get install ${missing[*]}, or run this script as root"
command -v apt-get >/dev/null || die "${missing[*]} not installed and there is no apt-get to install them with"

export DEBIAN_FRONTEND=noninteractive
has_candidates() {
	local p policy_out
	for p in "${missing[@]}"; do
		policy_out=$(apt-cache policy "$p" 2>/dev/null) || return 1
		[[ $policy_out == *"Candidate: "[0-9]* ]] || return 1
	done
}
if ! has_candidates; then
	say "apt-get update (no ${missing[*]} in the package lists yet)"
	apt-get update -qq || die "apt-get update failed"
	has_candidates || die "no package ${missing[*]} in the configured apt sources"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
	# The lists may be stale (a 404 for an old version): refresh once and retry.
	say "install failed; apt-get update and retry"
	apt-get update -qq || { cat "$log" >&2; die "apt-get update failed"; }
	if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
		cat "$log" >&2
		die "apt-get install ${missing[*]} failed"
	fi
fi
for tool in skopeo umoci; do
	command -v "$tool" >/dev/null 2>&1 || die "installed ${missing[*]}, but $tool is not on PATH"
done
say "installed ${missing[*]}"
