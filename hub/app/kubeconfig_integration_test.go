package app_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/flotilla-io/flotilla/hub/app"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

// kubeconfigWithDeadCurrentContext copies the one-context kubeconfig at
// path, renames its context to good and makes the current context one whose
// server does not answer, so only --context good reaches the cluster.
func kubeconfigWithDeadCurrentContext(t *testing.T, path, good string) string {
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
	out := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// isolateKubeconfigHabits leaves the process only the KUBECONFIG the test
// sets: an empty HOME (no ~/.kube/config) and no in-cluster environment.
func isolateKubeconfigHabits(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
}

// The hub and `hub agent-kubeconfig` find the host cluster as kubectl does:
// with only KUBECONFIG set (no --kubeconfig) the hub runs and makes the
// agent identity, and agent-kubeconfig prints a kubeconfig that works as
// that identity; with a kubeconfig whose current context is dead,
// --context picks the live one. Not parallel: it sets the environment.
func TestHubAndAgentKubeconfigLoadKubeconfigLikeKubectl(t *testing.T) {
	isolateKubeconfigHabits(t)
	var hubKubeconfig string
	ctx, fc := startHubWith(t, func(o *app.Options) {
		// No --kubeconfig: the hub must find KUBECONFIG itself.
		hubKubeconfig, o.Kubeconfig = o.Kubeconfig, ""
		t.Setenv("KUBECONFIG", hubKubeconfig)
	})
	createReadyClusters(t, ctx, fc, "member1")

	// Only KUBECONFIG. The hub made the identity, or the command waits in
	// vain (--wait) and fails.
	printed := runAgentKubeconfigCommand(t, ctx, "agent-kubeconfig", "--cluster", "member1", "--wait", "60s")
	checkAgentKubeconfigWorks(t, ctx, printed, "member1")

	// KUBECONFIG's current context is dead; --context names the live one.
	t.Setenv("KUBECONFIG", kubeconfigWithDeadCurrentContext(t, hubKubeconfig, "hub"))
	printed = runAgentKubeconfigCommand(t, ctx, "agent-kubeconfig", "--cluster", "member1", "--context", "hub")
	checkAgentKubeconfigWorks(t, ctx, printed, "member1")

	// An unknown context is an error that names it, not a fallback.
	cmd := app.NewHubCommand()
	cmd.SetArgs([]string{"agent-kubeconfig", "--cluster", "member1", "--context", "nope"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), `context "nope" not found`) {
		t.Errorf("--context nope: want a context-not-found error, got %v", err)
	}
}

// runAgentKubeconfigCommand runs `hub <args>` as the binary would and
// returns its standard output.
func runAgentKubeconfigCommand(t *testing.T, ctx context.Context, args ...string) []byte {
	t.Helper()
	cmd := app.NewHubCommand()
	var stdout, stderr bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("hub %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// checkAgentKubeconfigWorks uses the printed kubeconfig: the apiserver
// knows it as the cluster's agent ServiceAccount, and it may read its
// Cluster.
func checkAgentKubeconfigWorks(t *testing.T, ctx context.Context, kubeconfig []byte, cluster string) {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatalf("printed kubeconfig: %v\n%s", err, kubeconfig)
	}
	review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("printed kubeconfig does not authenticate: %v", err)
	}
	if want := "system:serviceaccount:flotilla-es-" + cluster + ":flotilla-agent"; review.Status.UserInfo.Username != want {
		t.Errorf("printed kubeconfig authenticates as %q, want %q", review.Status.UserInfo.Username, want)
	}
	// --wait waits for the identity's ServiceAccount; its RBAC may land a
	// moment later (the hub makes it right after, and the apiserver's
	// authorizer sees it through a cache), as an agent's retries allow.
	client := flotillaclient.NewForConfigOrDie(cfg)
	waitUntil(t, "the agent identity to read its Cluster", func() (bool, error) {
		_, err := client.ClusterV1alpha1().Clusters().Get(ctx, cluster, metav1.GetOptions{})
		return err == nil, nil
	})
}
