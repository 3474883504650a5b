package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// The agent binary starts with a member and a hub kubeconfig (one real
// apiserver plays both here), reports ready once it reaches its member,
// serves metrics, and exits 0 on SIGTERM.
func TestAgentBinaryServesAndStopsCleanly(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	ctx := context.Background()
	kubeconfig := env.KubeconfigFor(t, env.Config)
	bin := testenv.BuildBinary(t, "./agent")
	health, metrics := testenv.FreeAddr(t), testenv.FreeAddr(t)
	proc := testenv.StartProcess(t, bin, "--cluster-name", "member1",
		"--kubeconfig", kubeconfig, "--hub-kubeconfig", kubeconfig, "--dns-server", startDNSServer(t, "10.0.0.1"),
		"--health-probe-bind-address", health, "--metrics-bind-address", metrics)

	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, _, err := testenv.HTTPGet(ctx, health, "/readyz")
		return err == nil && code == 200, nil
	})
	if err != nil {
		t.Fatalf("agent /readyz never ready: %v", err)
	}
	if _, body, err := testenv.HTTPGet(ctx, metrics, "/metrics"); err != nil || !strings.Contains(body, `flotilla_build_info{component="agent"`) {
		t.Fatalf("/metrics lacks flotilla_build_info for the agent (err %v)", err)
	}
	if err := proc.Terminate(20 * time.Second); err != nil {
		t.Fatalf("agent did not exit cleanly on SIGTERM: %v", err)
	}
}

func TestAgentRefusesToStartWithoutClusterName(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := testenv.BuildBinary(t, "./agent")
	proc := testenv.StartProcess(t, bin, "--hub-kubeconfig", "/nonexistent")
	err := proc.Wait(10 * time.Second)
	if err == nil || !strings.Contains(proc.Output(), "--cluster-name is required") {
		t.Fatalf("want a non-zero exit naming --cluster-name, got %v: %s", err, proc.Output())
	}
}
