#!/usr/bin/env bash
# Shared settings of hack/local-up.sh and hack/local-down.sh. Everything is
# overridable from the environment so the e2e suite can run an environment of
# its own beside the one `make up` gave a developer.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${FLOTILLA_BIN:-$ROOT/bin}
# Names: kwok clusters and kubeconfig contexts are $PREFIX-hub and
# $PREFIX-member<i>; the Cluster objects on the hub are member<i>.
PREFIX=${FLOTILLA_PREFIX:-flotilla}
STATE_DIR=${FLOTILLA_STATE_DIR:-$ROOT/.local}
KUBECONFIG_OUT=${FLOTILLA_KUBECONFIG:-$HOME/.kube/flotilla.config}
# Hub ports start at PORT_BASE; member i uses PORT_BASE+100*i and up (its
# CoreDNS first, then agent health/metrics pairs).
PORT_BASE=${FLOTILLA_PORT_BASE:-17000}
MEMBERS=${MEMBERS:-3}
NODES=${NODES:-3}
AGENTS_PER_MEMBER=${AGENTS_PER_MEMBER:-2}
FAST=${FAST:-0}
# MONITORING=1: local-up.sh also runs Prometheus on PROMETHEUS_PORT (19090
# with the default PORT_BASE; the e2e environment's base moves it too).
MONITORING=${MONITORING:-0}
PROMETHEUS_PORT=${FLOTILLA_PROMETHEUS_PORT:-$((PORT_BASE + 2090))}

LOG_DIR=$STATE_DIR/logs
PID_DIR=$STATE_DIR/pids
# Each background process's command line, so hack/local-ctl.sh can restart it.
CMD_DIR=$STATE_DIR/cmds
export KWOK_WORKDIR=$STATE_DIR/kwok
export KWOK_KUBE_VERSION=v1.36.3
export KWOK_KUBECTL_BINARY=$BIN/kubectl
KWOKCTL=$BIN/kwokctl
KUBECTL=$BIN/kubectl

log() { printf '>> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The hub's DNS traffic manager (MultiClusterIngress hosts).
hub_dns_port() { echo $((PORT_BASE + 53)); }
member_dns_port() { echo $((PORT_BASE + 100 * $1)); }
# CoreDNS's own /metrics (its prometheus plugin), next to its DNS port.
member_dns_metrics_port() { echo $((PORT_BASE + 100 * $1 + 1)); }
# agent_port MEMBER INDEX OFFSET: OFFSET 0 = health, 1 = metrics.
agent_port() { echo $((PORT_BASE + 100 * $1 + 10 + 2 * $2 + $3)); }
kwok_kubeconfig() { echo "$KWOK_WORKDIR/clusters/$1/kubeconfig.yaml"; }

# stop_pidfile FILE: SIGTERM the process, wait up to 15s, then SIGKILL.
stop_pidfile() {
	local file=$1 pid
	pid=$(cat "$file" 2>/dev/null) || return 0
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 150); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "$(basename "$file" .pid) did not stop on SIGTERM; killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$file"
}

# start_process NAME CMD...: run a process in its own session, logging to
# $LOG_DIR/NAME.log and recording its pid and command line; a previous
# instance is stopped first so re-running is safe.
start_process() {
	local name=$1
	shift
	mkdir -p "$LOG_DIR" "$PID_DIR" "$CMD_DIR"
	stop_pidfile "$PID_DIR/$name.pid"
	printf '%q ' "$@" >"$CMD_DIR/$name"
	setsid nohup "$@" >>"$LOG_DIR/$name.log" 2>&1 </dev/null &
	echo $! >"$PID_DIR/$name.pid"
}
