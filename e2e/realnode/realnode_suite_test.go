// Package realnode runs Flotilla where users run it: the image `make image`
// builds, installed with the shipped kustomizations on real clusters whose
// nodes are real kubelets on containerd (hack/realnode-up.sh), under the
// shipped RBAC, and checks the flows that only real pods, real DNS and real
// leader pods exercise. It needs root, containerd and the CNI plugins; where
// they are missing the whole suite is skipped with one line saying why.
package realnode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/e2e/framework"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

// The e2e overlays' timers: the local suite's short ones (framework.ShortTimings),
// and a first hub token of TokenRequest's minimum lifetime that the agents
// renew after a twentieth of it (30 s), so the renewal happens in the run.
const (
	firstTokenLifetime = "10m"
	tokenRenewFraction = "0.05"
)

// member is one member cluster.
type member struct {
	Name, Context, NetNS string
	Kube                 kubernetes.Interface
}

var (
	root, stateDir, kubeconfig, prefix string
	hubContext                         string
	hubKube                            kubernetes.Interface
	flotilla                           flotillaclient.Interface
	members                            []member
	timings                            = framework.ShortTimings()
	treeBefore                         string
)

func TestRealNode(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Flotilla on real nodes")
}

// script runs hack/NAME ARGS with the suite's environment and env, its
// output going to the Ginkgo writer (and the error when it fails).
func script(ctx context.Context, name string, args []string, env ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", name), args...)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), "REALNODE_STATE_DIR="+stateDir, "REALNODE_PREFIX="+prefix), env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	start := time.Now()
	err := cmd.Run()
	GinkgoWriter.Printf("hack/%s (%s):\n%s\n", name, time.Since(start).Round(time.Second), out.String())
	if err != nil {
		return fmt.Errorf("hack/%s: %w\n%s", name, err, out.String())
	}
	return nil
}

// gitStatus is what git reports changed or untracked, ignored files aside,
// where the documented commands write: the kustomizations (overlays, the
// image Component) and the manifests.
func gitStatus() string {
	out, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=all", "--", "kustomize", "manifests").Output()
	if err != nil {
		return "git status: " + err.Error()
	}
	return string(out)
}

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	root, err = filepath.Abs("../..")
	Expect(err).NotTo(HaveOccurred())
	prefix = "flrn"
	stateDir = filepath.Join(root, ".local", "realnode")
	if dir := os.Getenv("REALNODE_STATE_DIR"); dir != "" {
		stateDir = dir
	}

	if testing.Short() {
		Skip("realnode: skipped in -short mode (make test-e2e-realnode runs it)")
	}
	// One clear line when this machine cannot run real nodes.
	check := exec.CommandContext(ctx, "bash", "-c", `ROOT="$1"; source "$1/hack/realnode-lib.sh"; realnode_preflight`, "-", root)
	if out, err := check.CombinedOutput(); err != nil {
		line := strings.TrimSpace(string(out))
		fmt.Println(line)
		Skip(line)
	}

	treeBefore = gitStatus()
	Expect(script(ctx, "realnode-up.sh", nil)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		if os.Getenv("E2E_KEEP") == "1" {
			return
		}
		Expect(script(ctx, "realnode-down.sh", nil, "KEEP_LOGS="+filepath.Join(root, ".local", "realnode-logs"))).To(Succeed())
	}, NodeTimeout(3*time.Minute))

	dnsFlags := []string{}
	for _, f := range timings.AgentFlags() {
		if strings.HasPrefix(f, "--dns-") {
			dnsFlags = append(dnsFlags, f)
		}
	}
	Expect(script(ctx, "realnode-install.sh", nil,
		"HUB_FLAGS="+strings.Join(timings.HubFlags(), " "),
		"AGENT_FLAGS="+strings.Join(append(timings.AgentFlags(), "--hub-token-renew-fraction="+tokenRenewFraction), " "),
		"DNS_PROBE_FLAGS="+strings.Join(dnsFlags, " "),
		"DURATION="+firstTokenLifetime,
	)).To(Succeed())

	kubeconfig = filepath.Join(stateDir, "kubeconfig")
	hubContext = prefix + "-hub"
	cfg, err := restConfig(hubContext)
	Expect(err).NotTo(HaveOccurred())
	hubKube = kubernetes.NewForConfigOrDie(cfg)
	flotilla = flotillaclient.NewForConfigOrDie(cfg)
	for i := 1; i <= 2; i++ {
		name := fmt.Sprintf("member%d", i)
		cfg, err := restConfig(prefix + "-" + name)
		Expect(err).NotTo(HaveOccurred())
		members = append(members, member{Name: name, Context: prefix + "-" + name, NetNS: prefix + "-" + name,
			Kube: kubernetes.NewForConfigOrDie(cfg)})
	}
}, NodeTimeout(20*time.Minute))

// When a spec fails, what the clusters looked like goes into its output:
// CI keeps nothing else (realnode-down.sh removes the clusters).
var _ = AfterEach(func(ctx SpecContext) {
	if !CurrentSpecReport().Failed() || kubeconfig == "" {
		return
	}
	kubectl := filepath.Join(root, "bin", "kubectl")
	for _, args := range [][]string{
		{"--context", hubContext, "get", "clusters", "-o", "wide"},
		{"--context", hubContext, "get", "resourcebindings", "-A", "-o", "yaml"},
		{"--context", hubContext, "-n", system, "logs", "-l", hubSelector, "--tail", "60", "--prefix"},
		{"--context", prefix + "-member1", "get", "pods", "-A", "-o", "wide"},
		{"--context", prefix + "-member2", "get", "pods", "-A", "-o", "wide"},
		{"--context", prefix + "-member1", "-n", system, "logs", "-l", agentSelector, "--tail", "40", "--prefix"},
		{"--context", prefix + "-member2", "-n", system, "logs", "-l", agentSelector, "--tail", "40", "--prefix"},
	} {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		out, _ := exec.CommandContext(cctx, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		cancel()
		GinkgoWriter.Printf("$ kubectl %s\n%s\n", strings.Join(args, " "), out)
	}
}, NodeTimeout(3*time.Minute))

func restConfig(context string) (*rest.Config, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 10 * time.Second
	return cfg, nil
}

// ctl runs hack/realnode-ctl.sh ACTION CLUSTER.
func ctl(ctx context.Context, action, cluster string) error {
	return script(ctx, "realnode-ctl.sh", []string{action, cluster})
}
