package rollout

import (
	"flag"
	"fmt"
	"math/rand"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

var (
	rolloutSeed      = flag.Int64("rollout-seed", 0, "replay one schedule of TestRolloutInvariants")
	rolloutSchedules = flag.Int("rollout-schedules", 300, "schedules TestRolloutInvariants runs")
)

// randomStrategy is any strategy the API admits, small numbers.
func randomStrategy(r *rand.Rand) *policyv1alpha1.RolloutStrategy {
	cfg := policyv1alpha1.RolloutConfig{
		MinSuccessTime:   metav1.Duration{Duration: time.Duration(r.Intn(3)) * 10 * time.Second},
		ProgressDeadline: &metav1.Duration{Duration: time.Duration(1+r.Intn(4)) * 20 * time.Second},
	}
	if r.Intn(2) == 0 {
		mf := intstr.FromInt32(int32(r.Intn(2)))
		cfg.MaxFailures = &mf
	}
	s := &policyv1alpha1.RolloutStrategy{}
	if r.Intn(3) == 0 {
		s.Type = policyv1alpha1.RolloutTypeProgressive
		mc := intstr.FromInt32(int32(1 + r.Intn(3)))
		s.Progressive = &policyv1alpha1.RolloutProgressive{RolloutConfig: cfg, MaxConcurrency: &mc, SortingLabelKey: "ring"}
	} else {
		s.Type = policyv1alpha1.RolloutTypeProgressivePerGroup
		p := &policyv1alpha1.RolloutProgressivePerGroup{RolloutConfig: cfg}
		for _, ring := range []string{"canary", "early"}[:1+r.Intn(2)] {
			g := policyv1alpha1.RolloutGroup{GroupName: ring,
				GroupClusterSelector: policyv1alpha1.GroupClusterSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": ring}}}}
			if r.Intn(3) == 0 {
				g.Approval = policyv1alpha1.ApprovalRequired
			}
			if r.Intn(2) == 0 {
				mc := intstr.FromInt32(1)
				g.MaxConcurrency = &mc
			}
			if r.Intn(4) == 0 {
				g.Analysis = &policyv1alpha1.RolloutAnalysis{SuccessCondition: "result < 1"}
			}
			p.DecisionGroups = append(p.DecisionGroups, g)
		}
		s.ProgressivePerGroup = p
	}
	if r.Intn(2) == 0 {
		s.Rollback = &policyv1alpha1.RolloutRollback{Type: []policyv1alpha1.RollbackType{policyv1alpha1.RollbackAll, policyv1alpha1.RollbackProgressive}[r.Intn(2)]}
	}
	return s
}

// TestRolloutInvariants runs random schedules of template changes (good
// and bad revisions), health flips, lost and returning clusters, failovers
// (a cluster replaced by one without a copy), approvals, resumes and
// fleet-guard holds, and checks after every decision:
//
//  1. no cluster is newly given the newest revision beyond the group the
//     rollout has reached (or while it is halted, or held);
//  2. after a halt, the set of clusters that run the halted revision never
//     grows (until it is resumed or superseded);
//  3. a cluster without a copy is given the newest revision only in a
//     reached group, otherwise the stable one or nothing;
//  4. the stable revision only moves forward, to a revision every
//     group passed;
//  5. a group succeeds only when each of its live clusters runs the
//     revision and reported it Healthy;
//  6. a cluster starts updating only while the group's updating clusters
//     and the workload's evicted copies stay within maxConcurrency.
//
// A failure prints the seed; -rollout-seed=N replays it.
func TestRolloutInvariants(t *testing.T) {
	seeds := make([]int64, 0, *rolloutSchedules)
	if *rolloutSeed != 0 {
		seeds = append(seeds, *rolloutSeed)
	} else {
		for i := 0; i < *rolloutSchedules; i++ {
			seeds = append(seeds, int64(i+1))
		}
	}
	for _, seed := range seeds {
		if err := runSchedule(seed); err != nil {
			t.Fatalf("seed %d: %v (replay: go test ./pkg/rollout -run TestRolloutInvariants -rollout-seed=%d)", seed, err, seed)
		}
	}
}

func runSchedule(seed int64) error {
	r := rand.New(rand.NewSource(seed))
	rings := []string{"canary", "early", ""}
	var clusters []Cluster
	next := 0
	newCluster := func() Cluster {
		next++
		c := Cluster{Name: fmt.Sprintf("c%02d", next), Labels: map[string]string{}}
		if ring := rings[r.Intn(len(rings))]; ring != "" {
			c.Labels["ring"] = ring
		}
		return c
	}
	for n := 2 + r.Intn(6); n > 0; n-- {
		clusters = append(clusters, newCluster())
	}
	in := Input{Strategy: randomStrategy(r), Target: 1, Now: t0}
	if r.Intn(2) == 0 { // an existing workload, adopted as stable
		in.Stable = 1
		for i := range clusters {
			clusters[i].Running, clusters[i].Health = 1, workv1alpha1.ResourceHealthy
		}
	}
	in.Clusters = clusters
	bad := map[int64]bool{}
	haltedSet := map[string]bool{}
	haltedRev := int64(0)
	analysis := workv1alpha1.AnalysisSuccessful
	in.Analyzer = func(string, policyv1alpha1.RolloutAnalysis, []string) workv1alpha1.AnalysisStatus {
		return workv1alpha1.AnalysisStatus{Phase: analysis}
	}
	for stepN := 0; stepN < 80; stepN++ {
		// The world changes.
		switch x := r.Intn(20); {
		case x == 0:
			in.Target++
			bad[in.Target] = r.Intn(3) == 0
		case x == 1 && len(in.Clusters) > 1: // failover: replaced by a new cluster
			i := r.Intn(len(in.Clusters))
			in.Clusters = append(in.Clusters[:i:i], in.Clusters[i+1:]...)
			in.Clusters = append(in.Clusters, newCluster())
		case x == 2:
			i := r.Intn(len(in.Clusters))
			in.Clusters[i].Lost = !in.Clusters[i].Lost
		case x == 3:
			in.Approve = fmt.Sprintf("%d/%s", in.Target, []string{"canary", "early", "remaining", "all"}[r.Intn(4)])
		case x == 4:
			in.Resume = fmt.Sprintf("%d/%d", in.Target, stepN)
		case x == 5:
			in.Hold = map[bool]string{true: "fleet-wide disruption"}[in.Hold == ""]
		case x == 6:
			analysis = []workv1alpha1.AnalysisPhase{workv1alpha1.AnalysisSuccessful, workv1alpha1.AnalysisRunning,
				workv1alpha1.AnalysisFailed, workv1alpha1.AnalysisInconclusive}[r.Intn(4)]
		case x == 7:
			in.Disruptions = r.Intn(2)
		}
		in.Now = in.Now.Add(time.Duration(1+r.Intn(30)) * time.Second)
		before := map[string]Cluster{}
		for _, c := range in.Clusters {
			before[c.Name] = c
		}
		prevStatus := in.Previous
		prevStable := in.Stable
		d := Decide(in)
		st := d.Status

		// 4: the stable revision moves forward only.
		if d.Stable < prevStable || d.Stable > in.Target {
			return fmt.Errorf("step %d: stable went from %d to %d (target %d)", stepN, prevStable, d.Stable, in.Target)
		}
		if st.Revision != in.Target {
			return fmt.Errorf("step %d: status revision %d, target %d", stepN, st.Revision, in.Target)
		}
		rolling := d.Stable != in.Target || (prevStable != in.Target && d.Stable == in.Target)
		groupOf := map[string]int{}
		gs := groups(in.Strategy, in.Clusters)
		for i, g := range gs {
			for _, c := range g.clusters {
				groupOf[c.Name] = i
			}
		}
		// Groups reached: those before st.GroupIndex, and it (unless halted
		// or complete, where 'reached' is all of them / what ran before).
		reached := int(st.GroupIndex)
		// 5: a group that succeeded this step had every live cluster Healthy on target.
		for _, e := range d.Events {
			if e.Reason != ReasonGroupSucceeded {
				continue
			}
			for _, g := range gs {
				if fmt.Sprintf("revision %d: group %s succeeded", in.Target, g.name) != e.Message {
					continue
				}
				for _, c := range g.clusters {
					if !c.Lost && (c.Running != in.Target || c.Health != workv1alpha1.ResourceHealthy) {
						return fmt.Errorf("step %d: group %s succeeded while %s runs %d with health %q", stepN, g.name, c.Name, c.Running, c.Health)
					}
				}
			}
		}
		for name, rev := range d.Revisions {
			b := before[name]
			if rev != in.Target || b.Running == in.Target || !rolling {
				continue
			}
			// 1 and 3: newly given the newest revision.
			if halted(st.Phase) {
				return fmt.Errorf("step %d: %s given halted revision %d (phase %s)", stepN, name, rev, st.Phase)
			}
			if st.Phase != workv1alpha1.RolloutPhaseComplete && groupOf[name] > reached {
				return fmt.Errorf("step %d: %s (group %d) given revision %d while the rollout is in group %d", stepN, name, groupOf[name], rev, reached)
			}
			if in.Hold != "" && st.Phase != workv1alpha1.RolloutPhaseComplete && groupOf[name] == reached && b.Running != 0 {
				return fmt.Errorf("step %d: %s started updating under a hold", stepN, name)
			}
			if b.Lost && st.Phase != workv1alpha1.RolloutPhaseComplete && groupOf[name] == reached {
				return fmt.Errorf("step %d: lost %s started updating", stepN, name)
			}
		}
		// 6: the disruption budget: when a cluster of the group being
		// updated starts updating, at most maxConcurrency of the group's
		// clusters are updating or being evicted.
		if !halted(st.Phase) && st.Phase != workv1alpha1.RolloutPhaseComplete && rolling && int(st.GroupIndex) < len(gs) {
			g := gs[st.GroupIndex]
			started, updating := false, in.Disruptions
			for _, c := range g.clusters {
				rev, ok := d.Revisions[c.Name]
				if !ok || rev != in.Target {
					continue
				}
				v := verdict(st, c.Name)
				if before[c.Name].Running != in.Target {
					started = true
				}
				if v == workv1alpha1.VerdictUpdating || v == workv1alpha1.VerdictSoaking {
					updating++
				}
			}
			if started && updating > g.maxConcurrency {
				return fmt.Errorf("step %d: group %s has %d clusters updating or evicted, maxConcurrency %d", stepN, g.name, updating, g.maxConcurrency)
			}
		}
		// 2: after a halt, the set on the halted revision never grows.
		if halted(st.Phase) {
			onTarget := map[string]bool{}
			for name, rev := range d.Revisions {
				if rev == in.Target {
					onTarget[name] = true
				}
			}
			if haltedRev == in.Target && (prevStatus != nil && halted(prevStatus.Phase) && prevStatus.Revision == in.Target) {
				for name := range onTarget {
					if !haltedSet[name] {
						return fmt.Errorf("step %d: %s joined halted revision %d", stepN, name, in.Target)
					}
				}
			}
			haltedRev, haltedSet = in.Target, onTarget
		} else {
			haltedRev = 0
		}
		if len(st.Clusters) != len(in.Clusters) {
			return fmt.Errorf("step %d: %d cluster statuses for %d clusters", stepN, len(st.Clusters), len(in.Clusters))
		}

		// The members act: a changed copy is Unknown, then Healthy unless
		// its revision is bad.
		for i := range in.Clusters {
			c := &in.Clusters[i]
			if rev, ok := d.Revisions[c.Name]; ok && rev != c.Running {
				c.Running, c.Health = rev, workv1alpha1.ResourceUnknown
				continue
			}
			if _, ok := d.Revisions[c.Name]; !ok && c.Running != 0 {
				return fmt.Errorf("step %d: %s runs %d but the decision gives it no Work (would delete a running copy)", stepN, c.Name, c.Running)
			}
			switch {
			case c.Running == 0 || c.Lost:
				c.Health = workv1alpha1.ResourceUnknown
			case bad[c.Running]:
				c.Health = workv1alpha1.ResourceUnhealthy
			case r.Intn(10) == 0:
				c.Health = workv1alpha1.ResourceUnhealthy // a flap
			default:
				c.Health = workv1alpha1.ResourceHealthy
			}
		}
		in.Previous, in.Stable = &st, d.Stable
	}
	return nil
}

// FuzzRolloutSchedule runs the invariant schedule of TestRolloutInvariants
// from any seed, and Decide on any approve and resume annotation values
// (a tenant writes them).
func FuzzRolloutSchedule(f *testing.F) {
	f.Add(int64(1), "2/canary", "2")
	f.Add(int64(42), "9223372036854775807/remaining", "-1/x")
	f.Add(int64(7), "/", "")
	f.Fuzz(func(t *testing.T, seed int64, approve, resume string) {
		if err := runSchedule(seed); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		in := Input{Strategy: staged(time.Minute, true), Target: 2, Stable: 1, Clusters: members(1, healthy), Now: t0, Approve: approve, Resume: resume}
		for i := 0; i < 3; i++ {
			in.Now = in.Now.Add(40 * time.Second)
			d := step(&in, func(*Cluster) workv1alpha1.ResourceHealth { return unhealthy })
			if len(d.Status.Message) > 4096 {
				t.Fatalf("message of %d bytes", len(d.Status.Message))
			}
			for name, rev := range d.Revisions {
				if name != "member1" && rev == 2 {
					t.Fatalf("%s got revision 2 while the canary is unhealthy (approve %q resume %q)", name, approve, resume)
				}
			}
		}
	})
}
