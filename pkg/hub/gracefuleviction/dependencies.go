package gracefuleviction

import (
	"slices"

	"k8s.io/client-go/tools/cache"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/dependencies"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// DependencyGate returns binding as Assess must judge it when the workload
// propagates its dependencies (propagateDeps): a cluster of the new
// placement where they are not applied yet reads as not Healthy, whatever
// the workload reports. A replacement that starts without its ConfigMap or
// Secret (or with the old one) must not end the task and delete the copy
// that works; the grace period still ends it. Not applied means: the
// binding's DependenciesResolved condition is not True for its current
// generation (a dependency is missing, or its binding does not list the
// new clusters yet), or a dependency's binding has not applied its current
// Work on the cluster. deps are the bindings whose requiredBy lists
// binding. It also returns the clusters still waiting.
func DependencyGate(binding *workv1alpha1.ResourceBinding, deps []*workv1alpha1.ResourceBinding) (*workv1alpha1.ResourceBinding, []string) {
	if !binding.Spec.PropagateDeps {
		return binding, nil
	}
	resolved := dependencies.Resolved(binding)
	var waiting []string
	for _, target := range binding.Spec.Clusters {
		if !resolved || slices.ContainsFunc(deps, func(d *workv1alpha1.ResourceBinding) bool { return !appliedFor(d, binding, target.Name) }) {
			waiting = append(waiting, target.Name)
		}
	}
	if len(waiting) == 0 {
		return binding, nil
	}
	gated := binding.DeepCopy()
	for i := range gated.Status.AggregatedStatus {
		item := &gated.Status.AggregatedStatus[i]
		if slices.Contains(waiting, item.ClusterName) && item.Health == workv1alpha1.ResourceHealthy {
			item.Health = workv1alpha1.ResourceUnknown
		}
	}
	return gated, waiting
}

// appliedFor: dep lists binding with cluster in its requiredBy and reports
// its current Work applied there.
func appliedFor(dep, binding *workv1alpha1.ResourceBinding, cluster string) bool {
	listed := slices.ContainsFunc(dep.Spec.RequiredBy, func(s workv1alpha1.BindingSnapshot) bool {
		return s.Namespace == binding.Namespace && s.Name == binding.Name &&
			slices.ContainsFunc(s.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == cluster })
	})
	if !listed {
		return false
	}
	return slices.ContainsFunc(dep.Status.AggregatedStatus, func(item workv1alpha1.AggregatedStatusItem) bool {
		return item.ClusterName == cluster && item.Applied && item.ObservedGeneration == dep.Generation
	})
}

// watchDependencies: a dependency's binding whose status changes may let
// the tasks of the bindings that require it end.
func (c *Controller) watchDependencies(informers []cache.SharedIndexInformer) {
	workobjects.AddRequiredByIndex(informers...)
	for _, inf := range informers {
		c.requiredBy = append(c.requiredBy, inf.GetIndexer())
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, n any) {
			keys, _ := workobjects.RequiredByKeys(n)
			for _, k := range keys {
				c.queue.Add(k)
			}
		}})
	}
}

// gateOnDependencies is DependencyGate with the binding's dependencies from
// the cache.
func (c *Controller) gateOnDependencies(binding *workv1alpha1.ResourceBinding) *workv1alpha1.ResourceBinding {
	if !binding.Spec.PropagateDeps {
		return binding
	}
	var deps []*workv1alpha1.ResourceBinding
	for _, indexer := range c.requiredBy {
		objs, _ := indexer.ByIndex(workobjects.RequiredByIndex, workobjects.Key(binding))
		for _, o := range objs {
			if b, ok := o.(*workv1alpha1.ResourceBinding); ok {
				deps = append(deps, b)
			}
		}
	}
	gated, _ := DependencyGate(binding, deps)
	return gated
}
