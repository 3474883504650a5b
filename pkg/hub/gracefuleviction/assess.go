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
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// Assessment is what becomes of one graceful eviction task.
type Assessment struct {
	// Done: the task ends and the old copy may go.
	Done bool
	// Recheck is when to look again if nothing else changes (0: only on
	// a change).
	Recheck time.Duration
	// Why explains the outcome, for events and logs.
	Why string
	// Outcome names why a done task ended, for metrics: healthy,
	// grace_expired or purged.
	Outcome string
}

// Assess judges task on binding at now. oldWorkGone says whether the Work
// on the evicted cluster no longer exists. The rules:
//   - Never: kept until a person removes the task.
//   - Directly: the binding controller deletes the old Work at once; the
//     task ends when it is gone, and only then are new Works created.
//   - Gracefully: ends when every cluster of the new placement is Healthy
//     in status observed for the binding's current generation (so the old
//     placement's status cannot count), or when the grace period has
//     passed — but never while the new placement is empty or none of its
//     clusters has reported for the current generation (Karmada #7455: that
//     deleted the only copy).
func Assess(task *workv1alpha1.GracefulEvictionTask, binding *workv1alpha1.ResourceBinding, oldWorkGone bool,
	defaultGrace time.Duration, now time.Time) Assessment {
	switch policyv1alpha1.NormalizePurgeMode(task.PurgeMode) {
	case policyv1alpha1.PurgeModeNever:
		return Assessment{Why: "purgeMode Never keeps the old copy until the task is removed"}
	case policyv1alpha1.PurgeModeDirectly:
		if oldWorkGone {
			return Assessment{Done: true, Why: "the old copy was deleted (purgeMode Directly)", Outcome: "purged"}
		}
		return Assessment{Why: "waiting for the old copy to be deleted (purgeMode Directly)"}
	}
	healthy, reported := placementState(binding)
	if healthy {
		return Assessment{Done: true, Why: "the new placement is healthy", Outcome: "healthy"}
	}
	grace := defaultGrace
	if task.GracePeriodSeconds != nil {
		grace = time.Duration(*task.GracePeriodSeconds) * time.Second
	}
	created := now
	if task.CreationTimestamp != nil {
		created = task.CreationTimestamp.Time
	}
	left := created.Add(grace).Sub(now)
	if left > 0 {
		return Assessment{Recheck: left, Why: "waiting for the new placement to become healthy"}
	}
	if len(binding.Spec.Clusters) == 0 {
		return Assessment{Why: "grace period passed, but there is no new placement: the old copy is the only one"}
	}
	if !reported {
		return Assessment{Why: "grace period passed, but no cluster of the new placement has reported yet"}
	}
	if Voluntary(task) {
		return Assessment{Why: fmt.Sprintf("grace period of %s passed, but a %s never lowers availability: the old copy stays until the new placement is healthy", grace, task.Reason)}
	}
	return Assessment{Done: true, Why: fmt.Sprintf("grace period of %s passed", grace), Outcome: "grace_expired"}
}

// placementState: healthy when the scheduler has placed the current
// generation (so an eviction's gap is filled: right after the eviction the
// remaining clusters are still at their old shares) and every target is
// Healthy for it; reported when any target has applied the current
// generation.
func placementState(binding *workv1alpha1.ResourceBinding) (healthy, reported bool) {
	if len(binding.Spec.Clusters) == 0 {
		return false, false
	}
	healthy = binding.Status.SchedulerObservedGeneration == binding.Generation &&
		meta.IsStatusConditionTrue(binding.Status.Conditions, workv1alpha1.BindingConditionScheduled)
	for _, target := range binding.Spec.Clusters {
		var item *workv1alpha1.AggregatedStatusItem
		for i := range binding.Status.AggregatedStatus {
			if binding.Status.AggregatedStatus[i].ClusterName == target.Name {
				item = &binding.Status.AggregatedStatus[i]
			}
		}
		current := item != nil && item.Applied && item.ObservedGeneration == binding.Generation
		if current {
			reported = true
		}
		if !current || item.Health != workv1alpha1.ResourceHealthy {
			healthy = false
		}
	}
	return healthy, reported
}

// Voluntary reports whether task moves a workload nothing forced off its
// cluster (a failback, a WorkloadRebalancer): such a move may wait, but it
// must never leave fewer available replicas than before, so its grace
// period does not remove the old copy while the new placement is not
// healthy.
func Voluntary(task *workv1alpha1.GracefulEvictionTask) bool {
	return task.Producer == workv1alpha1.EvictionProducerScheduler &&
		(task.Reason == workv1alpha1.EvictionReasonFailback || task.Reason == workv1alpha1.EvictionReasonRebalance)
}
