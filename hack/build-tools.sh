#!/usr/bin/env bash
# Builds the real Kubernetes components (and the code generators) that tests
# and `make up` run, from the pinned Go modules under hack/tools/, into bin/.
#
# A tool is rebuilt only when its recipe changes: each binary has a stamp in
# bin/.stamps/ holding the hash of its tools module (go.mod + go.sum, and the
# Go files of its own cmd/ if it has one) and build flags.
# Usage: hack/build-tools.sh [tool ...]   (default: all)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${FLOTILLA_BIN:-$ROOT/bin}
TOOLS=$ROOT/hack/tools
STAMPS=$BIN/.stamps
mkdir -p "$STAMPS"

KUBE_VERSION=v1.36.3
KUBE_LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/client-go/pkg/version.gitVersion=${KUBE_VERSION} -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=36"

PROM_VERSION=3.16.0 # github.com/prometheus/prometheus v0.316.0 in hack/tools/monitoring
PROM_LDFLAGS="-s -w -X github.com/prometheus/common/version.Version=${PROM_VERSION} -X github.com/prometheus/common/version.Branch=HEAD"
PROM_TAGS="remove_all_sd"

# name | tools module | package | ldflags [| build tags]
RECIPES=(
	"etcd|kube|go.etcd.io/etcd/server/v3|-s -w"
	"kube-apiserver|kube|k8s.io/kubernetes/cmd/kube-apiserver|${KUBE_LDFLAGS}"
	"kube-controller-manager|kube|k8s.io/kubernetes/cmd/kube-controller-manager|${KUBE_LDFLAGS}"
	"kube-scheduler|kube|k8s.io/kubernetes/cmd/kube-scheduler|${KUBE_LDFLAGS}"
	"kubectl|kube|k8s.io/kubernetes/cmd/kubectl|${KUBE_LDFLAGS}"
	# The real-node e2e provider (e2e/framework/realnode) runs these on
	# containerd; nothing else builds them, so `make up` never waits for them.
	"kubelet|kube|k8s.io/kubernetes/cmd/kubelet|${KUBE_LDFLAGS}"
	"kube-proxy|kube|k8s.io/kubernetes/cmd/kube-proxy|${KUBE_LDFLAGS}"
	"kwok|kwok|sigs.k8s.io/kwok/cmd/kwok|-s -w"
	"kwokctl|kwok|sigs.k8s.io/kwok/cmd/kwokctl|-s -w"
	"coredns|coredns|github.com/flotilla-io/flotilla/hack/tools/coredns/cmd/coredns|-s -w"
	# ExternalDNS with its crd source and CoreDNS provider only (the
	# upstream main links dependencies the module proxy does not serve:
	# hack/tools/externaldns/cmd/external-dns); test/externaldns runs it.
	"external-dns|externaldns|github.com/flotilla-io/flotilla/hack/tools/externaldns/cmd/external-dns|-s -w"
	"controller-gen|codegen|sigs.k8s.io/controller-tools/cmd/controller-gen|-s -w"
	"deepcopy-gen|codegen|k8s.io/code-generator/cmd/deepcopy-gen|-s -w"
	"client-gen|codegen|k8s.io/code-generator/cmd/client-gen|-s -w"
	"lister-gen|codegen|k8s.io/code-generator/cmd/lister-gen|-s -w"
	"informer-gen|codegen|k8s.io/code-generator/cmd/informer-gen|-s -w"
	"staticcheck|lint|honnef.co/go/tools/cmd/staticcheck|-s -w"
	# remove_all_sd: only static and file service discovery, which is all
	# these binaries need (promtool tests rules; make up's Prometheus scrapes
	# local processes). Leaving Kubernetes SD out also leaves out client-go
	# and k8s.io/api at another version than the kube tools': 1-2 min of a
	# cold build.
	"promtool|monitoring|github.com/prometheus/prometheus/cmd/promtool|${PROM_LDFLAGS}|${PROM_TAGS}"
	"prometheus|monitoring|github.com/prometheus/prometheus/cmd/prometheus|${PROM_LDFLAGS}|${PROM_TAGS}"
)

want=("$@")
selected() {
	[ ${#want[@]} -eq 0 ] && return 0
	local w
	for w in "${want[@]}"; do [ "$w" = "$1" ] && return 0; done
	return 1
}
# A name without a recipe is a typo in a caller's list (e.g. make up's), not
# something to skip silently.
for w in "${want[@]}"; do
	known=""
	for recipe in "${RECIPES[@]}"; do [ "${recipe%%|*}" = "$w" ] && known=1; done
	[ -n "$known" ] || { echo "hack/build-tools.sh: no recipe for $w" >&2; exit 1; }
done

for recipe in "${RECIPES[@]}"; do
	IFS='|' read -r name module pkg ldflags tags <<<"$recipe"
	selected "$name" || continue
	# A tools module's own main packages (cmd/: CoreDNS's plugin list,
	# ExternalDNS's main) are part of the recipe; its tools.go is not.
	stamp=$( (cat "$TOOLS/$module/go.mod" "$TOOLS/$module/go.sum"; echo "$pkg $ldflags${tags:+ tags=$tags}"; go env GOVERSION
		if [ -d "$TOOLS/$module/cmd" ]; then find "$TOOLS/$module/cmd" -name '*.go' | LC_ALL=C sort | xargs cat; fi) | sha256sum | cut -c1-16)
	if [ -x "$BIN/$name" ] && [ "$(cat "$STAMPS/$name" 2>/dev/null)" = "$stamp" ]; then
		continue
	fi
	echo ">> building $name ($pkg)"
	start=$(date +%s)
	# A temporary name of this run's own: two runs building one tool at once
	# (make up beside make test) each rename a whole binary into place.
	(cd "$TOOLS/$module" && CGO_ENABLED=0 go build -trimpath ${tags:+-tags "$tags"} -ldflags "$ldflags" -o "$BIN/$name.tmp.$$" "$pkg")
	mv "$BIN/$name.tmp.$$" "$BIN/$name"
	echo "$stamp" >"$STAMPS/$name"
	echo "   $name built in $(($(date +%s) - start))s"
done
