package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestOtherHolderActive(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	const window = 15 * time.Second
	seen := func(holder string, ago time.Duration) Observation {
		return Observation{Seen: true, Holder: holder, ResourceVersion: "7", ChangedAt: now.Add(-ago)}
	}
	cases := []struct {
		name string
		obs  Observation
		want bool
	}{
		{"nothing seen yet: no evidence", Observation{}, false},
		{"no holder (new or released Lease)", seen("", time.Second), false},
		{"this agent holds it", seen(testIdentity, time.Second), false},
		{"another agent, just changed", seen("other", 0), true},
		{"another agent, inside the window", seen("other", window-time.Millisecond), true},
		{"another agent, quiet for the window", seen("other", window), false},
		{"another agent, long quiet", seen("other", time.Hour), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := OtherHolderActive(tc.obs, testIdentity, now, window); got != tc.want {
				t.Errorf("OtherHolderActive = %v, want %v", got, tc.want)
			}
		})
	}
}

func leaseVersion(rv, holder string, renew time.Time) *coordinationv1.Lease {
	l := hubLease()
	l.ResourceVersion = rv
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	l.Spec.RenewTime = &metav1.MicroTime{Time: renew}
	return l
}

// The observer judges by when THIS agent saw the Lease change, never by the
// renewTime another agent wrote with its own clock.
func TestObserverJudgesByItsOwnClock(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	o := NewObserver(fake.NewClientset(), ObserverOptions{Cluster: testCluster, Self: testIdentity, Window: 15 * time.Second, Clock: clock})
	if err := o.Check(); err != nil {
		t.Fatalf("Check before any observation = %v, want nil (no evidence)", err)
	}

	// First sight of another holder whose renewTime claims it is an hour
	// old (its clock is behind): it counts as changed now.
	o.Observe(leaseVersion("10", "other", clock.Now().Add(-time.Hour)))
	var other *ErrOtherHolder
	if err := o.Check(); !errors.As(err, &other) || other.Holder != "other" {
		t.Fatalf("Check after first sight = %v, want ErrOtherHolder{other}", err)
	}
	// The same version seen again is no change: it ages on our clock.
	clock.Step(10 * time.Second)
	o.Observe(leaseVersion("10", "other", clock.Now().Add(-time.Hour)))
	if err := o.Check(); err == nil {
		t.Fatal("10s after the change the holder must still count as active")
	}
	clock.Step(5 * time.Second)
	if err := o.Check(); err != nil {
		t.Fatalf("Check 15s after the last change = %v, want nil", err)
	}
	// A new version (a renewal whose renewTime claims to be an hour in the
	// future — a clock ahead) makes it active again, for the window only.
	o.Observe(leaseVersion("11", "other", clock.Now().Add(time.Hour)))
	if err := o.Check(); err == nil {
		t.Fatal("a new version by another holder must count as active")
	}
	clock.Step(15 * time.Second)
	if err := o.Check(); err != nil {
		t.Fatalf("Check 15s after that = %v, want nil (the future renewTime must not extend it)", err)
	}

	// This agent takes it; a slow read returning an older version by the
	// other holder must not bring that holder back.
	o.Observe(leaseVersion("12", testIdentity, clock.Now()))
	o.Observe(leaseVersion("11", "other", clock.Now()))
	if got := o.Observation(); got.Holder != testIdentity || got.ResourceVersion != "12" {
		t.Fatalf("observation = %+v, want ours at 12 (older versions ignored)", got)
	}
	if err := o.Check(); err != nil {
		t.Fatalf("Check while we hold it = %v", err)
	}
	// Released (empty holder): nobody blocks.
	o.Observe(leaseVersion("13", "", clock.Now()))
	if err := o.Check(); err != nil {
		t.Fatalf("Check on a released Lease = %v", err)
	}
}

func TestObserverPoll(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	hub := fake.NewClientset()
	o := NewObserver(hub, ObserverOptions{Cluster: testCluster, Self: testIdentity, Window: 15 * time.Second, Clock: clock})
	ctx := context.Background()

	// No Lease: nobody holds it, and the first poll is done.
	if err := o.Poll(ctx); err != nil {
		t.Fatalf("Poll without a Lease = %v, want nil (holds nobody)", err)
	}
	if err := o.WaitPolled(ctx); err != nil {
		t.Fatal(err)
	}
	if got := o.Observation(); !got.Seen || got.Holder != "" {
		t.Fatalf("observation = %+v, want seen, no holder", got)
	}

	l := leaseVersion("5", "other", clock.Now())
	if _, err := hub.CoordinationV1().Leases(Namespace(testCluster)).Create(ctx, l, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// CheckFresh reads before it judges.
	if err := o.CheckFresh(ctx); err == nil {
		t.Fatal("CheckFresh did not see the new holder")
	}
}

// The heartbeat never takes the hub Lease from a holder this agent saw renew
// recently, takes it once that holder has been quiet for the window, and
// releases it when it stops.
func TestRenewRespectsAnActiveHolderAndReleases(t *testing.T) {
	l := leaseVersion("20", "other", time.Time{})
	c, hub, clock, _ := newTestController(l)
	o := NewObserver(hub, ObserverOptions{Cluster: testCluster, Self: testIdentity, Window: 15 * time.Second, Clock: clock})
	c.opts.Observer = o
	ctx := context.Background()

	// Fresh sight of "other" (the Renew's own read counts as a sighting).
	var other *ErrOtherHolder
	if err := c.Renew(ctx); !errors.As(err, &other) {
		t.Fatalf("Renew over an active holder = %v, want ErrOtherHolder", err)
	}
	if got := ptr.Deref(getLease(t, hub).Spec.HolderIdentity, ""); got != "other" {
		t.Fatalf("holder = %q, want other (not taken)", got)
	}
	for _, a := range hub.Actions() {
		if a.GetVerb() == "update" {
			t.Fatal("Renew wrote the Lease of an active holder")
		}
	}

	// Quiet for the window: taken.
	clock.Step(15 * time.Second)
	if err := c.Renew(ctx); err != nil {
		t.Fatalf("Renew after the holder went quiet = %v", err)
	}
	if got := ptr.Deref(getLease(t, hub).Spec.HolderIdentity, ""); got != testIdentity {
		t.Fatalf("holder = %q, want %s", got, testIdentity)
	}
	renewed := getLease(t, hub).Spec.RenewTime

	// Stopping releases it: no holder, renewTime unchanged.
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	c.Run(stopped)
	got := getLease(t, hub)
	if got.Spec.HolderIdentity != nil {
		t.Fatalf("holder after stop = %q, want none", *got.Spec.HolderIdentity)
	}
	if !got.Spec.RenewTime.Equal(renewed) {
		t.Fatalf("renewTime changed by the release: %v → %v", renewed, got.Spec.RenewTime)
	}
}
