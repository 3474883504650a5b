#!/usr/bin/env bash
# Brings up Flotilla on this machine: a hub cluster and $MEMBERS member
# clusters as kwokctl binary-runtime clusters (real etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler; kwok plays the kubelets), a CoreDNS
# per member on loopback, the CRDs and a Cluster object per member on the hub,
# and the hub and agent binaries as background processes.
#
# Safe to re-run: clusters that exist are started, not recreated; hub and
# agents are restarted so they run the binaries just built.
#
# MONITORING=1 also runs Prometheus (127.0.0.1:$PROMETHEUS_PORT, 19090 by
# default) scraping the hub, the agents and CoreDNS, with the alert rules of
# monitoring/prometheus-alerts.yaml.
#
# hack/local-up.sh --tools prints the tools (hack/build-tools.sh names) it
# runs, which is all `make up` builds besides `make build`'s binaries.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# kwokctl's binary runtime runs etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler (members only) and kwok; this script runs kwokctl, kubectl
# and CoreDNS (and Prometheus).
up_tools() {
	echo etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwokctl kubectl coredns
	if [ "$MONITORING" = 1 ]; then echo prometheus; fi
}
if [ "${1:-}" = --tools ]; then
	echo $(up_tools)
	exit 0
fi
[ $# -eq 0 ] || die "usage: hack/local-up.sh [--tools]"

for tool in $(up_tools) hub agent; do
	[ -x "$BIN/$tool" ] || die "$BIN/$tool missing: run \`make up\` (which builds it)"
done
mkdir -p "$LOG_DIR" "$PID_DIR" "$KWOK_WORKDIR" "$(dirname "$KUBECONFIG_OUT")"
start_time=$(date +%s)

cluster_exists() { [ -f "$(kwok_kubeconfig "$1")" ]; }

# up_cluster NAME [extra kwokctl flags]: create or (re)start a kwok cluster.
up_cluster() {
	local name=$1
	shift
	if cluster_exists "$name"; then
		log "starting existing cluster $name"
		"$KWOKCTL" start cluster --name "$name" --wait 120s >>"$LOG_DIR/kwokctl.log" 2>&1 ||
			die "kwokctl start cluster $name failed; see $LOG_DIR/kwokctl.log"
	else
		log "creating cluster $name"
		"$KWOKCTL" create cluster --name "$name" --runtime binary \
			--etcd-binary "$BIN/etcd" \
			--kube-apiserver-binary "$BIN/kube-apiserver" \
			--kube-controller-manager-binary "$BIN/kube-controller-manager" \
			--kube-scheduler-binary "$BIN/kube-scheduler" \
			--kwok-controller-binary "$BIN/kwok" \
			--wait 120s "$@" >>"$LOG_DIR/kwokctl.log" 2>&1 ||
			die "kwokctl create cluster $name failed; see $LOG_DIR/kwokctl.log"
	fi
}

# One at a time: kwokctl picks "random" ports by counting down from a fixed
# start in each process, so clusters created in parallel collide on ports.
# The hub needs no scheduler (it never runs pods); it keeps the controller
# manager for namespace deletion, garbage collection and service-account tokens.
up_cluster "$PREFIX-hub" --disable kube-scheduler
for i in $(seq 1 "$MEMBERS"); do
	up_cluster "$PREFIX-member$i"
done

# One kubeconfig with contexts $PREFIX-hub and $PREFIX-member<i>, certificates
# embedded so the file works from anywhere.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
parts=()
for name in "$PREFIX-hub" $(for i in $(seq 1 "$MEMBERS"); do echo "$PREFIX-member$i"; done); do
	"$KUBECTL" config view --raw --flatten --kubeconfig "$(kwok_kubeconfig "$name")" >"$tmp/$name"
	"$KUBECTL" config rename-context "kwok-$name" "$name" --kubeconfig "$tmp/$name" >/dev/null
	parts+=("$tmp/$name")
done
KUBECONFIG=$(
	IFS=:
	echo "${parts[*]}"
) "$KUBECTL" config view --raw --flatten >"$tmp/merged"
"$KUBECTL" config use-context "$PREFIX-hub" --kubeconfig "$tmp/merged" >/dev/null
install -m 0600 "$tmp/merged" "$KUBECONFIG_OUT"
hubctl() { "$KUBECTL" --kubeconfig "$KUBECONFIG_OUT" --context "$PREFIX-hub" "$@"; }
memberctl() {
	local i=$1
	shift
	"$KUBECTL" --kubeconfig "$KUBECONFIG_OUT" --context "$PREFIX-member$i" "$@"
}

# The API only: here the hub runs as a process (kwok has no kubelet to run
# the Deployment of kustomize/hub, whose objects the e2e checks by dry run).
log "installing the Flotilla API (CRDs, admission policy) and the flotilla-system namespace"
hubctl apply --server-side --force-conflicts -k "$ROOT/manifests/crds" >/dev/null
hubctl create namespace flotilla-system --dry-run=client -o yaml | hubctl apply -f - >/dev/null
hubctl wait --for condition=Established --timeout 60s $(hubctl get crd -o name | grep '\.flotilla\.io$') >/dev/null

regions=(region-a region-a region-b region-b region-c)
for i in $(seq 1 "$MEMBERS"); do
	region=${regions[$(((i - 1) % ${#regions[@]}))]}
	log "member$i: $NODES fake nodes, CoreDNS on 127.0.0.1:$(member_dns_port "$i"), Cluster object (region $region)"
	for n in $(seq 1 "$NODES"); do
		cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: member$i-node-$n
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/hostname: member$i-node-$n
    kubernetes.io/os: linux
    type: kwok
    topology.kubernetes.io/region: $region
    topology.kubernetes.io/zone: $region-$(((n - 1) % 2 + 1))
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
---
EOF
	done | memberctl "$i" apply -f - >/dev/null
	# The agent's namespace: its leader-election Lease and the nodes' DNS verdicts.
	memberctl "$i" create namespace flotilla-system --dry-run=client -o yaml | memberctl "$i" apply -f - >/dev/null

	# The Cluster object; the hub makes its namespace, Lease and agent identity.
	cat <<EOF | hubctl apply -f - >/dev/null
apiVersion: cluster.flotilla.io/v1alpha1
kind: Cluster
metadata:
  name: member$i
  labels:
    flotilla.io/environment: local
spec:
  syncMode: Pull
  provider: kwok
  region: $region
  zones: [$region-1, $region-2]
EOF
done

for i in $(seq 1 "$MEMBERS"); do
	port=$(member_dns_port "$i")
	mkdir -p "$STATE_DIR/member$i"
	cat >"$STATE_DIR/member$i/Corefile" <<EOF
.:$port {
    bind 127.0.0.1
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $KUBECONFIG_OUT $PREFIX-member$i
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    loadbalance
    prometheus 127.0.0.1:$(member_dns_metrics_port "$i")
}
EOF
	start_process "coredns-member$i" "$BIN/coredns" -conf "$STATE_DIR/member$i/Corefile"
done

# start_prometheus: a Prometheus process scraping what this script runs
# (hub, agents, CoreDNS and itself) with the mixin's alert rules, its
# configuration and TSDB under $STATE_DIR/prometheus. The targets carry the
# labels a real install's service discovery would give (cluster, node).
start_prometheus() {
	local dir=$STATE_DIR/prometheus rules=$ROOT/monitoring/prometheus-alerts.yaml i a
	mkdir -p "$dir/data"
	{
		cat <<EOF
# Generated by hack/local-up.sh (MONITORING=1); rewritten on every make up.
global:
  scrape_interval: 10s
  evaluation_interval: 10s
  external_labels:
    environment: $PREFIX
EOF
		if [ -f "$rules" ]; then
			printf 'rule_files:\n  - %s\n' "$rules"
		else
			log "no $rules: Prometheus runs without alert rules"
		fi
		cat <<EOF
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ['127.0.0.1:$PROMETHEUS_PORT']
  - job_name: flotilla-hub
    static_configs:
      - targets: ['127.0.0.1:$((PORT_BASE + 1))']
  - job_name: flotilla-agent
    static_configs:
EOF
		for i in $(seq 1 "$MEMBERS"); do
			for a in $(seq 0 $((AGENTS_PER_MEMBER - 1))); do
				printf "      - targets: ['127.0.0.1:%s']\n        labels: {cluster: member%s, node: member%s-node-%s}\n" \
					"$(agent_port "$i" "$a" 1)" "$i" "$i" "$((a + 1))"
			done
		done
		echo "  - job_name: coredns"
		echo "    static_configs:"
		for i in $(seq 1 "$MEMBERS"); do
			printf "      - targets: ['127.0.0.1:%s']\n        labels: {cluster: member%s}\n" "$(member_dns_metrics_port "$i")" "$i"
		done
	} >"$dir/prometheus.yml"
	start_process prometheus "$BIN/prometheus" --config.file "$dir/prometheus.yml" \
		--storage.tsdb.path "$dir/data" --web.listen-address "127.0.0.1:$PROMETHEUS_PORT"
}

hub_flags=(${HUB_FLAGS:-})
agent_flags=(${AGENT_FLAGS:-})
if [ "$FAST" = 1 ]; then
	# Demo speed: a standby hub takes over in seconds, not 15s.
	hub_flags+=(--leader-elect-lease-duration=4s --leader-elect-renew-deadline=3s --leader-elect-retry-period=1s)
	# Failover in seconds, not minutes: NoExecute 20s after a cluster goes
	# Unknown/False (longer than the agents' 10s renew spread plus the 5s
	# fleet-guard period, so a whole-fleet outage is seen as one before any
	# NoExecute), workloads without their own toleration leave 5s later, an
	# unhealthy replacement gets 15s before the old copy goes.
	hub_flags+=(--failover-eviction-timeout=20s --default-not-ready-toleration-seconds=5
		--default-unreachable-toleration-seconds=5 --graceful-eviction-timeout=15s)
fi
if [ "$MONITORING" = 1 ]; then
	# Staged rollouts' analyses query the Prometheus this script runs.
	hub_flags+=(--rollout-prometheus-address "http://127.0.0.1:$PROMETHEUS_PORT")
fi

# The hub's ResourceInterpreterCustomization webhook, registered as in
# manifests/hub/webhook.yaml but called at the local hub's address (no
# Service here). The hub keeps its certificate in the Secret
# flotilla-system/flotilla-hub-webhook-cert and sets the caBundle itself, as
# in a real install, so a customization that does not compile is refused
# here too. Kept in $STATE_DIR: the e2e puts it back after applying
# kustomize/hub (whose configuration calls the Service).
log "registering the hub's admission webhook at https://127.0.0.1:$(hub_webhook_port)"
"$KUBECTL" patch --local -f "$ROOT/manifests/hub/webhook.yaml" --type=json -o yaml \
	-p "[{\"op\":\"replace\",\"path\":\"/webhooks/0/clientConfig\",\"value\":{\"url\":\"https://127.0.0.1:$(hub_webhook_port)/validate-resourceinterpretercustomization\"}}]" \
	>"$STATE_DIR/hub-webhook.yaml"
hubctl apply --server-side --force-conflicts -f "$STATE_DIR/hub-webhook.yaml" >/dev/null

hub_kubeconfig=$STATE_DIR/hub.kubeconfig
"$KUBECTL" config view --raw --flatten --minify --context "$PREFIX-hub" --kubeconfig "$KUBECONFIG_OUT" >"$hub_kubeconfig"
chmod 0600 "$hub_kubeconfig"
start_process hub "$BIN/hub" --kubeconfig "$hub_kubeconfig" \
	--health-probe-bind-address "127.0.0.1:$PORT_BASE" --metrics-bind-address "127.0.0.1:$((PORT_BASE + 1))" \
	--leader-elect-resource-name "$PREFIX-hub" --dns-traffic-address "127.0.0.1:$(hub_dns_port)" \
	--webhook-bind-address 127.0.0.1 --webhook-port "$(hub_webhook_port)" "${hub_flags[@]}"
health_urls=("http://127.0.0.1:$PORT_BASE/readyz")

for i in $(seq 1 "$MEMBERS"); do
	# The agents' own least-privilege identity on the hub (made by the hub's
	# cluster controller), not the admin credentials.
	agent_hub_kubeconfig=$STATE_DIR/member$i/hub-agent.kubeconfig
	"$BIN/hub" agent-kubeconfig --kubeconfig "$hub_kubeconfig" --cluster "member$i" --duration 8760h --wait 60s >"$agent_hub_kubeconfig" ||
		die "no agent identity for member$i on the hub; see $LOG_DIR/hub.log"
	chmod 0600 "$agent_hub_kubeconfig"
	member_kubeconfig=$STATE_DIR/member$i/kubeconfig
	"$KUBECTL" config view --raw --flatten --minify --context "$PREFIX-member$i" --kubeconfig "$KUBECONFIG_OUT" >"$member_kubeconfig"
	chmod 0600 "$member_kubeconfig"
	# Agent processes play the agent Deployment's pods, one per node: agent a
	# runs "on" member<i>-node-<a+1> and, with the default --dns-probe (the
	# part the flotilla-dns-probe DaemonSet plays in a real install), probes
	# the member's CoreDNS as that node's resolver.
	for a in $(seq 0 $((AGENTS_PER_MEMBER - 1))); do
		start_process "agent-member$i-$a" "$BIN/agent" \
			--cluster-name "member$i" --kubeconfig "$member_kubeconfig" --hub-kubeconfig "$agent_hub_kubeconfig" \
			--node-name "member$i-node-$((a + 1))" --dns-server "127.0.0.1:$(member_dns_port "$i")" \
			--health-probe-bind-address "127.0.0.1:$(agent_port "$i" "$a" 0)" \
			--metrics-bind-address "127.0.0.1:$(agent_port "$i" "$a" 1)" "${agent_flags[@]}"
		health_urls+=("http://127.0.0.1:$(agent_port "$i" "$a" 0)/readyz")
	done
done

monitoring=""
if [ "$MONITORING" = 1 ]; then
	start_prometheus
	health_urls+=("http://127.0.0.1:$PROMETHEUS_PORT/-/ready")
	monitoring=$'\n'"Prometheus: http://127.0.0.1:$PROMETHEUS_PORT (targets: /targets, alerts: /alerts; config: $STATE_DIR/prometheus/prometheus.yml)"
else
	# A re-run without MONITORING=1 stops the previous run's Prometheus.
	stop_pidfile "$PID_DIR/prometheus.pid"
fi

# What tests need to find this environment, as KEY=VALUE lines.
{
	echo "KUBECONFIG=$KUBECONFIG_OUT"
	echo "STATE_DIR=$STATE_DIR"
	echo "PREFIX=$PREFIX"
	echo "CTL=$ROOT/hack/local-ctl.sh"
	echo "HUB_CONTEXT=$PREFIX-hub"
	echo "HUB_HEALTH=127.0.0.1:$PORT_BASE"
	echo "HUB_METRICS=127.0.0.1:$((PORT_BASE + 1))"
	echo "HUB_DNS=127.0.0.1:$(hub_dns_port)"
	echo "HUB_WEBHOOK=127.0.0.1:$(hub_webhook_port)"
	echo "HUB_WEBHOOK_CONFIGURATION=$STATE_DIR/hub-webhook.yaml"
	echo "MEMBERS=$MEMBERS"
	for i in $(seq 1 "$MEMBERS"); do
		echo "MEMBER${i}_NAME=member$i"
		echo "MEMBER${i}_CONTEXT=$PREFIX-member$i"
		echo "MEMBER${i}_DNS=127.0.0.1:$(member_dns_port "$i")"
		echo "MEMBER${i}_DNS_METRICS=127.0.0.1:$(member_dns_metrics_port "$i")"
		echo "MEMBER${i}_AGENTS=$(for a in $(seq 0 $((AGENTS_PER_MEMBER - 1))); do printf 'agent-member%s-%s ' "$i" "$a"; done)"
		echo "MEMBER${i}_AGENT_NODES=$(for a in $(seq 0 $((AGENTS_PER_MEMBER - 1))); do printf 'member%s-node-%s ' "$i" "$((a + 1))"; done)"
		echo "MEMBER${i}_AGENT_HEALTH=$(for a in $(seq 0 $((AGENTS_PER_MEMBER - 1))); do printf '127.0.0.1:%s ' "$(agent_port "$i" "$a" 0)"; done)"
		echo "MEMBER${i}_AGENT_METRICS=$(for a in $(seq 0 $((AGENTS_PER_MEMBER - 1))); do printf '127.0.0.1:%s ' "$(agent_port "$i" "$a" 1)"; done)"
	done
	if [ "$MONITORING" = 1 ]; then echo "PROMETHEUS=127.0.0.1:$PROMETHEUS_PORT"; fi
} >"$STATE_DIR/environment"

log "waiting for hub and agents to be ready"
for url in "${health_urls[@]}"; do
	ok=""
	for _ in $(seq 1 300); do
		if curl -fsS -o /dev/null "$url" 2>/dev/null; then ok=1 && break; fi
		sleep 0.2
	done
	[ -n "$ok" ] || die "$url not ready after 60s; logs are in $LOG_DIR"
done

# A workload applied while a member still carries its start-up not-ready
# taint would be placed without it (and stay there: a Divided workload is
# not spread onto clusters that become fit later, see docs/failover.md).
# A member whose agents restart while it is not Ready (it was just stopped
# and started, so the hub marked it Unknown) turns Ready only after the
# agents' success threshold: the deadline follows the agents' flags
# (members_ready_timeout in hack/lib.sh), not a fixed minute.
ready_timeout=$(members_ready_timeout "${agent_flags[@]}")
log "waiting for every member to be Ready and untainted (up to ${ready_timeout}s)"
wait_members_ready "$ready_timeout" || die "members not Ready and untainted after ${ready_timeout}s; logs are in $LOG_DIR"

cat <<EOF

Flotilla is up in $(($(date +%s) - start_time))s: hub + $MEMBERS members, $NODES fake nodes each, $AGENTS_PER_MEMBER agents per member.
  export KUBECONFIG=$KUBECONFIG_OUT
  kubectl --context $PREFIX-hub get clusters
  kubectl --context $PREFIX-member1 get nodes
  dig @127.0.0.1 -p $(member_dns_port 1) kubernetes.default.svc.cluster.local   # member1's CoreDNS
  dig @127.0.0.1 -p $(hub_dns_port) <MultiClusterIngress host>   # the hub's DNS traffic manager
Logs: $LOG_DIR    Hub: http://127.0.0.1:$PORT_BASE/readyz, metrics on :$((PORT_BASE + 1))$monitoring
Stop everything with: make down
EOF
