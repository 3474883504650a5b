package binding

import (
	"slices"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// renderTargets are the clusters that get a Work: the scheduling result,
// then the clusters where only a workload that depends on the object
// (spec.requiredBy, propagateDeps) needs it. A dependency has no replicas
// of its own there: those clusters get the object as the template holds it.
func renderTargets(binding *workv1alpha1.ResourceBinding) []workv1alpha1.TargetCluster {
	required := workobjects.RequiredClusters(&binding.Spec)
	if len(required) == 0 {
		return binding.Spec.Clusters
	}
	out := slices.Clone(binding.Spec.Clusters)
	for _, name := range required {
		out = append(out, workv1alpha1.TargetCluster{Name: name})
	}
	return out
}

// required: a workload that depends on the object runs on the cluster (or
// is still being evicted from it), so its Work stays.
func required(binding *workv1alpha1.ResourceBinding, cluster string) bool {
	return slices.Contains(workobjects.RequiredClusters(&binding.Spec), cluster)
}
