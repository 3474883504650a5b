# Shared by hack/realnode-{up,down,ctl,install}.sh: names, addresses and the
# preflight of the real-node clusters. Sourced, not run.
# shellcheck shell=bash

BIN=${FLOTILLA_BIN:-$ROOT/bin}
MEMBERS=${REALNODE_MEMBERS:-2}
PREFIX=${REALNODE_PREFIX:-flrn}
SUBNET=${REALNODE_SUBNET:-10.213.0}
STATE_DIR=${REALNODE_STATE_DIR:-$ROOT/.local/realnode}
RUN_DIR=/run/$PREFIX
BRIDGE=$PREFIX-br
# Pod networks: $PODNET.<k>.0/24 for cluster k (0 the hub), inside its netns.
PODNET=${REALNODE_PODNET:-10.214}
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
DNS_IP=10.96.0.10
PAUSE_IMAGE=localhost/flotilla-e2e/pause:1
COREDNS_IMAGE=localhost/flotilla-e2e/coredns:1
REGIONS=(hub-region region-a region-b region-c region-d)

# cluster_name K: hub for 0, member<K> otherwise.
cluster_name() { if [ "$1" = 0 ]; then echo hub; else echo "member$1"; fi; }
# netns CLUSTER: its network namespace.
netns() { echo "$PREFIX-$1"; }
# node_labels CLUSTER K: the node's topology labels.
node_labels() { echo "topology.kubernetes.io/region=${REGIONS[$2]},topology.kubernetes.io/zone=${REGIONS[$2]}-1"; }

# realnode_preflight: one line saying why these clusters cannot run here, and
# status 1; status 0 when they can.
realnode_preflight() {
	local missing=()
	if [ "$(id -u)" != 0 ]; then
		echo "realnode: skipped: needs root (network namespaces, containerd, kubelet); running as uid $(id -u)" >&2
		return 1
	fi
	for cmd in containerd containerd-shim-runc-v2 runc ctr iptables conntrack ip nsenter openssl; do
		command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
	done
	[ -x /usr/lib/cni/bridge ] || missing+=(/usr/lib/cni/bridge)
	# The clusters' cgroup roots and stop-cluster's freezer are cgroup v1's
	# (the only hierarchy on the project's machines, ../shared/realnode.md).
	if [ ! -d /sys/fs/cgroup/freezer ] || [ ! -d /sys/fs/cgroup/memory ]; then
		echo "realnode: skipped: needs cgroup v1 hierarchies (freezer, memory) under /sys/fs/cgroup" >&2
		return 1
	fi
	if [ ${#missing[@]} -gt 0 ]; then
		echo "realnode: skipped: missing ${missing[*]} (apt-get install containerd runc containernetworking-plugins iptables conntrack iproute2 openssl)" >&2
		return 1
	fi
	return 0
}
