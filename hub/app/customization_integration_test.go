package app_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/interpretercustomization"
)

// widgetManifest is a custom workload the hub has no built-in knowledge
// of: its replicas are spec.size, its pod template spec.podTemplate.
const widgetManifest = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"web","namespace":"default"},
  "spec":{"size":3,"podTemplate":{"spec":{"containers":[{"name":"c","image":"nginx","resources":{"requests":{"cpu":"250m"}}}]}}}}`

// A Divided custom workload: the hub reads its replicas and their
// requirements through the customization's replicaResource, the scheduler
// divides them, and each cluster's Work carries its share at the
// customization's replicaRevision.replicasPath. The customization says
// Compiled=True; a broken one says False with the field and is not used.
func TestDividedCustomWorkload(t *testing.T) {
	t.Parallel()
	ctx, fc := sfStartHub(t, 0, "member1", "member2")
	rics := fc.ConfigV1alpha1().ResourceInterpreterCustomizations()
	if _, err := rics.Create(ctx, &configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "widgets"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target: configv1alpha1.CustomizationTarget{APIVersion: "example.com/v1", Kind: "Widget"},
			Customizations: configv1alpha1.CustomizationRules{
				ReplicaResource: &configv1alpha1.ReplicaResourceRequirement{Replicas: "object.spec.size", PodTemplate: "object.spec.podTemplate"},
				ReplicaRevision: &configv1alpha1.ReplicaRevision{ReplicasPath: "/spec/size"},
			}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A broken customization of another kind: Compiled=False naming the
	// expression.
	if _, err := rics.Create(ctx, &configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "broken"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target: configv1alpha1.CustomizationTarget{APIVersion: "example.com/v1", Kind: "Gadget"},
			Customizations: configv1alpha1.CustomizationRules{
				HealthInterpretation: &configv1alpha1.HealthInterpretation{Expression: "object.status.("},
			}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "widgets", Namespace: "default"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "example.com/v1", Kind: "Widget", Name: "web"}},
			Placement:         gsPlacement(),
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies("default").Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates("default").Create(ctx, rtOf("default", "web", widgetManifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, fc, "default", "web-widget", map[string]int32{"member1": 1, "member2": 2})
	rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, "web-widget", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rb.Spec.Replicas != 3 || rb.Spec.ReplicaRequirements == nil || rb.Spec.ReplicaRequirements.ResourceRequest.Cpu().MilliValue() != 250 {
		t.Fatalf("binding replicas %d, requirements %+v; want 3 of 250m cpu", rb.Spec.Replicas, rb.Spec.ReplicaRequirements)
	}
	size := func(o *unstructured.Unstructured) int64 {
		n, _, _ := unstructured.NestedInt64(o.Object, "spec", "size")
		return n
	}
	waitWork(t, fc, "member1", "default", "web-widget", func(o *unstructured.Unstructured) bool { return size(o) == 1 })
	waitWork(t, fc, "member2", "default", "web-widget", func(o *unstructured.Unstructured) bool { return size(o) == 2 })

	for name, want := range map[string]metav1.ConditionStatus{"widgets": metav1.ConditionTrue, "broken": metav1.ConditionFalse} {
		waitUntil(t, "Compiled on "+name, func() (bool, error) {
			ric, err := rics.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range ric.Status.Conditions {
				if c.Type == configv1alpha1.ConditionCompiled && c.Status == want {
					if want == metav1.ConditionFalse && (c.Reason != interpretercustomization.ReasonInvalid ||
						!strings.Contains(c.Message, "spec.customizations.healthInterpretation.expression")) {
						t.Fatalf("Compiled=False without the field: %+v", c)
					}
					return true, nil
				}
			}
			return false, nil
		})
	}

	// The customization changes: the detector reads the replicas anew
	// without the template changing.
	ric, err := rics.Get(ctx, "widgets", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ric.Spec.Customizations.ReplicaResource.Replicas = "object.spec.size * 2"
	if _, err := rics.Update(ctx, ric, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, fc, "default", "web-widget", map[string]int32{"member1": 2, "member2": 4})

	// The revision path changes: the Works are rendered anew with the
	// share at the new path (the template and the binding unchanged).
	ric, err = rics.Get(ctx, "widgets", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ric.Spec.Customizations.ReplicaRevision.ReplicasPath = "/spec/count"
	if _, err := rics.Update(ctx, ric, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	count := func(o *unstructured.Unstructured) int64 {
		n, _, _ := unstructured.NestedInt64(o.Object, "spec", "count")
		return n
	}
	waitWork(t, fc, "member2", "default", "web-widget", func(o *unstructured.Unstructured) bool { return count(o) == 4 && size(o) == 3 })
}
