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
