package e2e

import (
	"context"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

var _ = Describe("Agent Works", func() {
	It("applies a Deployment, Service and ConfigMap, reports the Deployment Healthy with its replicas, and restores it when edited or deleted", func(ctx SpecContext) {
		m := env.Members[0]
		cfg, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		flotilla, err := flotillaclient.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		member, err := env.Kube(m.Context)
		Expect(err).NotTo(HaveOccurred())
		ns := "flotilla-es-" + m.Name
		const appNS = "e2e-works"

		manifests := []map[string]any{
			{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web", "namespace": appNS},
				"spec": map[string]any{"replicas": 3, "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
					"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
						"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx:1.27",
							"resources": map[string]any{"requests": map[string]any{"cpu": "100m"}}}}}}}},
			{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "web", "namespace": appNS},
				"spec": map[string]any{"selector": map[string]any{"app": "web"}, "ports": []any{map[string]any{"port": 80}}}},
			{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "web", "namespace": appNS},
				"data": map[string]any{"greeting": "hello"}},
		}
		// As the hub makes them: with the execution finalizer (the agent
		// applies nothing before it is there, and may only remove it).
		work := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "e2e-web", Namespace: ns, Finalizers: []string{workv1alpha1.ExecutionFinalizer}}}
		for _, obj := range manifests {
			raw, err := json.Marshal(obj)
			Expect(err).NotTo(HaveOccurred())
			work.Spec.Workload.Manifests = append(work.Spec.Workload.Manifests, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
		}
		_, err = flotilla.WorkV1alpha1().Works(ns).Create(ctx, work, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) {
			_ = flotilla.WorkV1alpha1().Works(ns).Delete(ctx, "e2e-web", metav1.DeleteOptions{})
			Eventually(ctx, func() bool {
				_, err := member.AppsV1().Deployments(appNS).Get(ctx, "web", metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}).WithTimeout(60*time.Second).Should(BeTrue(), "deleting the Work removes the Deployment")
			_ = member.CoreV1().Namespaces().Delete(ctx, appNS, metav1.DeleteOptions{})
		})

		eventually(ctx, func(g Gomega) {
			w, err := flotilla.WorkV1alpha1().Works(ns).Get(ctx, "e2e-web", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(meta.IsStatusConditionTrue(w.Status.Conditions, workv1alpha1.WorkConditionApplied)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(w.Status.Conditions, workv1alpha1.WorkConditionAvailable)).To(BeTrue())
			g.Expect(w.Status.ManifestStatuses).To(HaveLen(3))
			deploy := w.Status.ManifestStatuses[0]
			g.Expect(deploy.Identifier.Kind).To(Equal("Deployment"))
			g.Expect(deploy.Health).To(Equal(workv1alpha1.ResourceHealthy))
			g.Expect(deploy.Status).NotTo(BeNil())
			var st map[string]any
			g.Expect(json.Unmarshal(deploy.Status.Raw, &st)).To(Succeed())
			g.Expect(st).To(HaveKeyWithValue("availableReplicas", BeNumerically("==", 3)))
			g.Expect(st).To(HaveKeyWithValue("updatedReplicas", BeNumerically("==", 3)))
		}).Should(Succeed())

		// Edited behind our back: replicas come back to 3.
		scale := []byte(`{"spec":{"replicas":1}}`)
		_, err = member.AppsV1().Deployments(appNS).Patch(ctx, "web", types.MergePatchType, scale, metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		eventually(ctx, func() int32 { return replicasOf(ctx, member, appNS) }).Should(Equal(int32(3)))

		// Deleted behind our back: recreated.
		Expect(member.AppsV1().Deployments(appNS).Delete(ctx, "web", metav1.DeleteOptions{})).To(Succeed())
		eventually(ctx, func(g Gomega) {
			d, err := member.AppsV1().Deployments(appNS).Get(ctx, "web", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.DeletionTimestamp).To(BeNil())
			g.Expect(d.Labels).To(HaveKeyWithValue(workv1alpha1.LabelManaged, "true"))
		}).Should(Succeed())
	})

	It("changes nothing on the member while the hub apiserver is stopped, and catches up when it returns", func(ctx SpecContext) {
		m := env.Members[1]
		cfg, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		flotilla, err := flotillaclient.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		member, err := env.Kube(m.Context)
		Expect(err).NotTo(HaveOccurred())
		ns := "flotilla-es-" + m.Name
		raw, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "e2e-outage", "namespace": "default"}, "data": map[string]any{"k": "v"}})
		Expect(err).NotTo(HaveOccurred())
		_, err = flotilla.WorkV1alpha1().Works(ns).Create(ctx, &workv1alpha1.Work{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-outage", Namespace: ns, Finalizers: []string{workv1alpha1.ExecutionFinalizer}},
			Spec:       workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var before string
		eventually(ctx, func(g Gomega) {
			cm, err := member.CoreV1().ConfigMaps("default").Get(ctx, "e2e-outage", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			before = cm.ResourceVersion
		}).Should(Succeed())

		hub := env.Prefix + "-hub"
		Expect(env.Ctl(ctx, "stop-cluster", hub)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { _ = env.Ctl(ctx, "start-cluster", hub) })
		// Long enough for several failed hub Lease renewals (every 2s with
		// the suite's timings, so 10s; 20s with the defaults' 10s).
		hold := min(20*time.Second, max(10*time.Second, 5*env.Timings.RenewInterval()))
		Consistently(ctx, func(g Gomega) {
			cm, err := member.CoreV1().ConfigMaps("default").Get(ctx, "e2e-outage", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cm.ResourceVersion).To(Equal(before))
			for _, addr := range m.AgentHealth {
				_, err := httpGet(ctx, addr, "/healthz")
				g.Expect(err).NotTo(HaveOccurred(), "agent %s unhealthy while the hub is down", addr)
			}
		}).WithTimeout(hold).WithPolling(time.Second).Should(Succeed())

		Expect(env.Ctl(ctx, "start-cluster", hub)).To(Succeed())
		// The hub rode the outage out (it stops deciding, not running).
		Expect(env.Ctl(ctx, "pid", "hub")).To(Succeed(), "the hub process kept running")
		Expect(flotilla.WorkV1alpha1().Works(ns).Delete(ctx, "e2e-outage", metav1.DeleteOptions{})).To(Succeed())
		eventually(ctx, func() bool {
			_, err := member.CoreV1().ConfigMaps("default").Get(ctx, "e2e-outage", metav1.GetOptions{})
			_, werr := flotilla.WorkV1alpha1().Works(ns).Get(ctx, "e2e-outage", metav1.GetOptions{})
			return apierrors.IsNotFound(err) && apierrors.IsNotFound(werr)
		}).WithTimeout(90*time.Second).Should(BeTrue(), "after the hub returns, the deleted Work is released")
	})
})

func replicasOf(ctx context.Context, kube kubernetes.Interface, ns string) int32 {
	d, err := kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return -1
	}
	return ptr.Deref(d.Spec.Replicas, 1)
}
