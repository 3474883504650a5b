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
	"slices"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// shrinkingTarget returns target with the replicas its Work renders: a
// placed cluster the scheduler shrank gracefully (an open Gracefully or
// Never task for it, see scheduler.placedTasks) keeps the task's replicas,
// its old count, until the task ends, so the workload does not dip below
// what it wants while the replicas it gives away start elsewhere.
func shrinkingTarget(binding *workv1alpha1.ResourceBinding, target workv1alpha1.TargetCluster) workv1alpha1.TargetCluster {
	for _, t := range binding.Spec.GracefulEvictionTasks {
		if t.FromCluster == target.Name && t.Replicas != nil && *t.Replicas > target.Replicas &&
			policyv1alpha1.NormalizePurgeMode(t.PurgeMode) != policyv1alpha1.PurgeModeDirectly {
			target.Replicas = *t.Replicas
		}
	}
	return target
}

// divided: the scheduler splits the replicas between the clusters (the
// scheduler's rule: Divided placement of an object with replicas).
func divided(binding *workv1alpha1.ResourceBinding) bool {
	spec := &binding.Spec
	if spec.Replicas == 0 || spec.Placement == nil || spec.Placement.ReplicaScheduling == nil {
		return false
	}
	return spec.Placement.ReplicaScheduling.ReplicaSchedulingType == policyv1alpha1.ReplicaSchedulingTypeDivided
}

// Targeted reports whether cluster is in the binding's scheduling result
// (rather than only where a workload that depends on the object runs).
func Targeted(binding *workv1alpha1.ResourceBinding, cluster string) bool {
	return slices.ContainsFunc(binding.Spec.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == cluster })
}
