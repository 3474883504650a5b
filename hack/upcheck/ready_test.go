package upcheck

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// libSh runs script after sourcing hack/lib.sh and returns its stdout,
// stderr and error.
func libSh(t *testing.T, env []string, script string) (string, string, error) {
	t.Helper()
	root := repoRoot(t)
	cmd := exec.Command("bash", "-c", "set -euo pipefail; source hack/lib.sh; "+script)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return strings.TrimSpace(out.String()), errOut.String(), err
}

// Issue 30 item 11: how long `make up` waits for the members follows the
// agents' flags. A member whose agents restart while the hub shows it
// Unknown or False turns Ready only after --cluster-success-threshold,
// checked every --cluster-status-update-frequency, once a leader holds the
// member's election Lease; the old fixed minute was shorter than that
// twice over (one failed probe on a busy machine restarts the threshold).
func TestMembersReadyTimeoutFollowsTheAgentFlags(t *testing.T) {
	for _, tc := range []struct {
		args string
		want string
	}{
		{"", "135"}, // 2 × (15s lease + 30s threshold + 10s period) + hub election and margin
		{"--cluster-success-threshold=2m --leader-elect-lease-duration 4s", "293"},
		{"--cluster-status-update-frequency=500ms --cluster-success-threshold=1m30s", "237"},
	} {
		got, stderr, err := libSh(t, nil, "members_ready_timeout "+tc.args)
		if err != nil || got != tc.want {
			t.Errorf("members_ready_timeout %s = %q (%v, %s), want %s", tc.args, got, err, stderr, tc.want)
		}
	}
	if got, _, _ := libSh(t, []string{"READY_TIMEOUT=7"}, "members_ready_timeout"); got != "7" {
		t.Errorf("READY_TIMEOUT=7: %q", got)
	}
}

// wait_members_ready waits for the hub's view, against a real apiserver:
// Ready=True is not enough while the hub's taint is still there, it
// returns as soon as every member is Ready and untainted, and when the
// deadline (wall-clock seconds, not a count of polls) passes it fails
// saying which member shows what.
func TestWaitMembersReadyWaitsForTheHubsView(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	kc, err := clientcmd.Load(mustKubeconfig(t, env))
	if err != nil {
		t.Fatal(err)
	}
	kc.Contexts["t-hub"] = kc.Contexts[kc.CurrentContext]
	path := filepath.Join(t.TempDir(), "config")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	shEnv := []string{"FLOTILLA_KUBECONFIG=" + path, "FLOTILLA_PREFIX=t", "MEMBERS=2", "FLOTILLA_BIN=" + testenv.AssetsDir(env.Root)}

	set := func(name string, ready metav1.ConditionStatus, taints ...corev1.Taint) {
		t.Helper()
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			c, err = fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
		c.Spec.Taints = taints
		if c, err = fc.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady, Status: ready, Reason: "Test"})
		if _, err := fc.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	unreachable := corev1.Taint{Key: "cluster.flotilla.io/unreachable", Effect: corev1.TaintEffectNoSchedule}
	set("member1", metav1.ConditionTrue)
	set("member2", metav1.ConditionUnknown, unreachable)

	// Not in time: it says what the hub shows.
	start := time.Now()
	_, stderr, err := libSh(t, shEnv, "wait_members_ready 3")
	if err == nil {
		t.Fatal("wait_members_ready returned success while member2 is Unknown and tainted")
	}
	if took := time.Since(start); took < 2*time.Second || took > 20*time.Second { // SECONDS counts whole seconds
		t.Errorf("a 3s wait took %s", took)
	}
	if !strings.Contains(stderr, "member2 Ready=Unknown cluster.flotilla.io/unreachable") {
		t.Errorf("the failure does not show member2's state:\n%s", stderr)
	}

	// In time: Ready first, the taint a little later (the hub removes it).
	done := make(chan error, 1)
	var waitErr bytes.Buffer
	go func() {
		_, stderr, err := libSh(t, shEnv, "wait_members_ready 60")
		waitErr.WriteString(stderr)
		done <- err
	}()
	time.Sleep(3 * time.Second)
	set("member2", metav1.ConditionTrue, unreachable)
	select {
	case err := <-done:
		t.Fatalf("wait_members_ready returned (%v) while member2 still carries its taint", err)
	case <-time.After(3 * time.Second):
	}
	set("member2", metav1.ConditionTrue)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wait_members_ready: %v\n%s", err, waitErr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("wait_members_ready did not return once every member was Ready and untainted")
	}
}

func mustKubeconfig(t *testing.T, env *testenv.Env) []byte {
	t.Helper()
	data, err := testenv.Kubeconfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
