package lease

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
)

const (
	testCluster  = "member1"
	testIdentity = "member1-agent_abcd1234"
)

// newTestController returns a heartbeat for testCluster on a fake hub holding
// objects, with a fake clock and its own metrics.
func newTestController(objects ...runtime.Object) (*Controller, *fake.Clientset, *clocktesting.FakeClock, *agentmetrics.Metrics) {
	hub := fake.NewClientset(objects...)
	clock := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	m := agentmetrics.New(prometheus.NewRegistry())
	c := NewController(hub, Options{
		Cluster: testCluster, HolderIdentity: testIdentity,
		LeaseDuration: 40 * time.Second, RenewInterval: 10 * time.Second,
		Clock: clock, Metrics: m,
	})
	return c, hub, clock, m
}

// hubLease is the Lease as the hub creates it: no holder yet.
func hubLease() *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: testCluster, Namespace: Namespace(testCluster)}}
}

func getLease(t *testing.T, hub *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	l, err := hub.CoordinationV1().Leases(Namespace(testCluster)).Get(context.Background(), testCluster, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// verbs lists the verbs of the requests the fake hub received.
func verbs(hub *fake.Clientset) []string {
	var out []string
	for _, a := range hub.Actions() {
		out = append(out, a.GetVerb())
	}
	return out
}

func renewals(t *testing.T, m *agentmetrics.Metrics, result string) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.LeaseRenewals.WithLabelValues(result).Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetCounter().GetValue()
}

func TestRenewMissingLease(t *testing.T) {
	// The hub creates the Lease; the agent never does, it reports.
	c, hub, _, m := newTestController()
	err := c.Renew(context.Background())
	if err == nil || !strings.Contains(err.Error(), "not found on the hub") || !apierrors.IsNotFound(err) {
		t.Fatalf("Renew = %v, want a wrapped NotFound that says the Lease is not found on the hub", err)
	}
	if got := strings.Join(verbs(hub), ","); got != "get" {
		t.Fatalf("requests = %s, want only a get (no create)", got)
	}
	if got := renewals(t, m, "error"); got != 1 {
		t.Fatalf("error renewals = %v, want 1", got)
	}
}

func TestRenew(t *testing.T) {
	c, hub, clock, m := newTestController(hubLease())
	if err := c.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	acquired := clock.Now()
	l := getLease(t, hub)
	if ptr.Deref(l.Spec.HolderIdentity, "") != testIdentity {
		t.Errorf("holderIdentity = %v, want %s", l.Spec.HolderIdentity, testIdentity)
	}
	if ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != 40 {
		t.Errorf("leaseDurationSeconds = %v, want 40", l.Spec.LeaseDurationSeconds)
	}
	if l.Spec.RenewTime == nil || !l.Spec.RenewTime.Time.Equal(acquired) {
		t.Errorf("renewTime = %v, want %v", l.Spec.RenewTime, acquired)
	}
	if l.Spec.AcquireTime == nil || !l.Spec.AcquireTime.Time.Equal(acquired) {
		t.Errorf("acquireTime = %v, want %v", l.Spec.AcquireTime, acquired)
	}
	// The first holder is no transition.
	if l.Spec.LeaseTransitions != nil {
		t.Errorf("leaseTransitions = %d, want unset", *l.Spec.LeaseTransitions)
	}

	// The next renewal is one write and no read: the controller keeps the
	// Lease it last wrote. The acquire time stays.
	hub.ClearActions()
	clock.Step(10 * time.Second)
	if err := c.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(verbs(hub), ","); got != "update" {
		t.Fatalf("second renewal requests = %s, want a single update", got)
	}
	l = getLease(t, hub)
	if !l.Spec.RenewTime.Time.Equal(clock.Now()) || !l.Spec.AcquireTime.Time.Equal(acquired) {
		t.Errorf("renewTime %v acquireTime %v, want %v and %v", l.Spec.RenewTime, l.Spec.AcquireTime, clock.Now(), acquired)
	}
	if got := renewals(t, m, "success"); got != 2 {
		t.Errorf("successful renewals = %v, want 2", got)
	}
}

func TestRenewTakesOverFromAnotherHolder(t *testing.T) {
	// A new agent leader renews the Lease its predecessor held.
	l := hubLease()
	l.Spec.HolderIdentity = ptr.To("member1-agent_old")
	l.Spec.LeaseTransitions = ptr.To[int32](3)
	c, hub, clock, _ := newTestController(l)
	if err := c.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := getLease(t, hub)
	if ptr.Deref(got.Spec.HolderIdentity, "") != testIdentity || ptr.Deref(got.Spec.LeaseTransitions, 0) != 4 ||
		got.Spec.AcquireTime == nil || !got.Spec.AcquireTime.Time.Equal(clock.Now()) {
		t.Fatalf("spec = %+v, want holder %s, 4 transitions, acquired now", got.Spec, testIdentity)
	}
}

func TestRenewReadsAgainAfterAnError(t *testing.T) {
	c, hub, _, m := newTestController(hubLease())
	if err := c.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Someone else wrote the Lease: the apiserver answers Conflict once.
	conflicts := 1
	hub.PrependReactor("update", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, testCluster, nil)
	})
	hub.ClearActions()
	if err := c.Renew(context.Background()); !apierrors.IsConflict(err) {
		t.Fatalf("Renew = %v, want the Conflict", err)
	}
	// The copy it held is stale: the next renewal reads the Lease first.
	if err := c.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(verbs(hub), ","); got != "update,get,update" {
		t.Fatalf("requests = %s, want update (conflict), then get, update", got)
	}
	if s, e := renewals(t, m, "success"), renewals(t, m, "error"); s != 2 || e != 1 {
		t.Fatalf("renewals: %v success, %v error; want 2 and 1", s, e)
	}
}
