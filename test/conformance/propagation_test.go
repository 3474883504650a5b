package conformance

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

func replicasOf(obj *unstructured.Unstructured) int64 {
	n, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	return n
}

func hasReplicas(n int64) func(*unstructured.Unstructured) bool {
	return func(obj *unstructured.Unstructured) bool { return replicasOf(obj) == n }
}

// propagateAndUpdate is the shape of Karmada's "<kind> propagation testing"
// cases: a policy selecting the object by name onto every member, the
// object present on each, then a change to the object reaching each.
func propagateAndUpdate(t *testing.T, obj map[string]any, change func(*unstructured.Unstructured), changed func(*unstructured.Unstructured) bool) {
	c := newCase(t)
	members := c.simClusters(2)
	u := &unstructured.Unstructured{Object: obj}
	c.policy(u.GetName(), policyv1alpha1.PropagationSpec{
		ResourceSelectors: selector(u.GetAPIVersion(), u.GetKind(), u.GetName()),
		Placement:         policyv1alpha1.Placement{ClusterAffinity: onClusters(members...)}})
	binding := c.template(obj)
	c.waitPresent(binding, members, nil)
	c.updateTemplate(u.GetName(), change)
	c.waitPresent(binding, members, changed)
}

// Karmada: test/e2e/suites/base/propagationpolicy_test.go,
// Context("Deployment propagation testing"), It("deployment propagation testing").
// Karmada also checks its own event reasons (ApplyPolicySucceed,
// ScheduleBindingSucceed, ...); Flotilla's events have their own names
// (docs/comparison.md).
func TestKarmada_PropagationPolicy_Deployment_Propagation(t *testing.T) {
	propagateAndUpdate(t, deployment("nginx", 3),
		func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(4), "spec", "replicas")
		},
		hasReplicas(4))
}

// Karmada: propagationpolicy_test.go, Context("Service propagation testing"),
// It("service propagation testing").
func TestKarmada_PropagationPolicy_Service_Propagation(t *testing.T) {
	svc := map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "nginx-svc"},
		"spec": map[string]any{"selector": map[string]any{"app": "nginx"},
			"ports": []any{map[string]any{"name": "http", "port": int64(80), "targetPort": int64(8080)}}}}
	propagateAndUpdate(t, svc,
		func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "http", "port": int64(8080), "targetPort": int64(8080)}}, "spec", "ports")
		},
		func(u *unstructured.Unstructured) bool {
			ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
			return len(ports) == 1 && ports[0].(map[string]any)["port"] == int64(8080)
		})
}

// Karmada: propagationpolicy_test.go, Context("Pod propagation testing"),
// It("pod propagation testing").
func TestKarmada_PropagationPolicy_Pod_Propagation(t *testing.T) {
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "nginx-pod"},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "nginx", "image": "nginx:1.19.0"}}}}
	propagateAndUpdate(t, pod,
		func(u *unstructured.Unstructured) { setImage(u, "nginx:1.20.0") },
		func(u *unstructured.Unstructured) bool { return imagesOf(u)[0] == "nginx:1.20.0" })
}

// Karmada: propagationpolicy_test.go, Context("Job propagation testing"),
// It("job propagation testing").
func TestKarmada_PropagationPolicy_Job_Propagation(t *testing.T) {
	job := map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "pi"},
		"spec": map[string]any{"backoffLimit": int64(4), "template": map[string]any{"spec": map[string]any{"restartPolicy": "Never",
			"containers": []any{map[string]any{"name": "pi", "image": "perl:5.34.0", "command": []any{"perl", "-Mbignum=bpi", "-wle", "print bpi(2000)"}}}}}}}
	propagateAndUpdate(t, job,
		func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(5), "spec", "backoffLimit")
		},
		func(u *unstructured.Unstructured) bool {
			n, _, _ := unstructured.NestedInt64(u.Object, "spec", "backoffLimit")
			return n == 5
		})
}

// Karmada: propagationpolicy_test.go, Context("Role propagation testing"),
// It("role propagation testing").
func TestKarmada_PropagationPolicy_Role_Propagation(t *testing.T) {
	role := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": map[string]any{"name": "reader"},
		"rules": []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"get"}}}}
	propagateAndUpdate(t, role,
		func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"get", "list"}}}, "rules")
		},
		func(u *unstructured.Unstructured) bool {
			rules, _, _ := unstructured.NestedSlice(u.Object, "rules")
			return len(rules) == 1 && len(rules[0].(map[string]any)["verbs"].([]any)) == 2
		})
}

// Karmada: propagationpolicy_test.go, Context("RoleBinding propagation
// testing"), It("roleBinding propagation testing").
func TestKarmada_PropagationPolicy_RoleBinding_Propagation(t *testing.T) {
	rb := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": "reader"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "default"}}}
	propagateAndUpdate(t, rb,
		func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"kind": "ServiceAccount", "name": "other"}}, "subjects")
		},
		func(u *unstructured.Unstructured) bool {
			s, _, _ := unstructured.NestedSlice(u.Object, "subjects")
			return len(s) == 1 && s[0].(map[string]any)["name"] == "other"
		})
}

// Karmada: propagationpolicy_test.go, Context("Propagate Deployment with long
// pp name (exceed 63 character)"), It("deployment propagation testing").
func TestKarmada_PropagationPolicy_LongPolicyName_Propagation(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	// Longer than 63 characters, the limit of a label value, for the policy
	// and the Deployment alike.
	name := "deploy-longname-longname-longname-longname-longname-longname-k" + c.id
	d := deployment("longname", 3)
	d["metadata"].(map[string]any)["name"] = name
	c.policy(name, policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", name),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members...)}})
	binding := c.template(d)
	c.waitPresent(binding, members, nil)
	// The binding names the policy in a label: shortened, with a hash.
	if got := c.binding(binding).Labels[workobjects.LabelPropagationPolicyName]; got != workobjects.PolicyLabelValue(name) || len(got) > 63 {
		t.Errorf("binding's policy label %q, want %q", got, workobjects.PolicyLabelValue(name))
	}
	c.updateTemplate(name, setReplicas(4))
	c.waitPresent(binding, members, hasReplicas(4))
}

// editSelectorsCase is Karmada's Context("Edit PropagationPolicy
// ResourceSelectors"): a policy selecting deployment 01 onto the first
// member, deployments 01 and 02 created, 01 present.
func editSelectorsCase(t *testing.T) (c *tc, member, policy string) {
	c = newCase(t)
	member = c.simClusters(1)[0]
	policy = "deploy"
	c.policy(policy, policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "deploy01"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(member)}})
	c.template(deployment("deploy01", 3))
	c.template(deployment("deploy02", 3))
	c.waitPresent("deploy01-deployment", []string{member}, nil)
	return c, member, policy
}

// Karmada: propagationpolicy_test.go, Context("Edit PropagationPolicy
// ResourceSelectors"), It("add resourceSelectors item").
func TestKarmada_PropagationPolicy_EditResourceSelectors_Add(t *testing.T) {
	c, member, policy := editSelectorsCase(t)
	c.updatePolicy(policy, func(s *policyv1alpha1.PropagationSpec) {
		s.ResourceSelectors = append(selector("apps/v1", "Deployment", "deploy01"), selector("apps/v1", "Deployment", "deploy02")...)
	})
	c.waitPresent("deploy02-deployment", []string{member}, nil)
}

// Karmada: propagationpolicy_test.go, Context("Edit PropagationPolicy
// ResourceSelectors"), It("update resourceSelectors item"). Differs by
// design: Karmada removes the policy's claim (annotations) from deployment
// 01; Flotilla says so on the template (Propagated=False,
// NoMatchingPolicy) and keeps the binding as it was, labels included, so
// that a policy edit never removes running workloads (docs/comparison.md).
func TestKarmada_PropagationPolicy_EditResourceSelectors_Update(t *testing.T) {
	c, member, policy := editSelectorsCase(t)
	c.updatePolicy(policy, func(s *policyv1alpha1.PropagationSpec) {
		s.ResourceSelectors = selector("apps/v1", "Deployment", "deploy02")
	})
	c.waitPresent("deploy02-deployment", []string{member}, nil)
	c.waitUnclaimed("deploy01")
	c.waitPresent("deploy01-deployment", []string{member}, nil)
}

// Karmada: propagationpolicy_test.go, Context("Edit PropagationPolicy fields
// other than resourceSelectors"), It("update policy propagateDeps").
func TestKarmada_PropagationPolicy_EditFields_PropagateDeps(t *testing.T) {
	c := newCase(t)
	member := c.simClusters(1)[0]
	c.policy("deploy", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "deploy01"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(member)}})
	binding := c.template(deployment("deploy01", 3))
	c.waitPresent(binding, []string{member}, nil)
	c.updatePolicy("deploy", func(s *policyv1alpha1.PropagationSpec) { s.PropagateDeps = true })
	c.eventually("binding propagateDeps", func() (bool, error) {
		rb := c.binding(binding)
		return rb != nil && rb.Spec.PropagateDeps, nil
	})
}

// Karmada: propagationpolicy_test.go, Context("Edit PropagationPolicy fields
// other than resourceSelectors"), It("update policy placement").
func TestKarmada_PropagationPolicy_EditFields_Placement(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	c.policy("deploy", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "deploy01"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members[0])}})
	binding := c.template(deployment("deploy01", 3))
	c.waitPresent(binding, members[:1], nil)
	c.updatePolicy("deploy", func(s *policyv1alpha1.PropagationSpec) {
		s.Placement = policyv1alpha1.Placement{ClusterAffinity: onClusters(members[1])}
	})
	c.waitGone(binding, members[0])
	c.waitPresent(binding, members[1:], nil)
}

// Karmada: propagationpolicy_test.go, Context("Delete the propagationPolicy"),
// It("delete the propagationPolicy and check whether labels and annotations
// are deleted correctly"). Differs by design, as for the selector edit
// above: the template says NoMatchingPolicy, the binding and what runs stay
// as they were.
func TestKarmada_PropagationPolicy_Delete_RemovesClaim(t *testing.T) {
	c := newCase(t)
	member := c.simClusters(1)[0]
	c.policy("deploy", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "deploy01"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(member)}})
	binding := c.template(deployment("deploy01", 3))
	c.waitPresent(binding, []string{member}, nil)
	if err := c.fc.PolicyV1alpha1().PropagationPolicies(c.ns).Delete(c.ctx, "deploy", deleteNow); err != nil {
		t.Fatal(err)
	}
	c.waitUnclaimed("deploy01")
	c.waitPresent(binding, []string{member}, nil)
}

// unbindCase is Karmada's Context("Unbind the old PropagationPolicy and
// create a new one"): a ConfigMap, policy 01 onto member1 and policy 02
// onto member2.
func unbindCase(t *testing.T, unbind func(c *tc, name string)) {
	c := newCase(t)
	members := c.simClusters(2)
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm", "labels": map[string]any{"a": "b"}},
		"data": map[string]any{"a": "b"}}
	binding := c.template(cm)
	c.policy("cm01", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("v1", "ConfigMap", "cm"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members[0])}})
	c.waitPresent(binding, members[:1], nil)
	unbind(c, "cm01")
	c.policy("cm02", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("v1", "ConfigMap", "cm"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members[1])}})
	c.waitGone(binding, members[0])
	c.waitPresent(binding, members[1:], nil)
}

// Karmada: propagationpolicy_test.go, Context("Unbind the old
// PropagationPolicy and create a new one"), It("modify the old
// propagationPolicy to unbind and create a new one").
func TestKarmada_PropagationPolicy_Unbind_ModifyOldCreateNew(t *testing.T) {
	unbindCase(t, func(c *tc, name string) {
		c.updatePolicy(name, func(s *policyv1alpha1.PropagationSpec) { s.ResourceSelectors = selector("v1", "ConfigMap", "cmfake") })
	})
}

// Karmada: propagationpolicy_test.go, Context("Unbind the old
// PropagationPolicy and create a new one"), It("delete the old
// propagationPolicy to unbind and create a new one").
func TestKarmada_PropagationPolicy_Unbind_DeleteOldCreateNew(t *testing.T) {
	unbindCase(t, func(c *tc, name string) {
		if err := c.fc.PolicyV1alpha1().PropagationPolicies(c.ns).Delete(c.ctx, name, deleteNow); err != nil {
			c.t.Fatal(err)
		}
	})
}

// suspensionCase is Karmada's Describe("Suspension: PropagationPolicy
// testing"): a Deployment present on one member, then the policy's
// suspension.dispatching set.
func suspensionCase(t *testing.T) (c *tc, member, binding string) {
	c = newCase(t)
	member = c.simClusters(1)[0]
	c.policy("deploy", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "deploy01"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(member)}})
	binding = c.template(deployment("deploy01", 3))
	c.waitPresent(binding, []string{member}, nil)
	c.updatePolicy("deploy", func(s *policyv1alpha1.PropagationSpec) {
		s.Suspension = &policyv1alpha1.Suspension{Dispatching: ptr.To(true)}
	})
	c.eventually("the Work suspends dispatching", func() (bool, error) {
		w, _ := c.work(member, binding)
		return w != nil && ptr.Deref(w.Spec.SuspendDispatching, false), nil
	})
	return c, member, binding
}

// Karmada: propagationpolicy_test.go, Describe("Suspension:
// PropagationPolicy testing"), It("suspend the PP dispatching"). Karmada
// also shows a Dispatching=False condition on the Work, written by its
// controller; in Flotilla the agent honours spec.suspendDispatching
// (docs/comparison.md).
func TestKarmada_PropagationPolicy_Suspension_SuspendDispatching(t *testing.T) {
	suspensionCase(t)
}

// resumeCase changes the Deployment while suspended, resumes with resume
// and waits for the change on the member.
func resumeCase(t *testing.T, resume *policyv1alpha1.Suspension) {
	c, member, binding := suspensionCase(t)
	c.updateTemplate("deploy01", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(4), "spec", "replicas")
	})
	c.updatePolicy("deploy", func(s *policyv1alpha1.PropagationSpec) { s.Suspension = resume })
	c.eventually("the change dispatched after the resume", func() (bool, error) {
		w, obj := c.work(member, binding)
		return w != nil && replicasOf(obj) == 4 && !ptr.Deref(w.Spec.SuspendDispatching, false), nil
	})
}

// Karmada: propagationpolicy_test.go, Describe("Suspension:
// PropagationPolicy testing"), It("suspension resume by setting policy
// suspension to a empty structure").
func TestKarmada_PropagationPolicy_Suspension_ResumeEmpty(t *testing.T) {
	resumeCase(t, &policyv1alpha1.Suspension{})
}

// Karmada: propagationpolicy_test.go, Describe("Suspension:
// PropagationPolicy testing"), It("suspension resume by setting policy
// suspension to nil").
func TestKarmada_PropagationPolicy_Suspension_ResumeNil(t *testing.T) {
	resumeCase(t, nil)
}

func imagesOf(u *unstructured.Unstructured) []string {
	path := []string{"spec", "template", "spec", "containers"}
	if u.GetKind() == "Pod" {
		path = []string{"spec", "containers"}
	}
	containers, _, _ := unstructured.NestedSlice(u.Object, path...)
	var out []string
	for _, c := range containers {
		img, _ := c.(map[string]any)["image"].(string)
		out = append(out, img)
	}
	return out
}

func setImage(u *unstructured.Unstructured, image string) {
	path := []string{"spec", "template", "spec", "containers"}
	if u.GetKind() == "Pod" {
		path = []string{"spec", "containers"}
	}
	containers, _, _ := unstructured.NestedSlice(u.Object, path...)
	for _, c := range containers {
		c.(map[string]any)["image"] = image
	}
	_ = unstructured.SetNestedSlice(u.Object, containers, path...)
}
