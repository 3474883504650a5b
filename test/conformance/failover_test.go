package conformance

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// Karmada's failover cases wait tens of seconds (tolerationSeconds 30,
// gracePeriodSeconds 30); the ports keep their order and proportions at a
// few seconds each.

// oneOfTwo is the placement of Karmada's failover cases: the first two
// members, spread onto exactly one.
func oneOfTwo(members []string) policyv1alpha1.Placement {
	return policyv1alpha1.Placement{ClusterAffinity: onClusters(members[:2]...),
		SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MaxGroups: 1, MinGroups: 1}}}
}

// scheduledOn returns the one cluster the binding is placed on.
func (c *tc) scheduledOn(binding string) string {
	c.t.Helper()
	var on string
	c.eventually(binding+" placed on one cluster", func() (bool, error) {
		rb := c.binding(binding)
		if rb == nil || len(rb.Spec.Clusters) != 1 {
			return false, nil
		}
		on = rb.Spec.Clusters[0].Name
		return true, nil
	})
	return on
}

// waitMovedOff waits until the binding is placed on exactly one cluster
// other than from, and returns it.
func (c *tc) waitMovedOff(binding, from string) string {
	c.t.Helper()
	var to string
	c.eventually(binding+" rescheduled off "+from, func() (bool, error) {
		rb := c.binding(binding)
		if rb == nil || len(rb.Spec.Clusters) != 1 || rb.Spec.Clusters[0].Name == from {
			return false, nil
		}
		to = rb.Spec.Clusters[0].Name
		return true, nil
	})
	return to
}

// other is the member of two that is not m.
func other(members []string, m string) string {
	if members[0] == m {
		return members[1]
	}
	return members[0]
}

// Karmada: test/e2e/suites/base/failover_test.go, SerialDescribe("cluster
// failover testing"), Context("Cluster failover testing with nil failover
// behavior"), It("deployment failover testing"): the not-ready NoExecute
// taint, tolerated for 2 s, moves the workload; once the cluster recovers
// the old copy is gone.
//
// Differs by design: Karmada's test writes the not-ready taint by hand on a
// Ready cluster. In Flotilla the not-ready and unreachable taints follow
// the cluster's Ready condition (the hub adds and removes them, DESIGN
// "Taints"), so a hand-written one on a Ready cluster is removed and evicts
// nothing; the cluster turning NotReady, as its agent reports it, is what
// moves the workload (docs/comparison.md).
func TestKarmada_ClusterFailover_NilFailoverBehavior(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(3)
	placement := oneOfTwo(members)
	placement.ClusterTolerations = []corev1.Toleration{{Key: "cluster.flotilla.io/not-ready", Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](2)}}
	c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"), Placement: placement})
	binding := c.template(deployment("nginx", 3))
	from := c.scheduledOn(binding)
	c.waitPresent(binding, []string{from}, nil)

	// The hand-written taint on a Ready cluster: removed, nothing moves.
	taint := corev1.Taint{Key: "cluster.flotilla.io/not-ready", Effect: corev1.TaintEffectNoExecute}
	c.addTaint(from, taint)
	c.eventually("the hub removes the not-ready taint of a Ready cluster", func() (bool, error) {
		cl, err := c.fc.ClusterV1alpha1().Clusters().Get(c.ctx, from, metav1.GetOptions{})
		return err == nil && !slices.ContainsFunc(cl.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&taint) }), err
	})
	if on := c.scheduledOn(binding); on != from {
		t.Fatalf("moved to %s by a not-ready taint on a Ready cluster", on)
	}

	// The cluster turns NotReady: NoExecute after the hub's
	// --failover-eviction-timeout (1 s here), tolerated 2 s, then moved.
	cl, err := c.fc.ClusterV1alpha1().Clusters().Get(c.ctx, from, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.setReady(cl, metav1.ConditionFalse)
	to := c.waitMovedOff(binding, from)
	if to != other(members[:2], from) {
		t.Fatalf("moved to %s, want the other cluster of the affinity", to)
	}
	c.setReady(cl, metav1.ConditionTrue)
	c.waitGone(binding, from)
	c.waitPresent(binding, []string{to}, nil)
}

// clusterFailoverCase is Karmada's cluster failover with a taint of its
// own ("fail-test", NoExecute, added by hand without timeAdded) tolerated
// for 3 s, and failover.cluster.
func clusterFailoverCase(t *testing.T, failover *policyv1alpha1.ClusterFailoverBehavior) (c *tc, binding, from, to string) {
	c = newCase(t)
	members := c.simClusters(3)
	placement := oneOfTwo(members)
	placement.ClusterTolerations = []corev1.Toleration{{Key: "fail-test", Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](3)}}
	c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"), Placement: placement,
		Failover: &policyv1alpha1.FailoverBehavior{Cluster: failover}})
	binding = c.template(deployment("nginx", 3))
	from = c.scheduledOn(binding)
	c.waitPresent(binding, []string{from}, nil)
	// Written as Karmada's test writes it, without timeAdded: the hub
	// stamps it, and the toleration counts from then.
	taint := corev1.Taint{Key: "fail-test", Effect: corev1.TaintEffectNoExecute}
	c.addTaint(from, taint)
	to = c.waitMovedOff(binding, from)
	c.waitTaintStamped(from, taint)
	return c, binding, from, to
}

// Karmada: failover_test.go, Context("Cluster failover testing with purgeMode
// gracefully"), It("taint Cluster with NoExecute taint"): moved, an
// EvictWorkloadFromCluster event, and the old copy gone once the taint is
// removed (here: once the new copy is healthy, which the simulated agent
// reports at once).
func TestKarmada_ClusterFailover_PurgeModeGracefully(t *testing.T) {
	c, binding, from, to := clusterFailoverCase(t, &policyv1alpha1.ClusterFailoverBehavior{PurgeMode: policyv1alpha1.PurgeModeGracefully})
	c.waitEvent("EvictWorkloadFromCluster", from)
	c.removeTaint(from, corev1.Taint{Key: "fail-test", Effect: corev1.TaintEffectNoExecute})
	c.waitGone(binding, from)
	c.waitPresent(binding, []string{to}, nil)
}

// Karmada: failover_test.go, Context("Cluster failover testing with purgeMode
// directly"), It("taint Cluster with NoExecute taint"): moved, the new copy
// labelled with the old one's state (statePreservation alias test-alias
// from {.replicas}), the old copy gone. Karmada gives both copies an image
// that never runs; here the new copy is healthy, as Flotilla removes the
// last copies only once a healthy one runs elsewhere
// (docs/comparison.md).
func TestKarmada_ClusterFailover_PurgeModeDirectly(t *testing.T) {
	c, binding, from, to := clusterFailoverCase(t, &policyv1alpha1.ClusterFailoverBehavior{PurgeMode: policyv1alpha1.PurgeModeDirectly,
		StatePreservation: &policyv1alpha1.StatePreservation{Rules: []policyv1alpha1.StatePreservationRule{{AliasLabelName: "test-alias", JSONPath: "{.replicas}"}}}})
	c.waitPresent(binding, []string{to}, func(u *unstructured.Unstructured) bool { return u.GetLabels()["test-alias"] == "3" })
	c.waitGone(binding, from)
}

// appFailoverCase is Karmada's Describe("application failover testing"):
// the first two of two members (agents played by the case), spread onto
// one, propagateDeps, failover.application. The copy is reported healthy
// on the cluster it lands on.
func appFailoverCase(t *testing.T, app *policyv1alpha1.ApplicationFailoverBehavior) (c *tc, members []string, binding, from string) {
	c = newCase(t)
	members = c.clusters("man", clusterSpec{}, clusterSpec{})
	c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"), Placement: oneOfTwo(members),
		PropagateDeps: true, Failover: &policyv1alpha1.FailoverBehavior{Application: app}})
	binding = c.template(deployment("nginx", 3))
	from = c.scheduledOn(binding)
	c.report(from, binding, workv1alpha1.ResourceHealthy)
	return c, members, binding, from
}

// Karmada: failover_test.go, Context("Application failover testing with
// purgeMode gracefully"), It("application failover with purgeMode
// gracefully when the application come back to healthy on the new
// cluster"). Karmada makes the copy unhealthy with an image override;
// here its agent reports it Unhealthy.
func TestKarmada_ApplicationFailover_PurgeModeGracefully_HealthyOnNewCluster(t *testing.T) {
	c, members, binding, from := appFailoverCase(t, &policyv1alpha1.ApplicationFailoverBehavior{
		DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: ptr.To[int32](2)},
		PurgeMode:          policyv1alpha1.PurgeModeGracefully, GracePeriodSeconds: ptr.To[int32](30)})
	c.report(from, binding, workv1alpha1.ResourceUnhealthy)
	to := c.waitMovedOff(binding, from)
	if to != other(members, from) {
		t.Fatalf("moved to %s", to)
	}
	// Gracefully: the old copy stays until the new one is healthy.
	c.waitPresent(binding, []string{to}, nil)
	if w, _ := c.work(from, binding); w == nil || w.DeletionTimestamp != nil {
		t.Fatalf("the old copy on %s went before the new one was healthy", from)
	}
	c.report(to, binding, workv1alpha1.ResourceHealthy)
	c.waitGone(binding, from)
}

// Karmada: failover_test.go, Context("Application failover testing with
// purgeMode gracefully"), It("application failover with purgeMode
// gracefully when the GracePeriodSeconds is reach out"): unhealthy
// everywhere, so the new copy never turns healthy; the old one goes after
// tolerationSeconds + gracePeriodSeconds, not before.
func TestKarmada_ApplicationFailover_PurgeModeGracefully_GracePeriodReached(t *testing.T) {
	const toleration, grace = 2, 4
	c, _, binding, from := appFailoverCase(t, &policyv1alpha1.ApplicationFailoverBehavior{
		DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: ptr.To[int32](toleration)},
		PurgeMode:          policyv1alpha1.PurgeModeGracefully, GracePeriodSeconds: ptr.To[int32](grace)})
	begin := time.Now()
	c.report(from, binding, workv1alpha1.ResourceUnhealthy)
	to := c.waitMovedOff(binding, from)
	c.report(to, binding, workv1alpha1.ResourceUnhealthy)
	c.waitGone(binding, from)
	// Both timers count from API timestamps, which have second precision.
	if took, want := time.Since(begin), time.Duration(toleration+grace-2)*time.Second; took < want {
		t.Fatalf("the old copy went %s after the application turned unhealthy, before tolerationSeconds + gracePeriodSeconds (%s)", took, want)
	}
}

// Karmada: failover_test.go, Context("Application failover testing with
// purgeMode never"), It("application failover with purgeMode never"):
// rescheduled, and the old copy stays.
func TestKarmada_ApplicationFailover_PurgeModeNever(t *testing.T) {
	c, _, binding, from := appFailoverCase(t, &policyv1alpha1.ApplicationFailoverBehavior{
		DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: ptr.To[int32](2)},
		PurgeMode:          policyv1alpha1.PurgeModeNever})
	c.report(from, binding, workv1alpha1.ResourceUnhealthy)
	to := c.waitMovedOff(binding, from)
	c.report(to, binding, workv1alpha1.ResourceHealthy)
	c.waitPresent(binding, []string{to}, nil)
	c.never("the old copy removed with purgeMode Never", 3*time.Second, func() bool {
		w, _ := c.work(from, binding)
		return w == nil || w.DeletionTimestamp != nil
	})
}

// Karmada: failover_test.go, Context("Application failover testing with
// purgeMode directly"), It("Delete the old ones first, then create the new
// ones"). Differs by design: Karmada deletes the old copy at once, even
// though (in its test) the new one never runs; Flotilla never removes the
// last copies while no healthy copy runs elsewhere, so the task is
// recorded Gracefully and the old copy goes once the new one is healthy
// (docs/comparison.md). The state label reaches the new copy as in
// Karmada.
func TestKarmada_ApplicationFailover_PurgeModeDirectly(t *testing.T) {
	c, _, binding, from := appFailoverCase(t, &policyv1alpha1.ApplicationFailoverBehavior{
		DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: ptr.To[int32](2)},
		PurgeMode:          policyv1alpha1.PurgeModeDirectly,
		StatePreservation:  &policyv1alpha1.StatePreservation{Rules: []policyv1alpha1.StatePreservationRule{{AliasLabelName: "test-alias", JSONPath: "{.replicas}"}}}})
	c.report(from, binding, workv1alpha1.ResourceUnhealthy)
	to := c.waitMovedOff(binding, from)
	c.waitPresent(binding, []string{to}, func(u *unstructured.Unstructured) bool { return u.GetLabels()["test-alias"] == "3" })
	rb := c.binding(binding)
	i := slices.IndexFunc(rb.Spec.GracefulEvictionTasks, func(task workv1alpha1.GracefulEvictionTask) bool { return task.FromCluster == from })
	if i < 0 || rb.Spec.GracefulEvictionTasks[i].PurgeMode != policyv1alpha1.PurgeModeGracefully {
		t.Fatalf("eviction tasks %+v: want %s's recorded Gracefully (no healthy copy elsewhere)", rb.Spec.GracefulEvictionTasks, from)
	}
	c.report(to, binding, workv1alpha1.ResourceHealthy)
	c.waitGone(binding, from)
}

// Karmada: test/e2e/suites/base/clusteraffinities_test.go,
// It("failover testing with propagate deployment by clusterAffinities"):
// terms group1 (member1) and group2 (member2), the not-ready NoExecute
// taint tolerated 2 s; member1 fails and the workload lands on member2.
// As in TestKarmada_ClusterFailover_NilFailoverBehavior, the failure is
// member1 turning NotReady rather than a hand-written not-ready taint.
func TestKarmada_ClusterAffinities_Failover(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"),
		Placement: policyv1alpha1.Placement{
			ClusterTolerations: []corev1.Toleration{{Key: "cluster.flotilla.io/not-ready", Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](2)}},
			ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{
				{AffinityName: "group1", ClusterAffinity: *onClusters(members[0])},
				{AffinityName: "group2", ClusterAffinity: *onClusters(members[1])},
			}}})
	binding := c.template(deployment("nginx", 3))
	c.waitPresent(binding, members[:1], nil)
	cl, err := c.fc.ClusterV1alpha1().Clusters().Get(c.ctx, members[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.setReady(cl, metav1.ConditionFalse)
	c.waitPresent(binding, members[1:], nil)
	c.setReady(cl, metav1.ConditionTrue)
	c.waitGone(binding, members[0])
}
