#!/usr/bin/env bash
# Runs go test with the arguments given after NAME, printing what plain go test prints (each
# package's result, the output of failed tests) and saving every event to $TESTLOG/NAME.json,
# from which `scripts/testlog.go -slowest` prints the slowest packages and tests.
#
#	scripts/gotest.sh race -count=1 -race ./store/...
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
TESTLOG=${TESTLOG:-bin/testlog}
[ $# -gt 1 ] || { echo "usage: $0 NAME go-test-args..." >&2; exit 2; }
name=$1
shift
mkdir -p "$TESTLOG"
"$GO" build -o "$TESTLOG/testlog.$$" scripts/testlog.go && mv -f "$TESTLOG/testlog.$$" "$TESTLOG/testlog"
"$GO" test -json "$@" 2>&1 | "$TESTLOG/testlog" -save "$TESTLOG/$name.json"
