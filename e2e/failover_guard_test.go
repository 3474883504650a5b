package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// The fleet guard: when every member goes silent at once it is the hub that
// has lost them, not the members that failed. Nothing is evicted and no
// Work is deleted; when they return everything is as it was.
var _ = Describe("Fleet guard", func() {
	It("evicts nothing and deletes no Work when every member stops at once, and resumes as before", func(ctx SpecContext) {
		cfg, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		flotilla, err := flotillaclient.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		hub, err := env.Kube(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		m1, m2 := env.Members[0], env.Members[1]
		const ns = "e2e-fleet-guard"
		createSeedNginx(ctx, hub, flotilla, ns, m1.Name, m2.Name)
		want := []workv1alpha1.TargetCluster{{Name: m1.Name, Replicas: 1}, {Name: m2.Name, Replicas: 2}}
		eventually(ctx, func(g Gomega) {
			rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rb.Spec.Clusters).To(Equal(want))
		}).Should(Succeed())

		// Every agent of every member stops: the hub hears from nobody.
		var agents []string
		for _, m := range env.Members {
			agents = append(agents, m.Agents...)
		}
		for _, a := range agents {
			Expect(env.Ctl(ctx, "kill", a)).To(Succeed())
		}
		started := false
		start := func(ctx context.Context) {
			if started {
				return
			}
			started = true
			for _, a := range agents {
				Expect(env.Ctl(ctx, "start", a)).To(Succeed())
			}
		}
		DeferCleanup(start)

		// All members go Unknown (the hub Lease grace, env.Timings)…
		Eventually(ctx, func(g Gomega) {
			for _, m := range env.Members {
				c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, m.Name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(readyStatus(c)).To(Equal(metav1.ConditionUnknown), m.Name)
			}
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		// …and past the NoExecute timeout and the default toleration (and
		// two seconds) nothing is tainted NoExecute, evicted or deleted.
		t := env.Timings
		hold := t.FailoverEvictionTimeout + time.Duration(t.DefaultTolerationSeconds)*time.Second + 2*time.Second
		Consistently(ctx, func(g Gomega) {
			for _, m := range env.Members {
				c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, m.Name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(c.Spec.Taints).NotTo(ContainElement(HaveField("Effect", corev1.TaintEffectNoExecute)), m.Name)
			}
			rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rb.Spec.Clusters).To(Equal(want))
			g.Expect(rb.Spec.GracefulEvictionTasks).To(BeEmpty())
			for _, m := range []string{m1.Name, m2.Name} {
				w, err := flotilla.WorkV1alpha1().Works("flotilla-es-"+m).Get(ctx, workobjects.WorkName(ns, "nginx-deployment"), metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(w.DeletionTimestamp).To(BeNil())
			}
		}).WithTimeout(hold).WithPolling(time.Second).Should(Succeed())

		start(ctx)
		Eventually(ctx, func(g Gomega) {
			for _, m := range env.Members {
				c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, m.Name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(readyStatus(c)).To(Equal(metav1.ConditionTrue), m.Name)
				g.Expect(c.Spec.Taints).To(BeEmpty(), m.Name)
			}
			rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rb.Spec.Clusters).To(Equal(want))
			g.Expect(rb.Spec.EvictionHistory).To(BeEmpty())
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	})
})

func readyStatus(c *clusterv1alpha1.Cluster) metav1.ConditionStatus {
	for _, cond := range c.Status.Conditions {
		if cond.Type == clusterv1alpha1.ClusterConditionReady {
			return cond.Status
		}
	}
	return ""
}
