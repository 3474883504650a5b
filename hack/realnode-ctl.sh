#!/usr/bin/env bash
# Faults for the real-node clusters (hack/realnode-up.sh):
#
#   hack/realnode-ctl.sh stop-cluster  CLUSTER   # e.g. member1: its apiserver, etcd, controllers,
#                                                # kubelet, kube-proxy, containerd and every pod stop
#   hack/realnode-ctl.sh start-cluster CLUSTER   # ... and go on where they stopped
#   hack/realnode-ctl.sh stop-apiserver  CLUSTER # e.g. hub: only its apiserver and etcd stop;
#   hack/realnode-ctl.sh start-apiserver CLUSTER # nodes, kubelets and pods go on running
#
# A stopped cluster is frozen, not killed (SIGSTOP to its processes, the
# cgroup freezer for its pods): from outside it looks like a power loss or a
# partition (connections hang, nothing answers), and it comes back with its
# state, as a node that is switched back on does.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/realnode-lib.sh
source "$ROOT/hack/realnode-lib.sh"

[ $# = 2 ] || { echo "usage: $0 stop-cluster|start-cluster|stop-apiserver|start-apiserver CLUSTER" >&2; exit 2; }
action=$1 c=$2
d=$STATE_DIR/$c
[ -d "$d/pids" ] || { echo "realnode-ctl: no cluster $c under $STATE_DIR" >&2; exit 1; }
freezer=/sys/fs/cgroup/freezer/$PREFIX-$c
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy containerd)

signal_all() {
	local name
	for name in "${@:2}"; do
		[ -f "$d/pids/$name.pid" ] && kill "-$1" "$(cat "$d/pids/$name.pid")" 2>/dev/null || true
	done
}

case $action in
stop-cluster)
	[ -d "$freezer" ] || { echo "realnode-ctl: no freezer cgroup $freezer" >&2; exit 1; }
	echo FROZEN >"$freezer/freezer.state"
	signal_all STOP "${components[@]}"
	;;
start-cluster)
	signal_all CONT "${components[@]}"
	[ -d "$freezer" ] && echo THAWED >"$freezer/freezer.state"
	;;
stop-apiserver)
	signal_all STOP kube-apiserver etcd
	;;
start-apiserver)
	signal_all CONT etcd kube-apiserver
	;;
*)
	echo "realnode-ctl: unknown action $action" >&2
	exit 2
	;;
esac
