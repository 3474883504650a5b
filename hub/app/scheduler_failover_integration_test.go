package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-io/flotilla/hub/app"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// The scheduler's failover rules (issue 17, items 2-4) against the whole hub
// and a real apiserver; the test plays the member agents.

const (
	sfBinding  = "nginx-deployment"
	sfTaintKey = "example.com/scheduler-failover"
)

// sfStartHub starts the hub with clusters that stay Ready without a Lease
// for the test, so only the test's taints move workloads, and the given
// eviction history TTL.
func sfStartHub(t *testing.T, historyTTL time.Duration, clusters ...string) (context.Context, flotillaclient.Interface) {
	t.Helper()
	ctx, fc := startHubWith(t, func(o *app.Options) {
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
		if historyTTL > 0 {
			o.EvictionHistoryTTL = historyTTL
		}
	})
	createReadyClusters(t, ctx, fc, clusters...)
	return ctx, fc
}

// sfPropagate creates a policy with placement and the nginx template with
// the given replicas.
func sfPropagate(t *testing.T, ctx context.Context, fc flotillaclient.Interface, replicas int, placement policyv1alpha1.Placement) {
	t.Helper()
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: "default"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement:         placement,
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies("default").Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates("default").Create(ctx, rtOf("default", "nginx", sfManifest(replicas)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func sfManifest(replicas int) string {
	return strings.Replace(nginxManifest, `"replicas":3`, fmt.Sprintf(`"replicas":%d`, replicas), 1)
}

// sfScale changes the template's replicas.
func sfScale(t *testing.T, ctx context.Context, fc flotillaclient.Interface, replicas int) {
	t.Helper()
	waitUntil(t, "template scaled", func() (bool, error) {
		rt, err := fc.WorkV1alpha1().ResourceTemplates("default").Get(ctx, "nginx", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rt.Spec.Manifest.Raw = []byte(sfManifest(replicas))
		_, err = fc.WorkV1alpha1().ResourceTemplates("default").Update(ctx, rt, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// sfTaint adds or removes a NoExecute taint nothing tolerates.
func sfTaint(t *testing.T, ctx context.Context, fc flotillaclient.Interface, cluster string, add bool) {
	t.Helper()
	waitUntil(t, "taint on "+cluster+" changed", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var taints []corev1.Taint
		for _, taint := range c.Spec.Taints {
			if taint.Key != sfTaintKey {
				taints = append(taints, taint)
			}
		}
		if add {
			taints = append(taints, corev1.Taint{Key: sfTaintKey, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: time.Now()}})
		}
		c.Spec.Taints = taints
		_, err = fc.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// sfSetRoom reports a resource summary with room for free more pods (of
// 110), as the cluster's agent would.
func sfSetRoom(t *testing.T, ctx context.Context, fc flotillaclient.Interface, cluster string, free int) {
	t.Helper()
	waitUntil(t, "resource summary of "+cluster+" written", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c.Status.ResourceSummary = &clusterv1alpha1.ResourceSummary{
			Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"),
				corev1.ResourceCPU: resource.MustParse("100"), corev1.ResourceMemory: resource.MustParse("400Gi")},
			Allocated: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(110-free), resource.DecimalSI)},
		}
		_, err = fc.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

func sfBindingOf(t *testing.T, ctx context.Context, fc flotillaclient.Interface) *workv1alpha1.ResourceBinding {
	t.Helper()
	rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, sfBinding, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rb
}

// sfApplied waits for cluster's Work to ask for replicas and reports it
// applied and healthy.
func sfApplied(t *testing.T, fc flotillaclient.Interface, cluster string, replicas int) *workv1alpha1.Work {
	t.Helper()
	w := waitWork(t, fc, cluster, "default", sfBinding, func(o *unstructured.Unstructured) bool { return replicasOf(o) == int64(replicas) })
	reportApplied(t, fc, w, replicas)
	return w
}

// sfWorkKept fails unless the Work with uid still exists on cluster and is
// not being deleted (the hub's finalizer holds a deleted Work until its
// agent, played by the test, lets it go, so a deletion stays visible).
func sfWorkKept(t *testing.T, ctx context.Context, fc flotillaclient.Interface, cluster string, uid types.UID) {
	t.Helper()
	w, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(ctx, workobjects.WorkName("default", sfBinding), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s's Work: %v", cluster, err)
	}
	if w.UID != uid || w.DeletionTimestamp != nil {
		t.Fatalf("%s's Work was deleted (uid %s, was %s; deletionTimestamp %v)", cluster, w.UID, uid, w.DeletionTimestamp)
	}
}

// sfWaitTaskEndsAndWorkGone waits for the binding's task for cluster to
// end and plays cluster's agent letting the old Work go.
func sfWaitTaskEndsAndWorkGone(t *testing.T, ctx context.Context, fc flotillaclient.Interface, cluster string) {
	t.Helper()
	waitUntil(t, "task for "+cluster+" ended and its Work deleted", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, sfBinding, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, task := range rb.Spec.GracefulEvictionTasks {
			if task.FromCluster == cluster {
				return false, nil
			}
		}
		w, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(ctx, workobjects.WorkName("default", sfBinding), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if w.DeletionTimestamp != nil {
			w.Finalizers = nil
			_, _ = fc.WorkV1alpha1().Works(w.Namespace).Update(ctx, w, metav1.UpdateOptions{})
		}
		return false, nil
	})
}

// sfWaitHistoryExpired waits until every eviction history entry of the
// binding is older than ttl.
func sfWaitHistoryExpired(t *testing.T, ctx context.Context, fc flotillaclient.Interface, ttl time.Duration) {
	t.Helper()
	waitUntil(t, "eviction history expired", func() (bool, error) {
		for _, h := range sfBindingOf(t, ctx, fc).Spec.EvictionHistory {
			if time.Since(h.EvictedAt.Time) <= ttl+time.Second {
				return false, nil
			}
		}
		return true, nil
	})
}

// (a) Dynamic weights: member1 is evicted; member2 is full and runs 3,
// member3 has room. The failover keeps member2's 3 and places only the
// missing 3 on member3; member2's Work is never deleted. (Before: all 6 to
// member3, member2 dropped and its Work deleted at once.)
func TestSchedulerFailoverDynamicWeightsKeepSurvivors(t *testing.T) {
	t.Parallel()
	ctx, fc := sfStartHub(t, 0, "member1", "member2", "member3")
	sfSetRoom(t, ctx, fc, "member3", 0) // nothing fits on member3 at first
	sfPropagate(t, ctx, fc, 6, policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference: &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}}})
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 3, "member2": 3})
	sfApplied(t, fc, "member1", 3)
	work2 := sfApplied(t, fc, "member2", 3)

	// member2 fills up (its 3 run there), member3 gets room. Capacity
	// alone moves nothing.
	sfSetRoom(t, ctx, fc, "member2", 0)
	sfSetRoom(t, ctx, fc, "member3", 100)
	sfTaint(t, ctx, fc, "member1", true)

	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member2": 3, "member3": 3})
	sfWorkKept(t, ctx, fc, "member2", work2.UID)
	rb := sfBindingOf(t, ctx, fc)
	if len(rb.Spec.GracefulEvictionTasks) != 1 || rb.Spec.GracefulEvictionTasks[0].FromCluster != "member1" {
		t.Fatalf("tasks after the failover: %+v", rb.Spec.GracefulEvictionTasks)
	}
	sfApplied(t, fc, "member3", 3)
	sfWaitTaskEndsAndWorkGone(t, ctx, fc, "member1")
	sfWorkKept(t, ctx, fc, "member2", work2.UID)
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member2": 3, "member3": 3})
}

// (b) Static weights 1:1:1 with 6 replicas: member1 is evicted and the
// survivors each keep 2 and get 1 more. member1 returns; a scale-up to 7
// then adds the new replica without shrinking a survivor (before: the
// re-division 3/2/2 took one from member2 or member3).
func TestSchedulerFailoverStaticWeightsKeepSurvivors(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	ctx, fc := sfStartHub(t, ttl, "member1", "member2", "member3")
	weights := &policyv1alpha1.ClusterPreferences{}
	for _, c := range []string{"member1", "member2", "member3"} {
		weights.StaticWeightList = append(weights.StaticWeightList, policyv1alpha1.StaticClusterWeight{
			TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{c}}, Weight: 1})
	}
	sfPropagate(t, ctx, fc, 6, policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference: weights}})
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 2, "member2": 2, "member3": 2})
	sfApplied(t, fc, "member1", 2)
	w2, w3 := sfApplied(t, fc, "member2", 2), sfApplied(t, fc, "member3", 2)

	sfTaint(t, ctx, fc, "member1", true)
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member2": 3, "member3": 3})
	sfApplied(t, fc, "member2", 3)
	sfApplied(t, fc, "member3", 3)
	sfWaitTaskEndsAndWorkGone(t, ctx, fc, "member1")

	// member1 is healthy again and its eviction is history.
	sfTaint(t, ctx, fc, "member1", false)
	sfWaitHistoryExpired(t, ctx, fc, ttl)
	sfScale(t, ctx, fc, 7)
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 1, "member2": 3, "member3": 3})
	sfWorkKept(t, ctx, fc, "member2", w2.UID)
	sfWorkKept(t, ctx, fc, "member3", w3.UID)
}

// (c) clusterAffinities [primary: member1, backup: member2]: member1 is
// evicted and the workload fails over to the backup term. Once member1 is
// healthy again and the eviction history has expired, the binding stays on
// the backup term (Cluster changes and a scale-up reschedule it), and
// member2's Work is never deleted. (Before: back to the primary, member2's
// Work deleted with no task.)
func TestSchedulerAffinityTermsResumeFromBackup(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	ctx, fc := sfStartHub(t, ttl, "member1", "member2")
	sfPropagate(t, ctx, fc, 3, policyv1alpha1.Placement{ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{
		{AffinityName: "primary", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}},
		{AffinityName: "backup", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}},
	}})
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 3})
	sfApplied(t, fc, "member1", 3)

	sfTaint(t, ctx, fc, "member1", true)
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member2": 3})
	w2 := sfApplied(t, fc, "member2", 3)
	sfWaitTaskEndsAndWorkGone(t, ctx, fc, "member1")

	sfTaint(t, ctx, fc, "member1", false)
	sfWaitHistoryExpired(t, ctx, fc, ttl)
	// A Cluster change re-checks the (Duplicated) binding; a scale-up
	// reschedules it for sure.
	waitUntil(t, "member1 labelled", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		c.Labels["example.com/back"] = "true"
		_, err = fc.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
		return err == nil, nil
	})
	sfScale(t, ctx, fc, 4)
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member2": 4})
	rb := sfBindingOf(t, ctx, fc)
	if rb.Status.SchedulerObservedAffinityName != "backup" {
		t.Fatalf("observed affinity %q, want backup", rb.Status.SchedulerObservedAffinityName)
	}
	sfApplied(t, fc, "member2", 4)
	sfWorkKept(t, ctx, fc, "member2", w2.UID)
	if _, err := fc.WorkV1alpha1().Works("flotilla-es-member1").Get(ctx, workobjects.WorkName("default", sfBinding), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("member1 got a Work again: %v", err)
	}
}

// (d) A placement change that drops member1 removes it through a graceful
// task with reason Rescheduled: member1's Work stays until member2 reports
// the new placement Healthy, then goes. (Before: deleted at once.)
func TestSchedulerPlacementChangeRemovesGracefully(t *testing.T) {
	t.Parallel()
	ctx, fc := sfStartHub(t, 0, "member1", "member2")
	strategy := &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
			{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}, Weight: 1},
			{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}, Weight: 1}}}}
	sfPropagate(t, ctx, fc, 4, policyv1alpha1.Placement{
		ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}}, ReplicaScheduling: strategy})
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 2, "member2": 2})
	w1 := sfApplied(t, fc, "member1", 2)
	sfApplied(t, fc, "member2", 2)

	waitUntil(t, "policy narrowed to member2", func() (bool, error) {
		p, err := fc.PolicyV1alpha1().PropagationPolicies("default").Get(ctx, "nginx", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		p.Spec.Placement.ClusterAffinity.ClusterNames = []string{"member2"}
		_, err = fc.PolicyV1alpha1().PropagationPolicies("default").Update(ctx, p, metav1.UpdateOptions{})
		return err == nil, nil
	})
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member2": 4})
	rb := sfBindingOf(t, ctx, fc)
	if len(rb.Spec.GracefulEvictionTasks) != 1 {
		t.Fatalf("tasks after the placement change: %+v", rb.Spec.GracefulEvictionTasks)
	}
	task := rb.Spec.GracefulEvictionTasks[0]
	if task.FromCluster != "member1" || task.Reason != workv1alpha1.EvictionReasonRescheduled ||
		task.Producer != workv1alpha1.EvictionProducerScheduler || task.Replicas == nil || *task.Replicas != 2 {
		t.Fatalf("task %+v", task)
	}
	if len(rb.Spec.EvictionHistory) != 0 {
		t.Fatalf("a placement change is not a failure, yet history %+v", rb.Spec.EvictionHistory)
	}
	// member2's new Work (4) has not reported: member1's copy stays.
	waitWork(t, fc, "member2", "default", sfBinding, func(o *unstructured.Unstructured) bool { return replicasOf(o) == 4 })
	for range 20 {
		sfWorkKept(t, ctx, fc, "member1", w1.UID)
		time.Sleep(50 * time.Millisecond)
	}
	sfApplied(t, fc, "member2", 4)
	sfWaitTaskEndsAndWorkGone(t, ctx, fc, "member1")
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member2": 4})
}

// A placement change undone while the scheduler's task is open: member1 is
// placed again with its old replicas, the task goes, and member1's Work was
// never deleted (its copy never left). (Before: deleted at the first change.)
func TestSchedulerPlacementChangeUndoneKeepsCopy(t *testing.T) {
	t.Parallel()
	ctx, fc := sfStartHub(t, 0, "member1", "member2")
	strategy := &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
			{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}, Weight: 1},
			{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}, Weight: 1}}}}
	sfPropagate(t, ctx, fc, 4, policyv1alpha1.Placement{
		ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}}, ReplicaScheduling: strategy})
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 2, "member2": 2})
	w1 := sfApplied(t, fc, "member1", 2)
	sfApplied(t, fc, "member2", 2)

	setNames := func(names ...string) {
		waitUntil(t, fmt.Sprintf("policy placed on %v", names), func() (bool, error) {
			p, err := fc.PolicyV1alpha1().PropagationPolicies("default").Get(ctx, "nginx", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			p.Spec.Placement.ClusterAffinity.ClusterNames = names
			_, err = fc.PolicyV1alpha1().PropagationPolicies("default").Update(ctx, p, metav1.UpdateOptions{})
			return err == nil, nil
		})
	}
	setNames("member2")
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member2": 4})
	if tasks := sfBindingOf(t, ctx, fc).Spec.GracefulEvictionTasks; len(tasks) != 1 || tasks[0].Reason != workv1alpha1.EvictionReasonRescheduled {
		t.Fatalf("tasks after narrowing: %+v", tasks)
	}
	sfWorkKept(t, ctx, fc, "member1", w1.UID)

	// Undone before member2's new copy reported.
	setNames("member1", "member2")
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 2, "member2": 2})
	waitUntil(t, "the scheduler's task dropped", func() (bool, error) {
		return len(sfBindingOf(t, ctx, fc).Spec.GracefulEvictionTasks) == 0, nil
	})
	sfWorkKept(t, ctx, fc, "member1", w1.UID)
	sfApplied(t, fc, "member2", 2)
	sfWorkKept(t, ctx, fc, "member1", w1.UID)
}

// Unknown is not infinite: Aggregated fails over onto the cluster that
// reports room, not onto a Ready cluster that never reported a resource
// summary. (Before: its unknown capacity counted as infinite and it got
// every replica.)
func TestSchedulerAggregatedUnknownCapacityGetsNothing(t *testing.T) {
	t.Parallel()
	ctx, fc := sfStartHub(t, 0, "member1")
	sfPropagate(t, ctx, fc, 3, policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated}})
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 3})
	sfApplied(t, fc, "member1", 3)

	// member2 is Ready but has reported no capacity; member3 has room for 5.
	created, err := fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member2"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "member2 Ready without a resource summary", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue,
			Reason: "ClusterReady", Message: "set by the test", LastTransitionTime: metav1.Now()}}
		_, err = fc.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err == nil, nil
	})
	createReadyClusters(t, ctx, fc, "member3")
	sfSetRoom(t, ctx, fc, "member3", 5)

	sfTaint(t, ctx, fc, "member1", true)
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member3": 3})
}

// Eviction history is a preference, not a deadlock: Duplicated on exactly
// 2 of [member1, member2, member3]. member1 is evicted and member3 takes
// its place; member1 recovers; then member3 is evicted too. The only way
// to keep 2 clusters is member1, evicted minutes ago: it is taken back.
// (Before: Scheduled=False for the history TTL, running on member2 alone.)
func TestSchedulerEvictionHistoryIsAPreference(t *testing.T) {
	t.Parallel()
	ctx, fc := sfStartHub(t, 0, "member1", "member2", "member3")
	sfPropagate(t, ctx, fc, 2, policyv1alpha1.Placement{
		SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 2, MaxGroups: 2}},
		ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}})
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 2, "member2": 2})
	sfApplied(t, fc, "member1", 2)
	sfApplied(t, fc, "member2", 2)

	sfTaint(t, ctx, fc, "member1", true)
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member2": 2, "member3": 2})
	sfApplied(t, fc, "member3", 2)
	sfApplied(t, fc, "member2", 2)
	sfWaitTaskEndsAndWorkGone(t, ctx, fc, "member1")
	sfTaint(t, ctx, fc, "member1", false)

	sfTaint(t, ctx, fc, "member3", true)
	waitReplicas(t, fc, "default", sfBinding, map[string]int32{"member1": 2, "member2": 2})
}
