package dnsprobe

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

const (
	testNamespace = "flotilla-system"
	testNode      = "node-a"
	testIdentity  = "node-a_1234abcd"
	testStale     = time.Minute
	testFailure   = 30 * time.Second
)

// newTestRunner returns a Runner probing server and publishing into a fake
// member holding objects, on a fake clock.
func newTestRunner(t *testing.T, server string, objects ...runtime.Object) (*Runner, *fake.Clientset, *clocktesting.FakeClock) {
	t.Helper()
	member := fake.NewClientset(objects...)
	// The fake leaves metadata.resourceVersion empty; the apiserver sets it
	// on every write, and the Runner relies on it to choose Update over Create.
	rv := 0
	member.PrependReactor("*", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if w, ok := a.(interface{ GetObject() runtime.Object }); ok && (a.GetVerb() == "create" || a.GetVerb() == "update") {
			rv++
			w.GetObject().(metav1.Object).SetResourceVersion(strconv.Itoa(rv))
		}
		return false, nil, nil
	})
	clock := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	r := NewRunner(member, RunnerOptions{
		Namespace: testNamespace, NodeName: testNode, Identity: testIdentity,
		Server: server, Name: ProbeName("cluster.local"),
		Period: 5 * time.Second, Timeout: 300 * time.Millisecond,
		SuccessThreshold: testFailure, FailureThreshold: testFailure,
		StaleThreshold: testStale, Clock: clock,
	})
	return r, member, clock
}

// healthyServer answers the probe name with an A record.
func healthyServer(t *testing.T) string {
	return serve(t, answer(ProbeName("cluster.local")+" 5 IN A 10.0.0.1"))
}

// deadServer is a UDP address nothing listens on: the kernel answers port
// unreachable.
func deadServer(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	return addr
}

func publishedLease(t *testing.T, member *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	l, err := member.CoordinationV1().Leases(testNamespace).Get(context.Background(), VerdictLeaseName(testNode), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// leaseActions counts the requests on Leases recorded by the fake, by verb.
func leaseActions(member *fake.Clientset) map[string]int {
	n := map[string]int{}
	for _, a := range member.Actions() {
		if a.GetResource().Resource == "leases" {
			n[a.GetVerb()]++
		}
	}
	return n
}

func TestRunnerPublishesVerdictLease(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}}
	cases := []struct {
		name      string
		objects   []runtime.Object
		wantOwner []metav1.OwnerReference
	}{
		// Owned by the Node, so the garbage collector removes the verdict
		// of a node that leaves.
		{"node exists", []runtime.Object{node},
			[]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: testNode, UID: "node-uid"}}},
		// Without the Node the verdict is still published (best effort).
		{"node missing", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			server := healthyServer(t)
			r, member, clock := newTestRunner(t, server, tc.objects...)
			r.ProbeOnce(context.Background())

			l := publishedLease(t, member)
			wantLabels := map[string]string{LabelVerdict: "true", LabelStatus: "True", LabelReason: ReasonResolved}
			for k, v := range wantLabels {
				if l.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, l.Labels[k], v)
				}
			}
			if l.Annotations[AnnotationNode] != testNode || l.Annotations[AnnotationServer] != server ||
				!strings.Contains(l.Annotations[AnnotationMessage], "10.0.0.1") {
				t.Errorf("annotations = %v", l.Annotations)
			}
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != testIdentity {
				t.Errorf("holderIdentity = %v, want %s", l.Spec.HolderIdentity, testIdentity)
			}
			if l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != int32(testStale/time.Second) {
				t.Errorf("leaseDurationSeconds = %v, want %d", l.Spec.LeaseDurationSeconds, int32(testStale/time.Second))
			}
			if l.Spec.RenewTime == nil || !l.Spec.RenewTime.Time.Equal(clock.Now()) {
				t.Errorf("renewTime = %v, want %v", l.Spec.RenewTime, clock.Now())
			}
			if len(l.OwnerReferences) != len(tc.wantOwner) ||
				len(tc.wantOwner) > 0 && l.OwnerReferences[0] != tc.wantOwner[0] {
				t.Errorf("ownerReferences = %v, want %v", l.OwnerReferences, tc.wantOwner)
			}
			// What the Runner writes, the leader reads back as the same verdict.
			v, ok := VerdictFromLease(l)
			if !ok || v.Node != testNode || v.Observed.Status != metav1.ConditionTrue || v.StaleAfter != testStale {
				t.Errorf("VerdictFromLease = %+v, %v", v, ok)
			}
		})
	}
}

func TestRunnerSkipsUnchangedWritesUntilAQuarterOfStale(t *testing.T) {
	r, member, clock := newTestRunner(t, healthyServer(t))
	r.ProbeOnce(context.Background())
	if n := leaseActions(member); n["create"] != 1 || n["update"] != 0 {
		t.Fatalf("first probe: Lease requests %v, want one create", n)
	}

	// Same verdict, younger than stale/4: no request at all.
	member.ClearActions()
	clock.Step(testStale/4 - time.Second)
	r.ProbeOnce(context.Background())
	if n := len(member.Actions()); n != 0 {
		t.Fatalf("unchanged verdict %s after the last write made %d requests: %v", testStale/4-time.Second, n, member.Actions())
	}

	// A quarter of the stale threshold after the last write: renewed with
	// one Update (the Runner keeps the last written Lease, so no Get).
	clock.Step(time.Second)
	r.ProbeOnce(context.Background())
	if n := leaseActions(member); n["update"] != 1 || len(n) != 1 {
		t.Fatalf("aging verdict: Lease requests %v, want exactly one update", n)
	}
	if l := publishedLease(t, member); !l.Spec.RenewTime.Time.Equal(clock.Now()) {
		t.Fatalf("renewTime = %v, want %v", l.Spec.RenewTime, clock.Now())
	}
}

func TestRunnerDampsFailures(t *testing.T) {
	r, member, clock := newTestRunner(t, healthyServer(t))
	r.ProbeOnce(context.Background())

	// The resolver dies. (Tests in this package may set the option directly.)
	r.opts.Server = deadServer(t)
	steps := []struct {
		after      time.Duration // clock step before the probe
		wantStatus string
	}{
		{time.Second, "True"},                 // failing since here
		{testFailure / 2, "True"},             // also rewritten as it ages, still True
		{testFailure/2 - time.Second, "True"}, // one second short of the threshold
		{time.Second, "False"},                // failed for the whole threshold
		{testFailure / 2, "False"},            // stays False
	}
	for i, s := range steps {
		clock.Step(s.after)
		r.ProbeOnce(context.Background())
		l := publishedLease(t, member)
		if got := l.Labels[LabelStatus]; got != s.wantStatus {
			t.Fatalf("step %d: published status %s, want %s", i, got, s.wantStatus)
		}
		if s.wantStatus == "False" {
			if reason := l.Labels[LabelReason]; reason != ReasonResolverUnreachable && reason != ReasonTimeout {
				t.Fatalf("step %d: reason %s, want %s or %s", i, reason, ReasonResolverUnreachable, ReasonTimeout)
			}
		}
	}
}

func TestRunnerHealthy(t *testing.T) {
	r, _, clock := newTestRunner(t, healthyServer(t))
	// Before the first probe the liveness check passes (startup is
	// readiness's business).
	if err := r.Healthy(context.Background()); err != nil {
		t.Fatalf("before the first probe: %v", err)
	}
	r.ProbeOnce(context.Background())
	limit := 3*r.opts.Period + r.opts.Timeout
	clock.Step(limit)
	if err := r.Healthy(context.Background()); err != nil {
		t.Fatalf("probe %s ago (the limit): %v", limit, err)
	}
	clock.Step(time.Second)
	if err := r.Healthy(context.Background()); err == nil {
		t.Fatalf("probe %s ago, beyond the limit %s, reported healthy", limit+time.Second, limit)
	}
	// A new probe makes it healthy again.
	r.ProbeOnce(context.Background())
	if err := r.Healthy(context.Background()); err != nil {
		t.Fatalf("after a new probe: %v", err)
	}
}
