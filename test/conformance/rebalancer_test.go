package conformance

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/apps/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// rebalancerCase is Karmada's Describe("workload rebalancer testing"): a
// ClusterPropagationPolicy onto two members selects a Deployment, a second
// Deployment and a ClusterRole; the rebalancer names the first Deployment,
// the ClusterRole and a Deployment that does not exist.
type rebalancerCase struct {
	*tc
	members                    []string
	deploy, added, notExist    appsv1alpha1.ObjectReference
	role                       appsv1alpha1.ObjectReference
	deployBinding, roleBinding string
	taint                      corev1.Taint
}

func newRebalancerCase(t *testing.T, strategy *policyv1alpha1.ReplicaSchedulingStrategy) *rebalancerCase {
	c := newCase(t)
	r := &rebalancerCase{tc: c, members: c.simClusters(2)}
	r.deploy = appsv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: "deploy"}
	r.notExist = appsv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: "deploy-2"}
	r.added = appsv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: "deploy-3"}
	r.role = appsv1alpha1.ObjectReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "role-" + c.id}
	r.taint = corev1.Taint{Key: "workload-rebalancer-test-" + c.id, Effect: corev1.TaintEffectNoExecute}
	c.clusterPolicy("cpp-"+c.id, policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{
			{APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: "deploy"},
			{APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: "deploy-3"},
			{APIVersion: r.role.APIVersion, Kind: "ClusterRole", Name: r.role.Name},
		},
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(r.members...), ReplicaScheduling: strategy,
			ClusterTolerations: []corev1.Toleration{{Key: r.taint.Key, Effect: r.taint.Effect, Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To[int64](0)}}}})
	r.deployBinding = c.template(deployment("deploy", 3))
	c.template(deployment("deploy-3", 3))
	r.roleBinding = c.clusterTemplate(map[string]any{"apiVersion": r.role.APIVersion, "kind": "ClusterRole", "metadata": map[string]any{"name": r.role.Name}, "rules": []any{}})
	return r
}

// waitObserved waits until the rebalancer reports exactly want, in any order.
func (r *rebalancerCase) waitObserved(name string, want ...appsv1alpha1.ObservedWorkload) {
	r.t.Helper()
	r.eventually(fmt.Sprintf("rebalancer %s observes %v", name, want), func() (bool, error) {
		wr, err := r.fc.AppsV1alpha1().WorkloadRebalancers().Get(r.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got := wr.Status.ObservedWorkloads
		if len(got) != len(want) {
			return false, fmt.Errorf("observed %+v", got)
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false, fmt.Errorf("observed %+v", got)
			}
		}
		return true, nil
	})
}

// rescheduledSince waits until the binding was rescheduled on request
// after since, as Karmada's bindingHasRescheduled checks it.
func (r *rebalancerCase) rescheduledSince(get func() (*workv1alpha1.ResourceBindingSpec, *workv1alpha1.ResourceBindingStatus), since metav1.Time) {
	r.t.Helper()
	r.eventually("binding rescheduled by the rebalancer", func() (bool, error) {
		spec, status := get()
		return spec != nil && spec.RescheduleTriggeredAt != nil && !spec.RescheduleTriggeredAt.Before(&since) &&
			status.LastScheduledTime != nil && !status.LastScheduledTime.Before(spec.RescheduleTriggeredAt), nil
	})
}

func (r *rebalancerCase) deploySpec() (*workv1alpha1.ResourceBindingSpec, *workv1alpha1.ResourceBindingStatus) {
	rb := r.binding(r.deployBinding)
	if rb == nil {
		return nil, nil
	}
	return &rb.Spec, &rb.Status
}

func (r *rebalancerCase) roleSpec() (*workv1alpha1.ResourceBindingSpec, *workv1alpha1.ResourceBindingStatus) {
	crb, err := r.fc.WorkV1alpha1().ClusterResourceBindings().Get(r.ctx, r.roleBinding, metav1.GetOptions{})
	if err != nil {
		return nil, nil
	}
	return &crb.Spec, &crb.Status
}

// run is the steps every Karmada rebalancer case shares after the first
// schedule (and, for weighted strategies, the failover that skews it):
// the rebalancer, its results, a change of its workloads and its TTL.
func (r *rebalancerCase) run(back func()) {
	r.t.Helper()
	name := r.rebalance(r.deploy, r.role, r.notExist)
	wr, err := r.fc.AppsV1alpha1().WorkloadRebalancers().Get(r.ctx, name, metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	back()
	successful := func(ref appsv1alpha1.ObjectReference) appsv1alpha1.ObservedWorkload {
		return appsv1alpha1.ObservedWorkload{Workload: ref, Result: appsv1alpha1.RebalanceSuccessful}
	}
	r.waitObserved(name, successful(r.deploy), successful(r.role),
		appsv1alpha1.ObservedWorkload{Workload: r.notExist, Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound})
	r.rescheduledSince(r.deploySpec, wr.CreationTimestamp)
	r.rescheduledSince(r.roleSpec, wr.CreationTimestamp)

	// The workloads change to {role, added}: the removed ones keep their
	// results, the new one is rescheduled.
	r.eventually("rebalancer workloads updated", func() (bool, error) {
		cur, err := r.fc.AppsV1alpha1().WorkloadRebalancers().Get(r.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cur.Spec.Workloads = []appsv1alpha1.ObjectReference{r.role, r.added}
		_, err = r.fc.AppsV1alpha1().WorkloadRebalancers().Update(r.ctx, cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
	r.waitObserved(name, successful(r.deploy), successful(r.added), successful(r.role))

	// ttlSecondsAfterFinished deletes it.
	r.eventually("rebalancer TTL set", func() (bool, error) {
		cur, err := r.fc.AppsV1alpha1().WorkloadRebalancers().Get(r.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cur.Spec.TTLSecondsAfterFinished = ptr.To[int32](1)
		_, err = r.fc.AppsV1alpha1().WorkloadRebalancers().Update(r.ctx, cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
	r.eventually("rebalancer deleted after its TTL", func() (bool, error) {
		_, err := r.fc.AppsV1alpha1().WorkloadRebalancers().Get(r.ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// skewAndRun is steps 1–3 of the weighted cases: both members, then the
// first one tainted by hand, without timeAdded as Karmada's test does
// (tolerated 0 s), so that everything moves to the second, the eviction
// done, the taint removed; the rebalancer then brings the Deployment back
// onto both.
func (r *rebalancerCase) skewAndRun() {
	r.t.Helper()
	r.waitPlacedOn(r.deployBinding, r.members...)
	r.waitClusterPresent(r.roleBinding, r.members, nil)
	r.addTaint(r.members[0], r.taint)
	r.waitPlacedOn(r.deployBinding, r.members[1])
	r.waitTaintStamped(r.members[0], r.taint)
	r.eventually("graceful eviction tasks done", func() (bool, error) {
		rb := r.binding(r.deployBinding)
		return rb != nil && len(rb.Spec.GracefulEvictionTasks) == 0, nil
	})
	r.removeTaint(r.members[0], r.taint)
	r.never("moved back without a rebalance", 2*time.Second, func() bool {
		return len(r.binding(r.deployBinding).Spec.Clusters) != 1
	})
	r.run(func() { r.waitPlacedOn(r.deployBinding, r.members...) })
}

// Karmada: test/e2e/suites/base/workloadrebalancer_test.go,
// Context("dynamic weight schedule type"), It("reschedule when policy is
// dynamic weight schedule type").
func TestKarmada_WorkloadRebalancer_DynamicWeight(t *testing.T) {
	r := newRebalancerCase(t, &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}})
	r.skewAndRun()
}

// Karmada: workloadrebalancer_test.go, Context("dynamic weight schedule
// type"), It("create rebalancer with ttl and verify it can auto clean").
func TestKarmada_WorkloadRebalancer_TTLAutoClean(t *testing.T) {
	r := newRebalancerCase(t, &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}})
	name := "rebalance-ttl-" + r.id
	if _, err := r.fc.AppsV1alpha1().WorkloadRebalancers().Create(r.ctx, &appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1alpha1.WorkloadRebalancerSpec{Workloads: []appsv1alpha1.ObjectReference{r.deploy, r.role, r.notExist}, TTLSecondsAfterFinished: ptr.To[int32](2)}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.eventually("rebalancer deleted after its TTL", func() (bool, error) {
		_, err := r.fc.AppsV1alpha1().WorkloadRebalancers().Get(r.ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// Karmada: workloadrebalancer_test.go, Context("static weight schedule
// type"), It("reschedule when policy is static weight schedule type"):
// weights 2:1.
func TestKarmada_WorkloadRebalancer_StaticWeight(t *testing.T) {
	c := &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted}
	r := newRebalancerCase(t, c)
	// The weights name the case's members, known only now.
	r.eventually("static weights 2:1", func() (bool, error) {
		p, err := r.fc.PolicyV1alpha1().ClusterPropagationPolicies().Get(r.ctx, "cpp-"+r.id, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		p.Spec.Placement.ReplicaScheduling.WeightPreference = &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
			{TargetCluster: *onClusters(r.members[0]), Weight: 2}, {TargetCluster: *onClusters(r.members[1]), Weight: 1}}}
		_, err = r.fc.PolicyV1alpha1().ClusterPropagationPolicies().Update(r.ctx, p, metav1.UpdateOptions{})
		return err == nil, nil
	})
	r.waitScheduled(r.deployBinding, map[string]int32{r.members[0]: 2, r.members[1]: 1})
	r.skewAndRun()
	r.waitScheduled(r.deployBinding, map[string]int32{r.members[0]: 2, r.members[1]: 1})
}

// Karmada: workloadrebalancer_test.go, Context("aggregated schedule type"),
// It("reschedule when policy is aggregated schedule type"): the Deployment
// on one of the two members, the ClusterRole on both; the rebalancer
// reschedules and reports as in the weighted cases.
func TestKarmada_WorkloadRebalancer_Aggregated(t *testing.T) {
	r := newRebalancerCase(t, &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated})
	r.eventually("deploy on one member", func() (bool, error) {
		rb := r.binding(r.deployBinding)
		return rb != nil && len(rb.Spec.Clusters) == 1 && rb.Spec.Clusters[0].Replicas == 3, nil
	})
	r.waitClusterPresent(r.roleBinding, r.members, nil)
	r.run(func() {})
}
