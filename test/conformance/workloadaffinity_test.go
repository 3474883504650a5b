package conformance

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/scheduler"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Karmada's workload affinity cases (issue 39): test/e2e/suites/base/
// workloadaffinity_test.go, Describe("[WorkloadAffinity] inter-workload
// affinity/anti-affinity scheduling"). Karmada's cases place on the whole
// fleet; each port places on its own three members.

// labelled is a Deployment carrying labels.
func labelled(name string, labels map[string]string) map[string]any {
	d := deployment(name, 3)
	u := &unstructured.Unstructured{Object: d}
	all := u.GetLabels()
	for k, v := range labels {
		all[k] = v
	}
	u.SetLabels(all)
	return u.Object
}

// oneClusterOf is Karmada's spread of these cases: exactly one cluster.
func oneClusterOf(members []string, wa *policyv1alpha1.WorkloadAffinity) policyv1alpha1.Placement {
	return policyv1alpha1.Placement{ClusterAffinity: onClusters(members...), WorkloadAffinity: wa,
		SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 1, MaxGroups: 1}}}
}

func bySelector(key, value string) []policyv1alpha1.ResourceSelector {
	return []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment",
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}}}
}

// bindingClusters is Karmada's eventuallyGetBindingClusters: the binding's
// clusters once it has some, or none once it is Scheduled=False with
// NoClusterFit.
func (c *tc) bindingClusters(ns, binding string) []string {
	c.t.Helper()
	var out []string
	c.eventually("binding "+ns+"/"+binding+" scheduled or unschedulable", func() (bool, error) {
		rb, err := c.fc.WorkV1alpha1().ResourceBindings(ns).Get(c.ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		out = placedNames(rb.Spec.Clusters)
		if len(out) > 0 {
			return true, nil
		}
		cond := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionScheduled)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == scheduler.ReasonNoClusterFit, nil
	})
	return out
}

// Karmada: When("Same-group workloads schedule to different clusters"),
// It("Target cluster sets of same-group workloads do not equal").
func TestKarmada_WorkloadAffinity_AntiAffinityDifferentClusters(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(3)
	key := "karmada.io/group-" + c.ns
	c.policy("ha", policyv1alpha1.PropagationSpec{ResourceSelectors: bySelector(key, "ha"),
		Placement: oneClusterOf(members, &policyv1alpha1.WorkloadAffinity{AntiAffinity: &policyv1alpha1.WorkloadAntiAffinityTerm{GroupByLabelKey: key}})})
	b1 := c.template(labelled("dep1", map[string]string{key: "ha"}))
	b2 := c.template(labelled("dep2", map[string]string{key: "ha"}))
	c1, c2 := c.bindingClusters(c.ns, b1), c.bindingClusters(c.ns, b2)
	if len(c1) != 1 || len(c2) != 1 || c1[0] == c2[0] {
		t.Fatalf("dep1 on %v, dep2 on %v: want one cluster each, not the same", c1, c2)
	}
}

// Karmada: When("Same-group workloads co-locate on the same clusters"),
// It("Target cluster sets of same-group workloads are identical").
func TestKarmada_WorkloadAffinity_AffinitySameCluster(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(3)
	key := "karmada.io/group-" + c.ns
	c.policy("train", policyv1alpha1.PropagationSpec{ResourceSelectors: bySelector(key, "train"),
		Placement: oneClusterOf(members, &policyv1alpha1.WorkloadAffinity{Affinity: &policyv1alpha1.WorkloadAffinityTerm{GroupByLabelKey: key}})})
	b1 := c.template(labelled("dep1", map[string]string{key: "train"}))
	b2 := c.template(labelled("dep2", map[string]string{key: "train"}))
	c1, c2 := c.bindingClusters(c.ns, b1), c.bindingClusters(c.ns, b2)
	if len(c1) != 1 || len(c2) != 1 || c1[0] != c2[0] {
		t.Fatalf("dep1 on %v, dep2 on %v: want one cluster each, the same", c1, c2)
	}
}

// Karmada: When("Same label across namespaces can co-locate"),
// It("Same-group workloads in different namespaces co-locate on the same
// cluster"): anti-affinity by the same label in two namespaces, both
// pinned to one cluster; the second namespace's Deployment reaches it.
func TestKarmada_WorkloadAffinity_SameLabelAcrossNamespaces(t *testing.T) {
	c := newCase(t)
	target := c.simClusters(1)[0]
	key := "karmada.io/group-" + c.ns
	spec := policyv1alpha1.PropagationSpec{ResourceSelectors: bySelector(key, "svc"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(target),
			WorkloadAffinity: &policyv1alpha1.WorkloadAffinity{AntiAffinity: &policyv1alpha1.WorkloadAntiAffinityTerm{GroupByLabelKey: key}}}}
	c.policy("svc", spec)
	b1 := c.template(labelled("dep1", map[string]string{key: "svc"}))
	c.waitPlacedOn(b1, target)

	ns2 := c.ns + "-affinity"
	if _, err := c.kube.CoreV1().Namespaces().Create(c.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns2}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.fc.PolicyV1alpha1().PropagationPolicies(ns2).Create(c.ctx,
		&policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: ns2}, Spec: spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: labelled("dep2", map[string]string{key: "svc"})}
	u.SetNamespace(ns2)
	raw, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.fc.WorkV1alpha1().ResourceTemplates(ns2).Create(c.ctx, &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "dep2", Namespace: ns2},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b2 := workobjects.BindingName("Deployment", "dep2")
	c.eventually("dep2 of "+ns2+" present on "+target, func() (bool, error) {
		w, _ := c.workOf(ns2, target, b2)
		return w != nil, nil
	})
}

// Karmada: When("Scheduling behavior when both Affinity and AntiAffinity
// exist"), It("One workload schedules successfully, the other remains
// unscheduled due to workloadAffinity"): all pinned to one cluster; dep1
// (affinity) is placed; dep2 (anti-affinity) and dep3 (affinity with dep1,
// anti-affinity with dep2) cannot both be: exactly one of them is.
func TestKarmada_WorkloadAffinity_AffinityAndAntiAffinity(t *testing.T) {
	c := newCase(t)
	target := c.simClusters(1)[0]
	aff, anti := "karmada.io/affinity-"+c.ns, "karmada.io/antiaffinity-"+c.ns
	pinned := func(name string, wa *policyv1alpha1.WorkloadAffinity) {
		c.policy(name, policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", name),
			Placement: oneClusterOf([]string{target}, wa)})
	}
	pinned("dep1", &policyv1alpha1.WorkloadAffinity{Affinity: &policyv1alpha1.WorkloadAffinityTerm{GroupByLabelKey: aff}})
	b1 := c.template(labelled("dep1", map[string]string{aff: "mix"}))
	pinned("dep2", &policyv1alpha1.WorkloadAffinity{AntiAffinity: &policyv1alpha1.WorkloadAntiAffinityTerm{GroupByLabelKey: anti}})
	b2 := c.template(labelled("dep2", map[string]string{anti: "mix"}))
	pinned("dep3", &policyv1alpha1.WorkloadAffinity{Affinity: &policyv1alpha1.WorkloadAffinityTerm{GroupByLabelKey: aff},
		AntiAffinity: &policyv1alpha1.WorkloadAntiAffinityTerm{GroupByLabelKey: anti}})
	b3 := c.template(labelled("dep3", map[string]string{aff: "mix", anti: "mix"}))
	if c1 := c.bindingClusters(c.ns, b1); len(c1) != 1 {
		t.Fatalf("dep1 on %v, want %s", c1, target)
	}
	c2, c3 := c.bindingClusters(c.ns, b2), c.bindingClusters(c.ns, b3)
	if (len(c2) == 0) == (len(c3) == 0) {
		t.Fatalf("dep2 on %v, dep3 on %v: want exactly one of them placed", c2, c3)
	}
}
