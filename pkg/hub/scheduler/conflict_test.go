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

package scheduler

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillafake "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
)

// A placement whose write loses a race with another write of the binding
// (on a failover, the status patches after the eviction) is decided again
// at once from the binding as stored: one sync places it, with one read
// of the apiserver in between, instead of a backoff and a wait for the
// cache. A second conflict goes back to the queue.
func TestPlacementConflictIsDecidedAgainFromTheStoredBinding(t *testing.T) {
	old := &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}}}
	placement := &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}}
	scheduledAt := metav1.NewTime(time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name      string
		conflicts int
		wantErr   bool
	}{
		{name: "one conflict", conflicts: 1},
		{name: "two conflicts", conflicts: 2, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			binding := &workv1alpha1.ResourceBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "nginx-deployment", Namespace: "default", Generation: 2,
					Annotations: map[string]string{AnnotationScheduledPlacement: placementJSON(old)}},
				Spec: workv1alpha1.ResourceBindingSpec{Placement: placement, Replicas: 2,
					Clusters: []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 2}, {Name: "member2", Replicas: 2}}},
				Status: workv1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: 1, LastScheduledTime: &scheduledAt,
					Conditions: []metav1.Condition{{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue, Reason: ReasonScheduled}}},
			}
			client := flotillafake.NewSimpleClientset(binding, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"}},
				&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member2"}})
			left := tc.conflicts
			client.PrependReactor("update", "resourcebindings", func(k8stesting.Action) (bool, runtime.Object, error) {
				if left == 0 {
					return false, nil, nil
				}
				left--
				return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "work.flotilla.io", Resource: "resourcebindings"}, binding.Name, nil)
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := startedController(t, ctx, client)
			err := c.sync(ctx, "default/"+binding.Name)
			if tc.wantErr != apierrors.IsConflict(err) || !tc.wantErr && err != nil {
				t.Fatalf("sync: %v, want a conflict: %v", err, tc.wantErr)
			}
			var verbs []string
			updates := 0
			for _, a := range client.Actions() {
				verbs = append(verbs, a.GetVerb()+" "+a.GetSubresource())
				if a.GetVerb() == "update" && a.GetSubresource() == "" {
					updates++
				}
			}
			if updates != 2 || len(verbs) < 2 || verbs[1] != "get " {
				t.Errorf("actions %v, want the placement written twice with the stored binding read in between", verbs)
			}
			got, err := client.WorkV1alpha1().ResourceBindings("default").Get(ctx, binding.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			placed := len(got.Spec.Clusters) == 1 && got.Spec.Clusters[0].Name == "member2"
			if placed == tc.wantErr {
				t.Errorf("placed on member2 only: %v, want %v (clusters %v)", placed, !tc.wantErr, got.Spec.Clusters)
			}
		})
	}
}
