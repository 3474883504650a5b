#!/usr/bin/env bash
# Controls single parts of an environment hack/local-up.sh started, for fault
# injection by the e2e suite and by hand:
#
#   local-ctl.sh stop|kill|start|restart PROCESS   hub, agent-member1-0, coredns-member1, prometheus, …
#   local-ctl.sh pid PROCESS                       prints the pid (fails if not running)
#   local-ctl.sh stop-cluster|start-cluster NAME   a kwok cluster, e.g. flotilla-member1
#
# stop sends SIGTERM (then SIGKILL after 15s), kill sends SIGKILL at once, start
# runs the command local-up.sh recorded for the process.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1 name=$2

running_pid() {
	local pid
	pid=$(cat "$PID_DIR/$name.pid" 2>/dev/null) || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	echo "$pid"
}

case $action in
pid) running_pid || die "$name is not running" ;;
stop) stop_pidfile "$PID_DIR/$name.pid" ;;
kill)
	pid=$(running_pid) || die "$name is not running"
	kill -KILL "$pid"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
	rm -f "$PID_DIR/$name.pid"
	;;
start | restart)
	[ -f "$CMD_DIR/$name" ] || die "no recorded command for $name in $CMD_DIR"
	if [ "$action" = start ] && running_pid >/dev/null; then die "$name is already running"; fi
	eval "start_process $name $(cat "$CMD_DIR/$name")"
	;;
stop-cluster)
	# kwok holds its nodes' Leases under a random per-process identity, so a
	# restarted kwok waits for the old Leases to expire (200s with kwokctl's
	# heartbeat factor) before it runs pods again; a real kubelet's holder is
	# its node name and renews at once. Dropping the Leases while stopping
	# gives the restart the real kubelet's behaviour (best effort: the
	# apiserver may already be gone).
	"$KUBECTL" --kubeconfig "$(kwok_kubeconfig "$name")" -n kube-node-lease delete leases --all --request-timeout=5s >/dev/null 2>&1 || true
	"$KWOKCTL" stop cluster --name "$name" >>"$LOG_DIR/kwokctl.log" 2>&1 || die "kwokctl stop cluster $name failed; see $LOG_DIR/kwokctl.log"
	;;
start-cluster)
	"$KWOKCTL" start cluster --name "$name" --wait 120s >>"$LOG_DIR/kwokctl.log" 2>&1 || die "kwokctl start cluster $name failed; see $LOG_DIR/kwokctl.log"
	;;
*) usage ;;
esac
