package conformance

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// clusterScopedCase propagates a cluster-scoped object with a
// ClusterPropagationPolicy onto two members and waits for it there.
func clusterScopedCase(t *testing.T, obj map[string]any) {
	c := newCase(t)
	members := c.simClusters(2)
	u := &unstructured.Unstructured{Object: obj}
	c.clusterPolicy("cpp-"+c.id, policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName()}},
		Placement:         policyv1alpha1.Placement{ClusterAffinity: onClusters(members...)}})
	binding := c.clusterTemplate(obj)
	c.waitClusterPresent(binding, members, nil)
}

// Karmada: test/e2e/suites/base/clusterpropagationpolicy_test.go,
// Describe("[BasicCase] ClusterPropagationPolicy testing"),
// Context("ClusterRole propagation testing"), It("clusterRole propagation
// testing").
func TestKarmada_ClusterPropagationPolicy_ClusterRole_Propagation(t *testing.T) {
	clusterScopedCase(t, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": "cpp-clusterrole"},
		"rules":    []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"get"}}}})
}

// Karmada: clusterpropagationpolicy_test.go, Context("ClusterRoleBinding
// propagation testing"), It("clusterRoleBinding propagation testing").
func TestKarmada_ClusterPropagationPolicy_ClusterRoleBinding_Propagation(t *testing.T) {
	clusterScopedCase(t, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": "cpp-clusterrolebinding"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cpp-clusterrole"},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "default", "namespace": "default"}}})
}

// Karmada: clusterpropagationpolicy_test.go, Context("CustomResourceDefinition
// propagation testing"), It("crd propagation testing").
func TestKarmada_ClusterPropagationPolicy_CRD_Propagation(t *testing.T) {
	clusterScopedCase(t, map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "foos.example.karmada.io"},
		"spec": map[string]any{"group": "example.karmada.io", "scope": "Namespaced",
			"names": map[string]any{"plural": "foos", "singular": "foo", "kind": "Foo", "listKind": "FooList"},
			"versions": []any{map[string]any{"name": "v1alpha1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}})
}

// Karmada: clusterpropagationpolicy_test.go, Context("Deployment propagation
// testing"), It("deployment propagation testing"): a namespaced object
// selected by a ClusterPropagationPolicy.
func TestKarmada_ClusterPropagationPolicy_Deployment_Propagation(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	c.clusterPolicy("cpp-"+c.id, policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: "nginx"}},
		Placement:         policyv1alpha1.Placement{ClusterAffinity: onClusters(members...)}})
	binding := c.template(deployment("nginx", 3))
	c.waitPresent(binding, members, nil)
	c.updateTemplate("nginx", setReplicas(4))
	c.waitPresent(binding, members, hasReplicas(4))
}

// updateClusterPolicy changes a ClusterPropagationPolicy's spec.
func (c *tc) updateClusterPolicy(name string, change func(*policyv1alpha1.PropagationSpec)) {
	c.t.Helper()
	c.eventually("cluster policy "+name+" updated", func() (bool, error) {
		p, err := c.fc.PolicyV1alpha1().ClusterPropagationPolicies().Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		change(&p.Spec)
		_, err = c.fc.PolicyV1alpha1().ClusterPropagationPolicies().Update(c.ctx, p, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// Karmada: clusterpropagationpolicy_test.go, Describe("[AdvancedCase]
// ClusterPropagationPolicy testing"), Context("Edit ClusterPropagationPolicy
// ResourceSelectors"), It("add resourceSelectors item") (the ClusterRole
// variant).
func TestKarmada_ClusterPropagationPolicy_EditResourceSelectors_Add(t *testing.T) {
	c := newCase(t)
	member := c.simClusters(1)[0]
	role := func(name string) map[string]any {
		return map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": name}, "rules": []any{}}
	}
	sel := func(name string) policyv1alpha1.ResourceSelector {
		return policyv1alpha1.ResourceSelector{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: name}
	}
	r1, r2 := "role01-"+c.id, "role02-"+c.id
	c.clusterPolicy("cpp-"+c.id, policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{sel(r1)},
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(member)}})
	b1 := c.clusterTemplate(role(r1))
	b2 := c.clusterTemplate(role(r2))
	c.waitClusterPresent(b1, []string{member}, nil)
	c.updateClusterPolicy("cpp-"+c.id, func(s *policyv1alpha1.PropagationSpec) {
		s.ResourceSelectors = []policyv1alpha1.ResourceSelector{sel(r1), sel(r2)}
	})
	c.waitClusterPresent(b2, []string{member}, nil)
}

// Karmada: clusterpropagationpolicy_test.go, Describe("[AdvancedCase]
// ClusterPropagationPolicy testing"), Context("Edit ClusterPropagationPolicy
// fields other than resourceSelector"), It("update policy placement").
func TestKarmada_ClusterPropagationPolicy_EditFields_Placement(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	c.clusterPolicy("cpp-"+c.id, policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: "nginx"}},
		Placement:         policyv1alpha1.Placement{ClusterAffinity: onClusters(members[0])}})
	binding := c.template(deployment("nginx", 3))
	c.waitPresent(binding, members[:1], nil)
	c.updateClusterPolicy("cpp-"+c.id, func(s *policyv1alpha1.PropagationSpec) {
		s.Placement = policyv1alpha1.Placement{ClusterAffinity: onClusters(members[1])}
	})
	c.waitGone(binding, members[0])
	c.waitPresent(binding, members[1:], nil)
}

// Karmada: clusterpropagationpolicy_test.go, Describe("[Suspension]
// ClusterPropagationPolicy testing"), It("suspend the CPP dispatching").
func TestKarmada_ClusterPropagationPolicy_Suspension_SuspendDispatching(t *testing.T) {
	c := newCase(t)
	member := c.simClusters(1)[0]
	name := "role-" + c.id
	c.clusterPolicy("cpp-"+c.id, policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: name}},
		Placement:         policyv1alpha1.Placement{ClusterAffinity: onClusters(member)}})
	binding := c.clusterTemplate(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": name}, "rules": []any{}})
	c.waitClusterPresent(binding, []string{member}, nil)
	c.updateClusterPolicy("cpp-"+c.id, func(s *policyv1alpha1.PropagationSpec) {
		s.Suspension = &policyv1alpha1.Suspension{Dispatching: ptr.To(true)}
	})
	c.eventually("the Work suspends dispatching", func() (bool, error) {
		w, _ := c.workOf("", member, binding)
		return w != nil && ptr.Deref(w.Spec.SuspendDispatching, false), nil
	})
}

// taintPolicyCase creates a ClusterTaintPolicy for the second of two
// members adding taints while every condition of conditions is False (or
// Unknown) and removing them while every one is True, as Karmada's cases
// do; it sets the conditions False, waits for the taints, sets them True
// and waits until they are gone.
func taintPolicyCase(t *testing.T, conditions []string, taints []clusterv1alpha1.Taint) {
	c := newCase(t)
	target := c.simClusters(2)[1]
	spec := clusterv1alpha1.ClusterTaintPolicySpec{TargetClusters: onClusters(target), Taints: taints}
	for _, cond := range conditions {
		spec.AddOnConditions = append(spec.AddOnConditions, clusterv1alpha1.MatchCondition{ConditionType: cond, Operator: clusterv1alpha1.MatchConditionOpIn,
			StatusValues: []metav1.ConditionStatus{metav1.ConditionFalse, metav1.ConditionUnknown}})
		spec.RemoveOnConditions = append(spec.RemoveOnConditions, clusterv1alpha1.MatchCondition{ConditionType: cond, Operator: clusterv1alpha1.MatchConditionOpIn,
			StatusValues: []metav1.ConditionStatus{metav1.ConditionTrue}})
	}
	ctp := &clusterv1alpha1.ClusterTaintPolicy{ObjectMeta: metav1.ObjectMeta{Name: "ctp-" + c.id}, Spec: spec}
	if _, err := c.fc.ClusterV1alpha1().ClusterTaintPolicies().Create(c.ctx, ctp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.fc.ClusterV1alpha1().ClusterTaintPolicies().Delete(context.Background(), ctp.Name, deleteNow)
	})
	haveTaints := func(want bool) func() (bool, error) {
		return func() (bool, error) {
			cl, err := c.fc.ClusterV1alpha1().Clusters().Get(c.ctx, target, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, taint := range taints {
				ct := corev1.Taint{Key: taint.Key, Value: taint.Value, Effect: taint.Effect}
				if slices.ContainsFunc(cl.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&ct) }) != want {
					return false, nil
				}
			}
			return true, nil
		}
	}
	for _, cond := range conditions {
		c.setCondition(target, cond, metav1.ConditionFalse)
	}
	c.eventually("taints added", haveTaints(true))
	for _, cond := range conditions {
		c.setCondition(target, cond, metav1.ConditionTrue)
	}
	c.eventually("taints removed", haveTaints(false))
}

// Karmada: test/e2e/suites/base/clustertaintpolicy_test.go, Context("One
// condition match"), It("taint should be added and removed upon single
// condition match"). Flotilla's ClusterTaintPolicy is in
// cluster.flotilla.io (Karmada: policy.karmada.io; hub wrap maps it).
func TestKarmada_ClusterTaintPolicy_OneConditionMatch(t *testing.T) {
	taintPolicyCase(t, []string{"NetworkReady"}, []clusterv1alpha1.Taint{{Key: "testing/network-not-ready", Effect: corev1.TaintEffectNoSchedule}})
}

// Karmada: clustertaintpolicy_test.go, Context("Multi conditions match"),
// It("taint should be added and removed upon multi conditions match").
func TestKarmada_ClusterTaintPolicy_MultiConditionsMatch(t *testing.T) {
	taintPolicyCase(t, []string{"NetworkReady", "StorageReady"}, []clusterv1alpha1.Taint{{Key: "testing/all-not-ready", Effect: corev1.TaintEffectNoSchedule}})
}

// Karmada: clustertaintpolicy_test.go, Context("Control with multiple
// taints"), It("multiple taints should be added and removed upon conditions
// match").
func TestKarmada_ClusterTaintPolicy_MultipleTaints(t *testing.T) {
	taintPolicyCase(t, []string{"NetworkReady"}, []clusterv1alpha1.Taint{
		{Key: "testing/network-not-ready", Effect: corev1.TaintEffectNoSchedule},
		{Key: "testing/network-not-ready", Effect: corev1.TaintEffectNoExecute},
	})
}

// Karmada: clusterpropagationpolicy_test.go, Describe("[CornerCase]
// ClusterPropagationPolicy testing"), Context("Deployment propagation
// testing"), It("deployment propagation testing"): the selector names the
// Deployment without a namespace.
func TestKarmada_ClusterPropagationPolicy_CornerCase_SelectorWithoutNamespace(t *testing.T) {
	c := newCase(t)
	member := c.simClusters(1)[0]
	name := "cornercase-" + c.id
	c.clusterPolicy("cpp-"+c.id, policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: name}},
		Placement:         policyv1alpha1.Placement{ClusterAffinity: onClusters(member)}})
	binding := c.template(deployment(name, 3))
	c.waitPresent(binding, []string{member}, hasReplicas(3))
	c.updateTemplate(name, setReplicas(4))
	c.waitPresent(binding, []string{member}, hasReplicas(4))
}

// cppEditCase is Karmada's [AdvancedCase] "Edit ClusterPropagationPolicy"
// setup for Deployments: a ClusterPropagationPolicy selecting deploy01
// onto one member, deploy01 and deploy02 created, deploy01 present.
func cppEditCase(t *testing.T) (c *tc, member, cpp string) {
	c = newCase(t)
	member = c.simClusters(1)[0]
	cpp = "cpp-" + c.id
	c.clusterPolicy(cpp, policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: "deploy01"}},
		Placement:         policyv1alpha1.Placement{ClusterAffinity: onClusters(member)}})
	c.template(deployment("deploy01", 3))
	c.template(deployment("deploy02", 3))
	c.waitPresent("deploy01-deployment", []string{member}, nil)
	return c, member, cpp
}

// Karmada: clusterpropagationpolicy_test.go, Describe("[AdvancedCase]
// ClusterPropagationPolicy testing"), Context("Edit ClusterPropagationPolicy
// ResourceSelectors"), It("update resourceSelectors item"). Differs by
// design as the PropagationPolicy case does: deploy01's template says
// NoMatchingPolicy and its binding and copy are kept.
func TestKarmada_ClusterPropagationPolicy_EditResourceSelectors_Update(t *testing.T) {
	c, member, cpp := cppEditCase(t)
	c.updateClusterPolicy(cpp, func(s *policyv1alpha1.PropagationSpec) {
		s.ResourceSelectors = []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: "deploy02"}}
	})
	c.waitPresent("deploy02-deployment", []string{member}, nil)
	c.waitUnclaimed("deploy01")
	c.waitPresent("deploy01-deployment", []string{member}, nil)
}

// Karmada: clusterpropagationpolicy_test.go, Describe("[AdvancedCase]
// ClusterPropagationPolicy testing"), Context("Edit ClusterPropagationPolicy
// fields other than resourceSelector"), It("update policy propagateDeps").
func TestKarmada_ClusterPropagationPolicy_EditFields_PropagateDeps(t *testing.T) {
	c, _, cpp := cppEditCase(t)
	c.updateClusterPolicy(cpp, func(s *policyv1alpha1.PropagationSpec) { s.PropagateDeps = true })
	c.eventually("binding propagateDeps", func() (bool, error) {
		rb := c.binding("deploy01-deployment")
		return rb != nil && rb.Spec.PropagateDeps, nil
	})
}

// Karmada: clusterpropagationpolicy_test.go, Describe("[DeleteCase]
// ClusterPropagationPolicy testing"), It("delete ClusterPropagationPolicy
// and check whether labels and annotations are deleted correctly"). Differs
// by design as the PropagationPolicy case does.
func TestKarmada_ClusterPropagationPolicy_Delete_RemovesClaim(t *testing.T) {
	c, member, cpp := cppEditCase(t)
	if err := c.fc.PolicyV1alpha1().ClusterPropagationPolicies().Delete(c.ctx, cpp, deleteNow); err != nil {
		t.Fatal(err)
	}
	c.waitUnclaimed("deploy01")
	c.waitPresent("deploy01-deployment", []string{member}, nil)
}

// Karmada: clusterpropagationpolicy_test.go, Describe("[DeleteCase]
// ClusterPropagationPolicy testing"), It("delete the old
// ClusterPropagationPolicy to unbind and create a new one").
func TestKarmada_ClusterPropagationPolicy_Delete_UnbindAndCreateNew(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	sel := []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: "deploy01"}}
	c.clusterPolicy("cpp01-"+c.id, policyv1alpha1.PropagationSpec{ResourceSelectors: sel, Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members[0])}})
	binding := c.template(deployment("deploy01", 3))
	c.waitPresent(binding, members[:1], nil)
	if err := c.fc.PolicyV1alpha1().ClusterPropagationPolicies().Delete(c.ctx, "cpp01-"+c.id, deleteNow); err != nil {
		t.Fatal(err)
	}
	c.clusterPolicy("cpp02-"+c.id, policyv1alpha1.PropagationSpec{ResourceSelectors: sel, Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members[1])}})
	c.waitGone(binding, members[0])
	c.waitPresent(binding, members[1:], nil)
}
