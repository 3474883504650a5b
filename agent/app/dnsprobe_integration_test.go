package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/pkg/agent/dnsprobe"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// The default install: the leader-capable agent runs with --dns-probe=false
// and `agent dns-probe` probes its node, without any hub kubeconfig. The
// verdict then has exactly one writer: the probe (with the agent probing
// too, the two would take turns holding the Lease).
func TestAgentWithoutDNSProbeLeavesTheVerdictToDNSProbe(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	ctx := context.Background()
	const ns, node = "flotilla-system", "node-1"
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := env.KubeconfigFor(t, env.Config)
	bin := testenv.BuildBinary(t, "./agent")
	dnsServer := startDNSServer(t, "10.0.0.1")
	fast := []string{"--dns-detect-period", "100ms", "--dns-success-threshold", "0", "--dns-stale-threshold", "1s"}

	agentHealth := testenv.FreeAddr(t)
	agent := testenv.StartProcess(t, bin, append([]string{"--cluster-name", "member1", "--kubeconfig", kubeconfig, "--hub-kubeconfig", kubeconfig,
		"--node-name", node, "--dns-probe=false", "--dns-server", dnsServer,
		"--health-probe-bind-address", agentHealth, "--metrics-bind-address", "0"}, fast...)...)
	// It leads (its loops run) …
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := env.Kube.CoordinationV1().Leases(ns).Get(ctx, "flotilla-agent", metav1.GetOptions{})
		return err == nil && strings.HasPrefix(ptr.Deref(l.Spec.HolderIdentity, ""), node+"_"), nil
	})
	if err != nil {
		t.Fatalf("the agent never led: %v\n%s", err, agent.Output())
	}
	// … without a DNS probe loop.
	var body string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var code int
		code, body, err = testenv.HTTPGet(ctx, agentHealth, "/healthz?verbose")
		return err == nil && code == 200, nil
	})
	if err != nil || strings.Contains(body, "dns-probe") || !strings.Contains(body, "leader-election") {
		t.Fatalf("agent --dns-probe=false /healthz: %v\n%s", err, body)
	}

	probeHealth := testenv.FreeAddr(t)
	probe := testenv.StartProcess(t, bin, append([]string{"dns-probe", "--kubeconfig", kubeconfig, "--node-name", node, "--dns-server", dnsServer,
		"--health-probe-bind-address", probeHealth, "--metrics-bind-address", "0"}, fast...)...)
	leases := env.Kube.CoordinationV1().Leases(ns)
	var first *coordinationv1.Lease
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		first, err = leases.Get(ctx, dnsprobe.VerdictLeaseName(node), metav1.GetOptions{})
		return err == nil && first.Labels[dnsprobe.LabelStatus] == "True", nil
	})
	if err != nil {
		t.Fatalf("agent dns-probe published no verdict: %v\n%s", err, probe.Output())
	}
	holder := ptr.Deref(first.Spec.HolderIdentity, "")
	// Over several renewals (one every quarter of the 1s stale threshold)
	// the holder stays the probe: the agent does not write.
	renewals := 0
	last := first.Spec.RenewTime.Time
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := leases.Get(ctx, first.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != holder {
			t.Fatalf("the verdict of %s has two writers: %s, then %s", node, holder, h)
		}
		if l.Spec.RenewTime.After(last) {
			renewals++
			last = l.Spec.RenewTime.Time
		}
		return renewals >= 4, nil
	})
	if err != nil {
		t.Fatalf("agent dns-probe does not renew its verdict: %v\n%s", err, probe.Output())
	}
	if code, body, err := testenv.HTTPGet(ctx, probeHealth, "/healthz?verbose"); err != nil || code != 200 || !strings.Contains(body, "dns-probe") {
		t.Errorf("agent dns-probe /healthz: %d %v\n%s", code, err, body)
	}
	for name, p := range map[string]*testenv.Process{"agent dns-probe": probe, "agent": agent} {
		if err := p.Terminate(20 * time.Second); err != nil {
			t.Errorf("%s did not exit cleanly on SIGTERM: %v", name, err)
		}
	}
}
