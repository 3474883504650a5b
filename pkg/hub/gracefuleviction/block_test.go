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
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// An application failover from the only cluster is not undone while
// blockPredecessorSeconds blocks the cluster; once the block ends, the
// usual rules decide.
func TestCancellableAtHonoursBlockPredecessor(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	evicted := metav1.NewTime(now.Add(-time.Minute))
	task := &workv1alpha1.GracefulEvictionTask{FromCluster: "member1", PurgeMode: policyv1alpha1.PurgeModeGracefully, Replicas: ptr.To[int32](3),
		Reason: workv1alpha1.EvictionReasonApplicationFailure, Producer: workv1alpha1.EvictionProducerApplicationFailover, CreationTimestamp: &evicted}
	cluster := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"},
		Status: clusterv1alpha1.ClusterStatus{Conditions: []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue}}}}
	binding := func(block *int32) *workv1alpha1.ResourceBinding {
		return &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Spec: workv1alpha1.ResourceBindingSpec{Replicas: 3,
				Placement:       &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}},
				Failover:        &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{BlockPredecessorSeconds: block}},
				EvictionHistory: []workv1alpha1.EvictionHistoryEntry{{ClusterName: "member1", Reason: workv1alpha1.EvictionReasonApplicationFailure, EvictedAt: evicted}}},
			Status: workv1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: 2,
				Conditions: []metav1.Condition{{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionFalse}}}}
	}
	for _, c := range []struct {
		name   string
		block  *int32
		cancel bool
		why    string
	}{
		{name: "no block: nothing replaced it, cancelled", cancel: true},
		{name: "blocked for an hour", block: ptr.To[int32](3600), why: "until 2026-11-23T12:59:00Z"},
		{name: "blocked for good", block: ptr.To[int32](0), why: "until its eviction history entry is removed"},
		{name: "block over: cancelled", block: ptr.To[int32](30), cancel: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := CancellableAt(task, binding(c.block), cluster, true, now)
			if got.Cancel != c.cancel || !strings.Contains(got.Why, c.why) {
				t.Errorf("CancellableAt = %+v, want cancel %v saying %q", got, c.cancel, c.why)
			}
		})
	}
}
