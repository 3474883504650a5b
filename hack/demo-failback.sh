#!/usr/bin/env bash
# Failback on `make up` (README "Fail over and fail back"): applies
# examples/failback.yaml with a 30 s window, stops member1 until the seed's
# nginx runs 3 on member2, starts it again and samples both members'
# Deployments every second until the 1:2 split is back, then prints the
# lowest available sum, the binding, its failover history and events.
# Run it on `make up HUB_FLAGS="--failover-eviction-timeout=20s
# --default-not-ready-toleration-seconds=5 --default-unreachable-toleration-seconds=5
# --graceful-eviction-timeout=15s"` (or FAST=1) so failover takes seconds.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export KUBECONFIG=${KUBECONFIG:-$HOME/.kube/flotilla.config}
K=${KUBECTL:-bin/kubectl}
H="$K --context flotilla-hub"
ts() { date -u +%H:%M:%S; }
sed 's/stabilizationWindowSeconds: 120/stabilizationWindowSeconds: 30/' examples/failback.yaml | $H apply -f -
until [ "$($H get rb nginx-deployment -o jsonpath='{.spec.clusters}' 2>/dev/null)" = '[{"name":"member1","replicas":1},{"name":"member2","replicas":2}]' ]; do sleep 2; done
avail() { $K --context flotilla-$1 get deploy nginx -o jsonpath='{.status.availableReplicas}' 2>/dev/null || echo 0; }
until [ "$(avail member1)" = 1 ] && [ "$(avail member2)" = 2 ]; do sleep 2; done
echo "$(ts) placed 1:2, available member1=$(avail member1) member2=$(avail member2)"
$H get rb nginx-deployment -o wide
echo "$(ts) stopping member1 (agents, apiserver)"
hack/local-ctl.sh stop agent-member1-0; hack/local-ctl.sh stop agent-member1-1; hack/local-ctl.sh stop-cluster flotilla-member1
until [ "$($H get rb nginx-deployment -o jsonpath='{.spec.clusters}')" = '[{"name":"member2","replicas":3}]' ]; do sleep 2; done
until [ "$(avail member2)" = 3 ]; do sleep 2; done
echo "$(ts) failed over: member2 runs 3"
$H get rb nginx-deployment -o wide
echo "$(ts) starting member1 again"
hack/local-ctl.sh start-cluster flotilla-member1; hack/local-ctl.sh start agent-member1-0; hack/local-ctl.sh start agent-member1-1
low=99; n=0
while :; do
  a1=$(avail member1); a2=$(avail member2); s=$(( ${a1:-0} + ${a2:-0} ))
  [ $s -lt $low ] && low=$s; n=$((n+1))
  c=$($H get rb nginx-deployment -o jsonpath='{.spec.clusters}')
  t=$($H get rb nginx-deployment -o jsonpath='{.spec.gracefulEvictionTasks}')
  if [ "$c" = '[{"name":"member1","replicas":1},{"name":"member2","replicas":2}]' ] && [ -z "$t" ] && [ "$a1" = 1 ] && [ "$a2" = 2 ]; then break; fi
  sleep 1
done
echo "$(ts) failed back: 1:2; lowest member1+member2 available replicas while member1 returned: $low ($n samples)"
$H get rb nginx-deployment -o wide
$H get rb nginx-deployment -o jsonpath='{range .status.failoverHistory[*]}{.reason}{"\t"}{.originCluster}{" -> "}{.clustersAfterFailover}{"\t"}{.startTime}{" .. "}{.endTime}{"\tdegraded "}{.degradedSeconds}{"s\n"}{end}'
$H get events -n default --field-selector involvedObject.name=nginx-deployment --sort-by=.lastTimestamp -o custom-columns=REASON:.reason,MESSAGE:.message | tail -14
