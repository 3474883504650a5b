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
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// HoldForPreservedState keeps a Directly task that carries state
// (preservedLabelState) open after its old copy is gone, until the
// scheduler has placed the binding again and every replacement cluster's
// Work carries the state (carries reports whether a cluster's does): the
// binding controller reads the state from the task, and a task that ended
// first would leave the replacements without it. The grace period bounds
// the wait, so a placement that cannot be made never holds the task for
// good. Other assessments pass through.
func HoldForPreservedState(a Assessment, task *workv1alpha1.GracefulEvictionTask, binding *workv1alpha1.ResourceBinding,
	carries func(cluster string) bool, defaultGrace time.Duration, now time.Time) Assessment {
	if !a.Done || a.Outcome != "purged" || len(task.PreservedLabelState) == 0 {
		return a
	}
	var waiting []string
	scheduled := binding.Status.SchedulerObservedGeneration == binding.Generation &&
		meta.IsStatusConditionTrue(binding.Status.Conditions, workv1alpha1.BindingConditionScheduled)
	if !scheduled {
		waiting = append(waiting, "the scheduler to place the binding again")
	} else {
		for _, t := range binding.Spec.Clusters {
			if !slices.Contains(task.ClustersBeforeFailover, t.Name) && !carries(t.Name) {
				waiting = append(waiting, "cluster "+t.Name)
			}
		}
	}
	if len(waiting) == 0 {
		return a
	}
	grace := defaultGrace
	if task.GracePeriodSeconds != nil {
		grace = time.Duration(*task.GracePeriodSeconds) * time.Second
	}
	created := now
	if task.CreationTimestamp != nil {
		created = task.CreationTimestamp.Time
	}
	if left := created.Add(grace).Sub(now); left > 0 {
		return Assessment{Recheck: left, Why: "the old copy was deleted (purgeMode Directly); waiting for the preserved state to reach " + strings.Join(waiting, ", ")}
	}
	a.Why += fmt.Sprintf("; grace period of %s passed before the preserved state reached %s", grace, strings.Join(waiting, ", "))
	return a
}

// carriesPreservedState reports whether the binding's Work on cluster
// exists, is not being deleted, and records every label of state.
func (c *Controller) carriesPreservedState(binding *workv1alpha1.ResourceBinding, state map[string]string) func(string) bool {
	return func(cluster string) bool {
		w, err := c.works.Works(clusterlifecycle.Namespace(cluster)).Get(workobjects.WorkName(binding.Namespace, binding.Name))
		if err != nil || w.DeletionTimestamp != nil {
			return false
		}
		var recorded map[string]string
		if json.Unmarshal([]byte(w.Annotations[workv1alpha1.AnnotationPreservedLabelState]), &recorded) != nil {
			return false
		}
		for k := range state {
			if _, ok := recorded[k]; !ok {
				return false
			}
		}
		return true
	}
}

// preservedStateHandler re-enqueues a binding when one of its Works starts
// to carry preserved state: a Directly task held by HoldForPreservedState
// may end then.
func (c *Controller) preservedStateHandler() cache.ResourceEventHandlerFuncs {
	enqueue := func(w *workv1alpha1.Work) {
		ns, name := w.Annotations[workobjects.AnnotationBindingNamespace], w.Annotations[workobjects.AnnotationBindingName]
		if name != "" {
			c.queue.Add(workobjects.Key(&metav1.ObjectMeta{Namespace: ns, Name: name}))
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if w, ok := obj.(*workv1alpha1.Work); ok && w.Annotations[workv1alpha1.AnnotationPreservedLabelState] != "" {
				enqueue(w)
			}
		},
		UpdateFunc: func(o, n any) {
			ow, ok1 := o.(*workv1alpha1.Work)
			nw, ok2 := n.(*workv1alpha1.Work)
			if ok1 && ok2 && ow.Annotations[workv1alpha1.AnnotationPreservedLabelState] != nw.Annotations[workv1alpha1.AnnotationPreservedLabelState] {
				enqueue(nw)
			}
		},
	}
}
