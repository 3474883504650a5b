package app_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/flotilla-io/flotilla/pkg/agent/dnsprobe"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// The agent finds its member as kubectl finds a cluster: here only
// KUBECONFIG names it (no --kubeconfig, an empty HOME). Its hub identity
// comes from --hub-kubeconfig alone, whose current context is dead:
// --hub-context picks the live one. The agent leads on the member and
// renews its Lease on the hub, so it reached both; `agent dns-probe` with
// the same environment publishes its verdict on the member.
func TestAgentBinaryFindsMemberThroughKUBECONFIGAndHubThroughHubContext(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.register(t, "", true)
	bin := testenv.BuildBinary(t, "./agent")
	envBin, err := exec.LookPath("env")
	if err != nil {
		t.Skip("no env(1) to start the binary with its own environment")
	}
	// env(1) replaces itself with the binary, so signals and the exit
	// status are the agent's.
	environ := []string{"KUBECONFIG=" + f.memberKubeconfig, "HOME=" + t.TempDir(), "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT="}
	hubKubeconfig := agentKubeconfigWithDeadCurrentContext(t, f.hubKubeconfig, "hub")
	const node = "node-kc"
	agent := testenv.StartProcess(t, envBin, append(environ, bin, "--cluster-name", f.clusterName,
		"--hub-kubeconfig", hubKubeconfig, "--hub-context", "hub",
		"--node-name", node, "--dns-server", f.dnsServer,
		"--health-probe-bind-address", "0", "--metrics-bind-address", "0")...)

	err = waitKubeconfigHabit(60*time.Second, func() bool {
		return strings.HasPrefix(f.holder(t), node+"_") && strings.HasPrefix(f.hubHolder(t), node+"_")
	})
	if err != nil {
		t.Fatalf("the agent did not lead on the member (holder %q) and renew its hub Lease (holder %q): %v\n%s",
			f.holder(t), f.hubHolder(t), err, agent.Output())
	}

	const probeNode = "node-kc-probe"
	probe := testenv.StartProcess(t, envBin, append(environ, bin, "dns-probe", "--namespace", f.agentNamespace,
		"--node-name", probeNode, "--dns-server", f.dnsServer,
		"--health-probe-bind-address", "0", "--metrics-bind-address", "0")...)
	err = waitKubeconfigHabit(60*time.Second, func() bool {
		_, err := f.member.Kube.CoordinationV1().Leases(f.agentNamespace).Get(context.Background(), dnsprobe.VerdictLeaseName(probeNode), metav1.GetOptions{})
		return err == nil
	})
	if err != nil {
		t.Fatalf("agent dns-probe published no verdict on the member: %v\n%s", err, probe.Output())
	}
}

// waitKubeconfigHabit is poll that returns the timeout instead of failing the test, so
// the caller can print the process output with it.
func waitKubeconfigHabit(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return context.DeadlineExceeded
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// agentKubeconfigWithDeadCurrentContext copies the one-context kubeconfig
// at path, renames its context to good and makes the current context one
// whose server does not answer.
func agentKubeconfigWithDeadCurrentContext(t *testing.T, path, good string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	delete(cfg.Contexts, cfg.CurrentContext)
	cfg.Contexts[good] = ctx
	cfg.Clusters["dead"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["dead"] = &clientcmdapi.AuthInfo{Token: "dead"}
	cfg.Contexts["dead"] = &clientcmdapi.Context{Cluster: "dead", AuthInfo: "dead"}
	cfg.CurrentContext = "dead"
	out := filepath.Join(t.TempDir(), "hub.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		t.Fatal(err)
	}
	return out
}
