#!/usr/bin/env bash
# Removes everything hack/realnode-up.sh made: every process of the
# clusters and their pods, mounts, cgroups, network namespaces, the bridge,
# the state directory, and the host sysctls the kubelet changed. Then it
# checks that nothing is left and fails, naming it, if something is.
#
#   hack/realnode-down.sh        (same environment as realnode-up.sh)
#   KEEP_LOGS=DIR                copy the clusters' logs there first
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/realnode-lib.sh
source "$ROOT/hack/realnode-lib.sh"
[ "$(id -u)" = 0 ] || { echo "realnode-down: needs root" >&2; exit 2; }

log() { printf '>> realnode-down: %s\n' "$*" >&2; }

if [ -n "${KEEP_LOGS:-}" ] && [ -d "$STATE_DIR" ]; then
	mkdir -p "$KEEP_LOGS"
	for d in "$STATE_DIR"/*/logs; do
		[ -d "$d" ] && cp -r "$d" "$KEEP_LOGS/$(basename "$(dirname "$d")")" 2>/dev/null
	done
fi

# stop_pid FILE: TERM, then KILL after 10 s.
stop_pid() {
	local pid
	pid=$(cat "$1" 2>/dev/null) || return 0
	[ -n "$pid" ] || return 0
	kill -CONT "$pid" 2>/dev/null
	kill -TERM "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null
}

# cgroup_dirs CLUSTER: the cluster's kubelet cgroup root in every v1 hierarchy.
cgroup_dirs() {
	local sub
	for sub in /sys/fs/cgroup/*/; do
		[ -d "$sub$PREFIX-$1" ] && echo "$sub$PREFIX-$1"
	done
}

# stop_cluster CLUSTER: every process of it and of its pods.
stop_cluster() {
	local c=$1 d sock f t name
	d=$STATE_DIR/$c
	sock=$RUN_DIR/$c/containerd.sock
	# Thaw a cluster realnode-ctl.sh froze, or nothing below can stop it.
	for f in $(cgroup_dirs "$c"); do
		[ -f "$f/freezer.state" ] && echo THAWED >"$f/freezer.state" 2>/dev/null
	done
	[ -f "$d/pids/kubelet.pid" ] && stop_pid "$d/pids/kubelet.pid"
	# The pods: their tasks through containerd, so the shims exit cleanly
	# and remove their sockets.
	if [ -S "$sock" ]; then
		local ctl=(ctr --address "$sock" -n k8s.io)
		# libcni caches each sandbox's results under /var/lib/cni by
		# container ID (containerd's loopback network too): the IDs of
		# this containerd's, whose sandboxes are not removed through CRI.
		timeout 20 "${ctl[@]}" containers ls -q 2>/dev/null >"$d/container-ids" || true
		for t in $(timeout 20 "${ctl[@]}" tasks ls -q 2>/dev/null); do
			timeout 10 "${ctl[@]}" tasks kill -s SIGKILL "$t" >/dev/null 2>&1
		done
		for t in $(timeout 20 "${ctl[@]}" tasks ls -q 2>/dev/null); do
			timeout 20 "${ctl[@]}" tasks delete -f "$t" >/dev/null 2>&1
		done
	fi
	# Whatever is still in the pods' cgroups.
	for f in $(cgroup_dirs "$c"); do
		find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null
	done
	for name in kube-proxy containerd kube-scheduler kube-controller-manager kube-apiserver etcd; do
		[ -f "$d/pids/$name.pid" ] && stop_pid "$d/pids/$name.pid"
	done
	# Shims of this containerd that outlived it.
	pkill -KILL -f "containerd-shim-runc-v2 .*-address $sock" 2>/dev/null
	return 0
}

# The clusters side by side.
for k in $(seq 0 "$MEMBERS"); do
	stop_cluster "$(cluster_name "$k")" &
done
wait

# Mounts under the state and run directories (pod volumes, rootfs, netns).
for _ in 1 2 3; do
	mounts=$(findmnt -rn -o TARGET | grep -E "^($STATE_DIR|$RUN_DIR)(/|$)" | sort -r)
	[ -n "$mounts" ] || break
	echo "$mounts" | xargs -r -d '\n' umount -l 2>/dev/null
done

for k in $(seq 0 "$MEMBERS"); do
	c=$(cluster_name "$k")
	for f in $(cgroup_dirs "$c"); do
		find "$f" -depth -type d -exec rmdir {} \; 2>/dev/null
	done
	ns=$(netns "$c")
	[ -e "/run/netns/$ns" ] && ip netns del "$ns"
	ip link del "${PREFIX}-${k}h" 2>/dev/null
done
ip link del "$BRIDGE" 2>/dev/null
# `ip netns add` made /run/netns a mount point of its own: undone when no
# network namespace is left in it.
if [ -d /run/netns ] && [ -z "$(ls -A /run/netns)" ]; then
	umount /run/netns 2>/dev/null
	rmdir /run/netns 2>/dev/null
fi
for k in $(seq 0 "$MEMBERS"); do
	ids=$STATE_DIR/$(cluster_name "$k")/container-ids
	[ -s "$ids" ] || continue
	while read -r id; do
		rm -f /var/lib/cni/results/*-"$id"-* 2>/dev/null
	done <"$ids"
done
rm -f /var/lib/cni/results/"$PREFIX"-* 2>/dev/null
# libcni's cache directories, when nothing else uses them.
rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null

# What the kubelet and runc keep at fixed host paths: /var/log/containers
# links into the clusters' pod logs, the device plugin socket (every kubelet
# serves /var/lib/kubelet/device-plugins/kubelet.sock), the shims' runc
# state and socket directories. Directories go only when empty, a socket
# only when nothing serves it: a real kubelet on this host keeps its own.
find /var/log/containers -maxdepth 1 -type l -lname "$STATE_DIR/*" -delete 2>/dev/null
sock=/var/lib/kubelet/device-plugins/kubelet.sock
if [ -S "$sock" ] && ! ss -xlH 2>/dev/null | grep -qF "$sock"; then
	rm -f "$sock"
fi
rmdir /var/log/containers /var/lib/kubelet/device-plugins /var/lib/kubelet \
	/run/containerd/runc/k8s.io /run/containerd/runc /run/containerd/s /run/containerd 2>/dev/null

if [ -f "$STATE_DIR/host-sysctls" ]; then
	while IFS='=' read -r key value; do
		sysctl -qw "$key=$value" || log "could not restore $key=$value"
	done <"$STATE_DIR/host-sysctls"
fi
rm -rf "$RUN_DIR"
# Keep the images (built from the project's binaries) for the next run.
if [ -d "$STATE_DIR" ]; then
	find "$STATE_DIR" -mindepth 1 -maxdepth 1 ! -name images -exec rm -rf {} +
fi

# Nothing may be left.
left=()
pgrep -f -- "$STATE_DIR/|$RUN_DIR/" >/dev/null && left+=("processes: $(pgrep -a -f -- "$STATE_DIR/|$RUN_DIR/" | head -5 | tr '\n' ';')")
findmnt -rn -o TARGET | grep -qE "^($STATE_DIR|$RUN_DIR)(/|$)" && left+=(mounts)
for k in $(seq 0 "$MEMBERS"); do
	c=$(cluster_name "$k")
	[ -e "/run/netns/$(netns "$c")" ] && left+=("netns $(netns "$c")")
	[ -n "$(cgroup_dirs "$c")" ] && left+=("cgroups $(cgroup_dirs "$c" | head -1)")
done
ip link show "$BRIDGE" >/dev/null 2>&1 && left+=("bridge $BRIDGE")
[ -n "$(find /var/log/containers -maxdepth 1 -lname "$STATE_DIR/*" 2>/dev/null)" ] && left+=("links in /var/log/containers")
if [ ${#left[@]} -gt 0 ]; then
	log "left behind: ${left[*]}"
	exit 1
fi
log "removed"
