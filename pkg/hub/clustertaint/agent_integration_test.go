package clustertaint_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/pkg/agent/clusterstatus"
	"github.com/flotilla-io/flotilla/pkg/agent/lease"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
)

// skewedClock is the agent host's clock, off by offset from the hub's.
type skewedClock struct {
	clock.RealClock
	offset time.Duration
}

func (c skewedClock) Now() time.Time                  { return time.Now().Add(c.offset) }
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// failingReadyz makes the member's /readyz and /healthz answer 500 while
// set: the member apiserver is up but not ready.
type failingReadyz struct {
	next http.RoundTripper
	fail *atomic.Bool
}

func (f failingReadyz) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.fail.Load() && (strings.HasPrefix(r.URL.Path, "/readyz") || strings.HasPrefix(r.URL.Path, "/healthz")) {
		return &http.Response{StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error",
			Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	}
	return f.next.RoundTrip(r)
}

// agent runs the real agent heartbeat and status controllers for a cluster
// against the test apiserver, authenticated as the cluster's own agent
// identity, with the agent host's clock off by skew. The member cluster is
// the same apiserver, whose readiness the test can break.
type agent struct {
	memberNotReady atomic.Bool
	stop           context.CancelFunc
	done           chan struct{}
}

func agentIdentity(t *testing.T, h *hub, cluster string) *rest.Config {
	t.Helper()
	tr, err := h.env.Kube.CoreV1().ServiceAccounts(clusterlifecycle.Namespace(cluster)).CreateToken(context.Background(),
		clusterlifecycle.AgentServiceAccount, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(h.env.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

func startAgent(t *testing.T, h *hub, cluster string, skew time.Duration, statusReports bool) *agent {
	t.Helper()
	a := &agent{done: make(chan struct{})}
	hubCfg := agentIdentity(t, h, cluster)
	hubKube := kubernetes.NewForConfigOrDie(hubCfg)
	hubFlotilla := flotillaclient.NewForConfigOrDie(hubCfg)
	memberCfg := rest.CopyConfig(h.env.Config)
	memberCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return failingReadyz{next: rt, fail: &a.memberNotReady} }
	member := kubernetes.NewForConfigOrDie(memberCfg)
	agentClock := skewedClock{offset: skew}

	gate := clusterstatus.NewGate()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	status := clusterstatus.NewController(hubFlotilla, member, corelisters.NewNodeLister(indexer), corelisters.NewPodLister(indexer),
		[]cache.InformerSynced{func() bool { return true }}, gate, clusterstatus.Options{ClusterName: cluster, Period: 300 * time.Millisecond,
			SuccessThreshold: time.Second, FailureThreshold: time.Second, Clock: agentClock})
	renew := lease.NewController(hubKube, lease.Options{Cluster: cluster, HolderIdentity: "agent-" + cluster,
		LeaseDuration: 10 * time.Second, RenewInterval: 500 * time.Millisecond, MayRenew: gate.Verified, Clock: agentClock})
	if !statusReports {
		// A heartbeat only: no identity check to wait for.
		gate.Set(true)
	}
	ctx, stop := context.WithCancel(context.Background())
	a.stop = stop
	go func() {
		defer close(a.done)
		finished := make(chan struct{})
		go func() { defer close(finished); renew.Run(ctx) }()
		if statusReports {
			status.Run(ctx)
		}
		<-finished
	}()
	t.Cleanup(a.Stop)
	return a
}

// Stop ends the agent and waits for it.
func (a *agent) Stop() {
	a.stop()
	<-a.done
}

func readyStatus(c *clusterv1alpha1.Cluster) metav1.ConditionStatus {
	if cond := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady); cond != nil {
		return cond.Status
	}
	return ""
}

func register(t *testing.T, h *hub, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := h.flotilla.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: clusterv1alpha1.ClusterSpec{SyncMode: clusterv1alpha1.Pull, Region: "r1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.poll(t, 30*time.Second, name+"'s agent identity", func() bool {
		_, err := h.env.Kube.RbacV1().ClusterRoleBindings().Get(ctx, clusterlifecycle.AgentClusterRoleName(name), metav1.GetOptions{})
		_, errRB := h.env.Kube.RbacV1().RoleBindings(clusterlifecycle.Namespace(name)).Get(ctx, clusterlifecycle.AgentRoleName, metav1.GetOptions{})
		return err == nil && errRB == nil
	})
}

// An agent whose clock is an hour behind or ahead of the hub's reports its
// member NotReady: the NoExecute taint comes --failover-eviction-timeout
// (5s here) after the hub saw Ready turn False, measured on the hub's
// clock — not at once (an hour behind) and not an hour late (ahead).
func TestTaintTimersCountOnTheHubClock(t *testing.T) {
	for _, skew := range []time.Duration{-time.Hour, time.Hour} {
		t.Run("agent clock "+skew.String(), func(t *testing.T) {
			h := startHub(t)
			// Two healthy clusters keep the fleet guard out of the way.
			for _, name := range []string{"member2", "member3"} {
				h.join(t, name)
			}
			register(t, h, "member1")
			a := startAgent(t, h, "member1", skew, true)
			h.poll(t, 30*time.Second, "member1 Ready=True from its agent", func() bool {
				return readyStatus(h.cluster(t, "member1")) == metav1.ConditionTrue
			})
			if ltt := meta.FindStatusCondition(h.cluster(t, "member1").Status.Conditions, clusterv1alpha1.ClusterConditionReady).LastTransitionTime; time.Since(ltt.Time).Abs() < 50*time.Minute {
				t.Fatalf("the agent's lastTransitionTime %v is not skewed: the test would prove nothing", ltt)
			}

			a.memberNotReady.Store(true)
			var sawFalse time.Time
			h.poll(t, 30*time.Second, "member1 Ready=False from its agent", func() bool {
				sawFalse = time.Now()
				return readyStatus(h.cluster(t, "member1")) == metav1.ConditionFalse
			})
			h.poll(t, 10*time.Second, "not-ready:NoSchedule", func() bool {
				return hasTaint(h.cluster(t, "member1"), clusterv1alpha1.TaintClusterNotReady, corev1.TaintEffectNoSchedule)
			})
			const timeout = 5 * time.Second
			var sawNoExecute time.Time
			h.poll(t, timeout+10*time.Second, "not-ready:NoExecute", func() bool {
				sawNoExecute = time.Now()
				return hasTaint(h.cluster(t, "member1"), clusterv1alpha1.TaintClusterNotReady, corev1.TaintEffectNoExecute)
			})
			// timeAdded has second precision (up to 1s early), polls add
			// 50ms; a taint added before the hub saw Ready=False is early.
			after := sawNoExecute.Sub(sawFalse)
			if after < timeout-1200*time.Millisecond || after > timeout+3*time.Second {
				t.Errorf("NoExecute %s after the hub saw Ready=False, want the eviction timeout %s on the hub's clock", after, timeout)
			}
			if readyStatus(h.cluster(t, "member1")) != metav1.ConditionFalse {
				t.Errorf("member1's agent heartbeat runs: Ready should stay False (reported), got %s", readyStatus(h.cluster(t, "member1")))
			}
		})
	}
}

// A deleted Lease does not make the hub blind: with no agent left, the
// cluster goes Unknown within the grace period of its last renewal (the hub
// remakes the Lease, but a Lease nobody renews is no heartbeat), then gets
// its taints.
func TestDeletedLeaseWithoutAgentGoesUnknown(t *testing.T) {
	h := startHub(t)
	for _, name := range []string{"member1", "member2", "member3"} {
		h.join(t, name)
	}
	ctx := context.Background()
	leases := h.env.Kube.CoordinationV1().Leases(clusterlifecycle.Namespace("member1"))
	old, err := leases.Get(ctx, "member1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stopped := h.stopRenewing("member1")
	if err := leases.Delete(ctx, "member1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.poll(t, 10*time.Second, "the Lease made again", func() bool {
		l, err := leases.Get(ctx, "member1", metav1.GetOptions{})
		return err == nil && l.UID != old.UID
	})
	if l, err := leases.Get(ctx, "member1", metav1.GetOptions{}); err != nil || l.Spec.RenewTime != nil || l.Spec.HolderIdentity != nil {
		t.Fatalf("the remade Lease must not look renewed: %+v (%v)", l.Spec, err)
	}
	h.poll(t, 20*time.Second, "member1 Ready=Unknown", func() bool {
		return readyStatus(h.cluster(t, "member1")) == metav1.ConditionUnknown
	})
	ready := meta.FindStatusCondition(h.cluster(t, "member1").Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	// The last renewal was at most 500ms before stopped; the condition's
	// time has second precision. Earlier than that, the remade Lease
	// counted as a heartbeat; later, the deletion restarted the clock.
	if late := ready.LastTransitionTime.Sub(stopped); late < 8*time.Second || late > 11*time.Second {
		t.Errorf("Ready Unknown %s after the last renewal, want the grace period 10s after it", late)
	}
	h.poll(t, 10*time.Second, "unreachable:NoSchedule", func() bool {
		return hasTaint(h.cluster(t, "member1"), clusterv1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoSchedule)
	})
}

// A live agent keeps its cluster Ready through a deletion of its Lease: the
// hub makes the Lease again at once and the agent, with its own narrow
// identity, renews the new one.
func TestLiveAgentRenewsTheRemadeLease(t *testing.T) {
	h := startHub(t)
	for _, name := range []string{"member2", "member3"} {
		h.join(t, name)
	}
	register(t, h, "member1")
	startAgent(t, h, "member1", 0, false)
	h.setCondition(t, "member1", clusterv1alpha1.ClusterConditionReady, metav1.ConditionTrue)
	ctx := context.Background()
	leases := h.env.Kube.CoordinationV1().Leases(clusterlifecycle.Namespace("member1"))
	renewedBy := func(l *coordinationv1.Lease) bool {
		return l.Spec.RenewTime != nil && ptr.Deref(l.Spec.HolderIdentity, "") == "agent-member1"
	}
	h.poll(t, 10*time.Second, "the agent renewing its Lease", func() bool {
		l, err := leases.Get(ctx, "member1", metav1.GetOptions{})
		return err == nil && renewedBy(l)
	})
	old, err := leases.Get(ctx, "member1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	if err := leases.Delete(ctx, "member1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.poll(t, 10*time.Second, "the agent renewing the remade Lease", func() bool {
		l, err := leases.Get(ctx, "member1", metav1.GetOptions{})
		return err == nil && l.UID != old.UID && renewedBy(l)
	})
	// Past the 10s grace period counted from the deletion: still Ready,
	// never tainted.
	for time.Since(deleted) < 12*time.Second {
		c := h.cluster(t, "member1")
		if readyStatus(c) != metav1.ConditionTrue || len(c.Spec.Taints) > 0 {
			t.Fatalf("member1 with a live agent: Ready %s, taints %v", readyStatus(c), c.Spec.Taints)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
