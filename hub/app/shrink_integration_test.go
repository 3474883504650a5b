package app_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// gsPlacement is the seed's nginx placement: Divided, static weights
// member1:1 member2:2.
func gsPlacement() policyv1alpha1.Placement {
	weight := func(c string, w int64) policyv1alpha1.StaticClusterWeight {
		return policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{c}}, Weight: w}
	}
	return policyv1alpha1.Placement{
		ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}},
		ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
			WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
				weight("member1", 1), weight("member2", 2)}}}}
}

// gsFailedOver runs the seed's nginx (3 replicas, member1:1 member2:2) and
// fails member1 over: member2 runs all 3, member1's copy is gone, and
// member1 is healthy again.
func gsFailedOver(t *testing.T, ctx context.Context, fc flotillaclient.Interface) {
	t.Helper()
	sfPropagate(t, ctx, fc, 3, gsPlacement())
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 1, "member2": 2})
	sfApplied(t, fc, "member1", 1)
	sfApplied(t, fc, "member2", 2)
	sfTaint(t, ctx, fc, "member1", true)
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member2": 3})
	sfApplied(t, fc, "member2", 3)
	sfWaitTaskEndsAndWorkGone(t, ctx, fc, "member1")
	sfTaint(t, ctx, fc, "member1", false)
}

// gsWorkReplicas is the replicas the Work of the seed's nginx on cluster
// asks for, -1 when there is none.
func gsWorkReplicas(t *testing.T, ctx context.Context, fc flotillaclient.Interface, cluster string) int64 {
	t.Helper()
	w, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(ctx, workobjects.WorkName("default", sfBinding), metav1.GetOptions{})
	if err != nil {
		return -1
	}
	return replicasOf(manifestOf(t, w))
}

// A reschedule asked for (rescheduleTriggeredAt, as a WorkloadRebalancer
// or a failback sets it) divides the seed's nginx from scratch: member2
// goes from 3 to 2 while member1 gets 1 back. member2's Work keeps 3 until
// member1's copy is Healthy, so the workload never has fewer than 3;
// then it drops to 2. (Before: member2's Work went to 2 at once.)
func TestGracefulShrinkKeepsOldReplicasUntilHealthy(t *testing.T) {
	t.Parallel()
	ctx, fc := sfStartHub(t, 0, "member1", "member2")
	gsFailedOver(t, ctx, fc)

	// The rebalancer's update: a fresh schedule, reason Rebalance, history
	// cleared.
	waitUntil(t, "reschedule triggered", func() (bool, error) {
		rb := sfBindingOf(t, ctx, fc)
		rb.Spec.RescheduleTriggeredAt = gsTriggerTime(rb)
		rb.Spec.RescheduleReason = workv1alpha1.EvictionReasonRebalance
		rb.Spec.EvictionHistory = nil
		_, err := fc.WorkV1alpha1().ResourceBindings("default").Update(ctx, rb, metav1.UpdateOptions{})
		return err == nil, nil
	})
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 1, "member2": 2})
	rb := sfBindingOf(t, ctx, fc)
	if len(rb.Spec.GracefulEvictionTasks) != 1 {
		t.Fatalf("tasks after the rebalance: %+v", rb.Spec.GracefulEvictionTasks)
	}
	task := rb.Spec.GracefulEvictionTasks[0]
	if task.FromCluster != "member2" || task.Replicas == nil || *task.Replicas != 3 || task.Reason != workv1alpha1.EvictionReasonRebalance ||
		task.Producer != workv1alpha1.EvictionProducerScheduler {
		t.Fatalf("task %+v, want member2 keeping 3 (Rebalance, Scheduler)", task)
	}
	// member1's copy is created at 1; member2's stays at 3 while member1's
	// is not Healthy.
	waitWork(t, fc, "member1", "default", sfBinding, func(o *unstructured.Unstructured) bool { return replicasOf(o) == 1 })
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if got := gsWorkReplicas(t, ctx, fc, "member2"); got != 3 {
			t.Fatalf("member2's Work asks for %d replicas while member1's copy is not up; want 3", got)
		}
	}
	sfApplied(t, fc, "member1", 1)
	// The new placement is Healthy: the task ends and member2 shrinks.
	waitWork(t, fc, "member2", "default", sfBinding, func(o *unstructured.Unstructured) bool { return replicasOf(o) == 2 })
	waitUntil(t, "the shrink task ended", func() (bool, error) {
		return len(sfBindingOf(t, ctx, fc).Spec.GracefulEvictionTasks) == 0, nil
	})
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 1, "member2": 2})
}

// A cluster being shrunk gracefully that then fails: the taint manager's
// eviction replaces the shrink's task (its producer and reason, the copy's
// real size 3, an eviction history entry), the scheduler keeps the cluster
// out, and the old copy stays until member1 runs all 3. (Before: the
// shrink's task stayed, so the failure left no history and its task was
// the scheduler's.)
func TestGracefulShrinkThenClusterFailure(t *testing.T) {
	t.Parallel()
	ctx, fc := sfStartHub(t, 0, "member1", "member2")
	gsFailedOver(t, ctx, fc)
	waitUntil(t, "reschedule triggered", func() (bool, error) {
		rb := sfBindingOf(t, ctx, fc)
		rb.Spec.RescheduleTriggeredAt = gsTriggerTime(rb)
		rb.Spec.RescheduleReason = workv1alpha1.EvictionReasonRebalance
		rb.Spec.EvictionHistory = nil
		_, err := fc.WorkV1alpha1().ResourceBindings("default").Update(ctx, rb, metav1.UpdateOptions{})
		return err == nil, nil
	})
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 1, "member2": 2})
	work2 := waitWork(t, fc, "member2", "default", sfBinding, func(o *unstructured.Unstructured) bool { return replicasOf(o) == 3 })

	sfTaint(t, ctx, fc, "member2", true)
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 3})
	rb := sfBindingOf(t, ctx, fc)
	if len(rb.Spec.GracefulEvictionTasks) != 1 {
		t.Fatalf("tasks %+v", rb.Spec.GracefulEvictionTasks)
	}
	task := rb.Spec.GracefulEvictionTasks[0]
	if task.FromCluster != "member2" || task.Producer != workv1alpha1.EvictionProducerTaintManager ||
		task.Reason != workv1alpha1.EvictionReasonTaintUntolerated || task.Replicas == nil || *task.Replicas != 3 {
		t.Fatalf("task %+v, want the taint manager's for member2 with its 3", task)
	}
	if len(rb.Spec.EvictionHistory) != 1 || rb.Spec.EvictionHistory[0].ClusterName != "member2" {
		t.Fatalf("history %+v", rb.Spec.EvictionHistory)
	}
	sfWorkKept(t, ctx, fc, "member2", work2.UID)
	sfApplied(t, fc, "member1", 3)
	sfWaitTaskEndsAndWorkGone(t, ctx, fc, "member2")
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 3})
}

// gsTriggerTime is a rescheduleTriggeredAt the scheduler sees as after its
// last schedule: metav1.Time is stored to the second, so "now" in the
// same second as the last schedule would not be after it.
func gsTriggerTime(rb *workv1alpha1.ResourceBinding) *metav1.Time {
	now := metav1.Now()
	if last := rb.Status.LastScheduledTime; last != nil && !now.Truncate(time.Second).After(last.Time) {
		now = metav1.NewTime(last.Truncate(time.Second).Add(time.Second))
	}
	return &now
}
