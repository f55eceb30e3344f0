#!/usr/bin/env bash
# hung.sh LOG: when a test binary in a go test log timed out, print what
# was running and the test code each stuck goroutine was in, so a hang on
# a CI machine can be read from the tail of the output alone.
set -euo pipefail
log=$1
grep -q '^panic: test timed out' "$log" || exit 0
echo "---- tests running at the timeout ----"
grep -A12 '^panic: test timed out' "$log" | grep -E '^\s+(running tests:|Test\S+ \()' || true
echo "---- goroutines in test code at the timeout (first 60 frames) ----"
grep -E -B1 -A1 '^goroutine [0-9]+ .*minutes\]:|_test\.go:[0-9]+' "$log" | head -n 60 || true
