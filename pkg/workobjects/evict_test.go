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

package workobjects

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// A cluster being shrunk gracefully (a rebalance: member2 keeps 3 of its
// new 2) that fails: the failure's task replaces the shrink, with the
// copy's real size, and the cluster leaves the placement.
func TestEvictClusterReplacesAShrink(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC))
	three := int32(3)
	spec := &workv1alpha1.ResourceBindingSpec{Replicas: 3,
		Clusters: []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 2}},
		GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "member2", Replicas: &three,
			Reason: workv1alpha1.EvictionReasonRebalance, Producer: workv1alpha1.EvictionProducerScheduler, PurgeMode: policyv1alpha1.PurgeModeGracefully}}}
	failure := workv1alpha1.GracefulEvictionTask{FromCluster: "member2", PurgeMode: policyv1alpha1.PurgeModeDirectly,
		Reason: workv1alpha1.EvictionReasonTaintUntolerated, Producer: workv1alpha1.EvictionProducerTaintManager}
	if !EvictCluster(spec, failure, now) {
		t.Fatal("not evicted")
	}
	if len(spec.Clusters) != 1 || spec.Clusters[0].Name != "member1" || len(spec.EvictionHistory) != 1 {
		t.Fatalf("spec %+v", spec)
	}
	if len(spec.GracefulEvictionTasks) != 1 {
		t.Fatalf("tasks %+v", spec.GracefulEvictionTasks)
	}
	got := spec.GracefulEvictionTasks[0]
	if got.Producer != workv1alpha1.EvictionProducerTaintManager || got.PurgeMode != policyv1alpha1.PurgeModeDirectly ||
		got.Reason != workv1alpha1.EvictionReasonTaintUntolerated || *got.Replicas != 3 {
		t.Errorf("task %+v", got)
	}

	// A failure's own task is not replaced by another failure.
	spec = &workv1alpha1.ResourceBindingSpec{Replicas: 3, Clusters: []workv1alpha1.TargetCluster{{Name: "member2", Replicas: 3}},
		GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "member2", Reason: workv1alpha1.EvictionReasonApplicationFailure,
			Producer: workv1alpha1.EvictionProducerApplicationFailover}}}
	EvictCluster(spec, failure, now)
	if got := spec.GracefulEvictionTasks; len(got) != 1 || got[0].Reason != workv1alpha1.EvictionReasonApplicationFailure {
		t.Errorf("tasks %+v", got)
	}
}
