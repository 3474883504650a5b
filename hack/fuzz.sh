#!/usr/bin/env bash
# Runs every Go native fuzz target of the project (func FuzzXxx(f *testing.F)
# in a _test.go file outside hack/tools) for FUZZTIME each, one target at a
# time (go test -fuzz takes one target per package run). The checked-in seed
# corpora (testdata/fuzz/FuzzXxx/) run as ordinary tests in every go test;
# this adds new random inputs on top of them. A crasher go test finds is
# written to the package's testdata/fuzz/FuzzXxx/ and fails the run: commit
# it (it then replays in every go test) and fix the cause.
#
#   hack/fuzz.sh            every target, FUZZTIME (default 5s) each
#   hack/fuzz.sh --list     the targets, "package target" a line
#   FUZZTIME=10m FUZZ_MATCH=Quantity hack/fuzz.sh   longer, only matching ones
#
# FUZZ_PARALLEL is go test's -parallel (fuzzing workers), default 2.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
FUZZTIME=${FUZZTIME:-5s}
FUZZ_MATCH=${FUZZ_MATCH:-}
FUZZ_PARALLEL=${FUZZ_PARALLEL:-2}

targets() {
	git ls-files '*_test.go' | grep -v '^hack/tools/' | xargs grep -H -o -E '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' |
		sed -E 's#^(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]+).*#./\1 \2#' | sort -u
}

if [ "${1:-}" = --list ]; then
	targets
	exit 0
fi

# fuzz_one runs one target. Go's fuzz coordinator can fail a target that
# found nothing: when -fuzztime ends, a worker woken by the deadline may read
# it before the coordinator counts it as the normal end (golang/go#51484), and
# the target fails with a bare "context deadline exceeded" and no input
# written. Seen here on FuzzStatusAggregationRule (CI, stop 44) and
# FuzzParseQuantity: 2 of 72 target runs. Such a run, and only such a run, is
# fuzzed again, up to twice (one retry alone would still fail about one CI
# run in fifty); a written input, a panic, any other message, or a third
# failure fails the target.
fuzz_one() {
	local pkg=$1 name=$2 attempts=3 attempt out
	out=$(mktemp)
	for ((attempt = 1; attempt <= attempts; attempt++)); do
		if go test -count=1 -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -parallel "$FUZZ_PARALLEL" "$pkg" 2>&1 | tee "$out"; then
			rm -f "$out"
			return 0
		fi
		if [ "$attempt" -eq "$attempts" ] || ! coordinator_deadline "$out"; then
			break
		fi
		echo "=== fuzz $pkg $name: failed with a bare 'context deadline exceeded' and no input written (go's fuzz coordinator, golang/go#51484): again"
	done
	rm -f "$out"
	return 1
}

# coordinator_deadline: the output of a failed run shows the coordinator's
# deadline race and nothing else: one failed target whose only message is the
# bare deadline, no failing input written, no panic.
coordinator_deadline() {
	local out=$1
	grep -q -x -E '[[:space:]]+context deadline exceeded' "$out" &&
		[ "$(grep -c -E -- '--- FAIL:' "$out")" -eq 1 ] &&
		! grep -q -E 'Failing input written to|panic:' "$out"
}

failed=()
count=0
start=$(date +%s)
while read -r pkg name; do
	if [ -n "$FUZZ_MATCH" ] && ! [[ "$name" =~ $FUZZ_MATCH ]]; then
		continue
	fi
	count=$((count + 1))
	echo "=== fuzz $pkg $name ($FUZZTIME)"
	if ! fuzz_one "$pkg" "$name"; then
		failed+=("$pkg $name")
	fi
done < <(targets)
echo "fuzzed $count targets in $(( $(date +%s) - start )) s"
if [ "${#failed[@]}" -gt 0 ]; then
	echo "FAIL: fuzz targets that failed (an input they found is written under the package's testdata/fuzz/):"
	printf '  %s\n' "${failed[@]}"
	exit 1
fi
