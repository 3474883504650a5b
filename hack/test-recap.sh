#!/usr/bin/env bash
# Runs a test command, keeping its output in LOG, and when it fails repeats
# at the end what failed: the --- FAIL lines with the lines that follow, and
# for a go test timeout the tests that were running. CI shows the tail of a
# long log, and a timeout's goroutine dump pushes both out of it.
#
#   hack/test-recap.sh LOG command [args...]
set -uo pipefail
log=$1
shift
mkdir -p "$(dirname "$log")"
"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
	echo
	echo "=== recap of $log (exit $rc): what failed ==="
	grep -E -B8 -A8 '^\s*--- FAIL' "$log" | grep -v -E '^\s*[IWE][0-9]{4} ' | head -150
	grep -E -A12 '^panic: test timed out|^running tests:' "$log" | head -40
	grep -E '^(FAIL|ok)\s' "$log" | grep '^FAIL' || true
fi
exit "$rc"
