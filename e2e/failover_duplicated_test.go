package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/e2e/framework"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

// Seed 001: a Duplicated workload over five clusters, affinity
// member1/2/3/5, spread over exactly two. It starts on {member1, member2};
// when member2 fails, member1 keeps its copy and member3 or member5 is
// added. The environment has three real members; member4 and member5 are
// registered here with simulated agents (their Leases renewed, Ready).
// member2's failure is a NoExecute taint nothing tolerates.
var _ = Describe("Failover of a Duplicated workload", func() {
	It("keeps member1 and adds member3 or member5 when member2 fails (seed 001)", func(ctx SpecContext) {
		cfg, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		flotilla, err := flotillaclient.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		hub, err := env.Kube(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		Expect(env.Members).To(HaveLen(3))
		m1, m2, m3 := env.Members[0], env.Members[1], env.Members[2]

		agents, stopAgents := context.WithCancel(context.Background())
		DeferCleanup(stopAgents)
		for _, name := range []string{"member4", "member5"} {
			_, err := flotilla.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: clusterv1alpha1.ClusterSpec{SyncMode: clusterv1alpha1.Pull}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			go framework.SimulateAgent(agents, hub, flotilla, name, 2*time.Second, nil)
			// Gone before the next spec: silent extra clusters would push the
			// fleet guard into a partial disruption there.
			DeferCleanup(func(ctx context.Context) {
				_ = flotilla.ClusterV1alpha1().Clusters().Delete(ctx, name, metav1.DeleteOptions{})
				Eventually(ctx, func() bool {
					_, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
					return apierrors.IsNotFound(err)
				}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(BeTrue(), name+" deleted")
			})
		}
		eventually(ctx, func(g Gomega) {
			for _, name := range []string{"member4", "member5"} {
				c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(readyStatus(c)).To(Equal(metav1.ConditionTrue))
				g.Expect(c.Spec.Taints).To(BeEmpty())
			}
		}).WithTimeout(90 * time.Second).Should(Succeed())

		const ns = "e2e-seed001"
		createNginx(ctx, hub, flotilla, ns, policyv1alpha1.PropagationSpec{Placement: policyv1alpha1.Placement{
			ClusterAffinity:   &policyv1alpha1.ClusterAffinity{ClusterNames: []string{m1.Name, m2.Name, m3.Name, "member5"}},
			SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 2, MaxGroups: 2}},
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated},
		}})
		clusters := func(g Gomega) []workv1alpha1.TargetCluster {
			rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			return rb.Spec.Clusters
		}
		eventually(ctx, func(g Gomega) {
			g.Expect(clusters(g)).To(Equal([]workv1alpha1.TargetCluster{{Name: m1.Name, Replicas: 3}, {Name: m2.Name, Replicas: 3}}))
		}).Should(Succeed())

		// member2 fails. The taint is added by hand here: seed 000's spec
		// shows the hub tainting a silent cluster; this one is about where
		// the Duplicated copy goes.
		drainCluster(ctx, flotilla, m2.Name)
		Eventually(ctx, func(g Gomega) {
			got := clusters(g)
			g.Expect(got).To(HaveLen(2))
			g.Expect(got[0]).To(Equal(workv1alpha1.TargetCluster{Name: m1.Name, Replicas: 3}), "member1 keeps its copy")
			g.Expect(got[1].Name).To(BeElementOf(m3.Name, "member5"))
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	})
})
