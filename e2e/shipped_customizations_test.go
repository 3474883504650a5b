package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-io/flotilla/e2e/framework"
	flotillaapp "github.com/flotilla-io/flotilla/kubectl-flotilla/app"
	"github.com/flotilla-io/flotilla/manifests/interpreters"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Shipped customizations (issue 33 item 6): the customizations of
// manifests/interpreters, applied on the hub as docs/install.md says, make
// Argo Rollouts' Rollout and the Flink operator's FlinkDeployment fail over
// like built-in workloads. The members run the projects' real CRDs
// (test/crds), so every field a rule reads or writes is one the real API
// keeps; no Argo Rollouts or Flink controller runs on the kwok members, so
// the specs play the controllers' part and write the objects' status
// themselves, as those controllers would.
var (
	rolloutGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}
	flinkGVR   = schema.GroupVersionResource{Group: "flink.apache.org", Version: "v1beta1", Resource: "flinkdeployments"}
)

var _ = Describe("Shipped customizations", func() {
	// A Divided Rollout, 3 replicas member1:member2 = 1:2. The replicas are
	// read (spec.replicas) and revised (/spec/replicas) through the
	// customization; member1's copy turns Degraded (the shipped health
	// rule: Unhealthy), application failover moves its replica to member2,
	// whose copy is revised to 3. Argo Rollouts' controller is played by a
	// loop that writes each member's Rollout status from its spec (all
	// replicas updated and available, phase Healthy, or the phase the spec
	// sets): nothing else reconciles a Rollout on kwok. (A cluster outage
	// moves a custom kind's replicas the same way: the seed's failover
	// specs cover it; stopping a member here would add a minute of Lease
	// grace and recovery to the suite.)
	It("fails a Divided Argo Rollout over when its copy degrades: its replicas are revised on the survivor, and where shows its health", func(ctx SpecContext) {
		s := newShippedSpec(ctx)
		s.installCRDOnMembers(ctx, "argo-rollouts/rollout-crd.yaml", "rollouts.argoproj.io")
		s.applyShippedCustomizations(ctx)
		m1, m2 := env.Members[0], env.Members[1]
		const ns, name = "e2e-shipped-rollout", "web"
		// The shipped rule holds a copy whose generation is not observed
		// yet Unhealthy (as the built-in Deployment rule does): while the
		// played controller catches up with a revision on a loaded
		// machine. tolerationSeconds is what absorbs that, as in
		// production; 2 s did not on CI.
		toleration, grace := int32(10), int32(60)
		s.createTemplate(ctx, ns, name, rolloutManifest(name), policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: name}},
			Placement:         weightedPlacement(map[string]int64{m1.Name: 1, m2.Name: 2}),
			Failover: &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{
				DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: &toleration},
				PurgeMode:          policyv1alpha1.PurgeModeGracefully,
				GracePeriodSeconds: &grace,
			}},
		})
		phases := map[string]*atomic.Value{}
		for _, m := range []framework.Member{m1, m2} {
			phases[m.Name] = &atomic.Value{}
			phases[m.Name].Store("Healthy")
			go playRolloutController(s.loops, s.dynamic(m), ns, phases[m.Name])
		}
		binding := workobjects.BindingName("Rollout", name)

		// Divided through the customization's replicas; each copy revised;
		// both Healthy by the customization's health rule.
		eventually(ctx, func(g Gomega) {
			rb := s.binding(ctx, g, ns, binding)
			g.Expect(rb.Spec.Replicas).To(Equal(int32(3)), "replicas read through replicaResource")
			g.Expect(rb.Spec.Clusters).To(Equal([]workv1alpha1.TargetCluster{{Name: m1.Name, Replicas: 1}, {Name: m2.Name, Replicas: 2}}))
			g.Expect(specReplicas(ctx, g, s.dynamic(m1), rolloutGVR, ns, name)).To(Equal(int64(1)), "member1's copy revised")
			g.Expect(specReplicas(ctx, g, s.dynamic(m2), rolloutGVR, ns, name)).To(Equal(int64(2)), "member2's copy revised")
			g.Expect(healthOf(rb)).To(Equal(map[string]workv1alpha1.ResourceHealth{
				m1.Name: workv1alpha1.ResourceHealthy, m2.Name: workv1alpha1.ResourceHealthy}))
			st := s.workloadStatus(ctx, g, ns, name)
			g.Expect(st).To(HaveKeyWithValue("availableReplicas", BeNumerically("==", 3)), "statusAggregation sums the copies")
			g.Expect(st).To(HaveKeyWithValue("phase", "Healthy"))
		}).WithTimeout(90 * time.Second).Should(Succeed())

		out := s.where(ctx, ns, name)
		Expect(out).To(MatchRegexp(`(?m)^%s\s+yes\s+1\s.*\sHealthy\s`, m1.Name), out)
		Expect(out).To(MatchRegexp(`(?m)^%s\s+yes\s+2\s.*\sHealthy\s`, m2.Name), out)

		// member1's copy degrades: Unhealthy by the customization, and
		// after tolerationSeconds its replica moves to member2.
		phases[m1.Name].Store("Degraded")
		Eventually(ctx, func(g Gomega) {
			rb := s.binding(ctx, g, ns, binding)
			g.Expect(rb.Spec.Clusters).To(Equal([]workv1alpha1.TargetCluster{{Name: m2.Name, Replicas: 3}}))
			g.Expect(rb.Spec.EvictionHistory).To(ContainElement(And(
				HaveField("ClusterName", m1.Name), HaveField("Reason", workv1alpha1.EvictionReasonApplicationFailure))))
			g.Expect(specReplicas(ctx, g, s.dynamic(m2), rolloutGVR, ns, name)).To(Equal(int64(3)), "member2's copy revised to all 3")
			g.Expect(healthOf(rb)).To(HaveKeyWithValue(m2.Name, workv1alpha1.ResourceHealthy))
		}).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		// Once member2's 3 are Healthy the graceful eviction removes the
		// degraded copy.
		eventually(ctx, func(g Gomega) {
			g.Expect(s.binding(ctx, g, ns, binding).Spec.GracefulEvictionTasks).To(BeEmpty())
			_, err := s.dynamic(m1).Resource(rolloutGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the degraded copy is removed once the new placement is healthy")
		}).Should(Succeed())
	})

	// A custom kind rolls by stage too, judged by its customization: a
	// Duplicated Argo Rollout on member1 (canary) and member2; a change
	// whose copy turns Degraded (the shipped health rule: Unhealthy) halts
	// in the canary and rolls back there, and member2's copy never
	// changes.
	It("rolls an Argo Rollout out by stage: a change its customization judges Unhealthy halts in the canary and rolls back", func(ctx SpecContext) {
		s := newShippedSpec(ctx)
		s.installCRDOnMembers(ctx, "argo-rollouts/rollout-crd.yaml", "rollouts.argoproj.io")
		s.applyShippedCustomizations(ctx)
		m1, m2 := env.Members[0], env.Members[1]
		const ns, name, ring = "e2e-shipped-rollout-staged", "web", "e2e.flotilla.io/ring"
		label := func(ctx context.Context, value any) {
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{ring: value}}})
			_, err := s.flotilla.ClusterV1alpha1().Clusters().Patch(ctx, m1.Name, types.MergePatchType, patch, metav1.PatchOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		label(ctx, "canary")
		DeferCleanup(func(ctx context.Context) { label(ctx, nil) })
		s.createTemplate(ctx, ns, name, rolloutManifest(name), policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: name}},
			Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{m1.Name, m2.Name}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}},
			RolloutStrategy: &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeProgressivePerGroup,
				ProgressivePerGroup: &policyv1alpha1.RolloutProgressivePerGroup{
					RolloutConfig: policyv1alpha1.RolloutConfig{ProgressDeadline: &metav1.Duration{Duration: 10 * time.Second}},
					DecisionGroups: []policyv1alpha1.RolloutGroup{{GroupName: "canary", GroupClusterSelector: policyv1alpha1.GroupClusterSelector{
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{ring: "canary"}}}}}},
				Rollback: &policyv1alpha1.RolloutRollback{}},
		})
		image := func(ro *unstructured.Unstructured) string {
			containers, _, _ := unstructured.NestedSlice(ro.Object, "spec", "template", "spec", "containers")
			if len(containers) == 0 {
				return ""
			}
			img, _, _ := unstructured.NestedString(containers[0].(map[string]any), "image")
			return img
		}
		for _, m := range []framework.Member{m1, m2} {
			go playRolloutControllerBy(s.loops, s.dynamic(m), ns, func(ro *unstructured.Unstructured) string {
				if strings.Contains(image(ro), "bad") {
					return "Degraded"
				}
				return "Healthy"
			})
		}
		binding := workobjects.BindingName("Rollout", name)
		status := func(g Gomega) *workv1alpha1.RolloutStatus {
			rb := s.binding(ctx, g, ns, binding)
			g.Expect(rb.Status.Rollout).NotTo(BeNil())
			return rb.Status.Rollout
		}
		eventually(ctx, func(g Gomega) {
			r := status(g)
			g.Expect(r.Revision).To(Equal(int64(1)))
			g.Expect(r.Phase).To(Equal(workv1alpha1.RolloutPhaseComplete), r.Message)
		}).WithTimeout(2 * time.Minute).Should(Succeed())

		eventually(ctx, func() error {
			cur, err := s.flotilla.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			bad := rolloutManifest(name)
			containers, _, _ := unstructured.NestedSlice(bad, "spec", "template", "spec", "containers")
			containers[0].(map[string]any)["image"] = "nginx:bad"
			if err := unstructured.SetNestedSlice(bad, containers, "spec", "template", "spec", "containers"); err != nil {
				return err
			}
			if cur.Spec.Manifest.Raw, err = json.Marshal(bad); err != nil {
				return err
			}
			_, err = s.flotilla.WorkV1alpha1().ResourceTemplates(ns).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}).Should(Succeed())
		Eventually(ctx, func(g Gomega) {
			ro, err := s.dynamic(m2).Resource(rolloutGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(image(ro)).To(Equal("nginx"), "member2 received the halted revision")
			r := status(g)
			g.Expect(r.Revision).To(Equal(int64(2)))
			g.Expect(r.Phase).To(Equal(workv1alpha1.RolloutPhaseRolledBack), r.Message)
		}).WithTimeout(2 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
		eventually(ctx, func(g Gomega) {
			ro, err := s.dynamic(m1).Resource(rolloutGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(image(ro)).To(Equal("nginx"), "the canary is back on revision 1")
		}).Should(Succeed())
	})

	// A FlinkDeployment, one copy at a time on member1 or member2. The
	// Flink operator is played by the spec: it reports the job RUNNING and
	// STABLE with a checkpoint and a savepoint, then FAILED. The shipped
	// health rule makes the copy Unhealthy, application failover moves it
	// after tolerationSeconds, and the replacement carries the job ID, the
	// last checkpoint's time and the last savepoint's location, read by the
	// policy's statePreservation from the status the customization
	// reflected.
	It("fails a FlinkDeployment whose job reports FAILED over by application failover, carrying its checkpoint, and where shows it Unhealthy", func(ctx SpecContext) {
		s := newShippedSpec(ctx)
		s.installCRDOnMembers(ctx, "flink-kubernetes-operator/flinkdeployments.flink.apache.org-v1.yml", "flinkdeployments.flink.apache.org")
		s.applyShippedCustomizations(ctx)
		m1, m2 := env.Members[0], env.Members[1]
		const ns, name = "e2e-shipped-flink", "wordcount"
		toleration, grace := int32(5), int32(120)
		s.createTemplate(ctx, ns, name, flinkManifest(name), policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "flink.apache.org/v1beta1", Kind: "FlinkDeployment", Name: name}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity:   &policyv1alpha1.ClusterAffinity{ClusterNames: []string{m1.Name, m2.Name}},
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 1, MaxGroups: 1}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated},
			},
			Failover: &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{
				DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: &toleration},
				PreConditions:      &policyv1alpha1.PreConditions{HealthyState: policyv1alpha1.HealthyStateHealthy},
				PurgeMode:          policyv1alpha1.PurgeModeGracefully,
				GracePeriodSeconds: &grace,
				StatePreservation: &policyv1alpha1.StatePreservation{Rules: []policyv1alpha1.StatePreservationRule{
					{AliasLabelName: "flink.apache.org/job-id", JSONPath: "{.jobStatus.jobId}", ValuePattern: "[0-9a-f]{32}"},
					{AliasLabelName: "flink.apache.org/last-checkpoint-timestamp", JSONPath: "{.jobStatus.checkpointInfo.lastCheckpoint.timeStamp}"},
					{AliasLabelName: "flink.apache.org/last-savepoint", JSONPath: "{.jobStatus.savepointInfo.lastSavepoint.location}",
						ValuePattern: "s3://flink/savepoints/wordcount/savepoint-[0-9a-f-]+"},
				}},
			}},
		})
		binding := workobjects.BindingName("FlinkDeployment", name)

		// Scheduled to one of the two; no operator has reported yet, so the
		// copy is Unknown (not Healthy, as a kind without a customization
		// used to be).
		var first, second framework.Member
		eventually(ctx, func(g Gomega) {
			rb := s.binding(ctx, g, ns, binding)
			g.Expect(rb.Spec.Clusters).To(HaveLen(1))
			g.Expect(healthOf(rb)).To(HaveKeyWithValue(rb.Spec.Clusters[0].Name, workv1alpha1.ResourceUnknown))
			first = env.Members[memberIndex(rb.Spec.Clusters[0].Name)]
		}).Should(Succeed())
		second = m2
		if first.Name == m2.Name {
			second = m1
		}

		// The job runs, with a checkpoint and a savepoint: Healthy.
		const jobID = "6b1e0d8b3f1c4d5e9a7b2c3d4e5f6a7b"
		const savepoint = "s3://flink/savepoints/wordcount/savepoint-6b1e0d-4f2a9c1e7b3d"
		const checkpointTime = int64(1795766400123)
		setFlinkStatus(ctx, s.dynamic(first), ns, name, "RUNNING", "STABLE", jobID, checkpointTime, savepoint)
		eventually(ctx, func(g Gomega) {
			rb := s.binding(ctx, g, ns, binding)
			g.Expect(healthOf(rb)).To(HaveKeyWithValue(first.Name, workv1alpha1.ResourceHealthy))
			g.Expect(s.workloadStatus(ctx, g, ns, name)).To(HaveKeyWithValue("jobStatus", HaveKeyWithValue("state", "RUNNING")))
		}).Should(Succeed())

		// The job fails there (Flink's restart strategy gave up).
		setFlinkStatus(ctx, s.dynamic(first), ns, name, "FAILED", "STABLE", jobID, checkpointTime, savepoint)
		eventually(ctx, func(g Gomega) {
			g.Expect(healthOf(s.binding(ctx, g, ns, binding))).To(HaveKeyWithValue(first.Name, workv1alpha1.ResourceUnhealthy))
		}).Should(Succeed())
		out := s.where(ctx, ns, name)
		// (evicting once tolerationSeconds has passed and the graceful
		// eviction keeps the copy)
		Expect(out).To(MatchRegexp(`(?m)^%s\s+(yes|evicting)\s.*\sUnhealthy\s`, first.Name), out)

		// After tolerationSeconds: moved to the other cluster, whose copy
		// carries the state.
		Eventually(ctx, func(g Gomega) {
			rb := s.binding(ctx, g, ns, binding)
			g.Expect(rb.Spec.Clusters).To(Equal([]workv1alpha1.TargetCluster{{Name: second.Name}}))
			g.Expect(rb.Spec.EvictionHistory).To(ContainElement(And(
				HaveField("ClusterName", first.Name), HaveField("Reason", workv1alpha1.EvictionReasonApplicationFailure))))
			copy, err := s.dynamic(second).Resource(flinkGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(copy.GetLabels()).To(HaveKeyWithValue("flink.apache.org/job-id", jobID))
			g.Expect(copy.GetLabels()).To(HaveKeyWithValue("flink.apache.org/last-checkpoint-timestamp", strconv.FormatInt(checkpointTime, 10)))
			// Not a valid label value: carried as an annotation.
			g.Expect(copy.GetAnnotations()).To(HaveKeyWithValue("flink.apache.org/last-savepoint", savepoint))
		}).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())

		// The replacement's job starts (from the savepoint, on a real
		// fleet): Healthy, and the graceful eviction removes the failed copy.
		setFlinkStatus(ctx, s.dynamic(second), ns, name, "RUNNING", "STABLE", jobID, checkpointTime, savepoint)
		eventually(ctx, func(g Gomega) {
			rb := s.binding(ctx, g, ns, binding)
			g.Expect(healthOf(rb)).To(HaveKeyWithValue(second.Name, workv1alpha1.ResourceHealthy))
			g.Expect(rb.Spec.GracefulEvictionTasks).To(BeEmpty())
			_, err := s.dynamic(first).Resource(flinkGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the failed copy is removed once the replacement is healthy")
		}).Should(Succeed())
		out = s.where(ctx, ns, name)
		Expect(out).To(MatchRegexp(`(?m)^%s\s+yes\s.*\sHealthy\s`, second.Name), out)
	})
})

// shippedSpec holds one spec's clients and background loops.
type shippedSpec struct {
	root     string
	flotilla flotillaclient.Interface
	hub      kubernetes.Interface
	dyn      map[string]dynamic.Interface
	loops    context.Context
}

func newShippedSpec(ctx context.Context) *shippedSpec {
	GinkgoHelper()
	root, err := testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	cfg, err := env.RestConfig(env.HubContext)
	Expect(err).NotTo(HaveOccurred())
	s := &shippedSpec{root: root, dyn: map[string]dynamic.Interface{}}
	s.flotilla, err = flotillaclient.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	s.hub, err = env.Kube(env.HubContext)
	Expect(err).NotTo(HaveOccurred())
	for _, m := range env.Members {
		mcfg, err := env.RestConfig(m.Context)
		Expect(err).NotTo(HaveOccurred())
		s.dyn[m.Name], err = dynamic.NewForConfig(mcfg)
		Expect(err).NotTo(HaveOccurred())
	}
	loops, stop := context.WithCancel(context.Background())
	s.loops = loops
	DeferCleanup(stop)
	return s
}

func (s *shippedSpec) dynamic(m framework.Member) dynamic.Interface { return s.dyn[m.Name] }

// installCRDOnMembers creates the vendored CRD test/crds/file on every
// member (kept for later specs: it is the same real API each time) and
// waits until each serves it.
func (s *shippedSpec) installCRDOnMembers(ctx context.Context, file, name string) {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(s.root, "test", "crds", file))
	Expect(err).NotTo(HaveOccurred())
	crd := &apiextensionsv1.CustomResourceDefinition{}
	Expect(yaml.Unmarshal(data, crd)).To(Succeed())
	Expect(crd.Name).To(Equal(name))
	for _, m := range env.Members {
		cfg, err := env.RestConfig(m.Context)
		Expect(err).NotTo(HaveOccurred())
		client, err := apiextensionsclient.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		_, err = client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd.DeepCopy(), metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred(), "creating CRD %s on %s", name, m.Name)
		}
		eventually(ctx, func(g Gomega) {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(established(got)).To(BeTrue(), "%s established on %s", name, m.Name)
		}).Should(Succeed())
	}
	// The scheduler places a kind only on clusters whose agents report
	// serving it: wait until every member's Cluster lists it, or a template
	// created now lands on whichever member reported first.
	for _, m := range env.Members {
		eventually(ctx, func(g Gomega) {
			c, err := s.flotilla.ClusterV1alpha1().Clusters().Get(ctx, m.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			served := false
			for _, e := range c.Status.APIEnablements {
				for _, v := range crd.Spec.Versions {
					if e.GroupVersion == crd.Spec.Group+"/"+v.Name && slices.ContainsFunc(e.Resources, func(r clusterv1alpha1.APIResource) bool {
						return r.Kind == crd.Spec.Names.Kind
					}) {
						served = true
					}
				}
			}
			g.Expect(served).To(BeTrue(), "%s reports serving %s", m.Name, crd.Spec.Names.Kind)
		}).WithTimeout(90 * time.Second).Should(Succeed())
	}
}

// applyShippedCustomizations applies manifests/interpreters on the hub as
// docs/install.md says (through the hub's admission webhook, which compiles
// each), waits until the hub reports each Compiled, and removes them when
// the spec ends.
func (s *shippedSpec) applyShippedCustomizations(ctx context.Context) {
	GinkgoHelper()
	kubectl := filepath.Join(s.root, "bin", "kubectl")
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", env.Kubeconfig, "--context", env.HubContext,
		"apply", "--server-side", "-k", filepath.Join(s.root, "manifests", "interpreters"))
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "kubectl apply -k manifests/interpreters:\n%s", out)
	rics, err := interpreters.Load()
	Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, ric := range rics {
		names = append(names, ric.Name)
	}
	Expect(names).To(ContainElements("rollouts.v1alpha1.argoproj.io", "flinkdeployments.v1beta1.flink.apache.org"))
	DeferCleanup(func(ctx context.Context) {
		for _, n := range names {
			_ = s.flotilla.ConfigV1alpha1().ResourceInterpreterCustomizations().Delete(ctx, n, metav1.DeleteOptions{})
		}
	})
	eventually(ctx, func(g Gomega) {
		for _, n := range names {
			ric, err := s.flotilla.ConfigV1alpha1().ResourceInterpreterCustomizations().Get(ctx, n, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(meta.IsStatusConditionTrue(ric.Status.Conditions, configv1alpha1.ConditionCompiled)).To(BeTrue(), "%s Compiled", n)
		}
	}).Should(Succeed())
}

// createTemplate creates namespace ns on the hub with a ResourceTemplate
// of manifest and a PropagationPolicy, and registers their removal.
func (s *shippedSpec) createTemplate(ctx context.Context, ns, name string, manifest map[string]any, spec policyv1alpha1.PropagationSpec) {
	GinkgoHelper()
	_, err := s.hub.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	raw, err := json.Marshal(manifest)
	Expect(err).NotTo(HaveOccurred())
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	_, err = s.flotilla.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}}}
	_, err = s.flotilla.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	binding := workobjects.BindingName(manifest["kind"].(string), name)
	DeferCleanup(func(ctx context.Context) {
		_ = s.flotilla.WorkV1alpha1().ResourceTemplates(ns).Delete(ctx, name, metav1.DeleteOptions{})
		Eventually(ctx, func() bool {
			_, err := s.flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(2*time.Minute).Should(BeTrue(), "deleting the template removes its binding")
		_ = s.flotilla.PolicyV1alpha1().PropagationPolicies(ns).Delete(ctx, name, metav1.DeleteOptions{})
		_ = s.hub.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
}

func (s *shippedSpec) binding(ctx context.Context, g Gomega, ns, name string) *workv1alpha1.ResourceBinding {
	rb, err := s.flotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return rb
}

// workloadStatus is the template's aggregated status (statusAggregation).
func (s *shippedSpec) workloadStatus(ctx context.Context, g Gomega, ns, name string) map[string]any {
	tmpl, err := s.flotilla.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tmpl.Status.WorkloadStatus).NotTo(BeNil(), "the template's workload status")
	var st map[string]any
	g.Expect(json.Unmarshal(tmpl.Status.WorkloadStatus.Raw, &st)).To(Succeed())
	return st
}

// where runs `kubectl flotilla where -n ns name` against the hub, in
// process, and returns its output.
func (s *shippedSpec) where(ctx context.Context, ns, name string) string {
	GinkgoHelper()
	var out, errOut bytes.Buffer
	cmd := flotillaapp.NewCommand(&out, &errOut)
	cmd.SetArgs([]string{"--kubeconfig", env.Kubeconfig, "--context", env.HubContext, "where", "-n", ns, name})
	Expect(cmd.ExecuteContext(ctx)).To(Succeed(), errOut.String())
	GinkgoWriter.Printf("kubectl flotilla where -n %s %s:\n%s\n", ns, name, out.String())
	return out.String()
}

// healthOf is the health each cluster's copy reported, by cluster.
func healthOf(rb *workv1alpha1.ResourceBinding) map[string]workv1alpha1.ResourceHealth {
	out := map[string]workv1alpha1.ResourceHealth{}
	for _, item := range rb.Status.AggregatedStatus {
		out[item.ClusterName] = item.Health
	}
	return out
}

func specReplicas(ctx context.Context, g Gomega, member dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) int64 {
	obj, err := member.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	n, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	return n
}

// playRolloutController writes every Rollout of ns on member a status as
// Argo Rollouts' controller would for a finished rollout of its current
// spec, until ctx ends: all spec.replicas updated, ready and available,
// phase Healthy, the generation observed (a string, as Argo writes it).
func playRolloutController(ctx context.Context, member dynamic.Interface, ns string, phase *atomic.Value) {
	playRolloutControllerBy(ctx, member, ns, func(*unstructured.Unstructured) string { return phase.Load().(string) })
}

// playRolloutControllerBy is playRolloutController with each Rollout's
// phase chosen from the Rollout itself.
func playRolloutControllerBy(ctx context.Context, member dynamic.Interface, ns string, phaseOf func(*unstructured.Unstructured) string) {
	defer GinkgoRecover()
	for ctx.Err() == nil {
		list, err := member.Resource(rolloutGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range list.Items {
				ro := &list.Items[i]
				n, found, _ := unstructured.NestedInt64(ro.Object, "spec", "replicas")
				if !found {
					n = 1
				}
				status := map[string]any{"replicas": n, "updatedReplicas": n, "readyReplicas": n, "availableReplicas": n,
					"phase": phaseOf(ro), "observedGeneration": strconv.FormatInt(ro.GetGeneration(), 10),
					"currentPodHash": "6f9c7d8b5", "stableRS": "6f9c7d8b5"}
				if old, _, _ := unstructured.NestedMap(ro.Object, "status"); equalJSON(old, status) {
					continue
				}
				ro.Object["status"] = status
				_, _ = member.Resource(rolloutGVR).Namespace(ns).UpdateStatus(ctx, ro, metav1.UpdateOptions{})
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// setFlinkStatus writes the status the Flink operator would report for the
// job: its state, the deployment's lifecycle, the last checkpoint's time
// and the last savepoint.
func setFlinkStatus(ctx context.Context, member dynamic.Interface, ns, name, jobState, lifecycle, jobID string, checkpointTime int64, savepoint string) {
	GinkgoHelper()
	eventually(ctx, func(g Gomega) {
		obj, err := member.Resource(flinkGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		obj.Object["status"] = map[string]any{
			"lifecycleState":             lifecycle,
			"jobManagerDeploymentStatus": "READY",
			"observedGeneration":         obj.GetGeneration(),
			"reconciliationStatus":       map[string]any{"state": "DEPLOYED", "lastReconciledSpec": `{"spec":{"job":{"parallelism":2}}}`},
			"jobStatus": map[string]any{
				"jobId": jobID, "jobName": name, "state": jobState,
				"checkpointInfo": map[string]any{"lastCheckpoint": map[string]any{"timeStamp": checkpointTime, "triggerType": "PERIODIC", "formatType": "FULL"}},
				"savepointInfo": map[string]any{"lastSavepoint": map[string]any{"location": savepoint, "timeStamp": checkpointTime - 60000,
					"triggerType": "MANUAL", "formatType": "CANONICAL"}},
			},
		}
		_, err = member.Resource(flinkGVR).Namespace(ns).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}).Should(Succeed())
}

func equalJSON(a, b map[string]any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// rolloutManifest is a canary Rollout of 3 replicas with a pod template
// (its containers' requests become the replica requirements).
func rolloutManifest(name string) map[string]any {
	labels := map[string]any{"app": name}
	return map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"name": name, "labels": labels},
		"spec": map[string]any{"replicas": 3, "selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx",
					"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "64Mi"}}}}}},
			"strategy": map[string]any{"canary": map[string]any{"steps": []any{
				map[string]any{"setWeight": 20}, map[string]any{"pause": map[string]any{"duration": "30s"}}}}}}}
}

// flinkManifest is the stateful-failover example's WordCount job.
func flinkManifest(name string) map[string]any {
	return map[string]any{"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"app": name}},
		"spec": map[string]any{"image": "flink:1.20", "flinkVersion": "v1_20", "serviceAccount": "flink",
			"flinkConfiguration": map[string]any{"taskmanager.numberOfTaskSlots": "2",
				"state.savepoints.dir": "s3://flink/savepoints/wordcount", "state.checkpoints.dir": "s3://flink/checkpoints/wordcount"},
			"jobManager":  map[string]any{"resource": map[string]any{"memory": "2048m", "cpu": 1}},
			"taskManager": map[string]any{"resource": map[string]any{"memory": "2048m", "cpu": 1}},
			"job": map[string]any{"jarURI": "local:///opt/flink/examples/streaming/WordCount.jar", "parallelism": 2,
				"upgradeMode": "last-state"}}}
}
