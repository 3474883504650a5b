package app_test

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/hub/app"
	"github.com/flotilla-io/flotilla/pkg/hub/failback"
)

// Issue 30 item 7 (fair shares): maxConcurrent is fleet-wide, so one
// namespace could hold every slot. With
// --failback-max-concurrent-per-namespace 1, two workloads of one namespace
// (maxConcurrent 5) fail back one at a time, and the waiting one says why.
func TestFailbackPerNamespaceCap(t *testing.T) {
	t.Parallel()
	env, ctx, fc := startHubEnv(t, func(o *app.Options) {
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
		o.ClusterMonitorPeriod = time.Second
		o.FailoverEvictionTimeout = time.Second
		o.DefaultNotReadyTolerationSeconds, o.DefaultUnreachableTolerationSeconds = 0, 0
		o.FailbackMaxConcurrentPerNamespace = 1
	})
	kube := kubernetes.NewForConfigOrDie(env.Config)
	createReadyClusters(t, ctx, fc, "member1", "member2")
	fbRunMembers(ctx, fc, []string{"member1", "member2"})
	fbPropagate(t, ctx, fc, 2, 5, "nginx", "nginx2")
	fbWaitSettled(t, fc, map[string]int32{"member1": 1, "member2": 2}, "nginx", "nginx2")
	fbFailOverMember1(t, ctx, fc, "nginx", "nginx2")

	var mu sync.Mutex
	most := 0
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sctx.Err() == nil {
			list, err := fc.WorkV1alpha1().ResourceBindings("default").List(sctx, metav1.ListOptions{})
			if err == nil {
				n := 0
				for i := range list.Items {
					if failback.InProgress(&list.Items[i].Spec, &list.Items[i].Status) {
						n++
					}
				}
				mu.Lock()
				most = max(most, n)
				mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	fbSetReady(t, ctx, fc, "member1", metav1.ConditionTrue)
	fbWaitEvent(t, kube, failback.EventFailbackWaiting, "failbacks of this namespace are in progress (--failback-max-concurrent-per-namespace 1)")
	fbWaitSettled(t, fc, map[string]int32{"member1": 1, "member2": 2}, "nginx", "nginx2")
	stop()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if most > 1 {
		t.Fatalf("%d failbacks of namespace default were in progress at once; the per-namespace cap is 1", most)
	}
	if !fbFailedBack(fbBinding(t, fc, "nginx")) || !fbFailedBack(fbBinding(t, fc, "nginx2")) {
		t.Fatal("both workloads should have failed back")
	}
}

// Issue 30 item 7 (bounded): a failback whose returning copy never becomes
// healthy (member1's agent is gone: a broken image never reports
// available) no longer holds its slot and two copies for good: after
// --failback-timeout it is rolled back to member2(3), with a Warning event
// and a failover history item, and no failback is in progress any more.
func TestFailbackRolledBackAfterTimeout(t *testing.T) {
	t.Parallel()
	env, ctx, fc := startHubEnv(t, func(o *app.Options) {
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
		o.ClusterMonitorPeriod = time.Second
		o.FailoverEvictionTimeout = time.Second
		o.DefaultNotReadyTolerationSeconds, o.DefaultUnreachableTolerationSeconds = 0, 0
		o.FailbackTimeout = 4 * time.Second
	})
	kube := kubernetes.NewForConfigOrDie(env.Config)
	createReadyClusters(t, ctx, fc, "member1", "member2")
	m1ctx, stopMember1 := context.WithCancel(ctx)
	fbRunMembers(m1ctx, fc, []string{"member1"})
	fbRunMembers(ctx, fc, []string{"member2"})
	fbPropagate(t, ctx, fc, 1, 5, "nginx")
	fbWaitSettled(t, fc, map[string]int32{"member1": 1, "member2": 2}, "nginx")
	fbFailOverMember1(t, ctx, fc, "nginx")
	stopMember1() // what member1 gets from now on never becomes available
	fbSetReady(t, ctx, fc, "member1", metav1.ConditionTrue)
	fbWaitEvent(t, kube, failback.EventFailbackStarted, "member1")
	waitUntil(t, "the failback is in progress", func() (bool, error) {
		rb := fbBinding(t, fc, "nginx")
		return failback.InProgress(&rb.Spec, &rb.Status), nil
	})
	fbWaitEvent(t, kube, failback.EventFailbackRolledBack, "did not become healthy within 4s")
	waitUntil(t, "rolled back: member2(3), member1 left, no failback in progress, a failover history item", func() (bool, error) {
		rb := fbBinding(t, fc, "nginx")
		if failback.InProgress(&rb.Spec, &rb.Status) || len(rb.Spec.Clusters) != 1 || rb.Spec.Clusters[0].Name != "member2" || rb.Spec.Clusters[0].Replicas != 3 {
			return false, nil
		}
		for _, h := range rb.Status.FailoverHistory {
			if h.Reason == failback.ReasonRolledBack && h.OriginCluster == "member1" {
				return true, nil
			}
		}
		return false, nil
	})
	// It stays rolled back: no failback to member1 again without a new failure.
	time.Sleep(3 * time.Second)
	rb := fbBinding(t, fc, "nginx")
	if failback.InProgress(&rb.Spec, &rb.Status) || len(rb.Spec.Clusters) != 1 {
		t.Fatalf("after the rollback: clusters %v, tasks %v", rb.Spec.Clusters, rb.Spec.GracefulEvictionTasks)
	}
}
