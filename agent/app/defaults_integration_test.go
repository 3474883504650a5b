package app_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/agent/app"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// TestAgentDampsReadyWithTheDefaultThresholds proves the default Ready
// damping (--cluster-failure-threshold and --cluster-success-threshold,
// 30s each) against real apiservers: the e2e suite runs its environment with
// shorter thresholds (e2e/framework.ShortTimings) and proves the damping
// there, so this is where the default values themselves are waited out.
// The agent runs without leader election, so a member it cannot reach is
// reported (a leader would step down first) and the thresholds alone decide
// when Ready moves. It waits about a minute of real time: run beside the
// others.
func TestAgentDampsReadyWithTheDefaultThresholds(t *testing.T) {
	t.Parallel()
	defaults := app.NewOptions()
	if defaults.ClusterFailureThreshold != 30*time.Second || defaults.ClusterSuccessThreshold != 30*time.Second {
		t.Fatalf("default thresholds %s/%s, want 30s/30s (docs/agent.md and the e2e timings rely on them)",
			defaults.ClusterFailureThreshold, defaults.ClusterSuccessThreshold)
	}
	f := newFleet(t)
	f.register(t, "", true)
	createReadyNode(t, f.member.Kube, "node-a", "4", "8Gi")
	proxy := testenv.StartCutProxy(t, testenv.HostOf(t, f.member.Config.Host))

	opts := f.fastOptions("node-a")
	opts.Kubeconfig = f.memberKubeconfigVia(t, proxy)
	opts.LeaderElection.LeaderElect = false
	opts.ClusterFailureThreshold, opts.ClusterSuccessThreshold = defaults.ClusterFailureThreshold, defaults.ClusterSuccessThreshold
	runAgent(t, opts)
	// A cluster without a Ready condition takes the first probe as it is.
	poll(t, 30*time.Second, "Ready True", func() bool {
		status, _ := f.readyStatus(t)
		return status == metav1.ConditionTrue
	})

	proxy.SetCut(true)
	cut := time.Now()
	poll(t, defaults.ClusterFailureThreshold+30*time.Second, "Ready to leave True after the cut", func() bool {
		status, _ := f.readyStatus(t)
		return status != metav1.ConditionTrue
	})
	wentDown := time.Since(cut)
	status, reason := f.readyStatus(t)
	t.Logf("Ready %s/%s %s after the member was cut off", status, reason, wentDown.Round(time.Millisecond))
	if status != metav1.ConditionFalse || reason != clusterv1alpha1.ClusterReasonNotReachable {
		t.Errorf("Ready %s/%s after the cut, want False/%s", status, reason, clusterv1alpha1.ClusterReasonNotReachable)
	}
	if wentDown < defaults.ClusterFailureThreshold {
		t.Errorf("Ready left True %s after the cut, before the default failure threshold %s", wentDown, defaults.ClusterFailureThreshold)
	}

	proxy.SetCut(false)
	healed := time.Now()
	poll(t, defaults.ClusterSuccessThreshold+30*time.Second, "Ready True again after healing", func() bool {
		status, _ := f.readyStatus(t)
		return status == metav1.ConditionTrue
	})
	wentUp := time.Since(healed)
	t.Logf("Ready True %s after healing", wentUp.Round(time.Millisecond))
	if wentUp < defaults.ClusterSuccessThreshold {
		t.Errorf("Ready went True %s after healing, before the default success threshold %s", wentUp, defaults.ClusterSuccessThreshold)
	}
}
