package clusterstatus

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	g := NewGate()
	if g.Verified() {
		t.Fatal("a new gate is verified")
	}

	// Unverified: Wait blocks until its context ends, and says why.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on an unverified gate with a cancelled context = %v, want context.Canceled", err)
	}

	// Verified: Wait returns nil at once. (A live context: with a done one
	// both select cases would be ready and either may win.)
	g.Set(true)
	g.Set(true) // setting it again must not close the channel twice
	if !g.Verified() {
		t.Fatal("Set(true) did not verify")
	}
	if err := g.Wait(context.Background()); err != nil {
		t.Fatalf("Wait on a verified gate = %v", err)
	}

	// Unverified again (a spec.id mismatch found later): Wait blocks again.
	g.Set(false)
	if g.Verified() {
		t.Fatal("Set(false) left the gate verified")
	}
	if err := g.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after Set(false) = %v, want context.Canceled", err)
	}
}

func TestGateWaitIsReleasedBySet(t *testing.T) {
	g := NewGate()
	// The deadline only bounds a broken Set; a working one returns at once.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.Wait(ctx) }()
	g.Set(true)
	if err := <-done; err != nil {
		t.Fatalf("Wait = %v, want nil once the gate is verified", err)
	}
}
