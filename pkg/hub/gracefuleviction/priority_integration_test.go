package gracefuleviction_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/gracefuleviction"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// Issue 39, schedulePriority: graceful evictions end higher priority
// first. 30 bindings of three priorities, interleaved, each with a task
// from the tainted member1 and a new placement on member2 that reported
// but is not healthy; the controller's clock passes their grace period,
// and a change of member1 queues every binding with a task on it at once;
// one worker ends them. The order of the task removals (as the apiserver
// serialises the binding writes) must be priority order: at most the one
// binding the worker took while the burst was being queued may come early.
func TestGracefulEvictionEndsHigherPriorityFirst(t *testing.T) {
	env := testenv.Start(t)
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	t0 := time.Now()
	taint := corev1.Taint{Key: "example.com/broken", Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0.Add(-time.Minute)}}
	for _, name := range []string{"member1", "member2"} {
		c := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if name == "member1" {
			c.Spec.Taints = []corev1.Taint{taint}
		}
		if _, err := fc.ClusterV1alpha1().Clusters().Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const ns, n = "default", 30
	priorities := []int32{0, 1000, 500}
	priorityOf := map[string]int32{}
	created := metav1.NewTime(t0)
	for i := range n {
		name := fmt.Sprintf("app-%02d-deployment", i)
		p := priorities[i%len(priorities)]
		priorityOf[name] = p
		b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: workv1alpha1.ResourceBindingSpec{Replicas: 1, SchedulePriority: &workv1alpha1.SchedulePriority{Priority: p},
				Placement: &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}}},
				Clusters:  []workv1alpha1.TargetCluster{{Name: "member2", Replicas: 1}},
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "member1", PurgeMode: policyv1alpha1.PurgeModeGracefully,
					Reason: workv1alpha1.EvictionReasonTaintUntolerated, Producer: workv1alpha1.EvictionProducerTaintManager, CreationTimestamp: &created}},
				Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}}}
		stored, err := fc.WorkV1alpha1().ResourceBindings(ns).Create(ctx, b, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The new placement has reported, not healthy: the task ends only
		// when its grace period passes.
		stored.Status.SchedulerObservedGeneration = stored.Generation
		stored.Status.Conditions = []metav1.Condition{{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue,
			Reason: "BindingScheduled", Message: "set by the test", LastTransitionTime: created}}
		stored.Status.AggregatedStatus = []workv1alpha1.AggregatedStatusItem{{ClusterName: "member2", Applied: true,
			Health: workv1alpha1.ResourceUnhealthy, ObservedGeneration: stored.Generation}}
		if _, err := fc.WorkV1alpha1().ResourceBindings(ns).UpdateStatus(ctx, stored, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	clk := clocktesting.NewFakeClock(t0)
	factory := flotillainformers.NewSharedInformerFactory(fc, 0)
	ctl := gracefuleviction.NewController(fc, factory, gracefuleviction.Options{GracefulEvictionTimeout: 10 * time.Minute, Clock: clk})
	var mu sync.Mutex
	var order []string
	_, _ = factory.Work().V1alpha1().ResourceBindings().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(o, n any) {
			ob, nb := o.(*workv1alpha1.ResourceBinding), n.(*workv1alpha1.ResourceBinding)
			if len(ob.Spec.GracefulEvictionTasks) > 0 && len(nb.Spec.GracefulEvictionTasks) == 0 {
				mu.Lock()
				order = append(order, nb.Name)
				mu.Unlock()
			}
		}})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go ctl.Run(ctx, 1)

	// The grace period passes on the controller's clock; a label on
	// member1 (a change the controller re-reads tasks for) queues them all.
	clk.SetTime(t0.Add(11 * time.Minute))
	cl, err := fc.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cl.Labels = map[string]string{"example.com/touched": "true"}
	if _, err := fc.ClusterV1alpha1().Clusters().Update(ctx, cl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == n, nil
	}); err != nil {
		mu.Lock()
		t.Fatalf("%d of %d tasks ended: %v", len(order), n, err)
	}

	mu.Lock()
	defer mu.Unlock()
	rest := order[1:]
	for i := 1; i < len(rest); i++ {
		if priorityOf[rest[i]] > priorityOf[rest[i-1]] {
			t.Fatalf("ended %s (priority %d) after %s (priority %d); order: %v", rest[i], priorityOf[rest[i]], rest[i-1], priorityOf[rest[i-1]], order)
		}
	}
	t.Logf("ended in order: %v", order)
}
