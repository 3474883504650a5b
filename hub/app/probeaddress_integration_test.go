package app_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/hub/app"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// A hub whose health (or metrics) address is taken stops with the error,
// instead of running on without the endpoints its probes and Prometheus
// read (it used to keep the error until it stopped for another reason,
// and said nothing).
func TestHubStopsWhenItCannotServeItsProbes(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	opts := app.NewOptions()
	opts.Kubeconfig = env.KubeconfigFor(t, env.Config)
	opts.LeaderElection.LeaderElect = false
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", taken.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, opts) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "listening on "+taken.Addr().String()) {
			t.Fatalf("hub stopped with %v, want the listen error", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the hub still runs a minute after its health address was refused")
	}
}
