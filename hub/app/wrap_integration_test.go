package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/hub/app"
	appsv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/apps/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	remedyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/remedy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/scheme"
)

const seedsDir = "../../pkg/wrap/testdata/karmada/"

// The seeds' Karmada YAML, converted by `hub wrap --from-karmada` and
// applied to a real hub, schedules as the seeds say:
//   - seed 000/001 Divided 1:2 → member1 1, member2 2 of 3; member1 fails →
//     member2 runs 3;
//   - seed 001 Duplicated on 2 of member1,2,3,5 → member1 and member2 run 2
//     each; member1 fails → member2 stays, member3 or member5 takes over;
//   - seed 002 application failover → tolerationSeconds 200 and
//     preConditions.delaySeconds 5000 reach the binding; the e2e nginx
//     Deployment, wrapped, runs on both clusters;
//   - seed 003 template + policy + deprecated-form OverridePolicy → member1
//     runs 1 replica, member2 2;
//   - seed 004 Remedy → TrafficControl on a cluster whose DNS fails.
//
// The CRDs' validation accepts every converted object.
func TestWrapKarmadaSeedsOnHub(t *testing.T) {
	t.Parallel()
	var kubeconfig string
	ctx, fc := startHubWith(t, func(o *app.Options) {
		kubeconfig = o.Kubeconfig
		// No agent renews Leases here: keep the clusters out of the health
		// controller's taints for the length of the test.
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	createReadyClusters(t, ctx, fc, "member1", "member2", "member3", "member4", "member5")

	apply := func(ns string, args ...string) {
		t.Helper()
		if ns != "default" {
			if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		out := hubWrap(t, append([]string{"wrap", "--from-karmada", "-n", ns}, args...)...)
		for _, obj := range decodeFlotillaStream(t, out) {
			createFlotilla(ctx, t, fc, obj)
		}
	}
	apply("seed000", "-f", seedsDir+"000-divided-weighted.yaml")
	apply("seed001-duplicated", "-f", seedsDir+"001-duplicated.yaml")
	// Seeds 002 and 003 convert whole since issue 18 (preConditions,
	// dependentOverrides): no --allow-unsupported.
	apply("seed002", "-f", seedsDir+"002-application-failover.yaml", "-f", "../../e2e/testdata/nginx-deployment.yaml")
	apply("default", "-f", seedsDir+"003-template-propagation-override.yaml")
	apply("default", "-f", seedsDir+"004-remedy.yaml")

	const binding = "nginx-deployment"
	waitReplicas(t, fc, "seed000", binding, map[string]int32{"member1": 1, "member2": 2})
	waitReplicas(t, fc, "seed001-duplicated", binding, map[string]int32{"member1": 2, "member2": 2})
	waitReplicas(t, fc, "seed002", binding, map[string]int32{"member1": 3, "member2": 3})
	rb, err := fc.WorkV1alpha1().ResourceBindings("seed002").Get(ctx, binding, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f := rb.Spec.Failover; f == nil || f.Application == nil || f.Application.DecisionConditions.TolerationSeconds == nil ||
		*f.Application.DecisionConditions.TolerationSeconds != 200 ||
		f.Application.PreConditions == nil || f.Application.PreConditions.DelaySeconds == nil || *f.Application.PreConditions.DelaySeconds != 5000 {
		t.Errorf("seed 002 binding failover = %+v, want application failover after 200s, preConditions.delaySeconds 5000", f)
	}
	// Seed 003: "member1 runs 1 pod, member2 runs 2": Duplicated 1 replica,
	// and the OverridePolicy sets 2 on member2.
	waitReplicas(t, fc, "default", binding, map[string]int32{"member1": 1, "member2": 1})
	waitWork(t, fc, "member1", "default", binding, func(o *unstructured.Unstructured) bool { return replicasOf(o) == 1 })
	waitWork(t, fc, "member2", "default", binding, func(o *unstructured.Unstructured) bool { return replicasOf(o) == 2 })

	// Seed 004: DNS fails on member2 → TrafficControl; it recovers → none.
	setConditions(t, fc, "member2", map[string]metav1.ConditionStatus{string(remedyv1alpha1.ServiceDomainNameResolutionReady): metav1.ConditionFalse})
	waitActions(t, fc, "member2", string(remedyv1alpha1.TrafficControl))
	setConditions(t, fc, "member2", map[string]metav1.ConditionStatus{string(remedyv1alpha1.ServiceDomainNameResolutionReady): metav1.ConditionTrue})
	waitActions(t, fc, "member2")

	// member1 fails: a NoExecute taint no policy tolerates.
	waitUntil(t, "member1 tainted", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c.Spec.Taints = append(c.Spec.Taints, corev1.Taint{Key: "example.com/outage", Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: time.Now()}})
		_, err = fc.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
		return err == nil, nil
	})
	waitReplicas(t, fc, "seed000", binding, map[string]int32{"member2": 3})
	waitUntil(t, "seed 001 Duplicated: member2 kept, member3 or member5 added", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("seed001-duplicated").Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var names []string
		for _, c := range rb.Spec.Clusters {
			if c.Replicas != 2 {
				return false, nil
			}
			names = append(names, c.Name)
		}
		slices.Sort(names)
		return slices.Equal(names, []string{"member2", "member3"}) || slices.Equal(names, []string{"member2", "member5"}), nil
	})
}

// hubWrap runs `hub wrap` through the real command and returns its output;
// notes and reports go to the test log.
func hubWrap(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := app.NewHubCommand()
	var stdout, stderr bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	err := cmd.Execute()
	if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Logf("hub %s:\n%s", strings.Join(args, " "), s)
	}
	if err != nil {
		t.Fatalf("hub %s: %v", strings.Join(args, " "), err)
	}
	return stdout.Bytes()
}

// decodeFlotillaStream decodes a YAML stream strictly into Flotilla types.
func decodeFlotillaStream(t *testing.T, data []byte) []runtime.Object {
	t.Helper()
	decoder := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []runtime.Object
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("not a Flotilla object: %v\n%s", err, doc)
		}
		out = append(out, obj)
	}
}

// createFlotilla creates obj with the typed client, as kubectl apply would.
func createFlotilla(ctx context.Context, t *testing.T, fc flotillaclient.Interface, obj runtime.Object) {
	t.Helper()
	var err error
	switch o := obj.(type) {
	case *workv1alpha1.ResourceTemplate:
		_, err = fc.WorkV1alpha1().ResourceTemplates(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *workv1alpha1.ClusterResourceTemplate:
		_, err = fc.WorkV1alpha1().ClusterResourceTemplates().Create(ctx, o, metav1.CreateOptions{})
	case *policyv1alpha1.PropagationPolicy:
		_, err = fc.PolicyV1alpha1().PropagationPolicies(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *policyv1alpha1.OverridePolicy:
		_, err = fc.PolicyV1alpha1().OverridePolicies(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *policyv1alpha1.ClusterPropagationPolicy:
		_, err = fc.PolicyV1alpha1().ClusterPropagationPolicies().Create(ctx, o, metav1.CreateOptions{})
	case *appsv1alpha1.WorkloadRebalancer:
		_, err = fc.AppsV1alpha1().WorkloadRebalancers().Create(ctx, o, metav1.CreateOptions{})
	case *remedyv1alpha1.Remedy:
		_, err = fc.RemedyV1alpha1().Remedies().Create(ctx, o, metav1.CreateOptions{})
	default:
		err = fmt.Errorf("unexpected %T", obj)
	}
	if err != nil {
		t.Fatalf("creating %T: %v", obj, err)
	}
}

// Issue 18: the Karmada fields `hub wrap --from-karmada` now converts are
// accepted by the real CRDs, keep their values, and take effect on a real
// hub:
//   - stateful failover (v1.15 spelling: Directly, application and cluster
//     statePreservation) and the v1.12 spelling (Immediately, Graciously,
//     association) with the proposal's preConditions and
//     blockPredecessorSeconds: created as converted, read back unchanged,
//     copied to the bindings;
//   - propagateDeps + dependentOverrides + conflictResolution: the
//     workload waits for its OverridePolicy (DependentOverridesMissing),
//     then runs 1:2 with the override applied on member2; the Secret wrap
//     noted as missing is reported missing on the binding until it is
//     wrapped too, then every dependency has a Work on both clusters;
//   - a WorkloadRebalancer naming the wrapped Deployment by its native
//     reference is accepted as converted, and succeeds: the reference
//     still names the workload although its template was renamed.
func TestWrapKarmadaIssue18OnHub(t *testing.T) {
	t.Parallel()
	var kubeconfig string
	ctx, fc := startHubWith(t, func(o *app.Options) {
		kubeconfig = o.Kubeconfig
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	for _, ns := range []string{"streaming", "shop"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createReadyClusters(t, ctx, fc, "member1", "member2", "member3")
	convert := func(args ...string) []runtime.Object {
		t.Helper()
		return decodeFlotillaStream(t, hubWrap(t, append([]string{"wrap", "--from-karmada"}, args...)...))
	}

	// Stateful failover, both spellings: what the apiserver stores is what
	// wrap wrote.
	for _, obj := range append(convert("-f", seedsDir+"issue18-stateful-failover.yaml"), convert("-f", seedsDir+"issue18-karmada-v1.12.yaml")...) {
		createFlotilla(ctx, t, fc, obj)
		var got, want any
		switch o := obj.(type) {
		case *policyv1alpha1.PropagationPolicy:
			stored, err := fc.PolicyV1alpha1().PropagationPolicies(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, want = stored.Spec.Failover, o.Spec.Failover
		case *policyv1alpha1.ClusterPropagationPolicy:
			stored, err := fc.PolicyV1alpha1().ClusterPropagationPolicies().Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !stored.Spec.PropagateDeps || stored.Spec.ConflictResolution != policyv1alpha1.ConflictOverwrite {
				t.Errorf("ClusterPropagationPolicy %s: propagateDeps %v, conflictResolution %s", o.Name, stored.Spec.PropagateDeps, stored.Spec.ConflictResolution)
			}
			got, want = stored.Spec.Failover, o.Spec.Failover
		default:
			continue
		}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("%T stored failover\n%s\nwant\n%s", obj, toJSONForWrapTest(got), toJSONForWrapTest(want))
		}
	}
	// The FlinkDeployment's binding carries the state rules; one cluster
	// runs it (Duplicated, spread over exactly one cluster).
	waitUntil(t, "fraud-detector bound with its statePreservation", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("streaming").Get(ctx, "fraud-detector-flinkdeployment", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		f := rb.Spec.Failover
		return len(rb.Spec.Clusters) == 1 && f != nil && f.Application != nil && f.Cluster != nil &&
			f.Application.PurgeMode == policyv1alpha1.PurgeModeDirectly &&
			f.Application.StatePreservation != nil && len(f.Application.StatePreservation.Rules) == 2 &&
			f.Cluster.StatePreservation != nil && f.Cluster.StatePreservation.Rules[0].JSONPath == "{.jobStatus.checkpointPath}", nil
	})

	// propagateDeps, dependentOverrides, conflictResolution: everything
	// but the OverridePolicy first, so the workload is seen waiting for it.
	var override runtime.Object
	for _, obj := range convert("-f", seedsDir+"issue18-propagate-deps.yaml") {
		if op, ok := obj.(*policyv1alpha1.OverridePolicy); ok {
			override = op
			continue
		}
		createFlotilla(ctx, t, fc, obj)
	}
	waitUntil(t, "web waits for its dependent override", func() (bool, error) {
		rt, err := fc.WorkV1alpha1().ResourceTemplates("shop").Get(ctx, "web-deployment", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range rt.Status.Conditions {
			if c.Reason == "DependentOverridesMissing" && c.Status == metav1.ConditionFalse {
				return true, nil
			}
		}
		return false, nil
	})
	if _, err := fc.WorkV1alpha1().ResourceBindings("shop").Get(ctx, "web-deployment", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("web bound before its dependent override exists: %v", err)
	}
	createFlotilla(ctx, t, fc, override)
	waitReplicas(t, fc, "shop", "web-deployment", map[string]int32{"member1": 1, "member2": 2})
	rb, err := fc.WorkV1alpha1().ResourceBindings("shop").Get(ctx, "web-deployment", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rb.Spec.PropagateDeps || rb.Spec.ConflictResolution != policyv1alpha1.ConflictOverwrite {
		t.Errorf("web binding: propagateDeps %v, conflictResolution %s", rb.Spec.PropagateDeps, rb.Spec.ConflictResolution)
	}
	waitWork(t, fc, "member2", "shop", "web-deployment", func(o *unstructured.Unstructured) bool {
		return imageOf(o) == "mirror.example.com/nginx"
	})
	// The Secret wrap noted as missing is missing on the hub too; once it
	// is wrapped, every dependency follows the workload to its clusters.
	waitWebDependencies := func(status metav1.ConditionStatus, messageHas string) {
		t.Helper()
		waitUntil(t, "web DependenciesResolved="+string(status), func() (bool, error) {
			rb, err := fc.WorkV1alpha1().ResourceBindings("shop").Get(ctx, "web-deployment", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			c := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionDependenciesResolved)
			return c != nil && c.Status == status && strings.Contains(c.Message, messageHas), nil
		})
	}
	waitWebDependencies(metav1.ConditionFalse, "web-db")
	const secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: web-db, namespace: shop}\nstringData: {password: hunter2}\n"
	for _, obj := range decodeFlotillaStream(t, hubWrapStdin(t, secret, "wrap", "-f", "-")) {
		createFlotilla(ctx, t, fc, obj)
	}
	waitWebDependencies(metav1.ConditionTrue, "")
	for _, cluster := range []string{"member1", "member2"} {
		for _, dep := range []string{"web-config-configmap", "web-serviceaccount", "web-data-persistentvolumeclaim", "web-db-secret"} {
			waitWork(t, fc, cluster, "shop", dep, func(*unstructured.Unstructured) bool { return true })
		}
	}

	// A WorkloadRebalancer naming the wrapped Deployment as Karmada would
	// (its native reference) is accepted as converted.
	const rebalancer = `apiVersion: apps.karmada.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: web}
spec:
  workloads: [{apiVersion: apps/v1, kind: Deployment, namespace: shop, name: web}]
  ttlSecondsAfterFinished: 600
`
	objs := decodeFlotillaStream(t, hubWrapStdin(t, rebalancer, "wrap", "--from-karmada", "-f", "-"))
	if len(objs) != 1 {
		t.Fatalf("%d objects", len(objs))
	}
	createFlotilla(ctx, t, fc, objs[0])
	// The docs' example too (Karmada's status dropped, a workload without
	// namespace): the CRD accepts it as converted.
	for _, obj := range convert("-f", seedsDir+"issue18-workloadrebalancer.yaml") {
		createFlotilla(ctx, t, fc, obj)
	}
	wr, err := fc.AppsV1alpha1().WorkloadRebalancers().Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []appsv1alpha1.ObjectReference{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}}; !equality.Semantic.DeepEqual(wr.Spec.Workloads, want) ||
		wr.Spec.TTLSecondsAfterFinished == nil || *wr.Spec.TTLSecondsAfterFinished != 600 {
		t.Errorf("WorkloadRebalancer spec %+v", wr.Spec)
	}
	// The native reference still names the workload: the hub finds its
	// binding (the template is web-deployment) and reschedules it.
	waitUntil(t, "the converted WorkloadRebalancer succeeds", func() (bool, error) {
		wr, err := fc.AppsV1alpha1().WorkloadRebalancers().Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ow := wr.Status.ObservedWorkloads
		if len(ow) == 1 && ow[0].Result == appsv1alpha1.RebalanceFailed {
			return false, fmt.Errorf("rebalance failed: %s", ow[0].Reason)
		}
		return len(ow) == 1 && ow[0].Result == appsv1alpha1.RebalanceSuccessful, nil
	})
}

// hubWrapStdin is hubWrap reading standard input.
func hubWrapStdin(t *testing.T, stdin string, args ...string) []byte {
	t.Helper()
	cmd := app.NewHubCommand()
	var stdout, stderr bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("hub %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

func toJSONForWrapTest(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}
