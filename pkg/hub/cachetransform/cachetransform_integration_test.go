package cachetransform_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/cachetransform"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// The hub writes objects it read from the stripped cache: a real apiserver
// keeps their managedFields, and a template's status write keeps the
// user's last-applied annotation.
func TestWritesFromStrippedCache(t *testing.T) {
	env := testenv.Start(t)
	client := flotillaclient.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const lastApplied = `{"apiVersion":"work.flotilla.io/v1alpha1","kind":"ResourceTemplate"}`
	tmpl := &workv1alpha1.ResourceTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Annotations: map[string]string{cachetransform.AnnotationLastApplied: lastApplied}},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web"}}`)}}},
	}
	if _, err := client.WorkV1alpha1().ResourceTemplates("apps").Create(ctx, tmpl, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
		t.Fatal(err)
	}
	binding := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "web-configmap", Namespace: "apps"},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "web"}}}
	if _, err := client.WorkV1alpha1().ResourceBindings("apps").Create(ctx, binding, metav1.CreateOptions{FieldManager: "detector"}); err != nil {
		t.Fatal(err)
	}

	factory := flotillainformers.NewSharedInformerFactoryWithOptions(client, 0, flotillainformers.WithTransform(cachetransform.Strip))
	templates := factory.Work().V1alpha1().ResourceTemplates()
	bindings := factory.Work().V1alpha1().ResourceBindings()
	templates.Informer()
	bindings.Informer()
	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop with ctx.
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())
	var cachedTmpl *workv1alpha1.ResourceTemplate
	var cachedBinding *workv1alpha1.ResourceBinding
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		cachedTmpl, _ = templates.Lister().ResourceTemplates("apps").Get("web")
		cachedBinding, _ = bindings.Lister().ResourceBindings("apps").Get("web-configmap")
		return cachedTmpl != nil && cachedBinding != nil, nil
	}); err != nil {
		t.Fatal("objects not cached")
	}
	if cachedTmpl.ManagedFields != nil || cachedTmpl.Annotations[cachetransform.AnnotationLastApplied] != "" || cachedBinding.ManagedFields != nil {
		t.Fatalf("cache not stripped: template %+v, binding %+v", cachedTmpl.ObjectMeta, cachedBinding.ObjectMeta)
	}

	// A status write of the stripped template, as the detector makes.
	updatedTmpl := cachedTmpl.DeepCopy()
	updatedTmpl.Status.ObservedGeneration = updatedTmpl.Generation
	if _, err := client.WorkV1alpha1().ResourceTemplates("apps").UpdateStatus(ctx, updatedTmpl, metav1.UpdateOptions{FieldManager: "hub"}); err != nil {
		t.Fatal(err)
	}
	stored, err := client.WorkV1alpha1().ResourceTemplates("apps").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := stored.Annotations[cachetransform.AnnotationLastApplied]; got != lastApplied {
		t.Errorf("template's last-applied annotation after a status write = %q, want it kept", got)
	}
	if !slices.ContainsFunc(stored.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == "kubectl-client-side-apply" }) {
		t.Errorf("template's managedFields lost the creator's entry: %+v", stored.ManagedFields)
	}

	// A spec write of the stripped binding, as the scheduler makes.
	updatedBinding := cachedBinding.DeepCopy()
	updatedBinding.Spec.Clusters = []workv1alpha1.TargetCluster{{Name: "m1"}}
	if _, err := client.WorkV1alpha1().ResourceBindings("apps").Update(ctx, updatedBinding, metav1.UpdateOptions{FieldManager: "scheduler"}); err != nil {
		t.Fatal(err)
	}
	storedBinding, err := client.WorkV1alpha1().ResourceBindings("apps").Get(ctx, "web-configmap", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	managers := map[string]bool{}
	for _, e := range storedBinding.ManagedFields {
		managers[e.Manager] = true
	}
	if !managers["detector"] || !managers["scheduler"] {
		t.Errorf("binding's managedFields after an Update from the stripped cache: managers %v, want detector and scheduler", managers)
	}
}
