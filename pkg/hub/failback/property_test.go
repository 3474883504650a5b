package failback

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/scheduler/core"
)

// The failback property test (issue 30 item 5): Decide and the scheduler
// core run together through many stabilization windows of seeded random
// fleets, placements and cluster failures. A simulated taint manager
// evicts from clusters that stop being Ready (with an eviction history
// entry), the scheduler core places what is missing and makes the fresh
// schedule a failback asks for. Properties:
//
//  1. Every failback lands: the fresh schedule places the workload on at
//     least one cluster it returned to.
//  2. It returns only to clusters the workload left (eviction history) or
//     to the first clusterAffinities term, and only where it lands.
//  3. No loop: a workload never fails back more often than something
//     happened that could call for it (an eviction, a cluster turning
//     Ready); a first term that never fits must not cost one per window.
//
// FLOTILLA_FAILBACK_SEED=<n> replays one run (the seed is printed);
// FLOTILLA_FAILBACK_RUNS sets how many seeds run (default 300).

const propWindow = 10 * time.Second

type propSim struct {
	t        *testing.T
	seed     int64
	rng      *rand.Rand
	now      time.Time
	clusters []*clusterv1alpha1.Cluster
	spec     workv1alpha1.ResourceBindingSpec
	status   workv1alpha1.ResourceBindingStatus
	log      []string

	failbacks, evictions, readyTurns int
	// causes are the evictions and clusters turning Ready not yet
	// answered by a failback: each failback takes one.
	causes int
}

func (s *propSim) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf("%s ", s.now.Sub(t0).Round(time.Second))+fmt.Sprintf(format, args...))
}

func (s *propSim) fail(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("seed %d (replay: FLOTILLA_FAILBACK_SEED=%d go test ./pkg/hub/failback -run TestFailbackProperty): %s\nsteps:\n  %s",
		s.seed, s.seed, fmt.Sprintf(format, args...), strings.Join(s.log, "\n  "))
}

func (s *propSim) cluster(name string) *clusterv1alpha1.Cluster {
	for _, c := range s.clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func ready(c *clusterv1alpha1.Cluster) bool {
	return c.Status.Conditions[0].Status == metav1.ConditionTrue
}

func (s *propSim) clusterMap() map[string]*clusterv1alpha1.Cluster {
	m := map[string]*clusterv1alpha1.Cluster{}
	for _, c := range s.clusters {
		m[c.Name] = c
	}
	return m
}

func placedNames(spec *workv1alpha1.ResourceBindingSpec) []string {
	var out []string
	for _, t := range spec.Clusters {
		out = append(out, t.Name)
	}
	return out
}

// newPropSim makes a random fleet (3 to 6 clusters, some of which never
// serve the workload's API or start not Ready) and a random placement:
// Duplicated or Divided over one affinity or two clusterAffinities terms,
// often with a spread constraint the first term cannot meet.
func newPropSim(t *testing.T, seed int64) *propSim {
	rng := rand.New(rand.NewSource(seed))
	s := &propSim{t: t, seed: seed, rng: rng, now: t0}
	n := 3 + rng.Intn(4)
	var names []string
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		names = append(names, name)
		c := readyCluster(name, t0.Add(-time.Hour), []string{"", "eu", "us"}[rng.Intn(3)])
		if rng.Intn(5) == 0 {
			c = notReady(c)
		}
		if rng.Intn(6) == 0 {
			// Serves only core/v1: a Deployment never fits there.
			c.Status.APIEnablements = []clusterv1alpha1.APIEnablement{{GroupVersion: "v1", Resources: []clusterv1alpha1.APIResource{{Name: "pods", Kind: "Pod"}}}}
		}
		s.clusters = append(s.clusters, c)
	}
	subset := func() []string {
		var out []string
		for _, name := range names {
			if rng.Intn(2) == 0 {
				out = append(out, name)
			}
		}
		if len(out) == 0 {
			out = []string{names[rng.Intn(n)]}
		}
		return out
	}
	placement := &policyv1alpha1.Placement{}
	if rng.Intn(3) > 0 {
		first := subset()
		var rest []string
		for _, name := range names {
			if !slices.Contains(first, name) || rng.Intn(4) == 0 {
				rest = append(rest, name)
			}
		}
		if len(rest) == 0 {
			rest = names
		}
		placement.ClusterAffinities = []policyv1alpha1.ClusterAffinityTerm{
			{AffinityName: "primary", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: first}},
			{AffinityName: "backup", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: rest}},
		}
	} else {
		placement.ClusterAffinity = &policyv1alpha1.ClusterAffinity{ClusterNames: subset()}
	}
	if rng.Intn(2) == 0 {
		minGroups := int32(1 + rng.Intn(3))
		placement.SpreadConstraints = []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: minGroups, MaxGroups: minGroups + int32(rng.Intn(2))}}
	}
	if rng.Intn(2) == 0 {
		placement.ReplicaScheduling = &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted}
	}
	s.spec = workv1alpha1.ResourceBindingSpec{
		Resource:  workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"},
		Replicas:  int32(1 + rng.Intn(4)),
		Placement: placement,
		Failover:  &policyv1alpha1.FailoverBehavior{Failback: &policyv1alpha1.FailbackBehavior{StabilizationWindowSeconds: int32(propWindow / time.Second)}},
	}
	data, _ := json.Marshal(placement)
	s.logf("fleet %v, replicas %d, placement %s", s.describeFleet(), s.spec.Replicas, data)
	return s
}

func (s *propSim) describeFleet() string {
	var out []string
	for _, c := range s.clusters {
		state := "Ready"
		if !ready(c) {
			state = "NotReady"
		}
		if len(c.Status.APIEnablements) > 0 {
			state += ",noAPI"
		}
		out = append(out, c.Name+"("+state+")")
	}
	return strings.Join(out, " ")
}

// schedule runs the scheduler core as the scheduler controller would:
// a fresh schedule for a failback asked, otherwise only when something is
// missing (nothing placed, fewer clusters than the spread asks).
func (s *propSim) schedule() {
	fresh := pendingReschedule(&s.spec, &s.status)
	missing := len(s.spec.Clusters) == 0
	if sc := s.spec.Placement.SpreadConstraints; len(sc) > 0 && int32(len(s.spec.Clusters)) < sc[0].MinGroups {
		missing = true
	}
	if !fresh && !missing && s.status.LastScheduledTime != nil {
		return
	}
	res, err := core.Schedule(core.Input{Key: "default/web-deployment", Spec: &s.spec, Clusters: s.clusters, Now: s.now,
		EvictionHistoryTTL: 10 * time.Minute, ObservedAffinityName: s.status.SchedulerObservedAffinityName, Fresh: fresh})
	if err != nil {
		s.logf("schedule (fresh %v): no fit", fresh)
		return
	}
	s.spec.Clusters = res.Clusters
	s.status.SchedulerObservedAffinityName = res.AffinityName
	at := metav1.NewTime(s.now.Truncate(time.Second))
	if s.spec.RescheduleTriggeredAt != nil && at.Before(s.spec.RescheduleTriggeredAt) {
		at = *s.spec.RescheduleTriggeredAt
	}
	s.status.LastScheduledTime = &at
	s.logf("schedule (fresh %v): %v on term %q", fresh, placedNames(&s.spec), res.AffinityName)
}

// evict is the taint manager: a placed cluster that is not Ready loses the
// workload, with an eviction history entry.
func (s *propSim) evict() {
	for _, name := range placedNames(&s.spec) {
		if c := s.cluster(name); c != nil && !ready(c) {
			s.spec.Clusters = slices.DeleteFunc(s.spec.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == name })
			s.spec.EvictionHistory = append(s.spec.EvictionHistory, workv1alpha1.EvictionHistoryEntry{ClusterName: name,
				Reason: workv1alpha1.EvictionReasonTaintUntolerated, EvictedAt: metav1.NewTime(s.now)})
			s.evictions++
			s.causes++
			s.logf("evicted from %s", name)
		}
	}
}

// flip turns a random cluster Ready or not Ready.
func (s *propSim) flip() {
	c := s.clusters[s.rng.Intn(len(s.clusters))]
	cond := &c.Status.Conditions[0]
	if ready(c) {
		cond.Status = metav1.ConditionFalse
		s.logf("%s not Ready", c.Name)
	} else {
		cond.Status = metav1.ConditionTrue
		s.readyTurns++
		s.causes++
		s.logf("%s Ready", c.Name)
	}
	cond.LastTransitionTime = metav1.NewTime(s.now)
}

func (s *propSim) failback() {
	returningBefore, _ := Returning(&s.spec, &s.status, s.clusterMap())
	history := slices.Clone(s.spec.EvictionHistory)
	d := Decide(Input{Spec: &s.spec, Status: &s.status, Clusters: s.clusterMap(), Guard: normalGuard(), Now: s.now,
		Schedule: CoreSchedule("default/web-deployment", s.clusters, s.status.SchedulerObservedAffinityName, 10*time.Minute, s.now)})
	if d.Action != ActionStart {
		return
	}
	if s.causes == 0 {
		s.fail("failback #%d to %v started with more failbacks than evictions and clusters turning Ready: a loop (%s)", s.failbacks+1, d.Clusters, d.Message)
	}
	for _, name := range d.Clusters {
		left := slices.ContainsFunc(history, func(h workv1alpha1.EvictionHistoryEntry) bool {
			return h.ClusterName == name && failureReason(h.Reason)
		})
		firstTerm := false
		if terms := s.spec.Placement.ClusterAffinities; len(terms) > 0 {
			firstTerm = slices.Contains(terms[0].ClusterNames, name)
		}
		if !left && !firstTerm || !slices.Contains(returningBefore, name) {
			s.fail("failback to %s, which the workload never left and which is not in the first term", name)
		}
	}
	s.failbacks++
	s.causes--
	s.logf("failback to %v: %s", d.Clusters, d.Message)
	Apply(&s.spec, &s.status, d.Clusters, s.now)
	s.schedule()
	if placed := placedNames(&s.spec); !slices.ContainsFunc(d.Clusters, func(n string) bool { return slices.Contains(placed, n) }) {
		s.fail("failback to %v landed on %v: a reschedule for nothing", d.Clusters, placed)
	}
}

func (s *propSim) run(steps int) {
	s.schedule()
	for range steps {
		s.now = s.now.Add(time.Duration(500+s.rng.Intn(1500)) * propWindow / 1000)
		if s.rng.Intn(4) == 0 {
			s.flip()
		}
		s.evict()
		s.schedule()
		s.failback()
	}
}

func TestFailbackProperty(t *testing.T) {
	runs := 300
	if v, err := strconv.Atoi(os.Getenv("FLOTILLA_FAILBACK_RUNS")); err == nil && v > 0 {
		runs = v
	}
	base := time.Now().UnixNano()
	if v, err := strconv.ParseInt(os.Getenv("FLOTILLA_FAILBACK_SEED"), 10, 64); err == nil {
		base, runs = v, 1
	}
	t.Logf("seeds %d..%d (replay one: FLOTILLA_FAILBACK_SEED=<seed>)", base, base+int64(runs)-1)
	failbacks, evictions := 0, 0
	for i := range runs {
		s := newPropSim(t, base+int64(i))
		s.run(80)
		failbacks += s.failbacks
		evictions += s.evictions
	}
	t.Logf("%d runs of 80 windows: %d evictions, %d failbacks", runs, evictions, failbacks)
	if runs >= 50 && failbacks == 0 {
		t.Fatal("no run failed back at all: the simulation does not exercise failback")
	}
}
