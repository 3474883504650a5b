package conformance

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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

// Karmada: test/e2e/suites/base/clustertaintpolicy_test.go, Context("One
// condition match"), It("taint should be added and removed upon single
// condition match"). Flotilla's ClusterTaintPolicy is in
// cluster.flotilla.io (Karmada: policy.karmada.io; hub wrap maps it).
func TestKarmada_ClusterTaintPolicy_OneConditionMatch(t *testing.T) {
	c := newCase(t)
	target := c.simClusters(2)[1]
	ctp := &clusterv1alpha1.ClusterTaintPolicy{ObjectMeta: metav1.ObjectMeta{Name: "ctp-" + c.id},
		Spec: clusterv1alpha1.ClusterTaintPolicySpec{
			TargetClusters: onClusters(target),
			AddOnConditions: []clusterv1alpha1.MatchCondition{{ConditionType: "NetworkReady", Operator: clusterv1alpha1.MatchConditionOpIn,
				StatusValues: []metav1.ConditionStatus{metav1.ConditionFalse, metav1.ConditionUnknown}}},
			RemoveOnConditions: []clusterv1alpha1.MatchCondition{{ConditionType: "NetworkReady", Operator: clusterv1alpha1.MatchConditionOpIn,
				StatusValues: []metav1.ConditionStatus{metav1.ConditionTrue}}},
			Taints: []clusterv1alpha1.Taint{{Key: "testing/network-not-ready", Effect: corev1.TaintEffectNoSchedule}}}}
	if _, err := c.fc.ClusterV1alpha1().ClusterTaintPolicies().Create(c.ctx, ctp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.fc.ClusterV1alpha1().ClusterTaintPolicies().Delete(context.Background(), ctp.Name, deleteNow)
	})
	taint := corev1.Taint{Key: "testing/network-not-ready", Effect: corev1.TaintEffectNoSchedule}
	setNetworkReady := func(status metav1.ConditionStatus) {
		c.eventually("NetworkReady="+string(status), func() (bool, error) {
			cl, err := c.fc.ClusterV1alpha1().Clusters().Get(c.ctx, target, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			meta.SetStatusCondition(&cl.Status.Conditions, metav1.Condition{Type: "NetworkReady", Status: status, Reason: "Test", Message: "set by the test"})
			_, err = c.fc.ClusterV1alpha1().Clusters().UpdateStatus(c.ctx, cl, metav1.UpdateOptions{})
			return err == nil, nil
		})
	}
	hasTaint := func(want bool) func() (bool, error) {
		return func() (bool, error) {
			cl, err := c.fc.ClusterV1alpha1().Clusters().Get(c.ctx, target, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return slices.ContainsFunc(cl.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&taint) }) == want, nil
		}
	}
	setNetworkReady(metav1.ConditionFalse)
	c.eventually("taint added", hasTaint(true))
	setNetworkReady(metav1.ConditionTrue)
	c.eventually("taint removed", hasTaint(false))
}
