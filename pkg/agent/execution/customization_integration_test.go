package execution

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// widgetEnv is a real apiserver playing hub and member, with a Widget CRD
// (a kind Flotilla has no built-in interpreter for) and the agent's
// execution controller fed by a ResourceInterpreterCustomization informer.
type widgetEnv struct {
	env *testenv.Env
	hub flotillaclient.Interface
	dyn dynamic.Interface
}

func startWidgetEnv(t *testing.T) *widgetEnv {
	t.Helper()
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	hub := flotillaclient.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	md := metadata.NewForConfigOrDie(env.Config)
	ext := apiextensionsclient.NewForConfigOrDie(env.Config)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(widgets).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatal("Widget CRD not served")
	}
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	factory := flotillainformers.NewSharedInformerFactoryWithOptions(hub, 0, flotillainformers.WithNamespace(hubNamespace))
	ricFactory := flotillainformers.NewSharedInformerFactory(hub, 0)
	interpreter := resourceinterpreter.New()
	if err := interpreter.Watch(ricFactory.Config().V1alpha1().ResourceInterpreterCustomizations().Informer()); err != nil {
		t.Fatal(err)
	}
	c := NewController(hub, factory.Work().V1alpha1().Works().Informer(), dyn, md, env.Kube, env.Kube.Discovery(), Options{
		Namespace: hubNamespace, OrphanGracePeriod: time.Hour, Metrics: agentmetrics.New(prometheus.NewRegistry()), Interpreter: interpreter})
	factory.Start(ctx.Done())
	ricFactory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown(); ricFactory.Shutdown() })
	return &widgetEnv{env: env, hub: hub, dyn: dyn}
}

func widget(name string, spec map[string]any) map[string]any {
	return map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec}
}

func (w *widgetEnv) createWork(t *testing.T, name string, objs ...map[string]any) {
	t.Helper()
	work := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hubNamespace, Finalizers: []string{workv1alpha1.ExecutionFinalizer}}}
	work.Spec.Workload.Manifests = manifests(t, objs...)
	if _, err := w.hub.WorkV1alpha1().Works(hubNamespace).Create(context.Background(), work, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitHealth waits for the Work's first manifest to be reported with health.
func (w *widgetEnv) waitHealth(t *testing.T, work string, want workv1alpha1.ResourceHealth, what string) {
	t.Helper()
	var last workv1alpha1.ResourceHealth
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := w.hub.WorkV1alpha1().Works(hubNamespace).Get(ctx, work, metav1.GetOptions{})
		if err != nil || len(got.Status.ManifestStatuses) == 0 {
			return false, nil
		}
		last = got.Status.ManifestStatuses[0].Health
		return last == want, nil
	})
	if err != nil {
		t.Fatalf("Work %s: %s: health %q, want %q", work, what, last, want)
	}
}

func (w *widgetEnv) setRIC(t *testing.T, name string, rules configv1alpha1.CustomizationRules) {
	t.Helper()
	ctx := context.Background()
	client := w.hub.ConfigV1alpha1().ResourceInterpreterCustomizations()
	ric, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		ric = &configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{Target: configv1alpha1.CustomizationTarget{APIVersion: "example.com/v1", Kind: "Widget"},
				Customizations: rules}}
		if _, err := client.Create(ctx, ric, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	ric.Spec.Customizations = rules
	if _, err := client.Update(ctx, ric, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (w *widgetEnv) member(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := w.dyn.Resource(widgets).Namespace("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// TestCustomizedHealth: a kind without an interpreter and without status
// is Unknown, not Healthy; a healthInterpretation customization judges it
// (Unhealthy, then Healthy as its status changes), and an edit of the rule
// is picked up without a restart or a change of the object.
func TestCustomizedHealth(t *testing.T) {
	t.Parallel()
	w := startWidgetEnv(t)
	w.createWork(t, "w", widget("web", map[string]any{"replicas": int64(3)}))
	w.waitHealth(t, "w", workv1alpha1.ResourceUnknown, "no customization, no status")

	w.setRIC(t, "widgets", configv1alpha1.CustomizationRules{HealthInterpretation: &configv1alpha1.HealthInterpretation{
		Expression: `object.?status.?readyReplicas.orValue(0) == object.spec.replicas`}})
	w.waitHealth(t, "w", workv1alpha1.ResourceUnhealthy, "customized, nothing ready")

	obj := w.member(t, "web")
	_ = unstructured.SetNestedField(obj.Object, int64(3), "status", "readyReplicas")
	if _, err := w.dyn.Resource(widgets).Namespace("default").Update(context.Background(), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitHealth(t, "w", workv1alpha1.ResourceHealthy, "customized, all ready")

	// The rule changes; the object does not.
	w.setRIC(t, "widgets", configv1alpha1.CustomizationRules{HealthInterpretation: &configv1alpha1.HealthInterpretation{
		Expression: `object.?status.?readyReplicas.orValue(0) > object.spec.replicas ? "Healthy" : "Unhealthy"`}})
	w.waitHealth(t, "w", workv1alpha1.ResourceUnhealthy, "edited rule")

	// A rule that fails on the object: Unknown, not the old verdict.
	w.setRIC(t, "widgets", configv1alpha1.CustomizationRules{HealthInterpretation: &configv1alpha1.HealthInterpretation{
		Expression: `object.status.phase == "Running"`}})
	w.waitHealth(t, "w", workv1alpha1.ResourceUnknown, "rule failing on the object")

	// The customization goes away: the generic judgement (a status
	// without conditions or observedGeneration: nothing to judge).
	if err := w.hub.ConfigV1alpha1().ResourceInterpreterCustomizations().Delete(context.Background(), "widgets", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.createWork(t, "w2", widget("other", map[string]any{"replicas": int64(1)}))
	w.waitHealth(t, "w2", workv1alpha1.ResourceUnknown, "no customization")
}

// TestRetainedFieldsAreNotDrift: a field the customization retains keeps
// the member's value (a member-side autoscaler's), while drift of any
// other field is repaired in the same sync.
func TestRetainedFieldsAreNotDrift(t *testing.T) {
	t.Parallel()
	w := startWidgetEnv(t)
	w.setRIC(t, "widgets", configv1alpha1.CustomizationRules{Retention: &configv1alpha1.LocalValueRetention{FieldPaths: []string{"/spec/replicas"}}})
	// The customization must be in the agent's cache before the edit
	// below: wait for it through a rule of the same object.
	w.setRIC(t, "widgets", configv1alpha1.CustomizationRules{Retention: &configv1alpha1.LocalValueRetention{FieldPaths: []string{"/spec/replicas"}},
		HealthInterpretation: &configv1alpha1.HealthInterpretation{Expression: `"Healthy"`}})
	w.createWork(t, "w", widget("web", map[string]any{"replicas": int64(3), "color": "blue"}))
	w.waitHealth(t, "w", workv1alpha1.ResourceHealthy, "applied with the customization in use")

	obj := w.member(t, "web")
	_ = unstructured.SetNestedField(obj.Object, int64(7), "spec", "replicas")
	_ = unstructured.SetNestedField(obj.Object, "red", "spec", "color")
	if _, err := w.dyn.Resource(widgets).Namespace("default").Update(context.Background(), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The color is drift: repaired.
	var got *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got = w.member(t, "web")
		color, _, _ := unstructured.NestedString(got.Object, "spec", "color")
		return color == "blue", nil
	})
	if err != nil {
		t.Fatal("drift of spec.color not repaired")
	}
	// The replicas are the member's, in the same repair and after.
	if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); n != 7 {
		t.Fatalf("retained spec.replicas = %d after the repair, want the member's 7", n)
	}
	// A later sync (a new Work generation with another replica count)
	// keeps it too.
	work, err := w.hub.WorkV1alpha1().Works(hubNamespace).Get(context.Background(), "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	work.Labels = map[string]string{"touch": "1"}
	work.Spec.Workload.Manifests = manifests(t, widget("web", map[string]any{"replicas": int64(4), "color": "blue"}))
	if _, err := w.hub.WorkV1alpha1().Works(hubNamespace).Update(context.Background(), work, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := w.hub.WorkV1alpha1().Works(hubNamespace).Get(ctx, "w", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range got.Status.Conditions {
			if c.Type == workv1alpha1.WorkConditionApplied && c.ObservedGeneration == got.Generation && c.Status == metav1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal("new Work generation not applied")
	}
	got = w.member(t, "web")
	if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); n != 7 {
		t.Fatalf("retained spec.replicas = %d after a new generation, want the member's 7", n)
	}
}
