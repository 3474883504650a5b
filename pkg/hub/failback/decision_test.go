package failback

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func readyCluster(name string, since time.Time, region string) *clusterv1alpha1.Cluster {
	return &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: clusterv1alpha1.ClusterSpec{Region: region},
		Status: clusterv1alpha1.ClusterStatus{Conditions: []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady,
			Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(since)}}}}
}

func notReady(c *clusterv1alpha1.Cluster) *clusterv1alpha1.Cluster {
	c.Status.Conditions[0].Status = metav1.ConditionFalse
	return c
}

func tainted(c *clusterv1alpha1.Cluster, effect corev1.TaintEffect) *clusterv1alpha1.Cluster {
	c.Spec.Taints = append(c.Spec.Taints, corev1.Taint{Key: "example.io/maintenance", Effect: effect})
	return c
}

// failedOver is the seed's nginx after member1's NoExecute failover:
// member2 runs all 3, the history says it left member1 at t0.
func failedOver() (workv1alpha1.ResourceBindingSpec, workv1alpha1.ResourceBindingStatus) {
	sched := metav1.NewTime(t0.Add(time.Second))
	return workv1alpha1.ResourceBindingSpec{
		Replicas:  3,
		Placement: &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}}},
		Failover: &policyv1alpha1.FailoverBehavior{Failback: &policyv1alpha1.FailbackBehavior{
			StabilizationWindowSeconds: 60, MaxConcurrent: 2}},
		Clusters: []workv1alpha1.TargetCluster{{Name: "member2", Replicas: 3}},
		EvictionHistory: []workv1alpha1.EvictionHistoryEntry{{ClusterName: "member1",
			Reason: workv1alpha1.EvictionReasonTaintUntolerated, EvictedAt: metav1.NewTime(t0)}},
	}, workv1alpha1.ResourceBindingStatus{LastScheduledTime: &sched}
}

func normalGuard() clustertaint.GuardState {
	return clustertaint.GuardState{Evaluated: true, Mode: clustertaint.GuardNormal,
		Regions: map[string]clustertaint.RegionState{"": {Mode: clustertaint.GuardNormal}}}
}

func TestDecide(t *testing.T) {
	// member1 came back at t0+10s; the window is 60 s.
	back := t0.Add(10 * time.Second)
	fleet := func(mod ...func(map[string]*clusterv1alpha1.Cluster)) map[string]*clusterv1alpha1.Cluster {
		m := map[string]*clusterv1alpha1.Cluster{"member1": readyCluster("member1", back, ""), "member2": readyCluster("member2", t0.Add(-time.Hour), "")}
		for _, f := range mod {
			f(m)
		}
		return m
	}
	tests := []struct {
		name       string
		mutate     func(*workv1alpha1.ResourceBindingSpec, *workv1alpha1.ResourceBindingStatus)
		clusters   map[string]*clusterv1alpha1.Cluster
		guard      *clustertaint.GuardState
		inProgress int
		now        time.Time
		want       Action
		wantTo     []string
		wantAfter  time.Duration
	}{
		{name: "window passed: start", clusters: fleet(), now: back.Add(61 * time.Second), want: ActionStart, wantTo: []string{"member1"}},
		{name: "exactly at the window's end: start", clusters: fleet(), now: back.Add(60 * time.Second), want: ActionStart, wantTo: []string{"member1"}},
		{name: "within the window: requeue at its end", clusters: fleet(), now: back.Add(20 * time.Second),
			want: ActionWaitWindow, wantTo: []string{"member1"}, wantAfter: 40 * time.Second},
		{name: "failback off", mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
			s.Failover.Failback = nil
		},
			clusters: fleet(), now: back.Add(time.Hour), want: ActionNone},
		{name: "no failover policy at all", mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) { s.Failover = nil },
			clusters: fleet(), now: back.Add(time.Hour), want: ActionNone},
		{name: "never failed over", mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
			s.EvictionHistory = nil
			s.Clusters = []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 2}}
		}, clusters: fleet(), now: back.Add(time.Hour), want: ActionNone},
		{name: "already back on the cluster (history left over)", mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
			s.Clusters = []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 2}}
		}, clusters: fleet(), now: back.Add(time.Hour), want: ActionNone},
		{name: "a rebalance's history is not a failover", mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
			s.EvictionHistory[0].Reason = workv1alpha1.EvictionReasonRebalance
		}, clusters: fleet(), now: back.Add(time.Hour), want: ActionNone},
		{name: "application failure counts", mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
			s.EvictionHistory[0].Reason = workv1alpha1.EvictionReasonApplicationFailure
		}, clusters: fleet(), now: back.Add(time.Hour), want: ActionStart, wantTo: []string{"member1"}},
		{name: "application failure on a cluster that stayed Ready: the window counts from the eviction",
			mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
				s.EvictionHistory[0].Reason = workv1alpha1.EvictionReasonApplicationFailure
			},
			clusters: fleet(func(m map[string]*clusterv1alpha1.Cluster) {
				m["member1"] = readyCluster("member1", t0.Add(-time.Hour), "")
			}),
			now: t0.Add(30 * time.Second), want: ActionWaitWindow, wantTo: []string{"member1"}, wantAfter: 30 * time.Second},
		{name: "blockPredecessorSeconds holds an application failure's cluster until the block ends",
			mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
				s.EvictionHistory[0].Reason = workv1alpha1.EvictionReasonApplicationFailure
				s.Failover.Application = &policyv1alpha1.ApplicationFailoverBehavior{BlockPredecessorSeconds: ptr.To[int32](600)}
			},
			clusters: fleet(), now: t0.Add(100 * time.Second), want: ActionWaitWindow, wantTo: []string{"member1"}, wantAfter: 500 * time.Second},
		{name: "blockPredecessorSeconds 0: never back to that cluster",
			mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
				s.EvictionHistory[0].Reason = workv1alpha1.EvictionReasonApplicationFailure
				s.Failover.Application = &policyv1alpha1.ApplicationFailoverBehavior{BlockPredecessorSeconds: ptr.To[int32](0)}
			},
			clusters: fleet(), now: t0.Add(48 * time.Hour), want: ActionNone},
		{name: "a block after an application failure does not hold a cluster failure's return",
			mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
				s.Failover.Application = &policyv1alpha1.ApplicationFailoverBehavior{BlockPredecessorSeconds: ptr.To[int32](0)}
			},
			clusters: fleet(), now: back.Add(time.Hour), want: ActionStart, wantTo: []string{"member1"}},
		{name: "the cluster is gone: nowhere to return", clusters: fleet(func(m map[string]*clusterv1alpha1.Cluster) { delete(m, "member1") }),
			now: back.Add(time.Hour), want: ActionNone},
		{name: "the cluster is being deleted", clusters: fleet(func(m map[string]*clusterv1alpha1.Cluster) {
			now := metav1.NewTime(t0)
			m["member1"].DeletionTimestamp = &now
		}), now: back.Add(time.Hour), want: ActionNone},
		{name: "the placement no longer selects the cluster", mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
			s.Placement.ClusterAffinity.ClusterNames = []string{"member2"}
		}, clusters: fleet(), now: back.Add(time.Hour), want: ActionNone},
		{name: "not Ready", clusters: fleet(func(m map[string]*clusterv1alpha1.Cluster) { notReady(m["member1"]) }),
			now: back.Add(time.Hour), want: ActionWaitCluster, wantTo: []string{"member1"}},
		{name: "no Ready condition", clusters: fleet(func(m map[string]*clusterv1alpha1.Cluster) { m["member1"].Status.Conditions = nil }),
			now: back.Add(time.Hour), want: ActionWaitCluster, wantTo: []string{"member1"}},
		{name: "untolerated NoSchedule taint", clusters: fleet(func(m map[string]*clusterv1alpha1.Cluster) { tainted(m["member1"], corev1.TaintEffectNoSchedule) }),
			now: back.Add(time.Hour), want: ActionWaitCluster, wantTo: []string{"member1"}},
		{name: "untolerated NoExecute taint", clusters: fleet(func(m map[string]*clusterv1alpha1.Cluster) { tainted(m["member1"], corev1.TaintEffectNoExecute) }),
			now: back.Add(time.Hour), want: ActionWaitCluster, wantTo: []string{"member1"}},
		{name: "PreferNoSchedule does not hold it", clusters: fleet(func(m map[string]*clusterv1alpha1.Cluster) { tainted(m["member1"], corev1.TaintEffectPreferNoSchedule) }),
			now: back.Add(time.Hour), want: ActionStart, wantTo: []string{"member1"}},
		{name: "tolerated taint does not hold it", mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
			s.Placement.ClusterTolerations = []corev1.Toleration{{Key: "example.io/maintenance", Operator: corev1.TolerationOpExists}}
		}, clusters: fleet(func(m map[string]*clusterv1alpha1.Cluster) { tainted(m["member1"], corev1.TaintEffectNoSchedule) }),
			now: back.Add(time.Hour), want: ActionStart, wantTo: []string{"member1"}},
		{name: "a flap within the window restarts it (new lastTransitionTime)",
			clusters: fleet(func(m map[string]*clusterv1alpha1.Cluster) {
				m["member1"] = readyCluster("member1", back.Add(50*time.Second), "")
			}),
			now: back.Add(70 * time.Second), want: ActionWaitWindow, wantTo: []string{"member1"}, wantAfter: 40 * time.Second},
		{name: "open graceful task", mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
			s.GracefulEvictionTasks = []workv1alpha1.GracefulEvictionTask{{FromCluster: "member3", Reason: workv1alpha1.EvictionReasonTaintUntolerated}}
		}, clusters: fleet(), now: back.Add(time.Hour), want: ActionWaitTask, wantTo: []string{"member1"}},
		{name: "a staged rollout is updating clusters", mutate: func(_ *workv1alpha1.ResourceBindingSpec, st *workv1alpha1.ResourceBindingStatus) {
			st.Rollout = &workv1alpha1.RolloutStatus{Revision: 2, StableRevision: 1, Phase: workv1alpha1.RolloutPhaseProgressing,
				Clusters: []workv1alpha1.ClusterRolloutStatus{{ClusterName: "member2", Revision: 2, Verdict: workv1alpha1.VerdictUpdating}}}
		}, clusters: fleet(), now: back.Add(time.Hour), want: ActionWaitTask, wantTo: []string{"member1"}},
		{name: "a halted rollout does not hold it", mutate: func(_ *workv1alpha1.ResourceBindingSpec, st *workv1alpha1.ResourceBindingStatus) {
			st.Rollout = &workv1alpha1.RolloutStatus{Revision: 2, StableRevision: 1, Phase: workv1alpha1.RolloutPhaseHalted,
				Clusters: []workv1alpha1.ClusterRolloutStatus{{ClusterName: "member2", Revision: 2, Verdict: workv1alpha1.VerdictFailed}}}
		}, clusters: fleet(), now: back.Add(time.Hour), want: ActionStart, wantTo: []string{"member1"}},
		{name: "reschedule asked and not yet made", mutate: func(s *workv1alpha1.ResourceBindingSpec, st *workv1alpha1.ResourceBindingStatus) {
			at := metav1.NewTime(st.LastScheduledTime.Add(time.Minute))
			s.RescheduleTriggeredAt = &at
		}, clusters: fleet(), now: back.Add(time.Hour), want: ActionWaitTask, wantTo: []string{"member1"}},
		{name: "fleet in partial disruption", clusters: fleet(), guard: &clustertaint.GuardState{Evaluated: true, Mode: clustertaint.GuardPartialDisruption, NotReady: 2, Total: 3},
			now: back.Add(time.Hour), want: ActionWaitGuard, wantTo: []string{"member1"}},
		{name: "a region in disruption", clusters: fleet(), guard: &clustertaint.GuardState{Evaluated: true, Mode: clustertaint.GuardNormal,
			Regions: map[string]clustertaint.RegionState{"eu": {Mode: clustertaint.GuardFullDisruption, NotReady: 1, Total: 1}, "": {Mode: clustertaint.GuardNormal}}},
			now: back.Add(time.Hour), want: ActionWaitGuard, wantTo: []string{"member1"}},
		{name: "guard not evaluated yet", clusters: fleet(), guard: &clustertaint.GuardState{Mode: clustertaint.GuardNormal},
			now: back.Add(time.Hour), want: ActionWaitGuard, wantTo: []string{"member1"}},
		{name: "maxConcurrent reached", clusters: fleet(), inProgress: 2, now: back.Add(time.Hour), want: ActionWaitLimit, wantTo: []string{"member1"}},
		{name: "under maxConcurrent", clusters: fleet(), inProgress: 1, now: back.Add(time.Hour), want: ActionStart, wantTo: []string{"member1"}},
		{name: "default maxConcurrent (5)", mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
			s.Failover.Failback.MaxConcurrent = 0
		}, clusters: fleet(), inProgress: 4, now: back.Add(time.Hour), want: ActionStart, wantTo: []string{"member1"}},
		{name: "default window (300 s)", mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
			s.Failover.Failback.StabilizationWindowSeconds = 0
		}, clusters: fleet(), now: back.Add(100 * time.Second), want: ActionWaitWindow, wantTo: []string{"member1"}, wantAfter: 200 * time.Second},
		{name: "no ping-pong: failed again after a failback, the window counts from the last failback too",
			mutate: func(s *workv1alpha1.ResourceBindingSpec, st *workv1alpha1.ResourceBindingStatus) {
				at := metav1.NewTime(back.Add(100 * time.Second))
				s.RescheduleTriggeredAt, s.RescheduleReason = &at, workv1alpha1.EvictionReasonFailback
				sched := metav1.NewTime(back.Add(101 * time.Second))
				st.LastScheduledTime = &sched
				// member1 failed an application check right after, while
				// staying Ready; the history entry is older than the
				// failback here (clock skew), the failback still counts.
				s.EvictionHistory[0].Reason = workv1alpha1.EvictionReasonApplicationFailure
			}, clusters: fleet(), now: back.Add(120 * time.Second), want: ActionWaitWindow, wantTo: []string{"member1"}, wantAfter: 40 * time.Second},
		{name: "every returning cluster must be stable", mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
			s.Placement.ClusterAffinity.ClusterNames = append(s.Placement.ClusterAffinity.ClusterNames, "member3")
			s.EvictionHistory = append(s.EvictionHistory, workv1alpha1.EvictionHistoryEntry{ClusterName: "member3",
				Reason: workv1alpha1.EvictionReasonTaintUntolerated, EvictedAt: metav1.NewTime(t0)})
		}, clusters: fleet(func(m map[string]*clusterv1alpha1.Cluster) { m["member3"] = notReady(readyCluster("member3", t0, "")) }),
			now: back.Add(time.Hour), want: ActionWaitCluster, wantTo: []string{"member1", "member3"}},
		{name: "two returning clusters: wait for the later one", mutate: func(s *workv1alpha1.ResourceBindingSpec, _ *workv1alpha1.ResourceBindingStatus) {
			s.Placement.ClusterAffinity.ClusterNames = append(s.Placement.ClusterAffinity.ClusterNames, "member3")
			s.EvictionHistory = append(s.EvictionHistory, workv1alpha1.EvictionHistoryEntry{ClusterName: "member3",
				Reason: workv1alpha1.EvictionReasonTaintUntolerated, EvictedAt: metav1.NewTime(t0)})
		}, clusters: fleet(func(m map[string]*clusterv1alpha1.Cluster) {
			m["member3"] = readyCluster("member3", back.Add(30*time.Second), "")
		}),
			now: back.Add(60 * time.Second), want: ActionWaitWindow, wantTo: []string{"member1", "member3"}, wantAfter: 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, status := failedOver()
			if tt.mutate != nil {
				tt.mutate(&spec, &status)
			}
			guard := normalGuard()
			if tt.guard != nil {
				guard = *tt.guard
			}
			d := Decide(Input{Spec: &spec, Status: &status, Clusters: tt.clusters, Guard: guard, InProgress: tt.inProgress, Now: tt.now})
			if d.Action != tt.want || !slices.Equal(d.Clusters, tt.wantTo) || d.After != tt.wantAfter {
				t.Fatalf("Decide = %+v, want action %s to %v after %s", d, tt.want, tt.wantTo, tt.wantAfter)
			}
		})
	}
}

func TestDecideClusterAffinities(t *testing.T) {
	terms := []policyv1alpha1.ClusterAffinityTerm{
		{AffinityName: "primary", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}},
		{AffinityName: "backup", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}},
	}
	clusters := map[string]*clusterv1alpha1.Cluster{"member1": readyCluster("member1", t0, ""), "member2": readyCluster("member2", t0, "")}
	base := func() (workv1alpha1.ResourceBindingSpec, workv1alpha1.ResourceBindingStatus) {
		return workv1alpha1.ResourceBindingSpec{
				Replicas:  2,
				Placement: &policyv1alpha1.Placement{ClusterAffinities: terms},
				Failover:  &policyv1alpha1.FailoverBehavior{Failback: &policyv1alpha1.FailbackBehavior{StabilizationWindowSeconds: 10}},
				Clusters:  []workv1alpha1.TargetCluster{{Name: "member2", Replicas: 2}},
			}, workv1alpha1.ResourceBindingStatus{SchedulerObservedAffinityName: "backup",
				LastScheduledTime: &metav1.Time{Time: t0}}
	}
	now := t0.Add(time.Minute)

	spec, status := base()
	// On the backup term with no history left: the first term's clusters,
	// only if the scheduler confirms it would place the workload there
	// (issue 30: a first term that never fits looped a failback per window).
	fits := func(where ...string) func(*workv1alpha1.ResourceBindingSpec) ([]string, bool) {
		return func(trial *workv1alpha1.ResourceBindingSpec) ([]string, bool) {
			if trial.RescheduleReason != workv1alpha1.EvictionReasonFailback {
				t.Errorf("the trial schedule is not the failback's: %+v", trial)
			}
			return where, len(where) > 0
		}
	}
	if d := Decide(Input{Spec: &spec, Status: &status, Clusters: clusters, Guard: normalGuard(), Now: now, Schedule: fits("member1")}); d.Action != ActionStart || !slices.Equal(d.Clusters, []string{"member1"}) {
		t.Fatalf("later term, the scheduler places it on member1: %+v, want Start to member1", d)
	}
	if d := Decide(Input{Spec: &spec, Status: &status, Clusters: clusters, Guard: normalGuard(), Now: now, Schedule: fits("member2")}); d.Action != ActionWaitFit {
		t.Fatalf("later term, the scheduler keeps it on the backup term: %+v, want WaitFit", d)
	}
	if d := Decide(Input{Spec: &spec, Status: &status, Clusters: clusters, Guard: normalGuard(), Now: now, Schedule: fits()}); d.Action != ActionWaitFit {
		t.Fatalf("later term, nothing fits: %+v, want WaitFit", d)
	}
	if d := Decide(Input{Spec: &spec, Status: &status, Clusters: clusters, Guard: normalGuard(), Now: now}); d.Action != ActionNone {
		t.Fatalf("later term, left nothing, no scheduler to confirm: %+v, want None", d)
	}
	// It left member1 (history): it returns without a scheduler, and with
	// one only if the scheduler places it there.
	spec.EvictionHistory = []workv1alpha1.EvictionHistoryEntry{{ClusterName: "member1", Reason: workv1alpha1.EvictionReasonTaintUntolerated, EvictedAt: metav1.NewTime(t0)}}
	if d := Decide(Input{Spec: &spec, Status: &status, Clusters: clusters, Guard: normalGuard(), Now: now}); d.Action != ActionStart {
		t.Fatalf("left member1: %+v, want Start", d)
	}
	if d := Decide(Input{Spec: &spec, Status: &status, Clusters: clusters, Guard: normalGuard(), Now: now, Schedule: fits("member2")}); d.Action != ActionWaitFit {
		t.Fatalf("left member1, the scheduler would not go back: %+v, want WaitFit", d)
	}
	spec, status = base()
	// On the first term: nothing to do.
	status.SchedulerObservedAffinityName = "primary"
	if d := Decide(Input{Spec: &spec, Status: &status, Clusters: clusters, Guard: normalGuard(), Now: now}); d.Action != ActionNone {
		t.Fatalf("first term: %+v, want None", d)
	}
	// History of a cluster outside the first term is not a return target.
	spec, status = base()
	status.SchedulerObservedAffinityName = "primary"
	spec.EvictionHistory = []workv1alpha1.EvictionHistoryEntry{{ClusterName: "member2", Reason: workv1alpha1.EvictionReasonTaintUntolerated, EvictedAt: metav1.NewTime(t0)}}
	spec.Clusters = []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 2}}
	if d := Decide(Input{Spec: &spec, Status: &status, Clusters: clusters, Guard: normalGuard(), Now: now}); d.Action != ActionNone {
		t.Fatalf("history outside the first term: %+v, want None", d)
	}
}

func TestInProgress(t *testing.T) {
	sched := metav1.NewTime(t0)
	later := metav1.NewTime(t0.Add(time.Second))
	tests := []struct {
		name   string
		spec   workv1alpha1.ResourceBindingSpec
		status workv1alpha1.ResourceBindingStatus
		want   bool
	}{
		{name: "nothing", want: false},
		{name: "failback asked, not scheduled", spec: workv1alpha1.ResourceBindingSpec{RescheduleTriggeredAt: &later, RescheduleReason: workv1alpha1.EvictionReasonFailback},
			status: workv1alpha1.ResourceBindingStatus{LastScheduledTime: &sched}, want: true},
		{name: "failback asked, never scheduled", spec: workv1alpha1.ResourceBindingSpec{RescheduleTriggeredAt: &later, RescheduleReason: workv1alpha1.EvictionReasonFailback}, want: true},
		{name: "failback scheduled, no task", spec: workv1alpha1.ResourceBindingSpec{RescheduleTriggeredAt: &sched, RescheduleReason: workv1alpha1.EvictionReasonFailback},
			status: workv1alpha1.ResourceBindingStatus{LastScheduledTime: &later}, want: false},
		{name: "rebalance asked is not a failback", spec: workv1alpha1.ResourceBindingSpec{RescheduleTriggeredAt: &later, RescheduleReason: workv1alpha1.EvictionReasonRebalance},
			status: workv1alpha1.ResourceBindingStatus{LastScheduledTime: &sched}, want: false},
		{name: "open Failback task", spec: workv1alpha1.ResourceBindingSpec{GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "member2", Reason: workv1alpha1.EvictionReasonFailback}}}, want: true},
		{name: "open failure task", spec: workv1alpha1.ResourceBindingSpec{GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "member2", Reason: workv1alpha1.EvictionReasonTaintUntolerated}}}, want: false},
	}
	for _, tt := range tests {
		if got := InProgress(&tt.spec, &tt.status); got != tt.want {
			t.Errorf("%s: InProgress = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestApply(t *testing.T) {
	spec, status := failedOver()
	spec.EvictionHistory = append(spec.EvictionHistory,
		workv1alpha1.EvictionHistoryEntry{ClusterName: "member3", Reason: workv1alpha1.EvictionReasonTaintUntolerated, EvictedAt: metav1.NewTime(t0)},
		workv1alpha1.EvictionHistoryEntry{ClusterName: "member1", Reason: workv1alpha1.EvictionReasonApplicationFailure, EvictedAt: metav1.NewTime(t0)})
	now := t0.Add(time.Hour + 300*time.Millisecond)
	Apply(&spec, &status, []string{"member1"}, now)
	if len(spec.EvictionHistory) != 1 || spec.EvictionHistory[0].ClusterName != "member3" {
		t.Errorf("history = %+v, want only member3's entry", spec.EvictionHistory)
	}
	if spec.RescheduleReason != workv1alpha1.EvictionReasonFailback || !spec.RescheduleTriggeredAt.Equal(&metav1.Time{Time: t0.Add(time.Hour)}) {
		t.Errorf("trigger = %v %s", spec.RescheduleTriggeredAt, spec.RescheduleReason)
	}
	if !InProgress(&spec, &status) {
		t.Errorf("a failback just applied is not in progress")
	}

	// Scheduled within the same second as now: the trigger must still be
	// later than the last schedule at one-second precision.
	spec, status = failedOver()
	sched := metav1.NewTime(t0.Add(time.Hour + 100*time.Millisecond).Truncate(time.Second))
	status.LastScheduledTime = &sched
	Apply(&spec, &status, []string{"member1"}, t0.Add(time.Hour+900*time.Millisecond))
	if !spec.RescheduleTriggeredAt.After(status.LastScheduledTime.Time) {
		t.Errorf("trigger %v is not after the last schedule %v", spec.RescheduleTriggeredAt, status.LastScheduledTime)
	}
	if spec.EvictionHistory != nil {
		t.Errorf("history = %+v, want none", spec.EvictionHistory)
	}
}

func TestGuardDisruption(t *testing.T) {
	if got := normalGuard().Disruption(); got != "" {
		t.Errorf("normal guard: %q", got)
	}
	s := normalGuard()
	s.Regions["eu"] = clustertaint.RegionState{Mode: clustertaint.GuardPartialDisruption, NotReady: 2, Total: 3}
	if got := s.Disruption(); got == "" {
		t.Errorf("a region in PartialDisruption is not reported")
	}
}

// A NoExecute taint removed while Ready stayed True leaves no trace on the
// Cluster: the window counts from when the hub saw the taint go.
func TestDecideWindowCountsFromTaintRemoval(t *testing.T) {
	spec, status := failedOver()
	clusters := map[string]*clusterv1alpha1.Cluster{"member1": readyCluster("member1", t0.Add(-time.Hour), ""),
		"member2": readyCluster("member2", t0.Add(-time.Hour), "")}
	removed := t0.Add(10 * time.Minute)
	in := Input{Spec: &spec, Status: &status, Clusters: clusters, Guard: normalGuard(),
		UntaintedSince: map[string]time.Time{"member1": removed}, Now: removed.Add(20 * time.Second)}
	if d := Decide(in); d.Action != ActionWaitWindow || d.After != 40*time.Second {
		t.Fatalf("Decide = %+v, want to wait 40s more", d)
	}
	in.Now = removed.Add(time.Minute)
	if d := Decide(in); d.Action != ActionStart {
		t.Fatalf("Decide = %+v, want Start a window after the taint went", d)
	}
}

func TestOverdueAndRollback(t *testing.T) {
	created := metav1.NewTime(t0)
	spec := workv1alpha1.ResourceBindingSpec{
		Replicas: 3,
		Clusters: []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 2}},
		GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "member2", Replicas: ptr.To[int32](3), Reason: workv1alpha1.EvictionReasonFailback,
			Producer: workv1alpha1.EvictionProducerScheduler, ClustersBeforeFailover: []string{"member2"}, CreationTimestamp: &created}},
	}
	if overdue, left := Overdue(&spec, time.Minute, t0.Add(20*time.Second)); overdue || left != 40*time.Second {
		t.Fatalf("Overdue at 20s = %v, %v; want false, 40s", overdue, left)
	}
	if overdue, _ := Overdue(&spec, 0, t0.Add(time.Hour)); overdue {
		t.Fatal("timeout 0 never rolls back")
	}
	if overdue, _ := Overdue(&spec, time.Minute, t0.Add(time.Minute)); !overdue {
		t.Fatal("not overdue after the timeout")
	}
	left, _ := Rollback(&spec, nil, t0.Add(time.Minute))
	if !slices.Equal(left, []string{"member1"}) || len(spec.Clusters) != 1 || spec.Clusters[0] != (workv1alpha1.TargetCluster{Name: "member2", Replicas: 3}) ||
		len(spec.GracefulEvictionTasks) != 0 || len(spec.EvictionHistory) != 1 || spec.EvictionHistory[0].Reason != ReasonRolledBack {
		t.Fatalf("Rollback: left %v, spec %+v", left, spec)
	}
	// A rolled-back failback is no failure to return from.
	status := workv1alpha1.ResourceBindingStatus{}
	spec.Placement = &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}}}
	if r, _ := Returning(&spec, &status, map[string]*clusterv1alpha1.Cluster{"member1": readyCluster("member1", t0, ""), "member2": readyCluster("member2", t0, "")}); len(r) != 0 {
		t.Fatalf("Returning after a rollback = %v, want none", r)
	}
}

func TestDecideNamespaceLimit(t *testing.T) {
	spec, status := failedOver()
	clusters := map[string]*clusterv1alpha1.Cluster{"member1": readyCluster("member1", t0, ""), "member2": readyCluster("member2", t0.Add(-time.Hour), "")}
	in := Input{Spec: &spec, Status: &status, Clusters: clusters, Guard: normalGuard(), Now: t0.Add(time.Hour), InNamespace: 1, NamespaceLimit: 1}
	if d := Decide(in); d.Action != ActionWaitLimit || !strings.Contains(d.Message, "of this namespace") {
		t.Fatalf("namespace at its cap: %+v, want WaitLimit", d)
	}
	in.NamespaceLimit = 2
	if d := Decide(in); d.Action != ActionStart {
		t.Fatalf("namespace under its cap: %+v, want Start", d)
	}
}
