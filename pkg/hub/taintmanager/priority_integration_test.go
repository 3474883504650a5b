package taintmanager_test

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

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/taintmanager"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// Issue 39, schedulePriority: when a cluster is tainted NoExecute, its
// workloads are evicted higher priority first. 30 bindings of three
// priorities, interleaved, run on member1; member1 gets a NoExecute taint
// no placement tolerates, which queues every binding on it at once; one
// worker evicts them. The order of the evictions (as the apiserver
// serialises the binding writes) must be priority order: at most the one
// binding the worker took while the burst was being queued may come early.
func TestTaintManagerEvictsHigherPriorityFirst(t *testing.T) {
	env := testenv.Start(t)
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	for _, name := range []string{"member1", "member2"} {
		if _, err := fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const ns, n = "default", 30
	priorities := []int32{0, 1000, 500}
	priorityOf := map[string]int32{}
	for i := range n {
		name := fmt.Sprintf("app-%02d-deployment", i)
		p := priorities[i%len(priorities)]
		priorityOf[name] = p
		b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: workv1alpha1.ResourceBindingSpec{Replicas: 1, SchedulePriority: &workv1alpha1.SchedulePriority{Priority: p},
				Placement: &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}}},
				Clusters:  []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 1}},
				Resource:  workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}}}
		if _, err := fc.WorkV1alpha1().ResourceBindings(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	factory := flotillainformers.NewSharedInformerFactory(fc, 0)
	// No fleet guard: every cluster is admitted at once, so the order is
	// the queue's alone.
	ctl := taintmanager.NewController(fc, factory, taintmanager.Options{})
	var mu sync.Mutex
	var order []string
	_, _ = factory.Work().V1alpha1().ResourceBindings().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(o, n any) {
			ob, nb := o.(*workv1alpha1.ResourceBinding), n.(*workv1alpha1.ResourceBinding)
			if len(ob.Spec.GracefulEvictionTasks) == 0 && len(nb.Spec.GracefulEvictionTasks) > 0 {
				mu.Lock()
				order = append(order, nb.Name)
				mu.Unlock()
			}
		}})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go ctl.Run(ctx, 1)

	// A taint of its own key: no default toleration applies, so every
	// binding falls due at once.
	taint := corev1.Taint{Key: "example.com/broken", Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: time.Now().Add(-time.Minute)}}
	cl, err := fc.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cl.Spec.Taints = []corev1.Taint{taint}
	if _, err := fc.ClusterV1alpha1().Clusters().Update(ctx, cl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == n, nil
	}); err != nil {
		mu.Lock()
		t.Fatalf("%d of %d bindings evicted: %v", len(order), n, err)
	}

	mu.Lock()
	defer mu.Unlock()
	rest := order[1:]
	for i := 1; i < len(rest); i++ {
		if priorityOf[rest[i]] > priorityOf[rest[i-1]] {
			t.Fatalf("evicted %s (priority %d) after %s (priority %d); order: %v", rest[i], priorityOf[rest[i]], rest[i-1], priorityOf[rest[i-1]], order)
		}
	}
	t.Logf("evicted in order: %v", order)
}
