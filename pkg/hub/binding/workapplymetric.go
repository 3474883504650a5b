package binding

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
)

// States of flotilla_hub_works_not_applied.
const (
	workApplyFailed  = "failed"  // Applied=False at the current generation
	workApplyPending = "pending" // no Applied condition for the current generation yet
)

// worksNotApplied counts, per cluster, the Works its agent has not applied
// at their current generation: failed (Applied=False) or pending (no
// verdict on this generation yet: the agent is down, slow or cut off).
func worksNotApplied(works []*workv1alpha1.Work) map[string]map[string]int {
	out := map[string]map[string]int{}
	prefix := clusterlifecycle.Namespace("")
	for _, w := range works {
		cluster, ok := strings.CutPrefix(w.Namespace, prefix)
		if !ok || w.DeletionTimestamp != nil {
			continue
		}
		state := ""
		applied := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied)
		switch {
		case applied == nil || applied.ObservedGeneration != w.Generation:
			state = workApplyPending
		case applied.Status != metav1.ConditionTrue:
			state = workApplyFailed
		default:
			continue
		}
		if out[cluster] == nil {
			out[cluster] = map[string]int{}
		}
		out[cluster][state]++
	}
	return out
}

// updateWorkApplyMetrics sets flotilla_hub_works_not_applied for every
// cluster (0 included, so a dashboard shows the fleet) from the Work cache.
// Periodic rather than per event: a count of the whole cache is cheap and
// stays right whatever the order of Work and Cluster events.
func (c *Controller) updateWorkApplyMetrics(context.Context) {
	m := c.opts.Metrics
	if m == nil {
		return
	}
	var works []*workv1alpha1.Work
	for _, o := range c.works.List() {
		if w, ok := o.(*workv1alpha1.Work); ok {
			works = append(works, w)
		}
	}
	counts := worksNotApplied(works)
	clusters, _ := c.clusters.List(labels.Everything())
	now := map[string]bool{}
	for _, cl := range clusters {
		now[cl.Name] = true
	}
	for name := range counts {
		now[name] = true // Works of a cluster being deleted still count
	}
	for name := range now {
		for _, state := range []string{workApplyFailed, workApplyPending} {
			m.WorksNotApplied.WithLabelValues(name, state).Set(float64(counts[name][state]))
		}
	}
	for name := range c.workApplyClusters {
		if !now[name] {
			m.WorksNotApplied.DeleteLabelValues(name, workApplyFailed)
			m.WorksNotApplied.DeleteLabelValues(name, workApplyPending)
		}
	}
	c.workApplyClusters = now
}
