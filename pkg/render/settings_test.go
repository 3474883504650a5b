package render

import (
	"fmt"
	"reflect"
	"testing"

	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestTargets(t *testing.T) {
	snap := func(name string, clusters ...string) workv1alpha1.BindingSnapshot {
		s := workv1alpha1.BindingSnapshot{Namespace: "ns", Name: name}
		for _, c := range clusters {
			s.Clusters = append(s.Clusters, workv1alpha1.TargetCluster{Name: c})
		}
		return s
	}
	tests := []struct {
		name string
		spec workv1alpha1.ResourceBindingSpec
		want []workv1alpha1.TargetCluster
	}{
		{name: "no requiredBy", spec: workv1alpha1.ResourceBindingSpec{Clusters: []workv1alpha1.TargetCluster{{Name: "a", Replicas: 2}}},
			want: []workv1alpha1.TargetCluster{{Name: "a", Replicas: 2}}},
		{name: "dependency only: the union of the dependents' clusters",
			spec: workv1alpha1.ResourceBindingSpec{RequiredBy: []workv1alpha1.BindingSnapshot{snap("w1", "c", "a"), snap("w2", "b", "a")}},
			want: []workv1alpha1.TargetCluster{{Name: "a"}, {Name: "b"}, {Name: "c"}}},
		{name: "own placement and requiredBy: scheduled clusters keep their replicas",
			spec: workv1alpha1.ResourceBindingSpec{Clusters: []workv1alpha1.TargetCluster{{Name: "a", Replicas: 1}},
				RequiredBy: []workv1alpha1.BindingSnapshot{snap("w1", "a", "b")}},
			want: []workv1alpha1.TargetCluster{{Name: "a", Replicas: 1}, {Name: "b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &workv1alpha1.ResourceBinding{Spec: tt.spec}
			if got := Targets(b); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Targets = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestEffectiveSettings(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	req := func(name string, s workv1alpha1.BindingSnapshot, clusters ...string) workv1alpha1.BindingSnapshot {
		s.Namespace, s.Name = "ns", name
		for _, c := range clusters {
			s.Clusters = append(s.Clusters, workv1alpha1.TargetCluster{Name: c})
		}
		return s
	}
	defaults := WorkSettings{ApplyStrategy: policyv1alpha1.ApplyStrategyServerSideApply, ConflictResolution: policyv1alpha1.ConflictAbort}
	placement := &policyv1alpha1.Placement{}
	tests := []struct {
		name    string
		spec    workv1alpha1.ResourceBindingSpec
		cluster string
		want    WorkSettings
	}{
		{name: "a plain binding: its own settings", cluster: "a",
			spec: workv1alpha1.ResourceBindingSpec{Placement: placement, Clusters: []workv1alpha1.TargetCluster{{Name: "a"}},
				PreserveResourcesOnDeletion: no, ApplyStrategy: policyv1alpha1.ApplyStrategyCreateOnly, ConflictResolution: policyv1alpha1.ConflictOverwrite,
				Suspension: &policyv1alpha1.Suspension{DispatchingOnClusters: &policyv1alpha1.SuspendClusters{ClusterNames: []string{"a"}}}},
			want: WorkSettings{PreserveResourcesOnDeletion: no, SuspendDispatching: yes, ApplyStrategy: policyv1alpha1.ApplyStrategyCreateOnly, ConflictResolution: policyv1alpha1.ConflictOverwrite}},
		{name: "a plain binding without settings: the CRD defaults", cluster: "a",
			spec: workv1alpha1.ResourceBindingSpec{Placement: placement, Clusters: []workv1alpha1.TargetCluster{{Name: "a"}}}, want: defaults},
		{name: "dependency only: the one dependent's policy, Overwrite included", cluster: "a",
			spec: workv1alpha1.ResourceBindingSpec{RequiredBy: []workv1alpha1.BindingSnapshot{req("w", workv1alpha1.BindingSnapshot{
				PreserveResourcesOnDeletion: yes, ApplyStrategy: policyv1alpha1.ApplyStrategyReadOnly, ConflictResolution: policyv1alpha1.ConflictOverwrite,
				Suspension: &policyv1alpha1.Suspension{Dispatching: yes}}, "a")}},
			want: WorkSettings{PreserveResourcesOnDeletion: yes, SuspendDispatching: yes, ApplyStrategy: policyv1alpha1.ApplyStrategyReadOnly, ConflictResolution: policyv1alpha1.ConflictOverwrite}},
		{name: "dependency only: a dependent on another cluster does not count", cluster: "b",
			spec: workv1alpha1.ResourceBindingSpec{RequiredBy: []workv1alpha1.BindingSnapshot{
				req("keeper", workv1alpha1.BindingSnapshot{PreserveResourcesOnDeletion: yes, ApplyStrategy: policyv1alpha1.ApplyStrategyReadOnly,
					Suspension: &policyv1alpha1.Suspension{Dispatching: yes}}, "a"),
				req("plain", workv1alpha1.BindingSnapshot{ConflictResolution: policyv1alpha1.ConflictOverwrite}, "a", "b")}},
			want: WorkSettings{ApplyStrategy: policyv1alpha1.ApplyStrategyServerSideApply, ConflictResolution: policyv1alpha1.ConflictOverwrite}},
		{name: "two dependents on one cluster: the safest of each", cluster: "a",
			spec: workv1alpha1.ResourceBindingSpec{RequiredBy: []workv1alpha1.BindingSnapshot{
				req("keeper", workv1alpha1.BindingSnapshot{PreserveResourcesOnDeletion: yes, ApplyStrategy: policyv1alpha1.ApplyStrategyCreateOnly,
					Suspension: &policyv1alpha1.Suspension{DispatchingOnClusters: &policyv1alpha1.SuspendClusters{ClusterNames: []string{"a"}}}}, "a"),
				req("plain", workv1alpha1.BindingSnapshot{PreserveResourcesOnDeletion: no, ConflictResolution: policyv1alpha1.ConflictOverwrite}, "a", "b")}},
			want: WorkSettings{PreserveResourcesOnDeletion: yes, SuspendDispatching: yes, ApplyStrategy: policyv1alpha1.ApplyStrategyCreateOnly, ConflictResolution: policyv1alpha1.ConflictAbort}},
		{name: "the object's own policy counts on every cluster, and loses to a safer dependent", cluster: "b",
			spec: workv1alpha1.ResourceBindingSpec{Placement: placement, Clusters: []workv1alpha1.TargetCluster{{Name: "a"}},
				ApplyStrategy: policyv1alpha1.ApplyStrategyCreateOnly, ConflictResolution: policyv1alpha1.ConflictOverwrite, PreserveResourcesOnDeletion: no,
				RequiredBy: []workv1alpha1.BindingSnapshot{req("w", workv1alpha1.BindingSnapshot{PreserveResourcesOnDeletion: yes, ConflictResolution: policyv1alpha1.ConflictOverwrite}, "b")}},
			want: WorkSettings{PreserveResourcesOnDeletion: yes, ApplyStrategy: policyv1alpha1.ApplyStrategyCreateOnly, ConflictResolution: policyv1alpha1.ConflictOverwrite}},
		{name: "the object's own ReadOnly wins over a dependent that writes", cluster: "a",
			spec: workv1alpha1.ResourceBindingSpec{Placement: placement, Clusters: []workv1alpha1.TargetCluster{{Name: "a"}}, ApplyStrategy: policyv1alpha1.ApplyStrategyReadOnly,
				RequiredBy: []workv1alpha1.BindingSnapshot{req("w", workv1alpha1.BindingSnapshot{ApplyStrategy: policyv1alpha1.ApplyStrategyServerSideApply}, "a")}},
			want: WorkSettings{ApplyStrategy: policyv1alpha1.ApplyStrategyReadOnly, ConflictResolution: policyv1alpha1.ConflictAbort}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EffectiveSettings(&workv1alpha1.ResourceBinding{Spec: tt.spec}, tt.cluster)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("EffectiveSettings = %s, want %s", show(got), show(tt.want))
			}
		})
	}
}

func show(s WorkSettings) string {
	return fmt.Sprintf("{preserve %v suspended %v apply %s conflict %s}", ptr.Deref(s.PreserveResourcesOnDeletion, false) && s.PreserveResourcesOnDeletion != nil,
		s.SuspendDispatching != nil && *s.SuspendDispatching, s.ApplyStrategy, s.ConflictResolution)
}
