package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

// rolloutDeployment is a one-replica Deployment; nodeSelector, when set,
// names a label no node has: its new pod can never be scheduled.
func rolloutDeployment(nodeSelector map[string]string) []byte {
	spec := map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.k8s.io/pause:3.10"}}}
	if nodeSelector != nil {
		spec["nodeSelector"] = nodeSelector
	}
	raw, err := json.Marshal(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "labels": map[string]any{"app": "web"}},
		"spec": map[string]any{"replicas": 1, "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}}, "spec": spec}}})
	Expect(err).NotTo(HaveOccurred())
	return raw
}

// createWeb creates namespace ns on the hub, policy and the web template
// (rolloutDeployment), and registers their removal.
func createWeb(ctx context.Context, flotilla flotillaclient.Interface, hub kubernetes.Interface, ns string, policy *policyv1alpha1.PropagationPolicy) {
	_, err := hub.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	_, err = flotilla.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: rolloutDeployment(nil)}}}}
	_, err = flotilla.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx context.Context) {
		_ = flotilla.WorkV1alpha1().ResourceTemplates(ns).Delete(ctx, "web", metav1.DeleteOptions{})
		Eventually(ctx, func() bool {
			_, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "web-deployment", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(2*time.Minute).Should(BeTrue(), "deleting the template removes its binding")
		_ = flotilla.PolicyV1alpha1().PropagationPolicies(ns).Delete(ctx, "web", metav1.DeleteOptions{})
		_ = hub.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
}

// The scenario on the kwok members: a Duplicated Deployment on
// member1..3, staged member1 (canary) then the rest, with automatic
// rollback; then an edit whose new pods can never be scheduled. The
// rollout halts after member1, member2 and member3 never run the edit,
// and member1 serves the old revision again.
var _ = Describe("Staged rollout", func() {
	It("halts an unschedulable edit after the canary, never reaches the other members, and rolls the canary back", func(ctx SpecContext) {
		cfg, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		flotilla, err := flotillaclient.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		hub, err := env.Kube(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(env.Members)).To(BeNumerically(">=", 3))
		var names []string
		members := map[string]kubernetes.Interface{}
		for _, m := range env.Members[:3] {
			names = append(names, m.Name)
			members[m.Name], err = env.Kube(m.Context)
			Expect(err).NotTo(HaveOccurred())
		}
		canary := names[0]
		const ns, ring = "e2e-rollout", "e2e.flotilla.io/ring"
		const deadline = 15 * time.Second

		label := func(ctx context.Context, value any) {
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{ring: value}}})
			_, err := flotilla.ClusterV1alpha1().Clusters().Patch(ctx, canary, types.MergePatchType, patch, metav1.PatchOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		label(ctx, "canary")
		DeferCleanup(func(ctx context.Context) { label(ctx, nil) })
		policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: policyv1alpha1.PropagationSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
				Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: names},
					ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}},
				RolloutStrategy: &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeProgressivePerGroup,
					ProgressivePerGroup: &policyv1alpha1.RolloutProgressivePerGroup{
						RolloutConfig: policyv1alpha1.RolloutConfig{ProgressDeadline: &metav1.Duration{Duration: deadline}},
						DecisionGroups: []policyv1alpha1.RolloutGroup{{GroupName: "canary", GroupClusterSelector: policyv1alpha1.GroupClusterSelector{
							LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{ring: "canary"}}}}}},
					Rollback: &policyv1alpha1.RolloutRollback{Type: policyv1alpha1.RollbackAll}},
			}}
		createWeb(ctx, flotilla, hub, ns, policy)

		rollout := func(g Gomega) *workv1alpha1.RolloutStatus {
			rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "web-deployment", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rb.Status.Rollout).NotTo(BeNil())
			return rb.Status.Rollout
		}
		Eventually(ctx, func(g Gomega) {
			r := rollout(g)
			g.Expect(r.Revision).To(Equal(int64(1)))
			g.Expect(r.Phase).To(Equal(workv1alpha1.RolloutPhaseComplete), r.Message)
			for _, name := range names {
				d, err := members[name].AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(d.Status.AvailableReplicas).To(Equal(int32(1)), name)
			}
		}).WithTimeout(2 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
		generations := map[string]int64{}
		for _, name := range names[1:] {
			d, err := members[name].AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			generations[name] = d.Generation
		}

		trials := 1
		if v := os.Getenv("FLOTILLA_ROLLOUT_TRIALS"); v != "" {
			trials, err = strconv.Atoi(v)
			Expect(err).NotTo(HaveOccurred())
		}
		var toHalt []time.Duration
		for trial := 0; trial < trials; trial++ {
			bad := int64(2 + 2*trial)
			toHalt = append(toHalt, rolloutTrial(ctx, flotilla, members, names, ns, bad, deadline, generations))
		}
		slices.Sort(toHalt)
		GinkgoWriter.Printf("first Unhealthy report→halt over %d trial(s): p50 %s, max %s (progressDeadline %s)\n",
			len(toHalt), toHalt[len(toHalt)/2].Round(time.Millisecond), toHalt[len(toHalt)-1].Round(time.Millisecond), deadline)
	})
})

// rolloutTrial makes the bad edit (revision bad), waits for the halt and
// the rollback, checks the other members never ran it, restores the good
// template (revision bad+1) and waits for it to complete. It returns the
// time from the canary's first Unhealthy report to the halt.
func rolloutTrial(ctx context.Context, flotilla flotillaclient.Interface, members map[string]kubernetes.Interface, names []string,
	ns string, bad int64, deadline time.Duration, generations map[string]int64) time.Duration {
	canary := names[0]
	setTemplate := func(raw []byte) {
		Eventually(ctx, func() error {
			cur, err := flotilla.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Manifest.Raw = raw
			_, err = flotilla.WorkV1alpha1().ResourceTemplates(ns).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}
	{
		setTemplate(rolloutDeployment(map[string]string{"e2e.flotilla.io/no-such-node": "true"}))
		edited := time.Now()
		var unhealthy, halted time.Time
		Eventually(ctx, func(g Gomega) {
			rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "web-deployment", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			r := rb.Status.Rollout
			g.Expect(r).NotTo(BeNil())
			for _, it := range rb.Status.AggregatedStatus {
				if it.ClusterName == canary && it.Health == workv1alpha1.ResourceUnhealthy && r.Revision == bad && unhealthy.IsZero() {
					unhealthy = time.Now()
				}
			}
			if r.Revision == bad && r.HaltedTime != nil && halted.IsZero() {
				halted = time.Now()
			}
			// Never beyond the canary: checked on every poll.
			for _, name := range names[1:] {
				d, err := members[name].AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
				Expect(err).NotTo(HaveOccurred())
				Expect(d.Spec.Template.Spec.NodeSelector).To(BeEmpty(), name+" received the halted revision")
			}
			g.Expect(r.Revision).To(Equal(bad))
			g.Expect(r.Phase).To(Equal(workv1alpha1.RolloutPhaseRolledBack), r.Message)
		}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		Expect(unhealthy.IsZero()).To(BeFalse(), "the canary was never reported Unhealthy")
		Expect(halted.Sub(unhealthy)).To(BeNumerically(">", 0))
		GinkgoWriter.Printf("edit→canary Unhealthy %s; first Unhealthy report→halt %s (progressDeadline %s, counted from the canary's update)\n",
			unhealthy.Sub(edited).Round(time.Millisecond), halted.Sub(unhealthy).Round(time.Millisecond), deadline)

		// member1 serves the old revision again; the others never changed.
		Eventually(ctx, func(g Gomega) {
			d, err := members[canary].AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Spec.Template.Spec.NodeSelector).To(BeEmpty())
			g.Expect(d.Status.AvailableReplicas).To(Equal(int32(1)))
			g.Expect(d.Status.UpdatedReplicas).To(Equal(int32(1)))
			g.Expect(d.Status.Replicas).To(Equal(int32(1)))
		}).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
		for _, name := range names[1:] {
			d, err := members[name].AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(d.Generation).To(Equal(generations[name]), name+"'s Deployment changed")
		}

		// The good template again: a new revision, which completes.
		setTemplate(rolloutDeployment(nil))
		Eventually(ctx, func(g Gomega) {
			rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "web-deployment", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rb.Status.Rollout).NotTo(BeNil())
			g.Expect(rb.Status.Rollout.Revision).To(Equal(bad + 1))
			g.Expect(rb.Status.Rollout.Phase).To(Equal(workv1alpha1.RolloutPhaseComplete), rb.Status.Rollout.Message)
		}).WithTimeout(2 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
		return halted.Sub(unhealthy)
	}
}

// Analyses on `make up MONITORING=1`: the hub queries the Prometheus
// local-up.sh runs (--rollout-prometheus-address). The query counts the
// stage's clusters that Prometheus scrapes agents of ({{clusters}} is the
// group's clusters), which is 1 whatever restarted lately: other specs
// restart the hub and agents, and `up` of a target just restarted is 0 for a
// scrape interval, which once made a success-conditioned analysis fail. A
// canary analysis that holds lets the first revision through; one whose
// failureCondition holds halts the next revision in the canary.
var _ = Describe("Staged rollout analysis (make up MONITORING=1)", func() {
	BeforeEach(func() {
		if env.Prometheus == "" {
			Skip("this environment runs no Prometheus (hack/local-up.sh with MONITORING=1 does)")
		}
	})

	It("passes a group whose Prometheus analysis succeeds and halts one whose analysis fails", func(ctx SpecContext) {
		cfg, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		flotilla, err := flotillaclient.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		hub, err := env.Kube(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		names := []string{env.Members[0].Name, env.Members[1].Name}
		const ns = "e2e-rollout-analysis"
		analysis := func(success, failure string) *policyv1alpha1.RolloutAnalysis {
			return &policyv1alpha1.RolloutAnalysis{Prometheus: policyv1alpha1.PrometheusAnalysis{Query: `count(count by (cluster) (up{job="flotilla-agent", cluster=~"{{clusters}}"}))`},
				SuccessCondition: success, FailureCondition: failure, Interval: &metav1.Duration{Duration: time.Second}, Count: ptr.To[int32](2)}
		}
		policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: policyv1alpha1.PropagationSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
				Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: names},
					ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}},
				RolloutStrategy: &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeProgressivePerGroup,
					ProgressivePerGroup: &policyv1alpha1.RolloutProgressivePerGroup{
						DecisionGroups: []policyv1alpha1.RolloutGroup{{GroupName: "first", GroupClusterSelector: policyv1alpha1.GroupClusterSelector{
							LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
								{Key: "cluster.flotilla.io/name", Operator: metav1.LabelSelectorOpIn, Values: names[:1]}}}},
							Analysis: analysis("result == 1.0", "result < 1.0")}}}},
			}}
		// The group selects the first member by name: label it so.
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{"cluster.flotilla.io/name": names[0]}}})
		_, err = flotilla.ClusterV1alpha1().Clusters().Patch(ctx, names[0], types.MergePatchType, patch, metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) {
			_, _ = flotilla.ClusterV1alpha1().Clusters().Patch(ctx, names[0], types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"cluster.flotilla.io/name":null}}}`), metav1.PatchOptions{})
		})
		createWeb(ctx, flotilla, hub, ns, policy)
		status := func(g Gomega) *workv1alpha1.RolloutStatus {
			rb, err := flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "web-deployment", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rb.Status.Rollout).NotTo(BeNil())
			return rb.Status.Rollout
		}
		Eventually(ctx, func(g Gomega) {
			r := status(g)
			g.Expect(r.Revision).To(Equal(int64(1)))
			g.Expect(r.Phase).To(Equal(workv1alpha1.RolloutPhaseComplete), "%s %+v", r.Message, r.Analysis)
		}).WithTimeout(2 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())

		// The same query, conditions that say failure: revision 2 halts.
		Eventually(ctx, func() error {
			cur, err := flotilla.PolicyV1alpha1().PropagationPolicies(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.RolloutStrategy.ProgressivePerGroup.DecisionGroups[0].Analysis = analysis("result > 1.0", "result <= 1.0")
			_, err = flotilla.PolicyV1alpha1().PropagationPolicies(ns).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Eventually(ctx, func() error {
			cur, err := flotilla.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Manifest.Raw = bytes.Replace(rolloutDeployment(nil), []byte("pause:3.10"), []byte("pause:3.9"), 1)
			_, err = flotilla.WorkV1alpha1().ResourceTemplates(ns).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Eventually(ctx, func(g Gomega) {
			r := status(g)
			g.Expect(r.Revision).To(Equal(int64(2)))
			g.Expect(r.Phase).To(Equal(workv1alpha1.RolloutPhaseHalted), r.Message)
			g.Expect(r.Reason).To(Equal("AnalysisFailed"))
			g.Expect(r.Analysis).NotTo(BeNil())
			g.Expect(r.Analysis.Message).To(ContainSubstring("result 1"))
		}).WithTimeout(2 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
		member2, err := env.Kube(env.Members[1].Context)
		Expect(err).NotTo(HaveOccurred())
		d, err := member2.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.k8s.io/pause:3.10"), "the second member received the halted revision")
	})
})
