package conformance

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	appsv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func duplicated() *policyv1alpha1.ReplicaSchedulingStrategy {
	return &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}
}

func weighted(weights ...policyv1alpha1.StaticClusterWeight) *policyv1alpha1.ReplicaSchedulingStrategy {
	s := &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted}
	if weights != nil {
		s.WeightPreference = &policyv1alpha1.ClusterPreferences{StaticWeightList: weights}
	}
	return s
}

// increasingWeights gives the i-th member weight i+1, as Karmada's cases do.
func increasingWeights(members []string) []policyv1alpha1.StaticClusterWeight {
	var out []policyv1alpha1.StaticClusterWeight
	for i, m := range members {
		out = append(out, policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{m}}, Weight: int64(i + 1)})
	}
	return out
}

func setReplicas(n int64) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, n, "spec", "replicas") }
}

// replicaCase propagates a Deployment of replicas onto three members with
// the strategy and returns the case, its members and the binding.
func replicaCase(t *testing.T, replicas int64, strategy func(members []string) *policyv1alpha1.ReplicaSchedulingStrategy) (*tc, []string, string) {
	c := newCase(t)
	members := c.simClusters(3)
	c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members...), ReplicaScheduling: strategy(members)}})
	return c, members, c.template(deployment("nginx", replicas))
}

func eachReplicas(members []string, n ...int32) map[string]int32 {
	out := map[string]int32{}
	for i, m := range members {
		out[m] = n[i%len(n)]
	}
	return out
}

// Karmada: test/e2e/suites/base/scheduling_test.go, Describe("[ReplicaScheduling]
// ReplicaSchedulingStrategy testing"), Context("ReplicaSchedulingType is
// Duplicated."), It("replicas duplicated testing").
func TestKarmada_ReplicaScheduling_Duplicated(t *testing.T) {
	c, members, binding := replicaCase(t, 3, func([]string) *policyv1alpha1.ReplicaSchedulingStrategy { return duplicated() })
	c.waitPresent(binding, members, hasReplicas(3))
}

// Karmada: scheduling_test.go, Context("ReplicaSchedulingType is Duplicated,
// trigger rescheduling when replicas have changed."), It("replicas
// duplicated testing when rescheduling").
func TestKarmada_ReplicaScheduling_Duplicated_Rescheduling(t *testing.T) {
	c, members, binding := replicaCase(t, 3, func([]string) *policyv1alpha1.ReplicaSchedulingStrategy { return duplicated() })
	c.waitPresent(binding, members, nil)
	c.updateTemplate("nginx", setReplicas(4))
	c.waitPresent(binding, members, hasReplicas(4))
}

// Karmada: scheduling_test.go, Context("ReplicaSchedulingType is Divided,
// ReplicaDivisionPreference is Weighted, WeightPreference is nil."),
// It("replicas divided and weighted testing"): equal shares.
func TestKarmada_ReplicaScheduling_DividedWeighted_NilWeightPreference(t *testing.T) {
	c, members, binding := replicaCase(t, 6, func([]string) *policyv1alpha1.ReplicaSchedulingStrategy { return weighted() })
	c.waitScheduled(binding, eachReplicas(members, 2))
	c.waitPresent(binding, members, hasReplicas(2))
}

// Karmada: scheduling_test.go, Context("ReplicaSchedulingType is Divided,
// ReplicaDivisionPreference is Weighted, WeightPreference is nil, trigger
// rescheduling when replicas have changed."), It("replicas divided and
// weighted testing when rescheduling").
func TestKarmada_ReplicaScheduling_DividedWeighted_NilWeightPreference_Rescheduling(t *testing.T) {
	c, members, binding := replicaCase(t, 3, func([]string) *policyv1alpha1.ReplicaSchedulingStrategy { return weighted() })
	c.waitPresent(binding, members, nil)
	c.updateTemplate("nginx", setReplicas(9))
	c.waitPresent(binding, members, hasReplicas(3))
}

// Karmada: scheduling_test.go, Context("ReplicaSchedulingType is Divided,
// ReplicaDivisionPreference is Weighted, WeightPreference isn't nil."),
// It("replicas divided and weighted testing"): weights 1:2:3.
func TestKarmada_ReplicaScheduling_DividedWeighted_StaticWeights(t *testing.T) {
	c, members, binding := replicaCase(t, 6, func(m []string) *policyv1alpha1.ReplicaSchedulingStrategy { return weighted(increasingWeights(m)...) })
	c.waitScheduled(binding, map[string]int32{members[0]: 1, members[1]: 2, members[2]: 3})
	for i, m := range members {
		c.waitPresent(binding, []string{m}, hasReplicas(int64(i+1)))
	}
}

// Karmada: scheduling_test.go, Context("ReplicaSchedulingType is Divided,
// ReplicaDivisionPreference is Weighted, WeightPreference isn't nil,
// trigger rescheduling when replicas have changed."), It("replicas divided
// and weighted testing when rescheduling").
func TestKarmada_ReplicaScheduling_DividedWeighted_StaticWeights_Rescheduling(t *testing.T) {
	c, members, binding := replicaCase(t, 6, func(m []string) *policyv1alpha1.ReplicaSchedulingStrategy { return weighted(increasingWeights(m)...) })
	c.waitPresent(binding, members, nil)
	c.updateTemplate("nginx", setReplicas(12))
	for i, m := range members {
		c.waitPresent(binding, []string{m}, hasReplicas(int64(2*(i+1))))
	}
}

// Karmada: scheduling_test.go, Describe("[JobReplicaScheduling]
// JobReplicaSchedulingStrategy testing"), Context("ReplicaSchedulingType is
// Divided, ReplicaDivisionPreference is Weighted, WeightPreference isn't
// nil, spec.completions isn`t nil."), It("Job replicas divided and weighted
// testing"): parallelism 1:2:3.
func TestKarmada_JobReplicaScheduling_DividedWeighted(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(3)
	c.policy("pi", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("batch/v1", "Job", "pi"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members...), ReplicaScheduling: weighted(increasingWeights(members)...)}})
	binding := c.template(map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "pi"},
		"spec": map[string]any{"parallelism": int64(6), "completions": int64(6), "template": map[string]any{"spec": map[string]any{"restartPolicy": "Never",
			"containers": []any{map[string]any{"name": "pi", "image": "perl:5.34.0"}}}}}})
	for i, m := range members {
		c.waitPresent(binding, []string{m}, func(u *unstructured.Unstructured) bool {
			p, _, _ := unstructured.NestedInt64(u.Object, "spec", "parallelism")
			return p == int64(i+1)
		})
	}
}

// Karmada: scheduling_test.go, Describe("propagation with label and group
// constraints testing"), Context("Deployment propagation testing"),
// It("Deployment propagation with label and group constraints testing"):
// a label selector and spreadByField cluster with minGroups = maxGroups
// (Karmada picks 1 or 2 at random; both are run here).
func TestKarmada_Scheduling_LabelAndGroupConstraints_Deployment(t *testing.T) {
	for _, groups := range []int32{1, 2} {
		t.Run(fmt.Sprintf("groups=%d", groups), func(t *testing.T) {
			labelAndGroups(t, groups, deployment("nginx", 3), setReplicas(4), hasReplicas(4))
		})
	}
}

// Karmada: scheduling_test.go, Describe("propagation with label and group
// constraints testing"), Context("Job propagation testing"), It("Job
// propagation with label and group constraints testing"): the same for a
// Job, whose parallelism then changes.
func TestKarmada_Scheduling_LabelAndGroupConstraints_Job(t *testing.T) {
	job := map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "pi"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never",
			"containers": []any{map[string]any{"name": "pi", "image": "perl:5.34.0"}}}}}}
	for _, groups := range []int32{1, 2} {
		t.Run(fmt.Sprintf("groups=%d", groups), func(t *testing.T) {
			labelAndGroups(t, groups, job,
				func(u *unstructured.Unstructured) {
					_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "parallelism")
				},
				func(u *unstructured.Unstructured) bool {
					p, _, _ := unstructured.NestedInt64(u.Object, "spec", "parallelism")
					return p == 3
				})
		})
	}
}

// labelAndGroups propagates obj with a label selector matching three of
// four members and spreadByField cluster min = max = groups, checks it is
// Scheduled onto that many labelled members, then that change reaches them.
func labelAndGroups(t *testing.T, groups int32, obj map[string]any, change func(*unstructured.Unstructured), changed func(*unstructured.Unstructured) bool) {
	c := newCase(t)
	location := map[string]string{"location": "CHN-" + c.id}
	members := c.clusters("sim", clusterSpec{labels: location}, clusterSpec{labels: location}, clusterSpec{labels: location}, clusterSpec{})
	u := &unstructured.Unstructured{Object: obj}
	c.policy(u.GetName(), policyv1alpha1.PropagationSpec{ResourceSelectors: selector(u.GetAPIVersion(), u.GetKind(), u.GetName()),
		Placement: policyv1alpha1.Placement{
			ClusterAffinity:   &policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: location}},
			SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MaxGroups: groups, MinGroups: groups}}}})
	binding := c.template(obj)
	var rb *workv1alpha1.ResourceBinding
	c.eventually("scheduled onto the groups", func() (bool, error) {
		rb = c.binding(binding)
		return rb != nil && meta.IsStatusConditionTrue(rb.Status.Conditions, workv1alpha1.BindingConditionScheduled) && len(rb.Spec.Clusters) == int(groups), nil
	})
	targets := placedNames(rb.Spec.Clusters)
	if slices.Contains(targets, members[3]) {
		t.Fatalf("scheduled onto %s, which lacks the label", members[3])
	}
	c.waitPresent(binding, targets, nil)
	c.updateTemplate(u.GetName(), change)
	c.waitPresent(binding, targets, changed)
}

// Karmada: scheduling_test.go, Describe("propagation with label and group
// constraints testing"), Context("CustomResourceDefinition propagation
// testing"), It("CRD with specified label and group constraints
// propagation testing"): a CRD with a ClusterPropagationPolicy.
func TestKarmada_Scheduling_LabelAndGroupConstraints_CRD(t *testing.T) {
	c := newCase(t)
	location := map[string]string{"location": "CHN-" + c.id}
	members := c.clusters("sim", clusterSpec{labels: location}, clusterSpec{labels: location}, clusterSpec{labels: location}, clusterSpec{})
	name := "bars" + c.id + ".example.karmada.io"
	c.clusterPolicy("cpp-"+c.id, policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: name}},
		Placement: policyv1alpha1.Placement{
			ClusterAffinity:   &policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: location}},
			SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MaxGroups: 2, MinGroups: 2}}}})
	binding := c.clusterTemplate(map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"group": "example.karmada.io", "scope": "Namespaced",
			"names": map[string]any{"plural": "bars" + c.id, "singular": "bar" + c.id, "kind": "Bar" + c.id, "listKind": "Bar" + c.id + "List"},
			"versions": []any{map[string]any{"name": "v1alpha1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}})
	var targets []string
	c.eventually("scheduled onto two labelled members", func() (bool, error) {
		crb, err := c.fc.WorkV1alpha1().ClusterResourceBindings().Get(c.ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		targets = placedNames(crb.Spec.Clusters)
		return meta.IsStatusConditionTrue(crb.Status.Conditions, workv1alpha1.BindingConditionScheduled) && len(targets) == 2, nil
	})
	if slices.Contains(targets, members[3]) {
		t.Fatalf("scheduled onto %s, which lacks the label", members[3])
	}
	c.waitClusterPresent(binding, targets, nil)
}

// Karmada: test/e2e/suites/base/fieldselector_test.go, Context("Deployment
// propagation testing"), It("propagation with fieldSelector testing"):
// provider In [huaweicloud], region NotIn [cn-north-1].
func TestKarmada_FieldSelector_Deployment(t *testing.T) {
	c := newCase(t)
	members := c.clusters("sim",
		clusterSpec{provider: "huaweicloud", region: "cn-south-1"},
		clusterSpec{provider: "huaweicloud", region: "cn-north-1"},
		clusterSpec{provider: "kind", region: "cn-east-1"})
	c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: members,
			FieldSelector: &policyv1alpha1.FieldSelector{MatchExpressions: []policyv1alpha1.FieldSelectorRequirement{
				{Key: "provider", Operator: corev1.NodeSelectorOpIn, Values: []string{"huaweicloud"}},
				{Key: "region", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"cn-north-1"}},
			}}}}})
	binding := c.template(deployment("nginx", 3))
	c.waitPlacedOn(binding, members[0])
}

// Karmada: test/e2e/suites/base/tainttoleration_test.go, Context("Deployment
// propagation testing"), It("deployment with cluster tolerations testing"):
// every member has a NoSchedule taint of its own name; the policy tolerates
// the first one's.
func TestKarmada_TaintToleration_Deployment(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(3)
	key := "cluster-toleration.karmada.io"
	for _, m := range members {
		c.addTaint(m, corev1.Taint{Key: key, Value: m, Effect: corev1.TaintEffectNoSchedule})
	}
	c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members...),
			ClusterTolerations: []corev1.Toleration{{Key: key, Operator: corev1.TolerationOpEqual, Value: members[0], Effect: corev1.TaintEffectNoSchedule}}}})
	binding := c.template(deployment("nginx", 3))
	c.waitPlacedOn(binding, members[0])
}

// multiAffinityCase is Karmada's Context("schedule with multi
// clusterAffinity"): term group1 selects member1 by a label, group2 member2.
func multiAffinityCase(t *testing.T) (c *tc, members []string, key1, binding string) {
	c = newCase(t)
	key1, key2 := "member1-"+c.id, "member2-"+c.id
	members = c.clusters("sim", clusterSpec{labels: map[string]string{key1: "ok"}}, clusterSpec{labels: map[string]string{key2: "ok"}})
	c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"),
		Placement: policyv1alpha1.Placement{ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{
			{AffinityName: "group1", ClusterAffinity: policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key1: "ok"}}}},
			{AffinityName: "group2", ClusterAffinity: policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key2: "ok"}}}},
		}}})
	binding = c.template(deployment("nginx", 3))
	c.waitPresent(binding, members[:1], nil)
	return c, members, key1, binding
}

func (c *tc) setClusterLabel(cluster, key, value string) {
	c.t.Helper()
	c.updateCluster(cluster, func(cl *clusterv1alpha1.Cluster) {
		if cl.Labels == nil {
			cl.Labels = map[string]string{}
		}
		cl.Labels[key] = value
	})
}

// Karmada: test/e2e/suites/base/clusteraffinities_test.go,
// Context("schedule with multi clusterAffinity"), It("propagate deployment
// and then update the cluster label").
func TestKarmada_ClusterAffinities_MultiTerm_UpdateClusterLabel(t *testing.T) {
	c, members, key1, binding := multiAffinityCase(t)
	c.setClusterLabel(members[0], key1, "not-ok")
	c.waitGone(binding, members[0])
	c.waitPresent(binding, members[1:], nil)
}

// Karmada: clusteraffinities_test.go, Context("schedule with multi
// clusterAffinity"), It("reschedule from the first cluster affinity"): after
// moving to group2, group1's cluster matches again; nothing moves until a
// WorkloadRebalancer asks, which brings it back to group1.
func TestKarmada_ClusterAffinities_MultiTerm_RescheduleFromFirstAffinity(t *testing.T) {
	c, members, key1, binding := multiAffinityCase(t)
	c.eventually("observed affinity group1", func() (bool, error) {
		rb := c.binding(binding)
		return rb != nil && rb.Status.SchedulerObservedAffinityName == "group1", nil
	})
	c.setClusterLabel(members[0], key1, "not-ok")
	c.waitGone(binding, members[0])
	c.waitPresent(binding, members[1:], nil)
	c.eventually("observed affinity group2", func() (bool, error) {
		rb := c.binding(binding)
		return rb != nil && rb.Status.SchedulerObservedAffinityName == "group2" && rb.Status.SchedulerObservedGeneration == rb.Generation, nil
	})
	c.setClusterLabel(members[0], key1, "ok")
	c.never("moved back to group1 without a rebalance", 2*time.Second, func() bool {
		rb := c.binding(binding)
		return len(rb.Spec.Clusters) != 1 || rb.Spec.Clusters[0].Name != members[1]
	})
	workload := appsv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: "nginx"}
	c.rebalance(workload)
	c.eventually("back on group1 after the rebalance", func() (bool, error) {
		rb := c.binding(binding)
		return rb != nil && len(rb.Spec.Clusters) == 1 && rb.Spec.Clusters[0].Name == members[0] &&
			rb.Status.SchedulerObservedAffinityName == "group1" && rb.Spec.RescheduleTriggeredAt != nil, nil
	})
	c.waitPresent(binding, members[:1], nil)
	c.waitGone(binding, members[1])
}

// rebalance creates a WorkloadRebalancer for the workloads, deleted when
// the case ends, and returns its name.
func (c *tc) rebalance(workloads ...appsv1alpha1.ObjectReference) string {
	c.t.Helper()
	name := "rebalance-" + c.id
	if _, err := c.fc.AppsV1alpha1().WorkloadRebalancers().Create(c.ctx, &appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1alpha1.WorkloadRebalancerSpec{Workloads: workloads}}, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = c.fc.AppsV1alpha1().WorkloadRebalancers().Delete(context.Background(), name, deleteNow) })
	return name
}

// Karmada: clusteraffinities_test.go, Context("schedule change from
// clusterAffinity to clusterAffinities"), It("propagate deployment and then
// update the cluster label").
func TestKarmada_ClusterAffinities_ChangeFromClusterAffinity(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members[0])}})
	binding := c.template(deployment("nginx", 3))
	c.waitPresent(binding, members[:1], nil)
	c.updatePolicy("nginx", func(s *policyv1alpha1.PropagationSpec) {
		s.Placement.ClusterAffinity = nil
		s.Placement.ClusterAffinities = []policyv1alpha1.ClusterAffinityTerm{{AffinityName: "group1", ClusterAffinity: *onClusters(members[1])}}
	})
	c.waitPresent(binding, members[1:], nil)
}

// Karmada: clusteraffinities_test.go, Context("schedule change from
// clusterAffinities to clusterAffinity"), It("propagate deployment and then
// update the cluster label").
func TestKarmada_ClusterAffinities_ChangeToClusterAffinity(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"),
		Placement: policyv1alpha1.Placement{ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{{AffinityName: "group1", ClusterAffinity: *onClusters(members[0])}}}})
	binding := c.template(deployment("nginx", 3))
	c.waitPresent(binding, members[:1], nil)
	c.updatePolicy("nginx", func(s *policyv1alpha1.PropagationSpec) {
		s.Placement.ClusterAffinities = nil
		s.Placement.ClusterAffinity = onClusters(members[1])
	})
	c.waitPresent(binding, members[1:], nil)
}

// Karmada: clusteraffinities_test.go, Context("schedule with multi
// clusterAffinity"), It("propagate clusterRole and then update the cluster
// label"): the same for a cluster-scoped object and a
// ClusterPropagationPolicy.
func TestKarmada_ClusterAffinities_MultiTerm_ClusterRole(t *testing.T) {
	c := newCase(t)
	key1, key2 := "member1-"+c.id, "member2-"+c.id
	members := c.clusters("sim", clusterSpec{labels: map[string]string{key1: "ok"}}, clusterSpec{labels: map[string]string{key2: "ok"}})
	name := "role-" + c.id
	c.clusterPolicy("cpp-"+c.id, policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: name}},
		Placement: policyv1alpha1.Placement{ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{
			{AffinityName: "group1", ClusterAffinity: policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key1: "ok"}}}},
			{AffinityName: "group2", ClusterAffinity: policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key2: "ok"}}}},
		}}})
	binding := c.clusterTemplate(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": name}, "rules": []any{}})
	c.waitClusterPresent(binding, members[:1], nil)
	c.setClusterLabel(members[0], key1, "not-ok")
	c.eventually("gone from member1", func() (bool, error) {
		w, _ := c.workOf("", members[0], binding)
		return w == nil, nil
	})
	c.waitClusterPresent(binding, members[1:], nil)
}
