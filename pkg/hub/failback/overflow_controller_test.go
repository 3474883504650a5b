package failback

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillafake "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
)

// The controller around decideOverflow: room first seen starts the window
// (no write), the come-back after it records the placement before, and a
// come-back whose new replicas never become healthy is rolled back to
// exactly that placement and not tried again.
func TestSyncOverflowComeBackAndRollback(t *testing.T) {
	spec, status := overflowedSpec()
	binding := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "web-deployment", Namespace: "default"}, Spec: spec, Status: status}
	clusters := []*clusterv1alpha1.Cluster{withRoom(readyCluster("member1", t0.Add(-time.Hour), ""), 1), withRoom(readyCluster("member2", t0.Add(-time.Hour), ""), 100)}
	client := flotillafake.NewSimpleClientset(binding, clusters[0], clusters[1])
	factory := flotillainformers.NewSharedInformerFactory(client, 0)
	clock := clocktesting.NewFakeClock(t0)
	c := NewController(client, factory, Options{Clock: clock, Recorder: record.NewFakeRecorder(10), Timeout: 10 * time.Minute, EvictionHistoryTTL: 10 * time.Minute})
	bindings := factory.Work().V1alpha1().ResourceBindings().Informer().GetIndexer()
	if err := bindings.Add(binding); err != nil {
		t.Fatal(err)
	}
	for _, cl := range clusters {
		if err := factory.Cluster().V1alpha1().Clusters().Informer().GetIndexer().Add(cl); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	key := "default/web-deployment"
	updates := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "update" {
				n++
			}
		}
		return n
	}
	get := func() *workv1alpha1.ResourceBinding {
		b, err := client.WorkV1alpha1().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sync := func() {
		t.Helper()
		if err := c.sync(ctx, key); err != nil {
			t.Fatal(err)
		}
	}

	sync()
	clock.Step(30 * time.Second)
	sync()
	if n := updates(); n != 0 {
		t.Fatalf("%d updates within the window", n)
	}
	clock.Step(31 * time.Second)
	sync()
	b := get()
	if !fbStarted(b) {
		t.Fatalf("no come-back after the window: %+v", b.Spec)
	}
	var before []workv1alpha1.TargetCluster
	if err := json.Unmarshal([]byte(b.Annotations[AnnotationClustersBefore]), &before); err != nil || !slices.Equal(before, spec.Clusters) {
		t.Fatalf("recorded placement %q, want %v", b.Annotations[AnnotationClustersBefore], spec.Clusters)
	}

	// The scheduler's come-back: member1(4), member2 kept by a Failback task.
	one := int32(1)
	created := metav1.NewTime(clock.Now())
	b.Spec.Clusters = []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 4}}
	b.Spec.GracefulEvictionTasks = []workv1alpha1.GracefulEvictionTask{{FromCluster: "member2", Replicas: &one, Reason: workv1alpha1.EvictionReasonFailback,
		Producer: workv1alpha1.EvictionProducerScheduler, ClustersBeforeFailover: []string{"member1", "member2"}, CreationTimestamp: &created}}
	sched := metav1.NewTime(clock.Now())
	b.Status.LastScheduledTime = &sched
	if _, err := client.WorkV1alpha1().ResourceBindings("default").Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := bindings.Update(b); err != nil {
		t.Fatal(err)
	}
	// member1's new replicas never become healthy: rolled back after the
	// timeout, to exactly the placement before.
	clock.Step(11 * time.Minute)
	sync()
	b = get()
	if !slices.Equal(b.Spec.Clusters, spec.Clusters) || len(b.Spec.GracefulEvictionTasks) != 0 || b.Annotations[AnnotationClustersBefore] != "" {
		t.Fatalf("after the rollback: clusters %v, tasks %v, annotations %v; want %v", b.Spec.Clusters, b.Spec.GracefulEvictionTasks, b.Annotations, spec.Clusters)
	}
	if err := bindings.Update(b); err != nil {
		t.Fatal(err)
	}
	// Not tried again, however long the room holds.
	n := updates()
	for range 3 {
		clock.Step(time.Hour)
		sync()
	}
	if updates() != n {
		t.Fatalf("the come-back was tried again after its rollback: %+v", get().Spec)
	}
}

func fbStarted(b *workv1alpha1.ResourceBinding) bool {
	return b.Spec.RescheduleReason == workv1alpha1.EvictionReasonFailback && b.Spec.RescheduleTriggeredAt != nil
}
