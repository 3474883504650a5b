package app_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// Issue 31 item 4 (Karmada e2e spread_by_region_test "multiple region
// deployment testing"): spreadByField cluster maxGroups 1 plus region
// minGroups 2 runs on one cluster in each of two regions, Scheduled=True
// (the old scheduler put it on one cluster of one region and said True).
// Then region 3..3, which two regions cannot meet: Scheduled=False naming
// the region constraint, and the workload stays where it runs.
func TestCombinedSpreadConstraints(t *testing.T) {
	t.Parallel()
	ctx, fc := startHub(t)
	createReadyClusters(t, ctx, fc, "member1", "member2", "member3")
	for name, region := range map[string]string{"member1": "r1", "member2": "r1", "member3": "r2"} {
		waitUntil(t, "region of "+name, func() (bool, error) {
			c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			c.Spec.Region = region
			_, err = fc.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
			return err == nil, nil
		})
	}
	ns := "default"
	spread := func(regions int32) []policyv1alpha1.SpreadConstraint {
		return []policyv1alpha1.SpreadConstraint{
			{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 1, MaxGroups: 1},
			{SpreadByField: policyv1alpha1.SpreadByFieldRegion, MinGroups: regions, MaxGroups: regions}}
	}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement: policyv1alpha1.Placement{SpreadConstraints: spread(2),
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}},
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
	waitReplicas(t, fc, ns, binding, map[string]int32{"member1": 3, "member3": 3})
	scheduled := func(status metav1.ConditionStatus, says string) {
		t.Helper()
		waitUntil(t, "Scheduled="+string(status), func() (bool, error) {
			rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			c := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionScheduled)
			return c != nil && c.Status == status && strings.Contains(c.Message, says) && c.ObservedGeneration == rb.Generation, nil
		})
	}
	scheduled(metav1.ConditionTrue, "member1")

	waitUntil(t, "policy asks for three regions", func() (bool, error) {
		p, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Get(ctx, "nginx", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		p.Spec.Placement.SpreadConstraints = spread(3)
		_, err = fc.PolicyV1alpha1().PropagationPolicies(ns).Update(ctx, p, metav1.UpdateOptions{})
		return err == nil, nil
	})
	scheduled(metav1.ConditionFalse, "the spread constraint by region needs at least 3 groups and 2 are available")
	rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rb.Spec.Clusters) != 2 || len(rb.Spec.GracefulEvictionTasks) != 0 {
		t.Fatalf("an unsatisfiable spread moved the workload: clusters %v, tasks %v", rb.Spec.Clusters, rb.Spec.GracefulEvictionTasks)
	}
}
