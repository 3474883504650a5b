#!/usr/bin/env bash
# Installs Flotilla on the real-node clusters of hack/realnode-up.sh only
# through the documented path (docs/install.md): the image from `make
# image`, imported into each node's containerd; `kubectl apply
# --server-side -k` of the hub kustomization; a Cluster object per member;
# `hack/agent-overlay.sh`; the agent overlay. docs/install.md#on-real-nodes
# shows these steps as the e2e suite runs them.
#
# The only additions are kustomize overlays of the shipped kustomizations,
# as a platform team writes them: the image built here, and extra flags
# (HUB_FLAGS, AGENT_FLAGS, DNS_PROBE_FLAGS: the e2e suite's short timers).
#
# Environment: as realnode-up.sh, and IMAGE (localhost/flotilla:e2e),
# DURATION (the agents' first hub token lifetime, default 8760h).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/realnode-lib.sh
source "$ROOT/hack/realnode-lib.sh"

IMAGE=${IMAGE:-localhost/flotilla:e2e}
KC=$STATE_DIR/kubeconfig
OVERLAYS=$STATE_DIR/overlays
log() { printf '>> realnode-install: %s\n' "$*" >&2; }
k() { "$BIN/kubectl" --kubeconfig "$KC" "$@"; }
hub() { k --context "$PREFIX-hub" "$@"; }
member() { local i=$1; shift; k --context "$PREFIX-member$i" "$@"; }

# overlay DIR BASE WORKLOAD=FLAGS...: a kustomization over BASE that deploys
# $IMAGE and appends FLAGS to the first container of each kind/name.
overlay() {
	local dir=$1 base=$2
	shift 2
	mkdir -p "$dir"
	{
		echo "apiVersion: kustomize.config.k8s.io/v1beta1"
		echo "kind: Kustomization"
		echo "resources:"
		echo "- $(realpath --relative-to="$dir" "$base")"
		echo "images:"
		echo "- name: ghcr.io/flotilla-io/flotilla"
		echo "  newName: ${IMAGE%:*}"
		echo "  newTag: ${IMAGE##*:}"
		echo "patches:"
		local spec kind name flags flag
		for spec in "$@"; do
			IFS='=' read -r kind name flags <<<"${spec/\//=}"
			[ -n "$flags" ] || continue
			echo "- target: {kind: $kind, name: $name}"
			echo "  patch: |-"
			for flag in $flags; do
				echo "    - {op: add, path: /spec/template/spec/containers/0/args/-, value: \"$flag\"}"
			done
		done
	} >"$dir/kustomization.yaml"
}

cd "$ROOT"

# 1. The binaries (hack/agent-overlay.sh runs bin/hub agent-kubeconfig) and
#    the image, as `make image` builds it, into every node's containerd.
#    (IMAGE_COMPONENT= leaves kustomize/image alone: the overlays below name
#    the image instead, and the work tree stays clean.)
log "make build; make image IMAGE=$IMAGE"
make --no-print-directory build >"$STATE_DIR/make-build.log" 2>&1 || { cat "$STATE_DIR/make-build.log" >&2; exit 1; }
make --no-print-directory image IMAGE="$IMAGE" IMAGE_COMPONENT= >"$STATE_DIR/make-image.log" 2>&1 ||
	{ cat "$STATE_DIR/make-image.log" >&2; exit 1; }
for k in $(seq 0 "$MEMBERS"); do
	c=$(cluster_name "$k")
	ctr --address "$RUN_DIR/$c/containerd.sock" -n k8s.io images import "$BIN/image/flotilla.tar" >/dev/null &
done
wait

# 2. The hub, with its DNS traffic manager.
overlay "$OVERLAYS/hub" "$ROOT/kustomize/hub-dns-traffic" "Deployment/flotilla-hub=${HUB_FLAGS:-}"
log "kubectl apply --server-side -k kustomize/hub-dns-traffic (+ image, flags)"
# (A second try: the CRDs of the first may not be served yet when the
# admission policies that reference their kinds are checked.)
hub apply --server-side -k "$OVERLAYS/hub" >"$STATE_DIR/apply-hub.log" 2>&1 ||
	{ sleep 2; hub apply --server-side -k "$OVERLAYS/hub" >"$STATE_DIR/apply-hub.log" 2>&1; } ||
	{ cat "$STATE_DIR/apply-hub.log" >&2; exit 1; }
hub -n flotilla-system rollout status deployment/flotilla-hub --timeout 240s >/dev/null

# 3. A Cluster object per member; the hub makes its namespace, Lease and the
#    agent's identity.
for i in $(seq 1 "$MEMBERS"); do
	hub apply -f - >/dev/null <<EOF
apiVersion: cluster.flotilla.io/v1alpha1
kind: Cluster
metadata:
  name: member$i
spec:
  syncMode: Pull
  provider: realnode
  region: ${REGIONS[$i]}
  zones: [${REGIONS[$i]}-1]
EOF
done

# 4. The overlay per member (hub agent-kubeconfig), written outside the work
#    tree; then the agent, and every pod rolled out.
for i in $(seq 1 "$MEMBERS"); do
	deadline=$((SECONDS + 120))
	until hub -n "flotilla-es-member$i" get serviceaccount flotilla-agent >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || { log "the hub made no identity for member$i"; exit 1; }
		sleep 1
	done
	HUB_SERVER=https://$SUBNET.10:6443 HUB_CONTEXT=$PREFIX-hub OVERLAYS_DIR=$OVERLAYS/agent DURATION=${DURATION:-8760h} \
		hack/agent-overlay.sh "member$i" "$KC"
	overlay "$OVERLAYS/member$i" "$OVERLAYS/agent/member$i" \
		"Deployment/flotilla-agent=${AGENT_FLAGS:-}" "DaemonSet/flotilla-dns-probe=${DNS_PROBE_FLAGS:-}"
	log "kubectl --context $PREFIX-member$i apply --server-side -k (overlay of hack/agent-overlay.sh member$i)"
	member "$i" apply --server-side -k "$OVERLAYS/member$i" >/dev/null
done
for i in $(seq 1 "$MEMBERS"); do
	member "$i" -n flotilla-system rollout status deployment/flotilla-agent --timeout 240s >/dev/null
	member "$i" -n flotilla-system rollout status daemonset/flotilla-dns-probe --timeout 240s >/dev/null
done
for i in $(seq 1 "$MEMBERS"); do
	hub wait --for condition=Ready "cluster/member$i" --timeout 240s >/dev/null
	log "member$i Ready on the hub"
done
