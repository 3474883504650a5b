package healthserver

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The ride-out rule: fail until the check first passes, pass through
// failures up to the horizon after the last success, fail past it.
func TestRideOut(t *testing.T) {
	var (
		mu   sync.Mutex
		now  = time.Unix(1_000_000, 0)
		down bool
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	set := func(d bool) { mu.Lock(); down = d; mu.Unlock() }
	r := &rideOut{horizon: time.Minute, now: clock, check: func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return errors.New("connection refused")
		}
		return nil
	}}
	ctx := context.Background()
	// probe is the background check followed by a readiness probe.
	probe := func() error { r.runOnce(ctx); return r.ready(ctx) }

	set(true)
	if r.ready(ctx) == nil {
		t.Fatal("never passed: ready, want not ready")
	}
	set(false)
	if err := probe(); err != nil {
		t.Fatalf("passes: %v", err)
	}
	set(true)
	for _, step := range []time.Duration{time.Second, 59 * time.Second} {
		advance(step)
		if err := probe(); err != nil {
			t.Fatalf("%v into the outage: %v, want ready", step, err)
		}
	}
	advance(time.Second)
	if probe() == nil {
		t.Fatal("past the horizon: ready, want not ready")
	}
	set(false)
	if err := probe(); err != nil {
		t.Fatalf("back: %v", err)
	}
}

// RideOut checks on its own: a process nobody probed before the outage
// still rides it out, and a probe while the check hangs answers at once.
func TestRideOutChecksWithoutProbes(t *testing.T) {
	var down atomic.Bool
	hang := make(chan struct{})
	var calls atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := RideOut(ctx, func(ctx context.Context) error {
		calls.Add(1)
		if down.Load() {
			select { // hangs, as a request to a stopped apiserver does
			case <-hang:
			case <-ctx.Done():
			}
			return errors.New("no answer")
		}
		return nil
	}, time.Hour, 10*time.Millisecond, time.Now)
	deadline := time.Now().Add(10 * time.Second)
	for calls.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("RideOut never ran its check by itself")
		}
		time.Sleep(time.Millisecond)
	}
	down.Store(true)
	start := time.Now()
	if err := ready(context.Background()); err != nil {
		t.Fatalf("first probe, during the outage: %v, want ready", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the probe waited %v on a hanging check", d)
	}
	close(hang)
}
