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
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestHoldForPreservedState(t *testing.T) {
	now := time.Unix(10000, 0)
	created := metav1.NewTime(now.Add(-time.Minute))
	purged := Assessment{Done: true, Why: "the old copy was deleted (purgeMode Directly)", Outcome: "purged"}
	task := func(state map[string]string) *workv1alpha1.GracefulEvictionTask {
		return &workv1alpha1.GracefulEvictionTask{FromCluster: "m1", PurgeMode: policyv1alpha1.PurgeModeDirectly, CreationTimestamp: &created,
			PreservedLabelState: state, ClustersBeforeFailover: []string{"m1", "m2"}}
	}
	scheduled := func(gen int64, clusters ...string) *workv1alpha1.ResourceBinding {
		b := &workv1alpha1.ResourceBinding{}
		b.Generation = 3
		b.Status.SchedulerObservedGeneration = gen
		b.Status.Conditions = []metav1.Condition{{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue}}
		for _, c := range clusters {
			b.Spec.Clusters = append(b.Spec.Clusters, workv1alpha1.TargetCluster{Name: c})
		}
		return b
	}
	carrying := func(names ...string) func(string) bool {
		return func(c string) bool { return slices.Contains(names, c) }
	}
	state := map[string]string{"ckpt": "a"}
	cases := []struct {
		name     string
		a        Assessment
		task     *workv1alpha1.GracefulEvictionTask
		binding  *workv1alpha1.ResourceBinding
		carries  func(string) bool
		grace    time.Duration
		wantDone bool
	}{
		{"no state: ends as before", purged, task(nil), scheduled(1), carrying(), time.Hour, true},
		{"not done stays not done", Assessment{Why: "waiting"}, task(state), scheduled(3, "m2", "m3"), carrying("m3"), time.Hour, false},
		{"scheduler has not placed it again", purged, task(state), scheduled(2, "m2"), carrying(), time.Hour, false},
		{"a replacement lacks the state", purged, task(state), scheduled(3, "m2", "m3", "m4"), carrying("m3"), time.Hour, false},
		{"every replacement carries it", purged, task(state), scheduled(3, "m2", "m3", "m4"), carrying("m3", "m4"), time.Hour, true},
		{"no replacement (the others took the replicas)", purged, task(state), scheduled(3, "m2"), carrying(), time.Hour, true},
		{"grace passed: ends anyway", purged, task(state), scheduled(3, "m2", "m3"), carrying(), 30 * time.Second, true},
	}
	for _, tc := range cases {
		got := HoldForPreservedState(tc.a, tc.task, tc.binding, tc.carries, tc.grace, now)
		if got.Done != tc.wantDone {
			t.Errorf("%s: Done = %v (%s), want %v", tc.name, got.Done, got.Why, tc.wantDone)
		}
		if !got.Done && got.Recheck <= 0 && tc.a.Done {
			t.Errorf("%s: a held task must be rechecked at its grace deadline", tc.name)
		}
	}
}
