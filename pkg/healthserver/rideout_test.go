package healthserver

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// RideOut fails until its check first passes, then passes through failures
// up to the horizon after the last success, and fails past it; once passed,
// it answers at once even while the check hangs.
func TestRideOut(t *testing.T) {
	var (
		mu   sync.Mutex
		now  = time.Unix(1_000_000, 0)
		down bool
		hang chan struct{}
		runs int
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	r := &rideOut{horizon: time.Minute, now: clock}
	check := r.ready
	r.check = func(context.Context) error {
		mu.Lock()
		runs++
		d, h := down, hang
		mu.Unlock()
		if h != nil {
			<-h
		}
		if d {
			return errors.New("connection refused")
		}
		return nil
	}
	ctx := context.Background()
	// settle waits for the background check to end.
	settle := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r.mu.Lock()
			running := r.running
			r.mu.Unlock()
			if !running {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the background check never ended")
			}
			time.Sleep(time.Millisecond)
		}
	}
	// probe answers, and waits for the background check it starts.
	probe := func() error {
		err := check(ctx)
		settle()
		return err
	}
	set := func(d bool) { mu.Lock(); down = d; mu.Unlock() }

	set(true)
	if probe() == nil {
		t.Fatal("never passed: ready, want not ready")
	}
	set(false)
	if err := probe(); err != nil {
		t.Fatalf("passes: %v", err)
	}
	set(true)
	_ = probe() // runs the check that fails; answers from the last (passing) result
	for _, step := range []time.Duration{time.Second, 58 * time.Second} {
		advance(step)
		if err := probe(); err != nil {
			t.Fatalf("%v into the outage: %v, want ready", step, err)
		}
	}
	advance(2 * time.Second)
	_ = probe()
	if probe() == nil {
		t.Fatal("past the horizon: ready, want not ready")
	}
	set(false)
	_ = probe()
	if err := probe(); err != nil {
		t.Fatalf("back: %v", err)
	}

	// A hanging check: the probe answers at once, and one check runs at a
	// time however often it is probed.
	mu.Lock()
	hang = make(chan struct{})
	before := runs
	mu.Unlock()
	for range 5 {
		if err := check(ctx); err != nil {
			t.Fatalf("while the check hangs: %v", err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		started := runs - before
		mu.Unlock()
		if started >= 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	if got := runs - before; got != 1 {
		t.Errorf("%d checks ran while one hung, want 1", got)
	}
	close(hang)
	hang = nil
	mu.Unlock()
	settle()
}
