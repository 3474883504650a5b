package leader

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
)

const us = "agent-a"

func TestStepDown(t *testing.T) {
	renewed := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	const deadline = 10 * time.Second
	other := errors.New("agent-b renewed the hub Lease 1s ago")
	cases := []struct {
		name  string
		now   time.Time
		fence error
		want  string
	}{
		{"just renewed", renewed, nil, ""},
		{"inside the renew deadline", renewed.Add(deadline - time.Millisecond), nil, ""},
		// Bounded: however the renewals fail (unreachable, timeouts), a
		// leader that has not renewed for the deadline stops.
		{"at the renew deadline", renewed.Add(deadline), nil, ReasonMemberLeaseNotRenewed},
		{"long past it", renewed.Add(time.Hour), nil, ReasonMemberLeaseNotRenewed},
		{"another agent on the hub", renewed, other, ReasonHubLeaseHeldByOther},
		{"both: the member Lease wins", renewed.Add(deadline), other, ReasonMemberLeaseNotRenewed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := StepDown(tc.now, renewed, deadline, tc.fence); got != tc.want {
				t.Errorf("StepDown = %q, want %q", got, tc.want)
			}
		})
	}
	if got := StepDown(renewed, time.Time{}, deadline, nil); got != ReasonMemberLeaseNotRenewed {
		t.Errorf("StepDown without any renewal = %q, want %q", got, ReasonMemberLeaseNotRenewed)
	}
	// A clock that jumps backwards never extends leadership past what the
	// renewal allowed: the comparison is against the renewal's own start.
	if got := StepDown(renewed.Add(-time.Hour), renewed, deadline, nil); got != "" {
		t.Errorf("StepDown before the renewal = %q, want keep leading", got)
	}
}

// fakeLock is a resourcelock.Interface whose calls return err and count.
type fakeLock struct {
	err    error
	record *resourcelock.LeaderElectionRecord
	writes int
	clock  *clocktesting.FakeClock
	took   time.Duration // how long each write takes on clock
}

func (f *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if f.err != nil {
		return nil, nil, f.err
	}
	return f.record, nil, nil
}
func (f *fakeLock) Create(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	return f.write(ler)
}
func (f *fakeLock) Update(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	return f.write(ler)
}
func (f *fakeLock) write(ler resourcelock.LeaderElectionRecord) error {
	f.writes++
	f.clock.Step(f.took)
	if f.err != nil {
		return f.err
	}
	f.record = &ler
	return nil
}
func (f *fakeLock) RecordEvent(string) {}
func (f *fakeLock) Identity() string   { return us }
func (f *fakeLock) Describe() string   { return "fake" }

func TestRenewalLockRecordsTheStartOfSuccessfulRenewals(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	inner := &fakeLock{clock: clock, took: 3 * time.Second}
	lock := &renewalLock{Interface: inner, clock: clock}
	ctx := context.Background()

	if !lock.renewedAt().IsZero() {
		t.Fatal("a fresh lock claims a renewal")
	}
	start := clock.Now()
	if err := lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: us}); err != nil {
		t.Fatal(err)
	}
	// The start, not the end: a slow write must not stretch leadership.
	if got := lock.renewedAt(); !got.Equal(start) {
		t.Fatalf("renewedAt = %v, want the write's start %v", got, start)
	}

	// Failed renewals (whatever the error) move nothing.
	inner.err = errors.New("connection refused")
	for range 3 {
		_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: us})
	}
	if got := lock.renewedAt(); !got.Equal(start) {
		t.Fatalf("renewedAt after failures = %v, want %v", got, start)
	}

	// A release (empty holder) is not a renewal.
	inner.err = nil
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatal(err)
	}
	if got := lock.renewedAt(); !got.Equal(start) {
		t.Fatalf("renewedAt after a release = %v, want %v", got, start)
	}
}

func TestRenewalLockTakesTheLeaseOnlyWhenTheFenceIsClear(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	inner := &fakeLock{clock: clock, record: &resourcelock.LeaderElectionRecord{HolderIdentity: "agent-b"}}
	var fenceErr error
	lock := &renewalLock{Interface: inner, clock: clock, fence: func() error { return fenceErr }}
	ctx := context.Background()
	mine := resourcelock.LeaderElectionRecord{HolderIdentity: us}

	// The elector reads the Lease (held by agent-b, expired) and tries to
	// take it while agent-b still renews the hub Lease: refused, no write.
	fenceErr = errors.New("agent-b renewed the hub Lease 1s ago")
	if _, _, err := lock.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lock.Update(ctx, mine); err == nil || !errors.Is(err, fenceErr) {
		t.Fatalf("acquisition while fenced = %v, want the fence's error", err)
	}
	if err := lock.Create(ctx, mine); err == nil {
		t.Fatal("create while fenced succeeded")
	}
	if inner.writes != 0 {
		t.Fatalf("%d writes reached the apiserver while fenced", inner.writes)
	}

	// The hub went quiet: the Lease is taken.
	fenceErr = nil
	if err := lock.Update(ctx, mine); err != nil {
		t.Fatal(err)
	}
	// Renewing is not taking: the term's own check decides about those,
	// and a release always goes through (so the real leader is clear).
	fenceErr = errors.New("agent-b again")
	if err := lock.Update(ctx, mine); err != nil {
		t.Fatalf("renewal while fenced = %v; the lock must not fail renewals (the term steps down itself)", err)
	}
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatalf("release while fenced = %v", err)
	}
	// Released: taking it again is an acquisition, refused while fenced.
	if err := lock.Update(ctx, mine); err == nil {
		t.Fatal("re-acquisition after a release while fenced succeeded")
	}
	if inner.writes != 3 {
		t.Fatalf("writes = %d, want 3 (take, renew, release)", inner.writes)
	}
}
