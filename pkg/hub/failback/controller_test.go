package failback

import (
	"context"
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

// Two bindings fall due at once with maxConcurrent 1 while the cache lags
// behind the first write (informers not running: the cache never shows
// it): only the first fails back, the second waits on the limit, with one
// event each, and a second sync of the first writes nothing again.
func TestSyncCountsItsOwnWritesBeforeTheCacheShowsThem(t *testing.T) {
	now := t0.Add(time.Hour)
	var objs []*workv1alpha1.ResourceBinding
	for _, name := range []string{"a", "b"} {
		spec, status := failedOver()
		spec.Failover.Failback.MaxConcurrent = 1
		objs = append(objs, &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: spec, Status: status})
	}
	clusters := []*clusterv1alpha1.Cluster{readyCluster("member1", t0.Add(10*time.Second), ""), readyCluster("member2", t0.Add(-time.Hour), "")}
	client := flotillafake.NewSimpleClientset(objs[0], objs[1], clusters[0], clusters[1])
	factory := flotillainformers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(10)
	c := NewController(client, factory, Options{Clock: clocktesting.NewFakeClock(now), Recorder: recorder})
	for _, b := range objs {
		if err := factory.Work().V1alpha1().ResourceBindings().Informer().GetIndexer().Add(b); err != nil {
			t.Fatal(err)
		}
	}
	for _, cl := range clusters {
		if err := factory.Cluster().V1alpha1().Clusters().Informer().GetIndexer().Add(cl); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for _, key := range []string{"default/a", "default/b", "default/b", "default/a"} {
		if err := c.sync(ctx, key); err != nil {
			t.Fatalf("sync %s: %v", key, err)
		}
	}
	updates := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" {
			updates++
		}
	}
	b, err := client.WorkV1alpha1().ResourceBindings("default").Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.RescheduleTriggeredAt != nil {
		t.Fatalf("b failed back while a's failback was in progress: %+v", b.Spec)
	}
	a, err := client.WorkV1alpha1().ResourceBindings("default").Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !InProgress(&a.Spec, &a.Status) || len(a.Spec.EvictionHistory) != 0 {
		t.Fatalf("a did not fail back: %+v", a.Spec)
	}
	if updates != 1 {
		t.Fatalf("%d updates, want 1 (a's failback, not repeated from the stale cache)", updates)
	}
	var events []string
	for len(recorder.Events) > 0 {
		events = append(events, <-recorder.Events)
	}
	if len(events) != 2 || events[0][:len("Normal "+EventFailbackStarted)] != "Normal "+EventFailbackStarted ||
		events[1][:len("Normal "+EventFailbackWaiting)] != "Normal "+EventFailbackWaiting {
		t.Fatalf("events = %q, want FailbackStarted (a), then FailbackWaiting once (b)", events)
	}
}
