package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"k8s.io/client-go/util/retry"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/hub/app"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/overrides"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

const nginxManifest = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"nginx","labels":{"app":"nginx"}},
"spec":{"replicas":3,"selector":{"matchLabels":{"app":"nginx"}},"template":{"metadata":{"labels":{"app":"nginx"}},
"spec":{"containers":[{"name":"nginx","image":"nginx:1.27","resources":{"requests":{"cpu":"100m"}}}]}}}}`

// The propagation path against a real apiserver, with the whole hub running:
// template + policy → binding → scheduled Works with the right replicas and
// overrides → Work status (written here as the agent would) summed into the
// binding and the template; a policy change reschedules; deleting the
// template removes the binding and its Works.
func TestPropagation(t *testing.T) {
	t.Parallel()
	ctx, fc := startHub(t)

	for _, name := range []string{"member1", "member2", "member3"} {
		c := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"env": "prod"}}}
		created, err := fc.ClusterV1alpha1().Clusters().Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		setClusterReady(t, ctx, fc, created, metav1.ConditionTrue)
	}
	ns := "default"
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(nginxManifest)}}}}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No policy yet: a condition says so, and nothing is bound.
	waitUntil(t, "template reports no matching policy", func() (bool, error) {
		got, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "nginx", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, workobjects.TemplateConditionPropagated)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "NoMatchingPolicy", nil
	})

	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx-propagation", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
					WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
						{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}, Weight: 1},
						{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}, Weight: 2},
					}},
				},
			},
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	override := &policyv1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx-image", Namespace: ns},
		Spec: policyv1alpha1.OverrideSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			OverrideRules: []policyv1alpha1.RuleWithCluster{{
				TargetCluster: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}},
				Overriders: policyv1alpha1.Overriders{ImageOverrider: []policyv1alpha1.ImageOverrider{
					{Component: policyv1alpha1.Registry, Operator: policyv1alpha1.OverriderOpAdd, Value: "registry.example.com"}}},
			}},
		}}
	if _, err := fc.PolicyV1alpha1().OverridePolicies(ns).Create(ctx, override, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	binding := "nginx-deployment"
	waitReplicas(t, fc, ns, binding, map[string]int32{"member1": 1, "member2": 2})
	rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rb.Spec.Replicas != 3 || rb.Spec.ReplicaRequirements == nil || rb.Spec.ReplicaRequirements.ResourceRequest.Cpu().MilliValue() != 100 {
		t.Errorf("binding replicas %d, requirements %+v; want 3 replicas of 100m CPU", rb.Spec.Replicas, rb.Spec.ReplicaRequirements)
	}
	if ref := metav1.GetControllerOf(rb); ref == nil || ref.Kind != "ResourceTemplate" || ref.Name != "nginx" {
		t.Errorf("binding owner = %+v, want the template", ref)
	}
	if rb.Labels[workobjects.LabelPropagationPolicyName] != "nginx-propagation" {
		t.Errorf("binding labels %v lack the policy", rb.Labels)
	}

	// The Works carry each cluster's share and member2's image override.
	// The OverridePolicy may reach the hub's cache after the first render,
	// which the policy change then redoes: wait for both.
	work1 := waitWork(t, fc, "member1", ns, binding, func(obj *unstructured.Unstructured) bool { return replicasOf(obj) == 1 })
	work2 := waitWork(t, fc, "member2", ns, binding, func(obj *unstructured.Unstructured) bool {
		return replicasOf(obj) == 2 && imageOf(obj) == "registry.example.com/nginx:1.27"
	})
	if img := imageOf(manifestOf(t, work1)); img != "nginx:1.27" {
		t.Errorf("member1 image = %q, want nginx:1.27 (no override there)", img)
	}
	if a := work2.Annotations[overrides.AnnotationAppliedOverrides]; !strings.Contains(a, "nginx-image") {
		t.Errorf("member2 Work's applied-overrides annotation = %q, want the policy named", a)
	}
	if !slices.Contains(work1.Finalizers, workv1alpha1.ExecutionFinalizer) {
		t.Errorf("Work finalizers = %v, want %s", work1.Finalizers, workv1alpha1.ExecutionFinalizer)
	}
	// A Work without the finalizer (made by an older hub, or stripped by
	// hand) gets it back: the agent applies only Works that carry it.
	if _, err := fc.WorkV1alpha1().Works(work1.Namespace).Patch(ctx, work1.Name, types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the hub puts the execution finalizer back", func() (bool, error) {
		w, err := fc.WorkV1alpha1().Works(work1.Namespace).Get(ctx, work1.Name, metav1.GetOptions{})
		return err == nil && slices.Contains(w.Finalizers, workv1alpha1.ExecutionFinalizer), err
	})
	work1 = waitWork(t, fc, "member1", ns, binding, func(obj *unstructured.Unstructured) bool { return replicasOf(obj) == 1 })

	// The agents report; the binding and the template sum it up: 3/3.
	reportApplied(t, fc, work1, 1)
	reportApplied(t, fc, work2, 2)
	waitUntil(t, "template shows 3/3 available and FullyApplied", func() (bool, error) {
		got, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "nginx", metav1.GetOptions{})
		if err != nil || got.Status.WorkloadStatus == nil {
			return false, err
		}
		var st map[string]any
		if err := json.Unmarshal(got.Status.WorkloadStatus.Raw, &st); err != nil {
			return false, err
		}
		return fmt.Sprint(st["availableReplicas"]) == "3" && fmt.Sprint(st["readyReplicas"]) == "3" &&
			meta.IsStatusConditionTrue(got.Status.Conditions, workv1alpha1.BindingConditionFullyApplied) &&
			len(got.Status.Clusters) == 2, nil
	})

	// A policy change reschedules: weights 2:1.
	waitUntil(t, "policy updated", func() (bool, error) {
		p, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Get(ctx, policy.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		p.Spec.Placement.ReplicaScheduling.WeightPreference.StaticWeightList[0].Weight = 2
		p.Spec.Placement.ReplicaScheduling.WeightPreference.StaticWeightList[1].Weight = 1
		_, err = fc.PolicyV1alpha1().PropagationPolicies(ns).Update(ctx, p, metav1.UpdateOptions{})
		return err == nil, nil
	})
	waitReplicas(t, fc, ns, binding, map[string]int32{"member1": 2, "member2": 1})
	waitWork(t, fc, "member1", ns, binding, func(obj *unstructured.Unstructured) bool { return replicasOf(obj) == 2 })

	// A placement no cluster satisfies is a condition, and what runs stays.
	waitUntil(t, "policy points at a cluster that does not exist", func() (bool, error) {
		p, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Get(ctx, policy.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		p.Spec.Placement.ClusterAffinity.ClusterNames = []string{"nowhere"}
		_, err = fc.PolicyV1alpha1().PropagationPolicies(ns).Update(ctx, p, metav1.UpdateOptions{})
		return err == nil, nil
	})
	waitUntil(t, "binding Scheduled=False with a reason", func() (bool, error) {
		got, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, workv1alpha1.BindingConditionScheduled)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "0/3 clusters are available"), nil
	})
	waitReplicas(t, fc, ns, binding, map[string]int32{"member1": 2, "member2": 1})

	// Deleting the template removes the binding and the Works (the test
	// plays the agent and releases each Work's finalizer).
	if err := fc.WorkV1alpha1().ResourceTemplates(ns).Delete(ctx, "nginx", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "binding and Works gone", func() (bool, error) {
		_, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		for _, cluster := range []string{"member1", "member2"} {
			works, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, w := range works.Items {
				if w.DeletionTimestamp == nil {
					return false, nil
				}
				w.Finalizers = nil
				_, _ = fc.WorkV1alpha1().Works(w.Namespace).Update(ctx, &w, metav1.UpdateOptions{})
				return false, nil
			}
		}
		return true, nil
	})
}

func waitUntil(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 45*time.Second, true,
		func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func waitReplicas(t *testing.T, fc flotillaclient.Interface, ns, name string, want map[string]int32) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("binding %s scheduled as %v", name, want), func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if len(rb.Spec.Clusters) != len(want) {
			return false, nil
		}
		for _, c := range rb.Spec.Clusters {
			if want[c.Name] != c.Replicas {
				return false, nil
			}
		}
		return true, nil
	})
}

func waitWork(t *testing.T, fc flotillaclient.Interface, cluster, ns, binding string, ok func(*unstructured.Unstructured) bool) *workv1alpha1.Work {
	t.Helper()
	var work *workv1alpha1.Work
	waitUntil(t, "Work for "+cluster, func() (bool, error) {
		w, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(context.Background(), workobjects.WorkName(ns, binding), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		work = w
		return ok(manifestOf(t, w)), nil
	})
	return work
}

func manifestOf(t *testing.T, w *workv1alpha1.Work) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(w.Spec.Workload.Manifests[0].Raw); err != nil {
		t.Fatal(err)
	}
	return obj
}

func replicasOf(obj *unstructured.Unstructured) int64 {
	n, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	return n
}

func imageOf(obj *unstructured.Unstructured) string {
	containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		return ""
	}
	img, _, _ := unstructured.NestedString(containers[0].(map[string]any), "image")
	return img
}

// reportApplied writes the status an agent writes after applying the Work.
func reportApplied(t *testing.T, fc flotillaclient.Interface, w *workv1alpha1.Work, replicas int) {
	t.Helper()
	waitUntil(t, "Work status written", func() (bool, error) {
		cur, err := fc.WorkV1alpha1().Works(w.Namespace).Get(context.Background(), w.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		status := fmt.Sprintf(`{"replicas":%d,"readyReplicas":%d,"availableReplicas":%d,"updatedReplicas":%d}`, replicas, replicas, replicas, replicas)
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
			Reason: "Applied", Message: "applied", ObservedGeneration: cur.Generation})
		cur.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{
			Identifier: workv1alpha1.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "default", Name: "nginx"},
			Status:     &runtime.RawExtension{Raw: []byte(status)}, Health: workv1alpha1.ResourceHealthy}}
		_, err = fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// startHub runs the whole hub in process against a fresh apiserver until
// the test ends, and returns a context ending with it and an admin client.
func startHub(t *testing.T) (context.Context, flotillaclient.Interface) {
	return startHubWith(t, nil)
}

// startHubWith is startHub with options changed by tune.
func startHubWith(t *testing.T, tune func(*app.Options)) (context.Context, flotillaclient.Interface) {
	t.Helper()
	_, ctx, fc := startHubEnv(t, tune)
	return ctx, fc
}

// startHubEnv is startHubWith that also returns the control plane, for tests
// that change the API itself.
func startHubEnv(t *testing.T, tune func(*app.Options), envOpts ...testenv.Option) (*testenv.Env, context.Context, flotillaclient.Interface) {
	t.Helper()
	env := testenv.Start(t, envOpts...)
	ctx, cancel := context.WithCancel(context.Background())
	opts := app.NewOptions()
	opts.Kubeconfig = env.KubeconfigFor(t, env.Config)
	opts.LeaderElection.LeaderElect = false
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	// The tests play the agents only where they need them: a new binding's
	// first status waits 1s for reports, not the default 30s (the writes
	// tests measure the default).
	opts.BindingStatusHold = time.Second
	if tune != nil {
		tune(opts)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, opts) }()
	t.Cleanup(func() { cancel(); <-done })
	return env, ctx, flotillaclient.NewForConfigOrDie(env.Config)
}

// An override that changes the object's identity never reaches a Work, even
// when the CRD rule that refuses it is not there: a ClusterOverridePolicy
// stored before the rule existed is not re-validated. The test stores one
// the way an upgrade leaves it (CRD without the rule, policy created, CRD
// with the rule again) and checks that the hub writes nothing for that
// cluster, keeps its existing Work as it was, says why on the binding with
// an event naming the policy, and resumes once the policy is gone.
func TestOverrideChangingIdentityIsRefused(t *testing.T) {
	t.Parallel()
	env, ctx, fc := startHubEnv(t, nil)
	createReadyClusters(t, ctx, fc, "member1", "member2")
	ns := "default"
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings"},"data":{"a":"b"}}`)}}}}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Name: "settings"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}}},
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := workobjects.BindingName("ConfigMap", "settings")
	dataIs := func(v string) func(*unstructured.Unstructured) bool {
		return func(obj *unstructured.Unstructured) bool {
			got, _, _ := unstructured.NestedString(obj.Object, "data", "a")
			return got == v
		}
	}
	waitWork(t, fc, "member1", ns, binding, dataIs("b"))
	waitWork(t, fc, "member2", ns, binding, dataIs("b"))

	bad := &policyv1alpha1.ClusterOverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: "move-to-kube-system"},
		Spec: policyv1alpha1.OverrideSpec{OverrideRules: []policyv1alpha1.RuleWithCluster{{
			TargetCluster: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}},
			Overriders: policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{{
				Path: "/metadata/namespace", Operator: policyv1alpha1.OverriderOpReplace, Value: apiextensionsv1.JSON{Raw: []byte(`"kube-system"`)}}}},
		}}}}
	storeWithoutPlaintextRule(t, env, func() error {
		_, err := fc.PolicyV1alpha1().ClusterOverridePolicies().Create(ctx, bad, metav1.CreateOptions{})
		return err
	})
	// The rule is back (the apiserver takes the restored schema a moment
	// after the CRD update), and the stored policy is still there.
	again := bad.DeepCopy()
	again.Name = "again"
	waitUntil(t, "the restored CRD rule refuses the same policy", func() (bool, error) {
		_, err := fc.PolicyV1alpha1().ClusterOverridePolicies().Create(ctx, again, metav1.CreateOptions{})
		switch {
		case apierrors.IsInvalid(err):
			return true, nil
		case err == nil: // still the relaxed schema: take it back and retry
			return false, fc.PolicyV1alpha1().ClusterOverridePolicies().Delete(ctx, again.Name, metav1.DeleteOptions{})
		default:
			return false, err
		}
	})

	// A template change reaches member1; member2's Work stays as it was.
	waitUntil(t, "template data changed", func() (bool, error) {
		cur, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cur.Spec.Manifest.Raw = []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings"},"data":{"a":"c"}}`)
		_, err = fc.WorkV1alpha1().ResourceTemplates(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
	waitWork(t, fc, "member1", ns, binding, dataIs("c"))
	waitUntil(t, "binding FullyApplied=False OverrideChangedIdentity naming the policy", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionFullyApplied)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "OverrideChangedIdentity" && c.ObservedGeneration == rb.Generation &&
			strings.Contains(c.Message, "member2") && strings.Contains(c.Message, "ClusterOverridePolicy move-to-kube-system: plaintext replace /metadata/namespace"), nil
	})
	w2, err := fc.WorkV1alpha1().Works("flotilla-es-member2").Get(ctx, workobjects.WorkName(ns, binding), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("member2's existing Work must be kept: %v", err)
	}
	if m := manifestOf(t, w2); m.GetNamespace() != ns || !dataIs("b")(m) {
		t.Errorf("member2's Work changed to %s/%s %v; want it left as it was (default, a=b)", m.GetNamespace(), m.GetName(), m.Object["data"])
	}
	waitUntil(t, "Warning event OverrideChangedIdentity naming the policy", func() (bool, error) {
		events, err := env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + binding + ",reason=OverrideChangedIdentity"})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Type == "Warning" && strings.Contains(e.Message, "move-to-kube-system") && strings.Contains(e.Message, `"kube-system"`) {
				return true, nil
			}
		}
		return false, nil
	})

	// Without the policy, member2 catches up.
	if err := fc.PolicyV1alpha1().ClusterOverridePolicies().Delete(ctx, bad.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if m := manifestOf(t, waitWork(t, fc, "member2", ns, binding, dataIs("c"))); m.GetNamespace() != ns {
		t.Errorf("member2's Work namespace %q, want %q", m.GetNamespace(), ns)
	}
}

// storeWithoutPlaintextRule runs create while the ClusterOverridePolicy CRD
// lacks its rule on plaintext paths (as before the rule existed), then puts
// the CRD back as it was.
func storeWithoutPlaintextRule(t *testing.T, env *testenv.Env, create func() error) {
	t.Helper()
	ctx := context.Background()
	crds := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	name := "clusteroverridepolicies.policy.flotilla.io"
	orig, err := crds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setRules := func(from *apiextensionsv1.CustomResourceDefinition) {
		waitUntil(t, "CRD updated", func() (bool, error) {
			cur, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			cur.Spec = *from.Spec.DeepCopy()
			_, err = crds.Update(ctx, cur, metav1.UpdateOptions{})
			return err == nil, nil
		})
	}
	relaxed := orig.DeepCopy()
	for i := range relaxed.Spec.Versions {
		items := relaxed.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"].Properties["overrideRules"].Items.Schema.
			Properties["overriders"].Properties["plaintext"].Items.Schema
		if len(items.XValidations) == 0 {
			t.Fatal("the CRD has no rule on plaintext overriders to relax")
		}
		items.XValidations = nil
	}
	setRules(relaxed)
	waitUntil(t, "the policy stored while the CRD has no rule", func() (bool, error) {
		err := create()
		if err != nil {
			t.Logf("not yet: %v", err)
		}
		return err == nil, nil
	})
	setRules(orig)
}

// The hub re-checks what a template holds, for when the admission policy is
// not there (installed without it, or added after the templates): a
// cluster-scoped kind or another namespace in a ResourceTemplate, a
// namespaced kind in a ClusterResourceTemplate get no binding and a
// condition saying why; a template that turns into such an object keeps its
// existing binding and Works exactly as they were; the host's discovery is
// re-read for a kind installed after the hub started.
func TestDetectorRefusesWhatATemplateMayNotHold(t *testing.T) {
	t.Parallel()
	env, ctx, fc := startHubEnv(t, nil)
	// An install without the template policy.
	if err := env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, "flotilla-template-namespace", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := "default"
	crb := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"settings"},
"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"},"subjects":[{"kind":"Group","name":"system:authenticated"}]}`
	waitUntil(t, "the template policy is gone", func() (bool, error) {
		_, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "probe", crb), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, nil
	})
	createReadyClusters(t, ctx, fc, "member1")
	everything := policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{
			{APIVersion: "v1", Kind: "ConfigMap"}, {APIVersion: "v1", Kind: "Namespace"}, {APIVersion: "example.com/v1", Kind: "Widget"},
			{APIVersion: "example.com/v1", Kind: "Gadget"}, {APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"}},
		Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}},
	}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "everything", Namespace: ns}, Spec: everything}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.PolicyV1alpha1().ClusterPropagationPolicies().Create(ctx, &policyv1alpha1.ClusterPropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "everything"}, Spec: everything}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A ConfigMap is bound and rendered; the hub has read discovery now.
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "settings",
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings"},"data":{"a":"b"}}`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cmBinding := workobjects.BindingName("ConfigMap", "settings")
	waitWork(t, fc, "member1", ns, cmBinding, func(obj *unstructured.Unstructured) bool { return obj.GetKind() == "ConfigMap" })

	refused := func(tmplNS, name, want string) {
		t.Helper()
		waitUntil(t, "template "+name+" refused: "+want, func() (bool, error) {
			var conds []metav1.Condition
			if tmplNS == "" {
				got, err := fc.WorkV1alpha1().ClusterResourceTemplates().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				conds = got.Status.Conditions
			} else {
				got, err := fc.WorkV1alpha1().ResourceTemplates(tmplNS).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				conds = got.Status.Conditions
			}
			c := meta.FindStatusCondition(conds, workobjects.TemplateConditionPropagated)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "ManifestScopeRefused" && strings.Contains(c.Message, want), nil
		})
	}
	noBinding := func(bindingNS, name string) {
		t.Helper()
		var err error
		if bindingNS == "" {
			_, err = fc.WorkV1alpha1().ClusterResourceBindings().Get(ctx, name, metav1.GetOptions{})
		} else {
			_, err = fc.WorkV1alpha1().ResourceBindings(bindingNS).Get(ctx, name, metav1.GetOptions{})
		}
		if !apierrors.IsNotFound(err) {
			t.Errorf("binding %s/%s: want none, got %v", bindingNS, name, err)
		}
	}

	// A cluster-scoped kind in a ResourceTemplate.
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "escalate", crb), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	refused(ns, "escalate", "rbac.authorization.k8s.io/v1 ClusterRoleBinding is cluster-scoped")
	noBinding(ns, workobjects.BindingName("ClusterRoleBinding", "settings"))
	waitUntil(t, "Warning event on the template", func() (bool, error) {
		events, err := env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=escalate,type=Warning"})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if strings.Contains(e.Message, "cluster-scoped") {
				return true, nil
			}
		}
		return false, nil
	})

	// A manifest of another namespace.
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "elsewhere",
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"elsewhere","namespace":"kube-system"}}`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	refused(ns, "elsewhere", `"kube-system" is not the template's namespace "default"`)
	noBinding(ns, workobjects.BindingName("ConfigMap", "elsewhere"))

	// A namespaced kind in a ClusterResourceTemplate.
	crt := &workv1alpha1.ClusterResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "cm"},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"}}`)}}}}
	if _, err := fc.WorkV1alpha1().ClusterResourceTemplates().Create(ctx, crt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	refused("", "cm", "v1 ConfigMap is namespaced")
	noBinding("", workobjects.BindingName("ConfigMap", "cm"))

	// A kind installed on the host after the hub read discovery: found.
	gadgets := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					XPreserveUnknownFields: ptr.To(true)}}}}}}
	if _, err := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, gadgets, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "gadgets served", func() (bool, error) {
		_, err := env.Kube.Discovery().ServerResourcesForGroupVersion("example.com/v1")
		return err == nil, nil
	})
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "gadget",
		`{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g"}}`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	refused(ns, "gadget", "example.com/v1 Gadget is cluster-scoped")

	// A kind the host does not serve at all is not refused by the hub (the
	// member decides; the agent re-checks what it applies).
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "widget",
		`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, fc, ns, workobjects.BindingName("Widget", "w"), map[string]int32{"member1": 0})

	// The bound ConfigMap template turns into a ClusterRoleBinding: refused,
	// and its binding and Work stay exactly as they were.
	waitUntil(t, "settings template turned into a ClusterRoleBinding", func() (bool, error) {
		cur, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cur.Spec.Manifest.Raw = []byte(crb)
		_, err = fc.WorkV1alpha1().ResourceTemplates(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
	refused(ns, "settings", "the existing binding "+cmBinding+" (ConfigMap settings) is kept as it was")
	noBinding(ns, workobjects.BindingName("ClusterRoleBinding", "settings"))
	rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, cmBinding, metav1.GetOptions{})
	if err != nil || rb.DeletionTimestamp != nil || rb.Spec.Resource.Kind != "ConfigMap" {
		t.Fatalf("the existing binding must be kept as it was: %+v %v", rb, err)
	}
	// Resync the binding (a label change is an update event) and check the
	// Work still holds the ConfigMap: the binding controller renders only
	// the object the detector bound.
	// The hub writes the binding too (its status): retry on a conflict
	// from a fresh read.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, cmBinding, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Labels["touch"] = "1"
		_, err = fc.WorkV1alpha1().ResourceBindings(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Second, true, func(ctx context.Context) (bool, error) {
		w, err := fc.WorkV1alpha1().Works("flotilla-es-member1").Get(ctx, workobjects.WorkName(ns, cmBinding), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return manifestOf(t, w).GetKind() != "ConfigMap", nil
	})
	if err == nil {
		t.Fatal("the refused ClusterRoleBinding reached the Work of the old binding")
	}
}

func rtOf(ns, name, manifest string) *workv1alpha1.ResourceTemplate {
	return &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(manifest)}}}}
}
