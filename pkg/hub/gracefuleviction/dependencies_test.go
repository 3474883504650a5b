package gracefuleviction

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/dependencies"
)

func TestDependencyGate(t *testing.T) {
	// The workload failed over from m1 to m2 and is Healthy on m2.
	workload := func(propagateDeps, resolved bool) *workv1alpha1.ResourceBinding {
		b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web-deployment", Generation: 3},
			Spec: workv1alpha1.ResourceBindingSpec{PropagateDeps: propagateDeps, Clusters: []workv1alpha1.TargetCluster{{Name: "m2", Replicas: 3}},
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "m1", PurgeMode: policyv1alpha1.PurgeModeGracefully}}},
			Status: workv1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: 3,
				Conditions: []metav1.Condition{{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue}},
				AggregatedStatus: []workv1alpha1.AggregatedStatusItem{{ClusterName: "m2", Applied: true, ObservedGeneration: 3,
					Health: workv1alpha1.ResourceHealthy}}}}
		if resolved {
			b.Status.Conditions = append(b.Status.Conditions, dependencies.Condition(3, 1, nil))
		} else {
			b.Status.Conditions = append(b.Status.Conditions, dependencies.Condition(3, 1, []string{"ConfigMap settings"}))
		}
		return b
	}
	dep := func(clusters []string, applied ...string) *workv1alpha1.ResourceBinding {
		d := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "settings-configmap", Generation: 7}}
		snap := workv1alpha1.BindingSnapshot{Namespace: "a", Name: "web-deployment"}
		for _, c := range clusters {
			snap.Clusters = append(snap.Clusters, workv1alpha1.TargetCluster{Name: c})
		}
		d.Spec.RequiredBy = []workv1alpha1.BindingSnapshot{snap}
		for _, c := range applied {
			d.Status.AggregatedStatus = append(d.Status.AggregatedStatus, workv1alpha1.AggregatedStatusItem{ClusterName: c, Applied: true, ObservedGeneration: 7})
		}
		return d
	}
	stale := dep([]string{"m1", "m2"}, "m1", "m2")
	stale.Status.AggregatedStatus[1].ObservedGeneration = 6
	tests := []struct {
		name    string
		binding *workv1alpha1.ResourceBinding
		deps    []*workv1alpha1.ResourceBinding
		waiting []string
	}{
		{"no propagateDeps: not gated", workload(false, false), nil, nil},
		{"dependency applied on the new cluster", workload(true, true), []*workv1alpha1.ResourceBinding{dep([]string{"m1", "m2"}, "m1", "m2")}, nil},
		{"dependency not applied there yet", workload(true, true), []*workv1alpha1.ResourceBinding{dep([]string{"m1", "m2"}, "m1")}, []string{"m2"}},
		{"dependency's Work on the new cluster applied for an older generation", workload(true, true), []*workv1alpha1.ResourceBinding{stale}, []string{"m2"}},
		{"dependency's binding does not list the new cluster yet", workload(true, true), []*workv1alpha1.ResourceBinding{dep([]string{"m1"}, "m1", "m2")}, []string{"m2"}},
		{"a dependency is missing", workload(true, false), []*workv1alpha1.ResourceBinding{dep([]string{"m1", "m2"}, "m1", "m2")}, []string{"m2"}},
	}
	now := time.Now()
	for _, tt := range tests {
		tt.binding.Spec.GracefulEvictionTasks[0].CreationTimestamp = &metav1.Time{Time: now}
		t.Run(tt.name, func(t *testing.T) {
			gated, waiting := DependencyGate(tt.binding, tt.deps)
			if !reflect.DeepEqual(waiting, tt.waiting) {
				t.Fatalf("waiting = %v, want %v", waiting, tt.waiting)
			}
			task := &tt.binding.Spec.GracefulEvictionTasks[0]
			a := Assess(task, gated, false, time.Hour, now)
			if a.Done == (len(tt.waiting) > 0) {
				t.Errorf("Assess on the gated binding: done=%v (%s), want done=%v", a.Done, a.Why, len(tt.waiting) == 0)
			}
			if tt.binding.Status.AggregatedStatus[0].Health != workv1alpha1.ResourceHealthy {
				t.Error("the input binding was changed")
			}
			// The grace period still ends a gated task.
			if len(tt.waiting) > 0 {
				if a := Assess(task, gated, false, time.Hour, now.Add(2*time.Hour)); !a.Done {
					t.Errorf("after the grace period: %+v, want done", a)
				}
			}
		})
	}
}
