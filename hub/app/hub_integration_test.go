package app_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// The hub binary starts against a real apiserver, becomes leader, serves
// health and metrics, and on SIGTERM exits 0 and releases its Lease.
func TestHubBinaryServesAndStopsCleanly(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	ctx := context.Background()
	_, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-system"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bin := testenv.BuildBinary(t, "./hub")
	health, metrics := testenv.FreeAddr(t), testenv.FreeAddr(t)
	proc := testenv.StartProcess(t, bin,
		"--kubeconfig", env.KubeconfigFor(t, env.Config),
		"--health-probe-bind-address", health, "--metrics-bind-address", metrics)

	waitFor(t, "hub /readyz", func() (bool, error) {
		code, _, err := testenv.HTTPGet(ctx, health, "/readyz")
		return err == nil && code == 200, nil
	})
	if code, body, err := testenv.HTTPGet(ctx, health, "/healthz"); err != nil || code != 200 || body != "ok" {
		t.Fatalf("/healthz = %d %q %v", code, body, err)
	}
	if _, body, err := testenv.HTTPGet(ctx, metrics, "/metrics"); err != nil || !strings.Contains(body, `flotilla_build_info{component="hub"`) {
		t.Fatalf("/metrics lacks flotilla_build_info for the hub (err %v)", err)
	}
	// The binary collects at its own GOGC (hub/main.go: defaultGCPercent)
	// unless the environment sets one.
	if _, set := os.LookupEnv("GOGC"); !set {
		if _, body, err := testenv.HTTPGet(ctx, metrics, "/metrics"); err != nil || !strings.Contains(body, "\ngo_gc_gogc_percent 40\n") {
			t.Fatalf("/metrics does not show the hub's GOGC of 40 (err %v)", err)
		}
	}
	waitFor(t, "hub leader lease", func() (bool, error) {
		lease, err := env.Kube.CoordinationV1().Leases("flotilla-system").Get(ctx, "flotilla-hub", metav1.GetOptions{})
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", nil
	})

	if err := proc.Terminate(20 * time.Second); err != nil {
		t.Fatalf("hub did not exit cleanly on SIGTERM: %v", err)
	}
	lease, err := env.Kube.CoordinationV1().Leases("flotilla-system").Get(ctx, "flotilla-hub", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Fatalf("hub kept its Lease after SIGTERM: holder %q", *lease.Spec.HolderIdentity)
	}
}

func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
