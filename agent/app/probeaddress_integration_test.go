package app_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/agent/app"
)

// An agent whose health (or metrics) address is taken stops with the
// error, instead of running on without the endpoints its probes and
// Prometheus read (it used to keep the error until it stopped for another
// reason, and said nothing).
func TestAgentStopsWhenItCannotServeItsProbes(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.register(t, f.memberKubeSystem, true)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	opts := f.fastOptions("node-a")
	opts.HealthProbeBindAddress = taken.Addr().String()
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, opts) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "listening on "+taken.Addr().String()) {
			t.Fatalf("agent stopped with %v, want the listen error", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the agent still runs a minute after its health address was refused")
	}
}
