package healthserver

import (
	"context"
	"errors"
	"testing"
	"time"
)

// RideOut fails until its check first passes, then passes through failures
// up to the horizon after the last success, and fails past it.
func TestRideOut(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var down bool
	check := RideOut(func(context.Context) error {
		if down {
			return errors.New("connection refused")
		}
		return nil
	}, time.Minute, func() time.Time { return now })
	ctx := context.Background()

	down = true
	if check(ctx) == nil {
		t.Fatal("never passed: ready, want not ready")
	}
	down = false
	if err := check(ctx); err != nil {
		t.Fatalf("passes: %v", err)
	}
	down = true
	for _, step := range []time.Duration{time.Second, 59 * time.Second} {
		now = now.Add(step)
		if err := check(ctx); err != nil {
			t.Fatalf("%v into the outage: %v, want ready", step, err)
		}
	}
	now = now.Add(time.Second)
	if check(ctx) == nil {
		t.Fatal("past the horizon: ready, want not ready")
	}
	down = false
	if err := check(ctx); err != nil {
		t.Fatalf("back: %v", err)
	}
}
