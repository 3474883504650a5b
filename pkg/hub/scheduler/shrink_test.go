/*
Copyright The Flotilla Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package scheduler

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestApplyResultGracefulShrink(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC))
	earlier := metav1.NewTime(now.Add(-time.Minute))
	fleet := []*clusterv1alpha1.Cluster{{ObjectMeta: metav1.ObjectMeta{Name: "member1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "member2"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "member3"}}}
	tc := func(name string, n int32) workv1alpha1.TargetCluster {
		return workv1alpha1.TargetCluster{Name: name, Replicas: n}
	}
	ptr := func(n int32) *int32 { return &n }
	divided := &policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided}}
	// After member1's failover member2 runs all 3 (the seed's nginx).
	failedOver := func(reason string, tasks ...workv1alpha1.GracefulEvictionTask) *workv1alpha1.ResourceBindingSpec {
		return &workv1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided, RescheduleReason: reason,
			Clusters: []workv1alpha1.TargetCluster{tc("member2", 3)}, GracefulEvictionTasks: tasks}
	}
	shrink := func(cluster string, replicas int32, reason string) workv1alpha1.GracefulEvictionTask {
		return workv1alpha1.GracefulEvictionTask{FromCluster: cluster, Replicas: ptr(replicas), Reason: reason,
			Producer: workv1alpha1.EvictionProducerScheduler, PurgeMode: policyv1alpha1.PurgeModeGracefully, CreationTimestamp: &earlier}
	}
	type want struct {
		cluster  string
		replicas int32
		reason   string
		created  metav1.Time
	}
	for _, c := range []struct {
		name         string
		spec         *workv1alpha1.ResourceBindingSpec
		result       []workv1alpha1.TargetCluster
		scheduleType string
		want         []want
	}{
		{name: "rebalance lowers a kept cluster: a task with its old count and the request's reason",
			spec: failedOver(workv1alpha1.EvictionReasonRebalance), result: []workv1alpha1.TargetCluster{tc("member1", 1), tc("member2", 2)},
			scheduleType: TypeRescheduleAsked, want: []want{{"member2", 3, workv1alpha1.EvictionReasonRebalance, now}}},
		{name: "a reschedule without a reason is Rescheduled",
			spec: failedOver(""), result: []workv1alpha1.TargetCluster{tc("member1", 1), tc("member2", 2)},
			scheduleType: TypeRescheduleAsked, want: []want{{"member2", 3, workv1alpha1.EvictionReasonRescheduled, now}}},
		{name: "a removed cluster's task carries the request's reason too",
			spec: failedOver(workv1alpha1.EvictionReasonFailback), result: []workv1alpha1.TargetCluster{tc("member1", 3)},
			scheduleType: TypeRescheduleAsked, want: []want{{"member2", 3, workv1alpha1.EvictionReasonFailback, now}}},
		{name: "the reason only belongs to the reschedule it asked for",
			spec: failedOver(workv1alpha1.EvictionReasonRebalance), result: []workv1alpha1.TargetCluster{tc("member1", 3)},
			scheduleType: TypePlacementChanged, want: []want{{"member2", 3, workv1alpha1.EvictionReasonRescheduled, now}}},
		{name: "a kept cluster that grows gets no task",
			spec:   &workv1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided, Clusters: []workv1alpha1.TargetCluster{tc("member1", 1), tc("member2", 2)}},
			result: []workv1alpha1.TargetCluster{tc("member2", 3)}, scheduleType: TypeRescheduleAsked,
			want: []want{{"member1", 1, workv1alpha1.EvictionReasonRescheduled, now}}},
		{name: "a plain scale-down stays immediate",
			spec:   &workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: divided, Clusters: []workv1alpha1.TargetCluster{tc("member2", 3)}},
			result: []workv1alpha1.TargetCluster{tc("member2", 2)}, scheduleType: TypeReplicasChanged},
		{name: "a placement change (not a reschedule request) lowers at once",
			spec:   &workv1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided, Clusters: []workv1alpha1.TargetCluster{tc("member1", 1), tc("member2", 2)}},
			result: []workv1alpha1.TargetCluster{tc("member1", 2), tc("member2", 1)}, scheduleType: TypePlacementChanged},
		{name: "an open shrink outlives a later schedule that keeps the cluster low",
			spec: &workv1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided, Clusters: []workv1alpha1.TargetCluster{tc("member1", 1), tc("member2", 2)},
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{shrink("member2", 3, workv1alpha1.EvictionReasonRebalance)}},
			result: []workv1alpha1.TargetCluster{tc("member2", 2), tc("member3", 1)}, scheduleType: TypeClusterDeleted,
			want: []want{{"member2", 3, workv1alpha1.EvictionReasonRebalance, earlier}, {"member1", 1, workv1alpha1.EvictionReasonRescheduled, now}}},
		{name: "an open shrink ends when the cluster gets its old count back",
			spec: &workv1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided, Clusters: []workv1alpha1.TargetCluster{tc("member2", 2)},
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{shrink("member2", 3, workv1alpha1.EvictionReasonRebalance)}},
			result: []workv1alpha1.TargetCluster{tc("member2", 3)}, scheduleType: TypeReplicasChanged},
		{name: "a scale-down ends an open shrink",
			spec: &workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: divided, Clusters: []workv1alpha1.TargetCluster{tc("member1", 1), tc("member2", 2)},
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{shrink("member2", 3, workv1alpha1.EvictionReasonRebalance)}},
			result: []workv1alpha1.TargetCluster{tc("member1", 1), tc("member2", 1)}, scheduleType: TypeReplicasChanged},
		{name: "a second rebalance while a shrink is open keeps the larger count, restarted",
			spec: &workv1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided, RescheduleReason: workv1alpha1.EvictionReasonRebalance,
				Clusters:              []workv1alpha1.TargetCluster{tc("member1", 1), tc("member2", 2)},
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{shrink("member2", 3, workv1alpha1.EvictionReasonRebalance)}},
			result: []workv1alpha1.TargetCluster{tc("member1", 2), tc("member2", 1)}, scheduleType: TypeRescheduleAsked,
			want: []want{{"member2", 3, workv1alpha1.EvictionReasonRebalance, now}}},
		{name: "a removed cluster placed again lower keeps its copy at the new share (no shrink outside a reschedule)",
			spec: &workv1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided, Clusters: []workv1alpha1.TargetCluster{tc("member2", 3)},
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{shrink("member1", 2, workv1alpha1.EvictionReasonRescheduled)}},
			result: []workv1alpha1.TargetCluster{tc("member1", 1), tc("member2", 2)}, scheduleType: TypePlacementChanged},
		{name: "a failure's task is left alone",
			spec: &workv1alpha1.ResourceBindingSpec{Replicas: 3, Placement: divided, Clusters: []workv1alpha1.TargetCluster{tc("member2", 3)},
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "member1", Replicas: ptr(1),
					Reason: workv1alpha1.EvictionReasonTaintUntolerated, Producer: workv1alpha1.EvictionProducerTaintManager, CreationTimestamp: &earlier}}},
			result: []workv1alpha1.TargetCluster{tc("member2", 3)}, scheduleType: TypeRescheduleAsked,
			want: []want{{"member1", 1, workv1alpha1.EvictionReasonTaintUntolerated, earlier}}},
		{name: "no replicas (a ConfigMap): nothing to shrink",
			spec:   &workv1alpha1.ResourceBindingSpec{Placement: &policyv1alpha1.Placement{}, Clusters: []workv1alpha1.TargetCluster{tc("member1", 0)}},
			result: []workv1alpha1.TargetCluster{tc("member1", 0)}, scheduleType: TypeRescheduleAsked},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ApplyResult(c.spec, c.result, fleet, now, c.scheduleType)
			if len(got.GracefulEvictionTasks) != len(c.want) {
				t.Fatalf("tasks %+v, want %+v", got.GracefulEvictionTasks, c.want)
			}
			for i, w := range c.want {
				task := got.GracefulEvictionTasks[i]
				if task.FromCluster != w.cluster || task.Replicas == nil || *task.Replicas != w.replicas || task.Reason != w.reason ||
					!task.CreationTimestamp.Equal(&w.created) {
					t.Errorf("task %d = %s %v %s %v, want %+v", i, task.FromCluster, task.Replicas, task.Reason, task.CreationTimestamp, w)
				}
			}
			if len(got.EvictionHistory) != 0 {
				t.Errorf("history %+v: a reschedule is not a failure", got.EvictionHistory)
			}
			if !equalTargets(got.Clusters, c.result) {
				t.Errorf("clusters %+v, want the result %+v", got.Clusters, c.result)
			}
		})
	}
}

func equalTargets(a, b []workv1alpha1.TargetCluster) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A reschedule request stamped in the second after the last schedule is
// served by a schedule within that earlier second: the recorded schedule
// time must not leave it pending (Trigger would fire again on any event).
func TestServedAtCoversTheRequest(t *testing.T) {
	now := time.Date(2026, 11, 24, 4, 22, 48, 700_000_000, time.UTC)
	asked := metav1.NewTime(time.Date(2026, 11, 24, 4, 22, 49, 0, time.UTC))
	spec := &workv1alpha1.ResourceBindingSpec{RescheduleTriggeredAt: &asked}
	got := servedAt(spec, TypeRescheduleAsked, now)
	if !got.Equal(asked.Time) {
		t.Fatalf("servedAt = %s, want the request's %s", got, asked)
	}
	last := metav1.NewTime(*got)
	b := &workv1alpha1.ResourceBinding{Spec: *spec}
	b.Status.LastScheduledTime = &last
	if asked.After(b.Status.LastScheduledTime.Time) {
		t.Error("the request still looks pending")
	}
	if got := servedAt(spec, TypeReplicasChanged, now); !got.Equal(now) {
		t.Errorf("another trigger records %s, want now", got)
	}
	if got := servedAt(&workv1alpha1.ResourceBindingSpec{}, TypeRescheduleAsked, now); !got.Equal(now) {
		t.Errorf("servedAt without a request = %s, want now", got)
	}
}
