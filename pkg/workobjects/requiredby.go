package workobjects

import (
	"slices"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// RequiredByIndex indexes bindings by the keys of the bindings that require
// them (spec.requiredBy): a workload's dependencies.
const RequiredByIndex = "byRequiredBy"

// RequiredByKeys is the RequiredByIndex function.
func RequiredByKeys(obj any) ([]string, error) {
	spec := SpecOf(obj)
	if spec == nil {
		return nil, nil
	}
	out := make([]string, 0, len(spec.RequiredBy))
	for _, r := range spec.RequiredBy {
		if r.Namespace == "" {
			out = append(out, r.Name)
		} else {
			out = append(out, r.Namespace+"/"+r.Name)
		}
	}
	return out, nil
}

// AddRequiredByIndex adds RequiredByIndex to binding informers that lack it.
func AddRequiredByIndex(informers ...cache.SharedIndexInformer) {
	for _, inf := range informers {
		if _, ok := inf.GetIndexer().GetIndexers()[RequiredByIndex]; ok {
			continue
		}
		utilruntime.Must(inf.AddIndexers(cache.Indexers{RequiredByIndex: RequiredByKeys}))
	}
}

// RequiredClusters are the clusters the bindings of spec.requiredBy are
// placed on (or still being evicted from), sorted, without those of
// spec.clusters: where the object must be only because something needs it.
func RequiredClusters(spec *workv1alpha1.ResourceBindingSpec) []string {
	var out []string
	for _, r := range spec.RequiredBy {
		for _, c := range r.Clusters {
			if !slices.Contains(out, c.Name) && !slices.ContainsFunc(spec.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == c.Name }) {
				out = append(out, c.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}
