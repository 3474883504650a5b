package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

// Overcommit protection (Karmada v1.18 SchedulingOvercommitProtection,
// issue 39): a burst of Deployments divided by room lands on member2 and
// member3 at once, more than they have room for together. Each replica
// asks for 8 CPUs, so a member's room is a handful of replicas, and the
// agents report their summaries every 2 s, after the burst has been
// scheduled. The bindings that fit are placed (no member beyond the room
// its summary showed before the burst), the rest are unschedulable, and
// every placed replica runs: the members' own schedulers find room for
// all of them (none Pending).
var _ = Describe("Overcommit protection", func() {
	It("places a burst divided by room on member2 and member3 within their room and leaves the rest unschedulable", func(ctx SpecContext) {
		cfg, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		flotilla, err := flotillaclient.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		hub, err := env.Kube(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		targets := env.Members[1:3]
		const ns, cpu, replicas = "e2e-overcommit", 8, 2

		// Each target's room in replicas of 8 CPUs, from its summary.
		room := map[string]int64{}
		var total int64
		for _, m := range targets {
			c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, m.Name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			room[m.Name] = freeCPU(c) / cpu
			total += room[m.Name]
		}
		Expect(total).To(BeNumerically(">=", replicas), "room on %v", room)
		fit := int(total / replicas) // bindings of 2 replicas that fit; replicas split across members
		burst := fit + 2
		GinkgoWriter.Printf("room (replicas of %d CPUs): %v; burst of %d bindings of %d replicas, %d fit\n", cpu, room, burst, replicas, fit)

		_, err = hub.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) {
			for i := range burst {
				_ = flotilla.WorkV1alpha1().ResourceTemplates(ns).Delete(ctx, fmt.Sprintf("burst-%d", i), metav1.DeleteOptions{})
			}
			Eventually(ctx, func(g Gomega) {
				list, err := flotilla.WorkV1alpha1().ResourceBindings(ns).List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(list.Items).To(BeEmpty())
			}).WithTimeout(2 * time.Minute).Should(Succeed())
			_ = flotilla.PolicyV1alpha1().PropagationPolicies(ns).Delete(ctx, "burst", metav1.DeleteOptions{})
			_ = hub.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		})
		policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "burst", Namespace: ns},
			Spec: policyv1alpha1.PropagationSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "burst"}}}},
				Placement: policyv1alpha1.Placement{
					ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{targets[0].Name, targets[1].Name}},
					ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
						ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
						WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}}}}}
		_, err = flotilla.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		for i := range burst {
			name := fmt.Sprintf("burst-%d", i)
			manifest, err := json.Marshal(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
				"metadata": map[string]any{"name": name, "labels": map[string]any{"app": "burst"}},
				"spec": map[string]any{"replicas": replicas, "selector": map[string]any{"matchLabels": map[string]any{"app": name}},
					"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": name}},
						"spec": map[string]any{"containers": []any{map[string]any{"name": "pause", "image": "registry.k8s.io/pause:3.10",
							"resources": map[string]any{"requests": map[string]any{"cpu": fmt.Sprint(cpu)}}}}}}}})
			Expect(err).NotTo(HaveOccurred())
			tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "burst"}},
				Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: manifest}}}}
			_, err = flotilla.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}

		// Every binding decided: the ones that fit placed within the room,
		// the others unschedulable.
		placed := map[string]int64{}
		eventually(ctx, func(g Gomega) {
			list, err := flotilla.WorkV1alpha1().ResourceBindings(ns).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list.Items).To(HaveLen(burst))
			scheduled, unschedulable := 0, 0
			placed = map[string]int64{}
			for _, b := range list.Items {
				cond := meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.BindingConditionScheduled)
				g.Expect(cond).NotTo(BeNil(), "%s decided", b.Name)
				if cond.Status == metav1.ConditionTrue {
					scheduled++
				} else {
					unschedulable++
				}
				for _, t := range b.Spec.Clusters {
					placed[t.Name] += int64(t.Replicas)
				}
			}
			for name, n := range placed {
				Expect(n).To(BeNumerically("<=", room[name]), "%s given %d replicas of %d CPUs with room for %d: %v", name, n, cpu, room[name], placed)
			}
			g.Expect(scheduled).To(Equal(fit), "scheduled (placed %v)", placed)
			g.Expect(unschedulable).To(Equal(burst - fit))
		}).Should(Succeed())
		GinkgoWriter.Printf("placed: %v\n", placed)

		// The members' schedulers agree: every placed replica runs.
		eventually(ctx, func(g Gomega) {
			for _, m := range targets {
				member, err := env.Kube(m.Context)
				g.Expect(err).NotTo(HaveOccurred())
				pods, err := member.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				running := int64(0)
				for _, p := range pods.Items {
					g.Expect(p.Status.Phase).NotTo(Equal(corev1.PodPending), "%s/%s on %s: no room", p.Namespace, p.Name, m.Name)
					if p.Status.Phase == corev1.PodRunning {
						running++
					}
				}
				g.Expect(running).To(Equal(placed[m.Name]), "running on %s", m.Name)
			}
		}).Should(Succeed())
	})
})

// freeCPU is the cluster's reported free CPU in whole cores: allocatable
// less allocated and allocating.
func freeCPU(c *clusterv1alpha1.Cluster) int64 {
	s := c.Status.ResourceSummary
	if s == nil {
		return 0
	}
	free := s.Allocatable.Cpu().MilliValue()
	if q, ok := s.Allocated[corev1.ResourceCPU]; ok {
		free -= q.MilliValue()
	}
	if q, ok := s.Allocating[corev1.ResourceCPU]; ok {
		free -= q.MilliValue()
	}
	return max(free, 0) / 1000
}
