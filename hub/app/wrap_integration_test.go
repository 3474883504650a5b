package app_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/hub/app"
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
//   - seed 002 application failover (with --allow-unsupported: the
//     proposal-only fields dropped) → tolerationSeconds 200 reaches the
//     binding; the e2e nginx Deployment, wrapped, runs on both clusters;
//   - seed 003 template + policy + deprecated-form OverridePolicy → member1
//     runs 1 replica, member2 2;
//   - seed 004 Remedy → TrafficControl on a cluster whose DNS fails.
//
// The CRDs' validation accepts every converted object.
func TestWrapKarmadaSeedsOnHub(t *testing.T) {
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
	apply("seed002", "--allow-unsupported", "-f", seedsDir+"002-application-failover.yaml", "-f", "../../e2e/testdata/nginx-deployment.yaml")
	apply("default", "--allow-unsupported", "-f", seedsDir+"003-template-propagation-override.yaml")
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
		*f.Application.DecisionConditions.TolerationSeconds != 200 {
		t.Errorf("seed 002 binding failover = %+v, want application failover after 200s", f)
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
	case *remedyv1alpha1.Remedy:
		_, err = fc.RemedyV1alpha1().Remedies().Create(ctx, o, metav1.CreateOptions{})
	default:
		err = fmt.Errorf("unexpected %T", obj)
	}
	if err != nil {
		t.Fatalf("creating %T: %v", obj, err)
	}
}
