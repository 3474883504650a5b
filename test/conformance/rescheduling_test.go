package conformance

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// Karmada's rescheduling cases select every member; here the case's
// members carry a label of the case and the policy selects it, so that
// "every member" is the case's.

// unjoinCluster deletes a member, as `karmadactl unjoin` does. The suite's
// control plane runs no namespace controller, so the Cluster stays
// Terminating once its Works are released (docs/hub.md#deletion, step 3);
// what the cases check is the rescheduling, as Karmada's do.
func (c *tc) unjoinCluster(name string) {
	c.t.Helper()
	if err := c.fc.ClusterV1alpha1().Clusters().Delete(c.ctx, name, deleteNow); err != nil {
		c.t.Fatal(err)
	}
}

// labelled registers n members with the case's label (names sim-<case>-<first>…).
func (c *tc) labelled(label map[string]string, first, n int) []string {
	c.t.Helper()
	var out []string
	for i := range n {
		name := fmt.Sprintf("sim-%s-%d", c.id, first+i)
		out = append(out, name)
		c.registerCluster(name, clusterSpec{labels: label})
	}
	return out
}

func placedOn(rb *workv1alpha1.ResourceBinding, cluster string) bool {
	return rb != nil && slices.Contains(placedNames(rb.Spec.Clusters), cluster)
}

// Karmada: test/e2e/suites/base/rescheduling_test.go, Context("For
// Duplicated ReplicaSchedulingType, resource should reschedule when join or
// unJoin cluster"), Describe("test with namespace-scope resource:
// Deployment"), It("propagate Deployment and waiting for reschedule").
func TestKarmada_Rescheduling_Duplicated_JoinUnjoin_Deployment(t *testing.T) {
	c := newCase(t)
	label := map[string]string{"fleet": "k" + c.id}
	c.labelled(label, 1, 2)
	c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: label}},
			ReplicaScheduling: duplicated()}})
	binding := c.template(deployment("nginx", 1))
	c.eventually("on both members", func() (bool, error) { rb := c.binding(binding); return rb != nil && len(rb.Spec.Clusters) == 2, nil })
	joined := c.labelled(label, 3, 1)[0]
	c.eventually("rescheduled onto the joined cluster", func() (bool, error) { return placedOn(c.binding(binding), joined), nil })
	c.unjoinCluster(joined)
	c.eventually("rescheduled off the unjoined cluster", func() (bool, error) {
		rb := c.binding(binding)
		return rb != nil && !placedOn(rb, joined) && len(rb.Spec.Clusters) == 2, nil
	})
}

// Karmada: rescheduling_test.go, Context("For Duplicated
// ReplicaSchedulingType, resource should reschedule when join or unJoin
// cluster"), Describe("test with cluster-scope resource: ClusterRole"),
// It("propagate ClusterRole and waiting for reschedule").
func TestKarmada_Rescheduling_Duplicated_JoinUnjoin_ClusterRole(t *testing.T) {
	c := newCase(t)
	label := map[string]string{"fleet": "k" + c.id}
	c.labelled(label, 1, 2)
	name := "rescheduling-role-" + c.id
	c.clusterPolicy("cpp-"+c.id, policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: name}},
		Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: label}},
			ReplicaScheduling: duplicated()}})
	binding := c.clusterTemplate(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": name}, "rules": []any{}})
	crb := func() *workv1alpha1.ClusterResourceBinding {
		b, err := c.fc.WorkV1alpha1().ClusterResourceBindings().Get(c.ctx, binding, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return b
	}
	c.eventually("on both members", func() (bool, error) { b := crb(); return b != nil && len(b.Spec.Clusters) == 2, nil })
	joined := c.labelled(label, 3, 1)[0]
	c.eventually("rescheduled onto the joined cluster", func() (bool, error) {
		b := crb()
		return b != nil && slices.Contains(placedNames(b.Spec.Clusters), joined), nil
	})
	c.unjoinCluster(joined)
	c.eventually("rescheduled off the unjoined cluster", func() (bool, error) {
		b := crb()
		return b != nil && !slices.Contains(placedNames(b.Spec.Clusters), joined) && len(b.Spec.Clusters) == 2, nil
	})
}

// Karmada: rescheduling_test.go, Context("For Divided ReplicaSchedulingType,
// resource should reschedule when unJoin cluster"), Describe("test with
// namespace-scope resource: Deployment"), It("propagate Deployment and
// waiting for reschedule"): 10 replicas divided over the members including
// a joined one; unjoined, its share goes to the others.
func TestKarmada_Rescheduling_Divided_Unjoin_Deployment(t *testing.T) {
	c := newCase(t)
	label := map[string]string{"fleet": "k" + c.id}
	c.labelled(label, 1, 2)
	joined := c.labelled(label, 3, 1)[0]
	c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: label}},
			ReplicaScheduling: weighted()}})
	binding := c.template(deployment("nginx", 10))
	c.eventually("scheduled onto the joined cluster", func() (bool, error) { return placedOn(c.binding(binding), joined), nil })
	c.unjoinCluster(joined)
	c.eventually("rescheduled off the unjoined cluster, 10 replicas on the others", func() (bool, error) {
		rb := c.binding(binding)
		if rb == nil || placedOn(rb, joined) || len(rb.Spec.Clusters) != 2 {
			return false, nil
		}
		var sum int32
		for _, t := range rb.Spec.Clusters {
			sum += t.Replicas
		}
		return sum == 10, nil
	})
}

// labelChangeCase is Karmada's Describe("[cluster label changed]
// reschedule"): a policy selects the one member by a label; the label
// changes to not_ok and back to ok.
//
// Differs by design: Karmada removes the Deployment when no member matches
// any more; Flotilla keeps what runs when no cluster fits the placement and
// says so (Scheduled=False), and the workload stays where it was once the
// label is back (docs/comparison.md).
func labelChangeCase(t *testing.T, clusterPolicy bool) {
	c := newCase(t)
	key := "cluster" + c.id
	member := c.clusters("sim", clusterSpec{labels: map[string]string{key: "ok"}})[0]
	placement := policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: "ok"}}},
		ReplicaScheduling: duplicated()}
	if clusterPolicy {
		c.clusterPolicy("cpp-"+c.id, policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: "nginx"}}, Placement: placement})
	} else {
		c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"), Placement: placement})
	}
	binding := c.template(deployment("nginx", 3))
	c.waitPresent(binding, []string{member}, nil)
	c.setClusterLabel(member, key, "not_ok")
	c.eventually("Scheduled=False: no cluster fits", func() (bool, error) {
		rb := c.binding(binding)
		cond := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionScheduled)
		return cond != nil && cond.Status == metav1.ConditionFalse, nil
	})
	c.never("the only copy removed because no cluster fits", 2*time.Second, func() bool {
		w, _ := c.work(member, binding)
		return w == nil || w.DeletionTimestamp != nil
	})
	c.setClusterLabel(member, key, "ok")
	c.eventually("Scheduled=True again", func() (bool, error) {
		rb := c.binding(binding)
		return meta.IsStatusConditionTrue(rb.Status.Conditions, workv1alpha1.BindingConditionScheduled) && placedOn(rb, member), nil
	})
	c.waitPresent(binding, []string{member}, nil)
}

// Karmada: rescheduling_test.go, Context("test with PropagationPolicy,
// ReplicaSchedulingType is Duplicated"), It("change labels to testing
// deployment reschedule(PropagationPolicy)").
func TestKarmada_Rescheduling_ClusterLabelChanged_PropagationPolicy(t *testing.T) {
	labelChangeCase(t, false)
}

// Karmada: rescheduling_test.go, Context("test with
// ClusterPropagationPolicy, ReplicaSchedulingType is Duplicated"),
// It("change labels to testing deployment
// reschedule(ClusterPropagationPolicy)").
func TestKarmada_Rescheduling_ClusterLabelChanged_ClusterPropagationPolicy(t *testing.T) {
	labelChangeCase(t, true)
}
