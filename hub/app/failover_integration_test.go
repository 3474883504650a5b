package app_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Cluster failover against a real apiserver with the whole hub: a NoExecute
// taint the placement does not tolerate evicts the seed's nginx from
// member1 into a graceful eviction task; the scheduler gives member2 all 3;
// member1's Work stays while member2's new copy has not reported, even when
// member2's old 2/2 status reads Healthy; once member2 reports 3/3 for the
// new Work the task ends and member1's Work is deleted.
func TestTaintEvictionIsGraceful(t *testing.T) {
	t.Parallel()
	ctx, fc := startHub(t)

	createReadyClusters(t, ctx, fc, "member1", "member2")
	ns := "default"
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
					WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
						{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}, Weight: 1},
						{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}, Weight: 2},
					}},
				},
			},
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(nginxManifest)}}}}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const binding = "nginx-deployment"
	waitReplicas(t, fc, ns, binding, map[string]int32{"member1": 1, "member2": 2})
	reportApplied(t, fc, waitWork(t, fc, "member1", ns, binding, func(o *unstructured.Unstructured) bool { return replicasOf(o) == 1 }), 1)
	reportApplied(t, fc, waitWork(t, fc, "member2", ns, binding, func(o *unstructured.Unstructured) bool { return replicasOf(o) == 2 }), 2)

	// member1 gets a NoExecute taint nothing tolerates.
	waitUntil(t, "member1 tainted", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c.Spec.Taints = append(c.Spec.Taints, corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: time.Now()}})
		_, err = fc.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
		return err == nil, nil
	})
	waitReplicas(t, fc, ns, binding, map[string]int32{"member2": 3})
	rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rb.Spec.GracefulEvictionTasks) != 1 || rb.Spec.GracefulEvictionTasks[0].FromCluster != "member1" ||
		rb.Spec.GracefulEvictionTasks[0].Reason != workv1alpha1.EvictionReasonTaintUntolerated ||
		len(rb.Spec.EvictionHistory) != 1 {
		t.Fatalf("after the eviction: tasks %+v, history %+v", rb.Spec.GracefulEvictionTasks, rb.Spec.EvictionHistory)
	}
	// member2's Work now asks for 3; its status still says 2/2 Healthy for
	// the old Work. That must not end the task: member1's Work stays.
	work2 := waitWork(t, fc, "member2", ns, binding, func(o *unstructured.Unstructured) bool { return replicasOf(o) == 3 })
	for range 20 {
		if _, err := fc.WorkV1alpha1().Works("flotilla-es-member1").Get(ctx, workobjects.WorkName(ns, binding), metav1.GetOptions{}); err != nil {
			t.Fatalf("member1's Work went before the replacement reported: %v", err)
		}
		got, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.GracefulEvictionTasks) != 1 {
			t.Fatalf("the task ended on stale status: %+v", got.Status.AggregatedStatus)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// member2 reports 3/3 for the new Work: the task ends, member1's Work goes.
	reportApplied(t, fc, work2, 3)
	waitUntil(t, "task ended and member1's Work deleted", func() (bool, error) {
		got, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
		if err != nil || len(got.Spec.GracefulEvictionTasks) != 0 {
			return false, err
		}
		w, err := fc.WorkV1alpha1().Works("flotilla-es-member1").Get(ctx, workobjects.WorkName(ns, binding), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if w.DeletionTimestamp != nil { // play member1's agent
			w.Finalizers = nil
			_, _ = fc.WorkV1alpha1().Works(w.Namespace).Update(ctx, w, metav1.UpdateOptions{})
		}
		return false, nil
	})
}
