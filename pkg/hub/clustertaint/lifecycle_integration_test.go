package clustertaint_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/record"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterhealth"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// hub runs the lifecycle, health and taint controllers against a real
// apiserver with test-sized periods: grace 10s, monitor period 1s, NoExecute
// after 5s.
type hub struct {
	env      *testenv.Env
	flotilla flotillaclient.Interface
	guard    *clustertaint.FleetGuard

	mu      sync.Mutex
	renewal map[string]context.CancelFunc
}

func startHub(t *testing.T) *hub {
	t.Helper()
	env := testenv.Start(t)
	flotilla, err := flotillaclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	h := &hub{env: env, flotilla: flotilla, renewal: map[string]context.CancelFunc{},
		guard: clustertaint.NewFleetGuard(0.55, 0.5, 0.1)}
	factory := flotillainformers.NewSharedInformerFactory(flotilla, 0)
	kubeFactory := informers.NewSharedInformerFactoryWithOptions(env.Kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = clusterlifecycle.LabelCluster }))
	clusters := factory.Cluster().V1alpha1().Clusters().Informer()
	recorder := record.NewFakeRecorder(1000)
	lifecycle := clusterlifecycle.NewController(env.Kube, flotilla, clusters, kubeFactory, clusterlifecycle.Options{Recorder: recorder})
	health := clusterhealth.NewController(flotilla, clusters, kubeFactory.Coordination().V1().Leases().Informer(),
		clusterhealth.Options{MonitorPeriod: time.Second, GracePeriod: 10 * time.Second, StartupGracePeriod: 10 * time.Second, Recorder: recorder})
	taints := clustertaint.NewController(flotilla, clusters, factory.Cluster().V1alpha1().ClusterTaintPolicies().Informer(), h.guard,
		clustertaint.Options{FailoverEvictionTimeout: 5 * time.Second, GuardPeriod: time.Second, Recorder: recorder})
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	kubeFactory.Start(ctx.Done())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context, int){lifecycle.Run, health.Run, taints.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); run(ctx, 2) }()
	}
	go func() {
		for range recorder.Events {
		}
	}()
	t.Cleanup(func() {
		h.mu.Lock()
		for _, stop := range h.renewal {
			stop()
		}
		h.mu.Unlock()
		cancel()
		wg.Wait()
		factory.Shutdown()
		kubeFactory.Shutdown()
	})
	return h
}

// join registers a cluster and plays its agent: Ready True, and its Lease
// renewed every 500ms until stopRenewing.
func (h *hub) join(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := h.flotilla.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: clusterv1alpha1.ClusterSpec{SyncMode: clusterv1alpha1.Pull, Region: "r1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.poll(t, 30*time.Second, name+"'s Lease", func() bool {
		_, err := h.env.Kube.CoordinationV1().Leases(clusterlifecycle.Namespace(name)).Get(ctx, name, metav1.GetOptions{})
		return err == nil
	})
	h.startRenewing(t, name)
	h.setCondition(t, name, clusterv1alpha1.ClusterConditionReady, metav1.ConditionTrue)
}

func (h *hub) startRenewing(t *testing.T, name string) {
	ctx, stop := context.WithCancel(context.Background())
	h.mu.Lock()
	h.renewal[name] = stop
	h.mu.Unlock()
	renew := func(ctx context.Context) {
		leases := h.env.Kube.CoordinationV1().Leases(clusterlifecycle.Namespace(name))
		if l, err := leases.Get(ctx, name, metav1.GetOptions{}); err == nil {
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
	}
	renew(ctx)
	go wait.UntilWithContext(ctx, renew, 500*time.Millisecond)
}

func (h *hub) stopRenewing(name string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.renewal[name]()
	return time.Now()
}

func (h *hub) setCondition(t *testing.T, name, condType string, status metav1.ConditionStatus) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := h.flotilla.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: condType, Status: status, Reason: "Test", Message: "set by the test"})
		_, err = h.flotilla.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("setting %s=%s on %s: %v", condType, status, name, err)
	}
}

func (h *hub) cluster(t *testing.T, name string) *clusterv1alpha1.Cluster {
	t.Helper()
	c, err := h.flotilla.ClusterV1alpha1().Clusters().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (h *hub) poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

func hasTaint(c *clusterv1alpha1.Cluster, key string, effect corev1.TaintEffect) bool {
	for _, t := range c.Spec.Taints {
		if t.Key == key && t.Effect == effect {
			return t.TimeAdded != nil
		}
	}
	return false
}

// A Lease that stops advancing turns Ready Unknown within grace + 1s, adds
// the unreachable NoSchedule taint, then NoExecute after the eviction
// timeout; renewing again (and the agent reporting Ready) removes both.
func TestSilentClusterGoesUnknownAndIsTainted(t *testing.T) {
	h := startHub(t)
	for _, name := range []string{"member1", "member2", "member3"} {
		h.join(t, name)
	}
	stopped := h.stopRenewing("member1")
	h.poll(t, 30*time.Second, "member1 Ready=Unknown", func() bool {
		return meta.IsStatusConditionPresentAndEqual(h.cluster(t, "member1").Status.Conditions, clusterv1alpha1.ClusterConditionReady, metav1.ConditionUnknown)
	})
	ready := meta.FindStatusCondition(h.cluster(t, "member1").Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	if ready.Reason != clusterv1alpha1.ClusterReasonStatusUnknown {
		t.Errorf("reason = %s, want %s", ready.Reason, clusterv1alpha1.ClusterReasonStatusUnknown)
	}
	// LastTransitionTime has second precision: allow for its truncation.
	if late := ready.LastTransitionTime.Sub(stopped); late > 11*time.Second {
		t.Errorf("Ready Unknown %s after the Lease stopped, want within grace 10s + 1s", late)
	}
	h.poll(t, 10*time.Second, "unreachable:NoSchedule", func() bool {
		return hasTaint(h.cluster(t, "member1"), clusterv1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoSchedule)
	})
	h.poll(t, 15*time.Second, "unreachable:NoExecute after the 5s timeout", func() bool {
		return hasTaint(h.cluster(t, "member1"), clusterv1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute)
	})
	if h.guard.State().Mode != clustertaint.GuardNormal {
		t.Errorf("1 of 3 silent: guard %s, want Normal", h.guard.State().Mode)
	}

	h.startRenewing(t, "member1")
	h.setCondition(t, "member1", clusterv1alpha1.ClusterConditionReady, metav1.ConditionTrue)
	h.poll(t, 10*time.Second, "both taints removed", func() bool { return len(h.cluster(t, "member1").Spec.Taints) == 0 })
}

// When every cluster is silent the hub assumes it is the one cut off: no
// NoExecute taint, and the guard says FullDisruption.
func TestFleetGuardHoldsNoExecuteWhenEveryClusterIsSilent(t *testing.T) {
	h := startHub(t)
	names := []string{"member1", "member2", "member3"}
	for _, name := range names {
		h.join(t, name)
	}
	for _, name := range names {
		h.stopRenewing(name)
	}
	h.poll(t, 30*time.Second, "all Unknown and guard FullDisruption", func() bool {
		for _, name := range names {
			if !hasTaint(h.cluster(t, name), clusterv1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoSchedule) {
				return false
			}
		}
		return h.guard.State().Mode == clustertaint.GuardFullDisruption && h.guard.EvictionRate() == 0
	})
	// Well past the 5s eviction timeout: still no NoExecute anywhere.
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		for _, name := range names {
			if hasTaint(h.cluster(t, name), clusterv1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute) {
				t.Fatalf("%s got NoExecute while the whole fleet looked down", name)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// ClusterTaintPolicy: conditions ANDed; NoSchedule and NoExecute of one key
// added and removed together; add on False, remove on True.
func TestClusterTaintPolicy(t *testing.T) {
	h := startHub(t)
	for _, name := range []string{"member1", "member2", "member3"} {
		h.join(t, name)
	}
	ctx := context.Background()
	falseIn := []clusterv1alpha1.MatchCondition{{ConditionType: "NetworkReady", Operator: clusterv1alpha1.MatchConditionOpIn, StatusValues: []metav1.ConditionStatus{metav1.ConditionFalse}}}
	trueIn := []clusterv1alpha1.MatchCondition{{ConditionType: "NetworkReady", Operator: clusterv1alpha1.MatchConditionOpIn, StatusValues: []metav1.ConditionStatus{metav1.ConditionTrue}}}
	if _, err := h.flotilla.ClusterV1alpha1().ClusterTaintPolicies().Create(ctx, &clusterv1alpha1.ClusterTaintPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "network"},
		Spec: clusterv1alpha1.ClusterTaintPolicySpec{AddOnConditions: falseIn, RemoveOnConditions: trueIn, Taints: []clusterv1alpha1.Taint{
			{Key: "network/unavailable", Effect: corev1.TaintEffectNoSchedule}, {Key: "network/unavailable", Effect: corev1.TaintEffectNoExecute}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	both := append(append([]clusterv1alpha1.MatchCondition{}, falseIn...),
		clusterv1alpha1.MatchCondition{ConditionType: "StorageReady", Operator: clusterv1alpha1.MatchConditionOpNotIn, StatusValues: []metav1.ConditionStatus{metav1.ConditionTrue}})
	if _, err := h.flotilla.ClusterV1alpha1().ClusterTaintPolicies().Create(ctx, &clusterv1alpha1.ClusterTaintPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "both"},
		Spec:       clusterv1alpha1.ClusterTaintPolicySpec{AddOnConditions: both, Taints: []clusterv1alpha1.Taint{{Key: "degraded", Effect: corev1.TaintEffectNoSchedule}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	h.setCondition(t, "member1", "StorageReady", metav1.ConditionTrue)
	h.setCondition(t, "member1", "NetworkReady", metav1.ConditionFalse)
	h.poll(t, 10*time.Second, "network taints on member1", func() bool {
		c := h.cluster(t, "member1")
		return hasTaint(c, "network/unavailable", corev1.TaintEffectNoSchedule) && hasTaint(c, "network/unavailable", corev1.TaintEffectNoExecute)
	})
	if hasTaint(h.cluster(t, "member1"), "degraded", corev1.TaintEffectNoSchedule) {
		t.Error("ANDed conditions: StorageReady is True, so no degraded taint")
	}
	h.setCondition(t, "member1", "StorageReady", metav1.ConditionFalse)
	h.poll(t, 10*time.Second, "degraded taint once both conditions hold", func() bool {
		return hasTaint(h.cluster(t, "member1"), "degraded", corev1.TaintEffectNoSchedule)
	})
	h.setCondition(t, "member1", "NetworkReady", metav1.ConditionTrue)
	h.poll(t, 10*time.Second, "network taints removed together", func() bool {
		c := h.cluster(t, "member1")
		return !hasTaint(c, "network/unavailable", corev1.TaintEffectNoSchedule) && !hasTaint(c, "network/unavailable", corev1.TaintEffectNoExecute)
	})
	if len(h.cluster(t, "member2").Spec.Taints) != 0 {
		t.Errorf("member2 (no matching conditions) got taints %v", h.cluster(t, "member2").Spec.Taints)
	}
}
