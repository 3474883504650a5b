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

package taintmanager

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
)

// An eviction whose write loses a race with another write of the binding
// (on a failover, the binding controller's status patch for the same
// Ready change) is decided again at once from the binding as stored: one
// sync evicts, with one read of the apiserver in between, instead of a
// backoff and a wait for the cache. A second conflict goes back to the
// queue.
func TestEvictionConflictIsDecidedAgainFromTheStoredBinding(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	added := metav1.NewTime(now.Add(-time.Minute))
	cluster := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"},
		Spec: clusterv1alpha1.ClusterSpec{Taints: []corev1.Taint{{Key: clusterv1alpha1.TaintClusterUnreachable,
			Effect: corev1.TaintEffectNoExecute, TimeAdded: &added}}}}
	for _, tc := range []struct {
		name      string
		conflicts int
		wantErr   bool
		updates   int
	}{
		{name: "one conflict", conflicts: 1, updates: 2},
		{name: "two conflicts", conflicts: 2, wantErr: true, updates: 2},
		{name: "none", conflicts: 0, updates: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			binding := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default", Generation: 1, ResourceVersion: "1"},
				Spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Clusters: []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 1}}}}
			client := fake.NewSimpleClientset(binding, cluster)
			left := tc.conflicts
			client.PrependReactor("update", "resourcebindings", func(k8stesting.Action) (bool, runtime.Object, error) {
				if left == 0 {
					return false, nil, nil
				}
				left--
				return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "work.flotilla.io", Resource: "resourcebindings"}, "app",
					nil)
			})
			factory := flotillainformers.NewSharedInformerFactory(client, 0)
			c := NewController(client, factory, Options{Clock: clocktesting.NewFakeClock(now)})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			factory.Start(ctx.Done())
			if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
				t.Fatal("caches did not sync")
			}
			client.ClearActions()
			err := c.sync(ctx, "default/app")
			if tc.wantErr != apierrors.IsConflict(err) || !tc.wantErr && err != nil {
				t.Fatalf("sync: %v, want a conflict: %v", err, tc.wantErr)
			}
			var verbs []string
			updates := 0
			for _, a := range client.Actions() {
				verbs = append(verbs, a.GetVerb())
				if a.GetVerb() == "update" {
					updates++
				}
			}
			if updates != tc.updates {
				t.Errorf("actions %v: %d updates, want %d", verbs, updates, tc.updates)
			}
			if tc.conflicts > 0 && (len(verbs) < 2 || verbs[1] != "get") {
				t.Errorf("actions %v, want the stored binding read after the conflict", verbs)
			}
			got, err := client.WorkV1alpha1().ResourceBindings("default").Get(ctx, "app", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			evicted := len(got.Spec.GracefulEvictionTasks) == 1 && got.Spec.GracefulEvictionTasks[0].FromCluster == "member1"
			if evicted == tc.wantErr {
				t.Errorf("evicted: %v, want %v (tasks %+v)", evicted, !tc.wantErr, got.Spec.GracefulEvictionTasks)
			}
		})
	}
}
