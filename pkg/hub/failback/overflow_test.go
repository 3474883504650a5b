package failback

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
)

// withRoom gives c a resource summary with room for n more pods.
func withRoom(c *clusterv1alpha1.Cluster, n int) *clusterv1alpha1.Cluster {
	c.Status.ResourceSummary = &clusterv1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{
		corev1.ResourcePods: resource.MustParse(strconv.Itoa(n))}}
	return c
}

// overflowedSpec is Karmada's on-prem example with failback: 4 replicas,
// member1 (on-prem) had room for 3, member2 (public-cloud) runs 1.
func overflowedSpec() (workv1alpha1.ResourceBindingSpec, workv1alpha1.ResourceBindingStatus) {
	sched := metav1.NewTime(t0.Add(-time.Hour))
	return workv1alpha1.ResourceBindingSpec{
		Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"},
		Replicas: 4,
		Placement: &policyv1alpha1.Placement{
			ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{{AffinityName: "on-prem",
				ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}},
				OverflowAffinities: []policyv1alpha1.OverflowClusterAffinity{{AffinityName: "public-cloud",
					ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}}}}},
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
				WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}},
		},
		Failover: &policyv1alpha1.FailoverBehavior{Failback: &policyv1alpha1.FailbackBehavior{StabilizationWindowSeconds: 60, MaxConcurrent: 5}},
		Clusters: []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 3}, {Name: "member2", Replicas: 1}},
	}, workv1alpha1.ResourceBindingStatus{SchedulerObservedAffinityName: "on-prem", LastScheduledTime: &sched}
}

func TestDecideOverflowComeBack(t *testing.T) {
	longAgo := t0.Add(-24 * time.Hour)
	fleet := func(member1Room int) map[string]*clusterv1alpha1.Cluster {
		return map[string]*clusterv1alpha1.Cluster{
			"member1": withRoom(readyCluster("member1", longAgo, ""), member1Room),
			"member2": withRoom(readyCluster("member2", longAgo, ""), 100)}
	}
	for _, c := range []struct {
		name      string
		mutate    func(*workv1alpha1.ResourceBindingSpec, *workv1alpha1.ResourceBindingStatus)
		clusters  map[string]*clusterv1alpha1.Cluster
		roomSince time.Time
		guard     *clustertaint.GuardState
		want      Action
		wantRoom  bool
		wantAfter time.Duration
		wantMsg   string
	}{
		{name: "the preferred group is still full: nothing moves, re-checked later", clusters: fleet(0),
			want: ActionWaitFit, wantMsg: "no room for any of them"},
		{name: "room, first seen now: the whole window to wait", clusters: fleet(1),
			want: ActionWaitWindow, wantRoom: true, wantAfter: time.Minute, wantMsg: "1 of 1 overflowed replicas would come back to member1(3→4)"},
		{name: "room for half the window: the rest of it", clusters: fleet(1), roomSince: t0.Add(-30 * time.Second),
			want: ActionWaitWindow, wantRoom: true, wantAfter: 30 * time.Second},
		{name: "room for the whole window: come back", clusters: fleet(1), roomSince: t0.Add(-time.Minute),
			want: ActionStart, wantRoom: true, wantMsg: "come back to member1(3→4)"},
		{name: "a come-back started 20 s ago restarts the window (no flapping)", clusters: fleet(1), roomSince: t0.Add(-time.Hour),
			mutate: func(s *workv1alpha1.ResourceBindingSpec, st *workv1alpha1.ResourceBindingStatus) {
				at := metav1.NewTime(t0.Add(-20 * time.Second))
				s.RescheduleTriggeredAt, s.RescheduleReason = &at, workv1alpha1.EvictionReasonFailback
				st.LastScheduledTime = &at
			},
			want: ActionWaitWindow, wantRoom: true, wantAfter: 40 * time.Second},
		{name: "the preferred cluster turned Ready 10 s ago: its window too", roomSince: t0.Add(-time.Hour),
			clusters: map[string]*clusterv1alpha1.Cluster{"member1": withRoom(readyCluster("member1", t0.Add(-10*time.Second), ""), 1),
				"member2": withRoom(readyCluster("member2", longAgo, ""), 100)},
			want: ActionWaitWindow, wantRoom: true, wantAfter: 50 * time.Second},
		{name: "an open graceful task (the last come-back) holds it", clusters: fleet(1), roomSince: t0.Add(-time.Hour),
			mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
				s.GracefulEvictionTasks = []workv1alpha1.GracefulEvictionTask{{FromCluster: "member2", Reason: workv1alpha1.EvictionReasonFailback}}
			},
			want: ActionWaitTask},
		{name: "nothing on the overflow group: runs where it should", clusters: fleet(10),
			mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
				s.Clusters = []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 4}}
			},
			want: ActionNone, wantMsg: "runs where it should"},
		{name: "failback not enabled: Karmada's behaviour, it stays", clusters: fleet(10), roomSince: t0.Add(-time.Hour),
			mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) { s.Failover = nil },
			want:   ActionNone},
		{name: "a rolled-back come-back is not tried again", clusters: fleet(10), roomSince: t0.Add(-time.Hour),
			mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
				s.EvictionHistory = []workv1alpha1.EvictionHistoryEntry{{ClusterName: "member1", Reason: ReasonRolledBack, EvictedAt: metav1.NewTime(t0.Add(-time.Hour))}}
			},
			want: ActionNone, wantMsg: "no cluster of the preferred group"},
		{name: "the preferred cluster carries an untolerated NoSchedule taint: it waits", roomSince: t0.Add(-time.Hour),
			clusters: map[string]*clusterv1alpha1.Cluster{"member1": tainted(withRoom(readyCluster("member1", longAgo, ""), 1), corev1.TaintEffectNoSchedule),
				"member2": withRoom(readyCluster("member2", longAgo, ""), 100)},
			want: ActionWaitCluster, wantRoom: true, wantMsg: "untolerated taint"},
		{name: "the fleet guard holds it", clusters: fleet(1), roomSince: t0.Add(-time.Hour),
			guard: &clustertaint.GuardState{Evaluated: true, Mode: clustertaint.GuardFullDisruption},
			want:  ActionWaitGuard, wantRoom: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec, status := overflowedSpec()
			if c.mutate != nil {
				c.mutate(&spec, &status)
			}
			guard := normalGuard()
			if c.guard != nil {
				guard = *c.guard
			}
			var list []*clusterv1alpha1.Cluster
			for _, cl := range c.clusters {
				list = append(list, cl)
			}
			in := Input{Spec: &spec, Status: &status, Clusters: c.clusters, Guard: guard, Now: t0, RoomSince: c.roomSince,
				Schedule: CoreSchedule("default/web-deployment", list, status.SchedulerObservedAffinityName, 10*time.Minute, t0),
				Targets:  CoreScheduleTargets("default/web-deployment", list, status.SchedulerObservedAffinityName, 10*time.Minute, t0)}
			d := Decide(in)
			if d.Action != c.want || d.Room != c.wantRoom || (c.wantAfter != 0 && d.After != c.wantAfter) || !strings.Contains(d.Message, c.wantMsg) {
				t.Fatalf("got %s room=%v after=%s %q, want %s room=%v after=%s containing %q", d.Action, d.Room, d.After, d.Message, c.want, c.wantRoom, c.wantAfter, c.wantMsg)
			}
			if d.Action == ActionStart {
				// The come-back Apply writes is the very spec the trial
				// scheduled: a fresh Failback schedule.
				Apply(&spec, &status, d.Clusters, t0)
				if !slices.Equal(d.Clusters, []string{"member1"}) || spec.RescheduleReason != workv1alpha1.EvictionReasonFailback {
					t.Fatalf("come-back to %v, spec %+v", d.Clusters, spec)
				}
			}
		})
	}
}

// A come-back whose new replicas do not become healthy in time is rolled
// back exactly (the grown preferred cluster gets its old replicas back,
// the shrunk overflow cluster its own), the preferred cluster is not
// tried again, and the scheduler does not avoid it for what it still runs.
func TestOverflowComeBackRollback(t *testing.T) {
	spec, status := overflowedSpec()
	before := slices.Clone(spec.Clusters) // member1(3), member2(1)
	created := metav1.NewTime(t0)
	one := int32(1)
	spec.Clusters = []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 4}}
	spec.GracefulEvictionTasks = []workv1alpha1.GracefulEvictionTask{{FromCluster: "member2", Replicas: &one, Reason: workv1alpha1.EvictionReasonFailback,
		Producer: workv1alpha1.EvictionProducerScheduler, ClustersBeforeFailover: []string{"member1", "member2"}, CreationTimestamp: &created}}
	left, lowered := Rollback(&spec, before, t0.Add(10*time.Minute))
	if len(left) != 0 || !slices.Equal(lowered, []string{"member1"}) || !slices.Equal(spec.Clusters, before) || len(spec.GracefulEvictionTasks) != 0 {
		t.Fatalf("Rollback: left %v lowered %v, clusters %v tasks %v; want member1(3) member2(1) again", left, lowered, spec.Clusters, spec.GracefulEvictionTasks)
	}
	// Without the record, the grown cluster would keep its 4 (5 replicas
	// for 4), and the scheduler's scale-down would then take member2's at
	// once, while member1's new replicas are not healthy.
	clusters := map[string]*clusterv1alpha1.Cluster{
		"member1": withRoom(readyCluster("member1", t0.Add(-time.Hour), ""), 5),
		"member2": withRoom(readyCluster("member2", t0.Add(-time.Hour), ""), 100)}
	var list []*clusterv1alpha1.Cluster
	for _, c := range clusters {
		list = append(list, c)
	}
	now := t0.Add(time.Hour)
	in := Input{Spec: &spec, Status: &status, Clusters: clusters, Guard: normalGuard(), Now: now, RoomSince: t0,
		Schedule: CoreSchedule("k", list, "on-prem", 10*time.Minute, now), Targets: CoreScheduleTargets("k", list, "on-prem", 10*time.Minute, now)}
	if d := Decide(in); d.Action != ActionNone {
		t.Fatalf("after a rollback: %+v, want no come-back", d)
	}
	// The scheduler does not avoid member1, which still runs it, though
	// its history has the rollback within the TTL (before the fix a
	// schedule moved all to member2).
	spec.Replicas = 5
	got, ok := CoreScheduleTargets("k", list, "on-prem", time.Hour, t0.Add(11*time.Minute))(&spec)
	if !ok || !slices.ContainsFunc(got, func(tc workv1alpha1.TargetCluster) bool { return tc.Name == "member1" && tc.Replicas >= 3 }) {
		t.Fatalf("schedule after the rollback: %v, want member1 kept", got)
	}
}
