package clusterstatus

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillafake "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
)

// fakeMember is an HTTP server playing the member apiserver: /readyz answers
// with a settable status code, kube-system has a fixed UID.
type fakeMember struct {
	readyz atomic.Int32
}

func (m *fakeMember) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/readyz":
		w.WriteHeader(int(m.readyz.Load()))
		_, _ = w.Write([]byte("readyz"))
	case "/api/v1/namespaces/kube-system":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-system","uid":"member-uid"}}`))
	default:
		http.NotFound(w, r)
	}
}

// The Ready condition follows the member apiserver only after the new state
// has held for the threshold, on a fake clock: a blip changes nothing, a
// credential error (401) is damped like any failure (Karmada #7408).
func TestReadyIsDampedByThresholds(t *testing.T) {
	member := &fakeMember{}
	member.readyz.Store(http.StatusOK)
	server := httptest.NewServer(member)
	defer server.Close()
	memberKube := kubernetes.NewForConfigOrDie(&rest.Config{Host: server.URL})

	hub := flotillafake.NewSimpleClientset(&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"}})
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	synced := []cache.InformerSynced{func() bool { return true }}
	c := NewController(hub, memberKube, corelisters.NewNodeLister(indexer), corelisters.NewPodLister(indexer), synced, NewGate(),
		Options{ClusterName: "member1", Period: 10 * time.Second, FailureThreshold: 30 * time.Second, SuccessThreshold: 30 * time.Second, Clock: clock})
	ctx := context.Background()

	ready := func() *metav1.Condition {
		cl, err := hub.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(cl.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	}
	step := func(code int, advance time.Duration) *metav1.Condition {
		member.readyz.Store(int32(code))
		clock.Step(advance)
		c.Sync(ctx)
		return ready()
	}

	// Round 1 sets spec.id, round 2 reports.
	c.Sync(ctx)
	if id := mustGet(t, hub).Spec.ID; id != "member-uid" {
		t.Fatalf("spec.id = %q, want the member's kube-system UID", id)
	}
	if got := step(http.StatusOK, time.Second); got == nil || got.Status != metav1.ConditionTrue || got.Reason != clusterv1alpha1.ClusterReasonReady {
		t.Fatalf("Ready = %+v, want True/ClusterReady", got)
	}

	// A 5s blip inside the 30s threshold changes nothing.
	step(http.StatusInternalServerError, 10*time.Second)
	if got := step(http.StatusOK, 5*time.Second); got.Status != metav1.ConditionTrue {
		t.Fatalf("a 5s blip flipped Ready: %+v", got)
	}

	// 401 for 20s: still True; from 30s on: False, ClusterNotReachable.
	for _, advance := range []time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second} {
		if got := step(http.StatusUnauthorized, advance); got.Status != metav1.ConditionTrue {
			t.Fatalf("Ready flipped before the failure threshold: %+v", got)
		}
	}
	got := step(http.StatusUnauthorized, 10*time.Second)
	if got.Status != metav1.ConditionFalse || got.Reason != clusterv1alpha1.ClusterReasonNotReachable {
		t.Fatalf("after 30s of 401: Ready = %+v, want False/ClusterNotReachable", got)
	}
	// 503 keeps it False with the fresh reason, at once (same status).
	if got := step(http.StatusServiceUnavailable, 10*time.Second); got.Status != metav1.ConditionFalse || got.Reason != clusterv1alpha1.ClusterReasonNotReady {
		t.Fatalf("Ready = %+v, want False/ClusterNotReady", got)
	}
	// Recovery needs the success threshold too.
	for _, advance := range []time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second} {
		if got := step(http.StatusOK, advance); got.Status != metav1.ConditionFalse {
			t.Fatalf("Ready turned True before the success threshold: %+v", got)
		}
	}
	if got := step(http.StatusOK, 10*time.Second); got.Status != metav1.ConditionTrue {
		t.Fatalf("after 30s of success: Ready = %+v, want True", got)
	}
}

// A new leader continues from the Ready its predecessor wrote: its first
// failing probe is a blip like any other.
func TestNewLeaderContinuesDampingFromReportedReady(t *testing.T) {
	member := &fakeMember{}
	member.readyz.Store(http.StatusInternalServerError)
	server := httptest.NewServer(member)
	defer server.Close()
	memberKube := kubernetes.NewForConfigOrDie(&rest.Config{Host: server.URL})
	cluster := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"}, Spec: clusterv1alpha1.ClusterSpec{ID: "member-uid"}}
	meta.SetStatusCondition(&cluster.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady,
		Status: metav1.ConditionTrue, Reason: clusterv1alpha1.ClusterReasonReady, Message: "ok"})
	hub := flotillafake.NewSimpleClientset(cluster)
	clock := clocktesting.NewFakeClock(time.Now())
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	c := NewController(hub, memberKube, corelisters.NewNodeLister(indexer), corelisters.NewPodLister(indexer), nil, NewGate(),
		Options{ClusterName: "member1", Period: 10 * time.Second, FailureThreshold: 30 * time.Second, SuccessThreshold: 30 * time.Second, Clock: clock})
	c.Sync(context.Background())
	if got := meta.FindStatusCondition(mustGet(t, hub).Status.Conditions, clusterv1alpha1.ClusterConditionReady); got.Status != metav1.ConditionTrue {
		t.Fatalf("a new leader's first failed probe flipped Ready: %+v", got)
	}
}

func mustGet(t *testing.T, hub *flotillafake.Clientset) *clusterv1alpha1.Cluster {
	t.Helper()
	c, err := hub.ClusterV1alpha1().Clusters().Get(context.Background(), "member1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
