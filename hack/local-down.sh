#!/usr/bin/env bash
# Stops exactly what hack/local-up.sh started: the hub, agent, CoreDNS (and
# Prometheus) processes it recorded, and the kwok clusters in its own KWOK_WORKDIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

shopt -s nullglob
# Agents first, then the hub, then DNS: nothing reports into a dead hub.
for file in "$PID_DIR"/agent-*.pid "$PID_DIR"/hub.pid "$PID_DIR"/*.pid; do
	[ -f "$file" ] && stop_pidfile "$file"
done

if [ -x "$KWOKCTL" ]; then
	for dir in "$KWOK_WORKDIR"/clusters/*/; do
		name=$(basename "$dir")
		log "deleting cluster $name"
		"$KWOKCTL" delete cluster --name "$name" >>"$LOG_DIR/kwokctl.log" 2>&1 || log "kwokctl delete cluster $name failed; see $LOG_DIR/kwokctl.log"
	done
fi
# Prometheus's TSDB (MONITORING=1) goes with the clusters it watched.
rm -rf "$KWOK_WORKDIR" "$PID_DIR" "$CMD_DIR" "$STATE_DIR/environment" "$STATE_DIR/prometheus"
rm -f "$KUBECONFIG_OUT"
log "down; logs kept in $LOG_DIR"
