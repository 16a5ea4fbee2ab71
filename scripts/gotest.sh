#!/usr/bin/env bash
# gotest.sh: go test "$@", its output as usual, then, when it fails, a
# summary of what failed at the end of the output: the failed tests, the
# failed packages, and for a test binary that timed out the tests that
# were running (go test prints them above a goroutine dump that can run
# to thousands of lines, so a log cut to its tail would lose them).
# With GOTEST_SUMMARY set to a directory, the summary is also written to a
# file there, for make test to print again after all of its lanes.
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"${GO:-go}" test "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
summary() {
	echo "== go test $* failed (exit $status); what failed:"
	awk '
		/^panic: test timed out/ { print; running = 1; next }
		running && /^running tests:/ { print; next }
		running && /^\t/ { print; next }
		running { running = 0 }
		/^[ \t]*--- FAIL/ || /^FAIL[ \t]/ || /^panic: / { print }
	' "$log"
}
if [ "$status" -ne 0 ]; then
	echo
	summary "$@"
	if [ -n "${GOTEST_SUMMARY:-}" ]; then
		mkdir -p "$GOTEST_SUMMARY"
		summary "$@" > "$(mktemp "$GOTEST_SUMMARY/XXXXXX")"
	fi
fi
exit "$status"
