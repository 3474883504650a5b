package dnsprobe

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/pkg/health"
)

// Quorum is how many fresh failing verdicts turn the cluster's
// ServiceDomainNameResolutionReady False: "all" of them (the default: one
// node's broken resolver is that node's problem, not the cluster's),
// "majority", or a count N (at least N nodes, or all of them if fewer report).
type Quorum struct {
	mode  string
	count int
}

// ParseQuorum parses the --dns-quorum flag.
func ParseQuorum(s string) (Quorum, error) {
	switch s {
	case "all", "majority":
		return Quorum{mode: s}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return Quorum{}, fmt.Errorf("invalid DNS quorum %q: want \"all\", \"majority\" or a positive number of nodes", s)
	}
	return Quorum{mode: "count", count: n}, nil
}

func (q Quorum) String() string {
	if q.mode == "count" {
		return strconv.Itoa(q.count)
	}
	if q.mode == "" {
		return "all"
	}
	return q.mode
}

// required is the number of failing verdicts, out of fresh, that decide.
func (q Quorum) required(fresh int) int {
	switch q.mode {
	case "majority":
		return fresh/2 + 1
	case "count":
		return min(q.count, fresh)
	default:
		return fresh
	}
}

// Summary is the leader's reading of the nodes' verdicts.
type Summary struct {
	Fresh, Failing, Stale int
}

// Aggregate decides the cluster's DNS condition from the nodes' verdicts at
// now. Verdicts older than their own staleness bound are ignored. It returns
// ok=false when no fresh verdict exists: the caller then leaves the condition
// as it is (no evidence either way is not evidence of failure or health).
func Aggregate(verdicts []Verdict, now time.Time, quorum Quorum) (obs health.Observation, summary Summary, ok bool) {
	var failing, passing []Verdict
	for _, v := range verdicts {
		if now.Sub(v.RenewTime) > v.StaleAfter {
			summary.Stale++
			continue
		}
		if v.Observed.Status == metav1.ConditionTrue {
			passing = append(passing, v)
		} else {
			failing = append(failing, v)
		}
	}
	summary.Fresh = len(failing) + len(passing)
	summary.Failing = len(failing)
	if summary.Fresh == 0 {
		return health.Observation{}, summary, false
	}
	sort.Slice(failing, func(i, j int) bool { return failing[i].Node < failing[j].Node })
	if len(failing) >= quorum.required(summary.Fresh) {
		return health.Observation{
			Status:  metav1.ConditionFalse,
			Reason:  commonReason(failing),
			Message: fmt.Sprintf("in-cluster DNS fails on %d of %d reporting nodes (quorum %s): %s", len(failing), summary.Fresh, quorum, describe(failing)),
		}, summary, true
	}
	msg := fmt.Sprintf("in-cluster DNS resolves on %d of %d reporting nodes", len(passing), summary.Fresh)
	if len(failing) > 0 {
		msg += fmt.Sprintf("; below quorum %s: %s", quorum, describe(failing))
	}
	return health.Observation{Status: metav1.ConditionTrue, Reason: ReasonResolved, Message: msg}, summary, true
}

// commonReason is the most frequent reason among failing verdicts (ties by name).
func commonReason(failing []Verdict) string {
	counts := map[string]int{}
	for _, v := range failing {
		counts[v.Observed.Reason]++
	}
	best := ""
	for reason, n := range counts {
		if best == "" || n > counts[best] || n == counts[best] && reason < best {
			best = reason
		}
	}
	if best == "" {
		return ReasonResolutionFailed
	}
	return best
}

// describe lists failing nodes with their reasons, bounded in length.
func describe(failing []Verdict) string {
	const maxListed = 5
	parts := make([]string, 0, maxListed+1)
	for i, v := range failing {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(failing)-maxListed))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", v.Node, v.Observed.Reason))
	}
	return strings.Join(parts, ", ")
}
