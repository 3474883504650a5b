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
# The hub's admission webhook (ResourceInterpreterCustomizations), HTTPS.
hub_webhook_port() { echo $((PORT_BASE + 43)); }
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

# duration_seconds DURATION: a Go duration (30s, 1m, 1m30s, 1h, 500ms) in
# whole seconds, rounded up; a bare number is seconds.
duration_seconds() {
	local d=$1 total_ms=0 n unit
	[[ $d =~ ^[0-9]+$ ]] && { echo "$d"; return; }
	while [[ $d =~ ^([0-9]+)(ms|h|m|s)(.*)$ ]]; do
		n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]} d=${BASH_REMATCH[3]}
		case $unit in
		ms) total_ms=$((total_ms + n)) ;;
		s) total_ms=$((total_ms + n * 1000)) ;;
		m) total_ms=$((total_ms + n * 60000)) ;;
		h) total_ms=$((total_ms + n * 3600000)) ;;
		esac
	done
	[ -z "$d" ] || die "cannot read the duration $1"
	echo $(((total_ms + 999) / 1000))
}

# flag_value NAME DEFAULT ARGS...: the value of the last --NAME=VALUE or
# --NAME VALUE among ARGS, else DEFAULT.
flag_value() {
	local name=$1 value=$2
	shift 2
	while [ $# -gt 0 ]; do
		case $1 in
		--"$name"=*) value=${1#*=} ;;
		--"$name") [ $# -lt 2 ] || { value=$2; shift; } ;;
		esac
		shift
	done
	echo "$value"
}

# members_ready_timeout AGENT_ARGS...: how long, in seconds, members may take
# to be Ready and untainted on the hub after their agents (re)started. A new
# agent leader continues from the Ready condition on the hub: a member that
# was down (Ready False, or Unknown from the hub, with its taint) turns True
# only after --cluster-success-threshold of healthy probes, seen at the
# probes every --cluster-status-update-frequency, and only once a leader
# holds the member's election Lease (a predecessor that could not release
# it holds it for --leader-elect-lease-duration). One failed probe on a busy
# machine starts the threshold over, so twice that, plus the hub's own
# election (it removes the taint) and a margin. READY_TIMEOUT (seconds)
# overrides it.
members_ready_timeout() {
	if [ -n "${READY_TIMEOUT:-}" ]; then
		echo "$READY_TIMEOUT"
		return
	fi
	local lease success period
	lease=$(duration_seconds "$(flag_value leader-elect-lease-duration 15s "$@")")
	success=$(duration_seconds "$(flag_value cluster-success-threshold 30s "$@")")
	period=$(duration_seconds "$(flag_value cluster-status-update-frequency 10s "$@")")
	echo $((2 * (lease + success + period) + 15 + 10))
}

# wait_members_ready TIMEOUT: wait until each of the MEMBERS Clusters on the
# hub ($PREFIX-hub in $KUBECONFIG_OUT) is Ready=True without taints, for up
# to TIMEOUT seconds of wall-clock time, logging every change of what the
# hub shows.
wait_members_ready() {
	local timeout=$1 deadline out last=""
	deadline=$((SECONDS + timeout))
	while :; do
		out=$("$KUBECTL" --kubeconfig "$KUBECONFIG_OUT" --context "$PREFIX-hub" get clusters --request-timeout=10s \
			-o jsonpath='{range .items[*]}{.metadata.name}{" Ready="}{.status.conditions[?(@.type=="Ready")].status}{" "}{.spec.taints[*].key}{"\n"}{end}' 2>/dev/null || true)
		if [ "$(grep -cE ' Ready=True $' <<<"$out")" = "$MEMBERS" ]; then
			return 0
		fi
		if [ "$out" != "$last" ]; then
			# What is still pending, e.g. "member1 Ready=Unknown cluster.flotilla.io/unreachable".
			log "  not yet: $(grep -vE ' Ready=True $' <<<"$out" | paste -sd ';' - | sed 's/;/; /g')"
			last=$out
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			log "members not Ready and untainted after ${timeout}s:"
			printf '%s\n' "$out" >&2
			return 1
		fi
		sleep 1
	done
}
