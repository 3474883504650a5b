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

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestAssess(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	const gen = 5
	scheduled := []metav1.Condition{{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue}}
	item := func(cluster string, observed int64, health workv1alpha1.ResourceHealth) workv1alpha1.AggregatedStatusItem {
		return workv1alpha1.AggregatedStatusItem{ClusterName: cluster, Applied: true, ObservedGeneration: observed, Health: health}
	}
	// The seed: member1 evicted, member2 now runs all 3.
	binding := func(schedulerSaw int64, items ...workv1alpha1.AggregatedStatusItem) *workv1alpha1.ResourceBinding {
		return &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Spec:   workv1alpha1.ResourceBindingSpec{Replicas: 3, Clusters: []workv1alpha1.TargetCluster{{Name: "member2", Replicas: 3}}},
			Status: workv1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: schedulerSaw, Conditions: scheduled, AggregatedStatus: items}}
	}
	task := func(mode policyv1alpha1.PurgeMode, age time.Duration, grace *int32) *workv1alpha1.GracefulEvictionTask {
		return &workv1alpha1.GracefulEvictionTask{FromCluster: "member1", PurgeMode: mode, GracePeriodSeconds: grace,
			CreationTimestamp: &metav1.Time{Time: now.Add(-age)}}
	}
	ten := int32(10)
	empty := binding(gen)
	empty.Spec.Clusters = nil
	for _, c := range []struct {
		name    string
		task    *workv1alpha1.GracefulEvictionTask
		binding *workv1alpha1.ResourceBinding
		gone    bool
		done    bool
		recheck time.Duration
	}{
		{name: "new placement healthy for the current generation", task: task("", time.Second, nil),
			binding: binding(gen, item("member2", gen, workv1alpha1.ResourceHealthy)), done: true},
		{name: "healthy status of the previous generation does not count (the old 2/2)", task: task(policyv1alpha1.PurgeModeGracefully, time.Second, nil),
			binding: binding(gen, item("member2", gen-1, workv1alpha1.ResourceHealthy)), recheck: 10*time.Minute - time.Second},
		{name: "the scheduler has not placed the current generation yet", task: task(policyv1alpha1.PurgeModeGracefully, time.Second, nil),
			binding: binding(gen-1, item("member2", gen, workv1alpha1.ResourceHealthy)), recheck: 10*time.Minute - time.Second},
		{name: "unhealthy replacement within grace", task: task(policyv1alpha1.PurgeModeGracefully, 4*time.Second, &ten),
			binding: binding(gen, item("member2", gen, workv1alpha1.ResourceUnhealthy)), recheck: 6 * time.Second},
		{name: "unhealthy replacement after grace ends the task", task: task(policyv1alpha1.PurgeModeGracefully, 11*time.Second, &ten),
			binding: binding(gen, item("member2", gen, workv1alpha1.ResourceUnhealthy)), done: true},
		// Unknown is not healthy: the old copy stays until the grace
		// period ends, as for an Unhealthy replacement.
		{name: "unknown replacement within grace", task: task(policyv1alpha1.PurgeModeGracefully, 4*time.Second, &ten),
			binding: binding(gen, item("member2", gen, workv1alpha1.ResourceUnknown)), recheck: 6 * time.Second},
		{name: "unknown replacement without grace waits for the timeout", task: task(policyv1alpha1.PurgeModeGracefully, time.Second, nil),
			binding: binding(gen, item("member2", gen, workv1alpha1.ResourceUnknown)), recheck: 10*time.Minute - time.Second},
		{name: "after grace, nothing reported yet: kept", task: task(policyv1alpha1.PurgeModeGracefully, time.Hour, &ten),
			binding: binding(gen)},
		{name: "after grace, empty new placement: kept (Karmada #7455)", task: task(policyv1alpha1.PurgeModeGracefully, time.Hour, &ten),
			binding: empty},
		{name: "Graciously is Gracefully", task: task(policyv1alpha1.PurgeModeGraciously, time.Hour, &ten), binding: empty},
		{name: "Never is kept even when healthy", task: task(policyv1alpha1.PurgeModeNever, time.Hour, nil),
			binding: binding(gen, item("member2", gen, workv1alpha1.ResourceHealthy))},
		{name: "Directly waits for the old Work", task: task(policyv1alpha1.PurgeModeDirectly, 0, nil), binding: empty},
		{name: "Directly ends when the old Work is gone", task: task(policyv1alpha1.PurgeModeImmediately, 0, nil), binding: empty, gone: true, done: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := Assess(c.task, c.binding, c.gone, 10*time.Minute, now)
			if a.Done != c.done || a.Recheck != c.recheck {
				t.Errorf("Assess = done %v recheck %s (%s), want done %v recheck %s", a.Done, a.Recheck, a.Why, c.done, c.recheck)
			}
		})
	}
}
