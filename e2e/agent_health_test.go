package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/e2e/framework"
	"github.com/flotilla-io/flotilla/pkg/agent/dnsprobe"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// The agents and the hub run with env.Timings (framework.ShortTimings in
// the suite's own local environment, the defaults elsewhere): the specs
// wait out and bound those, never assumed values.
const (
	agentLeaderLease = "flotilla-agent"
	agentNamespace   = "flotilla-system"
)

var _ = Describe("Agent health", Ordered, func() {
	var (
		hubKube  kubernetes.Interface
		flotilla flotillaclient.Interface
	)
	BeforeAll(func() {
		cfg, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		hubKube, err = kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		flotilla, err = flotillaclient.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
	})

	condition := func(ctx context.Context, member, condType string) *metav1.Condition {
		c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, member, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return meta.FindStatusCondition(c.Status.Conditions, condType)
	}
	status := func(ctx context.Context, member, condType string) metav1.ConditionStatus {
		if c := condition(ctx, member, condType); c != nil {
			return c.Status
		}
		return ""
	}
	hubRenewTime := func(ctx context.Context, member string) time.Time {
		l, err := hubKube.CoordinationV1().Leases("flotilla-es-"+member).Get(ctx, member, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return time.Time{}
		}
		return l.Spec.RenewTime.Time
	}

	var clusterFailureThreshold, clusterSuccessThreshold, hubLeaseGrace, electionLease, renewInterval, statusPeriod time.Duration
	BeforeAll(func() {
		t := env.Timings
		clusterFailureThreshold, clusterSuccessThreshold = t.ClusterFailureThreshold, t.ClusterSuccessThreshold
		hubLeaseGrace, electionLease, renewInterval, statusPeriod = t.HubLeaseGrace, t.ElectionLease, t.RenewInterval(), t.StatusUpdateFrequency
	})

	It("reports every member Ready with its identity, inventory and DNS, and renews its Lease on the hub", func(ctx SpecContext) {
		for _, m := range env.Members {
			memberKube, err := env.Kube(m.Context)
			Expect(err).NotTo(HaveOccurred())
			kubeSystem, err := memberKube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())

			eventually(ctx, func(g Gomega) {
				c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, m.Name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(c.Spec.ID).To(Equal(string(kubeSystem.UID)), "spec.id is the member's kube-system UID")
				ready := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
				g.Expect(ready).NotTo(BeNil())
				g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(ready.Reason).To(Equal(clusterv1alpha1.ClusterReasonReady))
				g.Expect(status(ctx, m.Name, clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady)).To(Equal(metav1.ConditionTrue))
				g.Expect(c.Status.KubernetesVersion).To(Equal("v1.36.3"))
				g.Expect(c.Status.NodeSummary).NotTo(BeNil())
				g.Expect(c.Status.NodeSummary.TotalNum).To(BeNumerically(">=", 2))
				g.Expect(c.Status.NodeSummary.ReadyNum).To(Equal(c.Status.NodeSummary.TotalNum))
				g.Expect(c.Status.ResourceSummary).NotTo(BeNil())
				g.Expect(c.Status.ResourceSummary.Allocatable).To(HaveKey(BeEquivalentTo("cpu")))
				g.Expect(c.Status.APIEnablements).To(ContainElement(HaveField("GroupVersion", "apps/v1")))
			}).Should(Succeed(), "member %s", m.Name)

			first := hubRenewTime(ctx, m.Name)
			Expect(first.IsZero()).To(BeFalse(), "member %s: hub Lease never renewed", m.Name)
			eventually(ctx, func() time.Time { return hubRenewTime(ctx, m.Name) }).
				Should(BeTemporally(">", first), "member %s: hub Lease renewTime does not advance", m.Name)
		}
	})

	It("hands leadership over within the election lease when the leader is killed, and the hub Lease never goes stale", func(ctx SpecContext) {
		m := env.Members[1]
		memberKube, err := env.Kube(m.Context)
		Expect(err).NotTo(HaveOccurred())
		holder := func() string {
			l, err := memberKube.CoordinationV1().Leases(agentNamespace).Get(ctx, agentLeaderLease, metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil {
				return ""
			}
			return *l.Spec.HolderIdentity
		}
		leader := holder()
		Expect(leader).NotTo(BeEmpty())
		victim := agentPlaying(m, leader)
		Expect(victim).NotTo(BeEmpty(), "no agent of %s plays the leader %s", m.Name, leader)

		killed := time.Now()
		Expect(env.Ctl(ctx, "kill", victim)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(env.Ctl(ctx, "start", victim)).To(Succeed()) })

		// Poll the member's election Lease and the hub Lease together: the
		// new leader must appear and renew the hub Lease, which must stay
		// fresh all along.
		var maxStaleness, takeover time.Duration
		Eventually(ctx, func(g Gomega) {
			renew := hubRenewTime(ctx, m.Name)
			g.Expect(renew.IsZero()).To(BeFalse())
			if age := time.Since(renew); age > maxStaleness {
				maxStaleness = age
			}
			h := holder()
			g.Expect(h).NotTo(BeEmpty())
			g.Expect(h).NotTo(Equal(leader))
			if takeover == 0 {
				takeover = time.Since(killed)
			}
			g.Expect(renew).To(BeTemporally(">", killed), "the new leader renews the hub Lease")
		}).WithTimeout(hubLeaseGrace).WithPolling(250 * time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("leader %s killed: new leader %s after %s; hub Lease at most %s old\n", leader, holder(), takeover.Round(time.Millisecond), maxStaleness.Round(time.Millisecond))
		// client-go semantics: a standby checks the Lease every retry period
		// plus up to 1.2× jitter (2.2 × retry), so it notices the last
		// renewal up to that late, waits the lease from then, and tries
		// again up to that long after it expires: at most lease + 4.4 ×
		// retry (15 + 8.8s with the defaults), and a few seconds for a
		// loaded machine.
		bound := electionLease + time.Duration(4.4*float64(env.Timings.ElectionRetryPeriod)) + 3*time.Second
		Expect(takeover).To(BeNumerically("<", bound), "takeover within the election lease (+ retries)")
		Expect(maxStaleness).To(BeNumerically("<", hubLeaseGrace), "hub Lease stale past the grace period")
		Expect(status(ctx, m.Name, clusterv1alpha1.ClusterConditionReady)).To(Equal(metav1.ConditionTrue), "a leader change is not an outage")
	})

	It("keeps a member Ready through a 5-second apiserver outage inside the failure threshold", func(ctx SpecContext) {
		m := env.Members[2]
		Expect(status(ctx, m.Name, clusterv1alpha1.ClusterConditionReady)).To(Equal(metav1.ConditionTrue))
		leaderMetrics := leaderAgentMetrics(ctx, m)
		failedBefore := metricSum(ctx, leaderMetrics, "flotilla_agent_probe_results_total", `probe="apiserver"`, `status="False"`)
		stepDownsBefore := metricSum(ctx, leaderMetrics, "flotilla_agent_leader_step_downs_total", `reason="MemberLeaseNotRenewed"`)

		stopped := time.Now()
		Expect(env.Ctl(ctx, "stop-cluster", env.ClusterName(m))).To(Succeed())
		// The outage spans at least one probe (every status period): wait
		// until the leader has seen the apiserver fail — a failed probe, or
		// its step-down after the renew deadline without a member Lease
		// renewal, whichever comes first — then hold 5 seconds more.
		Eventually(ctx, func() bool {
			return metricSum(ctx, leaderMetrics, "flotilla_agent_probe_results_total", `probe="apiserver"`, `status="False"`) > failedBefore ||
				metricSum(ctx, leaderMetrics, "flotilla_agent_leader_step_downs_total", `reason="MemberLeaseNotRenewed"`) > stepDownsBefore
		}).WithTimeout(statusPeriod+env.Timings.ElectionRenewDeadline+10*time.Second).WithPolling(250*time.Millisecond).Should(BeTrue(), "the leader never noticed the outage")
		outage := time.NewTimer(5 * time.Second)
		Consistently(ctx, func() metav1.ConditionStatus { return status(ctx, m.Name, clusterv1alpha1.ClusterConditionReady) }).
			WithTimeout(5 * time.Second).Should(Equal(metav1.ConditionTrue))
		<-outage.C
		Expect(env.Ctl(ctx, "start-cluster", env.ClusterName(m))).To(Succeed())
		GinkgoWriter.Printf("member apiserver was down for %s\n", time.Since(stopped).Round(time.Millisecond))
		Expect(time.Since(stopped)).To(BeNumerically("<", clusterFailureThreshold), "the outage must stay inside the threshold for this spec to mean anything")

		// Ready must not move until well past the point where an undamped
		// agent would have flipped it (threshold + one status period + a
		// few seconds).
		Consistently(ctx, func() metav1.ConditionStatus { return status(ctx, m.Name, clusterv1alpha1.ClusterConditionReady) }).
			WithTimeout(time.Until(stopped.Add(clusterFailureThreshold + statusPeriod + 3*time.Second))).WithPolling(500 * time.Millisecond).
			Should(Equal(metav1.ConditionTrue))
	})

	// A member-wide apiserver outage: no agent can renew its election Lease,
	// so none leads (one writer per member, docs/agent.md) and the hub marks
	// the cluster Unknown after its Lease grace period. An agent leader that
	// still renewed would report False/ClusterNotReachable instead; either
	// way Ready must not leave True before the failure threshold.
	It("takes Ready from True (False, or Unknown when no agent can lead) only after the failure threshold, and back to True only after the success threshold", func(ctx SpecContext) {
		m := env.Members[2]
		Eventually(ctx, func() metav1.ConditionStatus { return status(ctx, m.Name, clusterv1alpha1.ClusterConditionReady) }).
			WithTimeout(90 * time.Second).Should(Equal(metav1.ConditionTrue))

		stopped := time.Now()
		Expect(env.Ctl(ctx, "stop-cluster", env.ClusterName(m))).To(Succeed())
		DeferCleanup(func(ctx context.Context) { _ = env.Ctl(ctx, "start-cluster", env.ClusterName(m)) })
		var notReady *metav1.Condition
		Eventually(ctx, func(g Gomega) {
			notReady = condition(ctx, m.Name, clusterv1alpha1.ClusterConditionReady)
			g.Expect(notReady).NotTo(BeNil())
			g.Expect(notReady.Status).NotTo(Equal(metav1.ConditionTrue))
		}).WithTimeout(hubLeaseGrace + clusterFailureThreshold + 60*time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		wentDown := time.Since(stopped)
		switch notReady.Status {
		case metav1.ConditionFalse:
			Expect(notReady.Reason).To(Equal(clusterv1alpha1.ClusterReasonNotReachable))
		case metav1.ConditionUnknown:
			Expect(notReady.Reason).To(Equal(clusterv1alpha1.ClusterReasonStatusUnknown))
			// The hub's grace runs from the last renewal, at most one renew
			// interval before the stop.
			Expect(wentDown).To(BeNumerically(">=", hubLeaseGrace-renewInterval), "Unknown before the hub's Lease grace period")
		default:
			Fail(fmt.Sprintf("Ready %q", notReady.Status))
		}
		Expect(wentDown).To(BeNumerically(">=", clusterFailureThreshold), "Ready left True before the failure threshold")
		GinkgoWriter.Printf("Ready %s %s after the member apiserver stopped (%s): %s\n", notReady.Status, wentDown.Round(time.Millisecond), notReady.Reason, notReady.Message)

		started := time.Now()
		Expect(env.Ctl(ctx, "start-cluster", env.ClusterName(m))).To(Succeed())
		Eventually(ctx, func() metav1.ConditionStatus { return status(ctx, m.Name, clusterv1alpha1.ClusterConditionReady) }).
			WithTimeout(clusterSuccessThreshold + 60*time.Second).WithPolling(250 * time.Millisecond).Should(Equal(metav1.ConditionTrue))
		wentTrue := time.Since(started)
		GinkgoWriter.Printf("Ready True %s after the member apiserver was started\n", wentTrue.Round(time.Millisecond))
		Expect(wentTrue).To(BeNumerically(">=", clusterSuccessThreshold), "Ready went True before the success threshold")
	})

	It("stops renewing the hub Lease when every agent of the member stops, and resumes when one returns", func(ctx SpecContext) {
		m := env.Members[2]
		for _, a := range m.Agents {
			Expect(env.Ctl(ctx, "stop", a)).To(Succeed())
		}
		DeferCleanup(func(ctx context.Context) {
			for _, a := range m.Agents {
				_ = env.Ctl(ctx, "start", a)
			}
		})
		last := hubRenewTime(ctx, m.Name)
		// Over two renew intervals (and a few seconds) without a renewal.
		Consistently(ctx, func() time.Time { return hubRenewTime(ctx, m.Name) }).
			WithTimeout(2*renewInterval + 5*time.Second).WithPolling(500 * time.Millisecond).Should(Equal(last))

		Expect(env.Ctl(ctx, "start", m.Agents[0])).To(Succeed())
		eventually(ctx, func() time.Time { return hubRenewTime(ctx, m.Name) }).Should(BeTemporally(">", last))
	})

	// Breaking a member's CoreDNS (ServiceDomainNameResolutionReady False
	// after the threshold, True again after it) is proven by the "Remedy and
	// traffic control" spec, which needs that break anyway.

	It("keeps DNS True under the default quorum when only one agent's resolver fails, even one answering garbage", func(ctx SpecContext) {
		m := env.Members[0]
		dnsCond := clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady
		Expect(status(ctx, m.Name, dnsCond)).To(Equal(metav1.ConditionTrue))
		memberKube, err := env.Kube(m.Context)
		Expect(err).NotTo(HaveOccurred())

		garbage := startGarbageDNSServer()
		node := m.Name + "-node-garbage"
		health := freeAddr()
		extra := startBinary("agent", append(env.Timings.AgentFlags(), "--cluster-name", m.Name,
			"--kubeconfig", m.Kubeconfig, "--hub-kubeconfig", env.HubAgentKubeconfig,
			"--node-name", node, "--dns-server", garbage,
			"--dns-failure-threshold", "5s", "--dns-detect-period", "1s",
			"--health-probe-bind-address", health, "--metrics-bind-address", "0")...)
		DeferCleanup(func(ctx context.Context) {
			Expect(extra.Process.Signal(syscall.SIGTERM)).To(Succeed())
			Expect(extra.Wait()).To(Succeed(), "the extra agent exits cleanly")
			_ = memberKube.CoordinationV1().Leases(agentNamespace).Delete(ctx, dnsprobe.VerdictLeaseName(node), metav1.DeleteOptions{})
		})

		// The extra agent pod publishes a False verdict with a reason …
		var verdict *coordinationv1.Lease
		eventually(ctx, func(g Gomega) {
			verdict, err = memberKube.CoordinationV1().Leases(agentNamespace).Get(ctx, dnsprobe.VerdictLeaseName(node), metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(verdict.Labels[dnsprobe.LabelStatus]).To(Equal("False"))
		}).Should(Succeed())
		Expect(verdict.Labels[dnsprobe.LabelReason]).To(Equal(dnsprobe.ReasonMalformed))
		Expect(verdict.Spec.RenewTime).NotTo(BeNil())
		// … the leader sees it, and the cluster's DNS stays True.
		eventually(ctx, func(g Gomega) {
			c := condition(ctx, m.Name, dnsCond)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Message).To(ContainSubstring(node))
		}).Should(Succeed())
		// Past the point where the leader, were one failing node enough,
		// would have turned DNS False (its failure threshold after the
		// verdict, and a status period).
		Consistently(ctx, func() metav1.ConditionStatus { return status(ctx, m.Name, dnsCond) }).
			WithTimeout(env.Timings.DNSFailureThreshold + statusPeriod + 5*time.Second).WithPolling(500 * time.Millisecond).Should(Equal(metav1.ConditionTrue))
		// Garbage is a verdict, not a crash.
		code, _, err := testenv.HTTPGet(ctx, health, "/healthz")
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(200))
	})
})

// agentPlaying returns the process name of the agent whose leader-election
// identity is identity (identities are "<node>_<random>").
func agentPlaying(m framework.Member, identity string) string {
	node, _, _ := strings.Cut(identity, "_")
	for i, n := range m.AgentNodes {
		if n == node && i < len(m.Agents) {
			return m.Agents[i]
		}
	}
	return ""
}

// leaderAgentMetrics returns the metrics address of the member's leader agent.
func leaderAgentMetrics(ctx context.Context, m framework.Member) string {
	var addr string
	eventually(ctx, func() string {
		for _, a := range m.AgentMetrics {
			if metricSum(ctx, a, "flotilla_agent_leader") == 1 {
				addr = a
				return a
			}
		}
		return ""
	}).ShouldNot(BeEmpty(), "no leader among %v", m.AgentMetrics)
	return addr
}

// metricSum adds up the samples of metric whose labels contain every one of
// labels (`name="value"`); 0 when the endpoint cannot be read.
func metricSum(ctx context.Context, hostport, metric string, labels ...string) float64 {
	body, err := httpGet(ctx, hostport, "/metrics")
	if err != nil {
		return 0
	}
	var sum float64
	scanner := bufio.NewScanner(strings.NewReader(body))
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// startGarbageDNSServer runs a UDP server, written with miekg/dns, that
// answers every query with bytes that are not a DNS message.
func startGarbageDNSServer() string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	server := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		_, _ = w.Write([]byte(fmt.Sprintf("\x12\x34garbage for %d", r.Id)))
	})}
	go func() { _ = server.ActivateAndServe() }()
	DeferCleanup(func() { _ = server.Shutdown() })
	return pc.LocalAddr().String()
}

// startBinary runs bin/<name> with its output in the spec's log; it is
// killed when the spec ends if still running.
func startBinary(name string, args ...string) *exec.Cmd {
	root, err := testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(filepath.Join(root, "bin", name), args...)
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// freeAddr returns a loopback host:port nothing listens on right now.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}
