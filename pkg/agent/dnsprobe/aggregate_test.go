package dnsprobe

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/pkg/health"
)

func TestParseQuorum(t *testing.T) {
	cases := []struct {
		in      string
		want    string // String() of the parsed quorum
		wantErr bool
	}{
		{in: "all", want: "all"},
		{in: "majority", want: "majority"},
		{in: "2", want: "2"},
		{in: "0", wantErr: true}, // zero failing nodes would always decide
		{in: "-1", wantErr: true},
		{in: "x", wantErr: true},
		{in: "", wantErr: true},
		{in: "ALL", wantErr: true}, // the flag's values are case-sensitive
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			q, err := ParseQuorum(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseQuorum(%q) = %v, want an error", tc.in, q)
				}
				return
			}
			if err != nil || q.String() != tc.want {
				t.Fatalf("ParseQuorum(%q) = %v, %v; want %s", tc.in, q, err, tc.want)
			}
		})
	}
	// The zero Quorum behaves like the default, "all".
	if got := (Quorum{}).String(); got != "all" {
		t.Fatalf("Quorum{}.String() = %q, want all", got)
	}
}

func TestAggregate(t *testing.T) {
	now := time.Unix(10_000, 0)
	const stale = time.Minute
	// verdict is node's verdict renewed age ago, fresh for a minute.
	verdict := func(node string, status metav1.ConditionStatus, reason string, age time.Duration) Verdict {
		return Verdict{Node: node, Observed: health.Observation{Status: status, Reason: reason},
			RenewTime: now.Add(-age), StaleAfter: stale}
	}
	ok := func(node string) Verdict { return verdict(node, metav1.ConditionTrue, ReasonResolved, 0) }
	fail := func(node, reason string) Verdict { return verdict(node, metav1.ConditionFalse, reason, 0) }
	old := func(v Verdict) Verdict { v.RenewTime = now.Add(-stale - time.Second); return v }

	cases := []struct {
		name        string
		quorum      string
		verdicts    []Verdict
		wantOK      bool
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage []string // substrings of the message
		wantSummary Summary
	}{
		{
			name: "no verdicts: no evidence either way", quorum: "all",
		},
		{
			name: "only stale verdicts: no evidence either way", quorum: "all",
			verdicts:    []Verdict{old(fail("a", ReasonTimeout)), old(ok("b"))},
			wantSummary: Summary{Stale: 2},
		},
		{
			name: "all fresh failing under all: False with the most common reason", quorum: "all",
			verdicts: []Verdict{fail("c", ReasonResolverUnreachable), fail("a", ReasonTimeout), fail("b", ReasonTimeout)},
			wantOK:   true, wantStatus: metav1.ConditionFalse, wantReason: ReasonTimeout,
			wantMessage: []string{"3 of 3", "quorum all",
				// sorted by node name
				"a (ResolutionTimeout), b (ResolutionTimeout), c (ResolverUnreachable)"},
			wantSummary: Summary{Fresh: 3, Failing: 3},
		},
		{
			name: "one of two failing under all: True, but the failing node is named", quorum: "all",
			verdicts: []Verdict{ok("a"), fail("b", ReasonNameNotFound)},
			wantOK:   true, wantStatus: metav1.ConditionTrue, wantReason: ReasonResolved,
			wantMessage: []string{"1 of 2", "below quorum all", "b (NameNotFound)"},
			wantSummary: Summary{Fresh: 2, Failing: 1},
		},
		{
			name: "two of three failing under majority: False", quorum: "majority",
			verdicts: []Verdict{ok("a"), fail("b", ReasonTimeout), fail("c", ReasonTimeout)},
			wantOK:   true, wantStatus: metav1.ConditionFalse, wantReason: ReasonTimeout,
			wantMessage: []string{"2 of 3", "quorum majority"},
			wantSummary: Summary{Fresh: 3, Failing: 2},
		},
		{
			name: "one of three failing under majority: True", quorum: "majority",
			verdicts: []Verdict{ok("a"), ok("b"), fail("c", ReasonTimeout)},
			wantOK:   true, wantStatus: metav1.ConditionTrue, wantReason: ReasonResolved,
			wantMessage: []string{"2 of 3", "below quorum majority"},
			wantSummary: Summary{Fresh: 3, Failing: 1},
		},
		{
			name: "one of two failing under majority: True (half is no majority)", quorum: "majority",
			verdicts: []Verdict{ok("a"), fail("b", ReasonTimeout)},
			wantOK:   true, wantStatus: metav1.ConditionTrue, wantReason: ReasonResolved,
			wantSummary: Summary{Fresh: 2, Failing: 1},
		},
		{
			name: "count above the fresh verdicts is capped at them", quorum: "5",
			verdicts: []Verdict{fail("a", ReasonTimeout), fail("b", ReasonTimeout)},
			wantOK:   true, wantStatus: metav1.ConditionFalse, wantReason: ReasonTimeout,
			wantMessage: []string{"2 of 2", "quorum 5"},
			wantSummary: Summary{Fresh: 2, Failing: 2},
		},
		{
			name: "count of 2 reached among 4", quorum: "2",
			verdicts: []Verdict{ok("a"), ok("b"), fail("c", ReasonTimeout), fail("d", ReasonServerFailure)},
			wantOK:   true, wantStatus: metav1.ConditionFalse,
			// A tie between reasons goes to the first by name.
			wantReason:  ReasonServerFailure, // ResolutionServerFailure < ResolutionTimeout
			wantSummary: Summary{Fresh: 4, Failing: 2},
		},
		{
			name: "stale failing verdicts are ignored", quorum: "all",
			verdicts: []Verdict{ok("a"), old(fail("b", ReasonTimeout)), old(fail("c", ReasonTimeout))},
			wantOK:   true, wantStatus: metav1.ConditionTrue, wantReason: ReasonResolved,
			wantMessage: []string{"1 of 1"},
			wantSummary: Summary{Fresh: 1, Stale: 2},
		},
		{
			name: "stale passing verdicts are ignored", quorum: "all",
			verdicts: []Verdict{fail("a", ReasonTimeout), old(ok("b"))},
			wantOK:   true, wantStatus: metav1.ConditionFalse, wantReason: ReasonTimeout,
			wantSummary: Summary{Fresh: 1, Failing: 1, Stale: 1},
		},
		{
			name: "a verdict exactly at its staleness bound is still fresh", quorum: "all",
			verdicts: []Verdict{verdict("a", metav1.ConditionFalse, ReasonTimeout, stale)},
			wantOK:   true, wantStatus: metav1.ConditionFalse, wantReason: ReasonTimeout,
			wantSummary: Summary{Fresh: 1, Failing: 1},
		},
		{
			name: "Unknown counts as failing; an empty reason falls back", quorum: "all",
			verdicts: []Verdict{verdict("a", metav1.ConditionUnknown, "", 0)},
			wantOK:   true, wantStatus: metav1.ConditionFalse, wantReason: ReasonResolutionFailed,
			wantSummary: Summary{Fresh: 1, Failing: 1},
		},
		{
			name: "the message lists at most five nodes", quorum: "all",
			verdicts: []Verdict{fail("a", ReasonTimeout), fail("b", ReasonTimeout), fail("c", ReasonTimeout),
				fail("d", ReasonTimeout), fail("e", ReasonTimeout), fail("f", ReasonTimeout), fail("g", ReasonTimeout)},
			wantOK: true, wantStatus: metav1.ConditionFalse, wantReason: ReasonTimeout,
			wantMessage: []string{"e (ResolutionTimeout), and 2 more"},
			wantSummary: Summary{Fresh: 7, Failing: 7},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, err := ParseQuorum(tc.quorum)
			if err != nil {
				t.Fatal(err)
			}
			obs, summary, gotOK := Aggregate(tc.verdicts, now, q)
			if summary != tc.wantSummary {
				t.Errorf("summary = %+v, want %+v", summary, tc.wantSummary)
			}
			if gotOK != tc.wantOK {
				t.Fatalf("ok = %v, want %v (observation %+v)", gotOK, tc.wantOK, obs)
			}
			if !gotOK {
				return
			}
			if obs.Status != tc.wantStatus || obs.Reason != tc.wantReason {
				t.Errorf("got %s/%s, want %s/%s", obs.Status, obs.Reason, tc.wantStatus, tc.wantReason)
			}
			for _, s := range tc.wantMessage {
				if !strings.Contains(obs.Message, s) {
					t.Errorf("message %q does not contain %q", obs.Message, s)
				}
			}
		})
	}
}
