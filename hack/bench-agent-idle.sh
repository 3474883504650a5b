#!/usr/bin/env bash
# Measures what an idle agent costs, on an environment `make up` started:
# resident memory and CPU of the member's leader and standby agents, and the
# writes the member's agents make to the hub per minute — counted on the hub
# (watch events on the member's Lease and Cluster) and by the agents' own
# metrics. Prints a Markdown table, with the load average before and after
# (other work on the machine inflates CPU figures: compare runs made at the
# same time, e.g. two members in one window).
#
#   hack/bench-agent-idle.sh                 # member1, 300 s window
#   MEMBER=member2 WINDOW=600 hack/bench-agent-idle.sh
#
# CPU is read in clock ticks (10 ms): at 0.2 % of a core a 120 s window
# holds only ~24 of them, hence the 300 s default.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE_DIR=${FLOTILLA_STATE_DIR:-$ROOT/.local}
ENV_FILE=$STATE_DIR/environment
MEMBER=${MEMBER:-member1}
WINDOW=${WINDOW:-300}
SETTLE=${SETTLE:-15}
KUBECTL=$ROOT/bin/kubectl

die() { printf 'error: %s\n' "$*" >&2; exit 1; }
[ -f "$ENV_FILE" ] || die "no environment at $ENV_FILE: run \`make up\` first"
# shellcheck disable=SC1090
source <(grep -E '^[A-Z0-9_]+=' "$ENV_FILE" | sed -E 's/^([A-Z0-9_]+)=(.*)$/\1="\2"/')
i=${MEMBER#member}
agents_var=MEMBER${i}_AGENTS metrics_var=MEMBER${i}_AGENT_METRICS context_var=MEMBER${i}_CONTEXT
read -r -a agents <<<"${!agents_var:-}"
read -r -a metrics <<<"${!metrics_var:-}"
[ ${#agents[@]} -gt 0 ] || die "$MEMBER not in $ENV_FILE"

metric() { # metric ADDR NAME[{labels}] → sum of matching samples
	curl -fsS "http://$1/metrics" 2>/dev/null | awk -v m="$2" 'index($0, m) == 1 { s += $NF } END { printf "%d\n", s }'
}
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
# Context switches of every thread: each is a thread going to sleep or being
# woken, so at idle they count the process's wakeups.
ctx_switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^(non)?voluntary_ctxt_switches:/ { s += $2 } END { print s + 0 }'; }

leader="" standby=""
for idx in "${!agents[@]}"; do
	pid=$(cat "$STATE_DIR/pids/${agents[$idx]}.pid" 2>/dev/null) || die "${agents[$idx]} has no pid file"
	kill -0 "$pid" 2>/dev/null || die "${agents[$idx]} (pid $pid) is not running"
	if [ "$(metric "${metrics[$idx]}" 'flotilla_agent_leader ')" = 1 ]; then leader=$idx; else standby=$idx; fi
done
[ -n "$leader" ] || die "no agent of $MEMBER leads"
nodes=$("$KUBECTL" --kubeconfig "$KUBECONFIG" --context "${!context_var}" get nodes --no-headers | wc -l)

echo ">> $MEMBER: $nodes nodes, leader ${agents[$leader]}; settling ${SETTLE}s, then measuring ${WINDOW}s" >&2
sleep "$SETTLE"

tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
# kubectl itself in the background (not a shell function), so the trap's
# `kill $(jobs -p)` reaches it.
"$KUBECTL" --kubeconfig "$KUBECONFIG" --context "$HUB_CONTEXT" get lease -n "flotilla-es-$MEMBER" "$MEMBER" --watch-only -o 'jsonpath={.metadata.resourceVersion}{"\n"}' >"$tmp/lease" &
"$KUBECTL" --kubeconfig "$KUBECONFIG" --context "$HUB_CONTEXT" get cluster "$MEMBER" --watch-only -o 'jsonpath={.metadata.resourceVersion}{"\n"}' >"$tmp/cluster" &
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A pid ticks0 switches0 renew0 status0 works0
for idx in "${!agents[@]}"; do
	pid[$idx]=$(cat "$STATE_DIR/pids/${agents[$idx]}.pid")
	ticks0[$idx]=$(cpu_ticks "${pid[$idx]}")
	switches0[$idx]=$(ctx_switches "${pid[$idx]}")
	renew0[$idx]=$(metric "${metrics[$idx]}" 'flotilla_agent_lease_renewals_total{result="success"}')
	status0[$idx]=$(metric "${metrics[$idx]}" 'flotilla_agent_status_writes_total')
	works0[$idx]=$(metric "${metrics[$idx]}" 'flotilla_agent_work_status_writes_total')
done
sleep "$WINDOW"
hz=$(getconf CLK_TCK)
minutes=$(awk -v w="$WINDOW" 'BEGIN { print w / 60 }')
per_min() { awk -v n="$1" -v m="$minutes" 'BEGIN { printf "%.1f", n / m }'; }

echo "| $MEMBER ($nodes nodes), ${WINDOW}s idle | RSS | CPU (% of a core) | CPU ms/min | wakeups/s | Lease renewals/min | status writes/min | Work status writes/min |"
echo "|---|---|---|---|---|---|---|---|"
for idx in "$leader" $standby; do
	role=standby
	[ "$idx" = "$leader" ] && role=leader
	dticks=$(($(cpu_ticks "${pid[$idx]}") - ticks0[$idx]))
	cpu_ms=$(awk -v t="$dticks" -v hz="$hz" 'BEGIN { print t * 1000 / hz }')
	echo "| ${agents[$idx]} ($role) | $(awk -v k="$(rss_kib "${pid[$idx]}")" 'BEGIN { printf "%.1f MiB", k / 1024 }') |" \
		"$(awk -v ms="$cpu_ms" -v w="$WINDOW" 'BEGIN { printf "%.2f", ms / (w * 10) }') |" \
		"$(per_min "$cpu_ms") |" \
		"$(awk -v n="$(($(ctx_switches "${pid[$idx]}") - switches0[$idx]))" -v w="$WINDOW" 'BEGIN { printf "%.1f", n / w }') |" \
		"$(per_min $(($(metric "${metrics[$idx]}" 'flotilla_agent_lease_renewals_total{result="success"}') - renew0[$idx]))) |" \
		"$(per_min $(($(metric "${metrics[$idx]}" 'flotilla_agent_status_writes_total') - status0[$idx]))) |" \
		"$(per_min $(($(metric "${metrics[$idx]}" 'flotilla_agent_work_status_writes_total') - works0[$idx]))) |"
done
echo
echo "Seen on the hub in the window: Lease $MEMBER updated $(per_min "$(wc -l <"$tmp/lease")")/min, Cluster $MEMBER updated $(per_min "$(wc -l <"$tmp/cluster")")/min."
echo "Load average before: $load_before; after: $(cut -d' ' -f1-3 /proc/loadavg)."
