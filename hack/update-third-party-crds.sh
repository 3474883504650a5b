#!/usr/bin/env bash
# Re-fetches the third-party CRDs vendored under test/crds/ (the real APIs
# the shipped customizations in manifests/interpreters/ are tested against):
#
#   hack/update-third-party-crds.sh [FLINK_SOURCE [KRUISE_SOURCE]]
#
# - Argo Rollouts' Rollout CRD from its Go module, through the Go module
#   proxy (`go mod download` in a temporary module: our go.mod is not
#   touched). The module ships manifests/crds/ in its zip.
# - Apache Flink Kubernetes Operator's FlinkDeployment CRD (not a Go
#   module) from a git checkout of apache/flink-kubernetes-operator:
#   FLINK_SOURCE is its directory (a clone or a bare mirror); `git show` reads
#   the release tag, so the checkout's work tree does not matter.
# - OpenKruise's CloneSet CRD from a git checkout of openkruise/kruise
#   (KRUISE_SOURCE; its Go module is not served by the module proxy).
#
# Environment:
#   ARGO_ROLLOUTS_VERSION  module version (default: the one in test/crds/README.md)
#   FLINK_OPERATOR_TAG     git tag (default: the one in test/crds/README.md)
#   KRUISE_TAG             git tag (default: the one in test/crds/README.md)
#
# Afterwards update the versions in test/crds/README.md and run the
# customization tests (go test ./manifests/interpreters/) and the e2e specs
# "Shipped customizations".
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST=$ROOT/test/crds
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

readme_version() { sed -n "s/^| $1 | \`\([^\`]*\)\`.*/\1/p" "$DEST/README.md" | head -n1; }
ARGO_ROLLOUTS_VERSION=${ARGO_ROLLOUTS_VERSION:-$(readme_version argo-rollouts)}
FLINK_OPERATOR_TAG=${FLINK_OPERATOR_TAG:-$(readme_version flink-kubernetes-operator)}
KRUISE_TAG=${KRUISE_TAG:-$(readme_version openkruise)}
[ -n "$ARGO_ROLLOUTS_VERSION" ] || die "no Argo Rollouts version (set ARGO_ROLLOUTS_VERSION)"
[ -n "$FLINK_OPERATOR_TAG" ] || die "no Flink operator tag (set FLINK_OPERATOR_TAG)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Argo Rollouts. `go mod download -json` prints the zip's path in the module
# cache; it may also print an Error when the module needs a newer Go than
# this one (it still downloads and verifies the zip), so only Zip counts.
mod=github.com/argoproj/argo-rollouts
(cd "$tmp" && go mod init tmp >/dev/null 2>&1 && GOFLAGS=-mod=mod go mod download -json "$mod@$ARGO_ROLLOUTS_VERSION" >"$tmp/mod.json") || true
zip=$(sed -n 's/^[[:space:]]*"Zip": "\(.*\)",$/\1/p' "$tmp/mod.json")
[ -n "$zip" ] && [ -f "$zip" ] || die "go mod download $mod@$ARGO_ROLLOUTS_VERSION: $(cat "$tmp/mod.json")"
prefix="$mod@$ARGO_ROLLOUTS_VERSION"
mkdir -p "$DEST/argo-rollouts"
unzip -p "$zip" "$prefix/manifests/crds/rollout-crd.yaml" >"$DEST/argo-rollouts/rollout-crd.yaml"
unzip -p "$zip" "$prefix/LICENSE" >"$DEST/argo-rollouts/LICENSE"
echo ">> argo-rollouts $ARGO_ROLLOUTS_VERSION: test/crds/argo-rollouts/rollout-crd.yaml"

# Flink Kubernetes Operator.
src=${1:-}
if [ -z "$src" ]; then
	echo ">> flink-kubernetes-operator, openkruise: skipped (pass checkouts of apache/flink-kubernetes-operator and openkruise/kruise)"
	exit 0
fi
git -C "$src" rev-parse --verify -q "$FLINK_OPERATOR_TAG^{commit}" >/dev/null || die "$src has no tag $FLINK_OPERATOR_TAG"
mkdir -p "$DEST/flink-kubernetes-operator"
crd=helm/flink-kubernetes-operator/crds/flinkdeployments.flink.apache.org-v1.yml
git -C "$src" show "$FLINK_OPERATOR_TAG:$crd" >"$DEST/flink-kubernetes-operator/flinkdeployments.flink.apache.org-v1.yml"
git -C "$src" show "$FLINK_OPERATOR_TAG:LICENSE" >"$DEST/flink-kubernetes-operator/LICENSE"
git -C "$src" show "$FLINK_OPERATOR_TAG:NOTICE" >"$DEST/flink-kubernetes-operator/NOTICE"
echo ">> flink-kubernetes-operator $FLINK_OPERATOR_TAG ($(git -C "$src" rev-parse "$FLINK_OPERATOR_TAG^{commit}")): test/crds/flink-kubernetes-operator/"

# OpenKruise.
src=${2:-}
if [ -z "$src" ]; then
	echo ">> openkruise: skipped (pass a checkout of openkruise/kruise)"
	exit 0
fi
git -C "$src" rev-parse --verify -q "$KRUISE_TAG^{commit}" >/dev/null || die "$src has no tag $KRUISE_TAG"
mkdir -p "$DEST/openkruise"
git -C "$src" show "$KRUISE_TAG:config/crd/bases/apps.kruise.io_clonesets.yaml" >"$DEST/openkruise/apps.kruise.io_clonesets.yaml"
git -C "$src" show "$KRUISE_TAG:LICENSE.md" >"$DEST/openkruise/LICENSE.md"
echo ">> openkruise $KRUISE_TAG ($(git -C "$src" rev-parse "$KRUISE_TAG^{commit}")): test/crds/openkruise/"
