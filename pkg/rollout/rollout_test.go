package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

var t0 = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

const (
	healthy   = workv1alpha1.ResourceHealthy
	unhealthy = workv1alpha1.ResourceUnhealthy
	unknown   = workv1alpha1.ResourceUnknown
)

// staged is the strategy: member1 first, then the rest.
func staged(deadline time.Duration, rollback bool) *policyv1alpha1.RolloutStrategy {
	s := &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeProgressivePerGroup,
		ProgressivePerGroup: &policyv1alpha1.RolloutProgressivePerGroup{
			RolloutConfig: policyv1alpha1.RolloutConfig{ProgressDeadline: &metav1.Duration{Duration: deadline}},
			DecisionGroups: []policyv1alpha1.RolloutGroup{{GroupName: "canary",
				GroupClusterSelector: policyv1alpha1.GroupClusterSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}}}},
		}}
	if rollback {
		s.Rollback = &policyv1alpha1.RolloutRollback{Type: policyv1alpha1.RollbackAll}
	}
	return s
}

func members(running int64, h workv1alpha1.ResourceHealth) []Cluster {
	return []Cluster{
		{Name: "member1", Labels: map[string]string{"ring": "canary"}, Running: running, Health: h},
		{Name: "member2", Running: running, Health: h},
		{Name: "member3", Running: running, Health: h},
	}
}

// step decides, then applies the decision to the clusters as the members
// would: a changed revision's health is Unknown until health(c) says.
func step(in *Input, health func(c *Cluster) workv1alpha1.ResourceHealth) Decision {
	d := Decide(*in)
	for i := range in.Clusters {
		c := &in.Clusters[i]
		if rev, ok := d.Revisions[c.Name]; ok && rev != c.Running {
			c.Running, c.Health = rev, unknown
		} else if c.Running > 0 {
			c.Health = health(c)
		}
	}
	st := d.Status
	in.Previous, in.Stable = &st, d.Stable
	return d
}

func verdict(st workv1alpha1.RolloutStatus, cluster string) workv1alpha1.ClusterVerdict {
	for _, c := range st.Clusters {
		if c.ClusterName == cluster {
			return c.Verdict
		}
	}
	return ""
}

func TestAllGivesEveryClusterTheNewestRevisionAtOnce(t *testing.T) {
	for _, s := range []*policyv1alpha1.RolloutStrategy{nil, {Type: policyv1alpha1.RolloutTypeAll}} {
		d := Decide(Input{Strategy: s, Target: 2, Stable: 1, Clusters: members(1, healthy), Now: t0})
		for _, c := range []string{"member1", "member2", "member3"} {
			if d.Revisions[c] != 2 {
				t.Fatalf("%s gets revision %d, want 2 at once", c, d.Revisions[c])
			}
		}
		if d.Stable != 2 {
			t.Fatalf("stable %d, want the newest (2): failover renders the template as it is", d.Stable)
		}
	}
}

// The scenario: an edit whose pods never become Healthy, staged
// member1 then the rest, halts after member1 and the others never get it;
// with rollback member1 returns to revision 1.
func TestUnhealthyCanaryHaltsAndRollsBack(t *testing.T) {
	for _, rb := range []bool{false, true} {
		t.Run(fmt.Sprintf("rollback=%v", rb), func(t *testing.T) {
			in := Input{Strategy: staged(time.Minute, rb), Target: 2, Stable: 1, Clusters: members(1, healthy), Now: t0}
			bad := func(c *Cluster) workv1alpha1.ResourceHealth {
				if c.Running == 2 {
					return unhealthy
				}
				return healthy
			}
			d := step(&in, bad)
			if d.Revisions["member1"] != 2 || d.Revisions["member2"] != 1 || d.Revisions["member3"] != 1 {
				t.Fatalf("first step revisions %v, want only member1 on 2", d.Revisions)
			}
			for i := 0; i < 10; i++ {
				in.Now = in.Now.Add(10 * time.Second)
				d = step(&in, bad)
				if d.Revisions["member2"] != 1 || d.Revisions["member3"] != 1 {
					t.Fatalf("step %d: %v: a cluster past the canary got the revision before it succeeded", i, d.Revisions)
				}
			}
			if !halted(d.Status.Phase) {
				t.Fatalf("phase %s after the deadline, want halted: %s", d.Status.Phase, d.Status.Message)
			}
			if !strings.Contains(d.Status.Message, "member1") {
				t.Fatalf("halt message %q does not name member1", d.Status.Message)
			}
			want := int64(2)
			if rb {
				want = 1
			}
			if d.Revisions["member1"] != want {
				t.Fatalf("member1 renders revision %d after the halt, want %d", d.Revisions["member1"], want)
			}
			if rb && d.Status.Phase != workv1alpha1.RolloutPhaseRolledBack {
				in.Now = in.Now.Add(time.Second)
				d = step(&in, bad)
				if d.Status.Phase != workv1alpha1.RolloutPhaseRolledBack {
					t.Fatalf("phase %s, want RolledBack", d.Status.Phase)
				}
			}
		})
	}
}

func TestHealthyRolloutCompletesGroupByGroupAfterSoak(t *testing.T) {
	s := staged(time.Minute, false)
	s.ProgressivePerGroup.MinSuccessTime = metav1.Duration{Duration: 30 * time.Second}
	in := Input{Strategy: s, Target: 2, Stable: 1, Clusters: members(1, healthy), Now: t0}
	good := func(*Cluster) workv1alpha1.ResourceHealth { return healthy }
	d := step(&in, good)
	in.Now = in.Now.Add(time.Second)
	step(&in, good) // the agent reports the new copy Healthy
	in.Now = in.Now.Add(10 * time.Second)
	d = step(&in, good)
	if got := verdict(d.Status, "member1"); got != workv1alpha1.VerdictSoaking {
		t.Fatalf("member1 %s, want Soaking", got)
	}
	if d.Revisions["member2"] != 1 {
		t.Fatal("member2 updated while the canary soaks")
	}
	if d.RequeueAfter <= 0 || d.RequeueAfter > 30*time.Second {
		t.Fatalf("requeue after %s, want when the soak ends", d.RequeueAfter)
	}
	in.Now = in.Now.Add(31 * time.Second)
	d = step(&in, good)
	if d.Revisions["member2"] != 2 || d.Revisions["member3"] != 2 {
		t.Fatalf("revisions %v after the canary soaked, want the rest updated", d.Revisions)
	}
	for i := 0; i < 3; i++ {
		in.Now = in.Now.Add(31 * time.Second)
		d = step(&in, good)
	}
	if d.Status.Phase != workv1alpha1.RolloutPhaseComplete || d.Stable != 2 {
		t.Fatalf("phase %s stable %d, want Complete on 2", d.Status.Phase, d.Stable)
	}
}

func TestUnknownHealthNeverSucceeds(t *testing.T) {
	in := Input{Strategy: staged(time.Hour, false), Target: 2, Stable: 1, Clusters: members(1, healthy), Now: t0}
	for i := 0; i < 20; i++ {
		in.Now = in.Now.Add(time.Minute)
		d := step(&in, func(*Cluster) workv1alpha1.ResourceHealth { return unknown })
		if d.Revisions["member2"] == 2 {
			t.Fatal("the canary's Unknown health counted as success")
		}
	}
}

func TestApprovalGate(t *testing.T) {
	s := staged(time.Minute, false)
	s.ProgressivePerGroup.DecisionGroups[0].Approval = policyv1alpha1.ApprovalRequired
	in := Input{Strategy: s, Target: 2, Stable: 1, Clusters: members(1, healthy), Now: t0}
	good := func(*Cluster) workv1alpha1.ResourceHealth { return healthy }
	var d Decision
	for i := 0; i < 3; i++ {
		in.Now = in.Now.Add(time.Second)
		d = step(&in, good)
	}
	if d.Status.Phase != workv1alpha1.RolloutPhaseWaiting || !strings.Contains(d.Status.Message, "approve") || d.Revisions["member2"] != 1 {
		t.Fatalf("phase %s %q %v, want waiting for approval", d.Status.Phase, d.Status.Message, d.Revisions)
	}
	in.Approve = "1/canary" // an older revision's approval does not count
	d = step(&in, good)
	if d.Revisions["member2"] != 1 {
		t.Fatal("an approval of revision 1 let revision 2 go on")
	}
	in.Approve = "2/canary"
	d = step(&in, good)
	if d.Revisions["member2"] != 2 {
		t.Fatalf("approved, yet %v", d.Revisions)
	}
}

func TestLostClusterIsNeitherSuccessNorFailure(t *testing.T) {
	in := Input{Strategy: staged(time.Minute, false), Target: 2, Stable: 1, Clusters: members(1, healthy), Now: t0}
	in.Clusters = append(in.Clusters, Cluster{Name: "member0", Labels: map[string]string{"ring": "canary"}, Running: 1, Health: unknown, Lost: true, LostReason: "lease expired"})
	good := func(*Cluster) workv1alpha1.ResourceHealth { return healthy }
	var d Decision
	for i := 0; i < 8; i++ {
		in.Now = in.Now.Add(20 * time.Second)
		d = step(&in, good)
	}
	if d.Status.Phase != workv1alpha1.RolloutPhaseComplete {
		t.Fatalf("phase %s (%s), want Complete without the lost canary", d.Status.Phase, d.Status.Message)
	}
	if d.Status.Failures != 0 || verdict(d.Status, "member0") != workv1alpha1.VerdictLost {
		t.Fatalf("lost cluster counted: failures %d verdict %s", d.Status.Failures, verdict(d.Status, "member0"))
	}
}

func TestReplacementGetsStableRevision(t *testing.T) {
	in := Input{Strategy: staged(time.Minute, false), Target: 2, Stable: 1, Clusters: members(1, healthy), Now: t0}
	step(&in, func(*Cluster) workv1alpha1.ResourceHealth { return unknown })
	// member3 failed over to member4, which has no copy yet.
	in.Clusters = append(in.Clusters[:2], Cluster{Name: "member4"})
	d := step(&in, func(*Cluster) workv1alpha1.ResourceHealth { return unknown })
	if d.Revisions["member4"] != 1 {
		t.Fatalf("replacement renders %d, want the stable revision 1", d.Revisions["member4"])
	}
	// A new workload (no stable revision): nothing until its group.
	in = Input{Strategy: staged(time.Minute, false), Target: 1, Clusters: members(0, unknown), Now: t0}
	d = Decide(in)
	if _, ok := d.Revisions["member2"]; ok || d.Revisions["member1"] != 1 {
		t.Fatalf("first rollout revisions %v, want only member1", d.Revisions)
	}
}

func TestResumeIsHonouredOnce(t *testing.T) {
	in := Input{Strategy: staged(time.Minute, false), Target: 2, Stable: 1, Clusters: members(1, healthy), Now: t0}
	bad := func(c *Cluster) workv1alpha1.ResourceHealth { return unhealthy }
	for i := 0; i < 10 && !halted(stepPhase(&in, bad)); i++ {
		in.Now = in.Now.Add(20 * time.Second)
	}
	in.Resume = "2"
	if p := stepPhase(&in, bad); p != workv1alpha1.RolloutPhaseProgressing {
		t.Fatalf("phase %s after resume", p)
	}
	for i := 0; i < 10 && !halted(stepPhase(&in, bad)); i++ {
		in.Now = in.Now.Add(20 * time.Second)
	}
	if p := stepPhase(&in, bad); !halted(p) {
		t.Fatalf("phase %s: the same resume value resumed twice", p)
	}
}

func stepPhase(in *Input, h func(*Cluster) workv1alpha1.ResourceHealth) workv1alpha1.RolloutPhase {
	return step(in, h).Status.Phase
}

func TestMaxConcurrencyCountsDisruptions(t *testing.T) {
	one := intstr.FromInt32(1)
	s := &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeProgressive,
		Progressive: &policyv1alpha1.RolloutProgressive{MaxConcurrency: &one}}
	d := Decide(Input{Strategy: s, Target: 2, Stable: 1, Clusters: members(1, healthy), Now: t0, Disruptions: 1})
	for _, c := range []string{"member1", "member2", "member3"} {
		if d.Revisions[c] != 1 {
			t.Fatalf("%s updated while a copy is being evicted and maxConcurrency is 1", c)
		}
	}
	d = Decide(Input{Strategy: s, Target: 2, Stable: 1, Clusters: members(1, healthy), Now: t0})
	if d.Revisions["member1"] != 2 || d.Revisions["member2"] != 1 {
		t.Fatalf("revisions %v, want member1 only", d.Revisions)
	}
	d = Decide(Input{Strategy: s, Target: 2, Stable: 1, Clusters: members(1, healthy), Now: t0, Hold: "the fleet guard sees 2 of 3 clusters not Ready"})
	if d.Revisions["member1"] != 1 || d.Status.Phase != workv1alpha1.RolloutPhaseWaiting {
		t.Fatalf("revisions %v phase %s under the fleet guard's hold", d.Revisions, d.Status.Phase)
	}
}

func TestAnalysisGates(t *testing.T) {
	s := staged(time.Minute, true)
	s.ProgressivePerGroup.DecisionGroups[0].Analysis = &policyv1alpha1.RolloutAnalysis{SuccessCondition: "result < 1"}
	good := func(*Cluster) workv1alpha1.ResourceHealth { return healthy }
	for _, tc := range []struct {
		phase workv1alpha1.AnalysisPhase
		want  workv1alpha1.RolloutPhase
	}{
		{workv1alpha1.AnalysisSuccessful, workv1alpha1.RolloutPhaseProgressing},
		{workv1alpha1.AnalysisRunning, workv1alpha1.RolloutPhaseProgressing},
		{workv1alpha1.AnalysisInconclusive, workv1alpha1.RolloutPhaseWaiting},
		{workv1alpha1.AnalysisFailed, workv1alpha1.RolloutPhaseRollingBack},
	} {
		in := Input{Strategy: s, Target: 2, Stable: 1, Clusters: members(1, healthy), Now: t0,
			Analyzer: func(string, policyv1alpha1.RolloutAnalysis, []string) workv1alpha1.AnalysisStatus {
				return workv1alpha1.AnalysisStatus{Phase: tc.phase}
			}}
		var d Decision
		for i := 0; i < 4; i++ {
			in.Now = in.Now.Add(time.Second)
			d = step(&in, good)
		}
		if d.Status.Phase != tc.want {
			t.Errorf("analysis %s: phase %s (%s), want %s", tc.phase, d.Status.Phase, d.Status.Message, tc.want)
		}
		if updated := d.Revisions["member2"] == 2; updated != (tc.phase == workv1alpha1.AnalysisSuccessful) {
			t.Errorf("analysis %s: member2 updated=%v", tc.phase, updated)
		}
	}
	// No analyzer (no Prometheus): inconclusive, never success.
	in := Input{Strategy: s, Target: 2, Stable: 1, Clusters: members(1, healthy), Now: t0}
	var d Decision
	for i := 0; i < 3; i++ {
		d = step(&in, good)
	}
	if d.Revisions["member2"] == 2 {
		t.Fatal("an analysis the hub cannot run counted as success")
	}
}

func TestOwnsCopy(t *testing.T) {
	st := &workv1alpha1.RolloutStatus{Revision: 2, StableRevision: 1, Phase: workv1alpha1.RolloutPhaseProgressing,
		Clusters: []workv1alpha1.ClusterRolloutStatus{{ClusterName: "member1", Revision: 2}, {ClusterName: "member2", Revision: 1}}}
	if !OwnsCopy(st, "member1") || OwnsCopy(st, "member2") || OwnsCopy(st, "member3") || OwnsCopy(nil, "member1") {
		t.Fatal("a copy on the revision in its gates is the rollout's; others are failover's")
	}
	for _, p := range []workv1alpha1.RolloutPhase{workv1alpha1.RolloutPhaseHalted, workv1alpha1.RolloutPhaseRolledBack, workv1alpha1.RolloutPhaseComplete} {
		st.Phase = p
		if OwnsCopy(st, "member1") {
			t.Fatalf("phase %s still owns the copy", p)
		}
	}
}

// The canary is lost mid-rollout and fails over: its replacement outside
// the canary group runs the stable revision, and the rollout does not take
// the emptied canary group as passed: a person decides.
func TestCanaryLostMidRolloutWaitsForAPerson(t *testing.T) {
	in := Input{Strategy: staged(time.Minute, false), Target: 2, Stable: 1, Clusters: members(1, healthy), Now: t0}
	unknownHealth := func(*Cluster) workv1alpha1.ResourceHealth { return unknown }
	step(&in, unknownHealth)
	in.Clusters[0].Lost = true
	in.Now = in.Now.Add(5 * time.Second)
	d := step(&in, unknownHealth)
	if v := verdict(d.Status, "member1"); v != workv1alpha1.VerdictLost || d.Status.Failures != 0 {
		t.Fatalf("lost canary: verdict %s failures %d", v, d.Status.Failures)
	}
	// Failed over: member1 leaves the targets, member4 replaces it.
	in.Clusters = append([]Cluster{}, in.Clusters[1], in.Clusters[2], Cluster{Name: "member4"})
	for i := 0; i < 3; i++ {
		in.Now = in.Now.Add(5 * time.Second)
		d = step(&in, func(*Cluster) workv1alpha1.ResourceHealth { return healthy })
		if d.Revisions["member4"] != 1 || d.Revisions["member2"] != 1 {
			t.Fatalf("step %d: revisions %v: the revision spread without its canary", i, d.Revisions)
		}
	}
	if d.Status.Phase != workv1alpha1.RolloutPhaseWaiting || d.Status.Reason != ReasonGroupEmptied {
		t.Fatalf("phase %s reason %s, want Waiting GroupEmptied", d.Status.Phase, d.Status.Reason)
	}
	in.Approve = "2/canary"
	d = step(&in, func(*Cluster) workv1alpha1.ResourceHealth { return healthy })
	if d.Revisions["member2"] != 2 {
		t.Fatalf("approved, yet %v", d.Revisions)
	}
}

// A new workload's binding is synced before the scheduler placed it: its
// first revision must not complete with no cluster (it would then be the
// stable revision, and every cluster would get it at once).
func TestNoClusterCompletesNothing(t *testing.T) {
	in := Input{Strategy: staged(time.Minute, false), Target: 1, Now: t0}
	d := step(&in, func(*Cluster) workv1alpha1.ResourceHealth { return healthy })
	if d.Stable != 0 || d.Status.Phase == workv1alpha1.RolloutPhaseComplete {
		t.Fatalf("phase %s stable %d with no cluster", d.Status.Phase, d.Stable)
	}
	in.Clusters = members(0, unknown)
	d = step(&in, func(*Cluster) workv1alpha1.ResourceHealth { return healthy })
	if d.Revisions["member1"] != 1 || len(d.Revisions) != 1 {
		t.Fatalf("once scheduled: %v, want the canary only", d.Revisions)
	}
}
