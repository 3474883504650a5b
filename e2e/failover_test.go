package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Seed 000: the nginx Deployment, 3 replicas Divided member1:member2 = 1:2.
// member1 (its apiserver and its agents) stops: Ready goes Unknown, the
// taints come, the workload is evicted and member2 runs all 3 while the
// template keeps showing 3/3; when member1 returns its replicas stay on
// member2 and its leftover copy is removed. The environment's hub taints
// NoExecute env.Timings.FailoverEvictionTimeout after Unknown, and the
// default tolerations last DefaultTolerationSeconds.
//
// The same outage also checks failback (issue 18 item 5): a second copy of
// the nginx, in its own namespace with failover.failback, returns to its
// 1:2 split once member1 has been Ready for the stabilization window,
// adding member1's copy before shrinking member2's, so the real
// Deployments on the members never have fewer than 3 available replicas
// between them. One outage for both saves a member restart (about a
// minute of the suite).
var _ = Describe("Failover", func() {
	It("moves the seed's nginx off a stopped member1 to member2 and cleans member1 up when it returns (seed 000); with failback a copy returns to its 1:2 split, never below 3 available replicas", func(ctx SpecContext) {
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
		const ns, fbNS = "e2e-failover", "e2e-failback"
		createSeedNginx(ctx, hub, flotilla, ns, m1.Name, m2.Name)
		createNginx(ctx, hub, flotilla, fbNS, policyv1alpha1.PropagationSpec{
			Placement: weightedPlacement(map[string]int64{m1.Name: 1, m2.Name: 2}),
			Failover: &policyv1alpha1.FailoverBehavior{Failback: &policyv1alpha1.FailbackBehavior{
				StabilizationWindowSeconds: 20, MaxConcurrent: 5}},
		})

		eventually(ctx, func(g Gomega) {
			for _, n := range []string{ns, fbNS} {
				g.Expect(runningPods(ctx, g, member1, n)).To(Equal(1))
				g.Expect(runningPods(ctx, g, member2, n)).To(Equal(2))
			}
		}).WithTimeout(90 * time.Second).Should(Succeed())

		// Stop member1: its agents, then its apiserver.
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
			// The next spec may use member1 at once: wait until its control
			// plane runs workloads again (the restarted controller manager
			// must win its leader election, kwok must hold its node Leases).
			waitRunsWorkloads(ctx, member1)
		}
		DeferCleanup(restart)

		// Lease grace → Unknown → NoExecute → default toleration (env.Timings) →
		// eviction → member2 scheduled 3 → 3 pods Running there.
		Eventually(ctx, func(g Gomega) {
			rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rb.Spec.Clusters).To(Equal([]workv1alpha1.TargetCluster{{Name: m2.Name, Replicas: 3}}))
			g.Expect(rb.Spec.EvictionHistory).NotTo(BeEmpty())
			g.Expect(rb.Spec.EvictionHistory[0].ClusterName).To(Equal(m1.Name))
			g.Expect(rb.Spec.EvictionHistory[0].Reason).To(Equal(workv1alpha1.EvictionReasonTaintUntolerated))
			g.Expect(runningPods(ctx, g, member2, ns)).To(Equal(3))
			fb, err := flotilla.WorkV1alpha1().ResourceBindings(fbNS).Get(ctx, "nginx-deployment", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(fb.Spec.Clusters).To(Equal([]workv1alpha1.TargetCluster{{Name: m2.Name, Replicas: 3}}))
			g.Expect(fbAvailableOn(ctx, member2, fbNS)).To(Equal(int32(3)))
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, m1.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Spec.Taints).To(ContainElement(HaveField("Effect", corev1.TaintEffectNoExecute)))

		// The template keeps showing 3/3, now all from member2.
		eventually(ctx, func(g Gomega) {
			tmpl, err := flotilla.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "nginx", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(availableReplicas(g, tmpl)).To(Equal("3"))
		}).WithTimeout(90 * time.Second).Should(Succeed())
		// member1's Work is still there: its agent is gone, so nothing can
		// confirm the removal (or the graceful task still holds it).
		_, err = flotilla.WorkV1alpha1().Works("flotilla-es-"+m1.Name).Get(ctx, workobjects.WorkName(ns, "nginx-deployment"), metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "member1's Work must survive while member1 is away")

		// member1 returns: the replicas stay on member2, and member1's Work
		// and Deployment are deleted. From here on, sample the failback
		// copy's real Deployments' availableReplicas on both members.
		restart(ctx)
		sampler := startAvailabilitySampler(ctx, member1, member2, fbNS)
		Eventually(ctx, func(g Gomega) {
			_, err := flotilla.WorkV1alpha1().Works("flotilla-es-"+m1.Name).Get(ctx, workobjects.WorkName(ns, "nginx-deployment"), metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "member1's Work is deleted")
			_, err = member1.AppsV1().Deployments(ns).Get(ctx, "nginx", metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "member1's Deployment is deleted")
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(rb.Spec.Clusters).To(Equal([]workv1alpha1.TargetCluster{{Name: m2.Name, Replicas: 3}}), "replicas are not moved back")
		Expect(rb.Spec.GracefulEvictionTasks).To(BeEmpty())

		// The copy with failback returns to 1:2 after the window.
		Eventually(ctx, func(g Gomega) {
			rb, err := flotilla.WorkV1alpha1().ResourceBindings(fbNS).Get(ctx, "nginx-deployment", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rb.Spec.RescheduleReason).To(Equal(workv1alpha1.EvictionReasonFailback))
			g.Expect(rb.Spec.Clusters).To(Equal([]workv1alpha1.TargetCluster{{Name: m1.Name, Replicas: 1}, {Name: m2.Name, Replicas: 2}}))
			g.Expect(rb.Spec.GracefulEvictionTasks).To(BeEmpty())
			g.Expect(fbAvailableOn(ctx, member1, fbNS)).To(Equal(int32(1)))
			g.Expect(fbAvailableOn(ctx, member2, fbNS)).To(Equal(int32(2)))
			g.Expect(fbSpecReplicas(ctx, member2, fbNS)).To(Equal(int32(2)))
		}).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Succeed())
		lowest, samples := sampler.stop()
		GinkgoWriter.Printf("lowest available replicas on member1 + member2 during the failback: %d (%d samples)\n", lowest, samples)
		Expect(samples).To(BeNumerically(">", 0))
		Expect(lowest).To(BeNumerically(">=", 3), "available replicas on member1 + member2 dropped below 3 during the failback")

		// Leave member1 Ready for the specs after this one.
		Eventually(ctx, func() bool {
			c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, m1.Name, metav1.GetOptions{})
			return err == nil && len(c.Spec.Taints) == 0
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(BeTrue())
	})
})

// createSeedNginx creates namespace ns on the hub with the seed's nginx
// template and its policy (3 replicas Divided first:second = 1:2), and
// registers their removal.
func createSeedNginx(ctx context.Context, hub kubernetes.Interface, flotilla flotillaclient.Interface, ns, first, second string) {
	createNginx(ctx, hub, flotilla, ns, policyv1alpha1.PropagationSpec{Placement: weightedPlacement(map[string]int64{first: 1, second: 2})})
}

// weightedPlacement is a Divided placement over the weighted clusters.
func weightedPlacement(weights map[string]int64) policyv1alpha1.Placement {
	p := policyv1alpha1.Placement{
		ClusterAffinity: &policyv1alpha1.ClusterAffinity{},
		ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
			WeightPreference:          &policyv1alpha1.ClusterPreferences{},
		},
	}
	for _, name := range slices.Sorted(maps.Keys(weights)) {
		p.ClusterAffinity.ClusterNames = append(p.ClusterAffinity.ClusterNames, name)
		if weights[name] > 0 {
			p.ReplicaScheduling.WeightPreference.StaticWeightList = append(p.ReplicaScheduling.WeightPreference.StaticWeightList,
				policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{name}}, Weight: weights[name]})
		}
	}
	return p
}

// createNginx creates namespace ns on the hub with the seed's nginx
// Deployment (3 replicas, app=nginx) as a template, a policy with spec
// (selecting it) and the given OverridePolicies, and registers their
// removal.
func createNginx(ctx context.Context, hub kubernetes.Interface, flotilla flotillaclient.Interface, ns string,
	spec policyv1alpha1.PropagationSpec, overrides ...*policyv1alpha1.OverridePolicy) {
	_, err := hub.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	manifest, err := json.Marshal(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "nginx", "labels": map[string]any{"app": "nginx"}},
		"spec": map[string]any{"replicas": 3, "selector": map[string]any{"matchLabels": map[string]any{"app": "nginx"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "nginx"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "nginx", "image": "nginx"}}}}}})
	Expect(err).NotTo(HaveOccurred())
	spec.ResourceSelectors = []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx-propagation", Namespace: ns}, Spec: spec}
	_, err = flotilla.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	for _, op := range overrides {
		op.Namespace = ns
		_, err = flotilla.PolicyV1alpha1().OverridePolicies(ns).Create(ctx, op, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: manifest}}}}
	_, err = flotilla.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx context.Context) {
		_ = flotilla.WorkV1alpha1().ResourceTemplates(ns).Delete(ctx, "nginx", metav1.DeleteOptions{})
		Eventually(ctx, func() bool {
			_, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(2*time.Minute).Should(BeTrue(), "deleting the template removes its binding")
		_ = flotilla.PolicyV1alpha1().PropagationPolicies(ns).Delete(ctx, policy.Name, metav1.DeleteOptions{})
		for _, op := range overrides {
			_ = flotilla.PolicyV1alpha1().OverridePolicies(ns).Delete(ctx, op.Name, metav1.DeleteOptions{})
		}
		_ = hub.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
}

// waitRunsWorkloads waits until member runs a one-replica Deployment to
// Available, then removes it: after a cluster restart its apiserver
// answers long before its controller manager and scheduler act again.
func waitRunsWorkloads(ctx context.Context, member kubernetes.Interface) {
	// A namespace of its own per call: the previous call's namespace may
	// still be terminating (two specs restart member1 one after the other).
	ns := "e2e-canary-" + utilrand.String(5)
	_, err := member.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	one := int32(1)
	labels := map[string]string{"app": "canary"}
	canary := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "canary", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "canary", Image: "registry.k8s.io/pause:3.10"}}}}}}
	Eventually(ctx, func() error {
		_, err := member.AppsV1().Deployments(ns).Create(ctx, canary, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	Eventually(ctx, func() int32 {
		d, err := member.AppsV1().Deployments(ns).Get(ctx, "canary", metav1.GetOptions{})
		if err != nil {
			return 0
		}
		return d.Status.AvailableReplicas
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Equal(int32(1)), "the restarted member runs workloads")
	_ = member.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// runningPods counts the Running, not deleting, app=nginx pods of ns.
func runningPods(ctx context.Context, g Gomega, member kubernetes.Interface, ns string) int {
	pods, err := member.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=nginx"})
	g.Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			n++
		}
	}
	return n
}

// availableReplicas is the template's summed availableReplicas.
func availableReplicas(g Gomega, tmpl *workv1alpha1.ResourceTemplate) string {
	g.Expect(tmpl.Status.WorkloadStatus).NotTo(BeNil())
	var st map[string]any
	g.Expect(json.Unmarshal(tmpl.Status.WorkloadStatus.Raw, &st)).To(Succeed())
	return fmt.Sprint(st["availableReplicas"])
}
