package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	remedyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/remedy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

const (
	system        = "flotilla-system"
	hubSelector   = "app.kubernetes.io/name=flotilla-hub"
	agentSelector = "app.kubernetes.io/name=flotilla-agent"
	// The specs' workload image: the sandbox image the clusters were
	// given (no registry is reachable), imported into every node.
	workloadImage = "localhost/flotilla-e2e/pause:1"
)

func clusterCondition(ctx context.Context, g Gomega, name, condition string) *metav1.Condition {
	c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	cond := meta.FindStatusCondition(c.Status.Conditions, condition)
	g.Expect(cond).NotTo(BeNil(), "cluster %s has no %s condition", name, condition)
	return cond
}

var _ = Describe("Real nodes", Ordered, func() {
	It("installs from the documented path: the hub's and agents' pods run the built image, members go Ready, the work tree stays clean", func(ctx SpecContext) {
		hubDeploy, err := hubKube.AppsV1().Deployments(system).Get(ctx, "flotilla-hub", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(hubDeploy.Status.AvailableReplicas).To(Equal(int32(2)))
		Expect(hubDeploy.Spec.Template.Spec.Containers[0].Image).To(Equal("localhost/flotilla:e2e"))
		for _, m := range members {
			agent, err := m.Kube.AppsV1().Deployments(system).Get(ctx, "flotilla-agent", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			// One node: both agent pods run on it (preferred anti-affinity)
			// and the rollout completed.
			Expect(agent.Status.AvailableReplicas).To(Equal(int32(2)), "%s: both agent pods run on the one node", m.Name)
			Expect(agent.Status.UpdatedReplicas).To(Equal(int32(2)))
			probe, err := m.Kube.AppsV1().DaemonSets(system).Get(ctx, "flotilla-dns-probe", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(probe.Status.NumberReady).To(Equal(int32(1)))
			Eventually(ctx, func(g Gomega) {
				g.Expect(clusterCondition(ctx, g, m.Name, clusterv1alpha1.ClusterConditionReady).Status).To(Equal(metav1.ConditionTrue))
				g.Expect(clusterCondition(ctx, g, m.Name, clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady).Status).To(Equal(metav1.ConditionTrue))
			}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		}
		Expect(gitStatus()).To(Equal(treeBefore), "the documented install commands changed the work tree (a credential in the tree?)")

		out, err := kubectlFlotilla(ctx, "clusters", "-o", "wide")
		Expect(err).NotTo(HaveOccurred(), out)
		GinkgoWriter.Printf("kubectl flotilla clusters -o wide:\n%s\n", out)
		for _, m := range members {
			Expect(out).To(MatchRegexp(`(?m)^%s\s+True\s+ClusterReady\s`, m.Name))
		}
	})

	const ns = "e2e-realnode"
	var member1, member2 member
	// The seed's namespace lives through the failover specs (a cleanup in
	// BeforeAll runs after the last spec of this ordered container).
	BeforeAll(func(ctx SpecContext) { createNamespace(ctx, hubKube, ns) })

	It("runs the seed's nginx as real pods on both members, FullyApplied with per-cluster health", func(ctx SpecContext) {
		member1, member2 = members[0], members[1]
		manifest, err := json.Marshal(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "nginx", "labels": map[string]any{"app": "nginx"}},
			"spec": map[string]any{"replicas": 3, "selector": map[string]any{"matchLabels": map[string]any{"app": "nginx"}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "nginx"}},
					"spec": map[string]any{"terminationGracePeriodSeconds": 2,
						"containers": []any{map[string]any{"name": "nginx", "image": workloadImage}}}}}})
		Expect(err).NotTo(HaveOccurred())
		_, err = flotilla.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, &policyv1alpha1.PropagationPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "nginx-propagation", Namespace: ns},
			Spec: policyv1alpha1.PropagationSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
				Placement: policyv1alpha1.Placement{
					ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{member1.Name, member2.Name}},
					ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
						ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
						ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
						WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
							{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{member1.Name}}, Weight: 1},
							{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{member2.Name}}, Weight: 2},
						}},
					}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = flotilla.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, &workv1alpha1.ResourceTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
			Spec:       workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: manifest}}}},
			metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		Eventually(ctx, func(g Gomega) {
			g.Expect(readyPods(pods(ctx, g, member1.Kube, ns, "app=nginx"))).To(Equal(1))
			g.Expect(readyPods(pods(ctx, g, member2.Kube, ns, "app=nginx"))).To(Equal(2))
			expectTemplate(ctx, g, ns, map[string]int{member1.Name: 1, member2.Name: 2})
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

		out, err := kubectlFlotilla(ctx, "where", "-n", ns, "nginx")
		Expect(err).NotTo(HaveOccurred(), out)
		GinkgoWriter.Printf("kubectl flotilla where -n %s nginx:\n%s\n", ns, out)
		Expect(out).To(ContainSubstring(member1.Name))
		Expect(out).To(ContainSubstring(member2.Name))
	})

	It("fails over when member1's node and apiserver stop, keeps status across a hub leader change mid-failover, evicts once, and removes member1's copy when it returns (seed 000)", func(ctx SpecContext) {
		oldLeader := leaderPodEventually(ctx, hubKube, system, hubSelector, "flotilla_hub_leader")

		By("stopping member1: its apiserver, etcd, kubelet, containerd and every pod")
		Expect(ctl(ctx, "stop-cluster", member1.Name)).To(Succeed())
		started := false
		start := func(ctx context.Context) {
			if !started {
				started = true
				Expect(ctl(ctx, "start-cluster", member1.Name)).To(Succeed())
			}
		}
		DeferCleanup(start)

		By("member1 goes Unknown; the hub leader pod is deleted while the taints come")
		Eventually(ctx, func(g Gomega) {
			g.Expect(clusterCondition(ctx, g, member1.Name, clusterv1alpha1.ClusterConditionReady).Status).To(Equal(metav1.ConditionUnknown))
		}).WithTimeout(timings.HubLeaseGrace + time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		Expect(hubKube.CoreV1().Pods(system).Delete(ctx, oldLeader.Name, metav1.DeleteOptions{})).To(Succeed())
		deleted := time.Now()
		newLeader := leaderPodEventually(ctx, hubKube, system, hubSelector, "flotilla_hub_leader")
		Expect(newLeader.Name).NotTo(Equal(oldLeader.Name))
		GinkgoWriter.Printf("new hub leader %s %s after deleting %s\n", newLeader.Name, time.Since(deleted).Round(time.Second), oldLeader.Name)

		By("member2 runs all 3 replicas as real pods")
		Eventually(ctx, func(g Gomega) {
			rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rb.Spec.Clusters).To(Equal([]workv1alpha1.TargetCluster{{Name: member2.Name, Replicas: 3}}))
			g.Expect(readyPods(pods(ctx, g, member2.Kube, ns, "app=nginx"))).To(Equal(3))
			expectTemplate(ctx, g, ns, map[string]int{member2.Name: 3})
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(rb.Spec.EvictionHistory).To(HaveLen(1), "one eviction, whichever hub replica made it")
		Expect(rb.Spec.EvictionHistory[0].ClusterName).To(Equal(member1.Name))
		Expect(rb.Spec.EvictionHistory[0].Reason).To(Equal(workv1alpha1.EvictionReasonTaintUntolerated))
		Expect(len(rb.Spec.GracefulEvictionTasks)).To(BeNumerically("<=", 1))
		Expect(rb.Status.FailoverHistory).To(HaveLen(1), "the failover is recorded once")

		By("member1 returns: it goes Ready, and its copy is removed")
		start(ctx)
		Eventually(ctx, func(g Gomega) {
			g.Expect(clusterCondition(ctx, g, member1.Name, clusterv1alpha1.ClusterConditionReady).Status).To(Equal(metav1.ConditionTrue))
			_, err := flotilla.WorkV1alpha1().Works("flotilla-es-"+member1.Name).Get(ctx, workobjects.WorkName(ns, "nginx-deployment"), metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "member1's Work is deleted")
			_, err = member1.Kube.AppsV1().Deployments(ns).Get(ctx, "nginx", metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "member1's Deployment is deleted")
			g.Expect(pods(ctx, g, member1.Kube, ns, "app=nginx")).To(BeEmpty())
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Eventually(ctx, func(g Gomega) {
			rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rb.Spec.Clusters).To(Equal([]workv1alpha1.TargetCluster{{Name: member2.Name, Replicas: 3}}))
			g.Expect(rb.Spec.GracefulEvictionTasks).To(BeEmpty())
			g.Expect(rb.Spec.EvictionHistory).To(HaveLen(1))
			expectTemplate(ctx, g, ns, map[string]int{member2.Name: 3})
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		// Leave member1 untainted for the specs after this one.
		Eventually(ctx, func(g Gomega) {
			c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, member1.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.Spec.Taints).To(BeEmpty())
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	})

	It("hands the agent's leadership to the other pod within the lease when the leader pod is deleted", func(ctx SpecContext) {
		m := members[1]
		old := leaderPodEventually(ctx, m.Kube, system, agentSelector, "flotilla_agent_leader")
		holder := func(g Gomega) string {
			l, err := m.Kube.CoordinationV1().Leases(system).Get(ctx, "flotilla-agent", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(l.Spec.HolderIdentity).NotTo(BeNil())
			return *l.Spec.HolderIdentity
		}
		oldHolder := holder(Default)

		Expect(m.Kube.CoreV1().Pods(system).Delete(ctx, old.Name, metav1.DeleteOptions{})).To(Succeed())
		deleted := time.Now()
		// Another pod takes over within one lease: the standby, or the
		// Deployment's replacement when it starts first (the deleted leader
		// releases the Lease as it stops, and both are trying).
		var next corev1.Pod
		Eventually(ctx, func(g Gomega) {
			g.Expect(holder(g)).NotTo(Equal(oldHolder))
			next = leader(ctx, g, m.Kube, system, agentSelector, "flotilla_agent_leader")
			g.Expect(next.Name).NotTo(Equal(old.Name))
		}).WithTimeout(timings.ElectionLease + 10*time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("%s took over %s after %s was deleted (lease %s)\n", next.Name,
			time.Since(deleted).Round(100*time.Millisecond), old.Name, timings.ElectionLease)
		// The hub never saw the cluster silent.
		Consistently(ctx, func(g Gomega) {
			g.Expect(clusterCondition(ctx, g, m.Name, clusterv1alpha1.ClusterConditionReady).Status).To(Equal(metav1.ConditionTrue))
		}).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())
		Eventually(ctx, func(g Gomega) {
			d, err := m.Kube.AppsV1().Deployments(system).Get(ctx, "flotilla-agent", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Status.AvailableReplicas).To(Equal(int32(2)))
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	})

	It("takes a member out of DNS traffic when its real CoreDNS is scaled to 0, as the DNS probe DaemonSet sees it on the node", func(ctx SpecContext) {
		const webNS, host = "e2e-realnode-web", "web.realnode.example"
		m1, m2 := members[0], members[1]
		lbIP := map[string]string{m1.Name: "192.0.2.1", m2.Name: "192.0.2.2"}
		createNamespace(ctx, hubKube, webNS)
		svc, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "web"},
			"spec": map[string]any{"type": "LoadBalancer", "selector": map[string]any{"app": "web"}, "ports": []any{map[string]any{"port": 80}}}})
		Expect(err).NotTo(HaveOccurred())
		_, err = flotilla.PolicyV1alpha1().PropagationPolicies(webNS).Create(ctx, &policyv1alpha1.PropagationPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: webNS}, Spec: policyv1alpha1.PropagationSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Service", Name: "web"}},
				Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{m1.Name, m2.Name}}}}},
			metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = flotilla.WorkV1alpha1().ResourceTemplates(webNS).Create(ctx, &workv1alpha1.ResourceTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: webNS},
			Spec:       workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: svc}}}},
			metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		pathType := networkingv1.PathTypePrefix
		_, err = flotilla.NetworkingV1alpha1().MultiClusterIngresses(webNS).Create(ctx, &networkingv1alpha1.MultiClusterIngress{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: webNS},
			Spec: networkingv1alpha1.MultiClusterIngressSpec{IngressSpec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{
				HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pathType,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = flotilla.RemedyV1alpha1().Remedies().Create(ctx, &remedyv1alpha1.Remedy{ObjectMeta: metav1.ObjectMeta{Name: "e2e-realnode-dns"},
			Spec: remedyv1alpha1.RemedySpec{
				DecisionMatches: []remedyv1alpha1.DecisionMatch{{ClusterConditionMatch: &remedyv1alpha1.ClusterConditionRequirement{
					ConditionType: remedyv1alpha1.ServiceDomainNameResolutionReady, Operator: remedyv1alpha1.ClusterConditionEqual, ConditionStatus: "False"}}},
				Actions: []remedyv1alpha1.RemedyAction{remedyv1alpha1.TrafficControl}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) {
			_ = flotilla.RemedyV1alpha1().Remedies().Delete(ctx, "e2e-realnode-dns", metav1.DeleteOptions{})
		})
		// No cloud load balancer here: give each member's Service the
		// address one would.
		for _, m := range []member{m1, m2} {
			Eventually(ctx, func(g Gomega) {
				s, err := m.Kube.CoreV1().Services(webNS).Get(ctx, "web", metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: lbIP[m.Name]}}
				_, err = m.Kube.CoreV1().Services(webNS).UpdateStatus(ctx, s, metav1.UpdateOptions{})
				g.Expect(err).NotTo(HaveOccurred())
			}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		}
		hubDNS := hubDNSAddress(ctx)
		expectAnswers(ctx, hubDNS, host, webNS, nil, lbIP[m1.Name], lbIP[m2.Name])

		By("scaling member2's CoreDNS to 0")
		scale := func(ctx context.Context, replicas int32) {
			_, err := m2.Kube.AppsV1().Deployments("kube-system").Patch(ctx, "coredns", types.MergePatchType,
				[]byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)), metav1.PatchOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		scale(ctx, 0)
		scaled := time.Now()
		DeferCleanup(func(ctx context.Context) { scale(ctx, 1) })
		Eventually(ctx, func(g Gomega) {
			g.Expect(clusterCondition(ctx, g, m2.Name, clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady).Status).To(Equal(metav1.ConditionFalse))
		}).WithTimeout(timings.DNSFailureThreshold + 90*time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("member2 DNS False %s after CoreDNS went to 0\n", time.Since(scaled).Round(time.Second))
		Expect(clusterCondition(ctx, Default, m2.Name, clusterv1alpha1.ClusterConditionReady).Status).To(Equal(metav1.ConditionTrue),
			"broken DNS is not a broken apiserver")
		expectAnswers(ctx, hubDNS, host, webNS, []string{m2.Name}, lbIP[m1.Name])

		By("scaling it back to 1")
		scale(ctx, 1)
		Eventually(ctx, func(g Gomega) {
			g.Expect(clusterCondition(ctx, g, m2.Name, clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady).Status).To(Equal(metav1.ConditionTrue))
		}).WithTimeout(timings.DNSSuccessThreshold + 90*time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		expectAnswers(ctx, hubDNS, host, webNS, nil, lbIP[m1.Name], lbIP[m2.Name])

		By("stopping the hub's host apiserver and etcd alone: the hub pods go on answering, marked stale")
		restarts := func(g Gomega) map[string]int32 {
			pods, err := hubKube.CoreV1().Pods(system).List(ctx, metav1.ListOptions{LabelSelector: hubSelector})
			g.Expect(err).NotTo(HaveOccurred())
			out := map[string]int32{}
			for _, p := range pods.Items {
				for _, cs := range p.Status.ContainerStatuses {
					out[p.Name+"/"+cs.Name] = cs.RestartCount
				}
			}
			return out
		}
		before := restarts(Default)
		Expect(before).NotTo(BeEmpty())
		Expect(ctl(ctx, "stop-apiserver", "hub")).To(Succeed())
		resumed := false
		resume := func(ctx context.Context) {
			if !resumed {
				resumed = true
				Expect(ctl(ctx, "start-apiserver", "hub")).To(Succeed())
			}
		}
		DeferCleanup(resume)
		stopped := time.Now()
		staleAnswer := func(g Gomega) {
			msg := new(dns.Msg)
			msg.SetQuestion(dns.Fqdn(host), dns.TypeA)
			msg.SetEdns0(1232, false)
			reply, _, err := (&dns.Client{Timeout: 2 * time.Second}).ExchangeContext(ctx, msg, hubDNS)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(reply.Rcode).To(Equal(dns.RcodeSuccess))
			g.Expect(aRecords(reply)).To(ConsistOf(lbIP[m1.Name], lbIP[m2.Name]), "the last view's answers")
			g.Expect(extendedErrors(reply)).To(ContainElement(dns.ExtendedErrorCodeStaleAnswer))
		}
		Eventually(ctx, staleAnswer).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("hub DNS stale-marked %s after its apiserver stopped\n", time.Since(stopped).Round(time.Second))
		// Well past the leader's renew deadline: answers never stopped.
		Consistently(ctx, staleAnswer).WithTimeout(20 * time.Second).WithPolling(time.Second).Should(Succeed())
		resume(ctx)
		By("the apiserver back: the same pods answer, current, with no restart")
		expectAnswers(ctx, hubDNS, host, webNS, nil, lbIP[m1.Name], lbIP[m2.Name])
		// The kubelets report again once the apiserver answers; a restart
		// would show within their status sync.
		Consistently(ctx, func(g Gomega) {
			g.Expect(restarts(g)).To(Equal(before), "no hub container restarted")
		}).WithTimeout(15 * time.Second).WithPolling(time.Second).Should(Succeed())
		leaderPodEventually(ctx, hubKube, system, hubSelector, "flotilla_hub_leader")
	})

	It("renews each agent's hub token with a TokenRequest and keeps it in the member Secret", func(ctx SpecContext) {
		for _, m := range members {
			first, err := clientcmd.LoadFromFile(filepath.Join(stateDir, "overlays", "agent", m.Name, "hub.kubeconfig"))
			Expect(err).NotTo(HaveOccurred())
			var firstToken string
			for _, u := range first.AuthInfos {
				firstToken = u.Token
			}
			firstExp, err := tokenExpiry(firstToken)
			Expect(err).NotTo(HaveOccurred())
			Eventually(ctx, func(g Gomega) {
				s, err := m.Kube.CoreV1().Secrets(system).Get(ctx, "flotilla-agent-hub-token", metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				var token string
				for _, v := range s.Data {
					token = string(v)
				}
				exp, err := tokenExpiry(token)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(exp).To(BeTemporally(">", firstExp), "%s: the kept token is a renewed one", m.Name)
			}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
			Expect(clusterCondition(ctx, Default, m.Name, clusterv1alpha1.ClusterConditionReady).Status).To(Equal(metav1.ConditionTrue))
		}
	})
})

// leaderPodEventually waits for exactly one leading pod.
func leaderPodEventually(ctx context.Context, kube kubernetes.Interface, ns, selector, gauge string) corev1.Pod {
	GinkgoHelper()
	var p corev1.Pod
	Eventually(ctx, func(g Gomega) { p = leader(ctx, g, kube, ns, selector, gauge) }).
		WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
	return p
}

// expectTemplate checks the template's status: Scheduled and FullyApplied
// True, and each cluster in want Applied and Healthy with that many
// available replicas, and no other cluster.
func expectTemplate(ctx context.Context, g Gomega, ns string, want map[string]int) {
	tmpl, err := flotilla.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "nginx", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, cond := range []string{workv1alpha1.BindingConditionScheduled, workv1alpha1.BindingConditionFullyApplied} {
		g.Expect(meta.IsStatusConditionTrue(tmpl.Status.Conditions, cond)).To(BeTrue(), "template %s/nginx %s: %v", ns, cond, tmpl.Status.Conditions)
	}
	got := map[string]int{}
	for _, item := range tmpl.Status.AggregatedStatus {
		g.Expect(item.Applied).To(BeTrue(), "%s applied", item.ClusterName)
		g.Expect(item.Health).To(Equal(workv1alpha1.ResourceHealthy), "%s healthy", item.ClusterName)
		var st struct {
			AvailableReplicas int `json:"availableReplicas"`
		}
		g.Expect(item.Status).NotTo(BeNil())
		g.Expect(json.Unmarshal(item.Status.Raw, &st)).To(Succeed())
		got[item.ClusterName] = st.AvailableReplicas
	}
	g.Expect(got).To(Equal(want))
}

// hubDNSAddress is the hub's DNS traffic manager as the host reaches it:
// the leader pod's IP (every hub replica serves; the route of
// hack/realnode-up.sh reaches pod IPs) and --dns-traffic-address's port.
func hubDNSAddress(ctx context.Context) string {
	GinkgoHelper()
	p := leaderPodEventually(ctx, hubKube, system, hubSelector, "flotilla_hub_leader")
	return net.JoinHostPort(p.Status.PodIP, "5353")
}

// expectAnswers waits until the ingress blocks exactly blocked and the
// hub's DNS answers host with exactly ips.
func expectAnswers(ctx context.Context, server, host, ns string, blocked []string, ips ...string) {
	GinkgoHelper()
	Eventually(ctx, func(g Gomega) {
		mci, err := flotilla.NetworkingV1alpha1().MultiClusterIngresses(ns).Get(ctx, "web", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		var gotBlocked []string
		for _, b := range mci.Status.TrafficBlockClusters {
			gotBlocked = append(gotBlocked, b.Name)
		}
		g.Expect(gotBlocked).To(ConsistOf(blocked), "trafficBlockClusters")
		msg := new(dns.Msg)
		msg.SetQuestion(dns.Fqdn(host), dns.TypeA)
		reply, _, err := new(dns.Client).ExchangeContext(ctx, msg, server)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reply.Rcode).To(Equal(dns.RcodeSuccess))
		g.Expect(aRecords(reply)).To(ConsistOf(ips), "A records of %s", host)
	}).WithTimeout(90 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
}

// aRecords is the addresses of a reply's A records.
func aRecords(reply *dns.Msg) []string {
	var got []string
	for _, rr := range reply.Answer {
		if a, ok := rr.(*dns.A); ok {
			got = append(got, a.A.String())
		}
	}
	return got
}

// extendedErrors is a reply's RFC 8914 Extended DNS Error codes.
func extendedErrors(reply *dns.Msg) []uint16 {
	var ede []uint16
	if o := reply.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*dns.EDNS0_EDE); ok {
				ede = append(ede, e.InfoCode)
			}
		}
	}
	return ede
}
