#!/usr/bin/env bash
# Measures, on a running `make up`, how long it takes from a cluster's
# backends going unready to its address leaving the hub's DNS answers
# (issue 32 item 1). Each trial scales the backend Deployment to 0 on
# member1 through an OverridePolicy on the hub (the way a failing app loses
# its ready pods), takes t0 when member1's EndpointSlices first hold no
# ready endpoint, t1 when the hub's DNS first answers without member1's
# address, and records t1 - t0; then it restores the replicas and waits for
# both addresses to be back. Prints every trial and p50 / p99.
#
#   hack/measure-traffic-health.sh [trials]     (default 20)
#
# It creates (and deletes at the end) ResourceTemplates, a policy, an
# override and a MultiClusterIngress named "tlat" in namespace default, and
# sets the members' Service load-balancer IPs by hand (as a cloud would).
# The sampling loop polls with kubectl and dig, about every 50-150 ms: that
# is the resolution of the numbers.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/lib.sh
. "$ROOT/hack/lib.sh"
TRIALS=${1:-20}
KUBECTL=${KUBECTL:-kubectl}
hub() { "$KUBECTL" --kubeconfig "$KUBECONFIG_OUT" --context "$PREFIX-hub" "$@"; }
mem() { local i=$1; shift; "$KUBECTL" --kubeconfig "$KUBECONFIG_OUT" --context "$PREFIX-member$i" "$@"; }
DNS_PORT=$(hub_dns_port)
HOST=tlat.example.com
declare -A IP=([1]=10.250.1.1 [2]=10.250.2.1)
now() { date +%s.%N; }
answers() { dig +short +time=1 +tries=1 -p "$DNS_PORT" @127.0.0.1 "$HOST" A | sort | tr '\n' ' '; }
ready_on() { # ready endpoints of Service tlat on member $1
	mem "$1" -n default get endpointslices -l kubernetes.io/service-name=tlat \
		-o jsonpath='{range .items[*].endpoints[*]}{.conditions.ready}{"\n"}{end}' 2>/dev/null | grep -c '^true$' || true
}
cleanup() {
	hub -n default delete multiclusteringress tlat --ignore-not-found >/dev/null
	hub -n default delete overridepolicy tlat-down --ignore-not-found >/dev/null
	hub -n default delete propagationpolicy tlat --ignore-not-found >/dev/null
	hub -n default delete resourcetemplate tlat-deploy tlat-svc --ignore-not-found >/dev/null
}
trap cleanup EXIT

hub apply -f - >/dev/null <<YAML
apiVersion: work.flotilla.io/v1alpha1
kind: ResourceTemplate
metadata: {name: tlat-deploy, namespace: default}
spec:
  manifest:
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: tlat}
    spec:
      replicas: 1
      selector: {matchLabels: {app: tlat}}
      template:
        metadata: {labels: {app: tlat}}
        spec: {containers: [{name: web, image: nginx}]}
---
apiVersion: work.flotilla.io/v1alpha1
kind: ResourceTemplate
metadata: {name: tlat-svc, namespace: default}
spec:
  manifest:
    apiVersion: v1
    kind: Service
    metadata: {name: tlat}
    spec: {type: LoadBalancer, selector: {app: tlat}, ports: [{port: 80}]}
---
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: tlat, namespace: default}
spec:
  resourceSelectors:
  - {apiVersion: apps/v1, kind: Deployment, name: tlat}
  - {apiVersion: v1, kind: Service, name: tlat}
  placement:
    clusterAffinity: {clusterNames: [member1, member2]}
    replicaScheduling: {replicaSchedulingType: Duplicated}
---
apiVersion: networking.flotilla.io/v1alpha1
kind: MultiClusterIngress
metadata: {name: tlat, namespace: default}
spec:
  rules:
  - host: $HOST
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: tlat, port: {number: 80}}}}
YAML

wait_until() { # timeout-seconds description command...
	local deadline=$(($(date +%s) + $1)) what=$2
	shift 2
	until "$@"; do
		if [ "$(date +%s)" -ge "$deadline" ]; then
			echo "timed out: $what" >&2
			exit 1
		fi
		sleep 0.2
	done
}
for i in 1 2; do
	wait_until 120 "Service tlat on member$i" mem "$i" -n default get service tlat -o name
	mem "$i" -n default patch service tlat --subresource=status --type=merge \
		-p "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"${IP[$i]}\"}]}}}" >/dev/null
done
both="${IP[1]} ${IP[2]} "
wait_until 180 "both addresses answered" bash -c "[ \"\$(dig +short -p $DNS_PORT @127.0.0.1 $HOST A | sort | tr '\n' ' ')\" = '$both' ]"

results=()
for trial in $(seq 1 "$TRIALS"); do
	hub apply -f - >/dev/null <<YAML
apiVersion: policy.flotilla.io/v1alpha1
kind: OverridePolicy
metadata: {name: tlat-down, namespace: default}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: tlat}]
  overrideRules:
  - targetCluster: {clusterNames: [member1]}
    overriders:
      plaintext: [{path: /spec/replicas, operator: replace, value: 0}]
YAML
	t0="" t1=""
	deadline=$(($(date +%s) + 120))
	while [ -z "$t0" ] || [ -z "$t1" ]; do
		[ "$(date +%s)" -lt "$deadline" ] || { echo "trial $trial timed out (t0=$t0 t1=$t1)" >&2; exit 1; }
		[ -n "$t0" ] || { [ "$(ready_on 1)" = 0 ] && t0=$(now); }
		[ -n "$t1" ] || { [[ " $(answers)" != *" ${IP[1]} "* ]] && t1=$(now); }
	done
	ms=$(echo "($t1 - $t0) * 1000" | bc -l | xargs printf '%.0f')
	results+=("$ms")
	echo "trial $trial: ${ms} ms from member1's endpoints unready to its address leaving the answers"
	hub -n default delete overridepolicy tlat-down >/dev/null
	wait_until 120 "member1 back in the answers" bash -c "[ \"\$(dig +short -p $DNS_PORT @127.0.0.1 $HOST A | sort | tr '\n' ' ')\" = '$both' ]"
done
printf '%s\n' "${results[@]}" | sort -n | awk '{v[NR]=$1} END {
	p50=v[int((NR+1)/2)]; i=int(NR*0.99+0.999); if (i>NR) i=NR; if (i<1) i=1
	printf "trials %d  p50 %d ms  p99 %d ms  min %d ms  max %d ms\n", NR, p50, v[i], v[1], v[NR] }'
