package binding

import (
	"testing"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// A cluster's Work stays while a workload that depends on the object runs
// there (spec.requiredBy), whether or not the object is placed there too.
func TestRequired(t *testing.T) {
	snap := func(name string, clusters ...string) workv1alpha1.BindingSnapshot {
		s := workv1alpha1.BindingSnapshot{Namespace: "ns", Name: name}
		for _, c := range clusters {
			s.Clusters = append(s.Clusters, workv1alpha1.TargetCluster{Name: c})
		}
		return s
	}
	for _, tt := range []struct {
		name     string
		spec     workv1alpha1.ResourceBindingSpec
		required map[string]bool
	}{
		{name: "no requiredBy", spec: workv1alpha1.ResourceBindingSpec{Clusters: []workv1alpha1.TargetCluster{{Name: "a", Replicas: 2}}},
			required: map[string]bool{"a": false}},
		{name: "dependency only", spec: workv1alpha1.ResourceBindingSpec{RequiredBy: []workv1alpha1.BindingSnapshot{snap("w1", "c", "a"), snap("w2", "b", "a")}},
			required: map[string]bool{"a": true, "b": true, "c": true, "d": false}},
		{name: "own placement and requiredBy", spec: workv1alpha1.ResourceBindingSpec{Clusters: []workv1alpha1.TargetCluster{{Name: "a", Replicas: 1}},
			RequiredBy: []workv1alpha1.BindingSnapshot{snap("w1", "a", "b")}},
			required: map[string]bool{"a": false, "b": true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := &workv1alpha1.ResourceBinding{Spec: tt.spec}
			for c, want := range tt.required {
				if got := required(b, c); got != want {
					t.Errorf("required(%s) = %v, want %v", c, got, want)
				}
			}
		})
	}
}
