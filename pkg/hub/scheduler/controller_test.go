package scheduler

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestTrigger(t *testing.T) {
	divided := &policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided}}
	spreadDivided := &policyv1alpha1.Placement{SpreadConstraints: []policyv1alpha1.SpreadConstraint{
		{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 2, MaxGroups: 2}}, ReplicaScheduling: divided.ReplicaScheduling}
	clusters := []*clusterv1alpha1.Cluster{{ObjectMeta: metav1.ObjectMeta{Name: "member1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "member2"}}}
	deleting := []*clusterv1alpha1.Cluster{clusters[0], {ObjectMeta: metav1.ObjectMeta{Name: "member2", DeletionTimestamp: &metav1.Time{Time: time.Now()}}}}
	scheduledAt := metav1.NewTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	later := metav1.NewTime(scheduledAt.Add(time.Minute))

	// scheduled returns a binding scheduled with placement p onto targets.
	scheduled := func(p *policyv1alpha1.Placement, replicas int32, targets ...workv1alpha1.TargetCluster) *workv1alpha1.ResourceBinding {
		b := &workv1alpha1.ResourceBinding{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationScheduledPlacement: placementJSON(p)}},
			Spec:       workv1alpha1.ResourceBindingSpec{Placement: p, Replicas: replicas, Clusters: targets},
			Status: workv1alpha1.ResourceBindingStatus{LastScheduledTime: &scheduledAt, Conditions: []metav1.Condition{
				{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue}}},
		}
		return b
	}
	tc := func(name string, n int32) workv1alpha1.TargetCluster {
		return workv1alpha1.TargetCluster{Name: name, Replicas: n}
	}

	for _, c := range []struct {
		name     string
		binding  func() *workv1alpha1.ResourceBinding
		clusters []*clusterv1alpha1.Cluster
		want     string
	}{
		{"never scheduled", func() *workv1alpha1.ResourceBinding {
			return &workv1alpha1.ResourceBinding{Spec: workv1alpha1.ResourceBindingSpec{Placement: divided, Replicas: 3}}
		}, clusters, TypeFirstSchedule},
		{"divided and adding up: stays", func() *workv1alpha1.ResourceBinding {
			return scheduled(divided, 3, tc("member1", 1), tc("member2", 2))
		}, clusters, ""},
		{"evicted cluster removed: replicas no longer add up (failover)", func() *workv1alpha1.ResourceBinding {
			return scheduled(divided, 3, tc("member2", 2))
		}, clusters, TypeReplicasChanged},
		{"replicas scaled", func() *workv1alpha1.ResourceBinding {
			return scheduled(divided, 9, tc("member1", 1), tc("member2", 2))
		}, clusters, TypeReplicasChanged},
		{"placement changed", func() *workv1alpha1.ResourceBinding {
			b := scheduled(divided, 3, tc("member1", 1), tc("member2", 2))
			b.Annotations[AnnotationScheduledPlacement] = "{}"
			return b
		}, clusters, TypePlacementChanged},
		{"scheduled cluster being deleted", func() *workv1alpha1.ResourceBinding {
			return scheduled(divided, 3, tc("member1", 1), tc("member2", 2))
		}, deleting, TypeClusterDeleted},
		{"scheduled cluster gone", func() *workv1alpha1.ResourceBinding {
			return scheduled(divided, 3, tc("member1", 1), tc("member2", 2))
		}, clusters[:1], TypeClusterDeleted},
		{"reschedule requested after the last schedule", func() *workv1alpha1.ResourceBinding {
			b := scheduled(divided, 3, tc("member1", 1), tc("member2", 2))
			b.Spec.RescheduleTriggeredAt = &later
			return b
		}, clusters, TypeRescheduleAsked},
		{"reschedule request already served", func() *workv1alpha1.ResourceBinding {
			b := scheduled(divided, 3, tc("member1", 1), tc("member2", 2))
			b.Spec.RescheduleTriggeredAt = &scheduledAt
			return b
		}, clusters, ""},
		{"unschedulable last time: retried", func() *workv1alpha1.ResourceBinding {
			b := scheduled(divided, 3, tc("member1", 1), tc("member2", 2))
			b.Status.Conditions[0].Status = metav1.ConditionFalse
			return b
		}, clusters, TypeUnschedulable},
		{"spread minimum no longer met after an eviction (seed 001)", func() *workv1alpha1.ResourceBinding {
			return scheduled(spreadDivided, 2, tc("member1", 2))
		}, clusters, TypeSpreadViolated},
		{"duplicated: always re-checked", func() *workv1alpha1.ResourceBinding {
			return scheduled(&policyv1alpha1.Placement{}, 2, tc("member1", 2))
		}, clusters, TypeDuplicated},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Trigger(c.binding(), c.clusters); got != c.want {
				t.Errorf("Trigger = %q, want %q", got, c.want)
			}
		})
	}
}

func TestApplyResult(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	tc := func(name string, n int32) workv1alpha1.TargetCluster {
		return workv1alpha1.TargetCluster{Name: name, Replicas: n}
	}
	fleet := []*clusterv1alpha1.Cluster{{ObjectMeta: metav1.ObjectMeta{Name: "member1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "member2"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "member3", DeletionTimestamp: &now}}}
	schedulerTask := func(cluster string) workv1alpha1.GracefulEvictionTask {
		return workv1alpha1.GracefulEvictionTask{FromCluster: cluster, Reason: workv1alpha1.EvictionReasonRescheduled, Producer: workv1alpha1.EvictionProducerScheduler}
	}

	t.Run("a dropped cluster gets a graceful task, no history; a deleting one none", func(t *testing.T) {
		spec := &workv1alpha1.ResourceBindingSpec{Replicas: 4, Clusters: []workv1alpha1.TargetCluster{tc("member1", 2), tc("member2", 1), tc("member3", 1)}}
		got := ApplyResult(spec, []workv1alpha1.TargetCluster{tc("member2", 4)}, fleet, now, TypePlacementChanged)
		if len(got.GracefulEvictionTasks) != 1 || len(got.EvictionHistory) != 0 {
			t.Fatalf("tasks %+v, history %+v", got.GracefulEvictionTasks, got.EvictionHistory)
		}
		task := got.GracefulEvictionTasks[0]
		if task.FromCluster != "member1" || *task.Replicas != 2 || task.PurgeMode != policyv1alpha1.PurgeModeGracefully ||
			task.Reason != workv1alpha1.EvictionReasonRescheduled || task.Producer != workv1alpha1.EvictionProducerScheduler ||
			!task.CreationTimestamp.Equal(&now) || len(task.ClustersBeforeFailover) != 3 || task.Message == "" {
			t.Fatalf("task %+v", task)
		}
		if len(spec.GracefulEvictionTasks) != 0 {
			t.Fatal("the input spec was changed")
		}
	})
	t.Run("placed again while the scheduler's task is open: the task goes, a failure's stays", func(t *testing.T) {
		failure := workv1alpha1.GracefulEvictionTask{FromCluster: "member2", Reason: workv1alpha1.EvictionReasonTaintUntolerated, Producer: workv1alpha1.EvictionProducerTaintManager}
		spec := &workv1alpha1.ResourceBindingSpec{Replicas: 2, Clusters: []workv1alpha1.TargetCluster{tc("member2", 2)},
			GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{schedulerTask("member1"), failure}}
		got := ApplyResult(spec, []workv1alpha1.TargetCluster{tc("member1", 2)}, fleet, now, TypePlacementChanged)
		if len(got.GracefulEvictionTasks) != 1 || got.GracefulEvictionTasks[0].FromCluster != "member2" ||
			got.GracefulEvictionTasks[0].Producer != workv1alpha1.EvictionProducerTaintManager {
			t.Fatalf("tasks %+v", got.GracefulEvictionTasks)
		}
	})
	t.Run("nothing dropped: nothing added", func(t *testing.T) {
		spec := &workv1alpha1.ResourceBindingSpec{Replicas: 3, Clusters: []workv1alpha1.TargetCluster{tc("member1", 1)}}
		got := ApplyResult(spec, []workv1alpha1.TargetCluster{tc("member1", 1), tc("member2", 2)}, fleet, now, TypeReplicasChanged)
		if len(got.GracefulEvictionTasks) != 0 {
			t.Fatalf("tasks %+v", got.GracefulEvictionTasks)
		}
	})
}

func TestReplicaSchedulingChanged(t *testing.T) {
	p := &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}},
		ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided}}
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationScheduledPlacement: placementJSON(p)}}}
	b.Spec.Placement = p.DeepCopy()
	b.Spec.Placement.ClusterAffinity.ClusterNames = []string{"member2"}
	if replicaSchedulingChanged(b) {
		t.Error("an affinity change is not a replica scheduling change")
	}
	b.Spec.Placement.ReplicaScheduling.ReplicaDivisionPreference = policyv1alpha1.ReplicaDivisionPreferenceAggregated
	if !replicaSchedulingChanged(b) {
		t.Error("a division preference change is one")
	}
}
