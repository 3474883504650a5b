package leader

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/pkg/cmdutil"
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

// Check, asked by the writers right before each write, fails the moment the
// term's deadline has passed or the fence closes, without waiting for the
// term's own loop to wake up: a leader frozen past its deadline cannot slip
// in a last write.
func TestCheckFailsAtTheDeadlineWithoutWaitingForTheLoop(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	var (
		mu       sync.Mutex
		fenceErr error
	)
	renewed := clock.Now()
	r := &runner{root: context.Background(), logger: logr.Discard(), opts: Options{
		LeaderElectionOptions: cmdutil.LeaderElectionOptions{LeaderElect: true, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
		Clock:                 clock,
		Fence:                 func() error { mu.Lock(); defer mu.Unlock(); return fenceErr },
	}}
	leadCtx := make(chan context.Context, 1)
	release := make(chan struct{})
	r.lead = func(ctx context.Context) {
		leadCtx <- ctx
		<-release
	}
	termCtx, endTerm := context.WithCancel(context.Background())
	defer endTerm()
	done := make(chan struct{})
	go func() { defer close(done); r.term(termCtx, endTerm, func() time.Time { return renewed }) }()
	ctx := <-leadCtx
	if err := Check(ctx); err != nil {
		t.Fatalf("Check right after the renewal = %v", err)
	}

	// The clock jumps past the deadline (as after a pause): Check fails at
	// once, whether or not the loop has run yet.
	clock.SetTime(renewed.Add(10 * time.Second))
	if err := Check(ctx); err == nil {
		t.Fatal("Check past the renew deadline = nil")
	}
	close(release)
	<-done
	if termCtx.Err() == nil {
		t.Fatal("the term did not end")
	}
	if err := Check(context.Background()); err != nil {
		t.Fatalf("Check outside a term = %v, want nil", err)
	}

	// The fence, likewise.
	r2 := *r
	renewed = clock.Now()
	leadCtx2 := make(chan context.Context, 1)
	release2 := make(chan struct{})
	r2.lead = func(ctx context.Context) { leadCtx2 <- ctx; <-release2 }
	termCtx2, endTerm2 := context.WithCancel(context.Background())
	defer endTerm2()
	done2 := make(chan struct{})
	go func() { defer close(done2); r2.term(termCtx2, endTerm2, func() time.Time { return renewed }) }()
	ctx2 := <-leadCtx2
	if err := Check(ctx2); err != nil {
		t.Fatalf("Check = %v", err)
	}
	mu.Lock()
	fenceErr = errors.New("agent-b renewed the hub Lease 1s ago")
	mu.Unlock()
	if err := Check(ctx2); err == nil || !strings.Contains(err.Error(), ReasonHubLeaseHeldByOther) {
		t.Fatalf("Check with the fence closed = %v, want %s", err, ReasonHubLeaseHeldByOther)
	}
	close(release2)
	clock.Step(2 * time.Second) // wake the loop
	<-done2
}
