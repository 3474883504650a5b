package scheduler

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillafake "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
)

// startedController is a scheduler on client with synced caches and no
// actions recorded yet.
func startedController(t *testing.T, ctx context.Context, client *flotillafake.Clientset) *Controller {
	t.Helper()
	factory := flotillainformers.NewSharedInformerFactory(client, 0)
	c := NewController(client, factory, Options{EvictionHistoryTTL: 10 * time.Minute,
		Clock: clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))})
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("caches did not sync")
	}
	client.ClearActions()
	return c
}

// syncOnce runs one sync of the binding against a fake apiserver holding
// objs and returns the write actions it made and the binding afterwards.
func syncOnce(t *testing.T, binding *workv1alpha1.ResourceBinding, objs ...runtime.Object) ([]string, *workv1alpha1.ResourceBinding) {
	t.Helper()
	client := flotillafake.NewSimpleClientset(append(objs, binding)...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startedController(t, ctx, client)
	if err := c.sync(ctx, binding.Namespace+"/"+binding.Name); err != nil {
		t.Fatal(err)
	}
	var writes []string
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			writes = append(writes, a.GetVerb()+" "+a.GetSubresource())
		}
	}
	got, err := client.WorkV1alpha1().ResourceBindings(binding.Namespace).Get(ctx, binding.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return writes, got
}

// A Duplicated binding on its backup term is re-checked on a Cluster
// change: with the primary healthy again it stays on the backup, and
// nothing is written.
func TestSyncDuplicatedOnBackupTermWritesNothing(t *testing.T) {
	placement := &policyv1alpha1.Placement{ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{
		{AffinityName: "primary", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}},
		{AffinityName: "backup", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}}}}
	scheduledAt := metav1.NewTime(time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC))
	binding := &workv1alpha1.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-deployment", Namespace: "default", Generation: 3,
			Annotations: map[string]string{AnnotationScheduledPlacement: placementJSON(placement)}},
		Spec: workv1alpha1.ResourceBindingSpec{Placement: placement, Replicas: 2,
			Clusters: []workv1alpha1.TargetCluster{{Name: "member2", Replicas: 2}}},
		Status: workv1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: 3, SchedulerObservedAffinityName: "backup",
			LastScheduledTime: &scheduledAt,
			Conditions: []metav1.Condition{{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue,
				Reason: ReasonScheduled, Message: "scheduled to member2(2)", ObservedGeneration: 3, LastTransitionTime: scheduledAt}}},
	}
	clusters := []runtime.Object{&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"}},
		&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member2"}}}
	if got := Trigger(binding, []*clusterv1alpha1.Cluster{clusters[0].(*clusterv1alpha1.Cluster), clusters[1].(*clusterv1alpha1.Cluster)}); got != TypeDuplicated {
		t.Fatalf("Trigger = %q, want %q", got, TypeDuplicated)
	}
	writes, got := syncOnce(t, binding, clusters...)
	if len(writes) != 0 {
		t.Errorf("a re-check that changed nothing wrote %v", writes)
	}
	if len(got.Spec.Clusters) != 1 || got.Spec.Clusters[0].Name != "member2" {
		t.Errorf("clusters %v, want member2 kept", got.Spec.Clusters)
	}
}

// A placement change that drops a cluster writes the graceful task in the
// same update as the new result.
func TestSyncPlacementChangeAddsTaskInSameUpdate(t *testing.T) {
	old := &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}}}
	placement := &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}}
	scheduledAt := metav1.NewTime(time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC))
	binding := &workv1alpha1.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-deployment", Namespace: "default", Generation: 2,
			Annotations: map[string]string{AnnotationScheduledPlacement: placementJSON(old)}},
		Spec: workv1alpha1.ResourceBindingSpec{Placement: placement, Replicas: 2,
			Clusters: []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 2}, {Name: "member2", Replicas: 2}}},
		Status: workv1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: 1, LastScheduledTime: &scheduledAt,
			Conditions: []metav1.Condition{{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue, Reason: ReasonScheduled}}},
	}
	writes, got := syncOnce(t, binding, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"}},
		&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member2"}})
	if len(writes) == 0 || writes[0] != "update " {
		t.Fatalf("writes %v, want the spec update first", writes)
	}
	if len(got.Spec.Clusters) != 1 || got.Spec.Clusters[0].Name != "member2" || len(got.Spec.GracefulEvictionTasks) != 1 ||
		got.Spec.GracefulEvictionTasks[0].FromCluster != "member1" || got.Spec.GracefulEvictionTasks[0].Reason != workv1alpha1.EvictionReasonRescheduled {
		t.Fatalf("spec %+v", got.Spec)
	}
}

// Issue 31 item 3: a placement changed to spread constraints the fleet
// cannot meet (three regions, two exist) is Scheduled=False naming the
// constraint, and what runs stays: the binding's clusters are not touched
// and no eviction task is written.
func TestSyncUnsatisfiableSpreadKeepsWhatRuns(t *testing.T) {
	old := &policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}}
	placement := old.DeepCopy()
	placement.SpreadConstraints = []policyv1alpha1.SpreadConstraint{
		{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 1, MaxGroups: 1},
		{SpreadByField: policyv1alpha1.SpreadByFieldRegion, MinGroups: 3, MaxGroups: 3}}
	scheduledAt := metav1.NewTime(time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC))
	binding := &workv1alpha1.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-deployment", Namespace: "default", Generation: 2,
			Annotations: map[string]string{AnnotationScheduledPlacement: placementJSON(old)}},
		Spec: workv1alpha1.ResourceBindingSpec{Placement: placement, Replicas: 2,
			Clusters: []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 2}, {Name: "member2", Replicas: 2}}},
		Status: workv1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: 1, LastScheduledTime: &scheduledAt,
			Conditions: []metav1.Condition{{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue, Reason: ReasonScheduled}}},
	}
	ready := []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue}}
	var clusters []runtime.Object
	for name, region := range map[string]string{"member1": "r1", "member2": "r2", "member3": "r2"} {
		clusters = append(clusters, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: clusterv1alpha1.ClusterSpec{Region: region}, Status: clusterv1alpha1.ClusterStatus{Conditions: ready}})
	}
	_, got := syncOnce(t, binding, clusters...)
	if len(got.Spec.Clusters) != 2 || len(got.Spec.GracefulEvictionTasks) != 0 {
		t.Fatalf("what ran moved: clusters %v, tasks %v", got.Spec.Clusters, got.Spec.GracefulEvictionTasks)
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, workv1alpha1.BindingConditionScheduled)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != ReasonNoClusterFit ||
		!strings.Contains(cond.Message, "the spread constraint by region needs at least 3 groups and 2 are available") {
		t.Fatalf("Scheduled = %+v", cond)
	}
}
