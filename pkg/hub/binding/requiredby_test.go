package binding

import (
	"reflect"
	"testing"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestRenderTargets(t *testing.T) {
	snap := func(name string, clusters ...string) workv1alpha1.BindingSnapshot {
		s := workv1alpha1.BindingSnapshot{Namespace: "ns", Name: name}
		for _, c := range clusters {
			s.Clusters = append(s.Clusters, workv1alpha1.TargetCluster{Name: c})
		}
		return s
	}
	tests := []struct {
		name     string
		spec     workv1alpha1.ResourceBindingSpec
		want     []workv1alpha1.TargetCluster
		required map[string]bool
	}{
		{name: "no requiredBy", spec: workv1alpha1.ResourceBindingSpec{Clusters: []workv1alpha1.TargetCluster{{Name: "a", Replicas: 2}}},
			want: []workv1alpha1.TargetCluster{{Name: "a", Replicas: 2}}, required: map[string]bool{"a": false}},
		{name: "dependency only: the union of the dependents' clusters",
			spec: workv1alpha1.ResourceBindingSpec{RequiredBy: []workv1alpha1.BindingSnapshot{snap("w1", "c", "a"), snap("w2", "b", "a")}},
			want: []workv1alpha1.TargetCluster{{Name: "a"}, {Name: "b"}, {Name: "c"}}, required: map[string]bool{"a": true, "b": true, "c": true, "d": false}},
		{name: "own placement and requiredBy: scheduled clusters keep their replicas",
			spec: workv1alpha1.ResourceBindingSpec{Clusters: []workv1alpha1.TargetCluster{{Name: "a", Replicas: 1}},
				RequiredBy: []workv1alpha1.BindingSnapshot{snap("w1", "a", "b")}},
			want: []workv1alpha1.TargetCluster{{Name: "a", Replicas: 1}, {Name: "b"}}, required: map[string]bool{"a": false, "b": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &workv1alpha1.ResourceBinding{Spec: tt.spec}
			if got := renderTargets(b); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("renderTargets = %+v, want %+v", got, tt.want)
			}
			for c, want := range tt.required {
				if got := required(b, c); got != want {
					t.Errorf("required(%s) = %v, want %v", c, got, want)
				}
			}
		})
	}
}
