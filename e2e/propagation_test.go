package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

// The seed's nginx: 3 replicas, Divided, member1:member2 = 1:2.
var _ = Describe("Propagation", func() {
	It("runs the seed's nginx Deployment as 1 pod on member1 and 2 on member2 and shows 3/3 on the template", func(ctx SpecContext) {
		cfg, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		flotilla, err := flotillaclient.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		hub, err := env.Kube(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(env.Members)).To(BeNumerically(">=", 2))
		m1, m2 := env.Members[0], env.Members[1]
		member1, err := env.Kube(m1.Context)
		Expect(err).NotTo(HaveOccurred())
		member2, err := env.Kube(m2.Context)
		Expect(err).NotTo(HaveOccurred())
		const ns = "e2e-propagation"

		// Registered first, so it runs last: after the template is gone.
		DeferCleanup(func(ctx context.Context) {
			for _, member := range []kubernetes.Interface{member1, member2} {
				Eventually(ctx, func() bool {
					_, err := member.AppsV1().Deployments(ns).Get(ctx, "nginx", metav1.GetOptions{})
					return apierrors.IsNotFound(err)
				}).WithTimeout(60*time.Second).Should(BeTrue(), "deleting the template removes the member Deployments")
			}
		})
		createSeedNginx(ctx, hub, flotilla, ns, m1.Name, m2.Name)

		eventually(ctx, func(g Gomega) {
			g.Expect(runningPods(ctx, g, member1, ns)).To(Equal(1), "pods on "+m1.Name)
			g.Expect(runningPods(ctx, g, member2, ns)).To(Equal(2), "pods on "+m2.Name)
		}).WithTimeout(90 * time.Second).Should(Succeed())

		eventually(ctx, func(g Gomega) {
			got, err := flotilla.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "nginx", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, workv1alpha1.BindingConditionScheduled)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, workv1alpha1.BindingConditionFullyApplied)).To(BeTrue())
			g.Expect(got.Status.WorkloadStatus).NotTo(BeNil())
			var st map[string]any
			g.Expect(json.Unmarshal(got.Status.WorkloadStatus.Raw, &st)).To(Succeed())
			g.Expect(fmt.Sprint(st["availableReplicas"])).To(Equal("3"), "template workload status %v", st)
			g.Expect(fmt.Sprint(st["readyReplicas"])).To(Equal("3"))
			g.Expect(got.Status.Clusters).To(ConsistOf(
				workv1alpha1.TargetCluster{Name: m1.Name, Replicas: 1}, workv1alpha1.TargetCluster{Name: m2.Name, Replicas: 2}))
		}).WithTimeout(90 * time.Second).Should(Succeed())
	})
	It("schedules a manifest the member rejects and shows the rejection on the binding and the template", func(ctx SpecContext) {
		cfg, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		flotilla, err := flotillaclient.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		hub, err := env.Kube(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		m1 := env.Members[0]
		const ns = "e2e-rejected"
		_, err = hub.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// The selector does not match the pod template's labels: valid JSON,
		// a valid template, and a Deployment every apiserver refuses.
		manifest, err := json.Marshal(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "broken"},
			"spec": map[string]any{"replicas": 1, "selector": map[string]any{"matchLabels": map[string]any{"app": "one"}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "other"}},
					"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}}}}})
		Expect(err).NotTo(HaveOccurred())
		policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: ns},
			Spec: policyv1alpha1.PropagationSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}},
				Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{m1.Name}}},
			}}
		_, err = flotilla.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = flotilla.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, &workv1alpha1.ResourceTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: ns},
			Spec:       workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: manifest}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) {
			_ = flotilla.WorkV1alpha1().ResourceTemplates(ns).Delete(ctx, "broken", metav1.DeleteOptions{})
			Eventually(ctx, func() bool {
				_, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "broken-deployment", metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}).WithTimeout(60*time.Second).Should(BeTrue(), "deleting the template removes the binding")
			_ = flotilla.PolicyV1alpha1().PropagationPolicies(ns).Delete(ctx, "broken", metav1.DeleteOptions{})
			_ = hub.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		})

		eventually(ctx, func(g Gomega) {
			rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "broken-deployment", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(meta.IsStatusConditionTrue(rb.Status.Conditions, workv1alpha1.BindingConditionScheduled)).To(BeTrue())
			g.Expect(rb.Status.AggregatedStatus).To(HaveLen(1))
			item := rb.Status.AggregatedStatus[0]
			g.Expect(item.ClusterName).To(Equal(m1.Name))
			g.Expect(item.Applied).To(BeFalse())
			g.Expect(item.AppliedMessage).To(ContainSubstring("selector"))
			applied := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionFullyApplied)
			g.Expect(applied).NotTo(BeNil())
			g.Expect(applied.Status).To(Equal(metav1.ConditionFalse))

			tmpl, err := flotilla.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "broken", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tmpl.Status.AggregatedStatus).To(HaveLen(1))
			g.Expect(tmpl.Status.AggregatedStatus[0].AppliedMessage).To(ContainSubstring("selector"))
			g.Expect(meta.IsStatusConditionFalse(tmpl.Status.Conditions, workv1alpha1.BindingConditionFullyApplied)).To(BeTrue())
		}).WithTimeout(60 * time.Second).Should(Succeed())
	})
})
