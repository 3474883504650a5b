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

package taintmanager_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
	"github.com/flotilla-io/flotilla/pkg/hub/taintmanager"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// After a hub start or a leadership change, the taint manager evicts
// nothing before the fleet guard has judged the fleet once, even from a
// cluster whose NoExecute taint is long due (issue 17 item 6). The taint
// manager runs alone against a real apiserver: the guard is evaluated by
// hand once the test has seen the taint manager hold off.
func TestNothingIsEvictedBeforeTheGuardsFirstEvaluation(t *testing.T) {
	env := testenv.Start(t)
	fc, err := flotillaclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A fleet of three, member1 silent and tainted an hour ago.
	var clusters []*clusterv1alpha1.Cluster
	for _, name := range []string{"member1", "member2", "member3"} {
		c := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if name == "member1" {
			c.Spec.Taints = []corev1.Taint{{Key: clusterv1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute,
				TimeAdded: &metav1.Time{Time: time.Now().Add(-time.Hour)}}}
		}
		created, err := fc.ClusterV1alpha1().Clusters().Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		status := metav1.ConditionTrue
		if name == "member1" {
			status = metav1.ConditionUnknown
		}
		created.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: status,
			Reason: "Test", LastTransitionTime: metav1.Now()}}
		if created, err = fc.ClusterV1alpha1().Clusters().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		clusters = append(clusters, created)
	}
	const ns = "default"
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "nginx-deployment", Namespace: ns},
		Spec: workv1alpha1.ResourceBindingSpec{Replicas: 2,
			Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "nginx"},
			Clusters: []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 1}}}}
	if _, err := fc.WorkV1alpha1().ResourceBindings(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A fresh guard, as after a restart: not evaluated yet.
	guard := clustertaint.NewFleetGuard(0.55, 0.5, 0.01)
	factory := flotillainformers.NewSharedInformerFactory(fc, 0)
	tm := taintmanager.NewController(fc, factory, taintmanager.Options{Guard: guard})
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); tm.Run(ctx, 1) }()
	defer func() { cancel(); wg.Wait(); factory.Shutdown() }()

	onMember1 := func() bool {
		rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, b.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rb.Spec.Clusters {
			if c.Name == "member1" {
				return true
			}
		}
		return false
	}
	// The taint manager has synced and looked at the binding well before
	// this ends; it must not have acted.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if !onMember1() {
			t.Fatal("evicted from member1 before the fleet guard's first evaluation")
		}
	}

	// The guard judges the fleet (1 of 3 down: Normal): the eviction goes.
	guard.Update(clusters)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return !onMember1(), nil
	}); err != nil {
		t.Fatalf("not evicted from member1 after the guard's first evaluation: %v", err)
	}
}
