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

package gracefuleviction

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// A graceful shrink (the scheduler's task for a cluster that stays placed
// with fewer replicas, e.g. a rebalance from member2:3 to member1:1
// member2:2) ends only when the whole new placement, the returning
// cluster included, is healthy for the current generation, and is never
// cancelled.
func TestGracefulShrinkTask(t *testing.T) {
	now := time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC)
	const gen = 7
	three := int32(3)
	task := &workv1alpha1.GracefulEvictionTask{FromCluster: "member2", Replicas: &three, PurgeMode: policyv1alpha1.PurgeModeGracefully,
		Reason: workv1alpha1.EvictionReasonRebalance, Producer: workv1alpha1.EvictionProducerScheduler, CreationTimestamp: &metav1.Time{Time: now.Add(-time.Second)}}
	item := func(cluster string, observed int64, health workv1alpha1.ResourceHealth) workv1alpha1.AggregatedStatusItem {
		return workv1alpha1.AggregatedStatusItem{ClusterName: cluster, Applied: true, ObservedGeneration: observed, Health: health}
	}
	binding := func(items ...workv1alpha1.AggregatedStatusItem) *workv1alpha1.ResourceBinding {
		return &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Spec: workv1alpha1.ResourceBindingSpec{Replicas: 3, Placement: &policyv1alpha1.Placement{
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided}},
				Clusters:              []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 2}},
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{*task}},
			Status: workv1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: gen, AggregatedStatus: items,
				Conditions: []metav1.Condition{{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue}}}}
	}
	for _, c := range []struct {
		name    string
		binding *workv1alpha1.ResourceBinding
		done    bool
	}{
		{"the returning cluster has not reported", binding(item("member2", gen, workv1alpha1.ResourceHealthy)), false},
		{"the returning cluster is not healthy yet", binding(item("member1", gen, workv1alpha1.ResourceUnknown), item("member2", gen, workv1alpha1.ResourceHealthy)), false},
		{"the returning cluster is healthy for an older generation", binding(item("member1", gen-1, workv1alpha1.ResourceHealthy), item("member2", gen, workv1alpha1.ResourceHealthy)), false},
		{"every cluster healthy for the current generation", binding(item("member1", gen, workv1alpha1.ResourceHealthy), item("member2", gen, workv1alpha1.ResourceHealthy)), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if a := Assess(task, c.binding, false, 10*time.Minute, now); a.Done != c.done {
				t.Errorf("Assess = %+v, want done %v", a, c.done)
			}
		})
	}
	// A voluntary move (Rebalance, Failback) keeps the old copy past its
	// grace period while the new placement is not healthy; a reschedule a
	// person asked for (Rescheduled) does not.
	for _, c := range []struct {
		reason string
		done   bool
	}{{workv1alpha1.EvictionReasonRebalance, false}, {workv1alpha1.EvictionReasonFailback, false}, {workv1alpha1.EvictionReasonRescheduled, true}} {
		t.Run("grace period passed, returning cluster unhealthy, reason "+c.reason, func(t *testing.T) {
			late := *task
			late.Reason = c.reason
			b := binding(item("member1", gen, workv1alpha1.ResourceUnhealthy), item("member2", gen, workv1alpha1.ResourceHealthy))
			b.Spec.GracefulEvictionTasks = []workv1alpha1.GracefulEvictionTask{late}
			if a := Assess(&late, b, false, 10*time.Minute, now.Add(time.Hour)); a.Done != c.done {
				t.Errorf("Assess = %+v, want done %v", a, c.done)
			}
		})
	}
	t.Run("never cancelled, even with the others short of spec.replicas", func(t *testing.T) {
		b := binding()
		b.Spec.Clusters = b.Spec.Clusters[1:] // member1 lost since: member2's 2 fall short of 3
		ready := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member2"},
			Status: clusterv1alpha1.ClusterStatus{Conditions: []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue}}}}
		if cn := Cancellable(task, b, ready, true); cn.Cancel {
			t.Errorf("Cancellable = %+v", cn)
		}
	})
}

func TestEndedMessage(t *testing.T) {
	three := int32(3)
	b := &workv1alpha1.ResourceBinding{Spec: workv1alpha1.ResourceBindingSpec{Clusters: []workv1alpha1.TargetCluster{{Name: "member2", Replicas: 2}}}}
	shrink := &workv1alpha1.GracefulEvictionTask{FromCluster: "member2", Replicas: &three, Reason: workv1alpha1.EvictionReasonRebalance}
	if got, want := endedMessage(shrink, b), "Shrank cluster member2 from 3 to 2 replicas (Rebalance)"; got != want {
		t.Errorf("endedMessage = %q, want %q", got, want)
	}
	removal := &workv1alpha1.GracefulEvictionTask{FromCluster: "member1", Replicas: &three}
	if got, want := endedMessage(removal, b), "Evicted from cluster member1"; got != want {
		t.Errorf("endedMessage = %q, want %q", got, want)
	}
}
