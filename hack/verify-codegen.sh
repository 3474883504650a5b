#!/usr/bin/env bash
# Fails when the generated code or CRDs are stale, i.e. when
# hack/update-codegen.sh would change them. The working tree is left exactly
# as it was: the generated paths are snapshotted first, regenerated, compared
# and then restored from the snapshot.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export LC_ALL=C

# Everything hack/update-codegen.sh writes.
GENERATED_DIRS=(pkg/generated manifests/crds)
deepcopy_files() { find pkg/apis -name zz_generated.deepcopy.go | sort; }

TMP=$(mktemp -d)
BEFORE=$TMP/before
AFTER=$TMP/after
mkdir -p "$BEFORE" "$AFTER"

# copy_generated DEST: copies the generated paths that exist, keeping their
# paths relative to the repository root.
copy_generated() {
	local dest=$1 p
	for p in "${GENERATED_DIRS[@]}" $(deepcopy_files); do
		[ -e "$p" ] && cp -a --parents "$p" "$dest"
	done
	return 0
}

restore() {
	local f
	rm -rf "${GENERATED_DIRS[@]}"
	for f in $(deepcopy_files); do rm -f "$f"; done
	cp -a "$BEFORE/." "$ROOT"
	rm -rf "$TMP"
}

copy_generated "$BEFORE"
trap restore EXIT

if ! hack/update-codegen.sh >"$TMP/update.log" 2>&1; then
	cat "$TMP/update.log" >&2
	echo "verify-codegen: hack/update-codegen.sh failed" >&2
	exit 1
fi
copy_generated "$AFTER"

if ! diff -rqN "$BEFORE" "$AFTER" >"$TMP/stale" ; then
	diff -ruN "$BEFORE" "$AFTER" | head -n 200 >&2 || true
	echo >&2
	echo "verify-codegen: generated files are stale:" >&2
	sed -E "s|^Files $BEFORE/(.*) and $AFTER/.* differ$|  \\1|" "$TMP/stale" >&2
	echo "Run 'make generate' (hack/update-codegen.sh) and commit the result." >&2
	exit 1
fi
echo "verify-codegen: generated files are up to date"
