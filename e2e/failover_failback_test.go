package e2e

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

// Issue 18 item 5: the seed's nginx (3 replicas, member1:member2 = 1:2)
// fails over to member2 when member1 stops; with failover.failback, once
// member1 has been Ready for the stabilization window the hub moves it
// back to 1:2, adding member1's copy before shrinking member2's, so the
// real Deployments on the members never have fewer than 3 available
// replicas between them.
var _ = Describe("Failback", func() {
	It("returns the seed's nginx to its 1:2 split after member1 recovers, never below 3 available replicas", func(ctx SpecContext) {
		cfg, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		flotilla, err := flotillaclient.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		hub, err := env.Kube(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		m1, m2 := env.Members[0], env.Members[1]
		member1, err := env.Kube(m1.Context)
		Expect(err).NotTo(HaveOccurred())
		member2, err := env.Kube(m2.Context)
		Expect(err).NotTo(HaveOccurred())
		const ns = "e2e-failback"
		const window = 20
		createNginx(ctx, hub, flotilla, ns, policyv1alpha1.PropagationSpec{
			Placement: weightedPlacement(map[string]int64{m1.Name: 1, m2.Name: 2}),
			Failover: &policyv1alpha1.FailoverBehavior{Failback: &policyv1alpha1.FailbackBehavior{
				StabilizationWindowSeconds: window, MaxConcurrent: 5}},
		})
		eventually(ctx, func(g Gomega) {
			g.Expect(runningPods(ctx, g, member1, ns)).To(Equal(1))
			g.Expect(runningPods(ctx, g, member2, ns)).To(Equal(2))
		}).WithTimeout(90 * time.Second).Should(Succeed())

		// Stop member1 (agents, then apiserver) until the workload runs 3
		// on member2.
		for _, a := range m1.Agents {
			Expect(env.Ctl(ctx, "stop", a)).To(Succeed())
		}
		Expect(env.Ctl(ctx, "stop-cluster", env.ClusterName(m1))).To(Succeed())
		restarted := false
		restart := func(ctx context.Context) {
			if restarted {
				return
			}
			restarted = true
			Expect(env.Ctl(ctx, "start-cluster", env.ClusterName(m1))).To(Succeed())
			for _, a := range m1.Agents {
				Expect(env.Ctl(ctx, "start", a)).To(Succeed())
			}
			waitRunsWorkloads(ctx, member1)
		}
		DeferCleanup(restart)
		Eventually(ctx, func(g Gomega) {
			rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rb.Spec.Clusters).To(Equal([]workv1alpha1.TargetCluster{{Name: m2.Name, Replicas: 3}}))
			g.Expect(fbAvailableOn(ctx, member2, ns)).To(Equal(int32(3)))
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())

		// member1 returns. From here on, sample the real Deployments'
		// availableReplicas on both members.
		restart(ctx)
		var mu sync.Mutex
		lowest, samples := int32(1<<30), 0
		sctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			for sctx.Err() == nil {
				a1, err1 := fbAvailable(sctx, member1, ns)
				a2, err2 := fbAvailable(sctx, member2, ns)
				if err1 == nil && err2 == nil {
					mu.Lock()
					lowest = min(lowest, a1+a2)
					samples++
					mu.Unlock()
				}
				time.Sleep(250 * time.Millisecond)
			}
		}()
		DeferCleanup(func() { stop(); <-done })

		Eventually(ctx, func(g Gomega) {
			rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rb.Spec.RescheduleReason).To(Equal(workv1alpha1.EvictionReasonFailback))
			g.Expect(rb.Spec.Clusters).To(Equal([]workv1alpha1.TargetCluster{{Name: m1.Name, Replicas: 1}, {Name: m2.Name, Replicas: 2}}))
			g.Expect(rb.Spec.GracefulEvictionTasks).To(BeEmpty())
			g.Expect(fbAvailableOn(ctx, member1, ns)).To(Equal(int32(1)))
			g.Expect(fbAvailableOn(ctx, member2, ns)).To(Equal(int32(2)))
			g.Expect(fbSpecReplicas(ctx, member2, ns)).To(Equal(int32(2)))
		}).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Succeed())
		stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		GinkgoWriter.Printf("lowest available replicas on member1 + member2 during the failback: %d (%d samples)\n", lowest, samples)
		Expect(samples).To(BeNumerically(">", 0))
		Expect(lowest).To(BeNumerically(">=", 3), "available replicas on member1 + member2 dropped below 3 during the failback")
	})
})

// fbAvailable is the nginx Deployment's availableReplicas on member (0
// when it does not exist).
func fbAvailable(ctx context.Context, member kubernetes.Interface, ns string) (int32, error) {
	d, err := member.AppsV1().Deployments(ns).Get(ctx, "nginx", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return d.Status.AvailableReplicas, nil
}

func fbAvailableOn(ctx context.Context, member kubernetes.Interface, ns string) int32 {
	n, _ := fbAvailable(ctx, member, ns)
	return n
}

func fbSpecReplicas(ctx context.Context, member kubernetes.Interface, ns string) int32 {
	d, err := member.AppsV1().Deployments(ns).Get(ctx, "nginx", metav1.GetOptions{})
	if err != nil || d.Spec.Replicas == nil {
		return -1
	}
	return *d.Spec.Replicas
}
