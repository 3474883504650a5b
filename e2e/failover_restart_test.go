package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// A hub restart in the middle of a countdown changes neither the outcome
// nor its timing: the times it counts from live in the binding.
var _ = Describe("Hub restart during failover", func() {
	var flotilla flotillaclient.Interface
	BeforeEach(func() {
		cfg, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		flotilla, err = flotillaclient.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
	})
	restartHub := func(ctx context.Context) {
		Expect(env.Ctl(ctx, "restart", "hub")).To(Succeed())
	}
	binding := func(ctx context.Context, g Gomega, ns string) *workv1alpha1.ResourceBinding {
		rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return rb
	}

	It("keeps an application-failover countdown across a hub restart", func(ctx SpecContext) {
		hub, err := env.Kube(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		m1, m2 := env.Members[0].Name, env.Members[1].Name
		const ns = "e2e-restart-countdown"
		toleration := int32(12)
		createNginx(ctx, hub, flotilla, ns, policyv1alpha1.PropagationSpec{
			Placement: weightedPlacement(map[string]int64{m1: 1, m2: 0}),
			Failover: &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{
				DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: &toleration}}},
		}, neverReady(m1))
		var since time.Time
		eventually(ctx, func(g Gomega) {
			rb := binding(ctx, g, ns)
			g.Expect(rb.Status.AggregatedStatus).To(HaveLen(1))
			g.Expect(rb.Status.AggregatedStatus[0].UnhealthySince).NotTo(BeNil())
			since = rb.Status.AggregatedStatus[0].UnhealthySince.Time
		}).Should(Succeed())
		// Halfway through the countdown the hub restarts.
		time.Sleep(time.Until(since.Add(6 * time.Second)))
		restartHub(ctx)

		var evictedAt time.Time
		Eventually(ctx, func(g Gomega) {
			rb := binding(ctx, g, ns)
			g.Expect(rb.Spec.EvictionHistory).NotTo(BeEmpty())
			evictedAt = rb.Spec.EvictionHistory[0].EvictedAt.Time
		}).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		took := evictedAt.Sub(since)
		GinkgoWriter.Printf("unhealthy since %s, evicted %s later (toleration %ds, hub restarted at 6s)\n", since.Format(time.RFC3339), took, toleration)
		// Counted from the first unhealthy report, not from the restart
		// (which would make it 18s). Times have one-second precision.
		Expect(took).To(BeNumerically(">=", 11*time.Second))
		Expect(took).To(BeNumerically("<=", 16*time.Second))
	})

	It("keeps a graceful eviction's grace period across a hub restart", func(ctx SpecContext) {
		hub, err := env.Kube(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		m1, m2 := env.Members[0].Name, env.Members[1].Name
		const ns = "e2e-restart-grace"
		createNginx(ctx, hub, flotilla, ns, policyv1alpha1.PropagationSpec{Placement: weightedPlacement(map[string]int64{m1: 1, m2: 0})}, neverReady(m2))
		member1, err := env.Kube(env.Members[0].Context)
		Expect(err).NotTo(HaveOccurred())
		eventually(ctx, func(g Gomega) { g.Expect(runningPods(ctx, g, member1, ns)).To(Equal(3)) }).WithTimeout(90 * time.Second).Should(Succeed())

		drainCluster(ctx, flotilla, m1)
		var created time.Time
		eventually(ctx, func(g Gomega) {
			tasks := binding(ctx, g, ns).Spec.GracefulEvictionTasks
			g.Expect(tasks).To(HaveLen(1))
			created = tasks[0].CreationTimestamp.Time
		}).Should(Succeed())
		time.Sleep(time.Until(created.Add(7 * time.Second)))
		restartHub(ctx)

		Eventually(ctx, func() bool {
			_, err := flotilla.WorkV1alpha1().Works("flotilla-es-"+m1).Get(ctx, workobjects.WorkName(ns, "nginx-deployment"), metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(90 * time.Second).WithPolling(500 * time.Millisecond).Should(BeTrue())
		took := time.Since(created)
		GinkgoWriter.Printf("graceful task created %s, old copy gone %s later (grace 15s, hub restarted at 7s)\n", created.Format(time.RFC3339), took)
		Expect(took).To(BeNumerically(">=", 14*time.Second))
		Expect(took).To(BeNumerically("<=", 21*time.Second), "the grace period restarted with the hub")
	})
})
