package e2e

import (
	"fmt"
	"strings"
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

// Application failover: nginx runs on member1, where its pods can never be
// scheduled (so it stays Unhealthy); after tolerationSeconds (5) it moves
// to member2, and the purge mode decides what happens to member1's copy.
// The evicted cluster is not chosen again while its history entry lives.
var _ = Describe("Application failover", func() {
	DescribeTable("moves an unhealthy application to another cluster",
		func(ctx SpecContext, mode policyv1alpha1.PurgeMode) {
			cfg, err := env.RestConfig(env.HubContext)
			Expect(err).NotTo(HaveOccurred())
			flotilla, err := flotillaclient.NewForConfig(cfg)
			Expect(err).NotTo(HaveOccurred())
			hub, err := env.Kube(env.HubContext)
			Expect(err).NotTo(HaveOccurred())
			m1, m2 := env.Members[0].Name, env.Members[1].Name
			member2, err := env.Kube(env.Members[1].Context)
			Expect(err).NotTo(HaveOccurred())
			ns := "e2e-appfailover-" + strings.ToLower(string(mode))
			toleration := int32(5)
			behavior := &policyv1alpha1.ApplicationFailoverBehavior{PurgeMode: mode,
				DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: &toleration}}
			if mode == policyv1alpha1.PurgeModeGracefully {
				grace := int32(120)
				behavior.GracePeriodSeconds = &grace
			}
			createNginx(ctx, hub, flotilla, ns, policyv1alpha1.PropagationSpec{
				Placement: weightedPlacement(map[string]int64{m1: 1, m2: 0}),
				Failover:  &policyv1alpha1.FailoverBehavior{Application: behavior},
			}, neverReady(m1))
			work := func(cluster string) (*workv1alpha1.Work, error) {
				return flotilla.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(ctx, workobjects.WorkName(ns, "nginx-deployment"), metav1.GetOptions{})
			}
			binding := func(g Gomega) *workv1alpha1.ResourceBinding {
				rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				return rb
			}

			// Unhealthy on member1 → evicted (ApplicationFailure) → member2 runs 3.
			Eventually(ctx, func(g Gomega) {
				rb := binding(g)
				g.Expect(rb.Spec.Clusters).To(Equal([]workv1alpha1.TargetCluster{{Name: m2, Replicas: 3}}))
				g.Expect(rb.Spec.EvictionHistory).To(ContainElement(And(
					HaveField("ClusterName", m1), HaveField("Reason", workv1alpha1.EvictionReasonApplicationFailure))))
				g.Expect(runningPods(ctx, g, member2, ns)).To(Equal(3))
			}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

			switch mode {
			case policyv1alpha1.PurgeModeNever:
				// The old copy stays for good, and so does the task.
				Consistently(ctx, func(g Gomega) {
					w, err := work(m1)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(w.DeletionTimestamp).To(BeNil())
					g.Expect(binding(g).Spec.GracefulEvictionTasks).To(HaveLen(1))
				}).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
			default:
				// Gracefully: gone once member2 is healthy (well inside the
				// 120s grace). Directly: gone at once.
				eventually(ctx, func(g Gomega) {
					_, err := work(m1)
					g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "member1's copy is purged")
					g.Expect(binding(g).Spec.GracefulEvictionTasks).To(BeEmpty())
				}).Should(Succeed())
			}

			// Asking for a reschedule does not bring it back to member1.
			Eventually(ctx, func() error {
				rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
				if err != nil {
					return err
				}
				now := metav1.Now()
				rb.Spec.RescheduleTriggeredAt = &now
				_, err = flotilla.WorkV1alpha1().ResourceBindings(ns).Update(ctx, rb, metav1.UpdateOptions{})
				return err
			}).WithTimeout(30 * time.Second).Should(Succeed())
			eventually(ctx, func(g Gomega) {
				rb := binding(g)
				g.Expect(rb.Status.LastScheduledTime).NotTo(BeNil())
				g.Expect(rb.Status.LastScheduledTime.Time).NotTo(BeTemporally("<", rb.Spec.RescheduleTriggeredAt.Time.Truncate(time.Second)))
				g.Expect(rb.Spec.Clusters).To(Equal([]workv1alpha1.TargetCluster{{Name: m2, Replicas: 3}}), fmt.Sprintf("%s stays off %s", mode, m1))
			}).Should(Succeed())
		},
		Entry("purgeMode Gracefully", policyv1alpha1.PurgeModeGracefully),
		Entry("purgeMode Directly", policyv1alpha1.PurgeModeDirectly),
		Entry("purgeMode Never", policyv1alpha1.PurgeModeNever),
	)
})
