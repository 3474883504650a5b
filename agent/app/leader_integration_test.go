package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/pkg/agent/dnsprobe"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// memberKubeconfigVia is the member's admin kubeconfig through proxy.
func (f *fleet) memberKubeconfigVia(t *testing.T, proxy *testenv.CutProxy) string {
	t.Helper()
	return f.member.KubeconfigFor(t, proxy.ConfigVia(t, f.member.Config))
}

func (f *fleet) readyStatus(t *testing.T) (metav1.ConditionStatus, string) {
	c := meta.FindStatusCondition(f.cluster(t).Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	if c == nil {
		return "", ""
	}
	return c.Status, c.Reason
}

// TestCutOffLeaderStepsDownAndReadyNeverFlaps is the partial partition: two
// agents of one member, and only the leader loses the member apiserver (both
// still reach the hub). The cut-off leader must step down before its failure
// threshold, the other agent must take over the member Lease and the hub
// Lease, and the hub's Ready must stay True throughout — before, the cut-off
// leader kept leading and wrote False/ClusterNotReachable while the other
// wrote True, in turn. Healing changes nothing.
func TestCutOffLeaderStepsDownAndReadyNeverFlaps(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.register(t, "", true)
	createReadyNode(t, f.member.Kube, "node-a", "4", "8Gi")
	createReadyNode(t, f.member.Kube, "node-b", "4", "8Gi")
	proxy := testenv.StartCutProxy(t, testenv.HostOf(t, f.member.Config.Host))

	// Agent A reaches the member only through the proxy; it starts first
	// and leads.
	a := f.fastOptions("node-a")
	a.Kubeconfig = f.memberKubeconfigVia(t, proxy)
	a.MetricsBindAddress = f.metrics
	failureThreshold := a.ClusterFailureThreshold
	runAgent(t, a)
	poll(t, 30*time.Second, "node-a to lead, renew the hub Lease and report Ready", func() bool {
		status, _ := f.readyStatus(t)
		return strings.HasPrefix(f.holder(t), "node-a_") && strings.HasPrefix(f.hubHolder(t), "node-a_") &&
			status == metav1.ConditionTrue
	})
	runAgent(t, f.fastOptions("node-b"))
	// node-b is up (its DNS verdict is there) and standing by.
	poll(t, 30*time.Second, "node-b's DNS verdict", func() bool {
		_, err := f.member.Kube.CoordinationV1().Leases(f.agentNamespace).Get(context.Background(), dnsprobe.VerdictLeaseName("node-b"), metav1.GetOptions{})
		return err == nil
	})
	if h := f.hubHolder(t); !strings.HasPrefix(h, "node-a_") {
		t.Fatalf("hub Lease holder %q before the cut, want node-a's", h)
	}

	proxy.SetCut(true)
	cut := time.Now()
	// Over the failure threshold plus a wide margin: Ready never leaves
	// True, and node-b takes over both Leases.
	window := failureThreshold + 6*time.Second
	var tookOver time.Duration
	var hubHolders []string
	for time.Since(cut) < window {
		if status, reason := f.readyStatus(t); status != metav1.ConditionTrue {
			t.Fatalf("%s after the cut: Ready %s/%s; a cut-off leader spoke for a member the other agent sees", time.Since(cut).Round(time.Millisecond), status, reason)
		}
		h := f.hubHolder(t)
		if len(hubHolders) == 0 || hubHolders[len(hubHolders)-1] != h {
			hubHolders = append(hubHolders, h)
		}
		if tookOver == 0 && strings.HasPrefix(h, "node-b_") && strings.HasPrefix(f.holder(t), "node-b_") {
			tookOver = time.Since(cut)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if tookOver == 0 {
		t.Fatalf("node-b did not take over within %s; hub Lease holders: %v, member Lease holder %q", window, hubHolders, f.holder(t))
	}
	t.Logf("node-b took over %s after the cut; hub Lease holders %v", tookOver.Round(time.Millisecond), hubHolders)
	// node-a counts its step-down and stops reporting itself leader when it
	// decides, not when its work has wound down (that may take a while
	// on a loaded machine; writers are refused from the decision on).
	var body string
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if _, body, err = testenv.HTTPGet(context.Background(), f.metrics, "/metrics"); err != nil {
			t.Fatal(err)
		}
		stepped := metricAtLeast(body, `flotilla_agent_leader_step_downs_total{reason="MemberLeaseNotRenewed"}`, 1)
		notLeader := strings.Contains(body, "flotilla_agent_leader 0")
		if stepped && notLeader {
			break
		}
		if time.Now().After(deadline) {
			if !stepped {
				t.Errorf("node-a did not count its step-down")
			}
			if !notLeader {
				t.Errorf("node-a still reports itself leader")
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Heal: node-a sees node-b holding both Leases and stays a follower;
	// nothing flaps.
	proxy.SetCut(false)
	healed := time.Now()
	for time.Since(healed) < failureThreshold+2*time.Second {
		if status, reason := f.readyStatus(t); status != metav1.ConditionTrue {
			t.Fatalf("%s after healing: Ready %s/%s", time.Since(healed).Round(time.Millisecond), status, reason)
		}
		if h := f.hubHolder(t); !strings.HasPrefix(h, "node-b_") {
			t.Fatalf("%s after healing: hub Lease holder %q, want node-b's", time.Since(healed).Round(time.Millisecond), h)
		}
		if h := f.holder(t); !strings.HasPrefix(h, "node-b_") {
			t.Fatalf("%s after healing: member Lease holder %q, want node-b's", time.Since(healed).Round(time.Millisecond), h)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAgentStandsDownWhileAnotherAgentRenewsTheHubLease: while another
// identity renews the hub Lease (here the test, playing a second leader that
// the member Lease did not stop), the leader neither renews it nor writes
// the Cluster, and releases the member Lease; once the other goes quiet it
// leads again.
func TestAgentStandsDownWhileAnotherAgentRenewsTheHubLease(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.register(t, "", true)
	createReadyNode(t, f.member.Kube, "node-a", "4", "8Gi")
	opts := f.fastOptions("node-a")
	opts.MetricsBindAddress = f.metrics
	runAgent(t, opts)
	nodes := func() int32 {
		if s := f.cluster(t).Status.NodeSummary; s != nil {
			return s.TotalNum
		}
		return -1
	}
	poll(t, 30*time.Second, "node-a to lead and report one node", func() bool {
		return strings.HasPrefix(f.hubHolder(t), "node-a_") && nodes() == 1
	})

	// The intruder renews every 200ms, well inside the agent's 1s window
	// (two renew intervals of its 2s × 0.25 hub Lease).
	ctx, stop := context.WithCancel(context.Background())
	intruderDone := make(chan struct{})
	go func() {
		defer close(intruderDone)
		leases := f.hub.Kube.CoordinationV1().Leases(f.clusterNamespace)
		for ctx.Err() == nil {
			if l, err := leases.Get(ctx, f.clusterName, metav1.GetOptions{}); err == nil {
				l.Spec.HolderIdentity = ptr.To("intruder")
				l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
				_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	stopIntruder := func() { stop(); <-intruderDone }
	t.Cleanup(stopIntruder)

	poll(t, 15*time.Second, "node-a to step down and release the member Lease", func() bool {
		_, body, err := testenv.HTTPGet(context.Background(), f.metrics, "/metrics")
		return err == nil && metricAtLeast(body, `flotilla_agent_leader_step_downs_total{reason="HubLeaseHeldByOther"}`, 1) &&
			strings.Contains(body, "flotilla_agent_leader 0") && !strings.HasPrefix(f.holder(t), "node-a_")
	})
	// A member change the leader would report within a status period.
	createReadyNode(t, f.member.Kube, "node-b", "4", "8Gi")
	rv := f.cluster(t).ResourceVersion
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if h := f.hubHolder(t); h != "intruder" {
			t.Fatalf("hub Lease taken back from an active holder: holder %q", h)
		}
		if c := f.cluster(t); c.ResourceVersion != rv {
			t.Fatalf("Cluster written while another agent renews the hub Lease (nodes %d)", nodes())
		}
		if strings.HasPrefix(f.holder(t), "node-a_") {
			t.Fatal("node-a took the member Lease again while another agent renews the hub Lease")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The intruder goes quiet: node-a leads again, renews and reports.
	stopIntruder()
	poll(t, 30*time.Second, "node-a to lead again and report both nodes", func() bool {
		return strings.HasPrefix(f.holder(t), "node-a_") && strings.HasPrefix(f.hubHolder(t), "node-a_") && nodes() == 2
	})
}
