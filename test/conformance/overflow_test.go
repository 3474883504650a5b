package conformance

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/failback"
)

// overflowAffinitiesPlacement is Karmada's placement of its overflow case:
// the primary cluster first, spilling to the secondary overflow affinity
// only when the primary has no room; Divided, Aggregated, so the primary
// fills before anything overflows.
func overflowAffinitiesPlacement(primary, secondary string) policyv1alpha1.Placement {
	return policyv1alpha1.Placement{
		ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{{AffinityName: "primary",
			ClusterAffinity: *onClusters(primary),
			OverflowAffinities: []policyv1alpha1.OverflowClusterAffinity{{AffinityName: "secondary",
				ClusterAffinity: *onClusters(secondary)}}}},
		ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated},
	}
}

// setRoom writes the cluster's resourceSummary as its agent would report
// it with room for free more pods (the case's Deployment requests 100m CPU
// per replica, so pods are what limits it). Karmada's case caps each
// cluster with a ResourceQuota its estimator reads; the room an agent
// reports is Flotilla's equivalent, and like a quota it shrinks by what
// runs there.
func (c *tc) setRoom(cluster string, free int) {
	c.t.Helper()
	c.eventually(fmt.Sprintf("room for %d on %s reported", free, cluster), func() (bool, error) {
		cl, err := c.fc.ClusterV1alpha1().Clusters().Get(c.ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cl.Status.ResourceSummary = &clusterv1alpha1.ResourceSummary{
			Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"),
				corev1.ResourceCPU: resource.MustParse("100"), corev1.ResourceMemory: resource.MustParse("400Gi")},
			Allocated: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(110-free), resource.DecimalSI)},
		}
		_, err = c.fc.ClusterV1alpha1().Clusters().UpdateStatus(c.ctx, cl, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// Karmada: test/e2e/suites/base/clusteraffinities_test.go,
// When("[OverflowAffinities] replica scheduling with overflow affinities"),
// Context("scale-up and scale-down with overflow affinities"), It("should
// expand to secondary on scale-up and retract from secondary on
// scale-down"): each cluster has room for 2 replicas. 2 replicas go to the
// primary group only; scaled to 4, the primary keeps 2 and 2 overflow to
// the secondary; scaled to 5 (more than both have room for) scheduling
// fails; scaled back to 2, the replicas leave the secondary first and its
// copy goes.
//
// Karmada's quota becomes the room the members report (setRoom), reported
// again, as an agent would, once replicas run there. What runs stays while
// scheduling fails (Karmada's too: a failed schedule changes nothing).
func TestKarmada_ClusterAffinities_Overflow_ScaleUpAndDown(t *testing.T) {
	c := newCase(t)
	const maxReplicas = 2
	members := c.simClusters(2)
	primary, secondary := members[0], members[1]
	c.setRoom(primary, maxReplicas)
	c.setRoom(secondary, maxReplicas)
	c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"),
		Placement: overflowAffinitiesPlacement(primary, secondary)})
	binding := c.template(deployment("nginx", maxReplicas))

	// Replicas go to the primary group only while it has room.
	c.waitScheduled(binding, map[string]int32{primary: maxReplicas})
	c.eventually("scheduled on the term primary", func() (bool, error) {
		return c.binding(binding).Status.SchedulerObservedAffinityName == "primary", nil
	})
	c.waitPresent(binding, []string{primary}, nil)
	c.setRoom(primary, 0)

	// Scale up: the primary is full, the new replicas overflow.
	c.updateTemplate("nginx", setReplicas(2*maxReplicas))
	c.waitScheduled(binding, map[string]int32{primary: maxReplicas, secondary: maxReplicas})
	c.waitPresent(binding, members, nil)
	c.setRoom(secondary, 0)

	// More than both groups have room for: Scheduled=False, what runs stays.
	c.updateTemplate("nginx", setReplicas(2*maxReplicas+1))
	c.eventually("Scheduled=False: no room in the primary or overflow group", func() (bool, error) {
		rb := c.binding(binding)
		cond := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionScheduled)
		if rb.Spec.Replicas != 2*maxReplicas+1 || cond == nil || cond.Status != metav1.ConditionFalse {
			return false, nil
		}
		if !strings.Contains(cond.Message, "room") {
			return false, fmt.Errorf("Scheduled=False without naming the room: %q", cond.Message)
		}
		return true, nil
	})
	if got := placed(c.binding(binding).Spec.Clusters); got[primary] != maxReplicas || got[secondary] != maxReplicas || len(got) != 2 {
		t.Fatalf("a failed schedule changed what runs: %v", got)
	}

	// Scale down: the overflow group gives its replicas back first.
	c.updateTemplate("nginx", setReplicas(maxReplicas))
	c.waitScheduled(binding, map[string]int32{primary: maxReplicas})
	c.waitGone(binding, secondary)
}

// Flotilla addition, no Karmada test: Karmada's overflow proposal leaves
// replicas on the overflow group when the preferred group has room again
// ("to avoid replica flapping"; a WorkloadRebalancer moves them). With
// failover.failback on the same placement, Flotilla brings them back once
// the primary has had room for the stabilization window, and not while it
// is full (docs/failover.md "Overflow come-back").
func TestKarmada_ClusterAffinities_Overflow_ComeBackWithFailback(t *testing.T) {
	c := newCase(t)
	const window = 2
	// The primary is full from its first report (clusterSpec.noRoom): a
	// setRoom(primary, 0) here could reach the hub's cache after the
	// template's first schedule, which would then place on the primary.
	members := c.clusters("sim", clusterSpec{noRoom: true}, clusterSpec{})
	primary, secondary := members[0], members[1]
	c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"),
		Placement: overflowAffinitiesPlacement(primary, secondary),
		Failover:  &policyv1alpha1.FailoverBehavior{Failback: &policyv1alpha1.FailbackBehavior{StabilizationWindowSeconds: window}}})
	binding := c.template(deployment("nginx", 2))
	c.waitScheduled(binding, map[string]int32{secondary: 2})
	c.waitPresent(binding, []string{secondary}, nil)

	// Full for longer than a window: nothing comes back.
	c.never("replicas moved while the primary group is full", (window+1)*time.Second, func() bool {
		return placed(c.binding(binding).Spec.Clusters)[secondary] != 2
	})

	roomAt := time.Now()
	c.setRoom(primary, 2)
	rb := c.waitScheduled(binding, map[string]int32{primary: 2})
	if rb.Spec.RescheduleReason != workv1alpha1.EvictionReasonFailback {
		t.Fatalf("came back with reason %q, want %s", rb.Spec.RescheduleReason, workv1alpha1.EvictionReasonFailback)
	}
	// API timestamps have second precision.
	if earliest := roomAt.Add(window*time.Second - time.Second); rb.Spec.RescheduleTriggeredAt == nil || rb.Spec.RescheduleTriggeredAt.Time.Before(earliest) {
		t.Fatalf("came back at %v, before the room (from %s) had held for the %d s window", rb.Spec.RescheduleTriggeredAt, roomAt, window)
	}
	c.waitEvent(failback.EventFailbackStarted, fmt.Sprintf("come back to %s(0→2)", primary))
	c.waitPresent(binding, []string{primary}, nil)
	c.waitGone(binding, secondary)
}
