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

package render

import (
	"testing"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestShrinkingTarget(t *testing.T) {
	three := int32(3)
	task := func(cluster string, mode policyv1alpha1.PurgeMode) workv1alpha1.GracefulEvictionTask {
		return workv1alpha1.GracefulEvictionTask{FromCluster: cluster, Replicas: &three, PurgeMode: mode,
			Producer: workv1alpha1.EvictionProducerScheduler, Reason: workv1alpha1.EvictionReasonRebalance}
	}
	b := &workv1alpha1.ResourceBinding{Spec: workv1alpha1.ResourceBindingSpec{Replicas: 3,
		Clusters: []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 2}}}}
	for _, c := range []struct {
		name  string
		tasks []workv1alpha1.GracefulEvictionTask
		want  map[string]int32
	}{
		{"no task: the shares", nil, map[string]int32{"member1": 1, "member2": 2}},
		{"a shrink keeps the old count while it lasts", []workv1alpha1.GracefulEvictionTask{task("member2", policyv1alpha1.PurgeModeGracefully)},
			map[string]int32{"member1": 1, "member2": 3}},
		{"Never keeps it too", []workv1alpha1.GracefulEvictionTask{task("member2", policyv1alpha1.PurgeModeNever)},
			map[string]int32{"member1": 1, "member2": 3}},
		{"Directly does not", []workv1alpha1.GracefulEvictionTask{task("member2", policyv1alpha1.PurgeModeDirectly)},
			map[string]int32{"member1": 1, "member2": 2}},
		{"a task's count below the share does not lower it", []workv1alpha1.GracefulEvictionTask{{FromCluster: "member2", Replicas: new(int32)}},
			map[string]int32{"member1": 1, "member2": 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := b.DeepCopy()
			b.Spec.GracefulEvictionTasks = c.tasks
			for _, target := range b.Spec.Clusters {
				if got := shrinkingTarget(b, target); got.Name != target.Name || got.Replicas != c.want[target.Name] {
					t.Errorf("%s: %+v, want %d", target.Name, got, c.want[target.Name])
				}
			}
		})
	}
}
