package scheduler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/scheduler"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// Issue 39, schedulePriority: a burst of bindings that all become
// schedulable at once (their only cluster turns Ready) is scheduled higher
// priority first, ties in arrival order. 30 bindings of three priorities,
// interleaved, wait unschedulable; the cluster turns Ready, which queues
// every binding at once; one worker schedules them. The order of the
// scheduler's spec writes (as the apiserver serialises them) must be
// priority order: at most the one binding the worker took while the burst
// was being queued may come early.
func TestSchedulerPopsHigherPriorityFirst(t *testing.T) {
	env := testenv.Start(t)
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	cluster, err := fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const ns, n = "default", 30
	priorities := []int32{0, 1000, 500} // low, high, mid, interleaved by creation
	priorityOf := map[string]int32{}
	for i := range n {
		name := fmt.Sprintf("app-%02d-deployment", i)
		p := priorities[i%len(priorities)]
		priorityOf[name] = p
		b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: workv1alpha1.ResourceBindingSpec{Replicas: 1, SchedulePriority: &workv1alpha1.SchedulePriority{Priority: p},
				Placement: &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}},
				Resource:  workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}}}
		if _, err := fc.WorkV1alpha1().ResourceBindings(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	factory := flotillainformers.NewSharedInformerFactory(fc, 0)
	ctl := scheduler.NewController(fc, factory, scheduler.Options{EvictionHistoryTTL: time.Minute})
	var mu sync.Mutex
	var order []string
	_, _ = factory.Work().V1alpha1().ResourceBindings().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(o, n any) {
			ob, nb := o.(*workv1alpha1.ResourceBinding), n.(*workv1alpha1.ResourceBinding)
			if len(ob.Spec.Clusters) == 0 && len(nb.Spec.Clusters) > 0 {
				mu.Lock()
				order = append(order, nb.Name)
				mu.Unlock()
			}
		}})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go ctl.Run(ctx, 1)

	// Every binding tried once and found no cluster (member1 never
	// reported Ready): Scheduled=False, nothing to retry until a Cluster
	// changes.
	poll := func(what string, cond func() (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond() }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	poll("every binding unschedulable", func() (bool, error) {
		list, err := fc.WorkV1alpha1().ResourceBindings(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, b := range list.Items {
			if c := meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.BindingConditionScheduled); c == nil || c.Status != metav1.ConditionFalse {
				return false, nil
			}
		}
		return len(list.Items) == n, nil
	})

	cluster.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue,
		Reason: "ClusterReady", Message: "set by the test", LastTransitionTime: metav1.Now()}}
	if _, err := fc.ClusterV1alpha1().Clusters().UpdateStatus(ctx, cluster, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll("every binding scheduled", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == n, nil
	})

	mu.Lock()
	defer mu.Unlock()
	// The order with the first one set aside (the worker may have taken
	// it while the burst was still being queued) never rises in priority.
	rest := order[1:]
	for i := 1; i < len(rest); i++ {
		if priorityOf[rest[i]] > priorityOf[rest[i-1]] {
			t.Fatalf("scheduled %s (priority %d) after %s (priority %d); order: %v", rest[i], priorityOf[rest[i]], rest[i-1], priorityOf[rest[i-1]], describeOrder(order, priorityOf))
		}
	}
	t.Logf("scheduled in order: %v", describeOrder(order, priorityOf))
}

func describeOrder(order []string, priorityOf map[string]int32) []string {
	out := make([]string, len(order))
	for i, name := range order {
		out[i] = fmt.Sprintf("%s(%d)", name, priorityOf[name])
	}
	return out
}
