package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/pkg/agent/dnsprobe"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	remedyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/remedy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/hub/remedy"
)

// Seed 004 on real parts: member1's CoreDNS really stops, the agents see
// it, a Remedy turns the condition into TrafficControl, and the hub's DNS
// traffic manager stops handing out member1's address.
var _ = Describe("Remedy and traffic control", Ordered, func() {
	const (
		ns   = "e2e-traffic"
		host = "web.e2e.flotilla.test"
	)
	var (
		flotilla flotillaclient.Interface
		hubKube  kubernetes.Interface
		m1, m2   string
		// The addresses a cloud load balancer would give each member's Service.
		lbIP map[string]string
	)

	BeforeAll(func(ctx SpecContext) {
		Expect(env.HubDNS).NotTo(BeEmpty(), "the environment runs no DNS traffic manager")
		cfg, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		flotilla, err = flotillaclient.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		hubKube, err = kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		m1, m2 = env.Members[0].Name, env.Members[1].Name
		lbIP = map[string]string{m1: "192.0.2.1", m2: "192.0.2.2"}

		// A LoadBalancer Service on member1 and member2, and an ingress for it.
		_, err = hubKube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		manifest, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "web"},
			"spec": map[string]any{"type": "LoadBalancer", "selector": map[string]any{"app": "web"}, "ports": []any{map[string]any{"port": 80}}}})
		Expect(err).NotTo(HaveOccurred())
		_, err = flotilla.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, &policyv1alpha1.PropagationPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: policyv1alpha1.PropagationSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Service", Name: "web"}},
				Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{m1, m2}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = flotilla.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: manifest}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		pathType := networkingv1.PathTypePrefix
		_, err = flotilla.NetworkingV1alpha1().MultiClusterIngresses(ns).Create(ctx, &networkingv1alpha1.MultiClusterIngress{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: networkingv1alpha1.MultiClusterIngressSpec{IngressSpec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{
				HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pathType,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) {
			_ = flotilla.NetworkingV1alpha1().MultiClusterIngresses(ns).Delete(ctx, "web", metav1.DeleteOptions{})
			_ = flotilla.WorkV1alpha1().ResourceTemplates(ns).Delete(ctx, "web", metav1.DeleteOptions{})
			Eventually(ctx, func() bool {
				_, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "web-service", metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}).WithTimeout(2*time.Minute).Should(BeTrue(), "deleting the template removes its binding")
			_ = flotilla.PolicyV1alpha1().PropagationPolicies(ns).Delete(ctx, "web", metav1.DeleteOptions{})
			_ = hubKube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		})

		// Each member's cloud load balancer gives its Service an address.
		for i, m := range env.Members[:2] {
			member, err := env.Kube(m.Context)
			Expect(err).NotTo(HaveOccurred())
			eventually(ctx, func(g Gomega) {
				svc, err := member.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: lbIP[env.Members[i].Name]}}
				_, err = member.CoreV1().Services(ns).UpdateStatus(ctx, svc, metav1.UpdateOptions{})
				g.Expect(err).NotTo(HaveOccurred())
			}).WithTimeout(90 * time.Second).Should(Succeed())
		}
		eventually(ctx, func(g Gomega) {
			mci, err := flotilla.NetworkingV1alpha1().MultiClusterIngresses(ns).Get(ctx, "web", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(mci.Status.ServiceLocations).To(ConsistOf(networkingv1alpha1.ServiceLocation{Name: "web", Clusters: []string{m1, m2}}))
		}).WithTimeout(90 * time.Second).Should(Succeed())
		expectTraffic(ctx, flotilla, ns, host, nil, lbIP[m1], lbIP[m2])
	})

	remedyActions := func(ctx context.Context, cluster string) []string {
		c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, cluster, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		return c.Status.RemedyActions
	}
	dnsCondition := func(ctx context.Context, cluster string) *metav1.Condition {
		c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, cluster, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		return meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady)
	}
	createRemedy := func(ctx context.Context, r *remedyv1alpha1.Remedy) {
		_, err := flotilla.RemedyV1alpha1().Remedies().Create(ctx, r, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) {
			err := flotilla.RemedyV1alpha1().Remedies().Delete(ctx, r.Name, metav1.DeleteOptions{})
			Expect(err == nil || apierrors.IsNotFound(err)).To(BeTrue())
		})
	}
	dnsRemedy := func() *remedyv1alpha1.Remedy {
		return &remedyv1alpha1.Remedy{ObjectMeta: metav1.ObjectMeta{Name: "e2e-dns-broken"}, Spec: remedyv1alpha1.RemedySpec{
			DecisionMatches: []remedyv1alpha1.DecisionMatch{{ClusterConditionMatch: &remedyv1alpha1.ClusterConditionRequirement{
				ConditionType: remedyv1alpha1.ServiceDomainNameResolutionReady, Operator: remedyv1alpha1.ClusterConditionEqual, ConditionStatus: "False"}}},
			Actions: []remedyv1alpha1.RemedyAction{remedyv1alpha1.TrafficControl}}}
	}

	It("takes member1 out of traffic while its CoreDNS is down, and back when it returns or the Remedy goes", func(ctx SpecContext) {
		// The agents' DNS damping (env.Timings; the defaults are 30s each).
		dnsFailureThreshold, dnsSuccessThreshold := env.Timings.DNSFailureThreshold, env.Timings.DNSSuccessThreshold
		dnsThreshold := max(dnsFailureThreshold, dnsSuccessThreshold)
		// A fresh environment reports DNS once the agents' first verdicts are in.
		Eventually(ctx, func() metav1.ConditionStatus { return conditionStatus(dnsCondition(ctx, m1)) }).
			WithTimeout(dnsThreshold + 60*time.Second).WithPolling(time.Second).Should(Equal(metav1.ConditionTrue))
		createRemedy(ctx, dnsRemedy())
		Consistently(ctx, func() []string { return remedyActions(ctx, m1) }).WithTimeout(3 * time.Second).Should(BeEmpty())

		By("stopping member1's CoreDNS")
		stopped := time.Now()
		Expect(env.Ctl(ctx, "stop", "coredns-"+m1)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			_ = env.Ctl(ctx, "start", "coredns-"+m1)
			Eventually(ctx, func() metav1.ConditionStatus { return conditionStatus(dnsCondition(ctx, m1)) }).
				WithTimeout(dnsThreshold + 60*time.Second).WithPolling(time.Second).Should(Equal(metav1.ConditionTrue))
		})
		var failing *metav1.Condition
		Eventually(ctx, func(g Gomega) {
			failing = dnsCondition(ctx, m1)
			g.Expect(conditionStatus(failing)).To(Equal(metav1.ConditionFalse))
		}).WithTimeout(dnsThreshold + 60*time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		wentFalse := time.Since(stopped)
		GinkgoWriter.Printf("DNS False %s after CoreDNS stopped: %s: %s\n", wentFalse.Round(time.Millisecond), failing.Reason, failing.Message)
		Expect(wentFalse).To(BeNumerically(">=", dnsFailureThreshold), "the agents' failure threshold damps flapping")
		Expect(failing.Reason).To(BeElementOf(dnsprobe.ReasonResolverUnreachable, dnsprobe.ReasonTimeout))
		c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, m1, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)).To(BeTrue(), "broken DNS is not a broken apiserver")

		By("member1 gets TrafficControl and leaves the ingress's answers")
		eventually(ctx, func() []string { return remedyActions(ctx, m1) }).Should(Equal([]string{string(remedyv1alpha1.TrafficControl)}))
		Expect(remedyActions(ctx, m2)).To(BeEmpty())
		expectTraffic(ctx, flotilla, ns, host, []string{m1}, lbIP[m2])
		GinkgoWriter.Printf("DNS answers without member1 %s after CoreDNS stopped (%s after the condition turned False)\n",
			time.Since(stopped).Round(time.Millisecond), (time.Since(stopped) - wentFalse).Round(time.Millisecond))
		// Events about a Cluster live in its namespace (clusterevents).
		expectEvent(ctx, hubKube, "flotilla-es-"+m1, m1, remedy.EventRemedyActionsChanged)
		expectEvent(ctx, hubKube, ns, "web", "TrafficBlocked")
		Expect(metricSum(ctx, env.HubMetrics, "flotilla_remedy_cluster_actions", `cluster="`+m1+`"`, `action="TrafficControl"`)).To(Equal(1.0))
		Expect(metricSum(ctx, env.HubMetrics, "flotilla_ingress_traffic_blocked_clusters", `namespace="`+ns+`"`)).To(Equal(1.0))

		By("deleting the Remedy while DNS is still down clears the action")
		Expect(flotilla.RemedyV1alpha1().Remedies().Delete(ctx, "e2e-dns-broken", metav1.DeleteOptions{})).To(Succeed())
		eventually(ctx, func() []string { return remedyActions(ctx, m1) }).Should(BeEmpty())
		expectTraffic(ctx, flotilla, ns, host, nil, lbIP[m1], lbIP[m2])

		By("a Remedy created while DNS is down blocks at once")
		createRemedy(ctx, dnsRemedy())
		eventually(ctx, func() []string { return remedyActions(ctx, m1) }).Should(Equal([]string{string(remedyv1alpha1.TrafficControl)}))
		expectTraffic(ctx, flotilla, ns, host, []string{m1}, lbIP[m2])

		By("starting member1's CoreDNS again")
		Expect(env.Ctl(ctx, "start", "coredns-"+m1)).To(Succeed())
		started := time.Now()
		Eventually(ctx, func() metav1.ConditionStatus { return conditionStatus(dnsCondition(ctx, m1)) }).
			WithTimeout(dnsThreshold + 60*time.Second).WithPolling(250 * time.Millisecond).Should(Equal(metav1.ConditionTrue))
		Expect(time.Since(started)).To(BeNumerically(">=", dnsSuccessThreshold), "the agents' success threshold damps flapping")
		eventually(ctx, func() []string { return remedyActions(ctx, m1) }).Should(BeEmpty())
		expectTraffic(ctx, flotilla, ns, host, nil, lbIP[m1], lbIP[m2])
	})

	It("applies a Remedy without decision matches at once, as before an upgrade, and lifts it when deleted", func(ctx SpecContext) {
		upgrade := &remedyv1alpha1.Remedy{ObjectMeta: metav1.ObjectMeta{Name: "e2e-upgrade-member2"}, Spec: remedyv1alpha1.RemedySpec{
			ClusterAffinity: &remedyv1alpha1.ClusterAffinity{ClusterNames: []string{m2}},
			Actions:         []remedyv1alpha1.RemedyAction{remedyv1alpha1.TrafficControl}}}
		createRemedy(ctx, upgrade)
		eventually(ctx, func() []string { return remedyActions(ctx, m2) }).Should(Equal([]string{string(remedyv1alpha1.TrafficControl)}))
		Expect(remedyActions(ctx, m1)).To(BeEmpty(), "only the clusters the Remedy names")
		expectTraffic(ctx, flotilla, ns, host, []string{m2}, lbIP[m1])

		Expect(flotilla.RemedyV1alpha1().Remedies().Delete(ctx, upgrade.Name, metav1.DeleteOptions{})).To(Succeed())
		eventually(ctx, func() []string { return remedyActions(ctx, m2) }).Should(BeEmpty())
		expectTraffic(ctx, flotilla, ns, host, nil, lbIP[m1], lbIP[m2])
	})

	It("answers like an authoritative server: NXDOMAIN for unknown names, REFUSED outside its zones, and survives garbage", func(ctx SpecContext) {
		rcode, _ := lookup(ctx, "nope."+host, dns.TypeA)
		Expect(rcode).To(Equal(dns.RcodeNameError))
		rcode, _ = lookup(ctx, "example.org", dns.TypeA)
		Expect(rcode).To(Equal(dns.RcodeRefused))
		conn, err := dns.Dial("udp", env.HubDNS)
		Expect(err).NotTo(HaveOccurred())
		for _, junk := range [][]byte{{0}, []byte("not a dns message at all"), {0x12, 0x34, 0x01, 0x00, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c}} {
			_, err := conn.Write(junk)
			Expect(err).NotTo(HaveOccurred())
		}
		_ = conn.Close()
		rcode, ips := lookup(ctx, host, dns.TypeA)
		Expect(rcode).To(Equal(dns.RcodeSuccess))
		Expect(ips).To(ConsistOf(lbIP[m1], lbIP[m2]))
		Expect(metricSum(ctx, env.HubMetrics, "flotilla_dns_traffic_queries_total", `result="nxdomain"`)).To(BeNumerically(">=", 1))
	})

	// Issue 37's first drill: the host cluster's apiserver and etcd stop.
	// Before, the hub exited 4 s in (it could not renew its Lease) and every
	// answer stopped. Now the hub process stays, stops deciding, and answers
	// every query from its last view, telling EDNS clients it is stale;
	// when the host cluster returns it leads again.
	It("keeps answering from its last view while the host cluster is down, and leads again when it returns", func(ctx SpecContext) {
		hub := env.Prefix + "-hub"
		Expect(env.Ctl(ctx, "stop-cluster", hub)).To(Succeed())
		stopped := time.Now()
		DeferCleanup(func(ctx context.Context) { _ = env.Ctl(ctx, "start-cluster", hub) })
		stale := func(g Gomega) {
			rcode, ips, ede := lookupEDNS(ctx, host)
			g.Expect(rcode).To(Equal(dns.RcodeSuccess))
			g.Expect(ips).To(ConsistOf(lbIP[m1], lbIP[m2]), "the last view's answers")
			g.Expect(ede).To(ContainElement(dns.ExtendedErrorCodeStaleAnswer), "marked stale")
		}
		// Renew deadline (10s at the defaults) plus a freshness check (5s).
		Eventually(ctx, stale).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("answers marked stale %s after the host cluster stopped\n", time.Since(stopped).Round(100*time.Millisecond))
		// The leader steps down at its renew deadline (10 s at the defaults).
		Eventually(ctx, func() float64 { return metricSum(ctx, env.HubMetrics, "flotilla_hub_leader") }).
			WithTimeout(60*time.Second).WithPolling(500*time.Millisecond).Should(Equal(0.0), "no decisions without the host apiserver")
		GinkgoWriter.Printf("the leader stepped down %s after the host cluster stopped\n", time.Since(stopped).Round(100*time.Millisecond))
		Consistently(ctx, func(g Gomega) {
			stale(g)
			g.Expect(env.Ctl(ctx, "pid", "hub")).To(Succeed(), "the hub process keeps running")
			_, err := httpGet(ctx, env.HubHealth, "/readyz")
			g.Expect(err).NotTo(HaveOccurred(), "the hub stays ready")
		}).WithTimeout(15 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		Expect(env.Ctl(ctx, "start-cluster", hub)).To(Succeed())
		back := time.Now()
		eventually(ctx, func(g Gomega) {
			rcode, ips, ede := lookupEDNS(ctx, host)
			g.Expect(rcode).To(Equal(dns.RcodeSuccess))
			g.Expect(ips).To(ConsistOf(lbIP[m1], lbIP[m2]))
			g.Expect(ede).To(BeEmpty(), "current again")
			g.Expect(metricSum(ctx, env.HubMetrics, "flotilla_hub_leader")).To(Equal(1.0), "leading again, without a restart")
		}).WithTimeout(2 * time.Minute).Should(Succeed())
		GinkgoWriter.Printf("current and leading again %s after the host cluster's start returned\n", time.Since(back).Round(100*time.Millisecond))
		Expect(metricSum(ctx, env.HubMetrics, "flotilla_hub_leadership_lost_total")).To(BeNumerically(">=", 1))
		expectTraffic(ctx, flotilla, ns, host, nil, lbIP[m1], lbIP[m2])
	})
})

// lookupEDNS asks the hub's DNS traffic manager with EDNS, and returns the
// rcode, the addresses (sorted) and the Extended DNS Error codes.
func lookupEDNS(ctx context.Context, name string) (int, []string, []uint16) {
	msg := new(dns.Msg)
	msg.SetQuestion(dns.Fqdn(name), dns.TypeA)
	msg.SetEdns0(1232, false)
	reply, _, err := new(dns.Client).ExchangeContext(ctx, msg, env.HubDNS)
	if err != nil {
		return -1, nil, nil
	}
	var ips []string
	for _, rr := range reply.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	slices.Sort(ips)
	var ede []uint16
	if o := reply.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*dns.EDNS0_EDE); ok {
				ede = append(ede, e.InfoCode)
			}
		}
	}
	return reply.Rcode, ips, ede
}

// expectTraffic waits until the ingress blocks exactly blocked and serves,
// in its status and in the hub's DNS answers for host, exactly ips.
func expectTraffic(ctx context.Context, flotilla flotillaclient.Interface, ns, host string, blocked []string, ips ...string) {
	GinkgoHelper()
	Eventually(ctx, func(g Gomega) {
		mci, err := flotilla.NetworkingV1alpha1().MultiClusterIngresses(ns).Get(ctx, "web", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		var gotBlocked, gotIPs []string
		for _, b := range mci.Status.TrafficBlockClusters {
			gotBlocked = append(gotBlocked, b.Name)
		}
		for _, in := range mci.Status.LoadBalancer.Ingress {
			gotIPs = append(gotIPs, in.IP)
		}
		g.Expect(gotBlocked).To(ConsistOf(blocked), "trafficBlockClusters")
		g.Expect(gotIPs).To(ConsistOf(ips), "status.loadBalancer")
		rcode, answered := lookup(ctx, host, dns.TypeA)
		g.Expect(rcode).To(Equal(dns.RcodeSuccess))
		g.Expect(answered).To(ConsistOf(ips), "DNS answers for %s", host)
	}).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
}

func conditionStatus(c *metav1.Condition) metav1.ConditionStatus {
	if c == nil {
		return ""
	}
	return c.Status
}

// lookup asks the hub's DNS traffic manager, as `dig @HUB_DNS name` would.
func lookup(ctx context.Context, name string, qtype uint16) (int, []string) {
	msg := new(dns.Msg)
	msg.SetQuestion(dns.Fqdn(name), qtype)
	reply, _, err := new(dns.Client).ExchangeContext(ctx, msg, env.HubDNS)
	if err != nil {
		return -1, nil
	}
	var ips []string
	for _, rr := range reply.Answer {
		switch a := rr.(type) {
		case *dns.A:
			ips = append(ips, a.A.String())
		case *dns.AAAA:
			ips = append(ips, a.AAAA.String())
		}
	}
	slices.Sort(ips)
	return reply.Rcode, ips
}

// expectEvent waits for an event with reason on the object named name.
func expectEvent(ctx context.Context, hub kubernetes.Interface, ns, name, reason string) {
	GinkgoHelper()
	eventually(ctx, func(g Gomega) {
		events, err := hub.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		found := sets.New[string]()
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name {
				found.Insert(e.Reason)
			}
		}
		g.Expect(found.Has(reason)).To(BeTrue(), "events on %s/%s: %v", ns, name, sets.List(found))
	}).Should(Succeed())
}
