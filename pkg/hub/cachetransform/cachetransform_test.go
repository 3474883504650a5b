package cachetransform

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillafake "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
)

func managed() []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)}}
}

func TestStrip(t *testing.T) {
	meta := func(annotations map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "a", Namespace: "ns", ManagedFields: managed(), Annotations: annotations}
	}
	lastApplied := func(extra map[string]string) map[string]string {
		a := map[string]string{AnnotationLastApplied: `{"apiVersion":"work.flotilla.io/v1alpha1"}`}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	for _, tc := range []struct {
		name string
		in   runtime.Object
		// wantAnnotations are the annotations left; managedFields are
		// always dropped.
		wantAnnotations map[string]string
	}{
		{"template: last-applied dropped, the map too",
			&workv1alpha1.ResourceTemplate{ObjectMeta: meta(lastApplied(nil))}, nil},
		{"template: other annotations kept",
			&workv1alpha1.ResourceTemplate{ObjectMeta: meta(lastApplied(map[string]string{"team": "a"}))}, map[string]string{"team": "a"}},
		{"cluster template: last-applied dropped",
			&workv1alpha1.ClusterResourceTemplate{ObjectMeta: meta(lastApplied(nil))}, nil},
		{"template without annotations",
			&workv1alpha1.ResourceTemplate{ObjectMeta: meta(nil)}, nil},
		// The hub Updates bindings and Works from the cache: erasing an
		// annotation there would erase it on the server.
		{"binding: annotations kept",
			&workv1alpha1.ResourceBinding{ObjectMeta: meta(lastApplied(nil))}, lastApplied(nil)},
		{"work: annotations kept",
			&workv1alpha1.Work{ObjectMeta: meta(map[string]string{"work.flotilla.io/cluster": "m1"})}, map[string]string{"work.flotilla.io/cluster": "m1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for round := range 2 { // idempotent
				out, err := Strip(tc.in)
				if err != nil {
					t.Fatal(err)
				}
				m := out.(metav1.Object)
				if m.GetManagedFields() != nil {
					t.Errorf("round %d: managedFields kept: %v", round, m.GetManagedFields())
				}
				if got := m.GetAnnotations(); !reflect.DeepEqual(got, tc.wantAnnotations) {
					t.Errorf("round %d: annotations %v, want %v", round, got, tc.wantAnnotations)
				}
				if m.GetName() != "a" || m.GetNamespace() != "ns" {
					t.Errorf("round %d: identity changed: %s/%s", round, m.GetNamespace(), m.GetName())
				}
			}
		})
	}
}

func TestStripTombstone(t *testing.T) {
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: &workv1alpha1.Work{}}
	out, err := Strip(tomb)
	if err != nil || !reflect.DeepEqual(out, tomb) {
		t.Fatalf("Strip(tombstone) = %v, %v; want it unchanged", out, err)
	}
}

// The factory option applies it: what a lister returns has neither.
func TestStripThroughInformerFactory(t *testing.T) {
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", ManagedFields: managed(),
		Annotations: map[string]string{AnnotationLastApplied: "{}"}}}
	work := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "flotilla-es-m1", ManagedFields: managed()}}
	client := flotillafake.NewSimpleClientset(tmpl, work)
	factory := flotillainformers.NewSharedInformerFactoryWithOptions(client, 0, flotillainformers.WithTransform(Strip))
	templates := factory.Work().V1alpha1().ResourceTemplates()
	works := factory.Work().V1alpha1().Works()
	templates.Informer()
	works.Informer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop with ctx.
	defer func() { cancel(); factory.Shutdown() }()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v not synced", typ)
		}
	}
	gotTmpl, err := templates.Lister().ResourceTemplates("ns").Get("a")
	if err != nil {
		t.Fatal(err)
	}
	if gotTmpl.ManagedFields != nil || gotTmpl.Annotations != nil {
		t.Errorf("cached template keeps managedFields %v / annotations %v", gotTmpl.ManagedFields, gotTmpl.Annotations)
	}
	gotWork, err := works.Lister().Works("flotilla-es-m1").Get("w")
	if err != nil {
		t.Fatal(err)
	}
	if gotWork.ManagedFields != nil {
		t.Errorf("cached Work keeps managedFields %v", gotWork.ManagedFields)
	}
}

func TestCompactInterns(t *testing.T) {
	work := func(name string) *workv1alpha1.Work {
		return &workv1alpha1.Work{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: string([]byte("flotilla-es-m1")), ManagedFields: managed(),
				Labels:      map[string]string{string([]byte("work.flotilla.io/binding-uid")): name + "-uid"},
				Annotations: map[string]string{string([]byte("work.flotilla.io/cluster")): string([]byte("m1"))},
				Finalizers:  []string{string([]byte("flotilla.io/execution"))}},
			Status: workv1alpha1.WorkStatus{
				Conditions: []metav1.Condition{{Type: string([]byte("Applied")), Status: metav1.ConditionStatus([]byte("True")),
					Reason: string([]byte("AppliedSuccessful")), Message: string([]byte("1 manifests applied"))}},
				ManifestStatuses: []workv1alpha1.ManifestStatus{{Identifier: workv1alpha1.ResourceIdentifier{
					Group: string([]byte("apps")), Version: string([]byte("v1")), Kind: string([]byte("Deployment")), Name: name},
					Health: workv1alpha1.ResourceHealth([]byte("Healthy"))}},
			},
		}
	}
	a, b := work("a"), work("b")
	want := a.DeepCopy()
	want.ManagedFields = nil
	for _, w := range []*workv1alpha1.Work{a, b} {
		if _, err := Compact(w); err != nil {
			t.Fatal(err)
		}
	}
	if !apiequality.Semantic.DeepEqual(a, want) {
		t.Fatalf("Compact changed the Work's content:\n got %+v\nwant %+v", a, want)
	}
	same := func(what, x, y string) {
		t.Helper()
		if unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s not shared: %q", what, x)
		}
	}
	same("namespace", a.Namespace, b.Namespace)
	same("finalizer", a.Finalizers[0], b.Finalizers[0])
	same("annotation value", a.Annotations["work.flotilla.io/cluster"], b.Annotations["work.flotilla.io/cluster"])
	same("condition reason", a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason)
	same("condition message", a.Status.Conditions[0].Message, b.Status.Conditions[0].Message)
	same("identifier kind", a.Status.ManifestStatuses[0].Identifier.Kind, b.Status.ManifestStatuses[0].Identifier.Kind)
	same("health", string(a.Status.ManifestStatuses[0].Health), string(b.Status.ManifestStatuses[0].Health))
	for k := range a.Labels {
		for k2 := range b.Labels {
			same("label key", k, k2)
		}
	}
}

// A long string is left alone: rarely shared, costly to hash.
func TestInternSkipsLongStrings(t *testing.T) {
	long := strings.Repeat("x", maxInterned+1)
	if got := intern(long); unsafe.StringData(got) != unsafe.StringData(long) {
		t.Error("a long string was interned")
	}
	if intern("") != "" {
		t.Error(`intern("") != ""`)
	}
}
