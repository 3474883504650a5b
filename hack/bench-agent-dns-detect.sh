#!/usr/bin/env bash
# Measures the agent's DNS detection time on an environment `make up`
# started: kills (SIGKILL) the member's CoreDNS (every agent of the member
# probes it as its node's resolver) and times how long until the hub's Cluster shows
# ServiceDomainNameResolutionReady=False, then starts CoreDNS again and times
# the way back to True. Prints one Markdown row per run.
#
#   hack/bench-agent-dns-detect.sh                  # member3, 3 runs
#   MEMBER=member2 RUNS=1 hack/bench-agent-dns-detect.sh
#
# With the agent defaults the expected time is --dns-failure-threshold (30s)
# plus up to one --dns-detect-period (5s) until a probe first fails, plus up
# to one --cluster-status-update-frequency (10s) until the leader's status
# round reads the verdict: 30–45 s (and the same on the way back with
# --dns-success-threshold).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE_DIR=${FLOTILLA_STATE_DIR:-$ROOT/.local}
ENV_FILE=$STATE_DIR/environment
MEMBER=${MEMBER:-member3}
RUNS=${RUNS:-3}
TIMEOUT=${TIMEOUT:-180}
KUBECTL=$ROOT/bin/kubectl
CTL=$ROOT/hack/local-ctl.sh

die() { printf 'error: %s\n' "$*" >&2; exit 1; }
[ -f "$ENV_FILE" ] || die "no environment at $ENV_FILE: run \`make up\` first"
# shellcheck disable=SC1090
source <(grep -E '^[A-Z0-9_]+=' "$ENV_FILE" | sed -E 's/^([A-Z0-9_]+)=(.*)$/\1="\2"/')
export FLOTILLA_STATE_DIR=$STATE_DIR
coredns=coredns-$MEMBER
"$CTL" pid "$coredns" >/dev/null || die "$coredns is not running"

tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; "$CTL" pid "$coredns" >/dev/null 2>&1 || "$CTL" start "$coredns"; rm -rf "$tmp"' EXIT
# Every change of the condition, stamped on arrival (a watch, not a poll).
"$KUBECTL" --kubeconfig "$KUBECONFIG" --context "$HUB_CONTEXT" get cluster "$MEMBER" --watch \
	-o 'jsonpath={.status.conditions[?(@.type=="ServiceDomainNameResolutionReady")].status}{"\n"}' |
	while read -r s; do printf '%s %s\n' "$(date +%s.%N)" "$s"; done >"$tmp/watch" &

# wait_for STATUS SINCE: seconds from SINCE to the first STATUS seen after it.
wait_for() {
	local want=$1 since=$2 deadline=$(($(date +%s) + TIMEOUT))
	while [ "$(date +%s)" -lt "$deadline" ]; do
		t=$(awk -v s="$since" -v w="$want" '$1 >= s && $2 == w { print $1; exit }' "$tmp/watch")
		if [ -n "$t" ]; then
			awk -v a="$since" -v b="$t" 'BEGIN { printf "%.1f", b - a }'
			return
		fi
		sleep 0.2
	done
	die "no $want within ${TIMEOUT}s"
}

echo ">> $MEMBER: waiting for ServiceDomainNameResolutionReady=True" >&2
wait_for True 0 >/dev/null
echo "| run | CoreDNS killed → hub sees False | CoreDNS started → hub sees True |"
echo "|---|---|---|"
for run in $(seq 1 "$RUNS"); do
	down=$(date +%s.%N)
	"$CTL" kill "$coredns"
	detect=$(wait_for False "$down")
	up=$(date +%s.%N)
	"$CTL" start "$coredns"
	recover=$(wait_for True "$up")
	echo "| $run | ${detect} s | ${recover} s |"
done
