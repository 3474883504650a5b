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

package clustersummary_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/clustersummary"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// A member whose agent reports an allocated 9e18 cpus (the pattern admits
// it, the range does not): the Cluster says ResourceSummaryInRange=False
// naming the value, with a Warning, and True once the agent reports a
// summary in range; the agent's own status writes (from its copy) keep
// the condition.
func TestOutOfRangeSummaryIsSaidOnTheCluster(t *testing.T) {
	env := testenv.Start(t)
	flotilla, err := flotillaclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := flotilla.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"},
		Spec: clusterv1alpha1.ClusterSpec{SyncMode: clusterv1alpha1.Pull}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// agentWrites is the agent's status write: its copy of the Cluster,
	// its own condition and summary set, the rest kept.
	agentWrites := func(allocated string) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue,
				Reason: clusterv1alpha1.ClusterReasonReady, Message: allocated})
			c.Status.ResourceSummary = &clusterv1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")},
				Allocated: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(allocated)}}
			_, err = flotilla.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{})
			return err == nil, nil // a conflict with the hub's write: again, on the newer copy
		}); err != nil {
			t.Fatal(err)
		}
	}
	inRange := func(want metav1.ConditionStatus, saying string) *metav1.Condition {
		t.Helper()
		var got *metav1.Condition
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
			c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got = meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionResourceSummaryInRange)
			return got != nil && got.Status == want && strings.Contains(got.Message, saying), nil
		}); err != nil {
			t.Fatalf("ResourceSummaryInRange = %+v, want %s saying %q: %v", got, want, saying, err)
		}
		return got
	}

	factory := flotillainformers.NewSharedInformerFactory(flotilla, 0)
	recorder := record.NewFakeRecorder(10)
	ctl := clustersummary.NewController(flotilla, factory.Cluster().V1alpha1().Clusters().Informer(), recorder)
	runCtx, cancel := context.WithCancel(ctx)
	factory.Start(runCtx.Done())
	done := make(chan struct{})
	go func() { defer close(done); ctl.Run(runCtx, 1) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })

	agentWrites("9e18")
	if c := inRange(metav1.ConditionFalse, `status.resourceSummary.allocated.cpu: "9e+18": out of range`); c.Reason != clusterv1alpha1.ClusterReasonInvalidQuantity {
		t.Errorf("condition %+v, want InvalidQuantity", c)
	}
	if e := <-recorder.Events; !strings.HasPrefix(e, "Warning InvalidQuantity") {
		t.Errorf("event %q, want a Warning", e)
	}
	agentWrites("1e18") // still out of range: the agent's write keeps the hub's condition
	inRange(metav1.ConditionFalse, `"1e+18"`)
	agentWrites("30")
	if c := inRange(metav1.ConditionTrue, "in range"); c.Reason != clusterv1alpha1.ClusterReasonQuantitiesInRange {
		t.Errorf("condition %+v, want QuantitiesInRange", c)
	}
}
