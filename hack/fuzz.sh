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

failed=()
count=0
start=$(date +%s)
while read -r pkg name; do
	if [ -n "$FUZZ_MATCH" ] && ! [[ "$name" =~ $FUZZ_MATCH ]]; then
		continue
	fi
	count=$((count + 1))
	echo "=== fuzz $pkg $name ($FUZZTIME)"
	if ! go test -count=1 -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -parallel "$FUZZ_PARALLEL" "$pkg"; then
		failed+=("$pkg $name")
	fi
done < <(targets)
echo "fuzzed $count targets in $(( $(date +%s) - start )) s"
if [ "${#failed[@]}" -gt 0 ]; then
	echo "FAIL: fuzz targets that found a failing input (its file is under the package's testdata/fuzz/):"
	printf '  %s\n' "${failed[@]}"
	exit 1
fi
