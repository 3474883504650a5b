package detector

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// cand builds a Candidate: ns "" is a ClusterPropagationPolicy; the UID is
// the name's.
func cand(ns, name string, prio int32, implicit ImplicitPriority, preemption policyv1alpha1.PreemptionBehavior) Candidate {
	return Candidate{PolicyRef: PolicyRef{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}, Priority: prio,
		Implicit: implicit, Preemption: preemption, NamesObject: implicit == PriorityMatchName}
}

func ref(ns, name string) *PolicyRef {
	return &PolicyRef{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}
}

const (
	always = policyv1alpha1.PreemptAlways
	never  = policyv1alpha1.PreemptNever
)

// TestDecideClaim: the claim decision over both kinds, priorities,
// preemption and implicit priority. The Karmada e2e test each row mirrors
// is named in it (test/e2e/suites/base/preemption_test.go "[Preemption]",
// propagationpolicy_test.go and clusterpropagationpolicy_test.go
// "[ImplicitPriority]"/"[ExplicitPriority]"); rows without one are
// Karmada's pkg/detector rules (preemption.go, compare.go, policy.go).
func TestDecideClaim(t *testing.T) {
	ns := "default"
	notNamed := func(c Candidate) Candidate { c.NamesObject = false; return c }
	for _, c := range []struct {
		name       string
		claim      *PolicyRef
		candidates []Candidate
		want       string // winner's name, "" for none
		preempted  string
		released   string
		blocked    string
		reason     string
		why        string // in the blocked message
	}{
		{name: "nothing selects", want: ""},
		{name: "unclaimed: a PropagationPolicy before a ClusterPropagationPolicy, whatever the priority",
			candidates: []Candidate{cand("", "cpp", 100, PriorityMatchName, always), cand(ns, "pp", 0, PriorityMatchAll, never)}, want: "pp"},
		{name: "unclaimed: explicit priority first ([ExplicitPriority] high explicit/low priority/implicit priority)",
			candidates: []Candidate{cand(ns, "by-name", 1, PriorityMatchName, never), cand(ns, "by-label", 2, PriorityMatchLabelSelector, never)}, want: "by-label"},
		{name: "unclaimed: same priority, by name before by label ([ExplicitPriority] same explicit priority)",
			candidates: []Candidate{cand(ns, "a-label", 3, PriorityMatchLabelSelector, never), cand(ns, "z-name", 3, PriorityMatchName, never)}, want: "z-name"},
		{name: "unclaimed: by label before all ([ImplicitPriority] priorityMatchLabel)",
			candidates: []Candidate{cand(ns, "a-all", 0, PriorityMatchAll, never), cand(ns, "z-label", 0, PriorityMatchLabelSelector, never)}, want: "z-label"},
		{name: "unclaimed: cluster-wide implicit priority ([ImplicitPriority] ClusterPropagationPolicy)",
			candidates: []Candidate{cand("", "a-all", 0, PriorityMatchAll, never), cand("", "z-name", 0, PriorityMatchName, never)}, want: "z-name"},
		{name: "unclaimed: all else equal, the lower name",
			candidates: []Candidate{cand(ns, "b", 0, PriorityMatchName, never), cand(ns, "a", 0, PriorityMatchName, never)}, want: "a"},

		{name: "claimed: a higher-priority PropagationPolicy with preemption Never does not take it",
			claim:      ref(ns, "low"),
			candidates: []Candidate{cand(ns, "low", 5, PriorityMatchName, never), cand(ns, "high", 10, PriorityMatchName, never)},
			want:       "low", blocked: "high", reason: ReasonClaimedByOtherPolicy, why: "preemption Never"},
		{name: "claimed: a more precise policy of the same priority does not take it",
			claim:      ref(ns, "by-label"),
			candidates: []Candidate{cand(ns, "by-label", 0, PriorityMatchLabelSelector, never), cand(ns, "by-name", 0, PriorityMatchName, never)},
			want:       "by-label", blocked: "by-name", reason: ReasonClaimedByOtherPolicy},
		{name: "claimed: high-priority PropagationPolicy preempts low-priority PropagationPolicy ([Preemption])",
			claim:      ref(ns, "low"),
			candidates: []Candidate{cand(ns, "low", 5, PriorityMatchName, never), cand(ns, "high", 10, PriorityMatchName, always)},
			want:       "high", preempted: "low"},
		{name: "claimed: preemption Always with the same priority is not enough",
			claim:      ref(ns, "by-label"),
			candidates: []Candidate{cand(ns, "by-label", 5, PriorityMatchLabelSelector, never), cand(ns, "by-name", 5, PriorityMatchName, always)},
			want:       "by-label", blocked: "by-name", reason: ReasonPreemptionNotAllowed, why: "higher priority than the claimant's 5"},
		{name: "claimed: preemption Always by label selector takes nothing (Karmada preempts only named templates)",
			claim:      ref(ns, "low"),
			candidates: []Candidate{cand(ns, "low", 0, PriorityMatchName, never), cand(ns, "high", 10, PriorityMatchLabelSelector, always)},
			want:       "low", blocked: "high", reason: ReasonPreemptionNotAllowed, why: "resourceSelector names"},
		{name: "claimed: a lower-priority PropagationPolicy with preemption Always is not a contender",
			claim:      ref(ns, "high"),
			candidates: []Candidate{cand(ns, "high", 10, PriorityMatchAll, never), cand(ns, "low", 5, PriorityMatchName, always)},
			want:       "high"},
		{name: "claimed by a ClusterPropagationPolicy: a PropagationPolicy without preemption does not take it",
			claim:      ref("", "cpp"),
			candidates: []Candidate{cand("", "cpp", 0, PriorityMatchAll, never), cand(ns, "pp", 100, PriorityMatchName, never)},
			want:       "cpp", blocked: "pp", reason: ReasonClaimedByOtherPolicy},
		{name: "claimed by a ClusterPropagationPolicy: PropagationPolicy preempts ClusterPropagationPolicy, whatever the priorities ([Preemption])",
			claim:      ref("", "cpp"),
			candidates: []Candidate{cand("", "cpp", 100, PriorityMatchName, never), cand(ns, "pp", -5, PriorityMatchName, always)},
			want:       "pp", preempted: "cpp"},
		{name: "claimed by a ClusterPropagationPolicy: high-priority ClusterPropagationPolicy preempts low-priority ClusterPropagationPolicy ([Preemption])",
			claim:      ref("", "low"),
			candidates: []Candidate{cand("", "low", 5, PriorityMatchName, never), cand("", "high", 10, PriorityMatchName, always)},
			want:       "high", preempted: "low"},
		{name: "claimed by a ClusterPropagationPolicy: a ClusterPropagationPolicy that does not name the object does not preempt",
			claim:      ref("", "low"),
			candidates: []Candidate{cand("", "low", 5, PriorityMatchName, never), notNamed(cand("", "high", 10, PriorityMatchName, always))},
			want:       "low", blocked: "high", reason: ReasonPreemptionNotAllowed, why: "and namespace"},
		{name: "claimed by a PropagationPolicy: a ClusterPropagationPolicy never preempts it, nor contends",
			claim:      ref(ns, "pp"),
			candidates: []Candidate{cand(ns, "pp", 0, PriorityMatchAll, never), cand("", "cpp", 100, PriorityMatchName, always)},
			want:       "pp"},
		{name: "claimed: the first-ranked of several preemptors takes it",
			claim: ref(ns, "low"),
			candidates: []Candidate{cand(ns, "low", 0, PriorityMatchName, never), cand(ns, "mid", 5, PriorityMatchName, always),
				cand(ns, "top", 9, PriorityMatchName, always), cand("", "cpp", 50, PriorityMatchName, always)},
			want: "top", preempted: "low"},
		{name: "claimed: a blocked policy ranked first does not stop a lower preemptor",
			claim:      ref(ns, "low"),
			candidates: []Candidate{cand(ns, "low", 0, PriorityMatchName, never), cand(ns, "top", 9, PriorityMatchName, never), cand(ns, "mid", 5, PriorityMatchName, always)},
			want:       "mid", preempted: "low"},
		{name: "claimed: the claimant's priority dropped, a preemptor takes it ([Preemption] reduces priority to be preempted)",
			claim:      ref(ns, "was-high"),
			candidates: []Candidate{cand(ns, "was-high", 4, PriorityMatchName, always), cand(ns, "low", 5, PriorityMatchName, always)},
			want:       "low", preempted: "was-high"},

		{name: "the claimant is gone: the template goes to the next by rank ([ImplicitPriority] after the name match is removed)",
			claim:      ref(ns, "deleted"),
			candidates: []Candidate{cand(ns, "by-all", 0, PriorityMatchAll, never), cand(ns, "by-label", 0, PriorityMatchLabelSelector, never)},
			want:       "by-label", released: "deleted"},
		{name: "the claimant was re-created under its name: the claim was the old one's",
			claim:      &PolicyRef{Namespace: ns, Name: "p", UID: "old-uid"},
			candidates: []Candidate{cand(ns, "p", 0, PriorityMatchAll, never), cand(ns, "q", 10, PriorityMatchAll, never)},
			want:       "q", released: "p"},
		{name: "a claim recorded without a UID (before Flotilla recorded them) holds by name",
			claim:      &PolicyRef{Namespace: ns, Name: "p"},
			candidates: []Candidate{cand(ns, "p", 0, PriorityMatchAll, never), cand(ns, "q", 10, PriorityMatchAll, never)},
			want:       "p", blocked: "q", reason: ReasonClaimedByOtherPolicy},
		{name: "the claimant no longer selects and nothing else does", claim: ref(ns, "p"), want: "", released: "p"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := DecideClaim(c.claim, c.candidates)
			name := func(r *PolicyRef) string {
				if r == nil {
					return ""
				}
				return r.Name
			}
			var winner, blocked string
			if d.Winner != nil {
				winner = d.Winner.Name
			}
			if d.Blocked != nil {
				blocked = d.Blocked.Name
			}
			if winner != c.want || name(d.Preempted) != c.preempted || name(d.Released) != c.released || blocked != c.blocked || d.BlockedReason != c.reason {
				t.Errorf("got winner %q preempted %q released %q blocked %q (%s); want %q, %q, %q, %q (%s)",
					winner, name(d.Preempted), name(d.Released), blocked, d.BlockedReason, c.want, c.preempted, c.released, c.blocked, c.reason)
			}
			if !strings.Contains(d.BlockedMessage, c.why) {
				t.Errorf("blocked message %q does not say %q", d.BlockedMessage, c.why)
			}
		})
	}
}

// TestDecideClaimInvariants: over random policy sets and claims, a decision
// settles at once (deciding again from its winner's claim keeps the
// winner: no ping-pong between policies), a template moves from a valid
// claimant only by a preemption Karmada allows, and an unclaimed template
// goes to the first by rank. FLOTILLA_CLAIM_SEED replays a seed.
func TestDecideClaimInvariants(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("FLOTILLA_CLAIM_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (FLOTILLA_CLAIM_SEED=%d replays it)", seed, seed)
	rnd := rand.New(rand.NewSource(seed))
	for i := 0; i < 5000; i++ {
		var candidates []Candidate
		for j := 0; j < 1+rnd.Intn(6); j++ {
			ns := "default"
			if rnd.Intn(2) == 0 {
				ns = ""
			}
			p := cand(ns, fmt.Sprintf("p%d", j), int32(rnd.Intn(3)), ImplicitPriority(1+rnd.Intn(3)), never)
			if rnd.Intn(2) == 0 {
				p.Preemption = always
			}
			p.NamesObject = p.Implicit == PriorityMatchName && rnd.Intn(4) > 0
			candidates = append(candidates, p)
		}
		var claim *PolicyRef
		switch rnd.Intn(3) {
		case 0:
			r := candidates[rnd.Intn(len(candidates))].PolicyRef
			claim = &r
		case 1:
			claim = ref("default", "gone")
		}
		d := DecideClaim(claim, candidates)
		if d.Winner == nil {
			t.Fatalf("seed %d case %d: no winner among %d candidates", seed, i, len(candidates))
		}
		again := DecideClaim(&d.Winner.PolicyRef, candidates)
		if again.Winner.PolicyRef != d.Winner.PolicyRef || again.Preempted != nil || again.Released != nil {
			t.Fatalf("seed %d case %d: decided %s, then from its claim %s (preempted %v)", seed, i, d.Winner.PolicyRef, again.Winner.PolicyRef, again.Preempted)
		}
		var claimant *Candidate
		for k := range candidates {
			if claim != nil && claim.is(candidates[k].PolicyRef) {
				claimant = &candidates[k]
			}
		}
		switch {
		case claimant == nil:
			for _, c := range candidates {
				if c.PolicyRef != d.Winner.PolicyRef && rankBefore(c, *d.Winner) {
					t.Fatalf("seed %d case %d: unclaimed went to %s, but %s ranks before it", seed, i, d.Winner.PolicyRef, c.PolicyRef)
				}
			}
		case d.Winner.PolicyRef != claimant.PolicyRef:
			if ok, _, _ := mayPreempt(*d.Winner, *claimant); !ok || d.Preempted == nil {
				t.Fatalf("seed %d case %d: %s took the template from %s without a preemption Karmada allows", seed, i, d.Winner.PolicyRef, claimant.PolicyRef)
			}
			if d.Winner.Cluster() && !claimant.Cluster() {
				t.Fatalf("seed %d case %d: a ClusterPropagationPolicy took a PropagationPolicy's template", seed, i)
			}
		}
	}
}

func TestSelectorsPriority(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "team", "labels": map[string]any{"app": "web"}}}}
	sel := func(name, ns string, labels map[string]string) policyv1alpha1.ResourceSelector {
		s := policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: name, Namespace: ns}
		if labels != nil {
			s.LabelSelector = metav1.SetAsLabelSelector(labels)
		}
		return s
	}
	for _, c := range []struct {
		name      string
		selectors []policyv1alpha1.ResourceSelector
		policyNS  string
		want      ImplicitPriority
		names     bool // namesObject for a PropagationPolicy
		cnames    bool // namesObject for a ClusterPropagationPolicy
	}{
		{"by kind", []policyv1alpha1.ResourceSelector{sel("", "", nil)}, "team", PriorityMatchAll, false, false},
		{"by label", []policyv1alpha1.ResourceSelector{sel("", "", map[string]string{"app": "web"})}, "team", PriorityMatchLabelSelector, false, false},
		{"label mismatch", []policyv1alpha1.ResourceSelector{sel("", "", map[string]string{"app": "db"})}, "team", PriorityMisMatch, false, false},
		{"by name (a label selector beside it is ignored, as in Karmada)", []policyv1alpha1.ResourceSelector{sel("web", "", map[string]string{"app": "db"})}, "team", PriorityMatchName, true, false},
		{"by namespace and name", []policyv1alpha1.ResourceSelector{sel("web", "team", nil)}, "", PriorityMatchName, true, true},
		{"the best selector counts", []policyv1alpha1.ResourceSelector{sel("", "", nil), sel("web", "", nil), sel("", "", map[string]string{"app": "web"})}, "team", PriorityMatchName, true, false},
		{"another namespace's policy", []policyv1alpha1.ResourceSelector{sel("web", "", nil)}, "other", PriorityMisMatch, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := SelectorsPriority(c.selectors, obj, c.policyNS); got != c.want {
				t.Errorf("SelectorsPriority = %d, want %d", got, c.want)
			}
			if got := namesObject(c.selectors, obj, false); got != c.names {
				t.Errorf("namesObject for a PropagationPolicy = %v, want %v", got, c.names)
			}
			if got := namesObject(c.selectors, obj, true); got != c.cnames {
				t.Errorf("namesObject for a ClusterPropagationPolicy = %v, want %v", got, c.cnames)
			}
		})
	}
}

func TestClaimLabelsRoundTrip(t *testing.T) {
	for _, r := range []PolicyRef{{Namespace: "team", Name: "web", UID: "u1"}, {Name: "fleet", UID: "u2"}} {
		got := claimOf(claimLabels(r))
		if got == nil || *got != r {
			t.Errorf("claimOf(claimLabels(%+v)) = %+v", r, got)
		}
	}
	if claimOf(map[string]string{"app": "x"}) != nil {
		t.Error("a binding without policy labels has a claim")
	}
	legacy := claimOf(map[string]string{workobjects.LabelPropagationPolicyNamespace: "team", workobjects.LabelPropagationPolicyName: "web"})
	if legacy == nil || legacy.UID != "" || legacy.Name != "web" {
		t.Errorf("legacy claim = %+v", legacy)
	}
}

// A binding written before the permanent-id label is not rewritten for it
// alone (an upgraded hub would write every binding); any other change
// brings it.
func TestWithoutNewPermanentID(t *testing.T) {
	want := claimLabels(PolicyRef{Namespace: "team", Name: "web", UID: "u1"})
	legacy := map[string]string{workobjects.LabelPropagationPolicyNamespace: "team", workobjects.LabelPropagationPolicyName: "web"}
	if got := withoutNewPermanentID(want, legacy); len(got) != len(legacy) || got[workobjects.LabelPropagationPolicyName] != "web" {
		t.Errorf("legacy binding: compared as %v, want %v", got, legacy)
	}
	if _, ok := want[workobjects.LabelPropagationPolicyPermanentID]; !ok {
		t.Error("want was changed")
	}
	recorded := claimLabels(PolicyRef{Namespace: "team", Name: "web", UID: "u0"})
	if got := withoutNewPermanentID(want, recorded); got[workobjects.LabelPropagationPolicyPermanentID] != "u1" {
		t.Errorf("a recorded UID is compared: got %v", got)
	}
}

// A template ported from Karmada carries its claim on the object (wrap
// rewrites the keys): the claim the detector starts from.
func TestObjectClaim(t *testing.T) {
	obj := func(ns string, labels map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "nginx", "namespace": ns, "labels": labels}}}
	}
	for _, c := range []struct {
		name string
		obj  *unstructured.Unstructured
		want *PolicyRef
	}{
		{"none", obj("default", map[string]any{"app": "nginx"}), nil},
		{"PropagationPolicy", obj("default", map[string]any{workobjects.LabelPropagationPolicyName: "p", workobjects.LabelPropagationPolicyNamespace: "default"}),
			&PolicyRef{Namespace: "default", Name: "p"}},
		{"PropagationPolicy without its namespace label", obj("default", map[string]any{workobjects.LabelPropagationPolicyName: "p"}),
			&PolicyRef{Namespace: "default", Name: "p"}},
		{"PropagationPolicy of another namespace", obj("default", map[string]any{workobjects.LabelPropagationPolicyName: "p", workobjects.LabelPropagationPolicyNamespace: "other"}), nil},
		{"PropagationPolicy on a cluster-scoped object", obj("", map[string]any{workobjects.LabelPropagationPolicyName: "p"}), nil},
		{"ClusterPropagationPolicy", obj("default", map[string]any{workobjects.LabelClusterPropagationPolicyName: "fleet"}), &PolicyRef{Name: "fleet"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := objectClaim(c.obj)
			if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
				t.Errorf("objectClaim = %+v, want %+v", got, c.want)
			}
		})
	}
}

// A binding's labels hold a policy name longer than 63 characters
// shortened (workobjects.PolicyLabelValue): the claim read back from them is
// still that policy's, so it holds instead of being released on every sync.
func TestClaimOfALongPolicyNameHolds(t *testing.T) {
	long := strings.Repeat("a-very-long-policy-name-", 5)
	for _, ns := range []string{"default", ""} {
		c := cand(ns, long, 0, PriorityMatchName, never)
		c.UID = "6f1c2b0e-3d4a-4e5f-9a8b-7c6d5e4f3a2b"
		labels := workobjects.PolicyLabels(claimLabels(c.PolicyRef))
		if got := labels[workobjects.LabelPropagationPolicyName] + labels[workobjects.LabelClusterPropagationPolicyName]; got == long {
			t.Fatalf("the label holds the name unshortened: %q", got)
		}
		other := cand(ns, "other", 0, PriorityMatchName, never)
		d := DecideClaim(claimOf(labels), []Candidate{other, c})
		if d.Released != nil || d.Winner == nil || d.Winner.Name != long {
			t.Errorf("namespace %q: claim %+v of the long-named policy: winner %v, released %v; want it held", ns, claimOf(labels), d.Winner, d.Released)
		}
	}
}
