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

package detector

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// Priorities of the detector's queue (workFirst).
const (
	// priorityStatus: the template's binding exists for what the template
	// last showed; a sync can only mirror the binding's status.
	priorityStatus int32 = 0
	// priorityWork: a sync may create, change or delete a binding.
	priorityWork int32 = 1
)

// workFirst orders the detector's queue: a template that has no binding
// yet, was changed since its status was last written, or is gone (its
// bindings to delete) comes out before templates that only wait for their
// status to mirror their binding's. After 10,000 templates the held
// statuses come due by the thousand (--template-status-hold), and a FIFO
// made the next new template wait behind them (5.8 s in hack/bench/fleet
// at 1,000 clusters, docs/benchmarks.md). Reads the caches only: the
// workqueue calls it with its lock held (priorityqueue.PriorityFunc).
func (c *Controller) workFirst(key string) int32 {
	tmpl, err := c.templates.Get(key)
	if apierrors.IsNotFound(err) {
		return priorityWork
	}
	if err != nil {
		return priorityStatus
	}
	return templateWorkPriority(tmpl, c.ownedBinding(key) != nil)
}

// templateWorkPriority is workFirst's decision for a cached template.
func templateWorkPriority(tmpl *workv1alpha1.ResourceTemplate, bound bool) int32 {
	switch {
	case tmpl.DeletionTimestamp != nil, !bound:
		return priorityWork
	case tmpl.Status.ObservedGeneration != 0 && tmpl.Generation != tmpl.Status.ObservedGeneration:
		// Changed since its status was written: the binding follows.
		return priorityWork
	default:
		// Bound, and either shown for this generation or not shown yet
		// (its first status held while the binding is on its way).
		return priorityStatus
	}
}
