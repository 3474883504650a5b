#!/usr/bin/env bash
# Makes the kustomize overlay that installs the agent in one member cluster:
#
#   hack/agent-overlay.sh NAME [HUB_KUBECONFIG]
#
# writes kustomize/agent/overlays/NAME/ with
#   kustomization.yaml  the agent base + --cluster-name=NAME + a Secret
#                       generated from hub.kubeconfig
#   hub.kubeconfig      the agent's identity on the hub: with HUB_KUBECONFIG
#                       (an admin or flotilla:registrar kubeconfig of the hub),
#                       the output of `hub agent-kubeconfig --cluster NAME`;
#                       without it, a placeholder to replace. Mode 0600, and
#                       never in git: kustomize/agent/overlays/.gitignore
#                       ignores every overlay's hub.kubeconfig (a fresh clone
#                       has none, so the overlay does not build until this
#                       script has written one).
# Then: kubectl --context <member> apply --server-side -k kustomize/agent/overlays/NAME
#
# Environment:
#   HUB_SERVER    hub apiserver URL as the member reaches it (default: the one
#                 in HUB_KUBECONFIG); passed to `hub agent-kubeconfig --server`
#   DURATION      token lifetime requested (default 8760h; the hub's apiserver
#                 may cap it: rerun this script to rotate, then re-apply)
#   HUB_CONTEXT   context of HUB_KUBECONFIG to use (default: its current one)
#   HUB_BIN       the hub binary (default bin/hub; `make build` makes it)
#   OVERLAYS_DIR  where overlays go (default kustomize/agent/overlays)
#
# Rerunning keeps an existing kustomization.yaml (your edits) and rewrites
# hub.kubeconfig only when HUB_KUBECONFIG is given (token rotation).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $0 NAME [HUB_KUBECONFIG]"
name=$1
hub_kubeconfig=${2:-}
# A Cluster name is a DNS-1123 subdomain; its hub namespace flotilla-es-NAME
# must also be a valid namespace name (a DNS-1123 label of at most 63).
[[ $name =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] && [ ${#name} -le 51 ] ||
	die "cluster name \"$name\": want lower-case letters, digits and '-', at most 51 characters (flotilla-es-NAME must be a namespace name)"

overlays=${OVERLAYS_DIR:-$ROOT/kustomize/agent/overlays}
dir=$overlays/$name
base=$ROOT/kustomize/agent/base
mkdir -p "$dir"
# The overlay refers to the base by a relative path, so it works from any checkout.
rel_base=$(realpath --relative-to="$dir" "$base")

if [ ! -f "$dir/kustomization.yaml" ]; then
	cat >"$dir/kustomization.yaml" <<EOF
# The Flotilla agent for member cluster "$name":
#   kubectl --context <member> apply --server-side -k ${dir#"$ROOT"/}
# Made by hack/agent-overlay.sh; hub.kubeconfig is this member's agent
# identity on the hub (\`hub agent-kubeconfig --cluster $name\`), and it
# also holds the hub endpoint (its server: URL). docs/install.md.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $rel_base
patches:
# The Cluster object on the hub this agent works for.
- target:
    group: apps
    version: v1
    kind: Deployment
    name: flotilla-agent
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --cluster-name=$name
# The Secret's name gets a hash of its content: applying a rotated
# hub.kubeconfig rolls the agent pods onto it. hub.kubeconfig holds a token
# and is not in git: \`hack/agent-overlay.sh $name HUB_KUBECONFIG\` writes it.
secretGenerator:
- name: flotilla-agent-hub-kubeconfig
  namespace: flotilla-system
  files:
  - hub.kubeconfig
EOF
	echo "wrote ${dir#"$ROOT"/}/kustomization.yaml" >&2
fi

if [ -n "$hub_kubeconfig" ]; then
	[ -r "$hub_kubeconfig" ] || die "cannot read $hub_kubeconfig"
	hub=${HUB_BIN:-$ROOT/bin/hub}
	[ -x "$hub" ] || die "$hub missing: run \`make build\` (or set HUB_BIN)"
	args=(agent-kubeconfig --kubeconfig "$hub_kubeconfig" --cluster "$name" --duration "${DURATION:-8760h}")
	[ -n "${HUB_SERVER:-}" ] && args+=(--server "$HUB_SERVER")
	[ -n "${HUB_CONTEXT:-}" ] && args+=(--context "$HUB_CONTEXT")
	out=$(umask 077 && mktemp "$dir/.hub.kubeconfig.XXXXXX")
	"$hub" "${args[@]}" >"$out" || { rm -f "$out"; die "hub agent-kubeconfig failed (is Cluster \"$name\" registered and the hub running?)"; }
	mv "$out" "$dir/hub.kubeconfig"
	echo "wrote ${dir#"$ROOT"/}/hub.kubeconfig (a token: keep it out of version control)" >&2
elif [ ! -f "$dir/hub.kubeconfig" ]; then
	# 0600 like the real one, which replaces it in place.
	(umask 077 && cat >"$dir/hub.kubeconfig") <<EOF
# PLACEHOLDER: replace this file with the agent's real hub kubeconfig before
# applying the overlay. Either
#   hack/agent-overlay.sh $name <hub admin kubeconfig>
# or
#   bin/hub agent-kubeconfig --kubeconfig <hub admin kubeconfig> --cluster $name \\
#     --server https://<hub apiserver as the member reaches it> > hub.kubeconfig
# (the Cluster "$name" must exist on the hub first). Applied as it is, the
# agent cannot reach hub.example.invalid and never becomes ready.
apiVersion: v1
kind: Config
clusters:
- name: hub
  cluster:
    server: https://hub.example.invalid:6443
contexts:
- name: flotilla-agent-$name
  context:
    cluster: hub
    user: flotilla-agent-$name
    namespace: flotilla-es-$name
current-context: flotilla-agent-$name
users:
- name: flotilla-agent-$name
  user:
    token: REPLACE-ME
EOF
	echo "wrote ${dir#"$ROOT"/}/hub.kubeconfig (placeholder: replace it, see its comment)" >&2
fi
