package conformance

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// Karmada's override cases come twice: with the deprecated top-level
// spec.targetCluster and spec.overriders, and with spec.overrideRules.
// Flotilla has overrideRules only (docs/comparison.md); each case here is
// the overrideRules form, which is also what the deprecated form means.

// overrideCase propagates obj onto two members with an OverridePolicy of
// overriders for both, created before the object when before is true (and
// after it is present otherwise), and waits until ok holds on both.
func overrideCase(t *testing.T, obj map[string]any, overriders policyv1alpha1.Overriders, before bool, ok func(*unstructured.Unstructured) bool) {
	c := newCase(t)
	members := c.simClusters(2)
	u := &unstructured.Unstructured{Object: obj}
	sel := selector(u.GetAPIVersion(), u.GetKind(), u.GetName())
	c.policy(u.GetName(), policyv1alpha1.PropagationSpec{ResourceSelectors: sel,
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members...)}})
	op := &policyv1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: c.ns},
		Spec: policyv1alpha1.OverrideSpec{ResourceSelectors: sel,
			OverrideRules: []policyv1alpha1.RuleWithCluster{{TargetCluster: onClusters(members...), Overriders: overriders}}}}
	createOP := func() {
		if _, err := c.fc.PolicyV1alpha1().OverridePolicies(c.ns).Create(c.ctx, op, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if before {
		createOP()
	}
	binding := c.template(obj)
	if !before {
		c.waitPresent(binding, members, nil)
		createOP()
	}
	c.waitPresent(binding, members, ok)
}

// Karmada: test/e2e/suites/base/overridepolicy_test.go,
// Context("[LabelsOverrider] apply labels overrider testing"),
// It("deployment labelsOverride testing").
func TestKarmada_OverridePolicy_LabelsOverrider_Deployment(t *testing.T) {
	d := deployment("nginx", 3)
	d["metadata"].(map[string]any)["labels"] = map[string]any{"foo": "foo", "bar": "bar"}
	overrideCase(t, d, policyv1alpha1.Overriders{LabelsOverrider: []policyv1alpha1.LabelAnnotationOverrider{
		{Operator: policyv1alpha1.OverriderOpReplace, Value: map[string]string{"foo": "exist", "non-exist": "non-exist"}},
		{Operator: policyv1alpha1.OverriderOpAdd, Value: map[string]string{"app": "nginx"}},
		{Operator: policyv1alpha1.OverriderOpRemove, Value: map[string]string{"bar": "bar"}},
	}}, true, func(u *unstructured.Unstructured) bool {
		l := u.GetLabels()
		_, bar := l["bar"]
		_, nonExist := l["non-exist"]
		return !bar && !nonExist && l["foo"] == "exist" && l["app"] == "nginx"
	})
}

// Karmada: overridepolicy_test.go, Context("[AnnotationsOverrider] apply
// annotations overrider testing"), It("deployment annotationsOverrider
// testing").
func TestKarmada_OverridePolicy_AnnotationsOverrider_Deployment(t *testing.T) {
	d := deployment("nginx", 3)
	d["metadata"].(map[string]any)["annotations"] = map[string]any{"foo": "foo", "bar": "bar"}
	overrideCase(t, d, policyv1alpha1.Overriders{AnnotationsOverrider: []policyv1alpha1.LabelAnnotationOverrider{
		{Operator: policyv1alpha1.OverriderOpReplace, Value: map[string]string{"foo": "exist", "non-exist": "non-exist"}},
		{Operator: policyv1alpha1.OverriderOpAdd, Value: map[string]string{"app": "nginx"}},
		{Operator: policyv1alpha1.OverriderOpRemove, Value: map[string]string{"bar": "bar"}},
	}}, true, func(u *unstructured.Unstructured) bool {
		a := u.GetAnnotations()
		_, bar := a["bar"]
		_, nonExist := a["non-exist"]
		return !bar && !nonExist && a["foo"] == "exist" && a["app"] == "nginx"
	})
}

// allImages replaces registry, repository and tag of every image.
var allImages = policyv1alpha1.Overriders{ImageOverrider: []policyv1alpha1.ImageOverrider{
	{Component: policyv1alpha1.Registry, Operator: policyv1alpha1.OverriderOpReplace, Value: "fictional.registry.us"},
	{Component: policyv1alpha1.Repository, Operator: policyv1alpha1.OverriderOpReplace, Value: "busybox"},
	{Component: policyv1alpha1.Tag, Operator: policyv1alpha1.OverriderOpReplace, Value: "1.0"},
}}

func everyImageIs(image string) func(*unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool {
		imgs := imagesOf(u)
		for _, i := range imgs {
			if i != image {
				return false
			}
		}
		return len(imgs) > 0
	}
}

// twoContainers gives a Deployment a second container.
func twoContainers(d map[string]any) map[string]any {
	u := &unstructured.Unstructured{Object: d}
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	containers = append(containers, map[string]any{"name": "sidecar", "image": "busybox:1.36"})
	_ = unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")
	return u.Object
}

// Karmada: overridepolicy_test.go, Context("Deployment override all images
// in container list"), It("deployment imageOverride testing"); and its
// [OverrideRules] twin.
func TestKarmada_OverridePolicy_ImageOverrider_DeploymentAllImages(t *testing.T) {
	overrideCase(t, twoContainers(deployment("nginx", 3)), allImages, true, everyImageIs("fictional.registry.us/busybox:1.0"))
}

// Karmada: overridepolicy_test.go, Context("Pod override all images in
// container list"), It("pod imageOverride testing"); and its
// [OverrideRules] twin.
func TestKarmada_OverridePolicy_ImageOverrider_PodAllImages(t *testing.T) {
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "nginx-pod"},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "nginx", "image": "nginx:1.19.0"},
			map[string]any{"name": "sidecar", "image": "busybox:1.36"}}}}
	overrideCase(t, pod, allImages, true, everyImageIs("fictional.registry.us/busybox:1.0"))
}

// firstImageRegistry replaces the registry of the image at one path.
var firstImageRegistry = policyv1alpha1.Overriders{ImageOverrider: []policyv1alpha1.ImageOverrider{{
	Predicate: &policyv1alpha1.ImagePredicate{Path: "/spec/template/spec/containers/0/image"},
	Component: policyv1alpha1.Registry, Operator: policyv1alpha1.OverriderOpReplace, Value: "fictional.registry.us"}}}

// Karmada: overridepolicy_test.go, Context("Deployment override specific
// images in container list"), It("deployment imageOverride testing"); and
// its [OverrideRules] twin.
func TestKarmada_OverridePolicy_ImageOverrider_DeploymentSpecificImage(t *testing.T) {
	overrideCase(t, twoContainers(deployment("nginx", 3)), firstImageRegistry, true, func(u *unstructured.Unstructured) bool {
		imgs := imagesOf(u)
		return len(imgs) == 2 && imgs[0] == "fictional.registry.us/nginx:1.19.0" && imgs[1] == "busybox:1.36"
	})
}

// Karmada: overridepolicy_test.go, Context("Deployment override testing
// when creating overridePolicy after develop and propagationPolicy have
// been created"), It("deployment imageOverride testing").
func TestKarmada_OverridePolicy_CreatedAfterPropagation(t *testing.T) {
	overrideCase(t, deployment("nginx", 3), firstImageRegistry, false, func(u *unstructured.Unstructured) bool {
		return imagesOf(u)[0] == "fictional.registry.us/nginx:1.19.0"
	})
}

// Karmada: test/e2e/suites/base/clusteroverridepolicy_test.go,
// Describe("The ClusterOverridePolicy with nil resourceSelectors testing"),
// Context("Deployment override testing"), It("deployment imageOverride
// testing"). The suite's clusters are shared, so the policy's rule targets
// this case's members only; nil resourceSelectors as in Karmada.
func TestKarmada_ClusterOverridePolicy_NilResourceSelectors_Deployment(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members...)}})
	binding := c.template(deployment("nginx", 3))
	c.waitPresent(binding, members, nil)
	cop := &policyv1alpha1.ClusterOverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: "cop-" + c.id},
		Spec: policyv1alpha1.OverrideSpec{OverrideRules: []policyv1alpha1.RuleWithCluster{{TargetCluster: onClusters(members...),
			Overriders: policyv1alpha1.Overriders{ImageOverrider: []policyv1alpha1.ImageOverrider{
				{Component: policyv1alpha1.Registry, Operator: policyv1alpha1.OverriderOpReplace, Value: "fictional.registry.us"}}}}}}}
	if _, err := c.fc.PolicyV1alpha1().ClusterOverridePolicies().Create(c.ctx, cop, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.fc.PolicyV1alpha1().ClusterOverridePolicies().Delete(context.Background(), cop.Name, deleteNow)
	})
	c.waitPresent(binding, members, func(u *unstructured.Unstructured) bool { return imagesOf(u)[0] == "fictional.registry.us/nginx:1.19.0" })
}

// Karmada: clusteroverridepolicy_test.go, Context("Namespace propagation
// testing"), It("Namespace labelOverride testing"): a plaintext overrider
// adds a label to a propagated Namespace.
func TestKarmada_ClusterOverridePolicy_Namespace_PlaintextLabel(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	name := "cop-test-ns-" + c.id
	binding := c.clusterTemplate(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}})
	sel := []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Namespace", Name: name}}
	c.clusterPolicy("cpp-"+c.id, policyv1alpha1.PropagationSpec{ResourceSelectors: sel,
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members...)}})
	cop := &policyv1alpha1.ClusterOverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: "cop-" + c.id},
		Spec: policyv1alpha1.OverrideSpec{ResourceSelectors: sel, OverrideRules: []policyv1alpha1.RuleWithCluster{{TargetCluster: onClusters(members...),
			Overriders: policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{{
				Path: "/metadata/labels", Operator: policyv1alpha1.OverriderOpAdd, Value: apiextensionsv1.JSON{Raw: []byte(`{"cop-test":"yes"}`)}}}}}}}}
	if _, err := c.fc.PolicyV1alpha1().ClusterOverridePolicies().Create(c.ctx, cop, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.fc.PolicyV1alpha1().ClusterOverridePolicies().Delete(context.Background(), cop.Name, deleteNow)
	})
	c.waitClusterPresent(binding, members, func(u *unstructured.Unstructured) bool { return u.GetLabels()["cop-test"] == "yes" })
}
