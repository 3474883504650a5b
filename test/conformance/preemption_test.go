package conformance

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Karmada's claiming rules (issue 31 items 1 and 2): the policy that first
// propagates a template claims it; another takes it only by preemption
// (preemption: Always, by Karmada's precedence); among the policies that
// select an unclaimed template, the higher explicit priority wins, then
// the more precise selector (name, then label selector, then all).
// Karmada's tests read the claim from the policy annotations its detector
// writes on the member's object; Flotilla records it in the binding's
// policy labels, which the ports read. Karmada's priority cases place on
// every member with every policy; as the placement plays no part in which
// policy wins, the ports place on one member of their own (each member
// costs the shared hub a re-scheduling of every binding).

// claimant is the policy a binding's labels name as its claimant.
func claimant(labels map[string]string) string {
	if n := labels[workobjects.LabelClusterPropagationPolicyName]; n != "" {
		return n
	}
	return labels[workobjects.LabelPropagationPolicyName]
}

// waitClaimed waits until the binding is claimed by policy and placed on
// exactly clusters, and its Work is present on each.
func (c *tc) waitClaimed(binding, policy string, clusters ...string) {
	c.t.Helper()
	want := slices.Sorted(slices.Values(clusters))
	c.eventually(fmt.Sprintf("%s claimed by %s on %v", binding, policy, want), func() (bool, error) {
		rb := c.binding(binding)
		if rb == nil {
			return false, nil
		}
		if got := claimant(rb.Labels); got != policy || !slices.Equal(placedNames(rb.Spec.Clusters), want) {
			return false, fmt.Errorf("claimed by %q on %v", got, placedNames(rb.Spec.Clusters))
		}
		return true, nil
	})
	c.waitPresent(binding, clusters, nil)
}

// hubSeesPolicies waits until the hub has seen every PropagationPolicy
// (cluster false) or ClusterPropagationPolicy (cluster true) created so
// far: a probe policy created now must claim a probe ConfigMap, and the
// hub's watch of the kind delivers policies in the order they were
// created. Karmada's priority tests sleep five seconds instead ("Wait till
// the informer's cache is synced in karmada-controller").
func (c *tc) hubSeesPolicies(cluster string, clusterPolicy bool) {
	c.t.Helper()
	name := "probe-" + c.id
	if clusterPolicy {
		name += "-cpp"
	}
	spec := policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Namespace: c.ns, Name: name}},
		Placement:         policyv1alpha1.Placement{ClusterAffinity: onClusters(cluster)}}
	if clusterPolicy {
		c.clusterPolicy(name, spec)
	} else {
		c.policy(name, spec)
	}
	binding := c.template(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}})
	c.eventually("the hub sees the probe policy "+name, func() (bool, error) {
		rb := c.binding(binding)
		return rb != nil && claimant(rb.Labels) == name, nil
	})
}

// prioritized is a policy spec selecting by selectors onto clusters, with
// an explicit priority (nil: none) and preemption.
func prioritized(selectors []policyv1alpha1.ResourceSelector, priority *int32, preemption policyv1alpha1.PreemptionBehavior, clusters ...string) policyv1alpha1.PropagationSpec {
	return policyv1alpha1.PropagationSpec{ResourceSelectors: selectors, Priority: priority, Preemption: preemption,
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(clusters...)}}
}

// preemptedEvent is the text of the PreemptPolicySucceed event.
func preemptedEvent(winner, loser string) string { return winner + " preempted " + loser }

func (c *tc) deletePolicy(name string) {
	c.t.Helper()
	if err := c.fc.PolicyV1alpha1().PropagationPolicies(c.ns).Delete(c.ctx, name, deleteNow); err != nil {
		c.t.Fatal(err)
	}
}

func (c *tc) deleteClusterPolicy(name string) {
	c.t.Helper()
	if err := c.fc.PolicyV1alpha1().ClusterPropagationPolicies().Delete(c.ctx, name, deleteNow); err != nil {
		c.t.Fatal(err)
	}
}

// Karmada: test/e2e/suites/base/preemption_test.go, Describe("[Preemption]
// propagation policy preemption testing"), When("[PropagationPolicy
// Preemption] PropagationPolicy preempts another
// (Cluster)PropagationPolicy"), Context("High-priority PropagationPolicy
// preempts low-priority PropagationPolicy"), It("Propagate the deployment
// with the low-priority PropagationPolicy and then create the
// high-priority PropagationPolicy to preempt it"): low (priority 5) on
// the preempted cluster, then high (10, preemption Always) on the
// preempting one takes it, with PreemptPolicySucceed; high deleted, low
// takes it back.
func TestKarmada_Preemption_HighPriorityPropagationPolicyPreemptsLow(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	preempted, preempting := members[0], members[1]
	sel := selector("apps/v1", "Deployment", "nginx")
	binding := c.template(deployment("nginx", 3))
	c.policy("nginx-low-pp", prioritized(sel, ptr.To[int32](5), "", preempted))
	c.waitClaimed(binding, "nginx-low-pp", preempted)

	c.policy("nginx-high-pp", prioritized(sel, ptr.To[int32](10), policyv1alpha1.PreemptAlways, preempting))
	c.waitClaimed(binding, "nginx-high-pp", preempting)
	c.waitEvent("PreemptPolicySucceed", preemptedEvent("PropagationPolicy "+c.ns+"/nginx-high-pp", "PropagationPolicy "+c.ns+"/nginx-low-pp"))

	c.deletePolicy("nginx-high-pp")
	c.waitClaimed(binding, "nginx-low-pp", preempted)
}

// Karmada: preemption_test.go, Context("PropagationPolicy preempts
// ClusterPropagationPolicy"), It("Propagate the deployment with the
// ClusterPropagationPolicy and then create the PropagationPolicy to
// preempt it"): a PropagationPolicy with preemption Always takes a
// ClusterPropagationPolicy's claim whatever the priorities; deleted, the
// ClusterPropagationPolicy takes it back.
func TestKarmada_Preemption_PropagationPolicyPreemptsClusterPropagationPolicy(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	preempted, preempting := members[0], members[1]
	binding := c.template(deployment("nginx", 3))
	cpp := "nginx-" + c.id
	c.clusterPolicy(cpp, prioritized([]policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: "nginx"}},
		nil, "", preempted))
	c.waitClaimed(binding, cpp, preempted)

	c.policy("nginx", prioritized(selector("apps/v1", "Deployment", "nginx"), nil, policyv1alpha1.PreemptAlways, preempting))
	c.waitClaimed(binding, "nginx", preempting)
	c.waitEvent("PreemptPolicySucceed", preemptedEvent("PropagationPolicy "+c.ns+"/nginx", "ClusterPropagationPolicy "+cpp))

	c.deletePolicy("nginx")
	c.waitClaimed(binding, cpp, preempted)
}

// Karmada: preemption_test.go, Context("High-priority PropagationPolicy
// reduces priority to be preempted by low-priority PropagationPolicy"),
// It("Propagate the deployment with the high-priority PropagationPolicy
// and then reduce it's priority to be preempted by the low-priority
// PropagationPolicy"): both with preemption Always, high (10) on the
// preempted cluster claims it; its priority lowered to 4, low (5) takes
// it.
func TestKarmada_Preemption_HighPriorityPropagationPolicyReducesPriority(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	preempted, preempting := members[0], members[1]
	sel := selector("apps/v1", "Deployment", "nginx")
	binding := c.template(deployment("nginx", 3))
	c.policy("nginx-high-pp", prioritized(sel, ptr.To[int32](10), policyv1alpha1.PreemptAlways, preempted))
	c.policy("nginx-low-pp", prioritized(sel, ptr.To[int32](5), policyv1alpha1.PreemptAlways, preempting))
	c.waitClaimed(binding, "nginx-high-pp", preempted)

	c.updatePolicy("nginx-high-pp", func(s *policyv1alpha1.PropagationSpec) { s.Priority = ptr.To[int32](4) })
	c.waitClaimed(binding, "nginx-low-pp", preempting)
	c.waitEvent("PreemptPolicySucceed", preemptedEvent("PropagationPolicy "+c.ns+"/nginx-low-pp", "PropagationPolicy "+c.ns+"/nginx-high-pp"))
}

// clusterPreemptionSelector names the case's Deployment nginx from a
// ClusterPropagationPolicy.
func (c *tc) clusterPreemptionSelector() []policyv1alpha1.ResourceSelector {
	return []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: "nginx"}}
}

// Karmada: preemption_test.go, When("[ClusterPropagationPolicy Preemption]
// ClusterPropagationPolicy preempts another ClusterPropagationPolicy"),
// Context("High-priority ClusterPropagationPolicy preempts low-priority
// ClusterPropagationPolicy"), It("Propagate the deployment with the
// low-priority ClusterPropagationPolicy and then create the high-priority
// ClusterPropagationPolicy to preempt it").
func TestKarmada_Preemption_HighPriorityClusterPropagationPolicyPreemptsLow(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	preempted, preempting := members[0], members[1]
	low, high := "nginx-low-cpp-"+c.id, "nginx-high-cpp-"+c.id
	binding := c.template(deployment("nginx", 3))
	c.clusterPolicy(low, prioritized(c.clusterPreemptionSelector(), ptr.To[int32](5), "", preempted))
	c.waitClaimed(binding, low, preempted)

	c.clusterPolicy(high, prioritized(c.clusterPreemptionSelector(), ptr.To[int32](10), policyv1alpha1.PreemptAlways, preempting))
	c.waitClaimed(binding, high, preempting)
	c.waitEvent("PreemptPolicySucceed", preemptedEvent("ClusterPropagationPolicy "+high, "ClusterPropagationPolicy "+low))

	c.deleteClusterPolicy(high)
	c.waitClaimed(binding, low, preempted)
}

// Karmada: preemption_test.go, Context("High-priority
// ClusterPropagationPolicy reduces priority to be preempted by low-priority
// ClusterPropagationPolicy"), It("Propagate the deployment with the
// high-priority ClusterPropagationPolicy and then reduce it's priority to
// be preempted by the low-priority ClusterPropagationPolicy").
func TestKarmada_Preemption_HighPriorityClusterPropagationPolicyReducesPriority(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	preempted, preempting := members[0], members[1]
	low, high := "nginx-low-cpp-"+c.id, "nginx-high-cpp-"+c.id
	binding := c.template(deployment("nginx", 3))
	c.clusterPolicy(high, prioritized(c.clusterPreemptionSelector(), ptr.To[int32](10), policyv1alpha1.PreemptAlways, preempted))
	c.clusterPolicy(low, prioritized(c.clusterPreemptionSelector(), ptr.To[int32](5), policyv1alpha1.PreemptAlways, preempting))
	c.waitClaimed(binding, high, preempted)

	c.updateClusterPolicy(high, func(s *policyv1alpha1.PropagationSpec) { s.Priority = ptr.To[int32](4) })
	c.waitClaimed(binding, low, preempting)
	c.waitEvent("PreemptPolicySucceed", preemptedEvent("ClusterPropagationPolicy "+low, "ClusterPropagationPolicy "+high))
}

// implicitPriorityCase is Karmada's [ImplicitPriority] case: policies
// that name the Deployment, select it by label and select all
// Deployments, created in that order with the same placement before the
// Deployment; the Deployment goes to the one that names it, and to the
// next as each is deleted.
func implicitPriorityCase(t *testing.T, clusterPolicy bool) {
	c := newCase(t)
	members := c.simClusters(1)
	name := "deploy-" + c.id
	d := deployment(name, 3)
	d["metadata"].(map[string]any)["labels"] = map[string]any{"priority": "implicit-priority"}
	byName := policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
	byLabel := policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment",
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"priority": "implicit-priority"}}}
	all := policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment"}
	if clusterPolicy {
		// As Karmada's ClusterPropagationPolicy case: each selector in
		// the Deployment's namespace.
		byName.Namespace, byLabel.Namespace, all.Namespace = c.ns, c.ns, c.ns
	}
	policies := []string{"match-name-" + c.id, "match-labelselector-" + c.id, "match-all-" + c.id}
	for i, sel := range []policyv1alpha1.ResourceSelector{byName, byLabel, all} {
		spec := prioritized([]policyv1alpha1.ResourceSelector{sel}, nil, "", members...)
		if clusterPolicy {
			c.clusterPolicy(policies[i], spec)
		} else {
			c.policy(policies[i], spec)
		}
	}
	c.hubSeesPolicies(members[0], clusterPolicy)
	binding := c.template(d)
	for _, p := range policies {
		c.waitClaimed(binding, p, members...)
		if clusterPolicy {
			c.deleteClusterPolicy(p)
		} else {
			c.deletePolicy(p)
		}
	}
}

// Karmada: test/e2e/suites/base/propagationpolicy_test.go,
// SerialDescribe("[ImplicitPriority] PropagationPolicy testing"),
// Context("priorityMatchName propagation testing"),
// It("priorityMatchName/priorityMatchLabel/priorityMatchAll testing").
func TestKarmada_PropagationPolicy_ImplicitPriority(t *testing.T) {
	implicitPriorityCase(t, false)
}

// Karmada: test/e2e/suites/base/clusterpropagationpolicy_test.go,
// SerialDescribe("[ImplicitPriority] ClusterPropagationPolicy testing"),
// Context("priorityMatchName/priorityMatchLabel/priorityMatchAll
// propagation testing"), It("priorityMatchName/priorityMatchLabel/
// priorityMatchAll testing").
func TestKarmada_ClusterPropagationPolicy_ImplicitPriority(t *testing.T) {
	implicitPriorityCase(t, true)
}

// explicitPriorityCase creates, in order, policies named names[i] with
// selectors sel[i] (by the Deployment's name, or by its label) and
// explicit priorities prio[i] (nil: none), then the Deployment, and
// waits for it to go to want.
func explicitPriorityCase(t *testing.T, clusterPolicy bool, names []string, byLabel []bool, prio []*int32, want string) {
	c := newCase(t)
	members := c.simClusters(1)
	name, label := "deploy-"+c.id, "priority-"+c.id
	d := deployment(name, 3)
	d["metadata"].(map[string]any)["labels"] = map[string]any{"priority": label}
	for i := range names {
		// Karmada's selectors name no namespace, for the
		// ClusterPropagationPolicy too: the name and the label value
		// are the case's own.
		sel := policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
		if byLabel[i] {
			sel = policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"priority": label}}}
		}
		spec := prioritized([]policyv1alpha1.ResourceSelector{sel}, prio[i], "", members...)
		if clusterPolicy {
			c.clusterPolicy(names[i]+"-"+c.id, spec)
		} else {
			c.policy(names[i], spec)
		}
	}
	c.hubSeesPolicies(members[0], clusterPolicy)
	binding := c.template(d)
	if clusterPolicy {
		want += "-" + c.id
	}
	c.waitClaimed(binding, want, members...)
}

// Karmada: propagationpolicy_test.go, Describe("[ExplicitPriority]
// PropagationPolicy testing"), Context("high explicit/low
// priority/implicit priority PropagationPolicy propagation testing"),
// It("high explicit/low priority/implicit priority PropagationPolicy
// propagation testing"): a label selector of priority 2 wins over a name
// of priority 1 and a name without priority.
func TestKarmada_PropagationPolicy_ExplicitPriority_HighExplicitWins(t *testing.T) {
	explicitPriorityCase(t, false, []string{"higherprioritylabelselector", "lowerprioritymatchname", "implicitprioritymatchname"},
		[]bool{true, false, false}, []*int32{ptr.To[int32](2), ptr.To[int32](1), nil}, "higherprioritylabelselector")
}

// Karmada: propagationpolicy_test.go, Describe("[ExplicitPriority]
// PropagationPolicy testing"), Context("same explicit priority
// PropagationPolicy propagation testing"), It("same explicit priority
// PropagationPolicy propagation testing"): with priority 1 each, the
// policy that names the Deployment wins over the label selector.
func TestKarmada_PropagationPolicy_ExplicitPriority_SamePriorityNameWins(t *testing.T) {
	explicitPriorityCase(t, false, []string{"explicitprioritylabelselector", "explicitprioritymatchname"},
		[]bool{true, false}, []*int32{ptr.To[int32](1), ptr.To[int32](1)}, "explicitprioritymatchname")
}

// Karmada: clusterpropagationpolicy_test.go, Describe("[ExplicitPriority]
// ClusterPropagationPolicy testing"), Context("high explicit/low
// priority/implicit priority ClusterPropagationPolicy propagation
// testing"), It("high explicit/low priority/implicit priority
// ClusterPropagationPolicy propagation testing").
func TestKarmada_ClusterPropagationPolicy_ExplicitPriority_HighExplicitWins(t *testing.T) {
	explicitPriorityCase(t, true, []string{"higherprioritylabelselector", "lowerprioritymatchname", "implicitprioritymatchname"},
		[]bool{true, false, false}, []*int32{ptr.To[int32](2), ptr.To[int32](1), nil}, "higherprioritylabelselector")
}

// Karmada: clusterpropagationpolicy_test.go, Describe("[ExplicitPriority]
// ClusterPropagationPolicy testing"), Context("same explicit priority
// ClusterPropagationPolicy propagation testing"), It("same explicit
// priority ClusterPropagationPolicy propagation testing").
func TestKarmada_ClusterPropagationPolicy_ExplicitPriority_SamePriorityNameWins(t *testing.T) {
	explicitPriorityCase(t, true, []string{"explicitprioritylabelselector", "explicitprioritymatchname"},
		[]bool{true, false}, []*int32{ptr.To[int32](1), ptr.To[int32](1)}, "explicitprioritymatchname")
}
