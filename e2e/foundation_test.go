package e2e

import (
	"context"
	"fmt"
	"strings"

	"github.com/miekg/dns"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// flotillaCRDs is every kind of DESIGN.md's API table.
var flotillaCRDs = []string{
	"clusters.cluster.flotilla.io",
	"clustertaintpolicies.cluster.flotilla.io",
	"resourcetemplates.work.flotilla.io",
	"clusterresourcetemplates.work.flotilla.io",
	"resourcebindings.work.flotilla.io",
	"clusterresourcebindings.work.flotilla.io",
	"works.work.flotilla.io",
	"propagationpolicies.policy.flotilla.io",
	"clusterpropagationpolicies.policy.flotilla.io",
	"overridepolicies.policy.flotilla.io",
	"clusteroverridepolicies.policy.flotilla.io",
	"remedies.remedy.flotilla.io",
	"multiclusteringresses.networking.flotilla.io",
}

var _ = Describe("Foundation", func() {
	It("reaches the hub and every member", func(ctx SpecContext) {
		for _, context := range append([]string{env.HubContext}, memberContexts()...) {
			kube, err := env.Kube(context)
			Expect(err).NotTo(HaveOccurred())
			v, err := kube.Discovery().ServerVersion()
			Expect(err).NotTo(HaveOccurred(), "context %s", context)
			Expect(v.GitVersion).To(Equal("v1.36.3"), "context %s", context)
		}
	})

	It("has every Flotilla CRD established on the hub", func(ctx SpecContext) {
		cfg, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		client, err := apiextensionsclient.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		for _, name := range flotillaCRDs {
			crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred(), "CRD %s", name)
			Expect(established(crd)).To(BeTrue(), "CRD %s not Established", name)
		}
	})

	It("has Ready fake nodes in every member and runs a Deployment to Available", func(ctx SpecContext) {
		for _, m := range env.Members {
			kube, err := env.Kube(m.Context)
			Expect(err).NotTo(HaveOccurred())
			nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(nodes.Items).NotTo(BeEmpty(), "member %s has no nodes", m.Name)
			for _, n := range nodes.Items {
				Expect(nodeReady(&n)).To(BeTrue(), "node %s of %s not Ready", n.Name, m.Name)
			}
		}

		member1, err := env.Kube(env.Members[0].Context)
		Expect(err).NotTo(HaveOccurred())
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-foundation-"}}
		ns, err = member1.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) {
			_ = member1.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		})
		labels := map[string]string{"app": "web"}
		deploy := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns.Name},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](3),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
				},
			},
		}
		_, err = member1.AppsV1().Deployments(ns.Name).Create(ctx, deploy, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		eventually(ctx, func(g Gomega) {
			d, err := member1.AppsV1().Deployments(ns.Name).Get(ctx, "web", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Status.AvailableReplicas).To(Equal(int32(3)))
		}).Should(Succeed())
	})

	It("answers kubernetes.default.svc.cluster.local from every member's DNS", func(ctx SpecContext) {
		for _, m := range env.Members {
			kube, err := env.Kube(m.Context)
			Expect(err).NotTo(HaveOccurred())
			svc, err := kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			eventually(ctx, func(g Gomega) {
				msg := new(dns.Msg)
				msg.SetQuestion("kubernetes.default.svc.cluster.local.", dns.TypeA)
				reply, _, err := new(dns.Client).ExchangeContext(ctx, msg, m.DNS)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(reply.Rcode).To(Equal(dns.RcodeSuccess))
				var ips []string
				for _, rr := range reply.Answer {
					if a, ok := rr.(*dns.A); ok {
						ips = append(ips, a.A.String())
					}
				}
				g.Expect(ips).To(ConsistOf(svc.Spec.ClusterIP), "member %s", m.Name)
			}).Should(Succeed())
		}
	})

	It("runs the hub and every agent with health and metrics endpoints", func(ctx SpecContext) {
		type endpoint struct{ health, metrics, component string }
		endpoints := []endpoint{{env.HubHealth, env.HubMetrics, "hub"}}
		for _, m := range env.Members {
			Expect(m.AgentHealth).NotTo(BeEmpty(), "member %s has no agents", m.Name)
			for i := range m.AgentHealth {
				endpoints = append(endpoints, endpoint{m.AgentHealth[i], m.AgentMetrics[i], "agent"})
			}
		}
		for _, e := range endpoints {
			for _, path := range []string{"/healthz", "/readyz"} {
				eventually(ctx, func(g Gomega) {
					g.Expect(httpGet(ctx, e.health, path)).To(Equal("ok"))
				}).Should(Succeed())
			}
			body, err := httpGet(ctx, e.metrics, "/metrics")
			Expect(err).NotTo(HaveOccurred())
			Expect(body).To(ContainSubstring(fmt.Sprintf(`flotilla_build_info{component="%s"`, e.component)))
		}
	})
})

func memberContexts() []string {
	var out []string
	for _, m := range env.Members {
		out = append(out, m.Context)
	}
	return out
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// httpGet returns the body of an endpoint that answered 200.
func httpGet(ctx context.Context, hostport, path string) (string, error) {
	code, body, err := testenv.HTTPGet(ctx, hostport, path)
	if err != nil {
		return "", err
	}
	if code != 200 {
		return "", fmt.Errorf("GET %s%s: %d: %s", hostport, path, code, strings.TrimSpace(body))
	}
	return body, nil
}
