package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// drainTaint is a NoExecute taint no placement here tolerates: adding it
// evicts at once, without waiting for a cluster to fail.
const drainTaint = "example.com/e2e-drain"

// neverReady keeps a cluster's copy from ever becoming available: its pods
// ask for a node label no node has, so they stay Pending.
func neverReady(cluster string) *policyv1alpha1.OverridePolicy {
	return &policyv1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: "never-ready-on-" + cluster},
		Spec: policyv1alpha1.OverrideSpec{OverrideRules: []policyv1alpha1.RuleWithCluster{{
			TargetCluster: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{cluster}},
			Overriders: policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{{
				Path: "/spec/template/spec/nodeSelector", Operator: policyv1alpha1.OverriderOpAdd,
				Value: apiextensionsv1.JSON{Raw: []byte(`{"flotilla.io/e2e-no-such-node":"true"}`)}}}},
		}}}}
}

var _ = Describe("Graceful eviction", func() {
	var flotilla flotillaclient.Interface

	BeforeEach(func() {
		cfg, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		flotilla, err = flotillaclient.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
	})

	drain := func(ctx context.Context, cluster string) { drainCluster(ctx, flotilla, cluster) }
	binding := func(ctx context.Context, g Gomega, ns string) *workv1alpha1.ResourceBinding {
		rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return rb
	}
	oldWork := func(ctx context.Context, ns, cluster string) (*workv1alpha1.Work, error) {
		return flotilla.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(ctx, workobjects.WorkName(ns, "nginx-deployment"), metav1.GetOptions{})
	}
	waitRunning := func(ctx context.Context, ns string, cluster string, n int) {
		member, err := env.Kube(env.Members[memberIndex(cluster)].Context)
		Expect(err).NotTo(HaveOccurred())
		eventually(ctx, func(g Gomega) { g.Expect(runningPods(ctx, g, member, ns)).To(Equal(n)) }).WithTimeout(90 * time.Second).Should(Succeed())
	}

	It("keeps the evicted copy until the grace period ends when the replacement never becomes healthy", func(ctx SpecContext) {
		hub, err := env.Kube(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		m1, m2 := env.Members[0].Name, env.Members[1].Name
		const ns = "e2e-graceful"
		// All 3 on member1; member2 is only the fallback, and its copy can
		// never become available.
		createNginx(ctx, hub, flotilla, ns, policyv1alpha1.PropagationSpec{Placement: weightedPlacement(map[string]int64{m1: 1, m2: 0})}, neverReady(m2))
		waitRunning(ctx, ns, m1, 3)

		evicted := time.Now()
		drain(ctx, m1)
		eventually(ctx, func(g Gomega) {
			rb := binding(ctx, g, ns)
			g.Expect(rb.Spec.Clusters).To(Equal([]workv1alpha1.TargetCluster{{Name: m2, Replicas: 3}}))
			g.Expect(rb.Spec.GracefulEvictionTasks).To(HaveLen(1))
		}).Should(Succeed())
		// The replacement stays Pending: member1's copy serves meanwhile.
		Consistently(ctx, func(g Gomega) {
			w, err := oldWork(ctx, ns, m1)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(w.DeletionTimestamp).To(BeNil())
		}).WithTimeout(8 * time.Second).WithPolling(time.Second).Should(Succeed())
		// The grace period (15s with FAST=1) ends the task; the copy goes.
		Eventually(ctx, func(g Gomega) {
			g.Expect(binding(ctx, g, ns).Spec.GracefulEvictionTasks).To(BeEmpty())
			_, err := oldWork(ctx, ns, m1)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Expect(time.Since(evicted)).To(BeNumerically(">=", 14*time.Second), "the old copy went before the grace period")
	})

	It("never purges the only copy when no other cluster can take the workload", func(ctx SpecContext) {
		hub, err := env.Kube(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		m1 := env.Members[0].Name
		const ns = "e2e-only-copy"
		createNginx(ctx, hub, flotilla, ns, policyv1alpha1.PropagationSpec{Placement: weightedPlacement(map[string]int64{m1: 1})})
		waitRunning(ctx, ns, m1, 3)

		drain(ctx, m1)
		eventually(ctx, func(g Gomega) {
			rb := binding(ctx, g, ns)
			g.Expect(rb.Spec.Clusters).To(BeEmpty())
			g.Expect(rb.Spec.GracefulEvictionTasks).To(HaveLen(1))
			g.Expect(meta.IsStatusConditionFalse(rb.Status.Conditions, workv1alpha1.BindingConditionScheduled)).To(BeTrue())
		}).Should(Succeed())
		// Well past the 15s grace: the copy on member1 is all there is.
		Consistently(ctx, func(g Gomega) {
			w, err := oldWork(ctx, ns, m1)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(w.DeletionTimestamp).To(BeNil())
			g.Expect(binding(ctx, g, ns).Spec.GracefulEvictionTasks).To(HaveLen(1))
		}).WithTimeout(25 * time.Second).WithPolling(time.Second).Should(Succeed())
	})
})

// setDrainTaint adds (on) or removes drainTaint on cluster.
func setDrainTaint(ctx context.Context, flotilla flotillaclient.Interface, cluster string, on bool) {
	Eventually(ctx, func() error {
		c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var taints []corev1.Taint
		for _, t := range c.Spec.Taints {
			if t.Key != drainTaint {
				taints = append(taints, t)
			}
		}
		if on {
			taints = append(taints, corev1.Taint{Key: drainTaint, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: time.Now()}})
		}
		c.Spec.Taints = taints
		_, err = flotilla.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
		return err
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// drainCluster adds drainTaint to cluster until the spec ends.
func drainCluster(ctx context.Context, flotilla flotillaclient.Interface, cluster string) {
	setDrainTaint(ctx, flotilla, cluster, true)
	DeferCleanup(func(ctx context.Context) { setDrainTaint(ctx, flotilla, cluster, false) })
}

// memberIndex is the index in env.Members of the member named name.
func memberIndex(name string) int {
	for i, m := range env.Members {
		if m.Name == name {
			return i
		}
	}
	Fail("no member " + name)
	return -1
}
