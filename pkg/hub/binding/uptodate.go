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

package binding

import (
	"fmt"
	"sort"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/render"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// WorksUpToDate reasons.
const (
	ReasonUpToDate = "UpToDate"
	// ReasonStaleCopies: some cluster keeps a copy rendered from an older
	// template generation.
	ReasonStaleCopies = "StaleCopies"
)

// workCopy is what the WorksUpToDate condition needs of one existing Work.
type workCopy struct {
	cluster string
	// generation is the template generation the Work was rendered from;
	// 0 when unknown (a Work written by an older hub).
	generation int64
	// current: this sync wrote or confirmed the Work as wanted now (the
	// informer may not show it yet).
	current bool
	// evicting: the cluster's copy is kept by a graceful eviction task,
	// which the binding controller deliberately leaves as it was.
	evicting bool
}

// copies lists the binding's Works that still run (not being deleted).
func (c *Controller) copies(binding *workv1alpha1.ResourceBinding, current map[string]bool) []workCopy {
	works, _ := c.worksOf(binding)
	out := make([]workCopy, 0, len(works))
	for _, w := range works {
		if w.DeletionTimestamp != nil {
			continue
		}
		cluster := w.Annotations[workobjects.AnnotationCluster]
		gen, _ := strconv.ParseInt(w.Annotations[workv1alpha1.AnnotationTemplateGeneration], 10, 64)
		out = append(out, workCopy{cluster: cluster, generation: gen, current: current[cluster],
			evicting: !render.Targeted(binding, cluster) && evicting(binding, cluster)})
	}
	return out
}

// worksUpToDate says whether every copy of the workload follows the
// template at templateGeneration. A template change must never be dropped
// silently: an evicting copy is frozen while its task lasts (Karmada
// #5782), and with no cluster scheduled a change reaches nothing.
func worksUpToDate(binding *workv1alpha1.ResourceBinding, templateGeneration int64, copies []workCopy) metav1.Condition {
	cond := metav1.Condition{Type: workv1alpha1.BindingConditionWorksUpToDate, ObservedGeneration: binding.Generation}
	var stale []string
	for _, w := range copies {
		if w.current || w.generation == templateGeneration {
			continue
		}
		of := "an unknown template generation"
		if w.generation > 0 {
			of = "template generation " + strconv.FormatInt(w.generation, 10)
		}
		if w.evicting {
			stale = append(stale, fmt.Sprintf("cluster %s keeps the copy of %s while its graceful eviction task lasts", w.cluster, of))
		} else {
			stale = append(stale, fmt.Sprintf("cluster %s runs the copy of %s", w.cluster, of))
		}
	}
	now := "the template is at generation " + strconv.FormatInt(templateGeneration, 10)
	switch {
	case len(stale) > 0:
		sort.Strings(stale)
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonStaleCopies
		// One item per cluster: bounded, so a large fleet cannot make the
		// binding's status too large to write.
		cond.Message = statuslimits.Join(stale, "; ", statuslimits.MaxSummary-len(now)-3, "clusters") + " (" + now + ")"
	case len(render.Targets(binding)) == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonNoClusterScheduled
		cond.Message = "no cluster is scheduled: " + now + " and runs nowhere"
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonUpToDate
		cond.Message = "every Work renders template generation " + strconv.FormatInt(templateGeneration, 10)
	}
	return cond
}
